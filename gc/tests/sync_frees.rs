//! Deferred frees of `recycler::sync` (see "Deferred frees" in
//! `sync/state.rs`): the memory a collection on a mutator thread frees is
//! kept for that thread's next allocations, and all of it goes back to the
//! allocator at the end of `sync::collect()` and when the thread exits;
//! the collector thread keeps nothing. Fails if either return is left out,
//! if the collector thread keeps frees, or if nothing is reused.
//! Every free has its allocation's layout (`System` checks it).
//!
//! This file holds a single test: it counts allocations process-wide.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use recycler::sync::{collect, set_collector_mode, stats, CollectorMode, Gc};
use recycler::Trace;

/// Counts the blocks of [`SIZE`] bytes allocated (and not freed), and
/// records on the current thread the size of the last allocation.
struct Counting;

/// The size of a node's allocation (zero until measured).
static SIZE: AtomicUsize = AtomicUsize::new(0);
static OUTSTANDING: AtomicIsize = AtomicIsize::new(0);
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static LAST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to `System`; the bookkeeping allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LAST.try_with(|l| l.set(layout.size()));
        if layout.size() == SIZE.load(SeqCst) {
            OUTSTANDING.fetch_add(1, SeqCst);
            ALLOCATED.fetch_add(1, SeqCst);
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() == SIZE.load(SeqCst) {
            OUTSTANDING.fetch_sub(1, SeqCst);
        }
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// A candidate of an unusual size (no collector buffer has it).
#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    _pad: [u64; 9],
}

fn node() -> Gc<Node> {
    Gc::new(Node {
        next: Mutex::new(None),
        _pad: [0; 9],
    })
}

/// Makes garbage 2-cycles until the automatic collections on this thread
/// have freed some (at least `cycles` of them made), and stops right after
/// such a collection, so that it left frees kept. Returns the number of
/// nodes made.
fn churn(cycles: usize) -> usize {
    let mut made = 0;
    loop {
        let before = stats().freed_by_collector;
        let a = node();
        let b = node();
        *a.next.lock().unwrap() = Some(b.clone());
        *b.next.lock().unwrap() = Some(a);
        drop(b);
        made += 1;
        if made >= cycles && stats().freed_by_collector > before {
            return 2 * made;
        }
    }
}

#[test]
fn kept_frees_go_back_to_the_allocator() {
    let cycles = if cfg!(miri) { 2_000 } else { 50_000 };
    // The size of a node's allocation.
    drop(node());
    let size = LAST.with(Cell::get);
    SIZE.store(size, SeqCst);
    OUTSTANDING.store(0, SeqCst);

    // On this thread: `collect()` frees the garbage left and returns what
    // the collections kept.
    ALLOCATED.store(0, SeqCst);
    let nodes = churn(cycles);
    // The collections' garbage was reused: fewer nodes came from the
    // allocator than were made.
    let allocated = ALLOCATED.load(SeqCst);
    assert!(allocated < nodes, "{allocated} of {nodes} nodes allocated");
    collect();
    assert_eq!(OUTSTANDING.load(SeqCst), 0, "blocks of {size} bytes left");

    // On a thread that exits right after a collection: its exit returns
    // what that collection kept (the garbage it buffered since is handed
    // over and freed by the `collect()` below, which returns its own).
    let _ = std::thread::spawn(move || churn(cycles)).join().unwrap();
    collect();
    assert_eq!(OUTSTANDING.load(SeqCst), 0, "blocks of {size} bytes left");

    // The collector thread, which allocates no objects, keeps nothing: once
    // its collections ran, `collect()` here leaves nothing, while it still
    // runs. (Not under Miri: the collector thread waits on parking_lot's
    // condition variable, whose word lock casts integers to pointers, which
    // strict provenance rejects; the logic is the same as above.)
    if cfg!(miri) {
        return;
    }
    set_collector_mode(CollectorMode::Thread);
    let _ = std::thread::spawn(move || churn(cycles)).join().unwrap();
    collect();
    assert_eq!(OUTSTANDING.load(SeqCst), 0, "blocks of {size} bytes left");
    set_collector_mode(CollectorMode::Mutators);
}
