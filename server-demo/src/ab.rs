//! `ab`: two servers up at once, loaded in alternating short slices, for
//! differences of a few per cent that `compare`'s rounds cannot resolve on
//! a noisy machine.
//!
//! `compare` starts one server per run and loads it for a round's duration;
//! two runs of a round are seconds to minutes apart, and a shared host's
//! speed moves by 20–30 % over such spans. `ab` starts both servers (A and
//! B: two modes, or one mode built twice, `--a-exe`/`--b-exe`), warms both
//! up, then runs `--pairs` pairs of `--slice`-long loads, A then B in even
//! pairs and B then A in odd ones (ABBA, so a steady drift favours neither).
//! The idle server takes no CPU while the other is loaded. Around each slice
//! it reads the loaded server's `/stats`: the server's own CPU time (user +
//! system, the whole process) and the requests it answered, so a slice's
//! CPU per request is the server's, not the load generator's.
//!
//! A server process has a cost of its own for its whole life (where its
//! heap and stacks landed, say): two builds differing only in cold paths
//! read B/A 1.022× (interval 1.014–1.030) and, swapped, 1.022× again
//! (0.992–1.031), each side the dearer in turn, so the interval of one run
//! does not cover the processes. So
//! `--restarts N` splits the pairs into N rounds, each with fresh servers
//! (started A first in even rounds, B first in odd ones) and its own warm-up:
//! the median and its interval then span N processes a side, the rounds'
//! own medians show how far processes differ, and from 6 rounds on their
//! median gets a distribution-free interval with the rounds as the samples
//! (the one that covers the processes' own costs).
//!
//! The host may also move the machine's vCPUs while `ab` runs: on the
//! 2-vCPU guests of the results, between a shared last-level cache and
//! separate ones every few seconds to minutes, and a server whose workers
//! share more cache lines pays more for the second (thirty-first session:
//! orc/ws 1.107× careful ARC in the pairs near, 1.169× in those apart).
//! So `ab` times a cache line's round trip between CPUs 0 and 1
//! (`placement`, 2–8 ms, both servers idle) before the first pair of a
//! round and after every pair, and if the round trips fall into two groups
//! it gives the CPU ratio of the pairs near and of those apart as well
//! ([`ByPlacement`]).
//!
//! The result is the median over pairs of B's CPU per request over A's,
//! with a distribution-free 95 % confidence interval (order statistics of
//! the pairs' ratios: the median's interval needs no assumption about the
//! noise's distribution) and a two-sided sign test of "B costs the same as
//! A" (how many pairs B was cheaper in). Throughput and p99 ratios are
//! medians over pairs as well. Memory is sampled through the whole run,
//! idle stretches included, so only its peak and end are reported; RSS
//! growth under steady load is `compare`'s.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use paired::{machine, median, median_interval, Machine};
use serde::{Deserialize, Serialize};

use crate::child::ServerChild;
use crate::compare::{get_stats, Sampler, MIB};
use crate::load::{self, ClientSched, Target};
use crate::locked_alloc::Allocator;
use crate::mode::{Defects, Mode, Runtime, Variant};
use crate::placement;

/// Confidence of the median ratio's interval.
const CONFIDENCE: f64 = 0.95;

