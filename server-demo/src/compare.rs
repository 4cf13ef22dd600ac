//! `compare`: every mode side by side on this machine, in alternating rounds.
//!
//! A mode runs on each of the `--runtimes` asked for (by default only the
//! per-thread one); its label is the mode's name on the per-thread runtime
//! and `mode/ws` on the work-stealing one. The baseline is `arc-weak`
//! (careful ARC: nothing leaks, nothing is collected) on the same runtime:
//! "vs arc-weak" and `ratio_to_baseline` compare with it; "vs arc" (leaking
//! ARC, whose page faults flatter every collector) is kept beside it.
//!
//! `--ablation` runs, instead of `--modes`, the baseline, `orc-nim16` (no
//! defect), `orc-nim16` plus each Nim 1.6.12 defect alone, and
//! `orc-nim16-faithful` (all of them), and apportions the collapse (the
//! faithful mode's loss of req/s, and its extra server CPU per request,
//! against `orc-nim16`) to the defects. `--preset seed` and `--preset
//! seed-10k` set the load of the report this project answers (1000 or
//! 10,000 connections, 60 s runs); the descriptor limit is raised as far as
//! the hard limit allows, and compare refuses a load it cannot open.
//!
//! For each round and each (runtime, mode): start `serve` as a child, warm it
//! up with the load generator, read `/stats`, load it for the measured
//! duration while sampling the child's RSS every [`SAMPLE_EVERY`], read
//! `/stats` again, stop the child. Running the modes in turn within each
//! round, in reverse order every second round, spreads any drift of the
//! machine (thermal, other tenants) over all of them. The summary takes
//! medians over rounds, and its ratios are medians of per-round ratios (a
//! run against the baseline's run of the same round); counters from
//! `/stats` are differences over the measured phase, except objects live at
//! the end.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Args;
use paired::{machine, median, Machine};
use serde::{Deserialize, Serialize};

use crate::child::ServerChild;
use crate::load::{self, ClientSched, LoadReport, Target};
use crate::locked_alloc::Allocator;
use crate::mode::{Defects, Mode, Runtime, Variant};
use crate::stats::ServerStats;

/// RSS sampling interval.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Bytes per MiB.
pub const MIB: f64 = 1024.0 * 1024.0;

/// The load of a named setup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// The report's load: 1000 connections, 60 s per run
    /// (`bombardier -c 1000 -d 1m`).
    Seed,
    /// 10,000 connections, 60 s per run (needs RLIMIT_NOFILE above 10,000
    /// for the load generator and the server each).
    #[value(name = "seed-10k")]
    Seed10k,
}

impl Preset {
    fn connections(self) -> u32 {
        match self {
            Preset::Seed => 1000,
            Preset::Seed10k => 10_000,
        }
    }
}

/// Connections when neither `--connections` nor `--preset` says.
const DEFAULT_CONNECTIONS: u32 = 256;
/// Measured duration when neither `--duration` nor `--preset` says.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Duration of a preset's runs.
const PRESET_DURATION: Duration = Duration::from_secs(60);
/// Descriptors a process needs besides its connections (listeners,
/// standard streams, /proc reads, the stats connection, epoll, eventfds).
const SPARE_DESCRIPTORS: u64 = 64;

/// Arguments of `compare`.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Modes to compare, comma-separated (arc-weak is the baseline).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "arc-weak,arc,orc-nim16,orc-nim16-faithful,orc"
    )]
    pub modes: Vec<Mode>,
    /// Nim 1.6.12 defects of orc-nim16-faithful: all, none, or a list of
    /// all-cyclic, shared-threshold, locked-alloc.
    #[arg(long, default_value = "all", value_parser = Defects::parse)]
    pub nim16_defects: Defects,
    /// Run arc-weak, orc-nim16, orc-nim16 with each defect alone and with
    /// all of them (instead of --modes), and apportion the collapse.
    #[arg(long)]
    pub ablation: bool,
    /// The seed report's load: `seed` (1000 connections, 60 s) or
    /// `seed-10k` (10,000 connections, 60 s); --connections and --duration
    /// override it.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Server runtimes to run every mode on, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "per-thread")]
    pub runtimes: Vec<Runtime>,
    /// Server worker threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: u16,
    /// Load-generator connections [default: 256, or the preset's].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub connections: Option<u32>,
    /// Measured load per run, e.g. 10s [default: 10s, or the preset's 60s].
    #[arg(long, value_parser = crate::parse_positive_duration)]
    pub duration: Option<Duration>,
    /// Warm-up load before each measured run.
    #[arg(long, default_value = "1s", value_parser = crate::parse_duration)]
    pub warmup: Duration,
    /// Rounds (each runs every mode once).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Load-generator threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub load_threads: u16,
    /// How the load threads are scheduled (as `load --sched`): `batch`
    /// keeps a woken load thread from preempting the server, which charged
    /// the slower server for scheduling its client.
    #[arg(long, value_enum, default_value = "batch")]
    pub client_sched: ClientSched,
    /// The servers' allocator (every mode the same; passed to them as
    /// `SERVER_DEMO_ALLOCATOR`): glibc's malloc, or mimalloc, whose
    /// per-thread free lists absorb the collectors' batched frees.
    #[arg(long, value_enum, default_value = "system")]
    pub allocator: Allocator,
    /// Directory for results.json and chart.svg.
    #[arg(long, default_value = "target/compare")]
    pub out: PathBuf,
}

