//! What an `unsafe impl Trace` may do while the collector calls it: clone and
//! drop its own pointers, allocate, drop unrelated handles (even the last one
//! of a root), call `collect()`. None of it may corrupt the roots buffers or
//! the collector's graph (issue 12, item 5); every test here runs under Miri.
mod common;

use std::cell::{Cell, RefCell};

use common::*;
use recycler::{Gc, Trace, Tracer};

/// Owns one pointer and reports exactly it, but clones it, allocates, and
/// drops the clone while tracing: the target's count drops to a non-zero value
/// in the middle of the collection, which buffers it again.
struct Cloner {
    next: RefCell<Option<Gc<Cloner>>>,
    /// Also call `collect()` from `trace`.
    collect_in_trace: bool,
    /// Panic in `trace` (after the clone is dropped) while set.
    panic_in_trace: Cell<bool>,
}

// SAFETY: reports the one owned pointer once; the clone it makes is its own
// temporary and is dropped before `trace` returns, which the contract allows.
unsafe impl Trace for Cloner {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        let copy = self.next.borrow().clone();
        let scratch = Gc::new(Cloner {
            next: RefCell::new(copy.clone()),
            collect_in_trace: false,
            panic_in_trace: Cell::new(false),
        });
        if self.collect_in_trace {
            recycler::collect();
        }
        drop((copy, scratch));
        if self.panic_in_trace.get() {
            panic!("trace failed");
        }
        self.next.trace(tracer);
    }
}

/// `a` ⇄ `b` where only `a` was ever buffered: `b`'s one handle was moved
/// into `a`, so `b` enters the collection through `a`'s trace, after the
/// clone that `a`'s trace drops has buffered it.
fn cloner_cycle(collect_in_trace: bool) -> Gc<Cloner> {
    let a = Gc::new(Cloner {
        next: RefCell::new(None),
        collect_in_trace,
        panic_in_trace: Cell::new(false),
    });
    *a.next.borrow_mut() = Some(Gc::new(Cloner {
        next: RefCell::new(Some(a.clone())),
        collect_in_trace,
        panic_in_trace: Cell::new(false),
    }));
    a
}

#[test]
fn clones_dropped_during_trace_do_not_leave_freed_objects_buffered() {
    let live = recycler::stats().live;
    drop(cloner_cycle(false));
    assert_eq!(recycler::stats().roots_buffered, 1);
    recycler::collect();
    assert_eq!(recycler::stats().live, live);
    assert_eq!(recycler::stats().roots_buffered, 0);
    // The next collections read the buffers again: nothing freed is in them.
    drop(cloner_cycle(false));
    recycler::collect();
    recycler::collect_minor();
    assert_eq!(recycler::stats().live, live);
    assert_eq!(recycler::stats().roots_buffered, 0);
}

#[test]
fn a_live_object_buffered_during_trace_stays_consistent() {
    // `b` stays reachable (through `a`, on the stack): it is buffered during
    // the trace, entered by the graph, found live, and must not linger in a
    // buffer slot that the graph overwrote.
    let a = cloner_cycle(false);
    let other = Gc::new(Cloner {
        next: RefCell::new(None),
        collect_in_trace: false,
        panic_in_trace: Cell::new(false),
    });
    drop(other.clone()); // buffered after `a`'s trace has buffered `b`
    let a2 = a.clone();
    drop(a2); // `a` is a root
    recycler::collect();
    assert_eq!(recycler::stats().live, 3);
    // Freeing `b` and `other` by counting unbuffers them if they are
    // buffered: each must find its own slot.
    let b = a.next.borrow_mut().take().unwrap();
    *b.next.borrow_mut() = None;
    drop(b);
    drop(other);
    drop(a);
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
    assert_eq!(recycler::stats().roots_buffered, 0);
}

#[test]
fn collect_called_from_trace_runs_after_the_collection() {
    drop(cloner_cycle(true));
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
    assert_eq!(recycler::stats().roots_buffered, 0);
}

#[test]
fn a_panicking_trace_rebuffers_what_the_collection_took_out_of_a_buffer() {
    let a = cloner_cycle(false);
    // `b` panics when traced, after `a`'s trace has buffered it and the
    // graph has taken it out of the buffer again.
    let weak_b = Gc::downgrade(a.next.borrow().as_ref().unwrap());
    a.next.borrow().as_ref().unwrap().panic_in_trace.set(true);
    drop(a);
    assert_eq!(recycler::stats().roots_buffered, 1);
    let caught = std::panic::catch_unwind(recycler::collect);
    assert!(caught.is_err());
    // Both are back: `a` (a root) and `b` (buffered by `a`'s trace).
    assert_eq!(recycler::stats().roots_buffered, 2);
    assert_eq!(recycler::stats().live, 2);
    weak_b.upgrade().unwrap().panic_in_trace.set(false);
    recycler::collect();
    assert!(weak_b.upgrade().is_none());
    assert_eq!(recycler::stats().live, 0);
    assert_eq!(recycler::stats().roots_buffered, 0);
}

thread_local! {
    /// A handle owned by no traced value.
    static STASH: RefCell<Option<Gc<Node>>> = const { RefCell::new(None) };
}

/// Empties [`STASH`] from its `trace`: drops a handle that no traced value
/// owns, possibly the last one of a buffered root.
struct Thief {
    armed: Cell<bool>,
    next: RefCell<Option<Gc<Thief>>>,
}

// SAFETY: reports the one owned pointer; the handle it drops belongs to no
// value (a thread-local), which the contract allows.
unsafe impl Trace for Thief {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if self.armed.replace(false) {
            STASH.with(|s| s.borrow_mut().take());
        }
        self.next.trace(tracer);
    }
}

/// A garbage self-cycle that empties the stash when traced. Roots are traced
/// in buffer order, so make it before the stashed root.
fn thief() {
    let thief = Gc::new(Thief {
        armed: Cell::new(true),
        next: RefCell::new(None),
    });
    *thief.next.borrow_mut() = Some(thief.clone());
}

#[test]
fn a_root_whose_last_handle_goes_during_trace_is_freed_once() {
    take_dropped();
    thief();
    // A buffered root whose one handle, the stashed one, the thief drops
    // while the root waits in the graph: the graph must not be left with a
    // freed node, and the root is dropped exactly once.
    let root = Node::new();
    let extra = root.clone();
    STASH.with(|s| *s.borrow_mut() = Some(root));
    drop(extra); // buffered, count 1: the stash
    recycler::collect();
    assert_eq!(take_dropped().len(), 1);
    assert_eq!(recycler::stats().live, 0);
    assert_eq!(recycler::stats().roots_buffered, 0);
    recycler::collect();
}

#[test]
fn a_live_root_whose_last_handle_goes_during_trace_is_freed_by_counting() {
    take_dropped();
    thief();
    // No self edge, and a cell borrowed for good: the verdict keeps the root
    // alive (it cannot look inside), while the thief drops the stashed handle,
    // so the collection's own hold on the root is the last reference left.
    let root = Node::new();
    let extra = root.clone();
    STASH.with(|s| *s.borrow_mut() = Some(root));
    std::mem::forget(extra.edges.borrow_mut());
    drop(extra); // buffered (`Node` may own pointers), count 1: the stash
    recycler::collect();
    assert_eq!(take_dropped().len(), 1);
    assert_eq!(recycler::stats().live, 0);
    assert_eq!(recycler::stats().roots_buffered, 0);
}
