//! What `cargo bench -p benches` runs, and the table layout the `report`
//! binary shares with it.
//!
//! Every benchmark goes through [`Suite::entry`]: skip it if the command-line
//! filter excludes it or the pointer cannot run the workload (recorded as
//! n/a), otherwise do the untimed check run ([`crate::check`]) and, if it did
//! not panic, time it with criterion. Adding a pointer is one file in
//! [`crate::ptr`] plus one line in [`for_each_heap!`] (or the thread-safe list
//! in [`run_threaded`]).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Bencher, BenchmarkId, Criterion};

use crate::check::{check_run, record, Outcome};
use crate::heap::{Heap, SyncHeap, Workload};
use crate::live;
use crate::ptr::bacon_rajan_cc::BaconRajanCc;
use crate::ptr::dumpster_sync::DumpsterSync;
use crate::ptr::dumpster_unsync::DumpsterUnsync;
use crate::ptr::gcmodule_cc::GcmoduleCc;
use crate::ptr::gcmodule_threaded::GcmoduleThreaded;
use crate::ptr::recycler_gc::{RecyclerGcDefault, RecyclerGcNim16};
use crate::ptr::recycler_sync_gc::{RecyclerSyncGc, RecyclerSyncGcThread};
use crate::ptr::rust_cc::RustCc;
use crate::ptr::rust_gc::RustGc;
use crate::ptr::std_arc::StdArc;
use crate::ptr::std_rc::StdRc;
use crate::workloads::hub::Back;
use crate::workloads::{
    binary_trees, churn, cycle_churn, hub, linked_list, micro, parent_trees, random_ops, stress,
    threaded,
};

/// Depth of the binary-trees workloads (rust-cc-benchmarks: 11).
pub const TREE_DEPTH: usize = 11;
/// Lists of the linked-list workload are this long (30 of them).
pub const LIST_LEN: usize = 4096;
/// Operations of the random-operations workloads (dumpster: 1,000,000).
pub const RANDOM_OPS: usize = 250_000;
/// Values allocated by the churn workload.
pub const CHURN_N: u64 = 1_000_000;
/// Live-tree sizes of the hub workload.
pub const HUB_SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];
/// Requests made by the hub check run.
pub const HUB_CHECK_REQUESTS: usize = 20_000;
/// Thread counts of the threaded workload.
pub const THREADS: [usize; 2] = [1, 2];
/// Threads of the cycle-churn workload, and cycles per thread per run.
pub const CYCLE_CHURN_THREADS: usize = 2;
/// Cycles per thread of one cycle-churn run.
pub const CYCLE_CHURN_N: usize = 100_000;

/// One table of the report.
pub struct Family {
    /// Heading.
    pub title: &'static str,
    /// What the rows measure and how to read them.
    pub about: &'static str,
    /// Criterion group ids, one row each (a parameterised group gives one row
    /// per parameter).
    pub groups: &'static [&'static str],
    /// Column the ratios are relative to.
    pub baseline: &'static str,
    /// Columns, in order.
    pub columns: &'static [&'static str],
}

const SINGLE: &[&str] = &[
    "rc",
    "recycler-gc",
    "recycler-rc",
    "rust-cc",
    "bacon_rajan_cc",
    "dumpster",
    "gcmodule",
    "gc",
    "arc",
    "recycler-sync-gc",
    "dumpster-sync",
];

