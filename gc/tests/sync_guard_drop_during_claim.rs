//! A `TraceLock` guard is user code, and the snapshot-free validation of a
//! component (`sync::collector::sigma_claim`) dropped the guards of the
//! component's cells after claiming every member and checking the claims,
//! but before dooming them. A guard's `Drop` that clones a handle out of its
//! cell then made a handle that the doom's plain store erased from the count
//! (a use after free once the component was freed), and one that upgrades a
//! `Weak` to a member waited for the claim to end: for ever, on the thread
//! that holds the claim (and the collector lock). A guard's `Drop` that
//! panicked there unwound out of the collection with the members claimed:
//! every later upgrade of one waited for ever (and, unwinding after the
//! doom, it would leave them undropped: a leak); and two guards whose drops
//! panicked in one unlock (a pin window's close) aborted the process (the
//! second panicked while the first unwound). The collector now unlocks
//! under `catch_unwind` (`Work::unlock`) and re-raises the first panic when
//! the collection ends.
//!
//! The traces sleep 25 ms, so the collection's snapshots are older than the
//! Δ-test trusts (20 ms) and validation takes the snapshot-free path.

use core::cell::UnsafeCell;
use core::sync::atomic::{
    AtomicBool,
    Ordering::{Acquire, Release},
};
use std::cell::{Cell, RefCell};
use std::sync::mpsc;
use std::time::Duration;

use recycler::sync::{collect, Gc, TraceLock, Weak};
use recycler::{Trace, Tracer};

/// What a guard's `Drop` does (a lock that notifies an observer on unlock,
/// say).
#[derive(Clone, Copy, PartialEq)]
enum OnUnlock {
    Nothing,
    /// Clones the handle in the cell once, on the `n`-th unlock, and keeps
    /// the clone in `STASH`.
    CloneOnce(usize),
    /// Upgrades the `Weak` in `OBSERVED`.
    Upgrade,
    /// Panics on the `n`-th unlock.
    PanicOnce(usize),
    /// Panics on every unlock.
    PanicAlways,
}

thread_local! {
    static ON_UNLOCK: Cell<OnUnlock> = const { Cell::new(OnUnlock::Nothing) };
    static UNLOCKS: Cell<usize> = const { Cell::new(0) };
    static STASH: RefCell<Vec<Gc<Node>>> = const { RefCell::new(Vec::new()) };
    static OBSERVED: RefCell<Option<Weak<Node>>> = const { RefCell::new(None) };
}

/// A spin lock holding an optional handle (the `TraceLock` doctest's).
pub struct Cellar {
    locked: AtomicBool,
    value: UnsafeCell<Option<Gc<Node>>>,
}

// SAFETY: the value is only reached through a guard, one at a time.
unsafe impl Sync for Cellar {}

pub struct Guard<'a>(&'a Cellar);

impl Cellar {
    fn new(value: Option<Gc<Node>>) -> Self {
        Cellar {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }
    fn try_lock(&self) -> Option<Guard<'_>> {
        let won = self
            .locked
            .compare_exchange(false, true, Acquire, Acquire)
            .is_ok();
        won.then(|| Guard(self))
    }
    fn lock(&self) -> Guard<'_> {
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            std::thread::yield_now();
        }
    }
}

impl core::ops::Deref for Guard<'_> {
    type Target = Option<Gc<Node>>;
    fn deref(&self) -> &Option<Gc<Node>> {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.0.value.get() }
    }
}

impl core::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Option<Gc<Node>> {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.0.value.get() }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let n = UNLOCKS.with(|u| u.replace(u.get() + 1));
        match ON_UNLOCK.with(Cell::get) {
            OnUnlock::Nothing => {}
            OnUnlock::CloneOnce(k) => {
                if n == k {
                    if let Some(gc) = &**self {
                        STASH.with(|s| s.borrow_mut().push(gc.clone()));
                    }
                }
            }
            OnUnlock::PanicOnce(k) => {
                if n == k {
                    self.0.locked.store(false, Release);
                    panic!("unlock");
                }
            }
            OnUnlock::PanicAlways => {
                self.0.locked.store(false, Release);
                panic!("unlock");
            }
            OnUnlock::Upgrade => OBSERVED.with(|o| {
                if let Some(weak) = o.borrow().as_ref() {
                    drop(weak.upgrade());
                }
            }),
        }
        self.0.locked.store(false, Release);
    }
}

// SAFETY: a guard excludes every other access to the value until it is
// dropped; `try_lock` never blocks; the guard's `Drop` only reads the value
// (a clone of a handle in it, or an upgrade elsewhere) before unlocking.
unsafe impl TraceLock for Cellar {
    type Value = Option<Gc<Node>>;
    type Guard<'a> = Guard<'a>;
    fn try_lock_for_trace(&self) -> Option<Guard<'_>> {
        self.try_lock()
    }
}

pub struct Node {
    next: Cellar,
}

/// Nodes dropped so far (all tests).
static DROPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for Node {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

// SAFETY: the cell is traced through `trace_lock` on itself, which the node
// owns. Sleeping only makes the collection slow.
unsafe impl Trace for Node {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        std::thread::sleep(Duration::from_millis(25));
        tracer.trace_lock(&self.next);
    }
}

fn cycle() -> (Gc<Node>, Gc<Node>) {
    let a = Gc::new(Node {
        next: Cellar::new(None),
    });
    let b = Gc::new(Node {
        next: Cellar::new(Some(a.clone())),
    });
    *a.next.lock() = Some(b.clone());
    (a, b)
}

