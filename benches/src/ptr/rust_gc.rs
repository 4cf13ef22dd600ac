//! `gc` (rust-gc, renamed `rust-gc` here): a tracing mark-and-sweep
//! collector; strong back edges in `GcCell`s, automatic collection by the
//! crate's allocation threshold.

// gc_derive 0.5 wraps its impls in `const _: () = { ... }` blocks.
#![allow(non_local_definitions)]

use rust_gc::{Finalize, Gc, GcCell, Trace};

use crate::live::Live;
use crate::ptr::Slot;

/// Marker for `gc::Gc`.
pub struct RustGc;

/// Pair node.
#[derive(Trace, Finalize)]
pub struct PairNode {
    left: Option<Gc<PairNode>>,
    right: Option<Gc<PairNode>>,
    back: GcCell<Option<Gc<PairNode>>>,
    #[unsafe_ignore_trace]
    _live: Live,
}

/// Graph node.
#[derive(Trace, Finalize)]
pub struct GraphNode {
    _label: String,
    edges: GcCell<Vec<Gc<GraphNode>>>,
    back: GcCell<Option<Gc<GraphNode>>>,
    #[unsafe_ignore_trace]
    _live: Live,
}

strong_back_heap!(
    impl[] RustGc,
    name: "gc",
    ptr: Gc,
    collect: rust_gc::force_collect(),
);

impl<T: Trace + 'static> Slot<T> for GcCell<T> {
    fn new(value: T) -> Self {
        GcCell::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.borrow_mut())
    }
}