/// The report's tables.
pub const FAMILIES: &[Family] = &[
    Family {
        title: "rust-cc-benchmarks workloads",
        about: "Binary trees of depth 11 (no cycles); the same with parent pointers; 30 doubly linked lists of 4096 nodes; the stress test (2^15+1 nodes, 2^15+1 random edges, 32 rounds of dropping 1024 roots and collecting). Back edges are `Weak` for `rc`, `arc` and `recycler-rc`; the stress test's random edges are strong for everyone, so the counting pointers leak there.",
        groups: &["binary trees", "parent trees", "linked list", "stress test"],
        baseline: "rc",
        columns: SINGLE,
    },
    Family {
        title: "Random operations and acyclic churn",
        about: "dumpster's random operations on one thread (50 initial roots; create / link two / drop a root / unlink, uniformly; scaled to 250,000 operations from dumpster's 1,000,000; ends with dropping every root and a full collection; the counting pointers leak the cycles); churn: 1,000,000 × (new `u64` + clone + drop both; checked by its sum, the values carry no node counter).",
        groups: &["random ops", "churn"],
        baseline: "rc",
        columns: SINGLE,
    },
    Family {
        title: "Micro-operations (core issue goals)",
        about: "Per-operation costs against `std::rc::Rc`: clone+drop of a handle to `u64`, to `String`, and to a candidate type (a node that can own pointers); new+drop of a `u64`; create-and-collect of a 2-node cycle (for `rc`: `Rc::new` ×2 + a `Weak` link), with automatic collection plus one full collection per timed batch.",
        groups: &[
            "micro clone+drop u64",
            "micro clone+drop String",
            "micro clone+drop candidate",
            "micro new+drop u64",
            "micro 2-node cycle",
        ],
        baseline: "rc",
        columns: SINGLE,
    },
    Family {
        title: "Hub (bounded collection cost)",
        about: "A live tree of H nodes with parent back-pointers, held by one root; each iteration creates a request ↔ context cycle whose context holds a clone of the root, and drops it; automatic collection only. Time per request. `rc-leak` is `std::rc::Rc` doing the same work and leaking every request cycle (the ratio baseline); `rc` uses a `Weak` back edge instead and frees by counting; `arc-leak` is `std::sync::Arc` leaking (the baseline of `recycler-sync-gc`).",
        groups: &["hub"],
        baseline: "rc-leak",
        columns: &[
            "rc-leak",
            "rc",
            "arc-leak",
            "recycler-gc",
            "recycler-gc-nim16",
            "rust-cc",
            "dumpster",
            "gc",
            "recycler-sync-gc",
            "recycler-sync-gc-thread",
            "dumpster-sync",
            "bacon_rajan_cc",
            "gcmodule",
        ],
    },
    Family {
        title: "Random operations on threads (thread-safe pointers)",
        about: "dumpster's multi-threaded random operations (threads × 10 shared root vectors of 50 nodes behind mutexes), 250,000 operations split over the threads; the final drop of every root and the full collection are inside the measured time. `arc` leaks the cycles.",
        groups: &["random ops threaded"],
        baseline: "arc",
        columns: &[
            "arc",
            "recycler-sync-gc",
            "recycler-sync-gc-thread",
            "dumpster-sync",
            "gcmodule-threaded",
        ],
    },
    Family {
        title: "Cycle churn on threads (thread-safe pointers)",
        about: "2 threads × 100,000 two-node cycles (`a ↔ b` through `Mutex` edge cells), each dropped at once; automatic collection, and the final full collection inside the measured time. `arc` leaks every cycle (kept, and broken after the timing): the baseline; `arc-weak` is the careful program, the back edge `Weak`, every cycle freed by counting (what freeing costs without a collector).",
        groups: &["cycle churn threaded"],
        baseline: "arc",
        columns: &[
            "arc",
            "arc-weak",
            "recycler-sync-gc",
            "recycler-sync-gc-thread",
            "dumpster-sync",
            "gcmodule-threaded",
        ],
    },
];

/// Calls `$f::<Pointer>($args)` for every single-threaded pointer.
#[macro_export]
macro_rules! for_each_heap {
    ($f:ident ( $($args:expr),* )) => {{
        use $crate::ptr::*;
        $f::<std_rc::StdRc>($($args),*);
        $f::<recycler_gc::RecyclerGcDefault>($($args),*);
        $f::<recycler_rc::RecyclerRc>($($args),*);
        $f::<rust_cc::RustCc>($($args),*);
        $f::<bacon_rajan_cc::BaconRajanCc>($($args),*);
        $f::<dumpster_unsync::DumpsterUnsync>($($args),*);
        $f::<gcmodule_cc::GcmoduleCc>($($args),*);
        $f::<rust_gc::RustGc>($($args),*);
        $f::<std_arc::StdArc>($($args),*);
        $f::<dumpster_sync::DumpsterSync>($($args),*);
        $f::<recycler_sync_gc::RecyclerSyncGc>($($args),*);
    }};
}