/// The tests share the collector and `DROPPED`: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` on its own thread; `None` if it has not finished after `secs`.
fn with_timeout<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).ok()
}

#[test]
fn a_handle_cloned_by_a_guard_drop_during_validation_stays_counted() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let outcome = with_timeout(600, || {
        let (a, b) = cycle();
        // No `Weak`: nothing but the counts keeps the memory.
        drop((a, b));
        // Every unlock of the first collection: the two cells at the close
        // of the trace's pin window, then the two of the re-trace of the
        // snapshot-free validation, dropped after the claims. Clone on one
        // of the latter.
        ON_UNLOCK.with(|o| o.set(OnUnlock::CloneOnce(3)));
        UNLOCKS.with(|u| u.set(0));
        let dropped = DROPPED.load(std::sync::atomic::Ordering::Relaxed);
        collect();
        ON_UNLOCK.with(|o| o.set(OnUnlock::Nothing));
        let freed = DROPPED.load(std::sync::atomic::Ordering::Relaxed) - dropped;
        let stash = STASH.with(|s| s.borrow_mut().pop())?;
        // The kept handle counts: the object's memory is still there (its
        // value dropped: a dead handle), and no new object gets it.
        let fresh: Vec<Gc<Node>> = (0..64)
            .map(|_| {
                Gc::new(Node {
                    next: Cellar::new(None),
                })
            })
            .collect();
        let aliased = fresh.iter().any(|f| Gc::ptr_eq(f, &stash));
        let count = Gc::strong_count(&stash);
        let dead = Gc::try_deref(&stash).is_none();
        drop(fresh);
        drop(stash);
        collect();
        Some((freed, aliased, count, dead))
    });
    let outcome = outcome.expect("collection hung");
    let (freed, aliased, count, dead) = outcome.expect("the guard's drop made no clone");
    assert!(
        !aliased,
        "a kept handle aliases a new object: its object was freed"
    );
    assert!(
        count >= 1,
        "a kept handle's object has strong count {count}"
    );
    assert_eq!(
        (freed, dead),
        (2, true),
        "the cycle was collected, the kept handle is dead"
    );
}

#[test]
fn a_guard_drop_may_upgrade_a_weak_to_a_member_during_validation() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let freed = with_timeout(60, || {
        let (a, b) = cycle();
        let weak = Gc::downgrade(&a);
        OBSERVED.with(|o| *o.borrow_mut() = Some(weak.clone()));
        drop((a, b));
        ON_UNLOCK.with(|o| o.set(OnUnlock::Upgrade));
        for _ in 0..3 {
            collect();
        }
        ON_UNLOCK.with(|o| o.set(OnUnlock::Nothing));
        OBSERVED.with(|o| o.borrow_mut().take());
        weak.upgrade().is_none()
    });
    let freed = freed.expect("the collector hangs: a guard's drop upgraded a claimed member");
    assert!(freed, "the cycle was not collected");
}

#[test]
fn a_guard_drop_that_panics_during_validation_loses_no_member() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let outcome = with_timeout(60, || {
        let (a, b) = cycle();
        let weak = Gc::downgrade(&a);
        drop((a, b));
        // The first unlock of the snapshot-free validation, after the
        // claims (see above).
        ON_UNLOCK.with(|o| o.set(OnUnlock::PanicOnce(2)));
        UNLOCKS.with(|u| u.set(0));
        let dropped = DROPPED.load(std::sync::atomic::Ordering::Relaxed);
        let unwound = std::panic::catch_unwind(collect).is_err();
        ON_UNLOCK.with(|o| o.set(OnUnlock::Nothing));
        // Before the fix: the members stayed claimed, and this waited for
        // ever.
        let upgraded = weak.upgrade().is_some();
        collect();
        let freed = DROPPED.load(std::sync::atomic::Ordering::Relaxed) - dropped;
        (unwound, upgraded, freed, weak.upgrade().is_none())
    });
    let (unwound, upgraded, freed, gone) = outcome.expect("an upgrade or a collection hung");
    assert!(unwound, "the guard's panic is re-raised by `collect`");
    assert!(!upgraded && gone);
    assert_eq!(freed, 2, "the collected members are dropped");
}

#[test]
fn guard_drops_that_all_panic_do_not_abort() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let outcome = with_timeout(60, || {
        let (a, b) = cycle();
        let weak = Gc::downgrade(&a);
        drop((a, b));
        // Both cells unlocked at once (one pin window), both unlocks panic:
        // unwinding from the first, the collector dropped the second (a
        // panic in a destructor during cleanup: an abort).
        ON_UNLOCK.with(|o| o.set(OnUnlock::PanicAlways));
        let dropped = DROPPED.load(std::sync::atomic::Ordering::Relaxed);
        let unwound = std::panic::catch_unwind(collect).is_err();
        ON_UNLOCK.with(|o| o.set(OnUnlock::Nothing));
        collect();
        let freed = DROPPED.load(std::sync::atomic::Ordering::Relaxed) - dropped;
        (unwound, freed, weak.upgrade().is_none())
    });
    let (unwound, freed, gone) = outcome.expect("an upgrade or a collection hung");
    assert!(unwound, "a guard's panic is re-raised by `collect`");
    assert_eq!((freed, gone), (2, true), "the cycle is collected");
}
