//! `compare`: every mode side by side on this machine, in alternating rounds.
//!
//! A mode runs on each of the `--runtimes` asked for (by default only the
//! per-thread one); its label is the mode's name on the per-thread runtime
//! and `mode/ws` on the work-stealing one, and "vs arc" compares with `arc`
//! on the same runtime.
//!
//! For each round and each (runtime, mode): start `serve` as a child, warm it
//! up with the load generator, read `/stats`, load it for the measured
//! duration while sampling the child's RSS every [`SAMPLE_EVERY`], read
//! `/stats` again, stop the child. Running the modes in turn within each round spreads any drift of
//! the machine (thermal, other tenants) over all of them. The summary takes
//! medians over rounds; counters from `/stats` are differences over the
//! measured phase, except objects live at the end.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::child::ServerChild;
use crate::load::{self, LoadReport, Target};
use crate::mode::{Mode, Runtime};
use crate::stats::ServerStats;

/// RSS sampling interval.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);

const MIB: f64 = 1024.0 * 1024.0;

/// Arguments of `compare`.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Modes to compare, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "arc,orc-nim16,orc"
    )]
    pub modes: Vec<Mode>,
    /// Server runtimes to run every mode on, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "per-thread")]
    pub runtimes: Vec<Runtime>,
    /// Server worker threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: u16,
    /// Load-generator connections.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub connections: u32,
    /// Measured load per run, e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = crate::parse_duration)]
    pub duration: Duration,
    /// Warm-up load before each measured run.
    #[arg(long, default_value = "1s", value_parser = crate::parse_duration)]
    pub warmup: Duration,
    /// Rounds (each runs every mode once).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Load-generator threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub load_threads: u16,
    /// Directory for results.json and chart.svg.
    #[arg(long, default_value = "target/compare")]
    pub out: PathBuf,
}

/// One measured run of one mode.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    /// The mode.
    pub mode: Mode,
    /// The server's runtime.
    #[serde(default)]
    pub runtime: Runtime,
    /// The mode's label in the table and chart ([`Runtime::label`]).
    pub label: String,
    /// Round, from 1.
    pub round: u32,
    /// The measured load.
    pub load: LoadReport,
    /// (seconds since the measured load started, RSS bytes); warm-up samples
    /// have negative times.
    pub rss: Vec<(f64, u64)>,
    /// Highest RSS sampled.
    pub peak_rss_bytes: u64,
    /// Least-squares slope of RSS over the measured phase, MiB per minute.
    pub rss_growth_mib_per_min: f64,
    /// `/stats` after the warm-up.
    pub stats_before: ServerStats,
    /// `/stats` after the measured load.
    pub stats_after: ServerStats,
    /// Time in the collector over server CPU time, during the measured load.
    pub collector_share: f64,
    /// Server CPU time (user + system) per request answered, during the
    /// measured load, in µs. Less sensitive than req/s to other jobs on the
    /// machine taking CPU away.
    pub server_cpu_us_per_request: f64,
}

/// The per-mode summary (medians over rounds).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    /// The mode.
    pub mode: Mode,
    /// The server's runtime.
    #[serde(default)]
    pub runtime: Runtime,
    /// The mode's label in the table and chart ([`Runtime::label`]).
    pub label: String,
    /// Median requests per second.
    pub rps: f64,
    /// `rps` over arc's on the same runtime (if arc ran on it).
    pub ratio_to_arc: Option<f64>,
    /// Median of the runs' mean latency, ms.
    pub latency_avg_ms: f64,
    /// Median of the runs' p99 latency, ms.
    pub latency_p99_ms: f64,
    /// Highest RSS over all runs, MiB.
    pub peak_rss_mib: f64,
    /// Median RSS growth, MiB/min.
    pub rss_growth_mib_per_min: f64,
    /// Median objects live at the end of a run.
    pub live_at_end: u64,
    /// Median objects freed by the collector during a measured run.
    pub freed_by_collector: u64,
    /// Median collections during a measured run.
    pub collections: u64,
    /// Median share of server CPU time spent in the collector.
    pub collector_share: f64,
    /// Median server CPU time per request, µs.
    pub server_cpu_us_per_request: f64,
    /// Errors over all runs.
    pub errors: u64,
    /// Non-2xx responses over all runs.
    pub non_2xx: u64,
}