/// `server-demo ab`'s flags.
#[derive(Args, Debug, Clone)]
pub struct AbArgs {
    /// A's mode (the reference of the ratios).
    #[arg(long, value_enum, default_value = "arc-weak")]
    pub a: Mode,
    /// B's mode.
    #[arg(long, value_enum, default_value = "orc")]
    pub b: Mode,
    /// The `server-demo` executable that serves A [default: this one], e.g.
    /// the build of another commit, to measure a change of code.
    #[arg(long)]
    pub a_exe: Option<PathBuf>,
    /// The `server-demo` executable that serves B [default: this one].
    #[arg(long)]
    pub b_exe: Option<PathBuf>,
    /// The servers' runtime.
    #[arg(long, value_enum, default_value = "work-stealing")]
    pub runtime: Runtime,
    /// Nim 1.6.12 defects of orc-nim16-faithful (as `compare`'s).
    #[arg(long, default_value = "all", value_parser = Defects::parse)]
    pub nim16_defects: Defects,
    /// Server worker threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: u16,
    /// Load-generator connections.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub connections: u32,
    /// Load-generator threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub load_threads: u16,
    /// Pace the load at this many requests per second on both servers (as
    /// `load --rate`), below what the slower one can serve, so that both
    /// share the CPUs with the same client [default: closed loop].
    #[arg(long, value_parser = load::parse_rate)]
    pub rate: Option<f64>,
    /// How the load threads are scheduled (as `load --sched`): `batch`
    /// keeps a woken load thread from preempting the server, which charged
    /// the slower server for scheduling its client.
    #[arg(long, value_enum, default_value = "batch")]
    pub client_sched: ClientSched,
    /// One slice of load, e.g. 2s.
    #[arg(long, default_value = "2s", value_parser = crate::parse_positive_duration)]
    pub slice: Duration,
    /// Pairs of slices (each loads A once and B once).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub pairs: u32,
    /// Rounds, each with freshly started servers (A first in even rounds, B
    /// first in odd ones) and its own warm-up; the pairs are split evenly
    /// between them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub restarts: u32,
    /// Load on each server before the first pair (heap and hubs settle).
    #[arg(long, default_value = "3s", value_parser = crate::parse_duration)]
    pub warmup: Duration,
    /// The servers' allocator (both the same).
    #[arg(long, value_enum, default_value = "system")]
    pub allocator: Allocator,
    /// Directory for ab.json.
    #[arg(long, default_value = "target/ab")]
    pub out: PathBuf,
}

/// One side (A or B) of the comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Side {
    /// `A` or `B`.
    pub name: String,
    /// The variant's label (`orc/ws`, ...).
    pub label: String,
    /// The executable, if not `ab`'s own.
    pub exe: Option<PathBuf>,
    /// Median of the slices' CPU per request, µs.
    pub cpu_us_per_request: f64,
    /// Median of the slices' user-space CPU per request, µs (the rest of
    /// `cpu_us_per_request` is the kernel's).
    #[serde(default)]
    pub user_us_per_request: f64,
    /// Median of the slices' req/s.
    pub rps: f64,
    /// Median of the slices' p99 latency, ms.
    pub p99_ms: f64,
    /// Collector CPU over server CPU, over all of this side's slices.
    pub collector_share: f64,
    /// Highest RSS sampled, bytes.
    pub peak_rss_bytes: u64,
    /// Last RSS sampled, bytes.
    pub end_rss_bytes: u64,
    /// Non-2xx responses and connection errors, over all slices.
    pub failures: u64,
}

/// One slice of load on one server.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    /// Server CPU seconds during the slice.
    pub cpu_s: f64,
    /// The user-space part of `cpu_s`.
    #[serde(default)]
    pub user_cpu_s: f64,
    /// Requests the server answered during the slice.
    pub requests: u64,
    /// Collector CPU seconds during the slice.
    pub collector_cpu_s: f64,
    /// The load generator's req/s.
    pub rps: f64,
    /// The load generator's p99 latency, ms.
    pub p99_ms: f64,
    /// Non-2xx responses and connection errors.
    pub failures: u64,
}

impl Slice {
    /// Server CPU per request, µs (0 if nothing was answered).
    pub fn cpu_us_per_request(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.cpu_s * 1e6 / self.requests as f64
        }
    }

    /// Server CPU in user space per request, µs (0 if nothing was answered).
    pub fn user_us_per_request(&self) -> f64 {
        self.split_per_request().0
    }

    /// Server CPU per request, µs, split into (user, system).
    pub fn split_per_request(&self) -> (f64, f64) {
        crate::stats::split_per_request(self.cpu_s, self.user_cpu_s, self.requests)
    }
}

/// One pair: A's slice and B's, adjacent in time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// The round (`--restarts`) whose servers ran it.
    #[serde(default)]
    pub round: u32,
    /// Whether B ran first (odd pairs).
    pub b_first: bool,
    /// A cache line's round trip between CPUs 0 and 1 just before and just
    /// after the pair, ns (none on one CPU, or in files of older builds):
    /// where the host had put the vCPUs (see `placement`).
    #[serde(default)]
    pub round_trip_ns: Option<(f64, f64)>,
    /// A's slice.
    pub a: Slice,
    /// B's slice.
    pub b: Slice,
}

