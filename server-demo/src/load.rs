//! `load`: a closed-loop HTTP/1.1 load generator, like bombardier.
//!
//! `connections` keep-alive connections, spread over `threads` OS threads
//! (each with a single-threaded tokio runtime), each with exactly one request
//! in flight: a connection sends its next request as soon as the previous
//! response has been read completely. Latencies go into an HDR histogram (µs).
//! A connection that fails is counted as an error and reopened. At the
//! deadline every connection stops; a request cut short by the deadline is
//! neither a response nor an error.
//!
//! With a *rate* (`--rate`), each connection instead sends on a schedule,
//! one request every `connections / rate` seconds (the connections offset
//! evenly), still one in flight at a time: a connection that falls behind
//! sends at once and restarts its schedule from then, so the load never
//! exceeds the rate and a server that keeps up serves exactly it. Closed
//! loop, a server saturates and shares the CPUs with its client in a
//! proportion that depends on its own speed (on a 2-vCPU loopback, a slower
//! server leaves the client idle, and pays for waking it at every
//! response); at one rate both servers of a comparison see the same client.
//! Latencies are measured from the send, not from the scheduled time.
//!
//! The load threads run under `SCHED_BATCH` unless told otherwise
//! (`--sched normal`, [`ClientSched`]): a thread woken by a response then
//! waits until the running thread blocks or its time slice ends instead of
//! preempting it. On a loopback where client and server share the CPUs, a
//! normally scheduled client preempts the server at its wake-ups, and the
//! slower of two servers, which leaves its client idle more often, is
//! preempted more often (2 vCPUs, 256 connections: 57 involuntary context
//! switches of the server per 1,000 requests for orc/ws against 18 for
//! arc-weak/ws; 6.9 and 6.7 with a batch client), which it pays for in
//! the kernel and in a cache that the client has used meanwhile. A remote
//! client does neither, so a measuring client should not either.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use clap::Args;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper::Uri;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};

/// Arguments of `load`.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// URL to load (http only), e.g. http://127.0.0.1:8070/
    #[arg(long)]
    pub url: String,
    /// Concurrent keep-alive connections, one request in flight on each.
    #[arg(long, short = 'c', default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub connections: u32,
    /// How long to load, e.g. 10s, 1m.
    #[arg(long, short = 'd', default_value = "10s", value_parser = crate::parse_positive_duration)]
    pub duration: Duration,
    /// Load-generator threads.
    #[arg(long, short = 't', default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
    /// Send at most this many requests per second in all, on a schedule
    /// (default: closed loop, as fast as the server answers).
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// How the load threads are scheduled: `batch` never preempts the
    /// server when a response wakes a load thread (see the module docs).
    #[arg(long, value_enum, default_value = "batch")]
    pub sched: ClientSched,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Instead of loading, attack as hostile clients would (see
    /// `server-demo/README-section.md`, "Hostile clients"): -c connections
    /// for -d, with a well-behaved probe alongside.
    #[arg(long, value_enum)]
    pub attack: Option<crate::attack::Attack>,
}

/// The scheduling policy of the load threads (Linux's `sched(7)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientSched {
    /// `SCHED_BATCH`: a load thread woken by a response does not preempt the
    /// thread that is running (the server's, on a shared loopback); it runs
    /// at the scheduler's next decision, with its usual share of the CPU.
    Batch,
    /// The policy the process runs under, left alone: `SCHED_OTHER` unless
    /// it was started under another (as `wrk` or `oha` run): a woken load
    /// thread may preempt the server. The servers that `ab` and `compare`
    /// start are children of their main thread, never of a load thread, so
    /// they run under that policy whichever the load threads take.
    Normal,
}

impl ClientSched {
    /// What results written before the choice existed were measured with.
    pub fn legacy() -> Self {
        ClientSched::Normal
    }

    /// The name the command line takes.
    pub fn name(self) -> &'static str {
        match self {
            ClientSched::Batch => "batch",
            ClientSched::Normal => "normal",
        }
    }

    /// Puts the calling thread under this policy.
    fn apply(self) -> std::io::Result<()> {
        match self {
            ClientSched::Batch => crate::sys::set_thread_batch_scheduling(),
            ClientSched::Normal => Ok(()),
        }
    }
}

/// Where and how hard to load.
#[derive(Debug, Clone)]
pub struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
}