/// The machine the numbers come from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    /// CPUs available to this process.
    pub cpus: usize,
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// Kernel release.
    pub kernel: String,
    /// Total memory, MiB.
    pub memory_mib: u64,
}

/// Everything `results.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    /// The machine.
    pub machine: Machine,
    /// The command line's settings.
    pub config: Config,
    /// One row per mode.
    pub summary: Vec<Summary>,
    /// Every run.
    pub runs: Vec<Run>,
}

/// The settings of a compare run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// Modes.
    pub modes: Vec<Mode>,
    /// Runtimes.
    #[serde(default)]
    pub runtimes: Vec<Runtime>,
    /// Server threads.
    pub threads: u16,
    /// Connections.
    pub connections: u32,
    /// Measured seconds per run.
    pub duration_s: f64,
    /// Warm-up seconds per run.
    pub warmup_s: f64,
    /// Rounds.
    pub repeat: u32,
    /// Load threads.
    pub load_threads: u16,
}

/// Runs the comparison, prints the table, writes results.json and the chart.
pub fn run(args: &CompareArgs) -> anyhow::Result<()> {
    if args.modes.is_empty() {
        bail!("--modes needs at least one mode");
    }
    if args.runtimes.is_empty() {
        bail!("--runtimes needs at least one runtime");
    }
    let modes = first_occurrences(&args.modes);
    let runtimes = first_occurrences(&args.runtimes);
    let variants: Vec<(Runtime, Mode)> = runtimes
        .iter()
        .flat_map(|&r| modes.iter().map(move |&m| (r, m)))
        .collect();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create the output directory {}", args.out.display()))?;
    crate::child::install_interrupt_handler()?;
    let machine = machine();
    eprintln!(
        "compare: {} on {} CPUs ({}); server {} threads, load {} connections on {} threads, {:?} + {:?} warm-up, {} rounds",
        variants
            .iter()
            .map(|&(r, m)| r.label(m))
            .collect::<Vec<_>>()
            .join(", "),
        machine.cpus,
        machine.cpu_model,
        args.threads,
        args.connections,
        args.load_threads,
        args.duration,
        args.warmup,
        args.repeat
    );
    let mut runs = Vec::new();
    for round in 1..=args.repeat {
        for &(runtime, mode) in &variants {
            eprint!(
                "[round {round}/{}] {:<12} ",
                args.repeat,
                runtime.label(mode)
            );
            let run = run_one(mode, runtime, round, args)?;
            eprintln!(
                "{:>9.0} req/s  p99 {:>7.2} ms  peak RSS {:>7.1} MiB  growth {:>7.1} MiB/min  collector {:>5.1}%  {:>5.2} µs CPU/req",
                run.load.rps,
                run.load.latency_p99_ms,
                run.peak_rss_bytes as f64 / MIB,
                run.rss_growth_mib_per_min,
                run.collector_share * 100.0,
                run.server_cpu_us_per_request
            );
            runs.push(run);
        }
    }
    let summary = summarize(&variants, &runs);
    println!("{}", render_table(&summary, &machine, args));
    let results = Results {
        machine,
        config: Config {
            modes,
            runtimes,
            threads: args.threads,
            connections: args.connections,
            duration_s: args.duration.as_secs_f64(),
            warmup_s: args.warmup.as_secs_f64(),
            repeat: args.repeat,
            load_threads: args.load_threads,
        },
        summary,
        runs,
    };
    let json_path = args.out.join("results.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&results)?)
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    let svg_path = args.out.join("chart.svg");
    crate::chart::draw(&results, &svg_path)?;
    eprintln!("wrote {} and {}", json_path.display(), svg_path.display());
    Ok(())
}

/// `items` without repetitions, in the order they first appear.
fn first_occurrences<T: Copy + PartialEq>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for &item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Samples the RSS of `pid` every [`SAMPLE_EVERY`] until told to stop.
struct Sampler {
    stop: mpsc::Sender<Instant>,
    thread: std::thread::JoinHandle<Vec<(Instant, u64)>>,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let (stop, rx) = mpsc::channel::<Instant>();
        let thread = std::thread::spawn(move || {
            let mut samples = Vec::new();
            loop {
                if let Ok(rss) = crate::procfs::rss_bytes(Some(pid)) {
                    samples.push((Instant::now(), rss));
                }
                match rx.recv_timeout(SAMPLE_EVERY) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return samples,
                }
            }
        });
        Sampler { stop, thread }
    }

    fn finish(self) -> Vec<(Instant, u64)> {
        let _ = self.stop.send(Instant::now());
        self.thread.join().unwrap_or_default()
    }
}