impl CompareArgs {
    /// Connections: `--connections`, else the preset's, else 256.
    pub fn connections(&self) -> u32 {
        self.connections
            .or(self.preset.map(Preset::connections))
            .unwrap_or(DEFAULT_CONNECTIONS)
    }

    /// Measured duration: `--duration`, else the preset's, else 10 s.
    pub fn duration(&self) -> Duration {
        self.duration
            .or(self.preset.map(|_| PRESET_DURATION))
            .unwrap_or(DEFAULT_DURATION)
    }

    /// What runs, in order: per runtime, the modes (or the ablation set).
    pub fn variants(&self) -> Vec<Variant> {
        let runtimes = first_occurrences(&self.runtimes);
        let mut out = Vec::new();
        for &runtime in &runtimes {
            if self.ablation {
                out.push(Variant::new(runtime, Mode::ArcWeak, Defects::NONE));
                out.push(Variant::new(runtime, Mode::OrcNim16, Defects::NONE));
                for d in Defects::each() {
                    out.push(Variant::new(runtime, Mode::OrcNim16Faithful, d));
                }
                out.push(Variant::new(runtime, Mode::OrcNim16Faithful, Defects::ALL));
            } else {
                for &mode in &first_occurrences(&self.modes) {
                    out.push(Variant::new(runtime, mode, self.nim16_defects));
                }
            }
        }
        first_occurrences(&out)
    }
}

/// One measured run of one mode.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    /// The mode.
    pub mode: Mode,
    /// Its Nim 1.6.12 defects (orc-nim16-faithful only).
    #[serde(default)]
    pub defects: Defects,
    /// The server's runtime.
    #[serde(default)]
    pub runtime: Runtime,
    /// The label in the table and chart ([`Variant::label`]).
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
    /// CPU time in the collector (`total_pause_cpu_s`) over server CPU
    /// time, during the measured load.
    pub collector_share: f64,
    /// Server CPU time (user + system) per request answered, during the
    /// measured load, in µs. Less sensitive than req/s to other jobs on the
    /// machine taking CPU away.
    pub server_cpu_us_per_request: f64,
    /// Of it, the CPU time in user space (the rest is the kernel's), in µs;
    /// zero in results written before the split was recorded.
    #[serde(default)]
    pub server_user_cpu_us_per_request: f64,
}

impl Run {
    fn variant(&self) -> Variant {
        Variant {
            runtime: self.runtime,
            mode: self.mode,
            defects: self.defects,
        }
    }

    /// A counter's increase over the measured phase.
    fn delta(&self, f: impl Fn(&crate::stats::ThreadStats) -> u64) -> u64 {
        f(&self.stats_after.total).saturating_sub(f(&self.stats_before.total))
    }
}

