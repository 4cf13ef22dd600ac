//! `serve`: N worker threads, each with its own single-threaded tokio runtime
//! and its own `SO_REUSEPORT` listener, serving HTTP/1.1 with keep-alive
//! through hyper. Every request builds its object graph with the mode's
//! pointer family ([`crate::graph::handle`]). `--runtime work-stealing` runs
//! [`crate::worksteal`] instead.
//!
//! Connections are accepted and served by [`crate::conn`] (the connection
//! cap, accept backoff, timeouts and body drain), shared with the
//! work-stealing runtime. At start the server raises `RLIMIT_NOFILE` to the
//! hard limit; the connection cap defaults to what that allows.
//!
//! Shutdown: the main thread waits for Ctrl-C, SIGTERM or SIGHUP, tells the
//! workers, and each worker stops accepting, lets its connections finish the
//! request they are on (graceful shutdown, bounded by [`GRACE`]) and exits.
//! Nothing on the server path panics when stdout or stderr is gone
//! ([`mod@crate::log`]).

use std::cell::Cell;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use clap::Args;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use tokio::sync::{mpsc, watch};

use crate::conn::{self, Guard, Limits};
use crate::family::{Family, GcAllCyclicFamily, GcFamily, RcFamily, WeakRcFamily};
use crate::graph;
use crate::hubs::Hubs;
use crate::mode::{Mode, Runtime};
use crate::stats::{self, ServerStats, StatsQuery, ThreadStats};

/// How long connections get to finish once shutdown starts.
pub(crate) const GRACE: Duration = Duration::from_secs(2);

/// Arguments of `serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Memory management of the request path.
    #[arg(long, value_enum, default_value_t = Mode::Orc)]
    pub mm: Mode,
    /// Worker threads (each with its own runtime and listener).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: u16,
    /// Port to listen on (0 picks a free one, printed on stdout).
    #[arg(long, default_value_t = 8070)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Per-thread runtimes with single-threaded pointers, or one
    /// work-stealing runtime with the thread-safe `recycler::sync` pointers.
    #[arg(long, value_enum, default_value_t = Runtime::PerThread)]
    pub runtime: Runtime,
    /// Time a client gets to send a request head: from its first byte, or
    /// from the connection's start for the first request.
    #[arg(long, default_value = "10s", value_parser = crate::parse_positive_duration)]
    pub header_timeout: Duration,
    /// Time a connection may stay without traffic (between requests, or in
    /// a request whose body or response does not move).
    #[arg(long, default_value = "60s", value_parser = crate::parse_positive_duration)]
    pub idle_timeout: Duration,
    /// Connections open at once; more are answered 503 and closed
    /// [default: the RLIMIT_NOFILE soft limit, raised to the hard limit, minus 64 and
    /// 8 per thread].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,
    /// Do not call `malloc_trim` after a burst of connections (glibc then
    /// keeps the memory the burst used, about 200 MiB per 10,000).
    #[arg(long)]
    pub no_malloc_trim: bool,
    /// Nim 1.6.12 defects of `--mm orc-nim16-faithful`: all, none, or a list
    /// of all-cyclic, shared-threshold, locked-alloc.
    #[arg(long, default_value = "all", value_parser = crate::mode::Defects::parse)]
    pub nim16_defects: crate::mode::Defects,
}

impl ServeArgs {
    /// The connection guard for these arguments; raises `RLIMIT_NOFILE`.
    fn guard(&self) -> anyhow::Result<Arc<Guard>> {
        let nofile = crate::sys::raise_nofile_limit().context("cannot read RLIMIT_NOFILE")?;
        if self.header_timeout.is_zero() || self.idle_timeout.is_zero() {
            anyhow::bail!("--header-timeout and --idle-timeout must be longer than 0");
        }
        let limits = Limits {
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self
                .max_connections
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            malloc_trim: !self.no_malloc_trim,
        };
        Ok(Arc::new(Guard::new(limits, nofile, self.threads)))
    }
}

/// What every worker shares.
struct Shared {
    mode: Mode,
    started: Instant,
    peers: Vec<mpsc::UnboundedSender<StatsQuery>>,
    guard: Arc<Guard>,
}

