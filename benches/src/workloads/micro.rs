//! Micro-operations for the core issue's goals, each measured against
//! `std::rc::Rc` in the same run: clone + drop of a handle to an acyclic type
//! (`u64`, `String`) and to a candidate type (a pair node that can own
//! pointers), new + drop of a `u64`, and create-and-collect of 2-node cycles
//! (two pair nodes linked both ways — `Weak` back edge for the plain counters,
//! i.e. `Rc::new` ×2 + link — dropped; the collectors' automatic collection
//! runs as it would, plus one full collection at the end of the batch).

use std::hint::black_box;

use crate::heap::Heap;

/// One 2-node cycle, dropped at once.
#[inline]
pub fn cycle2<H: Heap>() {
    let a = H::pair(None, None);
    let b = H::pair(Some(a.clone()), None);
    H::set_back(&a, &b);
    black_box(&b);
}

/// `n` cycles then a full collection (one timed batch).
pub fn cycles<H: Heap>(n: u64) {
    for _ in 0..n {
        cycle2::<H>();
    }
    H::collect();
}

/// Clones and drops a handle `n` times.
pub fn clone_drop<T: Clone>(x: &T, n: u64) {
    for _ in 0..n {
        drop(black_box(black_box(x).clone()));
    }
}

/// Allocates and drops a `u64` handle `n` times.
pub fn new_drop<H: Heap>(n: u64) {
    for i in 0..n {
        drop(black_box(H::leaf(black_box(i))));
    }
}