impl Target {
    /// Parses and resolves an `http://` URL.
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        let uri: Uri = url
            .parse()
            .with_context(|| format!("invalid URL {url:?}"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => bail!("unsupported scheme {other:?} in {url:?} (only http)"),
            None => bail!("URL {url:?} has no scheme (expected http://host:port/path)"),
        }
        let host = uri
            .host()
            .with_context(|| format!("URL {url:?} has no host"))?;
        // `Uri` keeps a port that does not fit a `u16` (`port_u16` is then
        // `None`, which used to mean port 80).
        let port = match uri.authority().and_then(|a| {
            let a = a.as_str();
            a.rsplit_once(':').filter(|_| !a.ends_with(']'))
        }) {
            None | Some((_, "")) => 80,
            Some((_, p)) => p
                .parse::<u16>()
                .map_err(|_| anyhow::anyhow!("invalid port {p:?} in {url:?}"))?,
        };
        let addr = (host.trim_matches(['[', ']']), port)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {host}"))?
            .next()
            .with_context(|| format!("{host} has no address"))?;
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let host = match uri.port_u16() {
            Some(_) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        Ok(Target { addr, host, path })
    }

    /// The resolved address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `Host` header value.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The path and query.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// The outcome of a load run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadReport {
    /// Connections used.
    pub connections: u32,
    /// Load threads used.
    pub threads: u16,
    /// Time from start to the deadline, seconds.
    pub duration_s: f64,
    /// Responses received.
    pub requests: u64,
    /// Responses per second.
    pub rps: f64,
    /// Mean latency, ms.
    pub latency_avg_ms: f64,
    /// Median latency, ms.
    pub latency_p50_ms: f64,
    /// 99th percentile latency, ms.
    pub latency_p99_ms: f64,
    /// Highest latency, ms.
    pub latency_max_ms: f64,
    /// Responses by status code.
    pub status: BTreeMap<u16, u64>,
    /// Failed connects, resets, protocol errors.
    pub errors: u64,
    /// The first few distinct error messages.
    pub error_samples: Vec<String>,
    /// Response body bytes received.
    pub body_bytes: u64,
    /// How the load threads were scheduled.
    #[serde(default = "ClientSched::legacy")]
    pub sched: ClientSched,
}

impl LoadReport {
    /// Responses with a 2xx status.
    pub fn ok(&self) -> u64 {
        self.status
            .iter()
            .filter(|(s, _)| (200..300).contains(*s))
            .map(|(_, n)| n)
            .sum()
    }

    /// A bombardier-like text report.
    pub fn render(&self) -> String {
        let mut classes = [0u64; 6];
        for (status, n) in &self.status {
            let class = usize::from(*status / 100);
            if (1..=5).contains(&class) {
                classes[class] += n;
            } else {
                classes[0] += n;
            }
        }
        let mut out = format!(
            "Reqs/sec     {:>12.2}\n\
             Latency      avg {:.2}ms  p50 {:.2}ms  p99 {:.2}ms  max {:.2}ms\n\
             HTTP codes:  1xx - {}, 2xx - {}, 3xx - {}, 4xx - {}, 5xx - {}\n\
             \x20            others - {}, errors - {}\n\
             Throughput:  {:.2} MB/s ({} responses in {:.2}s; load threads {})\n",
            self.rps,
            self.latency_avg_ms,
            self.latency_p50_ms,
            self.latency_p99_ms,
            self.latency_max_ms,
            classes[1],
            classes[2],
            classes[3],
            classes[4],
            classes[5],
            classes[0],
            self.errors,
            self.body_bytes as f64 / self.duration_s / 1e6,
            self.requests,
            self.duration_s,
            self.sched.name(),
        );
        for e in &self.error_samples {
            out.push_str(&format!("  error: {e}\n"));
        }
        out
    }
}

/// One thread's tallies.
struct Tally {
    histogram: Histogram<u64>,
    status: BTreeMap<u16, u64>,
    errors: u64,
    error_samples: Vec<String>,
    body_bytes: u64,
}

impl Tally {
    fn new() -> Self {
        Tally {
            // 1 µs .. 10 min, 3 significant digits.
            histogram: Histogram::new_with_bounds(1, 600_000_000, 3)
                .expect("valid histogram bounds"),
            status: BTreeMap::new(),
            errors: 0,
            error_samples: Vec::new(),
            body_bytes: 0,
        }
    }