/// Runs the server until Ctrl-C, SIGTERM or SIGHUP.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    crate::mode::select(args.mm, args.nim16_defects);
    let guard = args.guard()?;
    match args.runtime {
        Runtime::PerThread => run_per_thread(args, guard),
        Runtime::WorkStealing => crate::worksteal::run(args, guard),
    }
}

/// The signals that stop the server: SIGINT (Ctrl-C), SIGTERM, and SIGHUP
/// (a closed terminal, or a supervisor's "reload", which this server has
/// nothing to reload for), all with the same graceful shutdown.
pub(crate) struct Signals([tokio::signal::unix::Signal; 3]);

impl Signals {
    /// Installs the handlers (in `runtime`'s context).
    pub(crate) fn install(runtime: &tokio::runtime::Runtime) -> anyhow::Result<Signals> {
        runtime
            .block_on(async {
                use tokio::signal::unix::{signal, SignalKind};
                anyhow::Ok(Signals([
                    signal(SignalKind::interrupt())?,
                    signal(SignalKind::terminate())?,
                    signal(SignalKind::hangup())?,
                ]))
            })
            .context("cannot install the signal handlers")
    }

    /// Waits for the first of the signals; returns its name.
    pub(crate) async fn recv(&mut self) -> &'static str {
        let [int, term, hup] = &mut self.0;
        tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
            _ = hup.recv() => "SIGHUP",
        }
    }
}

/// Prints the line `compare` and the tests wait for.
pub(crate) fn print_listening(addr: std::net::SocketAddr, args: &ServeArgs) {
    let runtime = match args.runtime {
        Runtime::PerThread => String::new(),
        Runtime::WorkStealing => ", work-stealing runtime".to_owned(),
    };
    // A closed stdout is no reason not to serve.
    crate::log::stdout_line(format_args!(
        "listening on http://{addr} (mm {}, {} threads{runtime})",
        args.mm, args.threads
    ));
}

/// The hyper response for a reply whose body is final.
pub(crate) fn http_response(status: u16, body: String) -> hyper::Response<Full<Bytes>> {
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if status == 405 {
        // Every route answers GET and HEAD only (RFC 9110, 15.5.6).
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    response
}

fn run_per_thread(args: &ServeArgs, guard: Arc<Guard>) -> anyhow::Result<()> {
    let threads = usize::from(args.threads);
    let listeners = crate::listen::bind(args.host, args.port, threads)?;
    let addr = listeners[0].local_addr()?;

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut inboxes = Vec::with_capacity(threads);
    let mut peers = Vec::with_capacity(threads);
    for _ in 0..threads {
        let (tx, rx) = mpsc::unbounded_channel();
        peers.push(tx);
        inboxes.push(rx);
    }
    let shared = Arc::new(Shared {
        mode: args.mm,
        started: Instant::now(),
        peers,
        guard,
    });

    // Signal handlers first, so a SIGTERM right after the "listening" line
    // already means a clean shutdown.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut signals = Signals::install(&runtime)?;

    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(usize, anyhow::Result<()>)>();
    let mut workers = Vec::with_capacity(threads);
    for (index, (listener, inbox)) in listeners.into_iter().zip(inboxes).enumerate() {
        let shared = shared.clone();
        let shutdown = shutdown_rx.clone();
        let done = done_tx.clone();
        let worker = std::thread::Builder::new()
            .name(format!("worker-{index}"))
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_worker(index, listener, inbox, shared, shutdown)
                }))
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the worker thread panicked")));
                let _ = done.send((index, result));
            })
            .context("cannot start a worker thread")?;
        workers.push(worker);
    }
    drop(done_tx);

    print_listening(addr, args);

    // Run until a signal, or until a worker stops by itself (an error).
    let first_exit = runtime.block_on(async {
        tokio::select! {
            name = signals.recv() => {
                crate::log!("{name}: shutting down");
                None
            }
            exit = done_rx.recv() => exit,
        }
    });
    let _ = shutdown_tx.send(true);
    let mut result = Ok(());
    if let Some((index, Err(e))) = first_exit {
        result = Err(e.context(format!("worker {index} failed")));
    }
    for worker in workers {
        // Panics were caught in the thread and reported through `done`.
        let _ = worker.join();
    }
    while let Ok((index, r)) = done_rx.try_recv() {
        if let Err(e) = r {
            if result.is_ok() {
                result = Err(e.context(format!("worker {index} failed")));
            }
        }
    }
    result
}

