//! rust-cc-benchmarks "binary trees" (from the benchmarks game, via shredder):
//! for depth 4, 6, …, below `max_depth`, build `2^(max_depth - depth + 4)`
//! complete trees of that depth, count their nodes, drop them; collect once
//! at the end. No cycles.

use crate::heap::Heap;

/// Runs the workload; returns the node counts per depth (the checksum).
pub fn binary_trees<H: Heap>(max_depth: usize) -> Vec<usize> {
    count_trees::<H>(max_depth, tree::<H>)
}

/// The benchmarks-game loop shared with the parent-pointer variant: for each
/// depth, build `2^(max_depth - depth + 4)` trees with `make`, count their
/// nodes, drop them; then one full collection.
pub(crate) fn count_trees<H: Heap>(max_depth: usize, make: fn(usize) -> H::Pair) -> Vec<usize> {
    let mut res = Vec::new();
    let min_depth = 4;
    for depth in (min_depth..max_depth).step_by(2) {
        let iterations = 1 << (max_depth - depth + min_depth);
        let mut check = 0;
        for _ in 0..iterations {
            check += count::<H>(&make(depth));
        }
        res.push(check);
    }
    H::collect();
    res
}

/// A complete binary tree of `depth` (leaves are nodes without children).
pub(crate) fn tree<H: Heap>(depth: usize) -> H::Pair {
    if depth == 0 {
        return H::pair(None, None);
    }
    H::pair(Some(tree::<H>(depth - 1)), Some(tree::<H>(depth - 1)))
}

/// Number of nodes under and including `p` (recursion depth = tree depth).
pub(crate) fn count<H: Heap>(p: &H::Pair) -> usize {
    match (H::left(p), H::right(p)) {
        (Some(l), Some(r)) => count::<H>(l) + count::<H>(r) + 1,
        _ => 1,
    }
}