/// The filter given on the command line (criterion's positional argument, a
/// regular expression), so that check runs of excluded benchmarks are skipped
/// too.
#[derive(Debug, Default)]
pub struct Filter {
    pattern: Option<regex::Regex>,
}

impl Filter {
    /// Reads the positional arguments, skipping criterion's flags and their
    /// values.
    pub fn from_args() -> Self {
        const WITH_VALUE: &[&str] = &[
            "--sample-size",
            "--warm-up-time",
            "--measurement-time",
            "--save-baseline",
            "-s",
            "--baseline",
            "-b",
            "--baseline-lenient",
            "--load-baseline",
            "--profile-time",
            "--output-format",
            "--color",
            "-c",
            "--plotting-backend",
            "--noise-threshold",
            "--confidence-level",
            "--significance-level",
            "--nresamples",
            "--format",
            "--logfile",
        ];
        let mut pattern = None;
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            if WITH_VALUE.contains(&a.as_str()) {
                args.next();
            } else if !a.starts_with('-') {
                // Criterion itself rejects an invalid expression.
                pattern = regex::Regex::new(&a).ok();
            }
        }
        Filter { pattern }
    }

    /// Whether the benchmark with this full id runs.
    pub fn matches(&self, full_id: &str) -> bool {
        self.pattern.as_ref().map_or(true, |p| p.is_match(full_id))
    }
}

/// The criterion instance and the filter.
pub struct Suite {
    /// Criterion, configured from the command line.
    pub c: Criterion,
    filter: Filter,
}

/// A benchmark to check and time.
pub struct Entry<'a> {
    /// Criterion group id (a row of the report).
    pub group: &'a str,
    /// Function id (a column of the report).
    pub id: &'a str,
    /// Parameter (for parameterised rows such as the hub's H).
    pub param: Option<String>,
    /// Nodes a correct run leaves alive (`None`: unknown, e.g. a counting
    /// pointer leaking random cycles).
    pub expected_alive: Option<i64>,
    /// Set-up before the check and the timing (e.g. the recycler policy).
    pub prepare: fn(),
    /// The pointer's full collection.
    pub collect: fn(),
    /// Why it cannot run, if it cannot.
    pub unsupported: Option<&'static str>,
}

impl<'a> Entry<'a> {
    /// An entry for a single-threaded pointer.
    pub fn heap<H: Heap>(group: &'a str, w: Workload) -> Self {
        Entry {
            group,
            id: H::NAME,
            param: None,
            expected_alive: Some(0),
            prepare: H::prepare,
            collect: H::collect,
            unsupported: H::unsupported(w),
        }
    }

    /// Criterion's full id of this benchmark.
    pub fn full_id(&self) -> String {
        match &self.param {
            Some(p) => format!("{}/{}/{}", self.group, self.id, p),
            None => format!("{}/{}", self.group, self.id),
        }
    }
}

