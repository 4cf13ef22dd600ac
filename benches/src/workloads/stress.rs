//! rust-cc-benchmarks "stress test" (from shredder): 2^15 + 1 labelled nodes,
//! all rooted in a vector; 2^15 + 1 random edges between them; then 32 rounds
//! of truncating the vector by 1024 roots and collecting; a final collection.
//! The random generator is `StdRng` seeded with `0xCAFE` and, as in the
//! original, carried over from one iteration to the next.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::heap::Heap;

const NODE_COUNT: usize = 1 << 15;
const EDGE_COUNT: usize = 1 << 15;
const SHRINK_DIV: usize = 1 << 10;

/// The generator of the original benchmark.
pub fn stress_rng() -> StdRng {
    StdRng::seed_from_u64(0xCAFE)
}

/// Runs the workload; returns the root counts after each round.
pub fn stress_test<H: Heap>(rng: &mut StdRng) -> Vec<usize> {
    let mut res = Vec::new();
    {
        let mut nodes = Vec::new();
        for i in 0..=NODE_COUNT {
            nodes.push(H::graph(format!("Node {i}")));
        }
        for _ in 0..=EDGE_COUNT {
            let a = nodes.choose(rng).expect("nodes is not empty");
            let b = nodes.choose(rng).expect("nodes is not empty").clone();
            H::with_edges(a, |edges| edges.push(b));
        }
        for i in 0..NODE_COUNT {
            if i % SHRINK_DIV == 0 {
                nodes.truncate(NODE_COUNT - i);
                H::collect();
                res.push(nodes.len());
            }
        }
    }
    H::collect();
    res
}
