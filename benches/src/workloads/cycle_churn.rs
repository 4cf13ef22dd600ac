//! Cycle churn on threads: each thread creates `n` two-node cycles
//! (`a ↔ b` through the nodes' edge cells) and drops each at once, leaving it
//! to the pointer's automatic collection; the final full collection is inside
//! the measured time, so no collector can hide deferred work. A counting
//! pointer leaks every cycle: its run keeps them and breaks them after the
//! timing (the baseline "leaking `Arc`").

use std::time::{Duration, Instant};

use crate::heap::SyncHeap;

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
