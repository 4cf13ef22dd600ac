//! Cycle churn on threads: each thread creates `n` two-node cycles
//! (`a ↔ b` through the nodes' edge cells) and drops each at once, leaving it
//! to the pointer's automatic collection; the final full collection is inside
//! the measured time, so no collector can hide deferred work. A counting
//! pointer leaks every cycle: its run keeps them and breaks them after the
//! timing (the baseline "leaking `Arc`"). [`run_arc_weak`] is the careful
//! program instead: the same two nodes and edge lists with the back edge
//! `Weak`, so counting frees every cycle as it goes (what freeing costs
//! without a collector).

use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex, Weak};

use crate::heap::{Heap, SyncHeap};
use crate::live::Live;

/// One cycle; returns one handle of it (the caller drops or keeps it).
#[inline]
fn cycle<H: SyncHeap>() -> H::Node {
    let a = H::node();
    let b = H::node();
    let a2 = a.clone();
    H::with_edges(&b, |e| e.push(a2));
    H::with_edges(&a, |e| e.push(b));
    a
}

/// Runs `n` cycles on each of `threads` threads (kept if `leak`, and broken
/// after the timing) and returns the time of all of it, final collection
/// included.
pub fn run<H: SyncHeap>(threads: usize, n: usize, leak: bool) -> Duration {
    let start = Instant::now();
    let kept: Vec<Vec<H::Node>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let mut kept = Vec::with_capacity(if leak { n } else { 0 });
                    for _ in 0..n {
                        let a = cycle::<H>();
                        if leak {
                            kept.push(a);
                        }
                    }
                    kept
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    H::collect();
    let elapsed = start.elapsed();
    for a in kept.into_iter().flatten() {
        let b = H::with_edges(&a, |e| e.pop());
        if let Some(b) = b {
            H::with_edges(&b, |e| e.clear());
        }
    }
    elapsed
}

/// [`run`] on one thread with a single-threaded pointer (`Heap`'s graph
/// nodes, no label): what the same cycles cost without atomics, for the
/// ratios of the thread-safe pointers to compare with.
pub fn run_local<H: Heap>(n: usize, leak: bool) -> Duration {
    let start = Instant::now();
    let mut kept = Vec::with_capacity(if leak { n } else { 0 });
    for _ in 0..n {
        let a = H::graph(String::new());
        let b = H::graph(String::new());
        let a2 = a.clone();
        H::with_edges(&b, |e| e.push(a2));
        H::with_edges(&a, |e| e.push(b));
        if leak {
            kept.push(a);
        }
    }
    H::collect();
    let elapsed = start.elapsed();
    for a in kept {
        if let Some(b) = H::with_edges(&a, |e| e.pop()) {
            H::with_edges(&b, |e| e.clear());
        }
    }
    elapsed
}

/// An edge of [`WeakNode`]: owning, or the `Weak` back edge of a cycle.
enum Edge {
    Strong(#[allow(dead_code)] Arc<WeakNode>),
    Weak(#[allow(dead_code)] Weak<WeakNode>),
}

/// `std_arc::SyncNode` with edges that may be `Weak`: the same allocation
/// sizes but for the edge list's buffer (one 16-byte edge instead of 8).
struct WeakNode {
    edges: Mutex<Vec<Edge>>,
    _live: Live,
}

fn weak_node() -> Arc<WeakNode> {
    Arc::new(WeakNode {
        edges: Mutex::new(Vec::new()),
        _live: Live::new(),
    })
}

/// [`run`]'s cycle with the back edge `b → a` `Weak`: `a` owns `b`, and
/// dropping `a` frees both by counting. Returns the time of `n` cycles on
/// each of `threads` threads.
pub fn run_arc_weak(threads: usize, n: usize) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || {
                for _ in 0..n {
                    let a = weak_node();
                    let b = weak_node();
                    let a2 = Arc::downgrade(&a);
                    b.edges.lock().unwrap().push(Edge::Weak(a2));
                    a.edges.lock().unwrap().push(Edge::Strong(b));
                    drop(std::hint::black_box(a));
                }
            });
        }
    });
    start.elapsed()
}
