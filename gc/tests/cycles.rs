//! Cycles are freed by the collector exactly when they are unreachable, each
//! value once, and freeing is safe against hostile destructors.
mod common;

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use common::*;
use recycler::{Gc, Trace, Tracer};

#[test]
fn acyclic_garbage_is_freed_at_once() {
    let a = Node::new();
    let b = Node::new();
    a.link(&b);
    drop(b);
    assert!(take_dropped().is_empty());
    drop(a);
    assert_eq!(take_dropped().len(), 2);
    assert_eq!(recycler::stats().freed_by_rc, 2);
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn unreachable_cycles_are_freed_reachable_ones_are_not() {
    let a = Node::new();
    let b = Node::new();
    let c = Node::new();
    a.link(&b);
    b.link(&a);
    b.link(&c);
    c.link(&b);
    let (ida, idb, idc) = (a.id, b.id, c.id);
    // `c` stays reachable from the stack: the whole strongly connected
    // component is live.
    drop((a, b));
    recycler::collect();
    assert!(take_dropped().is_empty());
    assert_eq!(Gc::strong_count(&c), 2);
    drop(c);
    recycler::collect();
    let mut dropped = take_dropped();
    dropped.sort();
    assert_eq!(dropped, vec![ida, idb, idc]);
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn self_cycle_and_garbage_hanging_off_a_cycle() {
    let a = Node::new();
    a.link(&a);
    let tail = Node::new();
    a.link(&tail);
    tail.link(&Node::new());
    drop(tail);
    drop(a);
    recycler::collect();
    assert_eq!(take_dropped().len(), 3);
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn each_value_is_dropped_exactly_once() {
    let nodes: Vec<_> = (0..50).map(|_| Node::new()).collect();
    for (i, n) in nodes.iter().enumerate() {
        n.link(&nodes[(i * 7 + 3) % 50]);
        n.link(&nodes[(i + 1) % 50]);
    }
    let ids: Vec<_> = nodes.iter().map(|n| n.id).collect();
    drop(nodes);
    recycler::collect();
    recycler::collect();
    let mut dropped = take_dropped();
    dropped.sort();
    assert_eq!(dropped, ids);
}

#[test]
fn weak_upgrade_fails_after_collection_and_memory_outlives_it() {
    let a = Node::new();
    let b = Node::new();
    a.link(&b);
    b.link(&a);
    let weak = Gc::downgrade(&a);
    assert_eq!(weak.strong_count(), 2);
    drop((a, b));
    assert!(weak.upgrade().is_some());
    recycler::collect();
    assert!(weak.upgrade().is_none());
    assert_eq!(weak.strong_count(), 0);
    assert_eq!(weak.weak_count(), 0);
    drop(weak);
}

/// A node whose destructor dereferences its neighbours.
struct Peeker {
    next: RefCell<Option<Gc<Peeker>>>,
    saw_dead: RefCell<Option<bool>>,
}

thread_local! {
    static OBSERVED: RefCell<Vec<bool>> = const { RefCell::new(Vec::new()) };
    static KEEP: RefCell<Vec<Gc<Peeker>>> = const { RefCell::new(Vec::new()) };
}

impl Drop for Peeker {
    fn drop(&mut self) {
        if let Some(next) = self.next.borrow().as_ref() {
            OBSERVED.with(|o| o.borrow_mut().push(Gc::try_deref(next).is_none()));
            if self.saw_dead.borrow().is_some() {
                // Resurrect the neighbour: store a clone where nobody traces.
                KEEP.with(|k| k.borrow_mut().push(next.clone()));
            }
        }
    }
}

// SAFETY: reports the one owned pointer.
unsafe impl Trace for Peeker {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        self.next.trace(tracer);
    }
}

fn peeker_ring(n: usize, resurrect: bool) -> Vec<Gc<Peeker>> {
    let nodes: Vec<_> = (0..n)
        .map(|_| {
            Gc::new(Peeker {
                next: RefCell::new(None),
                saw_dead: RefCell::new(resurrect.then_some(false)),
            })
        })
        .collect();
    for i in 0..n {
        *nodes[i].next.borrow_mut() = Some(nodes[(i + 1) % n].clone());
    }
    nodes
}

#[test]
fn destructors_see_dead_members_never_freed_memory() {
    drop(peeker_ring(3, false));
    recycler::collect();
    // Every destructor ran and saw its neighbour already dead.
    let observed = OBSERVED.with(|o| std::mem::take(&mut *o.borrow_mut()));
    assert_eq!(observed, vec![true, true, true]);
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn dereferencing_a_dead_member_panics() {
    drop(peeker_ring(2, true));
    recycler::collect();
    let kept = KEEP.with(|k| std::mem::take(&mut *k.borrow_mut()));
    assert_eq!(kept.len(), 2);
    for handle in &kept {
        assert!(Gc::try_deref(handle).is_none());
        let result = catch_unwind(AssertUnwindSafe(|| handle.next.borrow().is_some()));
        assert!(result.is_err(), "deref of a dead Gc must panic");
        assert!(Gc::downgrade(handle).upgrade().is_none());
        assert!(Gc::get_mut(&mut handle.clone()).is_none());
    }
    assert_eq!(
        format!("{:?}", kept[0].clone().try_unwrap_dbg()),
        "(collected)"
    );
    // The zombies' memory is released with their last handles.
    let live = recycler::stats().live;
    drop(kept);
    assert_eq!(recycler::stats().live, live);
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
}

trait DebugDead {
    fn try_unwrap_dbg(self) -> DebugWrap;
}
struct DebugWrap(Gc<Peeker>);
impl std::fmt::Debug for DebugWrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match Gc::try_deref(&self.0) {
            Some(_) => f.write_str("alive"),
            None => f.write_str("(collected)"),
        }
    }
}
impl DebugDead for Gc<Peeker> {
    fn try_unwrap_dbg(self) -> DebugWrap {
        DebugWrap(self)
    }
}

/// Panics in its destructor when `boom` is set.
struct Bomb {
    boom: bool,
    next: RefCell<Option<Gc<Bomb>>>,
}

thread_local! {
    static BOMBS_DROPPED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Drop for Bomb {
    fn drop(&mut self) {
        BOMBS_DROPPED.with(|n| n.set(n.get() + 1));
        if self.boom {
            panic!("boom");
        }
    }
}

// SAFETY: reports the one owned pointer.
unsafe impl Trace for Bomb {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        self.next.trace(tracer);
    }
}

#[test]
fn a_panicking_destructor_does_not_stop_the_others() {
    let nodes: Vec<_> = (0..4)
        .map(|i| {
            Gc::new(Bomb {
                boom: i == 1,
                next: RefCell::new(None),
            })
        })
        .collect();
    for i in 0..4 {
        *nodes[i].next.borrow_mut() = Some(nodes[(i + 1) % 4].clone());
    }
    drop(nodes);
    let result = catch_unwind(recycler::collect);
    assert!(result.is_err(), "the destructor's panic is re-raised");
    assert_eq!(BOMBS_DROPPED.with(|n| n.get()), 4);
    // The collector is consistent: a later cycle is collected normally.
    let a = Node::new();
    a.link(&a);
    drop(a);
    recycler::collect();
    assert_eq!(take_dropped().len(), 1);
    let stats = recycler::stats();
    assert_eq!(stats.freed_by_collector, 5);
}

/// A node whose `trace` panics when asked to.
struct Fragile {
    panic_in_trace: std::cell::Cell<bool>,
    next: RefCell<Option<Gc<Fragile>>>,
}

// SAFETY: reports the one owned pointer (or panics first).
unsafe impl Trace for Fragile {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if self.panic_in_trace.get() {
            panic!("trace failed");
        }
        self.next.trace(tracer);
    }
}