    fn error(&mut self, e: impl std::fmt::Display) {
        self.errors += 1;
        // With its causes (`anyhow`'s alternate form): "connect ADDR" alone
        // did not say that the connection was refused.
        let msg = format!("{e:#}");
        if self.error_samples.len() < 5 && !self.error_samples.contains(&msg) {
            self.error_samples.push(msg);
        }
    }
}

/// Runs `args` and prints the report.
pub fn run(args: &LoadArgs) -> anyhow::Result<()> {
    let target = Target::parse(&args.url)?;
    if let Some(attack) = args.attack {
        return crate::attack::run(&target, attack, args.connections, args.duration);
    }
    crate::compare::ensure_descriptors(args.connections)?;
    eprintln!(
        "loading {} with {} connections on {} threads ({}) for {:?}",
        args.url,
        args.connections,
        args.threads,
        args.sched.name(),
        args.duration
    );
    let report = load(
        &target,
        args.connections,
        args.threads,
        args.rate,
        args.sched,
        args.duration,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    if report.requests == 0 && report.errors > 0 {
        anyhow::bail!(
            "no response from {}: {}",
            args.url,
            report.error_samples.first().map_or("", String::as_str)
        );
    }
    Ok(())
}

/// The lowest `--rate`: one request per connection every 10^8 s at the
/// most connections (100,000), which a `Duration` and an `Instant` hold.
const MIN_RATE: f64 = 1e-3;

/// Parses `--rate`: requests per second, finite and at least [`MIN_RATE`].
pub fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r >= MIN_RATE => Ok(r),
        _ => Err(format!(
            "`{s}` is not a rate: give requests per second, a number of at least {MIN_RATE}"
        )),
    }
}

/// When one connection sends: at `next`, then every `every`.
#[derive(Clone, Copy, Debug)]
struct Schedule {
    next: tokio::time::Instant,
    every: Duration,
}

impl Schedule {
    /// Waits for the next send and schedules the one after it, from now if
    /// the connection fell behind by more than an interval.
    async fn wait(&mut self) {
        tokio::time::sleep_until(self.next).await;
        let now = tokio::time::Instant::now();
        self.next = if now > self.next + self.every {
            now
        } else {
            self.next
        } + self.every;
    }
}

/// Loads `target` and returns the report (blocks for `duration`): closed
/// loop, or paced at `rate` requests per second in all, from threads
/// scheduled as `sched` says.
pub fn load(
    target: &Target,
    connections: u32,
    threads: u16,
    rate: Option<f64>,
    sched: ClientSched,
    duration: Duration,
) -> anyhow::Result<LoadReport> {
    let threads = threads.clamp(1, u16::try_from(connections).unwrap_or(u16::MAX));
    let start = Instant::now();
    let deadline = start + duration;
    // Connection `i` of `connections` starts `i / connections` of an
    // interval late, so that the sends spread evenly over time.
    let every = rate
        .map(|r| Duration::try_from_secs_f64(f64::from(connections) / r))
        .transpose()
        .context("the rate is too low to schedule")?;
    let schedule = move |i: u32| {
        every.map(|every| Schedule {
            next: tokio::time::Instant::from_std(
                start + every.mul_f64(f64::from(i) / f64::from(connections)),
            ),
            every,
        })
    };
    let mut first_of_thread = 0;
    let mut handles = Vec::new();
    for t in 0..threads {
        // Spread the connections as evenly as possible.
        let mine = connections / u32::from(threads)
            + u32::from(u32::from(t) < connections % u32::from(threads));
        let target = target.clone();
        let schedules: Vec<Option<Schedule>> = (first_of_thread..first_of_thread + mine)
            .map(&schedule)
            .collect();
        first_of_thread += mine;
        handles.push(
            std::thread::Builder::new()
                .name(format!("load-{t}"))
                .spawn(move || load_thread(target, schedules, sched, deadline))
                .context("cannot start a load thread")?,
        );
    }
    let mut total = Tally::new();
    for h in handles {
        let tally = h
            .join()
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))??;
        total
            .histogram
            .add(&tally.histogram)
            .context("merging histograms")?;
        for (s, n) in tally.status {
            *total.status.entry(s).or_default() += n;
        }
        total.errors += tally.errors;
        total.body_bytes += tally.body_bytes;
        for e in tally.error_samples {
            if total.error_samples.len() < 5 && !total.error_samples.contains(&e) {
                total.error_samples.push(e);
            }
        }
    }
    let elapsed = deadline
        .saturating_duration_since(start)
        .as_secs_f64()
        .max(1e-9);
    let h = &total.histogram;
    let ms = |us: u64| us as f64 / 1000.0;
    Ok(LoadReport {
        connections,
        threads,
        duration_s: elapsed,
        requests: h.len(),
        rps: h.len() as f64 / elapsed,
        latency_avg_ms: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
        latency_p50_ms: ms(h.value_at_quantile(0.5)),
        latency_p99_ms: ms(h.value_at_quantile(0.99)),
        latency_max_ms: ms(h.max()),
        status: total.status,
        errors: total.errors,
        error_samples: total.error_samples,
        body_bytes: total.body_bytes,
        sched,
    })
}

