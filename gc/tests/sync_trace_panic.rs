//! A `Trace` that panics inside a lock (the contract allows it) after the
//! value reported an edge from that lock. The unwind drops the lock's guard
//! before the collector's guard sink can keep it, so the edge is no longer
//! pinned: another thread can take the handle out of the cell and free its
//! target while the collection runs. The collector must then not use the
//! edge (it did: a hold on freed memory, which Miri reports as a dangling
//! reference in `Work::lookup`; natively a silent read of freed memory).
//! Found by a hostile review; no `unsafe` but `unsafe impl Trace`s that keep
//! the contract. The channels make the interleaving deterministic: `Slow` is
//! a slow trace, which the contract allows, and preemption opens the same
//! window.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Mutex};

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
/// to have freed `X`.
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
                                        // Waits for the unwind to drop the collector's guard (the panic
                                        // poisoned the mutex).
        let taken = for_mutator
            .cell
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(taken); // the last handle of `X`: freed by counting
        assert_eq!(X_DROPS.load(SeqCst), 1);
        to_collector.send(()).unwrap();
        for_mutator
    });

    ARMED.store(true, SeqCst);
    let collected = std::panic::catch_unwind(sync::collect);
    ARMED.store(false, SeqCst);
    assert!(collected.is_err(), "the trace's panic is re-raised");
    let node = mutator.join().unwrap();
    assert_eq!(NODE_DROPS.load(SeqCst), 0, "the node was reachable");
    drop(node);
    sync::collect();
    assert_eq!(X_DROPS.load(SeqCst), 1, "`X` dropped exactly once");
    assert_eq!(NODE_DROPS.load(SeqCst), 1, "the node freed by counting");
}