impl Suite {
    /// Criterion with the suite's modest defaults (10 samples, 0.5 s warm-up),
    /// overridable from the command line; freed memory stays in the process
    /// ([`crate::memory`]).
    pub fn new() -> Self {
        crate::memory::keep_freed_memory();
        let c = Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_millis(1500))
            .configure_from_args();
        Suite {
            c,
            filter: Filter::from_args(),
        }
    }

    /// Checks and times one benchmark: `check` is the untimed check run (it
    /// may push notes), `bench` the criterion routine.
    pub fn entry(
        &mut self,
        e: Entry<'_>,
        check: impl FnOnce(&mut Vec<String>),
        bench: impl FnMut(&mut Bencher<'_>),
    ) {
        if !self.filter.matches(&e.full_id()) {
            return;
        }
        let key = e.full_id();
        let record_id = e.id.to_string()
            + &e.param
                .as_ref()
                .map(|p| format!("/{p}"))
                .unwrap_or_default();
        if let Some(reason) = e.unsupported {
            record(
                e.group,
                &record_id,
                &Outcome::Unsupported(reason.to_string()),
                None,
                &[],
            );
            return;
        }
        (e.prepare)();
        let mut notes = Vec::new();
        let outcome = check_run(check, e.collect, &mut notes);
        record(e.group, &record_id, &outcome, e.expected_alive, &notes);
        if !outcome.runnable() {
            eprintln!("skipping the timing of {key}");
            return;
        }
        (e.prepare)();
        let mut group = self.c.benchmark_group(e.group);
        match e.param {
            Some(p) => group.bench_function(BenchmarkId::new(e.id, p), bench),
            None => group.bench_function(e.id, bench),
        };
        group.finish();
        (e.collect)();
    }

    /// Runs every benchmark.
    pub fn run_all(&mut self) {
        macro_rules! each {
            ($f:ident) => {
                for_each_heap!($f(self))
            };
        }
        each!(run_micro);
        each!(run_churn);
        each!(run_binary_trees);
        each!(run_parent_trees);
        each!(run_linked_list);
        each!(run_stress);
        each!(run_random_ops);
        run_threaded(self);
        run_hub_all(self);
        self.c.final_summary();
    }
}

impl Default for Suite {
    fn default() -> Self {
        Suite::new()
    }
}

/// Times `n` runs of `f` per batch.
fn timed(b: &mut Bencher<'_>, mut f: impl FnMut(u64)) {
    b.iter_custom(|iters| {
        let start = Instant::now();
        f(iters);
        start.elapsed()
    });
}

fn run_micro<H: Heap>(s: &mut Suite) {
    let w = Workload::Micro;
    let leaf = H::leaf(7);
    s.entry(
        Entry::heap::<H>("micro clone+drop u64", w),
        |_| micro::clone_drop(&H::leaf(7), 10_000),
        |b| timed(b, |n| micro::clone_drop(&leaf, n)),
    );
    drop(leaf);
    let text = H::text("a small string".to_string());
    s.entry(
        Entry::heap::<H>("micro clone+drop String", w),
        |_| micro::clone_drop(&H::text(String::from("x")), 10_000),
        |b| timed(b, |n| micro::clone_drop(&text, n)),
    );
    drop(text);
    let node = H::pair(None, None);
    s.entry(
        Entry::heap::<H>("micro clone+drop candidate", w),
        |_| micro::clone_drop(&H::pair(None, None), 10_000),
        |b| timed(b, |n| micro::clone_drop(&node, n)),
    );
    drop(node);
    s.entry(
        Entry::heap::<H>("micro new+drop u64", w),
        |_| micro::new_drop::<H>(10_000),
        |b| timed(b, micro::new_drop::<H>),
    );
    s.entry(
        Entry::heap::<H>("micro 2-node cycle", w),
        |_| micro::cycles::<H>(10_000),
        |b| timed(b, micro::cycles::<H>),
    );
}

fn run_churn<H: Heap>(s: &mut Suite) {
    s.entry(
        Entry::heap::<H>("churn", Workload::Churn),
        |_| assert_eq!(churn::churn::<H>(CHURN_N), CHURN_N * (CHURN_N - 1) / 2),
        |b| b.iter(|| churn::churn::<H>(black_box(CHURN_N))),
    );
}

fn run_binary_trees<H: Heap>(s: &mut Suite) {
    s.entry(
        Entry::heap::<H>("binary trees", Workload::BinaryTrees),
        |_| {
            binary_trees::binary_trees::<H>(TREE_DEPTH);
        },
        |b| b.iter_with_large_drop(|| binary_trees::binary_trees::<H>(black_box(TREE_DEPTH))),
    );
}

fn run_parent_trees<H: Heap>(s: &mut Suite) {
    s.entry(
        Entry::heap::<H>("parent trees", Workload::ParentTrees),
        |_| {
            parent_trees::parent_trees::<H>(TREE_DEPTH);
        },
        |b| b.iter_with_large_drop(|| parent_trees::parent_trees::<H>(black_box(TREE_DEPTH))),
    );
}

