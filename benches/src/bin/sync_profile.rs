//! A fixed amount of one sync workload, for instruction counts under
//! `valgrind --tool=callgrind` (deterministic where criterion's timings are
//! noisy on a busy machine): `cargo build --release -p benches --bin
//! sync_profile`, then
//! `valgrind --tool=callgrind target/release/sync_profile hub recycler-sync-gc 10000 100000`.
//!
//! Workloads: `hub <pointer> <H> <requests>` (one thread; with `<runs>`,
//! prints the median and minimum ns per request of the runs after the
//! first, the leaking pointer's release untimed),
//! `churn <pointer> <threads> <cycles per thread>` and
//! `random <pointer> <threads> <operations>` (the threaded random
//! operations), each with an optional last argument `<runs>`: the workload
//! runs that many times in one process and the time printed is the mean of
//! all runs but the first (what criterion's iterations measure: warm
//! thread-locals and allocator); pointers:
//! `recycler-sync-gc`, `recycler-sync-gc-thread`, `arc-leak`, and for the
//! hub `arc`, for the churn `arc-weak` (a `Weak` back edge: the request or
//! cycle freed by counting, what freeing costs without a collector); for
//! the hub also the single-threaded `recycler-gc`, `rc-leak` and `rc`, the
//! same ratios without atomics. Prints the nodes left alive at the
//! end (0 for the collectors). Freed memory stays in the process
//! (`benches::memory`), so that a leaking pointer's warm runs do not
//! page-fault.

use benches::heap::{Heap, SyncHeap};
use benches::live;
use benches::ptr::recycler_gc::RecyclerGc;
use benches::ptr::recycler_sync_gc::{RecyclerSyncGc, RecyclerSyncGcThread};
use benches::ptr::std_arc::StdArc;
use benches::ptr::std_rc::StdRc;
use benches::workloads::hub::{self, Back};
use benches::workloads::{cycle_churn, threaded};
use std::time::Duration;

fn usage() -> ! {
    eprintln!(
        "usage: sync_profile hub <recycler-sync-gc|recycler-sync-gc-thread|arc-leak|arc|recycler-gc|rc-leak|rc> <H> <requests> [runs]\n       \
         sync_profile churn <recycler-sync-gc|recycler-sync-gc-thread|arc-leak|arc-weak|recycler-gc|rc-leak> <threads> <cycles> [runs]\n       \
         sync_profile random <recycler-sync-gc|recycler-sync-gc-thread|arc> <threads> <operations> [runs]"
    );
    std::process::exit(2);
}

fn hub_run<H: Heap>(h: usize, requests: usize, leak: bool, back: Back, repeat: usize) {
    H::prepare();
    let root = hub::build_tree::<H>(h);
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat.max(1) {
        let mut kept = Vec::with_capacity(if leak { requests } else { 0 });
        let start = std::time::Instant::now();
        for _ in 0..requests {
            let req = hub::request::<H>(&root, back);
            if leak {
                kept.push(req);
            }
        }
        times.push(start.elapsed().as_nanos() as f64 / requests as f64);
        kept.into_iter().for_each(hub::release::<H>);
    }
    drop(root);
    H::collect();
    if repeat > 1 {
        // As criterion's iterations: the first run warms up; the others
        // give the median and the minimum (ns per request, leak not freed).
        // Of an even count, the mean of the two middle runs (the upper one
        // was printed until the thirty-second session: with `runs` 3, the
        // slower of the two timed runs).
        let timed = &times[1..];
        eprintln!(
            "{:.1} ns per request (median of {}), min {:.1}",
            paired::median(timed.to_vec()),
            timed.len(),
            timed.iter().copied().fold(f64::INFINITY, f64::min)
        );
    }
}

fn churn_run<H: SyncHeap>(threads: usize, n: usize, leak: bool, repeat: usize) {
    H::prepare();
    churn_report(threads, n, repeat, recycler::sync::stats, || {
        cycle_churn::run::<H>(threads, n, leak)
    });
}

fn local_churn<H: Heap>(threads: usize, n: usize, leak: bool, repeat: usize) {
    if threads != 1 {
        usage()
    }
    H::prepare();
    churn_report(1, n, repeat, recycler::stats, || {
        cycle_churn::run_local::<H>(n, leak)
    });
}

