//! Cells inside cells (`Mutex<Vec<Mutex<_>>>`): the collector keeps the
//! guards of the cells it traces until its pin window closes, and releases
//! them newest first, so the guard of a cell must be older than the guards of
//! the cells inside it, also when a `Trace` impl panics inside it. Released
//! first (kept after them, as `trace_lock` did, or dropped by the panic's
//! unwind), it let a mutator replace the `Vec` and free the inner mutexes
//! whose guards the collector still held: their unlocks wrote freed memory
//! (SIGSEGV or a corrupted heap natively, a data race under Miri; an
//! internal review found it, with these tests).

use std::sync::Mutex;

use recycler::sync::{collect, Gc};
use recycler::Trace;

#[path = "common/race.rs"]
mod race;

use race::race;

// One test a binary: collections are process-wide, and the other test's
// panicking traces would reach this one's `collect()`.

mod plain {
    use super::*;

    #[derive(Trace)]
    pub struct Nest {
        outer: Mutex<Vec<Mutex<Option<Gc<Nest>>>>>,
    }

    fn cells() -> Vec<Mutex<Option<Gc<Nest>>>> {
        let inner = if cfg!(miri) { 2 } else { 64 };
        (0..inner).map(|_| Mutex::new(None)).collect()
    }

    #[test]
    fn an_outer_cell_stays_locked_until_the_cells_inside_it_are_unlocked() {
        let n = Gc::new(Nest {
            outer: Mutex::new(cells()),
        });
        let weak = Gc::downgrade(&n);
        // A cycle through an inner cell, so that collections have work.
        *n.outer.lock().unwrap()[0].lock().unwrap() = Some(n.clone());
        let replaced = race(
            n,
            |n| match n.outer.try_lock() {
                // Frees the old vector and the inner mutexes in it (and the
                // cycle's handle: `n` is then held by the test alone).
                Ok(mut g) => {
                    *g = cells();
                    true
                }
                Err(_) => false,
            },
            collect,
        );
        assert!(replaced > 0, "the mutator never got the outer lock");
        collect();
        assert!(weak.upgrade().is_none(), "the object is freed at the end");
    }
}