#[test]
fn a_panicking_trace_leaves_counts_and_roots_intact() {
    let a = Gc::new(Fragile {
        panic_in_trace: std::cell::Cell::new(false),
        next: RefCell::new(None),
    });
    let b = Gc::new(Fragile {
        panic_in_trace: std::cell::Cell::new(true),
        next: RefCell::new(Some(a.clone())),
    });
    *a.next.borrow_mut() = Some(b.clone());
    let weak_a = Gc::downgrade(&a);
    let weak_b = Gc::downgrade(&b);
    let b_ptr: *const Fragile = Gc::as_ptr(&b);
    drop((a, b));
    let roots = recycler::stats().roots_buffered;
    assert!(catch_unwind(recycler::collect).is_err());
    assert_eq!(recycler::stats().roots_buffered, roots);
    assert_eq!(weak_a.strong_count(), 1);
    assert_eq!(weak_b.strong_count(), 1);
    assert_eq!(recycler::stats().live, 2);
    // The roots were kept: once the trace behaves, the next collection frees
    // the cycle, together with new garbage.
    // SAFETY: the cycle is still alive (weak_b upgrades).
    unsafe { &*b_ptr }.panic_in_trace.set(false);
    let c = Node::new();
    c.link(&c);
    drop(c);
    recycler::collect();
    assert_eq!(take_dropped().len(), 1);
    assert!(weak_a.upgrade().is_none() && weak_b.upgrade().is_none());
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn a_mutably_borrowed_cell_keeps_its_owner_alive() {
    let a = Node::new();
    let b = Node::new();
    a.link(&b);
    b.link(&a);
    let weak = Gc::downgrade(&a);
    let guard_holder = a.clone();
    drop((a, b));
    {
        let _borrow = guard_holder.edges.borrow_mut();
        let holder = guard_holder.clone();
        drop(holder);
        recycler::collect();
    }
    assert!(take_dropped().is_empty());
    drop(guard_holder);
    recycler::collect();
    assert_eq!(take_dropped().len(), 2);
    assert!(weak.upgrade().is_none());
}

#[test]
fn a_borrowed_cell_in_garbage_defers_the_cycle_to_a_later_collection() {
    let a = Node::new();
    let b = Node::new();
    a.link(&b);
    b.link(&a);
    let edges: *const RefCell<Vec<Gc<Node>>> = &a.edges;
    drop((a, b));
    // SAFETY: the cycle is alive until the second collection below.
    let borrow = unsafe { &*edges }.borrow_mut();
    recycler::collect();
    assert!(take_dropped().is_empty(), "nothing freed while borrowed");
    assert_eq!(
        recycler::stats().roots_buffered,
        1,
        "the opaque owner waits"
    );
    drop(borrow);
    recycler::collect();
    assert_eq!(take_dropped().len(), 2);
}

struct CollectsOnDrop {
    next: RefCell<Option<Gc<CollectsOnDrop>>>,
}

impl Drop for CollectsOnDrop {
    fn drop(&mut self) {
        // Build new garbage and ask for a collection from inside one.
        let n = Node::new();
        n.link(&n);
        drop(n);
        recycler::collect();
    }
}

// SAFETY: reports the one owned pointer.
unsafe impl Trace for CollectsOnDrop {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        self.next.trace(tracer);
    }
}