/// The per-mode summary (medians over rounds).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    /// The mode.
    pub mode: Mode,
    /// Its Nim 1.6.12 defects (orc-nim16-faithful only).
    #[serde(default)]
    pub defects: Defects,
    /// The server's runtime.
    #[serde(default)]
    pub runtime: Runtime,
    /// The label in the table and chart ([`Variant::label`]).
    pub label: String,
    /// Median requests per second.
    pub rps: f64,
    /// `rps` over the baseline's (`arc-weak` on the same runtime, if it
    /// ran): the median over rounds of each round's ratio.
    #[serde(default)]
    pub ratio_to_baseline: Option<f64>,
    /// `server_cpu_us_per_request` over the baseline's (median of the
    /// rounds' ratios).
    #[serde(default)]
    pub cpu_ratio_to_baseline: Option<f64>,
    /// `rps` over arc's on the same runtime, if arc ran on it (median of the
    /// rounds' ratios).
    pub ratio_to_arc: Option<f64>,
    /// Median of the runs' mean latency, ms.
    pub latency_avg_ms: f64,
    /// Median of the runs' p99 latency, ms.
    pub latency_p99_ms: f64,
    /// Highest RSS over all runs, MiB.
    pub peak_rss_mib: f64,
    /// Median RSS growth, MiB/min.
    pub rss_growth_mib_per_min: f64,
    /// Largest relative distance of RSS from its value 30 s into the
    /// measured load, over the rest of the load (the worst run; `None` when
    /// runs are shorter than a minute).
    #[serde(default)]
    pub rss_drift_after_30s: Option<f64>,
    /// Share of the heap lock's acquisitions that found it held
    /// (orc-nim16-faithful's `locked-alloc` defect; `None` when the lock was
    /// not taken).
    #[serde(default)]
    pub heap_lock_contended: Option<f64>,
    /// Median objects live at the end of a run.
    pub live_at_end: u64,
    /// Median objects freed by the collector during a measured run.
    pub freed_by_collector: u64,
    /// Median collections during a measured run.
    pub collections: u64,
    /// Median objects traced per collection during a measured run.
    #[serde(default)]
    pub traced_per_collection: f64,
    /// Median objects traced by the collector per request answered.
    #[serde(default)]
    pub traced_per_request: f64,
    /// Median share of server CPU time spent in the collector (its CPU
    /// time, not its wall-clock pauses).
    pub collector_share: f64,
    /// Median server CPU time per request, µs.
    pub server_cpu_us_per_request: f64,
    /// Median server CPU time per request in user space, µs (the rest is
    /// the kernel's: the sockets and the scheduler).
    #[serde(default)]
    pub server_user_cpu_us_per_request: f64,
    /// `server_user_cpu_us_per_request` over the baseline's (median of the
    /// rounds' ratios).
    #[serde(default)]
    pub user_cpu_ratio_to_baseline: Option<f64>,
    /// Errors over all runs.
    pub errors: u64,
    /// Non-2xx responses over all runs.
    pub non_2xx: u64,
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
    /// With `--ablation`: each defect's share of the collapse, per runtime.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ablation: Vec<Ablation>,
    /// Every run.
    pub runs: Vec<Run>,
}

/// The settings of a compare run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// Modes.
    pub modes: Vec<Mode>,
    /// Defects of orc-nim16-faithful.
    #[serde(default)]
    pub nim16_defects: Defects,
    /// Whether this was an ablation run.
    #[serde(default)]
    pub ablation: bool,
    /// Descriptor limit (soft, hard) after raising it.
    #[serde(default)]
    pub nofile_limit: Option<(u64, u64)>,
    /// Runtimes.
    #[serde(default)]
    pub runtimes: Vec<Runtime>,
    /// Server threads.
    pub threads: u16,
    /// The servers' allocator.
    #[serde(default)]
    pub allocator: Allocator,
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
    /// How the load threads were scheduled.
    #[serde(default = "ClientSched::legacy")]
    pub client_sched: ClientSched,
}

