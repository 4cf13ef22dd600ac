//! dumpster's multi-threaded random operations: `threads × 10` shared vectors
//! of roots, 50 nodes each, behind mutexes; each thread performs
//! `n_ops / threads` operations (create, link two roots — possibly across
//! vectors, locking the lower index first —, drop a root, unlink) with its own
//! generator seeded `12345 + thread`. Unlike dumpster's harness, the final
//! drop of all roots and the collection are inside the measured time, so a
//! collector cannot hide deferred work.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::heap::SyncHeap;
use crate::workloads::random_ops::ops_rng;

/// The shared root vectors.
pub fn roots<H: SyncHeap>(threads: usize) -> Vec<Mutex<Vec<H::Node>>> {
    (0..threads * 10)
        .map(|_| Mutex::new((0..50).map(|_| H::node()).collect()))
        .collect()
}

/// Runs the operations on `threads` threads over `vecs`, then drops every root
/// and collects; returns the elapsed time of all of it.
pub fn run<H: SyncHeap>(vecs: Vec<Mutex<Vec<H::Node>>>, threads: usize, n_ops: usize) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let vecs = &vecs;
            s.spawn(move || worker::<H>(vecs, t, n_ops / threads));
        }
    });
    drop(vecs);
    H::collect();
    start.elapsed()
}

fn worker<H: SyncHeap>(vecs: &[Mutex<Vec<H::Node>>], thread: usize, ops: usize) {
    let mut rng = ops_rng(thread as u64);
    for _ in 0..ops {
        let v1 = rng.gen_range(0..vecs.len());
        match rng.gen_range(0..4u8) {
            0 => {
                let node = H::node();
                vecs[v1].lock().unwrap().push(node);
            }
            1 => {
                let v2 = rng.gen_range(0..vecs.len());
                if v1 == v2 {
                    let g = vecs[v1].lock().unwrap();
                    if g.len() < 2 {
                        continue;
                    }
                    let to = g[rng.gen_range(0..g.len())].clone();
                    H::with_edges(&g[rng.gen_range(0..g.len())], |e| e.push(to));
                } else {
                    let (lo, hi) = (v1.min(v2), v1.max(v2));
                    let g_lo = vecs[lo].lock().unwrap();
                    let g_hi = vecs[hi].lock().unwrap();
                    let (g1, g2) = if v1 < v2 {
                        (&g_lo, &g_hi)
                    } else {
                        (&g_hi, &g_lo)
                    };
                    if g1.is_empty() || g2.is_empty() {
                        continue;
                    }
                    let to = g2[rng.gen_range(0..g2.len())].clone();
                    H::with_edges(&g1[rng.gen_range(0..g1.len())], |e| e.push(to));
                }
            }
            2 => {
                let removed = {
                    let mut g = vecs[v1].lock().unwrap();
                    if g.is_empty() {
                        continue;
                    }
                    let i = rng.gen_range(0..g.len());
                    g.swap_remove(i)
                };
                drop(removed);
            }
            _ => {
                let removed = {
                    let g = vecs[v1].lock().unwrap();
                    if g.is_empty() {
                        continue;
                    }
                    H::with_edges(&g[rng.gen_range(0..g.len())], |e| {
                        (!e.is_empty()).then(|| e.swap_remove(rng.gen_range(0..e.len())))
                    })
                };
                drop(removed);
            }
        }
    }
}
