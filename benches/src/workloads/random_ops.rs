//! dumpster's random-operations benchmark (`dumpster_bench`, single-threaded):
//! start from 50 rooted nodes; each operation picks uniformly among *create*
//! (root a new node), *link* (one root gets a strong edge to another),
//! *drop a root* and *unlink* (remove a random edge of a random root); at the
//! end drop every root and collect. Removed pointers are dropped outside the
//! cell borrow, so a collector triggered by that drop never meets a borrowed
//! cell.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::heap::Heap;

/// The generator (dumpster seeds `fastrand` with 12345).
pub fn ops_rng(thread: u64) -> SmallRng {
    SmallRng::seed_from_u64(12345 + thread)
}

/// Runs `n_ops` operations; returns the number of roots at the end.
pub fn random_ops<H: Heap>(n_ops: usize, rng: &mut SmallRng) -> usize {
    let mut roots: Vec<H::Graph> = (0..50).map(|_| H::graph(String::new())).collect();
    for _ in 0..n_ops {
        if roots.is_empty() {
            roots.push(H::graph(String::new()));
            continue;
        }
        match rng.gen_range(0..4u8) {
            0 => roots.push(H::graph(String::new())),
            1 => {
                if roots.len() > 1 {
                    let from = rng.gen_range(0..roots.len());
                    let to = roots[rng.gen_range(0..roots.len())].clone();
                    H::with_edges(&roots[from], |edges| edges.push(to));
                }
            }
            2 => {
                let i = rng.gen_range(0..roots.len());
                drop(roots.swap_remove(i));
            }
            _ => {
                let from = rng.gen_range(0..roots.len());
                let removed = H::with_edges(&roots[from], |edges| {
                    (!edges.is_empty()).then(|| edges.swap_remove(rng.gen_range(0..edges.len())))
                });
                drop(removed);
            }
        }
    }
    let n = roots.len();
    drop(roots);
    H::collect();
    n
}
