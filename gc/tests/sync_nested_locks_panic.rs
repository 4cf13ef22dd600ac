//! Cells inside cells (`Mutex<Vec<(Mutex<_>, Bomb)>>`) with a `Trace` impl
//! that panics inside the outer one (a binary of its own: collections are
//! process-wide, and its panics would reach `sync_nested_locks.rs`'s
//! `collect()`). The collector keeps the
//! guards of the cells it traces until its pin window closes, and releases
//! them newest first, so the guard of a cell must be older than the guards of
//! the cells inside it, also when a `Trace` impl panics inside it. Released
//! first (kept after them, as `trace_lock` did, or dropped by the panic's
//! unwind), it let a mutator replace the `Vec` and free the inner mutexes
//! whose guards the collector still held: their unlocks wrote freed memory
//! (SIGSEGV or a corrupted heap natively, a data race under Miri; an
//! internal review found it, with these tests).

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, TryLockError};

use recycler::sync::{collect, Gc};
use recycler::{Trace, Tracer};

#[path = "common/race.rs"]
mod race;

use race::race;

mod panicking {
    use super::*;

    /// Collections whose trace panicked.
    static PANICS: AtomicU64 = AtomicU64::new(0);

    /// Owns no pointer; its `trace` panics (which the contract allows).
    pub struct Bomb;

    // SAFETY: reports nothing (it owns no pointer) and panics, which the
    // `Trace` contract allows.
    unsafe impl Trace for Bomb {
        fn trace(&self, _: &mut Tracer<'_>) {
            panic!("a trace panics inside a cell");
        }
    }

    /// An inner cell, next to a value whose trace panics.
    type Inner = (Mutex<Option<Gc<Nest>>>, Bomb);

    #[derive(Trace)]
    pub struct Nest {
        outer: Mutex<Vec<Inner>>,
    }

    fn cells() -> Vec<Inner> {
        let inner = if cfg!(miri) { 2 } else { 64 };
        (0..inner).map(|_| (Mutex::new(None), Bomb)).collect()
    }

    #[test]
    fn a_panicking_trace_inside_a_cell_does_not_unlock_it_early() {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let n = Gc::new(Nest {
            outer: Mutex::new(cells()),
        });
        let replaced = race(
            n,
            |n| {
                // The collector's unwinding poisons the outer lock.
                let guard = match n.outer.try_lock() {
                    Ok(g) => g,
                    Err(TryLockError::Poisoned(p)) => p.into_inner(),
                    Err(TryLockError::WouldBlock) => return false,
                };
                let mut guard = guard;
                *guard = cells(); // frees the inner mutexes
                true
            },
            // The trace's panic is re-raised when the collection ends (unless
            // the mutator held the outer lock: then it was not traced).
            || {
                if std::panic::catch_unwind(collect).is_err() {
                    PANICS.fetch_add(1, SeqCst);
                }
            },
        );
        std::panic::set_hook(hook);
        assert!(replaced > 0, "the mutator never got the outer lock");
        assert!(PANICS.load(SeqCst) > 0, "no trace panicked");
    }
}