/// One worker thread: sets the collection policy, builds the hubs, serves.
fn run_worker(
    index: usize,
    listener: std::net::TcpListener,
    inbox: mpsc::UnboundedReceiver<StatsQuery>,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    shared.mode.apply_policy();
    let all_cyclic = shared.mode.defects(crate::mode::selected()).all_cyclic;
    match shared.mode {
        Mode::ArcWeak => local.block_on(
            &runtime,
            serve::<WeakRcFamily>(index, listener, inbox, shared, shutdown),
        ),
        Mode::Arc => local.block_on(
            &runtime,
            serve::<RcFamily>(index, listener, inbox, shared, shutdown),
        ),
        Mode::OrcNim16Faithful if all_cyclic => local.block_on(
            &runtime,
            serve::<GcAllCyclicFamily>(index, listener, inbox, shared, shutdown),
        ),
        Mode::OrcNim16 | Mode::OrcNim16Faithful | Mode::Orc => local.block_on(
            &runtime,
            serve::<GcFamily>(index, listener, inbox, shared, shutdown),
        ),
    }
}

/// Per-thread state the connections share.
struct Worker<F: Family> {
    index: usize,
    hubs: Hubs<F>,
    requests: Cell<u64>,
    shared: Arc<Shared>,
}

impl<F: Family> Worker<F> {
    fn thread_stats(&self) -> ThreadStats {
        ThreadStats::current(
            self.index,
            self.requests.get(),
            self.hubs.in_flight() as u64,
        )
    }
}

async fn serve<F: Family>(
    index: usize,
    listener: std::net::TcpListener,
    mut inbox: mpsc::UnboundedReceiver<StatsQuery>,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let worker = Rc::new(Worker::<F> {
        index,
        hubs: Hubs::new(),
        requests: Cell::new(0),
        shared,
    });
    {
        let worker = worker.clone();
        tokio::task::spawn_local(async move {
            while let Some(reply) = inbox.recv().await {
                let _ = reply.send(worker.thread_stats());
            }
        });
    }
    let guard = worker.shared.guard.clone();
    conn::accept_loop(listener, &guard, shutdown, |stream, permit, graceful| {
        let worker = worker.clone();
        let handler = move |req| respond(worker.clone(), req);
        tokio::task::spawn_local(conn::serve(
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

async fn respond<F: Family>(
    worker: Rc<Worker<F>>,
    req: hyper::Request<()>,
) -> hyper::Response<Full<Bytes>> {
    let reply = graph::handle(
        &worker.hubs,
        req.method().as_str(),
        req.uri().path(),
        req.headers()
            .iter()
            .map(|(k, v)| (k.as_str(), v.to_str().unwrap_or(""))),
    );
    worker.requests.set(worker.requests.get() + 1);
    let body = if reply.stats {
        stats_body(&worker).await
    } else {
        reply.body
    };
    http_response(reply.status, body)
}

async fn stats_body<F: Family>(worker: &Worker<F>) -> String {
    let shared = &worker.shared;
    let threads = stats::gather(&shared.peers, Duration::from_secs(1)).await;
    let cpu = crate::sys::process_cpu_times().unwrap_or_default();
    let s = ServerStats {
        mode: shared.mode,
        runtime: Runtime::PerThread,
        pointer: F::NAME.to_owned(),
        policy: shared.mode.policy().map(|p| format!("{p:?}")),
        document_nodes: worker.hubs.app.document_nodes,
        allocator: crate::locked_alloc::active(),
        total: ThreadStats::sum(&threads),
        threads,
        rss_bytes: crate::procfs::rss_bytes(None).unwrap_or(0),
        cpu_s: cpu.total().as_secs_f64(),
        user_cpu_s: cpu.user.as_secs_f64(),
        uptime_s: shared.started.elapsed().as_secs_f64(),
        connections: shared.guard.stats(),
        heap_lock: crate::locked_alloc::counts(),
        heap: crate::sys::heap_stats(),
    };
    serde_json::to_string(&s).unwrap_or_else(|e| format!(r#"{{"error":"{e}"}}"#))
}
