//! Hostile review: a user lock (`sync::TraceLock`) whose guard's `Drop`
//! upgrades a `sync::Weak` (say, to wake the next waiter, a task that is a
//! `sync::Gc`). Neither the `TraceLock` nor the `Trace` contract forbids it
//! (`trace` itself may upgrade `Weak`s). When a component is validated
//! without snapshots (`sigma_claim`: snapshots older than 20 ms, here after
//! a slow `trace`), the collector dropped the re-trace's guards while the
//! members were `CLAIMED` and not yet `DOOMED`: the upgrade in the guard's
//! `Drop` spun, on the collector's own thread, for a claim that only that
//! thread could take back — a deadlock.

use core::cell::UnsafeCell;
use std::sync::atomic::{
    AtomicBool, AtomicUsize,
    Ordering::{Acquire, Release, SeqCst},
};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use recycler::sync::{collect, set_policy, Gc, TraceLock, Weak};
use recycler::{Policy, Trace, Tracer};

/// A spin lock whose unlock wakes a waiter held by a `Weak`.
struct WakeLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
    waiter: Mutex<Weak<Node>>,
}

// SAFETY: the value is only reached through a guard, one at a time.
unsafe impl<T: Send> Sync for WakeLock<T> {}

struct Guard<'a, T>(&'a WakeLock<T>);

impl<T> WakeLock<T> {
    fn new(value: T) -> Self {
        WakeLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
            waiter: Mutex::new(Weak::new()),
        }
    }
    fn try_lock(&self) -> Option<Guard<'_, T>> {
        let won = self
            .locked
            .compare_exchange(false, true, Acquire, Acquire)
            .is_ok();
        won.then(|| Guard(self))
    }
    fn lock(&self) -> Guard<'_, T> {
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            std::thread::yield_now();
        }
    }
}

impl<T> core::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.0.value.get() }
    }
}
impl<T> core::ops::DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.0.value.get() }
    }
}

static WAKES: AtomicUsize = AtomicUsize::new(0);

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.0.locked.store(false, Release);
        // Wake the waiter, if it still lives.
        if let Some(task) = self.0.waiter.lock().unwrap().upgrade() {
            WAKES.fetch_add(1, SeqCst);
            drop(task);
        }
    }
}

// SAFETY: a guard excludes every other access to the value until it is
// dropped (on any thread, at any time); `try_lock` never blocks.
unsafe impl<T: Trace> TraceLock for WakeLock<T> {
    type Value = T;
    type Guard<'a>
        = Guard<'a, T>
    where
        T: 'a;
    fn try_lock_for_trace(&self) -> Option<Guard<'_, T>> {
        self.try_lock()
    }
}

struct Node {
    next: WakeLock<Option<Gc<Node>>>,
}

/// A slow trace (allowed): the collection's snapshots are older than the
/// 20 ms the Δ-test trusts, so the component is validated by `sigma_claim`.
static SLOW: AtomicBool = AtomicBool::new(false);

// SAFETY: reports the handle in its own lock, through `trace_lock`, once.
unsafe impl Trace for Node {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if SLOW.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(30));
        }
        tracer.trace_lock(&self.next);
    }
}

#[test]
fn a_guard_that_upgrades_in_its_drop_does_not_deadlock_the_collector() {
    set_policy(Policy::Manual);
    let a = Gc::new(Node {
        next: WakeLock::new(None),
    });
    let b = Gc::new(Node {
        next: WakeLock::new(Some(a.clone())),
    });
    *a.next.lock() = Some(b.clone());
    // Each lock's waiter is the other node.
    *a.next.waiter.lock().unwrap() = Gc::downgrade(&b);
    *b.next.waiter.lock().unwrap() = Gc::downgrade(&a);
    let weak = Gc::downgrade(&a);
    drop((a, b));
    SLOW.store(true, SeqCst);
    static DONE: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(|| {
        set_policy(Policy::Manual);
        collect();
        DONE.store(true, SeqCst);
    });
    let start = Instant::now();
    while !DONE.load(SeqCst) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "collect() deadlocked"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(weak.upgrade().is_none(), "the cycle was not freed");
}
