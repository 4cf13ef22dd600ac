//! rust-cc-benchmarks "binary trees with parent pointers": the binary-trees
//! workload where every inner node below the root also points back to its
//! parent (a cycle per edge; `Weak` for the plain counters), then a final
//! collection.

use crate::heap::Heap;
use crate::workloads::binary_trees::count_trees;

/// Runs the workload; returns the node counts per depth (the checksum).
pub fn parent_trees<H: Heap>(max_depth: usize) -> Vec<usize> {
    count_trees::<H>(max_depth, tree_with_parents::<H>)
}

/// A complete tree whose inner children point back to their parent (leaves,
/// the original's `End` nodes, have no parent field).
pub(crate) fn tree_with_parents<H: Heap>(depth: usize) -> H::Pair {
    if depth == 0 {
        return H::pair(None, None);
    }
    let left = tree_with_parents::<H>(depth - 1);
    let right = tree_with_parents::<H>(depth - 1);
    let node = H::pair(Some(left), Some(right));
    if depth > 1 {
        if let (Some(l), Some(r)) = (H::left(&node), H::right(&node)) {
            H::set_back(l, &node);
            H::set_back(r, &node);
        }
    }
    node
}
