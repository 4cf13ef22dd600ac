//! Hostile review: a `trace` that upgrades a `Weak` (allowed by the `Trace`
//! contract) and then locks a `Mutex` of the object it reached (to read
//! it) deadlocks the collector when that mutex is a cell the collection has
//! pinned, on its own thread, in the same window: the collector waits for
//! itself. The contract did not say that `trace` must not block on a lock;
//! it does now (obligation 2). The first test shows the deadlock (ignored:
//! it fails by design, run it with `--ignored`); the second, the allowed
//! `try_lock`, returns.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use recycler::sync::{collect, set_policy, Gc, Weak};
use recycler::{Policy, Trace, Tracer};

struct Node {
    /// Whether `trace` waits for the peer's lock (breaks obligation 2).
    wait: bool,
    next: Mutex<Option<Gc<Node>>>,
    /// Not owned: not reported.
    peer: Mutex<Weak<Node>>,
}

// SAFETY: reports the one handle it owns, through its lock, once; it only
// reads another object (through an upgraded `Weak`, dropped again).
unsafe impl Trace for Node {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        tracer.trace_lock(&self.next);
        let peer = self.peer.lock().unwrap().upgrade();
        if let Some(peer) = peer {
            // Read the peer's state.
            if self.wait {
                let _is_linked = peer.next.lock().unwrap().is_some();
            } else if let Ok(next) = peer.next.try_lock() {
                let _is_linked = next.is_some();
            }
        }
    }
}

#[test]
#[ignore = "deadlocks: a trace that waits for a lock breaks the Trace contract"]
fn a_trace_that_waits_for_a_pinned_cell_deadlocks() {
    assert!(cycle_is_collected(true), "collect() deadlocked");
}

#[test]
fn a_trace_that_try_locks_a_pinned_cell_returns() {
    assert!(cycle_is_collected(false), "collect() deadlocked");
}

/// Collects a garbage pair whose `trace` reads its peer's cell; `false` if
/// `collect()` did not return within 10 s.
fn cycle_is_collected(wait: bool) -> bool {
    set_policy(Policy::Manual);
    let a = Gc::new(Node {
        wait,
        next: Mutex::new(None),
        peer: Mutex::new(Weak::new()),
    });
    let b = Gc::new(Node {
        wait,
        next: Mutex::new(Some(a.clone())),
        peer: Mutex::new(Gc::downgrade(&a)),
    });
    *a.next.lock().unwrap() = Some(b);
    let weak = Gc::downgrade(&a);
    drop(a);
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    std::thread::spawn(move || {
        set_policy(Policy::Manual);
        collect();
        flag.store(true, SeqCst);
    });
    let start = Instant::now();
    while !done.load(SeqCst) {
        if start.elapsed() > Duration::from_secs(10) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // (The upgrade in `trace` changes the member's word: by obligation 2
    // that cycle leaks, so only the return of `collect()` is checked.)
    drop(weak);
    true
}
