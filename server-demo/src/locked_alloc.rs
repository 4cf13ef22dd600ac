//! One lock around every allocation and free, switched on at run time: the
//! `locked-alloc` defect of `--mm orc-nim16-faithful`.
//!
//! Nim 1.6 compiled with `--threads:on` and `--mm:orc` allocated every
//! object from one shared heap guarded by one lock (Nim 2.0 replaced it with
//! per-thread heaps, PR 20492), so every allocation and every free of every
//! thread took the same lock. [`LockedAlloc`] is the process's global
//! allocator: it forwards to [`System`], and takes [`LOCK`] around the call
//! only while [`set_locked`] has switched the lock on. Otherwise the cost is
//! one relaxed load and a predictable branch per call (measured by the
//! `locked_alloc` criterion benchmark of this crate).
//!
//! The lock is a `std::sync::Mutex`, which on Linux is a futex word: taking
//! it neither allocates nor registers thread-local destructors, so it may be
//! used inside the allocator (a lock that allocates while parking, like
//! `parking_lot`'s, would re-enter it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Whether allocations take [`LOCK`].
static LOCKED: AtomicBool = AtomicBool::new(false);

/// The one heap lock.
static LOCK: Mutex<()> = Mutex::new(());

/// The global allocator: [`System`], behind [`LOCK`] while it is switched on.
pub struct LockedAlloc;

/// Switches the heap lock on or off for every later allocation and free.
/// (An object allocated under one setting may be freed under the other:
/// the lock only serialises calls into `System`, which is thread-safe
/// either way.)
pub fn set_locked(on: bool) {
    LOCKED.store(on, Relaxed);
}

/// Whether the heap lock is on.
#[cfg(test)]
pub fn is_locked() -> bool {
    LOCKED.load(Relaxed)
}

/// Takes the heap lock if it is switched on. Nothing panics while it is
/// held, but a poisoned lock is taken anyway rather than failing inside the
/// allocator.
#[inline]
fn guard() -> Option<MutexGuard<'static, ()>> {
    if LOCKED.load(Relaxed) {
        Some(LOCK.lock().unwrap_or_else(PoisonError::into_inner))
    } else {
        None
    }
}

// SAFETY: every method forwards its arguments unchanged to `System`, which
// implements `GlobalAlloc` correctly; holding a mutex around the call changes
// nothing about the memory returned or freed. The mutex neither allocates
// nor panics (poisoning is ignored), so no call re-enters the allocator.
unsafe impl GlobalAlloc for LockedAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _guard = guard();
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        unsafe { System.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _guard = guard();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _guard = guard();
        // SAFETY: the caller passes a block this allocator returned, i.e. one
        // `System` returned, with the layout it was allocated with.
        unsafe { System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _guard = guard();
        // SAFETY: as for `dealloc`, and the caller upholds `realloc`'s
        // contract for `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_with_and_without_the_lock() {
        let layout = Layout::from_size_align(48, 16).unwrap();
        for on in [false, true] {
            // The test binary's global allocator is this wrapper too, so
            // other tests running meanwhile take the lock as well: slower,
            // never wrong.
            LOCKED.store(on, Relaxed);
            // SAFETY: a non-zero-sized layout; the block is written within
            // its size, grown with `realloc` and freed once with the layout
            // it has then.
            unsafe {
                let p = LockedAlloc.alloc_zeroed(layout);
                assert!(!p.is_null());
                assert_eq!(*p.add(47), 0);
                p.write_bytes(7, 48);
                let q = LockedAlloc.realloc(p, layout, 96);
                assert!(!q.is_null());
                assert_eq!(*q.add(47), 7);
                LockedAlloc.dealloc(q, Layout::from_size_align(96, 16).unwrap());
            }
            assert_eq!(is_locked(), on);
            assert!(!LOCK.is_poisoned());
        }
        LOCKED.store(false, Relaxed);
    }
}