fn run_linked_list<H: Heap>(s: &mut Suite) {
    s.entry(
        Entry::heap::<H>("linked list", Workload::LinkedList),
        |_| {
            linked_list::large_linked_list::<H>(LIST_LEN);
        },
        |b| b.iter_with_large_drop(|| linked_list::large_linked_list::<H>(black_box(LIST_LEN))),
    );
}

fn run_stress<H: Heap>(s: &mut Suite) {
    let mut e = Entry::heap::<H>("stress test", Workload::StressTest);
    if H::COUNTING_ONLY {
        e.expected_alive = None;
    }
    let mut rng = stress::stress_rng();
    s.entry(
        e,
        |_| {
            stress::stress_test::<H>(&mut stress::stress_rng());
        },
        |b| b.iter_with_large_drop(|| stress::stress_test::<H>(black_box(&mut rng))),
    );
}

fn run_random_ops<H: Heap>(s: &mut Suite) {
    let mut e = Entry::heap::<H>("random ops", Workload::RandomOps);
    if H::COUNTING_ONLY {
        e.expected_alive = None;
    }
    s.entry(
        e,
        |_| {
            random_ops::random_ops::<H>(RANDOM_OPS, &mut random_ops::ops_rng(0));
        },
        |b| {
            b.iter_with_large_drop(|| {
                random_ops::random_ops::<H>(black_box(RANDOM_OPS), &mut random_ops::ops_rng(0))
            })
        },
    );
}

/// The threaded workload for every thread-safe pointer.
pub fn run_threaded(s: &mut Suite) {
    threaded_one::<StdArc>(s, None);
    threaded_one::<RecyclerSyncGc>(s, Some(0));
    threaded_one::<RecyclerSyncGcThread>(s, Some(0));
    threaded_one::<DumpsterSync>(s, Some(0));
    threaded_one::<GcmoduleThreaded>(s, Some(0));
    cycle_churn_one::<StdArc>(s, true);
    cycle_churn_arc_weak(s);
    cycle_churn_one::<RecyclerSyncGc>(s, false);
    cycle_churn_one::<RecyclerSyncGcThread>(s, false);
    cycle_churn_one::<DumpsterSync>(s, false);
    cycle_churn_one::<GcmoduleThreaded>(s, false);
}

fn cycle_churn_one<H: SyncHeap>(s: &mut Suite, leak: bool) {
    let e = Entry {
        group: "cycle churn threaded",
        id: H::NAME,
        param: None,
        expected_alive: Some(0),
        prepare: H::prepare,
        collect: H::collect,
        unsupported: H::unsupported(),
    };
    cycle_churn_entry(s, e, || {
        cycle_churn::run::<H>(CYCLE_CHURN_THREADS, CYCLE_CHURN_N, leak)
    });
}

/// The careful `Arc` program of the cycle churn (a `Weak` back edge, freed
/// by counting): what freeing costs without a collector.
fn cycle_churn_arc_weak(s: &mut Suite) {
    let e = Entry {
        group: "cycle churn threaded",
        id: "arc-weak",
        param: None,
        expected_alive: Some(0),
        prepare: || {},
        collect: || {},
        unsupported: None,
    };
    cycle_churn_entry(s, e, || {
        cycle_churn::run_arc_weak(CYCLE_CHURN_THREADS, CYCLE_CHURN_N)
    });
}

/// One cycle churn entry: `run` once untimed for the check, then criterion's
/// iterations, each a whole run (threads started and joined inside it).
fn cycle_churn_entry(s: &mut Suite, e: Entry<'_>, run: impl Fn() -> Duration) {
    s.entry(
        e,
        |_| {
            run();
        },
        |b| b.iter_custom(|iters| (0..iters).map(|_| run()).sum()),
    );
}