#[test]
fn collect_from_a_destructor_is_deferred() {
    let a = Gc::new(CollectsOnDrop {
        next: RefCell::new(None),
    });
    *a.next.borrow_mut() = Some(a.clone());
    drop(a);
    recycler::collect();
    // The deferred collection ran after the first and freed the new cycle.
    assert_eq!(take_dropped().len(), 1);
    assert_eq!(recycler::stats().live, 0);
    assert_eq!(recycler::stats().full_collections, 2);
}

#[test]
fn rc_cycles_leak_and_stats_show_it() {
    use recycler::Rc;
    struct R {
        next: RefCell<Option<Rc<R>>>,
    }
    // SAFETY: reports nothing; `Rc` is opaque anyway.
    unsafe impl Trace for R {
        fn trace(&self, tracer: &mut Tracer<'_>) {
            self.next.trace(tracer);
        }
    }
    let a = Rc::new(R {
        next: RefCell::new(None),
    });
    *a.next.borrow_mut() = Some(a.clone());
    let weak = Rc::downgrade(&a);
    drop(a);
    recycler::collect();
    let stats = recycler::stats();
    assert_eq!(stats.live, 1);
    assert_eq!(stats.roots_buffered, 0);
    assert_eq!(stats.freed_by_collector, 0);
    // Break the leaked cycle by hand (Miri's leak check sees the memory).
    let a = weak.upgrade().expect("the leaked cycle is alive");
    drop(a.next.borrow_mut().take());
    drop(a);
    assert_eq!(recycler::stats().live, 0);
    assert!(weak.upgrade().is_none());
}

/// Reports its pointer twice: a broken `Trace` impl.
struct Stutter {
    next: RefCell<Option<Gc<Stutter>>>,
}

// SAFETY: deliberately wrong (reports the pointer twice) to check that the
// collector notices the impossible negative trial count and frees nothing.
unsafe impl Trace for Stutter {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        self.next.trace(tracer);
        self.next.trace(tracer);
    }
}

#[test]
fn a_trace_that_reports_a_pointer_twice_makes_the_collector_give_up() {
    let a = Gc::new(Stutter {
        next: RefCell::new(None),
    });
    let b = Gc::new(Stutter {
        next: RefCell::new(Some(a.clone())),
    });
    *a.next.borrow_mut() = Some(b.clone());
    let weak = Gc::downgrade(&a);
    let outside = b.clone();
    drop((a, b));
    recycler::collect();
    // `b` has a handle outside; the double report must not hide it.
    assert!(weak.upgrade().is_some());
    assert!(Gc::try_deref(&outside).is_some());
    // Break the cycle by hand; counting frees both.
    *outside.next.borrow_mut() = None;
    drop(outside);
    assert!(weak.upgrade().is_none());
}
