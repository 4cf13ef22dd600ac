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
//! The lock is the one Nim used: Nim's `SysLock` on POSIX is a
//! `pthread_mutex_t` initialised with default attributes, which glibc
//! implements as a futex word *without spinning*: a thread that finds it
//! taken sleeps in `futex(FUTEX_WAIT)` at once and the holder pays a
//! `futex(FUTEX_WAKE)` on release. (A `std::sync::Mutex`, used here before,
//! spins up to 100 times first and so settles most short contention on two
//! running cores without a system call, which is kinder than Nim's lock.)
//! Taking it neither allocates nor registers thread-local destructors, so it
//! may be used inside the allocator (a lock that allocates while parking,
//! like `parking_lot`'s, would re-enter it).
//!
//! While the lock is on, [`counts`] tells how often it was taken and how
//! often the taker found it held by another thread (a `trylock` that failed
//! before the blocking `lock`; the one extra compare-and-swap is what
//! glibc's own `lock` starts with). Both counters are plain integers written
//! under the lock, so counting adds no shared-memory traffic of its own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};

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

/// The one heap lock, with the counters it protects.
static LOCK: HeapLock = HeapLock {
    mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
    counts: UnsafeCell::new(LockCounts {
        acquired: 0,
        contended: 0,
    }),
};

/// How often the heap lock was taken, and found held by another thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LockCounts {
    /// Allocations, frees and reallocations that took the lock.
    pub acquired: u64,
    /// Of those, the ones that found it held and waited (in glibc, on the
    /// futex).
    pub contended: u64,
}

/// A `pthread_mutex_t` with default attributes (Nim's `SysLock`) and the
/// counters only its holder touches.
struct HeapLock {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    counts: UnsafeCell<LockCounts>,
}

// SAFETY: `mutex` is only handed to `pthread_mutex_*`, which synchronise
// threads through it (it lives in a static, so it is never moved after
// first use, as POSIX requires), and `counts` is only read or written by
// the thread that holds `mutex` (see `Held`).
unsafe impl Sync for HeapLock {}

/// The heap lock, held until dropped; not `Send`, since a pthread mutex
/// must be unlocked by the thread that locked it.
struct Held(PhantomData<*const ()>);

impl HeapLock {
    /// Takes the lock; counts the acquisition, and the contention if the
    /// lock was held.
    fn lock(&'static self) -> Held {
        // SAFETY: `mutex` is a statically initialised default mutex that is
        // never destroyed; `trylock` and `lock` on it are sound from any
        // thread. A default (non-error-checking) mutex relocked by its own
        // holder would deadlock, but no holder allocates: the only code run
        // under the lock is the forwarded allocator call and the counter
        // update below, neither of which re-enters this allocator.
        let contended = unsafe {
            if libc::pthread_mutex_trylock(self.mutex.get()) == 0 {
                false
            } else {
                libc::pthread_mutex_lock(self.mutex.get());
                true
            }
        };
        // SAFETY: this thread holds the mutex, so no other thread reads or
        // writes `counts` until it is released.
        let counts = unsafe { &mut *self.counts.get() };
        counts.acquired += 1;
        counts.contended += u64::from(contended);
        Held(PhantomData)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: a `Held` exists only while this thread holds the mutex
        // (`HeapLock::lock` returned it), and is dropped once.
        unsafe {
            libc::pthread_mutex_unlock(LOCK.mutex.get());
        }
    }
}

/// The heap lock's counters since the process started (zero while the lock
/// has never been switched on). Takes the lock (uncounted) to read them.
#[allow(dead_code)] // used by the server's `/stats`, not by the benchmarks that include this file
pub fn counts() -> LockCounts {
    // SAFETY: as in `HeapLock::lock`; this thread holds the mutex while it
    // copies the counters and releases it before returning.
    unsafe {
        libc::pthread_mutex_lock(LOCK.mutex.get());
        let counts = *LOCK.counts.get();
        libc::pthread_mutex_unlock(LOCK.mutex.get());
        counts
    }
}

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

/// Takes the heap lock if it is switched on.
#[inline]
fn guard() -> Option<Held> {
    if LOCKED.load(Relaxed) {
        Some(LOCK.lock())
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
// or panics, so no call re-enters the allocator (which would deadlock on
// the non-recursive mutex).
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

    /// The tests that switch the lock on and off take this, so that one
    /// does not switch it off under the other. (Nothing else in this test
    /// binary switches it.)
    static SWITCH: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn forwards_with_and_without_the_lock() {
        let _switch = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
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
        }
        LOCKED.store(false, Relaxed);
    }

    #[test]
    fn counts_acquisitions_and_contention_while_on() {
        let _switch = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
        let layout = Layout::from_size_align(64, 8).unwrap();
        let before = counts();
        LOCKED.store(true, Relaxed);
        // Two threads allocating at once: every call is counted, and a
        // contended acquisition is also an acquisition.
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        // SAFETY: a non-zero-sized layout, freed once with it.
                        unsafe { LockedAlloc.dealloc(LockedAlloc.alloc(layout), layout) };
                    }
                });
            }
        });
        LOCKED.store(false, Relaxed);
        let after = counts();
        // Other tests of this binary may allocate meanwhile (more, never
        // fewer acquisitions).
        assert!(after.acquired - before.acquired >= 40_000);
        assert!(after.contended - before.contended <= after.acquired - before.acquired);
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
