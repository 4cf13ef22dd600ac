//! `serve --runtime work-stealing`: one tokio multi-thread runtime with
//! `--threads` workers, serving with the thread-safe pointers.
//!
//! Listening: the same `SO_REUSEPORT` listeners as the per-thread runtime,
//! one per worker ([`crate::listen::bind`]), each accepted by its own task on
//! the shared runtime. The kernel spreads incoming connections over the
//! listeners, so no single accept task is a bottleneck, and every connection
//! task can then be stolen by any worker. (One listener would also work; it
//! makes one task accept everything and leaves the spreading to stealing.)
//!
//! The request path is [`crate::graph::handle`], the same code as on the
//! per-thread runtime, over [`SyncRcFamily`] (`--mm arc`) or
//! [`SyncGcFamily`] (`--mm orc-nim16`, `--mm orc`). The hubs are built once
//! and shared by every worker (see [`crate::hubs`] for what that changes).
//! Each worker thread sets the mode's `recycler::sync` policy when it starts
//! (`on_thread_start`); so does the main thread, which builds the hubs. The
//! collector's statistics are process-wide, so `/stats` reports them as the
//! total, with no per-thread rows.
//!
//! Connections are accepted and served by [`crate::conn`], the same code as
//! on the per-thread runtime (cap, backoff, timeouts, body drain); only the
//! spawn differs (`tokio::spawn`: any worker may poll the connection).
//!
//! Shutdown: on Ctrl-C, SIGTERM or SIGHUP every accept task stops accepting,
//! lets its connections finish the request they are on (bounded by
//! [`crate::server::GRACE`]) and returns; then the runtime is dropped.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use bytes::Bytes;
use http_body_util::Full;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::conn::{self, Guard};
use crate::family::{Family, SyncGcAllCyclicFamily, SyncGcFamily, SyncRcFamily, SyncWeakRcFamily};
use crate::graph;
use crate::hubs::Hubs;
use crate::mode::{Mode, Runtime};
use crate::server::{self, ServeArgs, Signals};
use crate::stats::{ServerStats, ThreadStats};

