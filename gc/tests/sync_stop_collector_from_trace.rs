//! Hostile review: user code that runs under the collector lock (a `Trace`
//! impl, a `TraceLock` guard's drop, a panic payload's drop) may switch the
//! collector mode: the `Trace` contract forbids only *waiting* for a lock
//! that a collected value owns. `set_collector_mode(Mutators)` (and
//! `stop_collector_thread`) joined the collector thread, which may itself be
//! waiting for the collector lock that this very thread holds: a deadlock.
//! Now a stop from inside a collection asks the thread to exit after the
//! collection it waits for, as a stop from the collector thread does.
//!
//! The probe runs the collection on a worker thread and fails if it has not
//! finished within 20 s (the worker then stays stuck: the test process
//! exits anyway).

#![cfg(target_os = "linux")]

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use recycler::sync::{
    collect, collector_mode, set_collector_mode, stop_collector_thread, CollectorMode, Gc,
};
use recycler::{Trace, Tracer};

#[path = "common/threads.rs"]
mod threads;
use threads::collector_threads;

/// Whether the next trace of a [`Switch`] switches the mode.
static ARMED: AtomicBool = AtomicBool::new(false);
/// Whether the next trace of a [`Switch`] stops the collector thread (of
/// which there is none).
static STOP_NONE: AtomicBool = AtomicBool::new(false);

struct Switch {
    next: Mutex<Option<Gc<Switch>>>,
}

// SAFETY: reports the one lock it owns, once; switching the collector mode
// takes no pointer away from any value.
unsafe impl Trace for Switch {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if ARMED.swap(false, SeqCst) {
            start_a_collector_thread_that_waits();
            set_collector_mode(CollectorMode::Mutators);
        }
        if STOP_NONE.swap(false, SeqCst) {
            stop_collector_thread();
        }
        self.next.trace(tracer);
    }
}

/// Whether no collector thread is left within 10 s (a joined thread may
/// linger in `/proc` for a moment).
fn collector_thread_gone() -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while collector_threads() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    collector_threads() == 0
}

/// A self-cycle of [`Switch`], dropped.
fn garbage() -> recycler::sync::Weak<Switch> {
    let a = Gc::new(Switch {
        next: Mutex::new(None),
    });
    *a.next.lock().unwrap() = Some(a.clone());
    Gc::downgrade(&a)
}

/// Makes garbage on another thread until its trigger has started the
/// collector thread, which then waits for the collector lock (held by the
/// caller, if it is tracing), and gives it a moment to block there.
fn start_a_collector_thread_that_waits() {
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                garbage();
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while collector_threads() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, SeqCst);
    churn.join().unwrap();
    assert!(collector_threads() > 0, "no collector thread started");
    std::thread::sleep(Duration::from_millis(100));
}

#[test]
#[cfg_attr(miri, ignore = "reads /proc (isolation), sleeps")]
fn switching_to_mutators_from_a_trace_does_not_deadlock() {
    set_collector_mode(CollectorMode::Thread);
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        recycler::sync::set_policy(recycler::Policy::Manual);
        let weak = garbage();
        ARMED.store(true, SeqCst);
        collect();
        done.send(weak.upgrade().is_none()).unwrap();
    });
    let freed = finished
        .recv_timeout(Duration::from_secs(20))
        .expect("the collection that switched the mode from a trace deadlocked");
    assert!(!ARMED.load(SeqCst), "the trace did not run");
    assert!(freed);
    assert_eq!(collector_mode(), CollectorMode::Mutators);
    // The collector thread exits once the collection it waited for is done.
    assert!(collector_thread_gone(), "the collector thread did not exit");

    // A stop from inside a collection with no collector thread running
    // leaves no exit request behind: the next request under `Thread` still
    // starts a thread.
    recycler::sync::set_policy(recycler::Policy::Manual);
    let weak = garbage();
    STOP_NONE.store(true, SeqCst);
    collect();
    assert!(!STOP_NONE.load(SeqCst), "the trace did not run");
    assert!(weak.upgrade().is_none());
    set_collector_mode(CollectorMode::Thread);
    start_a_collector_thread_that_waits();
    set_collector_mode(CollectorMode::Mutators);
    assert!(collector_thread_gone());
}