fn threaded_one<H: SyncHeap>(s: &mut Suite, expected_alive: Option<i64>) {
    for threads in THREADS {
        let e = Entry {
            group: "random ops threaded",
            id: H::NAME,
            param: Some(threads.to_string()),
            expected_alive,
            prepare: H::prepare,
            collect: H::collect,
            unsupported: H::unsupported(),
        };
        s.entry(
            e,
            |_| {
                threaded::run::<H>(threaded::roots::<H>(threads), threads, RANDOM_OPS);
            },
            |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| {
                            threaded::run::<H>(threaded::roots::<H>(threads), threads, RANDOM_OPS)
                        })
                        .sum()
                })
            },
        );
    }
}

fn run_hub_all(s: &mut Suite) {
    for h in HUB_SIZES {
        run_hub::<StdRc>(s, h, Back::Strong, "rc-leak");
        run_hub::<StdRc>(s, h, Back::Native, "rc");
        run_hub::<StdArc>(s, h, Back::Strong, "arc-leak");
        run_hub::<RecyclerGcDefault>(s, h, Back::Strong, RecyclerGcDefault::NAME);
        run_hub::<RecyclerGcNim16>(s, h, Back::Strong, RecyclerGcNim16::NAME);
        run_hub::<RustCc>(s, h, Back::Strong, RustCc::NAME);
        run_hub::<DumpsterUnsync>(s, h, Back::Strong, DumpsterUnsync::NAME);
        run_hub::<RustGc>(s, h, Back::Strong, RustGc::NAME);
        run_hub::<RecyclerSyncGc>(s, h, Back::Strong, <RecyclerSyncGc as Heap>::NAME);
        run_hub::<RecyclerSyncGcThread>(s, h, Back::Strong, <RecyclerSyncGcThread as Heap>::NAME);
        run_hub::<DumpsterSync>(s, h, Back::Strong, <DumpsterSync as Heap>::NAME);
        run_hub::<BaconRajanCc>(s, h, Back::Strong, BaconRajanCc::NAME);
        run_hub::<GcmoduleCc>(s, h, Back::Strong, GcmoduleCc::NAME);
    }
}

fn run_hub<H: Heap>(s: &mut Suite, h: usize, back: Back, id: &str) {
    let leaks = H::COUNTING_ONLY && back == Back::Strong;
    let mut e = Entry::heap::<H>("hub", Workload::Hub);
    e.id = id;
    e.param = Some(h.to_string());
    // A leaked context keeps the root, hence the whole tree, alive too.
    e.expected_alive = Some(if leaks {
        (2 * HUB_CHECK_REQUESTS + h) as i64
    } else {
        0
    });
    if !s.filter.matches(&e.full_id()) {
        return;
    }
    let mut root = None;
    s.entry(
        e,
        |notes| {
            let root = hub::build_tree::<H>(h);
            let before = H::collector_counters();
            for _ in 0..HUB_CHECK_REQUESTS {
                drop(hub::request::<H>(&root, back));
            }
            if let (Some(a), Some(b)) = (before, H::collector_counters()) {
                notes.push(format!(
                    "during the {HUB_CHECK_REQUESTS} requests: {} minor + {} full collections, {} nodes traced ({:.1} per request), longest pause so far on this thread {} µs",
                    b.minor - a.minor,
                    b.full - a.full,
                    b.traced - a.traced,
                    (b.traced - a.traced) as f64 / HUB_CHECK_REQUESTS as f64,
                    b.max_pause_us
                ));
            }
            let pending = live::alive() - h as i64;
            notes.push(format!(
                "{pending} request nodes not yet freed after {HUB_CHECK_REQUESTS} requests (before the final collection)"
            ));
            drop(root);
        },
        |b| {
            let root = root.get_or_insert_with(|| hub::build_tree::<H>(h));
            if leaks {
                b.iter_custom(|iters| {
                    let mut kept = Vec::with_capacity(iters as usize);
                    let start = Instant::now();
                    for _ in 0..iters {
                        kept.push(hub::request::<H>(root, back));
                    }
                    let elapsed = start.elapsed();
                    kept.into_iter().for_each(hub::release::<H>);
                    elapsed
                })
            } else {
                timed(b, |n| {
                    for _ in 0..n {
                        drop(hub::request::<H>(root, back));
                    }
                })
            }
        },
    );
    drop(root);
    H::collect();
}