/// Runs the work-stealing server until Ctrl-C, SIGTERM or SIGHUP.
pub fn run(args: &ServeArgs, guard: Arc<Guard>) -> anyhow::Result<()> {
    let threads = usize::from(args.threads);
    let listeners = crate::listen::bind(args.host, args.port, threads)?;
    let mode = args.mm;
    mode.apply_sync_policy();
    // Where `recycler::sync`'s automatic collections run: on the worker
    // that finds one due (the default) or on its collector thread.
    match std::env::var("RECYCLER_SYNC_COLLECTOR").as_deref() {
        Ok("thread") => recycler::sync::set_collector_mode(recycler::sync::CollectorMode::Thread),
        Ok("mutators") | Err(std::env::VarError::NotPresent) => {}
        Ok(other) => {
            anyhow::bail!("RECYCLER_SYNC_COLLECTOR must be `mutators` or `thread`, not {other:?}")
        }
        Err(e) => anyhow::bail!("RECYCLER_SYNC_COLLECTOR: {e}"),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("worker")
        .on_thread_start(move || mode.apply_sync_policy())
        .enable_all()
        .build()?;
    // Signal handlers first, so a SIGTERM right after the "listening" line
    // already means a clean shutdown.
    let signals = Signals::install(&runtime)?;
    match mode {
        Mode::ArcWeak => {
            runtime.block_on(serve::<SyncWeakRcFamily>(args, guard, listeners, signals))
        }
        Mode::Arc => runtime.block_on(serve::<SyncRcFamily>(args, guard, listeners, signals)),
        Mode::OrcNim16Faithful if mode.defects(args.nim16_defects).all_cyclic => runtime.block_on(
            serve::<SyncGcAllCyclicFamily>(args, guard, listeners, signals),
        ),
        Mode::OrcNim16 | Mode::OrcNim16Faithful | Mode::Orc => {
            runtime.block_on(serve::<SyncGcFamily>(args, guard, listeners, signals))
        }
    }
}

/// What every connection shares.
struct Server<F: Family> {
    mode: Mode,
    started: Instant,
    hubs: Hubs<F>,
    requests: AtomicU64,
    guard: Arc<Guard>,
}

async fn serve<F: Family>(
    args: &ServeArgs,
    guard: Arc<Guard>,
    listeners: Vec<std::net::TcpListener>,
    mut signals: Signals,
) -> anyhow::Result<()>
where
    Hubs<F>: Send + Sync,
{
    let addr = listeners[0].local_addr()?;
    let server = Arc::new(Server::<F> {
        mode: args.mm,
        started: Instant::now(),
        hubs: Hubs::new(),
        requests: AtomicU64::new(0),
        guard,
    });
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut acceptors = JoinSet::new();
    for listener in listeners {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        acceptors.spawn(accept(listener, server.clone(), shutdown_rx.clone()));
    }
    server::print_listening(addr, args);

    // Run until a signal, or until an accept task stops by itself.
    let first_exit = tokio::select! {
        name = signals.recv() => {
            crate::log!("{name}: shutting down");
            None
        }
        exit = acceptors.join_next() => exit,
    };
    let _ = shutdown_tx.send(true);
    let mut result = Ok(());
    let mut note = |exit: Result<anyhow::Result<()>, tokio::task::JoinError>| {
        let error = match exit {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e,
            Err(e) => anyhow!("an accept task failed: {e}"),
        };
        if result.is_ok() {
            result = Err(error);
        }
    };
    if let Some(exit) = first_exit {
        note(exit);
    }
    while let Some(exit) = acceptors.join_next().await {
        note(exit);
    }
    result
}

/// Accepts connections on one listener until shutdown.
async fn accept<F: Family>(
    listener: tokio::net::TcpListener,
    server: Arc<Server<F>>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()>
where
    Hubs<F>: Send + Sync,
{
    let guard = server.guard.clone();
    conn::accept_loop(listener, &guard, shutdown, |stream, permit, graceful| {
        let server = server.clone();
        let handler = move |req| std::future::ready(respond(&server, &req));
        tokio::spawn(conn::serve(
            guard.clone(),
            stream,
            permit,
            graceful,
            handler,
        ));
    })
    .await;
    Ok(())
}

/// Answers one request. Synchronous: the request's object graph is built and
/// dropped on the worker that polls this connection.
fn respond<F: Family, B>(
    server: &Server<F>,
    req: &hyper::Request<B>,
) -> hyper::Response<Full<Bytes>> {
    let reply = graph::handle(
        &server.hubs,
        req.method().as_str(),
        req.uri().path(),
        req.headers()
            .iter()
            .map(|(k, v)| (k.as_str(), v.to_str().unwrap_or(""))),
    );
    server.requests.fetch_add(1, Relaxed);
    let body = if reply.stats {
        stats_body(server)
    } else {
        reply.body
    };
    server::http_response(reply.status, body)
}

fn stats_body<F: Family>(server: &Server<F>) -> String {
    let cpu = crate::sys::process_cpu_times().unwrap_or_default();
    let s = ServerStats {
        mode: server.mode,
        runtime: Runtime::WorkStealing,
        pointer: F::NAME.to_owned(),
        policy: server.mode.policy().map(|p| format!("{p:?}")),
        document_nodes: server.hubs.app.document_nodes,
        allocator: crate::locked_alloc::active(),
        threads: Vec::new(),
        total: ThreadStats::process_wide(
            server.requests.load(Relaxed),
            server.hubs.in_flight() as u64,
        ),
        rss_bytes: crate::procfs::rss_bytes(None).unwrap_or(0),
        cpu_s: cpu.total().as_secs_f64(),
        user_cpu_s: cpu.user.as_secs_f64(),
        uptime_s: server.started.elapsed().as_secs_f64(),
        connections: server.guard.stats(),
        heap_lock: crate::locked_alloc::counts(),
        heap: crate::sys::heap_stats(),
    };
    serde_json::to_string(&s).unwrap_or_else(|e| format!(r#"{{"error":"{e}"}}"#))
}
