//! Same-run ratios on a busy machine: times each workload for
//! `std::rc::Rc`, `recycler::Gc` and `recycler::Rc` back to back, many rounds
//! (rotating which pointer goes first), and reports the fastest run of each
//! (the one least disturbed by other processes) and its ratio to
//! `std::rc::Rc`. Criterion (`cargo bench -p benches`) stays the reference
//! on a quiet machine.
//!
//! ```sh
//! cargo run --release -p benches --example ratios -- [ROUNDS] [WORKLOAD SUBSTRING] [POINTER]
//! ```
//!
//! `POINTER` (`std`, `gc`, `rc` or `cc`) runs only that pointer, for
//! profiling one of them under `valgrind --tool=callgrind` or `perf`. The
//! `cc` column is `rust_cc::Cc`, the fastest peer on the garbage-heavy
//! workloads (parent trees, linked lists, 2-node cycles).

use std::hint::black_box;
use std::time::{Duration, Instant};

use benches::heap::Heap;
use benches::ptr::recycler_gc::RecyclerGcDefault;
use benches::ptr::recycler_rc::RecyclerRc;
use benches::ptr::rust_cc::RustCc;
use benches::ptr::std_rc::StdRc;
use benches::suite::{CHURN_N, LIST_LEN, RANDOM_OPS, TREE_DEPTH};
use benches::workloads::hub::{self, Back};
use benches::workloads::{
    binary_trees, churn, linked_list, micro, parent_trees, random_ops, stress,
};
use rand::rngs::{SmallRng, StdRng};

const CLONES: u64 = 10_000_000;
const HUB: usize = 10_000;
/// Requests per hub round: below rust-cc's limit of 16,382 references to one
/// `Cc` (a 14-bit count), which the hub root would otherwise exceed when
/// rust-cc's byte threshold, grown by the other workloads, lets a round's
/// garbage contexts (each holding a clone of the root) pile up.
const REQUESTS: usize = 10_000;

/// Pointers, in column order.
const POINTERS: [&str; 4] = ["std", "gc", "rc", "cc"];

const WORKLOADS: [&str; 11] = [
    "churn",
    "binary trees",
    "clone+drop u64 (10M)",
    "clone+drop candidate (10M)",
    "new+drop u64 (1M)",
    "stress test",
    "random ops",
    "hub 10k (10k requests + collect, leaking Rc baseline)",
    "parent trees",
    "linked list",
    "2-node cycle (100k)",
];

/// What one pointer's workloads keep between rounds.
struct State<H: Heap> {
    leaf: H::Leaf,
    node: H::Pair,
    root: H::Graph,
    rng: StdRng,
    ops: SmallRng,
}

impl<H: Heap> State<H> {
    fn new() -> Self {
        State {
            leaf: H::leaf(7),
            node: H::pair(None, None),
            root: hub::build_tree::<H>(HUB),
            rng: stress::stress_rng(),
            ops: random_ops::ops_rng(0),
        }
    }

    /// One timed run of workload `w`.
    fn run(&mut self, w: usize) -> Duration {
        let start = Instant::now();
        match w {
            0 => {
                black_box(churn::churn::<H>(CHURN_N));
            }
            1 => drop(black_box(binary_trees::binary_trees::<H>(TREE_DEPTH))),
            2 => micro::clone_drop(&self.leaf, CLONES),
            3 => micro::clone_drop(&self.node, CLONES),
            4 => micro::new_drop::<H>(1_000_000),
            5 => drop(black_box(stress::stress_test::<H>(&mut self.rng))),
            6 => {
                black_box(random_ops::random_ops::<H>(RANDOM_OPS, &mut self.ops));
            }
            7 => {
                for _ in 0..REQUESTS {
                    drop(hub::request::<H>(&self.root, Back::Strong));
                }
                // Timed: every collector pays for all the garbage of its
                // round (a lazy one would otherwise hand it to the next
                // round, or pile it up past rust-cc's reference limit); a
                // no-op for the plain counters.
                H::collect();
            }
            8 => drop(black_box(parent_trees::parent_trees::<H>(TREE_DEPTH))),
            9 => drop(black_box(linked_list::large_linked_list::<H>(LIST_LEN))),
            _ => micro::cycles::<H>(100_000),
        }
        start.elapsed()
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(15);
    let only = std::env::args().nth(2).unwrap_or_default();
    let pointer = std::env::args().nth(3);
    let runs = |which: usize| pointer.as_deref().map_or(true, |p| p == POINTERS[which]);
    if let Some(p) = pointer.as_deref() {
        if !POINTERS.contains(&p) {
            eprintln!("usage: ratios [ROUNDS] [WORKLOAD SUBSTRING] [std|gc|rc|cc]");
            std::process::exit(2);
        }
    }
    let mut std_rc = State::<StdRc>::new();
    let mut gc = State::<RecyclerGcDefault>::new();
    let mut rc = State::<RecyclerRc>::new();
    let mut cc = State::<RustCc>::new();
    println!("| workload (fastest of {rounds}) | std Rc | recycler Gc | recycler Rc | rust-cc |");
    println!("|---|---:|---:|---:|---:|");
    for (w, name) in WORKLOADS.iter().enumerate() {
        if !name.contains(only.as_str()) {
            continue;
        }
        let mut best = [Duration::MAX; 4];
        for round in 0..rounds {
            for k in 0..4 {
                let which = (round + k) % 4;
                if !runs(which) {
                    continue;
                }
                let t = match which {
                    0 => std_rc.run(w),
                    1 => gc.run(w),
                    2 => rc.run(w),
                    _ => cc.run(w),
                };
                best[which] = best[which].min(t);
            }
        }
        let base = best[0].as_secs_f64();
        let cell = |d: Duration| {
            if d == Duration::MAX {
                return "–".to_string();
            }
            format!(
                "{:.2} ms ({:.2}×)",
                d.as_secs_f64() * 1e3,
                d.as_secs_f64() / base
            )
        };
        println!(
            "| {name} | {} | {} | {} | {} |",
            cell(best[0]),
            cell(best[1]),
            cell(best[2]),
            cell(best[3])
        );
    }
}
