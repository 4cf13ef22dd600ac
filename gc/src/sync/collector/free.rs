//! Step 5 of a collection: the doomed values dropped and their holds
//! released, after the collector lock is released (see the
//! [collector's documentation](super), step 5).

use core::ptr::NonNull;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::sync::drops::Panic;
use crate::sync::header::Header;

/// The doomed objects of a collection, whose values step 5 drops after the
/// collector lock is released: each with the collector's hold (a strong
/// reference), `DOOMED` and marked dead, its value alive. A thread keeps
/// the list's buffer for its next collection.
pub(super) struct Dying(pub(super) Vec<NonNull<Header>>);

#[cfg(not(loom))]
std::thread_local! {
    static DYING: core::cell::Cell<Vec<NonNull<Header>>> = const { core::cell::Cell::new(Vec::new()) };
}

impl Dying {
    /// This thread's (empty) buffer.
    #[inline]
    pub(super) fn take() -> Dying {
        #[cfg(not(loom))]
        let buffer = DYING.try_with(core::cell::Cell::take).unwrap_or_default();
        #[cfg(loom)]
        let buffer = Vec::new();
        Dying(buffer)
    }

    /// Step 5 without the collector lock: drops every value, then sets
    /// `GONE` on each member and releases its hold (no member's count
    /// reaches zero while the values drop, so no memory is freed before the
    /// last value has dropped; a hold left as the only reference is
    /// released without an RMW, see `Header::release_doomed`). Returns the
    /// first panic of a `Drop`. Fields of a garbage value whose count reaches zero
    /// are only queued (we run in a drop batch), so a value whose `Drop`
    /// panics unwinds through no other user code.
    ///
    /// Why no lock is needed: a doomed object is reachable by no other
    /// thread. Validation proved every strong reference to it is held by
    /// a member of its garbage or is our hold, and `DOOMED` makes every
    /// upgrade and every other collector's hold fail, so nobody can make a
    /// new one; another collector draining its buffer entry touches only
    /// the header word (the entry's and our release agree through the word,
    /// as a mutator's last drop and a drain do). A `Drop` that stores a
    /// handle of a member elsewhere stores a dead handle: a later trace
    /// cannot hold it either. The collector-private header cells (graph
    /// slot, generation) were read under the lock (step 5 counts the old
    /// ones there).
    #[inline]
    pub(super) fn free(mut self) -> Panic {
        let mut panic = None;
        for &header in &self.0 {
            // SAFETY: doomed and held by us: the value is alive and ours
            // alone (see above).
            let result = catch_unwind(AssertUnwindSafe(|| unsafe {
                (header.as_ref().vtable.drop_value)(header)
            }));
            if let Err(payload) = result {
                crate::payload::keep_first(&mut panic, payload);
            }
        }
        for header in self.0.drain(..) {
            // SAFETY: held (the hold is consumed here), doomed, value dropped.
            unsafe { Header::release_doomed(header) };
        }
        #[cfg(not(loom))]
        {
            let buffer = core::mem::take(&mut self.0);
            let _ = DYING.try_with(|d| d.set(buffer));
        }
        panic
    }
}