/// Runs the comparison, prints the table, writes results.json and the chart.
pub fn run(args: &CompareArgs) -> anyhow::Result<()> {
    if args.modes.is_empty() && !args.ablation {
        bail!("--modes needs at least one mode");
    }
    if args.runtimes.is_empty() {
        bail!("--runtimes needs at least one runtime");
    }
    let variants = args.variants();
    let connections = args.connections();
    let duration = args.duration();
    // The children inherit the raised limit: the server needs as many
    // descriptors as the load generator.
    let nofile = ensure_descriptors(connections)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create the output directory {}", args.out.display()))?;
    crate::child::install_interrupt_handler()?;
    let machine = machine();
    eprintln!(
        "compare: {} on {} CPUs ({}); server {} threads, load {} connections on {} threads ({}), {:?} + {:?} warm-up, {} rounds; RLIMIT_NOFILE {} (hard {})",
        variants
            .iter()
            .map(|v| v.label())
            .collect::<Vec<_>>()
            .join(", "),
        machine.cpus,
        machine.cpu_model,
        args.threads,
        connections,
        args.load_threads,
        args.client_sched.name(),
        duration,
        args.warmup,
        args.repeat,
        nofile.0,
        nofile.1,
    );
    if usize::from(args.threads) > machine.cpus {
        eprintln!(
            "note: {} server threads on {} CPUs (the report ran 12 threads on 12 cores)",
            args.threads, machine.cpus
        );
    }
    let mut runs = Vec::new();
    for round in 1..=args.repeat {
        for variant in round_order(&variants, round) {
            eprint!("[round {round}/{}] {:<32} ", args.repeat, variant.label());
            let run = run_one(variant, round, args)?;
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
    println!(
        "{}",
        render_table(&summary, &machine, args, connections, duration)
    );
    let ablation = if args.ablation {
        let rows = ablate(&summary);
        println!("{}", render_ablation(&rows));
        rows
    } else {
        Vec::new()
    };
    let results = Results {
        machine,
        config: Config {
            modes: first_occurrences(&variants.iter().map(|v| v.mode).collect::<Vec<_>>()),
            nim16_defects: args.nim16_defects,
            ablation: args.ablation,
            nofile_limit: Some(nofile),
            runtimes: first_occurrences(&args.runtimes),
            threads: args.threads,
            allocator: args.allocator,
            connections,
            duration_s: duration.as_secs_f64(),
            warmup_s: args.warmup.as_secs_f64(),
            repeat: args.repeat,
            load_threads: args.load_threads,
            client_sched: args.client_sched,
        },
        summary,
        ablation,
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

/// Raises this process's descriptor limit as far as allowed (the server
/// children inherit it) and checks that `connections` fit; returns the
/// limit (soft, hard). Says so, and refuses, when they cannot.
pub fn ensure_descriptors(connections: u32) -> anyhow::Result<(u64, u64)> {
    let (soft, hard) = crate::sys::raise_nofile_limit().context("cannot raise RLIMIT_NOFILE")?;
    let needed = u64::from(connections) + SPARE_DESCRIPTORS;
    if soft < needed {
        bail!(
            "{connections} connections need about {needed} file descriptors in the load generator \
             and as many in the server, but RLIMIT_NOFILE can only be raised to {soft} \
             (hard limit {hard}); use fewer connections or raise the hard limit \
             (e.g. `ulimit -Hn`, /etc/security/limits.conf, or systemd's LimitNOFILE)"
        );
    }
    Ok((soft, hard))
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
pub struct Sampler {
    stop: mpsc::Sender<Instant>,
    thread: std::thread::JoinHandle<Vec<(Instant, u64)>>,
}

impl Sampler {
    pub fn start(pid: u32) -> Self {
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

    pub fn finish(self) -> Vec<(Instant, u64)> {
        let _ = self.stop.send(Instant::now());
        self.thread.join().unwrap_or_default()
    }
}

fn run_one(variant: Variant, round: u32, args: &CompareArgs) -> anyhow::Result<Run> {
    let (connections, duration) = (args.connections(), args.duration());
    let mut child = ServerChild::start(variant, args.threads, args.allocator, None)?;
    let sampler = Sampler::start(child.pid());
    let url = format!("http://{}/", child.addr);
    let target = Target::parse(&url)?;
    if !args.warmup.is_zero() {
        eprint!("warm-up… ");
        load::load(
            &target,
            connections,
            args.load_threads,
            None,
            args.client_sched,
            args.warmup,
        )?;
    }
    let stats_before = get_stats(child.addr)?;
    eprint!("load… ");
    let started = Instant::now();
    let report = load::load(
        &target,
        connections,
        args.load_threads,
        None,
        args.client_sched,
        duration,
    )?;
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
    // CPU time, not wall time: a preempted collection is not collector work.
    let pause = stats_after.total.total_pause_cpu_s - stats_before.total.total_pause_cpu_s;
    let collector_share = if cpu > 0.0 {
        (pause / cpu).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let answered = stats_after
        .total
        .requests
        .saturating_sub(stats_before.total.requests);
    let (server_user_cpu_us_per_request, kernel) = crate::stats::split_per_request(
        cpu,
        stats_after.user_cpu_s - stats_before.user_cpu_s,
        answered,
    );
    let server_cpu_us_per_request = server_user_cpu_us_per_request + kernel;
    Ok(Run {
        mode: variant.mode,
        defects: variant.defects,
        runtime: variant.runtime,
        label: variant.label(),
        round,
        load: report,
        rss,
        peak_rss_bytes: peak,
        rss_growth_mib_per_min: growth,
        stats_before,
        stats_after,
        collector_share,
        server_cpu_us_per_request,
        server_user_cpu_us_per_request,
    })
}

/// The order of the variants in `round` (from 1): as given in odd rounds,
/// reversed in even ones, so that a machine that speeds up or slows down
/// during a compare (a steady drift) favours no variant over two rounds.
fn round_order(variants: &[Variant], round: u32) -> Vec<Variant> {
    let mut order = variants.to_vec();
    if round % 2 == 0 {
        order.reverse();
    }
    order
}

/// The median over rounds of `value / baseline's value`, where `points`
/// are `(variant, round, value)`: each of `variant`'s values is paired with
/// `baseline`'s of the same round (which ran minutes apart at most, so the
/// machine's slower drift cancels); `None` if no round has both with a
/// positive baseline value.
fn per_round_ratio(
    points: &[(Variant, u32, f64)],
    variant: Variant,
    baseline: Variant,
) -> Option<f64> {
    let ratios: Vec<f64> = points
        .iter()
        .filter(|p| p.0 == variant)
        .filter_map(|&(_, round, value)| {
            let &(_, _, base) = points.iter().find(|b| b.0 == baseline && b.1 == round)?;
            (base > 0.0).then(|| value / base)
        })
        .collect();
    (!ratios.is_empty()).then(|| median(ratios))
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

fn summarize(variants: &[Variant], runs: &[Run]) -> Vec<Summary> {
    let mut out: Vec<Summary> = variants
        .iter()
        .map(|&variant| {
            let rs: Vec<&Run> = runs.iter().filter(|r| r.variant() == variant).collect();
            let med = |f: &dyn Fn(&Run) -> f64| median(rs.iter().map(|r| f(r)).collect());
            let requests = |r: &Run| r.delta(|t| t.requests).max(1) as f64;
            Summary {
                mode: variant.mode,
                defects: variant.defects,
                runtime: variant.runtime,
                label: variant.label(),
                rps: med(&|r| r.load.rps),
                ratio_to_baseline: None,
                cpu_ratio_to_baseline: None,
                ratio_to_arc: None,
                latency_avg_ms: med(&|r| r.load.latency_avg_ms),
                latency_p99_ms: med(&|r| r.load.latency_p99_ms),
                peak_rss_mib: rs.iter().map(|r| r.peak_rss_bytes).max().unwrap_or(0) as f64 / MIB,
                rss_growth_mib_per_min: med(&|r| r.rss_growth_mib_per_min),
                rss_drift_after_30s: rs
                    .iter()
                    .filter_map(|r| rss_drift_after(&r.rss, 30.0))
                    .reduce(f64::max),
                heap_lock_contended: {
                    let lock = |f: fn(&crate::locked_alloc::LockCounts) -> u64| {
                        rs.iter()
                            .map(|r| {
                                f(&r.stats_after.heap_lock)
                                    .saturating_sub(f(&r.stats_before.heap_lock))
                            })
                            .sum::<u64>()
                    };
                    let acquired = lock(|c| c.acquired);
                    (acquired > 0).then(|| lock(|c| c.contended) as f64 / acquired as f64)
                },
                live_at_end: med(&|r| r.stats_after.total.live as f64) as u64,
                freed_by_collector: med(&|r| r.delta(|t| t.freed_by_collector) as f64) as u64,
                collections: med(&|r| r.delta(|t| t.collections()) as f64) as u64,
                traced_per_collection: med(&|r| {
                    r.delta(|t| t.nodes_traced) as f64 / r.delta(|t| t.collections()).max(1) as f64
                }),
                traced_per_request: med(&|r| r.delta(|t| t.nodes_traced) as f64 / requests(r)),
                collector_share: med(&|r| r.collector_share),
                server_cpu_us_per_request: med(&|r| r.server_cpu_us_per_request),
                server_user_cpu_us_per_request: med(&|r| r.server_user_cpu_us_per_request),
                user_cpu_ratio_to_baseline: None,
                errors: rs.iter().map(|r| r.load.errors).sum(),
                non_2xx: rs.iter().map(|r| r.load.requests - r.load.ok()).sum(),
            }
        })
        .collect();
    // Ratios are medians of per-round ratios (each run against the
    // baseline's run of the same round), not ratios of medians: on a host
    // whose speed drifts between rounds, a round's two runs are the closest
    // in time.
    let find = |runtime: Runtime, mode: Mode| {
        variants
            .iter()
            .copied()
            .find(|v| v.runtime == runtime && v.mode == mode)
    };
    let points = |f: fn(&Run) -> f64| -> Vec<(Variant, u32, f64)> {
        runs.iter().map(|r| (r.variant(), r.round, f(r))).collect()
    };
    let rps = points(|r| r.load.rps);
    let cpu = points(|r| r.server_cpu_us_per_request);
    let user = points(|r| r.server_user_cpu_us_per_request);
    for (s, &variant) in out.iter_mut().zip(variants) {
        if let Some(base) = find(variant.runtime, Mode::ArcWeak) {
            s.ratio_to_baseline = per_round_ratio(&rps, variant, base);
            s.cpu_ratio_to_baseline = per_round_ratio(&cpu, variant, base);
            s.user_cpu_ratio_to_baseline = per_round_ratio(&user, variant, base);
        }
        if let Some(arc) = find(variant.runtime, Mode::Arc) {
            s.ratio_to_arc = per_round_ratio(&rps, variant, arc);
        }
    }
    out
}

/// Largest `|rss(t) - rss(at)| / rss(at)` over the samples after `at`
/// seconds, where `rss(at)` is the first sample at or after `at`; `None`
/// unless the samples reach at least `2 × at`.
fn rss_drift_after(samples: &[(f64, u64)], at: f64) -> Option<f64> {
    let last = samples.last()?.0;
    if last < 2.0 * at {
        return None;
    }
    let start = samples.iter().position(|&(t, _)| t >= at)?;
    let base = samples[start].1.max(1) as f64;
    samples[start..]
        .iter()
        .map(|&(_, b)| (b as f64 - base).abs() / base)
        .reduce(f64::max)
}

/// One defect's part in the collapse of `orc-nim16-faithful` against
/// `orc-nim16`, on one runtime.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ablation {
    /// The runtime.
    pub runtime: Runtime,
    /// The row's label: a defect's name, `all`, or `interaction` (what the
    /// defects cost together beyond the sum of their costs alone).
    pub defect: String,
    /// req/s of orc-nim16 with this defect (all of them for `all`).
    pub rps: Option<f64>,
    /// Loss of req/s against orc-nim16: `1 - rps / rps(orc-nim16)`.
    pub rps_loss: f64,
    /// Share of the whole collapse's req/s loss (all = 1).
    pub rps_share: Option<f64>,
    /// Extra server CPU per request against orc-nim16, µs.
    pub extra_cpu_us_per_request: f64,
    /// Share of the whole collapse's extra CPU per request (all = 1).
    pub cpu_share: Option<f64>,
}

/// Apportions the collapse (orc-nim16 → orc-nim16-faithful) to the defects,
/// per runtime: each defect alone, the sum's remainder, and all together.
fn ablate(summary: &[Summary]) -> Vec<Ablation> {
    let mut rows = Vec::new();
    let runtimes = first_occurrences(&summary.iter().map(|s| s.runtime).collect::<Vec<_>>());
    for runtime in runtimes {
        let get = |mode: Mode, defects: Defects| {
            summary
                .iter()
                .find(|s| s.runtime == runtime && s.mode == mode && s.defects == defects)
        };
        let (Some(none), Some(all)) = (
            get(Mode::OrcNim16, Defects::NONE),
            get(Mode::OrcNim16Faithful, Defects::ALL),
        ) else {
            continue;
        };
        let loss = |s: &Summary| 1.0 - s.rps / none.rps.max(1e-9);
        let extra = |s: &Summary| s.server_cpu_us_per_request - none.server_cpu_us_per_request;
        let (all_loss, all_extra) = (loss(all), extra(all));
        let share = |part: f64, whole: f64| (whole > 0.0).then(|| part / whole);
        let (mut sum_loss, mut sum_extra) = (0.0, 0.0);
        for (name, d) in Defects::NAMES.iter().zip(Defects::each()) {
            let Some(s) = get(Mode::OrcNim16Faithful, d) else {
                continue;
            };
            sum_loss += loss(s);
            sum_extra += extra(s);
            rows.push(Ablation {
                runtime,
                defect: (*name).to_owned(),
                rps: Some(s.rps),
                rps_loss: loss(s),
                rps_share: share(loss(s), all_loss),
                extra_cpu_us_per_request: extra(s),
                cpu_share: share(extra(s), all_extra),
            });
        }
        rows.push(Ablation {
            runtime,
            defect: "interaction".to_owned(),
            rps: None,
            rps_loss: all_loss - sum_loss,
            rps_share: share(all_loss - sum_loss, all_loss),
            extra_cpu_us_per_request: all_extra - sum_extra,
            cpu_share: share(all_extra - sum_extra, all_extra),
        });
        rows.push(Ablation {
            runtime,
            defect: "all".to_owned(),
            rps: Some(all.rps),
            rps_loss: all_loss,
            rps_share: share(all_loss, all_loss),
            extra_cpu_us_per_request: all_extra,
            cpu_share: share(all_extra, all_extra),
        });
    }
    rows
}

/// The ablation as a Markdown table.
fn render_ablation(rows: &[Ablation]) -> String {
    let pct = |x: Option<f64>| x.map_or("–".to_owned(), |x| format!("{:.0} %", x * 100.0));
    let mut out = String::from(
        "\nThe collapse by cause: orc-nim16 plus each Nim 1.6.12 defect alone, against orc-nim16 \
         (share: of what all the defects together cost; \"–\": all together cost nothing to apportion)\n\n\
         | runtime | defect | req/s | req/s lost | share of the loss | extra CPU/request | share of the extra CPU |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.1} % | {} | {:+.2} µs | {} |\n",
            r.runtime,
            r.defect,
            r.rps.map_or("–".to_owned(), |x| format!("{x:.0}")),
            r.rps_loss * 100.0,
            pct(r.rps_share),
            r.extra_cpu_us_per_request,
            pct(r.cpu_share),
        ));
    }
    out
}

/// The summary as a Markdown table (it reads as plain text too).
pub fn render_table(
    summary: &[Summary],
    machine: &Machine,
    args: &CompareArgs,
    connections: u32,
    duration: Duration,
) -> String {
    let mut out = format!(
        "\n{} CPUs ({}), Linux {}; server {} threads, allocator {}; {} connections (load threads {}), {:?} per run, {} round(s), medians{}\n\n",
        machine.cpus,
        machine.cpu_model,
        machine.kernel,
        args.threads,
        args.allocator.name(),
        connections,
        args.client_sched.name(),
        duration,
        args.repeat,
        if summary.iter().any(|s| s.runtime == Runtime::WorkStealing) {
            "; `/ws`: work-stealing runtime with recycler::sync pointers (vs arc-weak, vs arc: on the same runtime; live and collector counts process-wide)"
        } else {
            ""
        }
    );
    out.push_str("| mode | req/s | vs arc-weak | vs arc | latency avg | latency p99 | peak RSS | RSS growth | live at end | freed by collector | collections | collector CPU | server CPU/request | of which user | CPU/request vs arc-weak | user CPU vs arc-weak |\n");
    out.push_str(
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let ratio = |r: Option<f64>| r.map_or("–".to_owned(), |r| format!("{r:.2}×"));
    // Results written before the split have no user time.
    let user_us = |us: f64| {
        if us > 0.0 {
            format!("{us:.2} µs")
        } else {
            "–".to_owned()
        }
    };
    for s in summary {
        out.push_str(&format!(
            "| {} | {:.0} | {} | {} | {:.2} ms | {:.2} ms | {:.1} MiB | {:+.1} MiB/min | {} | {} | {} | {:.1} % | {:.2} µs | {} | {} | {} |\n",
            s.label,
            s.rps,
            ratio(s.ratio_to_baseline),
            ratio(s.ratio_to_arc),
            s.latency_avg_ms,
            s.latency_p99_ms,
            s.peak_rss_mib,
            s.rss_growth_mib_per_min,
            s.live_at_end,
            s.freed_by_collector,
            s.collections,
            s.collector_share * 100.0,
            s.server_cpu_us_per_request,
            user_us(s.server_user_cpu_us_per_request),
            ratio(s.cpu_ratio_to_baseline),
            ratio(s.user_cpu_ratio_to_baseline),
        ));
    }
    for s in summary {
        if let Some(drift) = s.rss_drift_after_30s {
            out.push_str(&format!(
                "\n{}: RSS stayed within {:.1} % of its value 30 s into the load",
                s.label,
                drift * 100.0
            ));
        }
        if let Some(contended) = s.heap_lock_contended {
            out.push_str(&format!(
                "\n{}: heap lock contended on {:.3} % of its acquisitions",
                s.label,
                contended * 100.0
            ));
        }
    }
    if summary
        .iter()
        .any(|s| s.rss_drift_after_30s.is_some() || s.heap_lock_contended.is_some())
    {
        out.push('\n');
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
pub fn get_stats(addr: SocketAddr) -> anyhow::Result<ServerStats> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line() {
        assert_eq!(slope(&[(0.0, 1.0)]), 0.0);
        let line: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 3.0 * i as f64 + 1.0)).collect();
        assert!((slope(&line) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn rss_drift_is_measured_from_the_first_sample_at_30_s() {
        let mib = 1 << 20;
        // Warm-up (negative times) and the first 30 s do not count.
        let samples = [
            (-5.0, 1),
            (0.0, 5 * mib),
            (29.0, 50 * mib),
            (30.5, 20 * mib),
            (45.0, 21 * mib),
            (60.0, 19 * mib),
        ];
        let drift = rss_drift_after(&samples, 30.0).unwrap();
        assert!((drift - 0.05).abs() < 1e-12, "{drift}");
        // A run shorter than a minute has no drift figure.
        assert_eq!(rss_drift_after(&samples[..5], 30.0), None);
        assert_eq!(rss_drift_after(&[], 30.0), None);
    }

    fn parse(args: &[&str]) -> CompareArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            compare: CompareArgs,
        }
        Cli::try_parse_from(std::iter::once("compare").chain(args.iter().copied()))
            .unwrap()
            .compare
    }

    #[test]
    fn presets_set_the_load_and_flags_override_them() {
        let plain = parse(&[]);
        assert_eq!(
            (plain.connections(), plain.duration()),
            (256, Duration::from_secs(10))
        );
        let seed = parse(&["--preset", "seed"]);
        assert_eq!(
            (seed.connections(), seed.duration()),
            (1000, Duration::from_secs(60))
        );
        let big = parse(&["--preset", "seed-10k", "--duration", "15s"]);
        assert_eq!(
            (big.connections(), big.duration()),
            (10_000, Duration::from_secs(15))
        );
        let mine = parse(&["--preset", "seed", "--connections", "64"]);
        assert_eq!(mine.connections(), 64);
    }

    #[test]
    fn the_ablation_runs_the_baseline_nim16_each_defect_and_all() {
        let args = parse(&["--ablation", "--modes", "orc", "--runtimes", "per-thread"]);
        let labels: Vec<String> = args.variants().iter().map(|v| v.label()).collect();
        assert_eq!(
            labels,
            [
                "arc-weak",
                "orc-nim16",
                "orc-nim16+all-cyclic",
                "orc-nim16+shared-threshold",
                "orc-nim16+locked-alloc",
                "orc-nim16-faithful"
            ]
        );
        // Without --ablation the defects apply to orc-nim16-faithful only.
        let args = parse(&[
            "--modes",
            "orc,orc-nim16-faithful",
            "--nim16-defects",
            "locked-alloc",
        ]);
        let v = args.variants();
        assert_eq!(v[0].defects, Defects::NONE);
        assert_eq!(v[1].label(), "orc-nim16+locked-alloc");
    }

    #[test]
    fn even_rounds_run_in_reverse_and_ratios_pair_runs_of_one_round() {
        let v = |mode| Variant::new(Runtime::WorkStealing, mode, Defects::NONE);
        let (base, orc, arc) = (v(Mode::ArcWeak), v(Mode::Orc), v(Mode::Arc));
        assert_eq!(round_order(&[base, orc], 1), [base, orc]);
        assert_eq!(round_order(&[base, orc], 2), [orc, base]);
        assert_eq!(round_order(&[base, orc], 3), [base, orc]);
        // The host runs at half speed in round 2: two of three rounds say
        // 1.2, which their median keeps; the medians' ratio (12 / 11) would
        // not.
        let points = [
            (base, 1, 10.0),
            (orc, 1, 12.0),
            (orc, 2, 24.0),
            (base, 2, 20.0),
            (arc, 2, 12.0),
            (base, 3, 11.0),
            (orc, 3, 11.0),
        ];
        let ratio = per_round_ratio(&points, orc, base).unwrap();
        assert!((ratio - 1.2).abs() < 1e-12, "{ratio}");
        // Only round 2 has both.
        assert_eq!(per_round_ratio(&points, arc, base), Some(0.6));
        assert_eq!(per_round_ratio(&points, base, v(Mode::OrcNim16)), None);
        let zero = [(base, 1, 0.0), (orc, 1, 12.0)];
        assert_eq!(per_round_ratio(&zero, orc, base), None);
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
