//! How long a header-word snapshot may back a Δ-test.
//!
//! The Δ-test (`collector::claim`) proves that a member's word did not
//! change since its snapshot by finding it equal: every clone, drop, upgrade
//! and buffering bumps the word's 26-bit modification counter. Equal words
//! prove nothing once `2^26` such operations may have run in between (with
//! the count restored, the counter wraps back to the snapshot's): a
//! collector stalled that long between snapshot and claim (a slow but legal
//! `Trace`, preemption) freed a value another thread was still borrowing
//! (`gc/tests/sync_counter_wrap.rs`).
//!
//! So a snapshot backs a Δ-test only while it is younger than
//! [`MAX_AGE`]: `2^26` read-modify-writes of one word take far longer. They
//! are serialised on its cache line, at least about 15 cycles apart on the
//! CPUs of today (at 6 GHz, 2.5 ns: `2^26` of them in 0.17 s), and more
//! when several cores contend for the line; every mutator operation on a
//! `sync::Gc` header is such an RMW. `MAX_AGE` is 20 ms, 8 times shorter.
//! [`Stamp`] reads the monotonic clock (`Instant`: it keeps counting while
//! a thread is preempted or the process stopped, as the mutators are then
//! stopped too), once when a collection starts draining and once per
//! validation; a collection whose snapshots are older validates each
//! component without them (`collector::sigma_claim`: its cells locked,
//! every member claimed, then its word checked unchanged with the help of
//! the `TOUCHED` bit that clones of a claimed object set, which no counter
//! wrap can hide).
//!
//! Under loom there is no clock: snapshots never age, unless a model forces
//! a collection's drained ones stale (`force_stale`, in tests); so do the crate's
//! unit tests.

#[cfg(not(loom))]
use std::time::{Duration, Instant};

/// The age beyond which a snapshot no longer backs a Δ-test.
#[cfg(not(loom))]
pub(crate) const MAX_AGE: Duration = Duration::from_millis(20);

/// When snapshots were taken (at the latest).
#[derive(Clone, Copy)]
pub(crate) struct Stamp {
    #[cfg(not(loom))]
    at: Instant,
    /// Stale whatever the clock says (`force_stale`, in tests).
    #[cfg(any(test, loom))]
    stale: bool,
}

impl Stamp {
    /// Now: every snapshot taken from here on is at least this young.
    pub(crate) fn now() -> Stamp {
        Stamp {
            #[cfg(not(loom))]
            at: Instant::now(),
            #[cfg(any(test, loom))]
            stale: false,
        }
    }

    /// As [`Stamp::now`], for the snapshots of a collection's drain, which
    /// `force_stale` (in tests) makes stale.
    pub(crate) fn drain() -> Stamp {
        #[cfg_attr(not(any(test, loom)), allow(unused_mut))]
        let mut stamp = Stamp::now();
        #[cfg(any(test, loom))]
        {
            stamp.stale = FORCE_STALE.with(core::cell::Cell::get);
        }
        stamp
    }

    /// Whether a snapshot taken after this stamp still backs a Δ-test: fewer
    /// than `2^26` operations on one word can have run since.
    pub(crate) fn fresh(self) -> bool {
        #[cfg(any(test, loom))]
        if self.stale {
            return false;
        }
        #[cfg(not(loom))]
        return self.at.elapsed() < MAX_AGE;
        #[cfg(loom)]
        return true;
    }
}

#[cfg(any(test, loom))]
std::thread_local! {
    static FORCE_STALE: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Makes the drained snapshots of the collections on this thread count as
/// stale, so that they are taken again (tests and loom models of that
/// path).
#[cfg(any(test, loom))]
#[doc(hidden)]
pub fn force_stale(on: bool) {
    FORCE_STALE.with(|f| f.set(on));
}
