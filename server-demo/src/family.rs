//! Pointer families: the one thing that differs between the `--mm` modes.
//!
//! The per-request object graph ([`crate::graph`]) and the per-thread hubs
//! ([`crate::hubs`]) are written once, generic over a [`Family`]. A family says
//! which strong pointer the graph allocates its objects with and which cell
//! holds a mutable link. `--mm arc` uses [`RcFamily`] (plain reference
//! counting, the cycles leak: Nim's ARC); `--mm orc-nim16` and `--mm orc` use
//! [`GcFamily`] (reference counting plus the cycle collector; the two differ
//! only in the [`recycler::Policy`] each worker thread sets).
//!
//! A thread-safe family (`recycler::sync` pointers with a lockable cell, for a
//! work-stealing runtime) is one more implementation of this trait: the graph
//! only ever allocates through [`Family::alloc`], reads and writes links
//! through [`Family::read`] and [`Family::write`], and never names a concrete
//! pointer or cell type.

use std::cell::RefCell;
use std::ops::Deref;

use recycler::{Trace, Tracer};

/// A family of reference-counted pointers plus the cell used for mutable links.
///
/// `Trace` is a supertrait only because `#[derive(Trace)]` bounds every type
/// parameter of a node type by `Trace`; the markers are uninhabited and trace
/// nothing.
pub trait Family: Trace + Sized + 'static {
    /// The name printed in `/stats` and in the compare output.
    const NAME: &'static str;

    /// The strong pointer every graph object is allocated behind.
    type P<T: Trace + 'static>: Clone + Deref<Target = T> + Trace;

    /// A mutable slot inside a graph object (a back-link set after
    /// construction, a list that grows, a counter).
    type Cell<T: Trace + 'static>: Trace;

    /// Allocates `value` behind a new pointer.
    fn alloc<T: Trace + 'static>(value: T) -> Self::P<T>;

    /// Whether two pointers point to the same object.
    fn ptr_eq<T: Trace + 'static>(a: &Self::P<T>, b: &Self::P<T>) -> bool;

    /// A new cell holding `value`.
    fn cell<T: Trace + 'static>(value: T) -> Self::Cell<T>;

    /// Runs `f` on the contents of `cell`.
    fn read<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&T) -> R) -> R;

    /// Runs `f` on the contents of `cell`, mutably.
    fn write<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&mut T) -> R) -> R;
}

/// `recycler::Rc`: reference counting without a cycle collector (Nim's ARC).
/// Every cycle a request builds leaks.
pub enum RcFamily {}

/// `recycler::Gc`: reference counting plus the cycle collector (Nim's ORC).
/// The collection trigger is the thread's [`recycler::Policy`].
pub enum GcFamily {}

impl Family for RcFamily {
    const NAME: &'static str = "recycler::Rc";
    type P<T: Trace + 'static> = recycler::Rc<T>;
    type Cell<T: Trace + 'static> = RefCell<T>;

    fn alloc<T: Trace + 'static>(value: T) -> Self::P<T> {
        recycler::Rc::new(value)
    }
    fn ptr_eq<T: Trace + 'static>(a: &Self::P<T>, b: &Self::P<T>) -> bool {
        recycler::Rc::ptr_eq(a, b)
    }
    fn cell<T: Trace + 'static>(value: T) -> Self::Cell<T> {
        RefCell::new(value)
    }
    fn read<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&T) -> R) -> R {
        f(&cell.borrow())
    }
    fn write<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut cell.borrow_mut())
    }
}

impl Family for GcFamily {
    const NAME: &'static str = "recycler::Gc";
    type P<T: Trace + 'static> = recycler::Gc<T>;
    type Cell<T: Trace + 'static> = RefCell<T>;

    fn alloc<T: Trace + 'static>(value: T) -> Self::P<T> {
        recycler::Gc::new(value)
    }
    fn ptr_eq<T: Trace + 'static>(a: &Self::P<T>, b: &Self::P<T>) -> bool {
        recycler::Gc::ptr_eq(a, b)
    }
    fn cell<T: Trace + 'static>(value: T) -> Self::Cell<T> {
        RefCell::new(value)
    }
    fn read<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&T) -> R) -> R {
        f(&cell.borrow())
    }
    fn write<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut cell.borrow_mut())
    }
}

// The family markers appear as type parameters of the graph's node types; a
// derived `Trace` may require them to be `Trace` themselves.
//
// SAFETY: the markers are uninhabited enums: no value exists, so there is never
// a pointer to report and `MAY_CONTAIN_GC = false` is exact.
unsafe impl Trace for RcFamily {
    const MAY_CONTAIN_GC: bool = false;
    fn trace(&self, _: &mut Tracer<'_>) {}
}

// SAFETY: as for `RcFamily`: uninhabited, owns nothing.
unsafe impl Trace for GcFamily {
    const MAY_CONTAIN_GC: bool = false;
    fn trace(&self, _: &mut Tracer<'_>) {}
}