/// Runs `run` `repeat` times and prints the time per cycle: as criterion's
/// iterations, the first run warms up (thread-locals, the allocator's
/// arenas) and the others are timed. `stats` reads the statistics of the
/// collector the pointer uses (`recycler::sync::stats` or, for the
/// single-threaded pointers, this thread's `recycler::stats`).
fn churn_report(
    threads: usize,
    n: usize,
    repeat: usize,
    stats: fn() -> recycler::Stats,
    run: impl Fn() -> Duration,
) {
    let before = stats();
    let first = run();
    let mut t = first;
    let mut wall = first;
    if repeat > 1 {
        let rest = (1..repeat).map(|_| run()).sum::<Duration>();
        wall += rest;
        t = rest / (repeat - 1) as u32;
    }
    let s = stats();
    let collections = s.minor_collections + s.full_collections;
    // Collection time summed over the threads (pauses, including the frees
    // after the collector lock is released): near 100 % with more than one
    // thread, the threads' collections queue behind each other.
    let busy = (s.total_pause - before.total_pause).as_secs_f64() / wall.as_secs_f64();
    eprintln!(
        "{:.1} ns per cycle; collections {} (minor {}), {:.0} objects traced per collection; collections {:.0} % of the wall time",
        t.as_nanos() as f64 / (threads * n) as f64,
        collections,
        s.minor_collections,
        s.nodes_traced as f64 / collections.max(1) as f64,
        busy * 100.0
    );
}

fn random_run<H: SyncHeap>(threads: usize, ops: usize, repeat: usize) {
    H::prepare();
    let mut t = threaded::run::<H>(threaded::roots::<H>(threads), threads, ops);
    if repeat > 1 {
        t = (1..repeat)
            .map(|_| threaded::run::<H>(threaded::roots::<H>(threads), threads, ops))
            .sum::<std::time::Duration>()
            / (repeat - 1) as u32;
    }
    H::collect();
    let s = recycler::sync::stats();
    eprintln!(
        // To the microsecond: runs of 9 to 16 ms printed to 0.1 ms made
        // `paired`'s ratios move in steps of about 1 %.
        "{:.3} ms; sync collections {} (minor {}), traced {}, promoted {}, freed by collector {}",
        t.as_secs_f64() * 1e3,
        s.minor_collections + s.full_collections,
        s.minor_collections,
        s.nodes_traced,
        s.promoted,
        s.freed_by_collector
    );
}

fn main() {
    benches::memory::keep_freed_memory();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (work, ptr, a, b, repeat) = match &args[..] {
        [work, ptr, a, b] => (work, ptr, a, b, "1"),
        [work, ptr, a, b, repeat] => (work, ptr, a, b, repeat.as_str()),
        _ => usage(),
    };
    let (Ok(a), Ok(b), Ok(repeat)) = (a.parse::<usize>(), b.parse::<usize>(), repeat.parse())
    else {
        usage()
    };
    match (work.as_str(), ptr.as_str()) {
        ("hub", "recycler-sync-gc") => hub_run::<RecyclerSyncGc>(a, b, false, Back::Strong, repeat),
        ("hub", "recycler-sync-gc-thread") => {
            hub_run::<RecyclerSyncGcThread>(a, b, false, Back::Strong, repeat)
        }
        ("hub", "arc-leak") => hub_run::<StdArc>(a, b, true, Back::Strong, repeat),
        ("hub", "arc") => hub_run::<StdArc>(a, b, false, Back::Native, repeat),
        // The single-threaded pointers, for the same ratios without atomics.
        ("hub", "recycler-gc") => hub_run::<RecyclerGc<false>>(a, b, false, Back::Strong, repeat),
        ("hub", "rc-leak") => hub_run::<StdRc>(a, b, true, Back::Strong, repeat),
        ("hub", "rc") => hub_run::<StdRc>(a, b, false, Back::Native, repeat),
        ("churn", "recycler-sync-gc") => churn_run::<RecyclerSyncGc>(a, b, false, repeat),
        ("churn", "recycler-sync-gc-thread") => {
            churn_run::<RecyclerSyncGcThread>(a, b, false, repeat)
        }
        ("churn", "arc-leak") => churn_run::<StdArc>(a, b, true, repeat),
        // The single-threaded pointers, one thread.
        ("churn", "recycler-gc") => local_churn::<RecyclerGc<false>>(a, b, false, repeat),
        ("churn", "rc-leak") => local_churn::<StdRc>(a, b, true, repeat),
        ("churn", "arc-weak") => churn_report(a, b, repeat, recycler::sync::stats, || {
            cycle_churn::run_arc_weak(a, b)
        }),
        ("random", "recycler-sync-gc") => random_run::<RecyclerSyncGc>(a, b, repeat),
        ("random", "recycler-sync-gc-thread") => random_run::<RecyclerSyncGcThread>(a, b, repeat),
        ("random", "arc") => random_run::<StdArc>(a, b, repeat),
        _ => usage(),
    }
    println!("alive at the end: {}", live::alive());
}