/// The comparison: medians over pairs of B / A.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Pairs with a ratio (both slices answered requests).
    pub pairs: usize,
    /// Median over pairs of B's CPU per request / A's.
    pub cpu_ratio: f64,
    /// Its distribution-free confidence interval (none with too few pairs).
    pub cpu_ratio_ci: Option<(f64, f64)>,
    /// The interval's confidence.
    pub confidence: f64,
    /// Pairs in which B used less CPU per request than A.
    pub b_cheaper: usize,
    /// Two-sided sign test: the probability of a split at least this uneven
    /// if B and A cost the same.
    pub sign_test_p: f64,
    /// Median over pairs of B's user-space CPU per request / A's: where the
    /// CPU ratio comes from, the server's own code or the kernel's work for
    /// it (`system_cpu_ratio`).
    #[serde(default)]
    pub user_cpu_ratio: f64,
    /// Median over pairs of B's system CPU per request / A's.
    #[serde(default)]
    pub system_cpu_ratio: f64,
    /// Median over pairs of B's req/s / A's.
    pub rps_ratio: f64,
    /// Median over pairs of B's p99 / A's.
    pub p99_ratio: f64,
    /// Each round's median CPU ratio, in order (`--restarts`).
    #[serde(default)]
    pub round_cpu_ratios: Vec<f64>,
    /// The distribution-free interval of the rounds' median, with the
    /// rounds as the samples: it covers the processes' own costs (none
    /// below 6 rounds).
    #[serde(default)]
    pub round_cpu_ratio_ci: Option<(f64, f64)>,
    /// The CPU ratio by the vCPUs' placement, if the pairs' round trips
    /// fall into two groups (`placement::split`).
    #[serde(default)]
    pub by_placement: Option<ByPlacement>,
}

/// [`Verdict::cpu_ratio`] over the pairs of each placement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ByPlacement {
    /// The round trip between the two groups, ns.
    pub threshold_ns: f64,
    /// Pairs with both round trips below it.
    pub near: Group,
    /// Pairs with both round trips above it.
    pub apart: Group,
    /// Pairs during which the placement changed.
    pub changed: usize,
}

/// The CPU ratio over some of the pairs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// Pairs in the group.
    pub pairs: usize,
    /// Median of their CPU ratios (0 without pairs).
    pub cpu_ratio: f64,
    /// Its distribution-free interval (none with too few pairs).
    pub cpu_ratio_ci: Option<(f64, f64)>,
}

/// Everything `ab.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AbResults {
    /// Where it ran.
    pub machine: Machine,
    /// Runtime, connections, slice and pairs.
    pub runtime: Runtime,
    /// Load-generator connections.
    pub connections: u32,
    /// The paced load's requests per second (none: closed loop).
    #[serde(default)]
    pub rate: Option<f64>,
    /// How the load threads were scheduled.
    #[serde(default = "ClientSched::legacy")]
    pub client_sched: ClientSched,
    /// Seconds per slice.
    pub slice_s: f64,
    /// A.
    pub a: Side,
    /// B.
    pub b: Side,
    /// B against A.
    pub verdict: Verdict,
    /// Every pair, in order.
    pub pair_slices: Vec<Pair>,
}

/// A running server of one side.
struct Server {
    child: ServerChild,
    target: Target,
    sampler: Sampler,
}

impl Server {
    fn start(
        variant: Variant,
        exe: Option<&std::path::Path>,
        args: &AbArgs,
    ) -> anyhow::Result<Self> {
        let child = ServerChild::start(variant, args.threads, args.allocator, exe)?;
        let sampler = Sampler::start(child.pid());
        let target = Target::parse(&format!("http://{}/", child.addr))?;
        Ok(Server {
            child,
            target,
            sampler,
        })
    }

    /// Loads the server for `duration` and measures it.
    fn slice(&self, args: &AbArgs, duration: Duration) -> anyhow::Result<Slice> {
        let before = get_stats(self.child.addr)?;
        let report = load::load(
            &self.target,
            args.connections,
            args.load_threads,
            args.rate,
            args.client_sched,
            duration,
        )?;
        let after = get_stats(self.child.addr)?;
        Ok(Slice {
            cpu_s: (after.cpu_s - before.cpu_s).max(0.0),
            user_cpu_s: (after.user_cpu_s - before.user_cpu_s).max(0.0),
            requests: after.total.requests.saturating_sub(before.total.requests),
            collector_cpu_s: (after.total.total_pause_cpu_s - before.total.total_pause_cpu_s)
                .max(0.0),
            rps: report.rps,
            p99_ms: report.latency_p99_ms,
            failures: report.errors + report.requests.saturating_sub(report.ok()),
        })
    }

