//! The sink in which the thread-safe collector keeps the lock guards of the
//! cells it traces (see `recycler::sync`): a guard must stay alive until the
//! collector has taken its holds or finished validating a component, and
//! only dropping it matters.
//!
//! Guards are type-erased. One that fits in three words (`parking_lot`'s and
//! `std`'s guards do) is stored inline with its drop function, so keeping a
//! guard costs no allocation; a larger one is boxed.

use core::mem::{align_of, size_of, MaybeUninit};

/// Inline storage for one guard.
type Slot = MaybeUninit<[usize; 3]>;

/// One kept guard.
enum Held {
    /// A guard stored in place; `drop` drops it.
    Inline {
        data: Slot,
        drop: unsafe fn(*mut Slot),
    },
    Boxed(#[allow(dead_code)] Box<dyn Erased>),
}

/// Any guard (only its destructor matters).
trait Erased {}
impl<T> Erased for T {}

impl Drop for Held {
    fn drop(&mut self) {
        if let Held::Inline { data, drop } = self {
            // SAFETY: `data` holds a guard of the type `drop` was made for
            // (written by `GuardSink::keep`), dropped exactly once, here.
            unsafe { drop(data) };
        }
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

/// The guards kept by one trace or validation; dropping them (or `clear`)
/// unlocks the cells.
#[derive(Default)]
pub(crate) struct GuardSink {
    held: Vec<Held>,
}

impl GuardSink {
    /// Keeps `guard` until the sink is cleared or dropped.
    ///
    /// # Safety
    /// Whatever `guard` borrows must stay alive and in place until then.
    pub(crate) unsafe fn keep<'g, G: 'g>(&mut self, guard: G) {
        if size_of::<G>() <= size_of::<Slot>() && align_of::<G>() <= align_of::<Slot>() {
            let mut data = Slot::uninit();
            // SAFETY: `G` fits in `Slot` in size and alignment (checked
            // above); the value is moved in and dropped by `drop_inline::<G>`.
            // Its borrow is erased; the caller keeps it valid.
            unsafe { data.as_mut_ptr().cast::<G>().write(guard) };
            self.held.push(Held::Inline {
                data,
                drop: drop_inline::<G>,
            });
        } else {
            let boxed: Box<dyn Erased + 'g> = Box::new(guard);
            // SAFETY: only the trait object's lifetime bound changes (same
            // layout and vtable); the caller keeps the borrow valid.
            let boxed: Box<dyn Erased + 'static> = unsafe { core::mem::transmute(boxed) };
            self.held.push(Held::Boxed(boxed));
        }
    }

    /// How many guards are kept.
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    /// Drops every kept guard, unlocking the cells (keeps the capacity).
    pub(crate) fn clear(&mut self) {
        self.held.clear();
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
        sink.clear();
        assert!(small.try_lock().is_ok());
        assert!(other.try_lock().is_ok());
    }
}