fn run_one(mode: Mode, runtime: Runtime, round: u32, args: &CompareArgs) -> anyhow::Result<Run> {
    let mut child = ServerChild::start(mode, runtime, args.threads)?;
    let sampler = Sampler::start(child.pid());
    let url = format!("http://{}/", child.addr);
    let target = Target::parse(&url)?;
    if !args.warmup.is_zero() {
        eprint!("warm-up… ");
        load::load(&target, args.connections, args.load_threads, args.warmup)?;
    }
    let stats_before = get_stats(child.addr)?;
    eprint!("load… ");
    let started = Instant::now();
    let report = load::load(&target, args.connections, args.load_threads, args.duration)?;
    let stats_after = get_stats(child.addr)?;
    let samples = sampler.finish();
    child.stop();

    let rss: Vec<(f64, u64)> = samples
        .iter()
        .map(|&(t, b)| {
            let secs = if t >= started {
                (t - started).as_secs_f64()
            } else {
                -(started - t).as_secs_f64()
            };
            (secs, b)
        })
        .collect();
    let peak = rss.iter().map(|&(_, b)| b).max().unwrap_or(0);
    let measured: Vec<(f64, f64)> = rss
        .iter()
        .filter(|&&(t, _)| t >= 0.0)
        .map(|&(t, b)| (t, b as f64 / MIB))
        .collect();
    let growth = slope(&measured) * 60.0;
    let cpu = stats_after.cpu_s - stats_before.cpu_s;
    let pause = stats_after.total.total_pause_s - stats_before.total.total_pause_s;
    let collector_share = if cpu > 0.0 {
        (pause / cpu).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let answered = stats_after
        .total
        .requests
        .saturating_sub(stats_before.total.requests);
    let server_cpu_us_per_request = if answered > 0 {
        cpu * 1e6 / answered as f64
    } else {
        0.0
    };
    Ok(Run {
        mode,
        runtime,
        label: runtime.label(mode),
        round,
        load: report,
        rss,
        peak_rss_bytes: peak,
        rss_growth_mib_per_min: growth,
        stats_before,
        stats_after,
        collector_share,
        server_cpu_us_per_request,
    })
}

/// Least-squares slope of y over x (0 with fewer than two points).
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

/// The median (mean of the middle two for an even count); 0 for none.
fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn summarize(variants: &[(Runtime, Mode)], runs: &[Run]) -> Vec<Summary> {
    let mut out: Vec<Summary> = variants
        .iter()
        .map(|&(runtime, mode)| {
            let rs: Vec<&Run> = runs
                .iter()
                .filter(|r| r.mode == mode && r.runtime == runtime)
                .collect();
            let med = |f: &dyn Fn(&Run) -> f64| median(rs.iter().map(|r| f(r)).collect());
            Summary {
                mode,
                runtime,
                label: runtime.label(mode),
                rps: med(&|r| r.load.rps),
                ratio_to_arc: None,
                latency_avg_ms: med(&|r| r.load.latency_avg_ms),
                latency_p99_ms: med(&|r| r.load.latency_p99_ms),
                peak_rss_mib: rs.iter().map(|r| r.peak_rss_bytes).max().unwrap_or(0) as f64 / MIB,
                rss_growth_mib_per_min: med(&|r| r.rss_growth_mib_per_min),
                live_at_end: med(&|r| r.stats_after.total.live as f64) as u64,
                freed_by_collector: med(&|r| {
                    r.stats_after
                        .total
                        .freed_by_collector
                        .saturating_sub(r.stats_before.total.freed_by_collector)
                        as f64
                }) as u64,
                collections: med(&|r| {
                    r.stats_after
                        .total
                        .collections()
                        .saturating_sub(r.stats_before.total.collections())
                        as f64
                }) as u64,
                collector_share: med(&|r| r.collector_share),
                server_cpu_us_per_request: med(&|r| r.server_cpu_us_per_request),
                errors: rs.iter().map(|r| r.load.errors).sum(),
                non_2xx: rs.iter().map(|r| r.load.requests - r.load.ok()).sum(),
            }
        })
        .collect();
    let arcs: Vec<(Runtime, f64)> = out
        .iter()
        .filter(|s| s.mode == Mode::Arc)
        .map(|s| (s.runtime, s.rps))
        .collect();
    for s in &mut out {
        s.ratio_to_arc = arcs
            .iter()
            .find(|&&(r, a)| r == s.runtime && a > 0.0)
            .map(|&(_, a)| s.rps / a);
    }
    out
}

/// The summary as a Markdown table (it reads as plain text too).
pub fn render_table(summary: &[Summary], machine: &Machine, args: &CompareArgs) -> String {
    let mut out = format!(
        "\n{} CPUs ({}), Linux {}; server {} threads; {} connections, {:?} per run, {} round(s), medians{}\n\n",
        machine.cpus,
        machine.cpu_model,
        machine.kernel,
        args.threads,
        args.connections,
        args.duration,
        args.repeat,
        if summary.iter().any(|s| s.runtime == Runtime::WorkStealing) {
            "; `/ws`: work-stealing runtime with recycler::sync pointers (vs arc: arc on the same runtime; live and collector counts process-wide)"
        } else {
            ""
        }
    );
    out.push_str("| mode | req/s | vs arc | latency avg | latency p99 | peak RSS | RSS growth | live at end | freed by collector | collections | collector time | server CPU/request |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for s in summary {
        out.push_str(&format!(
            "| {} | {:.0} | {} | {:.2} ms | {:.2} ms | {:.1} MiB | {:+.1} MiB/min | {} | {} | {} | {:.1} % | {:.2} µs |\n",
            s.label,
            s.rps,
            s.ratio_to_arc.map_or("–".to_owned(), |r| format!("{r:.2}×")),
            s.latency_avg_ms,
            s.latency_p99_ms,
            s.peak_rss_mib,
            s.rss_growth_mib_per_min,
            s.live_at_end,
            s.freed_by_collector,
            s.collections,
            s.collector_share * 100.0,
            s.server_cpu_us_per_request
        ));
    }
    let errors: u64 = summary.iter().map(|s| s.errors).sum();
    let non_2xx: u64 = summary.iter().map(|s| s.non_2xx).sum();
    if errors + non_2xx > 0 {
        out.push_str(&format!(
            "\nwarning: {errors} connection errors and {non_2xx} non-2xx responses in total\n"
        ));
    }
    out
}

/// `GET /stats` from a server, parsed.
fn get_stats(addr: SocketAddr) -> anyhow::Result<ServerStats> {
    let (status, body) = http_get(addr, "/stats")?;
    if status != 200 {
        bail!("GET /stats answered {status}");
    }
    serde_json::from_str(&body).context("parsing /stats")
}

/// A minimal blocking `GET` with `Connection: close`; returns status and body.
pub fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("connect {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .context("reading the response")?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("response has no header end")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line in {head:?}"))?;
    Ok((status, body.to_owned()))
}

fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU".to_owned(), |(_, m)| m.trim().to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or("unknown".to_owned(), |s| s.trim().to_owned());
    let memory_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024);
    Machine {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model,
        kernel,
        memory_mib,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_slope() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(slope(&[(0.0, 1.0)]), 0.0);
        let line: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 3.0 * i as f64 + 1.0)).collect();
        assert!((slope(&line) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn repeated_modes_and_runtimes_run_once() {
        assert_eq!(
            first_occurrences(&[Mode::Orc, Mode::Arc, Mode::Orc, Mode::Arc]),
            [Mode::Orc, Mode::Arc]
        );
        let r = [
            Runtime::WorkStealing,
            Runtime::PerThread,
            Runtime::WorkStealing,
        ];
        assert_eq!(
            first_occurrences(&r),
            [Runtime::WorkStealing, Runtime::PerThread]
        );
    }
}