fn load_thread(
    target: Target,
    schedules: Vec<Option<Schedule>>,
    sched: ClientSched,
    deadline: Instant,
) -> anyhow::Result<Tally> {
    sched.apply().with_context(|| {
        format!(
            "cannot schedule a load thread as `{}` (`--sched normal` leaves the policy alone)",
            sched.name()
        )
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let tally = Rc::new(RefCell::new(Tally::new()));
    let target = Rc::new(target);
    local.block_on(&runtime, async {
        let mut tasks = Vec::new();
        for schedule in schedules {
            tasks.push(tokio::task::spawn_local(connection(
                target.clone(),
                tally.clone(),
                schedule,
                deadline,
            )));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    drop(local);
    Ok(Rc::try_unwrap(tally)
        .map_err(|_| anyhow::anyhow!("tally still shared"))?
        .into_inner())
}

/// One connection (closed loop, or on `schedule`), reopened after errors,
/// until `deadline`.
async fn connection(
    target: Rc<Target>,
    tally: Rc<RefCell<Tally>>,
    mut schedule: Option<Schedule>,
    deadline: Instant,
) {
    let deadline = tokio::time::Instant::from_std(deadline);
    while tokio::time::Instant::now() < deadline {
        match tokio::time::timeout_at(deadline, session(&target, &tally, &mut schedule)).await {
            Ok(Ok(())) | Err(_) => {}
            Ok(Err(e)) => {
                tally.borrow_mut().error(e);
                // Let the other connections run before reconnecting, so a
                // refused port does not starve them.
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Opens a connection and sends requests on it until an error: each as soon
/// as the previous response is read, or when `schedule` says.
async fn session(
    target: &Target,
    tally: &RefCell<Tally>,
    schedule: &mut Option<Schedule>,
) -> anyhow::Result<()> {
    let stream = tokio::net::TcpStream::connect(target.addr)
        .await
        .with_context(|| format!("connect {}", target.addr))?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await?;
    tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    loop {
        let request = hyper::Request::get(target.path.as_str())
            .header(hyper::header::HOST, target.host.as_str())
            .body(Empty::new())?;
        sender.ready().await?;
        if let Some(schedule) = schedule {
            schedule.wait().await;
        }
        let sent = Instant::now();
        let response = sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        let micros = u64::try_from(sent.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut t = tally.borrow_mut();
        t.histogram.saturating_record(micros);
        *t.status.entry(status).or_default() += 1;
        t.body_bytes += body.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        let t = Target::parse("http://127.0.0.1:8070/stats?x=1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8070".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:8070");
        assert_eq!(t.path, "/stats?x=1");
        assert_eq!(Target::parse("http://127.0.0.1:9").unwrap().path, "/");
        assert!(Target::parse("https://127.0.0.1/").is_err());
        assert!(Target::parse("127.0.0.1:80").is_err());
        assert!(Target::parse("http://").is_err());
    }

    #[test]
    fn parses_rates() {
        assert_eq!(parse_rate("50000"), Ok(50_000.0));
        assert_eq!(parse_rate("2.5e4"), Ok(25_000.0));
        assert_eq!(parse_rate("0.001"), Ok(0.001));
        // 1e-300 made the interval overflow a `Duration` (a panic).
        for bad in ["0", "-1", "1e-300", "inf", "NaN", "fast", ""] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }
}
