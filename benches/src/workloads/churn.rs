//! Acyclic churn: `n` times, allocate a small value, clone the handle, read
//! through the clone and drop both. Nothing here can form a cycle; a
//! collector that classifies types at compile time should cost what `Rc`
//! costs.

use std::hint::black_box;

use crate::heap::Heap;

/// Runs the workload; returns the sum of the values read.
pub fn churn<H: Heap>(n: u64) -> u64 {
    let mut sum = 0u64;
    for i in 0..n {
        let a = black_box(H::leaf(i));
        let b = black_box(a.clone());
        sum = sum.wrapping_add(H::leaf_value(&b));
        drop(a);
        drop(b);
    }
    sum
}
