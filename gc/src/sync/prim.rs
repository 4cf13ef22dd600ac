//! The synchronisation primitives `recycler::sync` is built from.
//!
//! Normally these are `std`'s atomics and `parking_lot`'s mutex. Under
//! `--cfg loom` they are loom's mocks, so that the loom models in
//! `loom-tests/` explore every interleaving of the real collector code: the
//! header word, the weak count, the per-thread buffers, the collector lock,
//! the thread-locals and the process-wide state all go through this module.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU64, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize};

#[cfg(not(loom))]
pub(crate) use std::thread_local;

#[cfg(loom)]
pub(crate) use loom::thread_local;

/// Gives way while waiting for another thread's bounded critical section.
#[inline]
pub(crate) fn spin_wait() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// A mutex with `parking_lot`'s interface (no poisoning).
#[cfg(not(loom))]
pub(crate) use parking_lot::{Mutex, MutexGuard};

#[cfg(loom)]
pub(crate) use self::loom_mutex::{Mutex, MutexGuard};

#[cfg(loom)]
mod loom_mutex {
    /// `loom::sync::Mutex` behind `parking_lot`'s interface.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }

        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            match self.0.try_lock() {
                Ok(guard) => Some(guard),
                Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }
    }
}

/// A `bool` read by every dereference and written only by the collector
/// while no other thread can reach the object (see `header.rs`). Under loom it
/// is a tracked cell, so a model that broke that exclusion would fail.
#[derive(Debug)]
pub(crate) struct DeadFlag {
    #[cfg(not(loom))]
    cell: core::cell::UnsafeCell<bool>,
    #[cfg(loom)]
    cell: loom::cell::UnsafeCell<bool>,
}

impl DeadFlag {
    pub(crate) fn new() -> Self {
        DeadFlag {
            cell: Default::default(),
        }
    }

    /// Reads the flag.
    ///
    /// # Safety
    /// No [`set`](DeadFlag::set) may run concurrently.
    #[inline]
    pub(crate) unsafe fn get(&self) -> bool {
        #[cfg(not(loom))]
        // SAFETY: the caller excludes concurrent writers.
        unsafe {
            *self.cell.get()
        }
        #[cfg(loom)]
        // SAFETY: the caller excludes concurrent writers.
        self.cell.with(|p| unsafe { *p })
    }

    /// Sets the flag.
    ///
    /// # Safety
    /// No other thread may access the flag concurrently.
    pub(crate) unsafe fn set(&self) {
        #[cfg(not(loom))]
        // SAFETY: the caller guarantees exclusive access.
        unsafe {
            *self.cell.get() = true;
        }
        #[cfg(loom)]
        // SAFETY: the caller guarantees exclusive access.
        self.cell.with_mut(|p| unsafe { *p = true })
    }
}

// SAFETY: the flag is only written while its object is unreachable by every
// other thread (callers of `set` guarantee exclusive access), and reads are
// ordered after that write by the synchronisation that hands a handle over.
unsafe impl Sync for DeadFlag {}

/// A `Copy` value whose accesses the caller orders: the collector's header
/// slots (written under its lock, see `header.rs`'s `GraphSlot`) and the
/// cells of a root buffer (written by its owner, read by drains after a
/// release/acquire hand-over, see `buffer.rs`). Under loom it is a tracked
/// cell, so a model in which a write could race with another access fails.
#[derive(Debug)]
pub(crate) struct CollectorCell<T> {
    #[cfg(not(loom))]
    cell: core::cell::UnsafeCell<T>,
    #[cfg(loom)]
    cell: loom::cell::UnsafeCell<T>,
}

impl<T: Copy> CollectorCell<T> {
    pub(crate) fn new(value: T) -> Self {
        CollectorCell {
            #[cfg(not(loom))]
            cell: core::cell::UnsafeCell::new(value),
            #[cfg(loom)]
            cell: loom::cell::UnsafeCell::new(value),
        }
    }

    /// Reads the value.
    ///
    /// # Safety
    /// No [`set`](CollectorCell::set) may run concurrently.
    #[inline]
    pub(crate) unsafe fn get(&self) -> T {
        #[cfg(not(loom))]
        // SAFETY: the caller excludes concurrent writers.
        unsafe {
            *self.cell.get()
        }
        #[cfg(loom)]
        // SAFETY: the caller excludes concurrent writers.
        self.cell.with(|p| unsafe { *p })
    }

    /// Writes the value.
    ///
    /// # Safety
    /// No other thread may access the cell concurrently.
    #[inline]
    pub(crate) unsafe fn set(&self, value: T) {
        #[cfg(not(loom))]
        // SAFETY: the caller guarantees exclusive access.
        unsafe {
            *self.cell.get() = value;
        }
        #[cfg(loom)]
        // SAFETY: the caller guarantees exclusive access.
        self.cell.with_mut(|p| unsafe { *p = value })
    }
}

/// The allocation's memory as loom sees it: nothing outside loom (a
/// zero-sized field). Under loom, a tracked cell that every release of a
/// strong or weak reference reads (the releasing thread used the
/// allocation) and the free writes, so a model in which a free is not
/// ordered after every other thread's last use of the memory fails with a
/// causality violation (loom does not track the memory of a `Box` itself).
#[derive(Debug, Default)]
pub(crate) struct MemoryTrack {
    #[cfg(loom)]
    cell: loom::cell::UnsafeCell<()>,
}

impl MemoryTrack {
    /// This thread has used the allocation (before releasing its reference).
    #[inline(always)]
    pub(crate) fn used(&self) {
        #[cfg(loom)]
        self.cell.with(|_| ());
    }

    /// The allocation is being freed.
    #[inline(always)]
    pub(crate) fn freed(&self) {
        #[cfg(loom)]
        self.cell.with_mut(|_| ());
    }
}
