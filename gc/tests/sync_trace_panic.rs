//! A `Trace` that panics inside a lock (the contract allows it) after the
//! value reported an edge from that lock. The unwind used to drop the lock's
//! guard before the collector's guard sink could keep it, so the edge was no
//! longer pinned: another thread could take the handle out of the cell and
//! free its target while the collection ran, and the collector then used the
//! edge (a hold on freed memory, which Miri reported as a dangling reference
//! in `Work::lookup`; natively a silent read of freed memory; found by a
//! hostile review). The collector drops the edges of a panicking trace; and
//! since the thirty-second session the guard is kept through the unwind, until
//! the collection's pin window closes (`sync_nested_locks_panic.rs` has why),
//! so the cell stays locked and its handles alive: this test checks both. No
//! `unsafe` but `unsafe impl Trace`s that keep the contract. The channels
//! make the interleaving deterministic: `Slow` is a slow trace, which the
//! contract allows.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Mutex, TryLockError};

use recycler::sync::{self, Gc};
use recycler::{Trace, Tracer};

static ARMED: AtomicBool = AtomicBool::new(false);
static TO_MUTATOR: Mutex<Option<mpsc::Sender<()>>> = Mutex::new(None);
static FROM_MUTATOR: Mutex<Option<mpsc::Receiver<()>>> = Mutex::new(None);
static X_DROPS: AtomicUsize = AtomicUsize::new(0);
static NODE_DROPS: AtomicUsize = AtomicUsize::new(0);

/// The edge's target; may own pointers, so edges to it are followed.
#[derive(Trace)]
struct X {
    _next: Mutex<Option<Gc<X>>>,
}

impl Drop for X {
    fn drop(&mut self) {
        X_DROPS.fetch_add(1, SeqCst);
    }
}

/// Owns no pointer; once armed, its trace lets the mutator go and panics.
struct Bomb;

// SAFETY: owns no collected pointer and reports none; panicking is allowed.
unsafe impl Trace for Bomb {
    fn trace(&self, _: &mut Tracer<'_>) {
        if ARMED.load(SeqCst) {
            TO_MUTATOR
                .lock()
                .unwrap()
                .as_ref()
                .unwrap()
                .send(())
                .unwrap();
            panic!("a trace that panics (allowed by the contract)");
        }
    }
}

/// A slow part of a trace (allowed): while unwinding, waits for the mutator
/// to have tried the cell.
struct Slow;

impl Drop for Slow {
    fn drop(&mut self) {
        if ARMED.load(SeqCst) && std::thread::panicking() {
            FROM_MUTATOR
                .lock()
                .unwrap()
                .as_ref()
                .unwrap()
                .recv()
                .unwrap();
        }
    }
}

struct Node {
    cell: Mutex<Option<(Gc<X>, Bomb)>>,
}

// SAFETY: reports exactly the lock it owns (through its own `Trace`), once.
unsafe impl Trace for Node {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        let _slow = Slow;
        self.cell.trace(tracer);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        NODE_DROPS.fetch_add(1, SeqCst);
    }
}

#[test]
fn an_edge_reported_before_a_panic_inside_a_lock_is_not_followed() {
    sync::set_policy(recycler::Policy::Manual);
    let (to_mutator, from_collector) = mpsc::channel();
    let (to_collector, from_mutator) = mpsc::channel();
    *TO_MUTATOR.lock().unwrap() = Some(to_mutator);
    *FROM_MUTATOR.lock().unwrap() = Some(from_mutator);

    let x = Gc::new(X {
        _next: Mutex::new(None),
    });
    let node = Gc::new(Node {
        cell: Mutex::new(Some((x, Bomb))),
    });
    let for_mutator = node.clone();
    drop(node); // buffered as a possible root, one handle left

    let mutator = std::thread::spawn(move || {
        from_collector.recv().unwrap(); // the collector is inside the trace
                                        // The trace panics and its unwind waits for us (`Slow`): the cell
                                        // stays locked through it, so `X` cannot be taken out and freed.
        let locked = matches!(for_mutator.cell.try_lock(), Err(TryLockError::WouldBlock));
        to_collector.send(()).unwrap();
        (for_mutator, locked)
    });

    ARMED.store(true, SeqCst);
    let collected = std::panic::catch_unwind(sync::collect);
    ARMED.store(false, SeqCst);
    assert!(collected.is_err(), "the trace's panic is re-raised");
    let (node, locked) = mutator.join().unwrap();
    assert!(locked, "the cell stayed locked while the trace unwound");
    assert_eq!(X_DROPS.load(SeqCst), 0, "`X` was reachable");
    assert_eq!(NODE_DROPS.load(SeqCst), 0, "the node was reachable");
    drop(node);
    sync::collect();
    assert_eq!(X_DROPS.load(SeqCst), 1, "`X` dropped exactly once");
    assert_eq!(NODE_DROPS.load(SeqCst), 1, "the node freed by counting");
}