    /// Stops sampling and the server; (peak, last) RSS.
    fn finish(self) -> (u64, u64) {
        let Server {
            mut child, sampler, ..
        } = self;
        let samples = sampler.finish();
        child.stop();
        let peak = samples.iter().map(|&(_, b)| b).max().unwrap_or(0);
        let end = samples.last().map_or(0, |&(_, b)| b);
        (peak, end)
    }
}

/// Runs `ab`.
pub fn run(args: &AbArgs) -> anyhow::Result<()> {
    if args.a == args.b && args.a_exe == args.b_exe {
        bail!("A and B are the same server: give two modes (--a, --b) or two builds (--a-exe, --b-exe)");
    }
    if args.restarts > args.pairs {
        bail!(
            "--restarts {} leaves rounds without pairs (--pairs {})",
            args.restarts,
            args.pairs
        );
    }
    for exe in [&args.a_exe, &args.b_exe].into_iter().flatten() {
        if !exe.is_file() {
            bail!("{} is not a file", exe.display());
        }
    }
    let nofile = crate::compare::ensure_descriptors(args.connections)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create the output directory {}", args.out.display()))?;
    crate::child::install_interrupt_handler()?;
    let machine = machine();
    let variant = |mode| Variant::new(args.runtime, mode, args.nim16_defects);
    let (va, vb) = (variant(args.a), variant(args.b));
    let label = |v: Variant, exe: &Option<PathBuf>| server_label(&v.label(), exe);
    eprintln!(
        "ab: A = {}, B = {} on {} CPUs ({}); server {} threads, load {} connections on {} threads ({}){}; {} pairs of {:?} slices after {:?} warm-up each; RLIMIT_NOFILE {}",
        label(va, &args.a_exe),
        label(vb, &args.b_exe),
        machine.cpus,
        machine.cpu_model,
        args.threads,
        args.connections,
        args.load_threads,
        args.client_sched.name(),
        args.rate
            .map_or_else(String::new, |r| format!(" at {r:.0} req/s")),
        args.pairs,
        args.slice,
        args.warmup,
        nofile.0,
    );
    let mut pairs = Vec::new();
    let (mut a_rss, mut b_rss) = ((0, 0), (0, 0));
    for round in 0..args.restarts {
        // Pairs `first..last` of `args.pairs`, split as evenly as possible.
        let share =
            |r: u32| (u64::from(args.pairs) * u64::from(r) / u64::from(args.restarts)) as u32;
        let (first, last) = (share(round), share(round + 1));
        let a_first = round % 2 == 0;
        let start = |v, exe: &Option<PathBuf>| Server::start(v, exe.as_deref(), args);
        let (a, b) = if a_first {
            let a = start(va, &args.a_exe)?;
            (a, start(vb, &args.b_exe)?)
        } else {
            let b = start(vb, &args.b_exe)?;
            (start(va, &args.a_exe)?, b)
        };
        if !args.warmup.is_zero() {
            let order = if a_first { [&a, &b] } else { [&b, &a] };
            for server in order {
                server.slice(args, args.warmup)?;
            }
        }
        run_round(args, round, first..last, &a, &b, &mut pairs)?;
        let (ra, rb) = (a.finish(), b.finish());
        a_rss = (a_rss.0.max(ra.0), ra.1);
        b_rss = (b_rss.0.max(rb.0), rb.1);
    }
    let results = AbResults {
        machine,
        runtime: args.runtime,
        connections: args.connections,
        rate: args.rate,
        client_sched: args.client_sched,
        slice_s: args.slice.as_secs_f64(),
        a: side("A", va, &args.a_exe, pairs.iter().map(|p| p.a), a_rss),
        b: side("B", vb, &args.b_exe, pairs.iter().map(|p| p.b), b_rss),
        verdict: verdict(&pairs),
        pair_slices: pairs,
    };
    println!("{}", render(&results));
    let path = args.out.join("ab.json");
    std::fs::write(&path, serde_json::to_string_pretty(&results)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// Pairs `numbers` (of `args.pairs`) on one round's servers, appended to
/// `pairs`.
fn run_round(
    args: &AbArgs,
    round: u32,
    numbers: core::ops::Range<u32>,
    a: &Server,
    b: &Server,
    pairs: &mut Vec<Pair>,
) -> anyhow::Result<()> {
    // Between slices both servers are idle: the two CPUs are free to pass
    // a line (2–8 ms). On one CPU, pinning to CPU 1 fails: no round trip.
    let placement = || placement::round_trip_ns(placement::AB_TRIPS, 0, 1).ok();
    let mut before = placement();
    for i in numbers {
        let b_first = i % 2 == 1;
        let (sa, sb) = if b_first {
            let sb = b.slice(args, args.slice)?;
            (a.slice(args, args.slice)?, sb)
        } else {
            let sa = a.slice(args, args.slice)?;
            (sa, b.slice(args, args.slice)?)
        };
        let after = placement();
        let pair = Pair {
            round,
            b_first,
            round_trip_ns: before.zip(after),
            a: sa,
            b: sb,
        };
        before = after;
        eprintln!(
            "[pair {:>3}/{}] {}  A {:>6.2} µs/req {:>7.0} req/s   B {:>6.2} µs/req {:>7.0} req/s   B/A {:.3}",
            i + 1,
            args.pairs,
            if b_first { "BA" } else { "AB" },
            pair.a.cpu_us_per_request(),
            pair.a.rps,
            pair.b.cpu_us_per_request(),
            pair.b.rps,
            pair.b.cpu_us_per_request() / pair.a.cpu_us_per_request().max(f64::MIN_POSITIVE),
        );
        pairs.push(pair);
    }
    Ok(())
}

/// One side's summary over its slices; `rss` is (peak, last).
fn side(
    name: &str,
    variant: Variant,
    exe: &Option<PathBuf>,
    slices: impl Iterator<Item = Slice>,
    rss: (u64, u64),
) -> Side {
    let slices: Vec<Slice> = slices.collect();
    let cpu: f64 = slices.iter().map(|s| s.cpu_s).sum();
    let collector: f64 = slices.iter().map(|s| s.collector_cpu_s).sum();
    Side {
        name: name.to_owned(),
        label: variant.label(),
        exe: exe.clone(),
        cpu_us_per_request: median(slices.iter().map(Slice::cpu_us_per_request).collect()),
        user_us_per_request: median(slices.iter().map(Slice::user_us_per_request).collect()),
        rps: median(slices.iter().map(|s| s.rps).collect()),
        p99_ms: median(slices.iter().map(|s| s.p99_ms).collect()),
        collector_share: if cpu > 0.0 {
            (collector / cpu).clamp(0.0, 1.0)
        } else {
            0.0
        },
        peak_rss_bytes: rss.0,
        end_rss_bytes: rss.1,
        failures: slices.iter().map(|s| s.failures).sum(),
    }
}

/// `label`, followed by the executable in parentheses if it is not `ab`'s own.
fn server_label(label: &str, exe: &Option<PathBuf>) -> String {
    match exe {
        Some(exe) => format!("{label} ({})", exe.display()),
        None => label.to_owned(),
    }
}

/// B against A over `pairs` (pairs where either side answered nothing, or
/// measured no CPU time, are left out): the CPU ratio's statistics are
/// `paired`'s.
pub fn verdict(pairs: &[Pair]) -> Verdict {
    let measured: Vec<&Pair> = pairs
        .iter()
        .filter(|p| p.a.requests > 0 && p.b.requests > 0)
        .collect();
    let cpu: Vec<(f64, f64)> = measured
        .iter()
        .map(|p| (p.a.cpu_us_per_request(), p.b.cpu_us_per_request()))
        .collect();
    let v = paired::verdict(&cpu, CONFIDENCE);
    let ratio = |f: fn(&Pair) -> (f64, f64)| {
        median(
            measured
                .iter()
                .map(|p| f(p))
                .filter(|&(_, a)| a > 0.0)
                .map(|(b, a)| b / a)
                .collect(),
        )
    };
    let rounds = measured.iter().map(|p| p.round).max().map_or(0, |r| r + 1);
    let round_cpu_ratios = (0..rounds)
        .map(|r| {
            median(
                measured
                    .iter()
                    .filter(|p| p.round == r)
                    .filter(|p| p.a.cpu_us_per_request() > 0.0)
                    .map(|p| p.b.cpu_us_per_request() / p.a.cpu_us_per_request())
                    .collect(),
            )
        })
        .collect::<Vec<f64>>();
    let mut sorted = round_cpu_ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let round_cpu_ratio_ci = median_interval(&sorted, CONFIDENCE);
    let by_placement = by_placement(&measured);
    Verdict {
        pairs: v.pairs,
        cpu_ratio: v.ratio,
        cpu_ratio_ci: v.interval,
        confidence: v.confidence,
        b_cheaper: v.b_lower,
        sign_test_p: v.sign_test_p,
        user_cpu_ratio: ratio(|p| (p.b.split_per_request().0, p.a.split_per_request().0)),
        system_cpu_ratio: ratio(|p| (p.b.split_per_request().1, p.a.split_per_request().1)),
        rps_ratio: ratio(|p| (p.b.rps, p.a.rps)),
        p99_ratio: ratio(|p| (p.b.p99_ms, p.a.p99_ms)),
        round_cpu_ratios,
        round_cpu_ratio_ci,
        by_placement,
    }
}

/// The CPU ratio of the pairs measured near and apart, if their round trips
/// fall into two groups.
fn by_placement(measured: &[&Pair]) -> Option<ByPlacement> {
    let trips: Vec<f64> = measured
        .iter()
        .filter_map(|p| p.round_trip_ns)
        .flat_map(|(before, after)| [before, after])
        .collect();
    let threshold_ns = placement::split(&trips)?;
    let group = |near: bool| {
        let cpu: Vec<(f64, f64)> = measured
            .iter()
            .filter(|p| {
                p.round_trip_ns.is_some_and(|(before, after)| {
                    (before < threshold_ns) == near && (after < threshold_ns) == near
                })
            })
            .map(|p| (p.a.cpu_us_per_request(), p.b.cpu_us_per_request()))
            .collect();
        let v = paired::verdict(&cpu, CONFIDENCE);
        Group {
            pairs: v.pairs,
            cpu_ratio: if v.pairs > 0 { v.ratio } else { 0.0 },
            cpu_ratio_ci: v.interval,
        }
    };
    let (near, apart) = (group(true), group(false));
    let placed = measured
        .iter()
        .filter(|p| p.round_trip_ns.is_some())
        .count();
    Some(ByPlacement {
        threshold_ns,
        changed: placed.saturating_sub(near.pairs + apart.pairs),
        near,
        apart,
    })
}

/// The summary table.
pub fn render(r: &AbResults) -> String {
    let v = &r.verdict;
    let mut out =
        format!(
        "{} CPUs ({}); {}; {} connections{}, load threads {}; {} pairs of {:.1}-s slices, alternating AB / BA\n\n",
        r.machine.cpus,
        r.machine.cpu_model,
        r.runtime,
        r.connections,
        r.rate
            .map_or_else(|| " (closed loop)".to_owned(), |q| format!(" paced at {q:.0} req/s")),
        r.client_sched.name(),
        v.pairs,
        r.slice_s
    );
    out.push_str("| side | server | CPU/request | of which user | req/s | p99 | collector CPU | peak RSS | RSS at end | failures |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for s in [&r.a, &r.b] {
        let server = server_label(&s.label, &s.exe);
        out.push_str(&format!(
            "| {} | {} | {:.2} µs | {:.2} µs | {:.0} | {:.2} ms | {:.1} % | {:.1} MiB | {:.1} MiB | {} |\n",
            s.name,
            server,
            s.cpu_us_per_request,
            s.user_us_per_request,
            s.rps,
            s.p99_ms,
            s.collector_share * 100.0,
            s.peak_rss_bytes as f64 / MIB,
            s.end_rss_bytes as f64 / MIB,
            s.failures
        ));
    }
    let ci = match v.cpu_ratio_ci {
        Some((lo, hi)) => format!("{:.0} % interval {lo:.3}–{hi:.3}", v.confidence * 100.0),
        None => "too few pairs for an interval".to_owned(),
    };
    out.push_str(&format!(
        "\nB/A, medians over pairs: CPU per request {:.3}× ({ci}); B cheaper in {} of {} pairs (sign test p = {:.3}); req/s {:.3}×; p99 {:.3}×",
        v.cpu_ratio, v.b_cheaper, v.pairs, v.sign_test_p, v.rps_ratio, v.p99_ratio
    ));
    if v.user_cpu_ratio > 0.0 {
        out.push_str(&format!(
            "\nCPU per request in user space {:.3}×, in the kernel {:.3}× (medians over pairs)",
            v.user_cpu_ratio, v.system_cpu_ratio
        ));
    }
    if v.round_cpu_ratios.len() > 1 {
        let rounds: Vec<String> = v
            .round_cpu_ratios
            .iter()
            .map(|r| format!("{r:.3}×"))
            .collect();
        let ci = match v.round_cpu_ratio_ci {
            Some((lo, hi)) => format!(
                "; across rounds {:.3}× ({:.0} % interval {lo:.3}–{hi:.3})",
                median(v.round_cpu_ratios.clone()),
                v.confidence * 100.0
            ),
            None => String::new(),
        };
        out.push_str(&format!(
            "\nCPU per request, each round's median (fresh servers): {}{ci}",
            rounds.join(", ")
        ));
    }
    if let Some(p) = &v.by_placement {
        let group = |g: &Group| match (g.pairs, g.cpu_ratio_ci) {
            (0, _) => "no pairs".to_owned(),
            (n, Some((lo, hi))) => format!("{:.3}× ({lo:.3}–{hi:.3}) in {n} pairs", g.cpu_ratio),
            (n, None) => format!("{:.3}× in {n} pairs", g.cpu_ratio),
        };
        out.push_str(&format!(
            "\nCPU per request by the vCPUs' placement (a cache line's round trip between CPUs 0 and 1 before and after each pair, near below {:.0} ns): near {}, apart {}; the placement changed during {} {}",
            p.threshold_ns,
            group(&p.near),
            group(&p.apart),
            p.changed,
            if p.changed == 1 { "pair" } else { "pairs" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(cpu_s: f64, requests: u64, rps: f64) -> Slice {
        Slice {
            cpu_s,
            user_cpu_s: cpu_s / 2.0,
            requests,
            collector_cpu_s: 0.0,
            rps,
            p99_ms: 1.0,
            failures: 0,
        }
    }

    /// `render` of a run of `pairs` whose verdict is `v`.
    fn render_pairs(v: Verdict, pairs: Vec<Pair>) -> String {
        let variant = Variant::new(Runtime::WorkStealing, Mode::Orc, Defects::default());
        render(&AbResults {
            machine: machine(),
            runtime: Runtime::WorkStealing,
            connections: 1,
            rate: None,
            client_sched: ClientSched::Batch,
            slice_s: 0.5,
            a: side("A", variant, &None, pairs.iter().map(|p| p.a), (0, 0)),
            b: side("B", variant, &None, pairs.iter().map(|p| p.b), (0, 0)),
            verdict: v,
            pair_slices: pairs,
        })
    }

    #[test]
    fn the_verdict_pairs_adjacent_slices_and_drops_empty_ones() {
        // The machine's speed halves midway; within each pair B costs
        // 1.1× A. A pair where A answered nothing is left out.
        let mut pairs: Vec<Pair> = (0..8)
            .map(|i| {
                let speed = if i < 4 { 1.0 } else { 2.0 };
                Pair {
                    round: u32::from(i >= 4),
                    b_first: i % 2 == 1,
                    round_trip_ns: None,
                    a: slice(speed, 1_000_000, 100.0),
                    b: slice(1.1 * speed, 1_000_000, 90.0),
                }
            })
            .collect();
        pairs.push(Pair {
            round: 1,
            b_first: false,
            round_trip_ns: None,
            a: slice(1.0, 0, 0.0),
            b: slice(1.0, 1000, 1.0),
        });
        let v = verdict(&pairs);
        assert_eq!(v.pairs, 8);
        assert!((v.cpu_ratio - 1.1).abs() < 1e-9);
        assert_eq!(v.b_cheaper, 0);
        assert!((v.sign_test_p - 2.0 / 256.0).abs() < 1e-12);
        let (lo, hi) = v.cpu_ratio_ci.expect("8 pairs give an interval");
        assert!((lo - 1.1).abs() < 1e-9 && (hi - 1.1).abs() < 1e-9);
        assert!((v.rps_ratio - 0.9).abs() < 1e-9);
        assert_eq!(v.round_cpu_ratios.len(), 2);
        assert!(v.round_cpu_ratios.iter().all(|r| (r - 1.1).abs() < 1e-9));
        // Two rounds are too few for an interval across rounds.
        assert_eq!(v.round_cpu_ratio_ci, None);
        // Without round trips (one CPU, an older file) there is no split.
        assert_eq!(v.by_placement, None);
    }

    #[test]
    fn the_verdict_splits_the_pairs_by_the_vcpus_placement() {
        // Six pairs near (round trips 80-95 ns), B 1.1× A; six apart
        // (350-420 ns), B 1.25× A, the host slower; two during which the
        // placement changed; one pair with an old file's missing round trips.
        let pair = |trips: Option<(f64, f64)>, a: f64, ratio: f64| Pair {
            round: 0,
            b_first: false,
            round_trip_ns: trips,
            a: slice(a, 1_000_000, 100.0),
            b: slice(a * ratio, 1_000_000, 90.0),
        };
        let mut pairs = Vec::new();
        for i in 0..6 {
            let f = f64::from(i);
            pairs.push(pair(Some((80.0 + f, 95.0 - f)), 8.0, 1.1));
            pairs.push(pair(Some((350.0 + 10.0 * f, 420.0 - f)), 9.5, 1.25));
        }
        pairs.push(pair(Some((85.0, 390.0)), 9.0, 1.4));
        pairs.push(pair(Some((400.0, 90.0)), 9.0, 1.4));
        pairs.push(pair(None, 8.0, 1.0));
        let v = verdict(&pairs);
        let p = v.by_placement.clone().expect("two placements");
        assert!(95.0 < p.threshold_ns && p.threshold_ns < 350.0);
        assert_eq!((p.near.pairs, p.apart.pairs, p.changed), (6, 6, 2));
        assert!((p.near.cpu_ratio - 1.1).abs() < 1e-9);
        assert!((p.apart.cpu_ratio - 1.25).abs() < 1e-9);
        let (lo, hi) = p.apart.cpu_ratio_ci.expect("6 pairs give an interval");
        assert!((lo - 1.25).abs() < 1e-9 && (hi - 1.25).abs() < 1e-9);
        let text = render_pairs(v, pairs);
        assert!(
            text.contains("near 1.100× (1.100–1.100) in 6 pairs, apart 1.250× (1.250–1.250) in 6 pairs; the placement changed during 2 pairs"),
            "{text}"
        );
        // One placement throughout: no split.
        let one: Vec<Pair> = (0..6)
            .map(|i| pair(Some((80.0 + f64::from(i), 90.0)), 8.0, 1.1))
            .collect();
        assert_eq!(verdict(&one).by_placement, None);
    }

    #[test]
    fn the_verdict_splits_the_cpu_ratio_into_user_and_kernel_time() {
        // A: 6 µs user + 4 µs kernel per request; B: 7.5 + 4.4.
        let with_user = |cpu_s: f64, user_cpu_s: f64| Slice {
            user_cpu_s,
            ..slice(cpu_s, 1_000_000, 100.0)
        };
        let pairs: Vec<Pair> = (0..6)
            .map(|i| Pair {
                round: 0,
                b_first: i % 2 == 1,
                round_trip_ns: None,
                a: with_user(10.0, 6.0),
                b: with_user(11.9, 7.5),
            })
            .collect();
        let v = verdict(&pairs);
        assert!((v.cpu_ratio - 1.19).abs() < 1e-9);
        assert!((v.user_cpu_ratio - 1.25).abs() < 1e-9);
        assert!((v.system_cpu_ratio - 1.1).abs() < 1e-9);
        let (user, system) = pairs[0].b.split_per_request();
        assert!((user - 7.5).abs() < 1e-9 && (system - 4.4).abs() < 1e-9);
        // A results file of an older build has no user time: the split is
        // then zero, not a ratio of garbage.
        let old = Slice {
            user_cpu_s: 0.0,
            ..pairs[0].a
        };
        assert_eq!(old.user_us_per_request(), 0.0);
        assert!(render_pairs(v, pairs).contains("in user space 1.250×, in the kernel 1.100×"));
    }
}
