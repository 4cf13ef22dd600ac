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
//! Shutdown: on Ctrl-C or SIGTERM every accept task stops accepting, lets its
//! connections finish the request they are on (bounded by
//! [`GRACE`]) and returns; then the runtime is dropped.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::family::{Family, SyncGcAllCyclicFamily, SyncGcFamily, SyncRcFamily, SyncWeakRcFamily};
use crate::graph;
use crate::hubs::Hubs;
use crate::mode::{Mode, Runtime};
use crate::server::{self, ServeArgs, Signals, GRACE};
use crate::stats::{ServerStats, ThreadStats};

/// Runs the work-stealing server until Ctrl-C or SIGTERM.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let threads = usize::from(args.threads);
    let listeners = crate::listen::bind(args.host, args.port, threads)?;
    let mode = args.mm;
    mode.apply_sync_policy();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("worker")
        .on_thread_start(move || mode.apply_sync_policy())
        .enable_all()
        .build()?;
    // Signal handlers first, so a SIGTERM right after the "listening" line
    // already means a clean shutdown.
    let signals = server::install_signals(&runtime)?;
    match mode {
        Mode::ArcWeak => runtime.block_on(serve::<SyncWeakRcFamily>(args, listeners, signals)),
        Mode::Arc => runtime.block_on(serve::<SyncRcFamily>(args, listeners, signals)),
        Mode::OrcNim16Faithful if mode.defects(args.nim16_defects).all_cyclic => {
            runtime.block_on(serve::<SyncGcAllCyclicFamily>(args, listeners, signals))
        }
        Mode::OrcNim16 | Mode::OrcNim16Faithful | Mode::Orc => {
            runtime.block_on(serve::<SyncGcFamily>(args, listeners, signals))
        }
    }
}

/// What every connection shares.
struct Server<F: Family> {
    mode: Mode,
    started: Instant,
    hubs: Hubs<F>,
    requests: AtomicU64,
}

async fn serve<F: Family>(
    args: &ServeArgs,
    listeners: Vec<std::net::TcpListener>,
    (mut sigint, mut sigterm): Signals,
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
    });
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut acceptors = JoinSet::new();
    for (index, listener) in listeners.into_iter().enumerate() {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        acceptors.spawn(accept(index, listener, server.clone(), shutdown_rx.clone()));
    }
    server::print_listening(addr, args)?;

    // Run until a signal, or until an accept task stops by itself.
    let first_exit = tokio::select! {
        _ = sigint.recv() => None,
        _ = sigterm.recv() => None,
        exit = acceptors.join_next() => exit,
    };
    eprintln!("shutting down");
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
    index: usize,
    listener: tokio::net::TcpListener,
    server: Arc<Server<F>>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()>
where
    Hubs<F>: Send + Sync,
{
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    // Out of descriptors or a connection reset before accept:
                    // keep serving the others.
                    Err(e) => {
                        eprintln!("listener {index}: accept failed: {e}");
                        tokio::task::yield_now().await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let server = server.clone();
                let service = service_fn(move |req| {
                    let response = respond(&server, &req);
                    async move { Ok::<_, Infallible>(response) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    // Errors here are the client's (reset, malformed request
                    // already answered with 400): nothing to do but close.
                    let _ = conn.await;
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(GRACE, graceful.shutdown()).await;
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
    let s = ServerStats {
        mode: server.mode,
        runtime: Runtime::WorkStealing,
        pointer: F::NAME.to_owned(),
        policy: server.mode.policy().map(|p| format!("{p:?}")),
        document_nodes: server.hubs.app.document_nodes,
        threads: Vec::new(),
        total: ThreadStats::process_wide(
            server.requests.load(Relaxed),
            server.hubs.in_flight() as u64,
        ),
        rss_bytes: crate::procfs::rss_bytes(None).unwrap_or(0),
        cpu_s: crate::sys::process_cpu_time().map_or(0.0, |d| d.as_secs_f64()),
        uptime_s: server.started.elapsed().as_secs_f64(),
    };
    serde_json::to_string(&s).unwrap_or_else(|e| format!(r#"{{"error":"{e}"}}"#))
}
