//! The sink in which the thread-safe collector keeps the lock guards of the
//! cells it traces (see `recycler::sync`): a guard must stay alive until the
//! collector has taken its holds or finished validating a component, and
//! only dropping it matters.
//!
//! Guards are type-erased: each is stored in three words with its drop
//! function (`parking_lot`'s and `std`'s guards fit; a larger one is boxed,
//! and the box stored instead), so keeping a guard costs no allocation and
//! releasing it is one indirect call.

use core::mem::{align_of, size_of, MaybeUninit};

/// Inline storage for one guard.
type Slot = MaybeUninit<[usize; 3]>;

/// One kept guard: `drop` drops the guard stored in `data`.
struct Held {
    data: Slot,
    drop: unsafe fn(*mut Slot),
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: `data` holds a guard of the type `drop` was made for
        // (written by `GuardSink::push`), dropped exactly once, here.
        unsafe { (self.drop)(&mut self.data) };
    }
}

/// Drops the `G` stored in `slot`.
///
/// # Safety
/// `slot` holds an initialised `G` that is not used afterwards.
unsafe fn drop_inline<G>(slot: *mut Slot) {
    // SAFETY: per the contract.
    unsafe { core::ptr::drop_in_place(slot.cast::<G>()) }
}

/// Whether a `G` fits in a [`Slot`].
const fn fits<G>() -> bool {
    size_of::<G>() <= size_of::<Slot>() && align_of::<G>() <= align_of::<Slot>()
}

/// The guards kept by one trace or validation; dropping them (or
/// `clear_catching`) unlocks the cells.
#[derive(Default)]
pub(crate) struct GuardSink {
    held: Vec<Held>,
}

impl GuardSink {
    /// Keeps `guard` until the sink is cleared or dropped.
    ///
    /// # Safety
    /// Whatever `guard` borrows must stay alive and in place until then.
    #[inline]
    pub(crate) unsafe fn keep<'g, G: 'g>(&mut self, guard: G) {
        if fits::<G>() {
            // SAFETY: it fits; the caller keeps its borrow valid.
            unsafe { self.push(guard) }
        } else {
            // SAFETY: a box is one pointer; as above.
            unsafe { self.push(Box::new(guard)) }
        }
    }

    /// Stores `guard` in a new entry, writing it in place at its own size
    /// (building a `Held` first and copying it reloaded the guard's freshly
    /// stored fields 16 bytes at a time: a store-forwarding stall on every
    /// cell the collector locked).
    ///
    /// # Safety
    /// `G` fits in a [`Slot`]; whatever `guard` borrows stays alive and in
    /// place until the entry is dropped (its lifetime is erased here).
    #[inline(always)]
    unsafe fn push<G>(&mut self, guard: G) {
        debug_assert!(fits::<G>());
        if self.held.len() == self.held.capacity() {
            self.held.reserve(1);
        }
        // SAFETY: there is room for one more entry; both fields are written
        // before the length covers it; `G` fits in `Slot` (the contract) and
        // is dropped as a `G` by `drop_inline::<G>`.
        unsafe {
            let entry = self.held.as_mut_ptr().add(self.held.len());
            core::ptr::addr_of_mut!((*entry).data)
                .cast::<G>()
                .write(guard);
            core::ptr::addr_of_mut!((*entry).drop).write(drop_inline::<G>);
            self.held.set_len(self.held.len() + 1);
        }
    }

    /// Keeps `guard` at position `index` (at most [`len`](Self::len)): older
    /// than the guards kept since the sink held `index` of them, so it is
    /// dropped after them.
    ///
    /// # Safety
    /// As for [`keep`](Self::keep).
    #[inline]
    pub(crate) unsafe fn keep_at<'g, G: 'g>(&mut self, index: usize, guard: G) {
        // SAFETY: forwarded contract.
        unsafe { self.keep(guard) };
        if index + 1 < self.held.len() {
            self.held[index..].rotate_right(1);
        }
    }

    /// How many guards are kept.
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    /// Drops every kept guard, newest first, unlocking the cells (keeps the
    /// capacity): a cell inside another cell is unlocked before it (see
    /// [`keep_at`](Self::keep_at)). A guard is user code (`sync::TraceLock`)
    /// whose drop may panic, and a second panicking drop while the first
    /// unwound would abort the process: the run is under one
    /// `catch_unwind`, resumed at the next guard after a panic (as the drop
    /// queue's drain); the first panic goes to `panic`, the others are
    /// dropped.
    pub(crate) fn clear_catching(&mut self, panic: &mut Option<crate::payload::Payload>) {
        crate::payload::drain_catching(panic, || {
            while let Some(held) = self.held.pop() {
                drop(held);
            }
        });
    }
}

impl Drop for GuardSink {
    /// Newest first, as [`clear_catching`](GuardSink::clear_catching) (a
    /// `Vec` drops its elements oldest first); a panic is dropped.
    fn drop(&mut self) {
        let mut panic = None;
        self.clear_catching(&mut panic);
        crate::payload::discard(panic);
    }
}

#[cfg(test)]
mod tests {
    use super::GuardSink;
    use std::sync::Mutex;

    #[test]
    fn guards_are_kept_until_cleared_inline_or_boxed() {
        let small = Mutex::new(1u8);
        /// Too large to be stored inline: kept boxed.
        struct Big<'a> {
            _padding: [u64; 8],
            _guard: std::sync::MutexGuard<'a, u8>,
        }
        let other = Mutex::new(2u8);
        let mut sink = GuardSink::default();
        // SAFETY: the mutexes outlive the sink's contents (cleared below).
        unsafe {
            sink.keep(small.lock().unwrap());
            sink.keep(Big {
                _padding: [0; 8],
                _guard: other.lock().unwrap(),
            });
        }
        assert!(small.try_lock().is_err());
        assert!(other.try_lock().is_err());
        let mut panic = None;
        sink.clear_catching(&mut panic);
        assert!(panic.is_none());
        assert!(small.try_lock().is_ok());
        assert!(other.try_lock().is_ok());
    }

    #[test]
    fn a_guard_kept_below_others_is_dropped_after_them() {
        use std::cell::RefCell;
        /// Records its number when dropped.
        struct Guard<'a>(u8, &'a RefCell<Vec<u8>>);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                self.1.borrow_mut().push(self.0);
            }
        }
        let order = RefCell::new(Vec::new());
        for dropped in [false, true] {
            let mut sink = GuardSink::default();
            // SAFETY: `order` outlives the sink.
            unsafe {
                sink.keep(Guard(1, &order));
                let below = sink.len();
                sink.keep(Guard(2, &order));
                sink.keep(Guard(3, &order));
                // An outer cell's guard, kept once the cells inside it are.
                sink.keep_at(below, Guard(4, &order));
                // At the end: no move.
                sink.keep_at(sink.len(), Guard(5, &order));
            }
            assert_eq!(sink.len(), 5);
            if dropped {
                drop(sink);
            } else {
                let mut panic = None;
                sink.clear_catching(&mut panic);
                assert!(panic.is_none());
            }
            let order = order.take();
            assert_eq!(order[0], 5);
            assert_eq!(
                order[1..],
                [3, 2, 4, 1],
                "newest first, the outer guard after its inner ones"
            );
        }
    }
}
