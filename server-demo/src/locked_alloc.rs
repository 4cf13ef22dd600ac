//! The process's global allocator: glibc's `malloc` ([`System`]) or
//! mimalloc, chosen once per process, with one lock around every allocation
//! and free switched on at run time: the `locked-alloc` defect of `--mm
//! orc-nim16-faithful`.
//!
//! Nim 1.6 compiled with `--threads:on` and `--mm:orc` allocated every
//! object from one shared heap guarded by one lock (Nim 2.0 replaced it with
//! per-thread heaps, PR 20492), so every allocation and every free of every
//! thread took the same lock. [`LockedAlloc`] is the process's global
//! allocator: it forwards to the chosen allocator, and takes [`LOCK`] around
//! the call only while [`set_locked`] has switched the lock on. Otherwise the
//! cost is one relaxed load and a predictable branch per call (measured by
//! the `locked_alloc` criterion benchmark of this crate).
//!
//! The allocator is read from the environment variable [`ENV`]
//! (`system`, the default, or `mimalloc`) by the first allocation of the
//! process, before `main`, and never changes afterwards, so every block is
//! freed by the allocator that returned it. Why choose: the collecting
//! modes free garbage in batches (a collection frees hundreds of objects at
//! once), which overflows glibc's small per-thread caches; the next
//! allocations then take `malloc`'s slow path and hyper's buffer
//! allocations consolidate the fast bins. mimalloc's per-page free lists
//! (like Nim's own allocator's size classes) absorb a batch as cheaply as a
//! single free. Every mode of one run uses the same allocator.
//!
//! The lock is a `std::sync::Mutex`, which on Linux is a futex word: taking
//! it neither allocates nor registers thread-local destructors, so it may be
//! used inside the allocator (a lock that allocates while parking, like
//! `parking_lot`'s, would re-enter it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};

use mimalloc::MiMalloc;

/// The environment variable that chooses the allocator: `system` (glibc's
/// `malloc`, the default) or `mimalloc`.
pub const ENV: &str = "SERVER_DEMO_ALLOCATOR";

/// The allocators a process can run on.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Allocator {
    /// The C library's `malloc` (`std::alloc::System`).
    #[default]
    System,
    /// mimalloc (the `mimalloc` crate): size-class pages with per-thread
    /// free lists.
    Mimalloc,
}

impl Allocator {
    /// The name used in [`ENV`] and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Allocator::System => "system",
            Allocator::Mimalloc => "mimalloc",
        }
    }
}

/// 0 until the first allocation, then 1 + the `Allocator` index.
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// The allocator of this process (read from [`ENV`] on first use; an unset
/// or unknown value means [`Allocator::System`]).
pub fn active() -> Allocator {
    match CHOSEN.load(Relaxed) {
        1 => Allocator::System,
        2 => Allocator::Mimalloc,
        _ => {
            let chosen = from_env();
            // The first allocation of the process runs before `main`, on
            // its only thread; a later racer would read the same variable
            // (the environment is not changed before `main`) and store the
            // same value.
            CHOSEN.store(1 + chosen as u8, Relaxed);
            chosen
        }
    }
}

/// Reads [`ENV`] without allocating (this runs inside the allocator).
fn from_env() -> Allocator {
    // SAFETY: `getenv` takes a NUL-terminated name and returns either null
    // or a pointer to a NUL-terminated value owned by the environment, which
    // nothing modifies while the first allocation runs (before `main`, on
    // the only thread). `CStr::from_ptr` reads it up to the NUL.
    let value = unsafe {
        let p = libc::getenv(c"SERVER_DEMO_ALLOCATOR".as_ptr());
        if p.is_null() {
            return Allocator::System;
        }
        std::ffi::CStr::from_ptr(p)
    };
    match value.to_bytes() {
        b"mimalloc" => Allocator::Mimalloc,
        _ => Allocator::System,
    }
}

/// Whether allocations take [`LOCK`].
static LOCKED: AtomicBool = AtomicBool::new(false);

/// The one heap lock.
static LOCK: Mutex<()> = Mutex::new(());

/// The global allocator: [`System`] or [`MiMalloc`] (see [`active`]),
/// behind [`LOCK`] while it is switched on.
pub struct LockedAlloc;

/// Switches the heap lock on or off for every later allocation and free.
/// (An object allocated under one setting may be freed under the other:
/// the lock only serialises calls into the allocator, which is thread-safe
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

/// Calls `$call` on the process's allocator.
macro_rules! forward {
    ($method:ident($($arg:expr),*)) => {
        match active() {
            Allocator::System => System.$method($($arg),*),
            Allocator::Mimalloc => MiMalloc.$method($($arg),*),
        }
    };
}

// SAFETY: every method forwards its arguments unchanged to `System` or
// `MiMalloc`, which implement `GlobalAlloc` correctly, and always to the
// same one: `active()` is fixed by the first allocation of the process and
// never changes, so every block is freed or reallocated by the allocator
// that returned it. Holding a mutex around the call changes nothing about
// the memory returned or freed. Neither the mutex nor `active()` allocates
// or panics (poisoning is ignored), so no call re-enters the allocator.
unsafe impl GlobalAlloc for LockedAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _guard = guard();
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        unsafe { forward!(alloc(layout)) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _guard = guard();
        // SAFETY: as for `alloc`.
        unsafe { forward!(alloc_zeroed(layout)) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _guard = guard();
        // SAFETY: the caller passes a block this allocator returned, i.e. one
        // the active allocator returned (it never changes), with the layout
        // it was allocated with.
        unsafe { forward!(dealloc(ptr, layout)) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _guard = guard();
        // SAFETY: as for `dealloc`, and the caller upholds `realloc`'s
        // contract for `new_size`.
        unsafe { forward!(realloc(ptr, layout, new_size)) }
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

    #[test]
    fn the_allocator_is_the_environments_and_stays_fixed() {
        let expected = match std::env::var(ENV).as_deref() {
            Ok("mimalloc") => Allocator::Mimalloc,
            _ => Allocator::System,
        };
        assert_eq!(active(), expected);
        let v: Vec<u64> = (0..1000).collect();
        assert_eq!(v.iter().sum::<u64>(), 499_500);
        assert_eq!(active(), expected);
        assert_eq!(CHOSEN.load(Relaxed), 1 + expected as u8);
    }
}
