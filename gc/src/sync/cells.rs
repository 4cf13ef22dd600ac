//! [`TraceLock`]: the lockable cells that may hold `sync::Gc` pointers, and
//! their `Trace`.
//!
//! A cell is traced through a non-blocking lock attempt
//! ([`Tracer::trace_lock`]); the guard is handed to the tracer, so that a
//! collector validating a component keeps all of its cells locked at once
//! (the Σ-test of the [module documentation](super)). A cell that cannot be
//! locked right now makes its owner live for this collection
//! ([`Tracer::keep_alive`]).
//!
//! A poisoned `std` lock is traced through its inner value: poisoning only
//! records that a panic happened while the lock was held; Rust's unwinding
//! guarantees still leave the value memory-safe, so the handles it holds are
//! valid owned handles and counting them as edges is exact.

use core::mem::ManuallyDrop;
use core::ops::Deref;
use std::sync::TryLockError;

use crate::trace::{Trace, Tracer};

/// A lock whose contents the collectors may inspect: implement it (and
/// `Trace`, through [`Tracer::trace_lock`]) for your own lock type so that
/// it may hold [`sync::Gc`](super::Gc) handles that change through `&self`.
///
/// Implemented for `std` and `parking_lot` `Mutex` and `RwLock`, whose
/// `Trace` impls use it.
///
/// # Safety
///
/// While a guard returned by [`try_lock_for_trace`](TraceLock::try_lock_for_trace)
/// is alive:
///
/// 1. the value it dereferences to is the lock's value, and nothing can
///    modify that value, its `sync::Gc` handles included (no `&mut` to it,
///    no write through another guard);
/// 2. the guard may be kept for a while by the collector and dropped later,
///    on the thread that created it, after other locks were taken and
///    released.
///
/// Moreover `try_lock_for_trace` must not block (the collector holds other
/// cells' locks while it calls it: waiting could deadlock), nor may the
/// guard's `Drop` wait for a lock that a collected value owns (the collector
/// drops guards with other cells still locked, on the same thread). It may
/// upgrade a `Weak`: the collector drops a guard only while the objects it
/// is validating are not claimed (`Weak::upgrade` would wait for them).
/// Returning `None` is always safe.
///
/// # Example
///
/// A spin lock of your own holding a cycle of `sync::Gc`s:
///
/// ```
/// use core::cell::UnsafeCell;
/// use core::sync::atomic::{AtomicBool, Ordering::{Acquire, Release}};
/// use recycler::sync::{collect, Gc, TraceLock};
/// use recycler::{Trace, Tracer};
///
/// pub struct SpinLock<T> {
///     locked: AtomicBool,
///     value: UnsafeCell<T>,
/// }
///
/// // SAFETY: the value is only reached through a guard, one at a time.
/// unsafe impl<T: Send> Sync for SpinLock<T> {}
///
/// pub struct Guard<'a, T>(&'a SpinLock<T>);
///
/// impl<T> SpinLock<T> {
///     pub fn new(value: T) -> Self {
///         SpinLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
///     }
///     pub fn try_lock(&self) -> Option<Guard<'_, T>> {
///         let won = self.locked.compare_exchange(false, true, Acquire, Acquire).is_ok();
///         won.then(|| Guard(self))
///     }
///     pub fn lock(&self) -> Guard<'_, T> {
///         loop {
///             if let Some(guard) = self.try_lock() {
///                 return guard;
///             }
///             std::thread::yield_now();
///         }
///     }
/// }
///
/// impl<T> core::ops::Deref for Guard<'_, T> {
///     type Target = T;
///     fn deref(&self) -> &T {
///         // SAFETY: the guard holds the lock.
///         unsafe { &*self.0.value.get() }
///     }
/// }
/// impl<T> core::ops::DerefMut for Guard<'_, T> {
///     fn deref_mut(&mut self) -> &mut T {
///         // SAFETY: the guard holds the lock.
///         unsafe { &mut *self.0.value.get() }
///     }
/// }
/// impl<T> Drop for Guard<'_, T> {
///     fn drop(&mut self) {
///         self.0.locked.store(false, Release);
///     }
/// }
///
/// // SAFETY: a guard excludes every other access to the value until it is
/// // dropped (on any thread, at any time); `try_lock` never blocks.
/// unsafe impl<T: Trace> TraceLock for SpinLock<T> {
///     type Value = T;
///     type Guard<'a> = Guard<'a, T> where T: 'a;
///     fn try_lock_for_trace(&self) -> Option<Guard<'_, T>> {
///         self.try_lock()
///     }
/// }
///
/// // SAFETY: the lock is traced through `trace_lock` on itself, which it owns.
/// unsafe impl<T: Trace> Trace for SpinLock<T> {
///     const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
///     fn trace(&self, tracer: &mut Tracer<'_>) {
///         tracer.trace_lock(self);
///     }
/// }
///
/// #[derive(Trace)]
/// struct Node {
///     next: SpinLock<Option<Gc<Node>>>,
/// }
///
/// let a = Gc::new(Node { next: SpinLock::new(None) });
/// let b = Gc::new(Node { next: SpinLock::new(Some(a.clone())) });
/// *a.next.lock() = Some(b.clone());
/// let weak = Gc::downgrade(&a);
/// drop((a, b));
/// collect();
/// assert!(weak.upgrade().is_none());
/// ```
pub unsafe trait TraceLock {
    /// The value inside the lock.
    type Value: ?Sized + Trace;
    /// A guard that gives shared access to the value.
    type Guard<'a>: Deref<Target = Self::Value>
    where
        Self: 'a;

    /// Locks the value for reading if that is possible without waiting.
    fn try_lock_for_trace(&self) -> Option<Self::Guard<'_>>;
}

impl Tracer<'_> {
    /// Traces the value inside `cell` through
    /// [`TraceLock::try_lock_for_trace`]. The thread-safe collector keeps the
    /// guard until it has taken its holds on the targets (and, when it
    /// validates a component, until every cell of the component is locked at
    /// once); other tracers drop it when this call returns. If the cell
    /// cannot be locked now, the traced object is kept alive
    /// ([`keep_alive`](Tracer::keep_alive)).
    ///
    /// Call it only on a lock that the value being traced owns (a field, or
    /// inside a field that it owns), once per lock: part of the
    /// [`Trace`] contract, like reporting only the pointers the value owns.
    pub fn trace_lock<L: ?Sized + TraceLock>(&mut self, cell: &L) {
        if !L::Value::MAY_CONTAIN_GC {
            return;
        }
        let Some(guard) = cell.try_lock_for_trace() else {
            self.keep_alive();
            return;
        };
        let Some(below) = self.kept_guards() else {
            // No sink: the guard is dropped when this call returns, after
            // the guards of the cells inside this one (dropped as their own
            // calls returned).
            (*guard).trace(self);
            return;
        };
        /// Keeps the guard in the sink when the trace of the value returns
        /// or unwinds, at position `below`: older than the guards of the
        /// cells inside this one, which the sink drops first (newest first).
        /// Kept after them, or dropped by the unwind of a panicking `trace`,
        /// it unlocked this cell while the collector still held their guards,
        /// and a mutator could free those cells (replace a `Vec` of
        /// `Mutex`es, say): their unlocks wrote freed memory (an internal
        /// review found it: `gc/tests/sync_nested_locks.rs`).
        struct Keep<'t, 'a, G> {
            tracer: &'t mut Tracer<'a>,
            below: usize,
            guard: ManuallyDrop<G>,
        }
        impl<G> Drop for Keep<'_, '_, G> {
            fn drop(&mut self) {
                // SAFETY: taken once, here; not used afterwards.
                let guard = unsafe { ManuallyDrop::take(&mut self.guard) };
                // SAFETY: `cell` is owned by the value being traced (the
                // `Trace` contract above), which the collector holds (a
                // strong reference) until it empties its guard sink, and the
                // cells inside it stay in place while this guard is kept:
                // the sink drops their guards before this one.
                unsafe { self.tracer.retain_at(self.below, guard) };
            }
        }
        let keep = &mut Keep {
            tracer: self,
            below,
            guard: ManuallyDrop::new(guard),
        };
        (**keep.guard).trace(keep.tracer);
    }
}

/// Implements `TraceLock` and `Trace` for a lock whose `try_*` returns a
/// `TryLockResult` (`std`'s and loom's) or an `Option` (`parking_lot`'s).
macro_rules! trace_lock {
    ($kind:ident, $($seg:ident)::+, $guard:ty, $method:ident, [$($bound:tt)*]) => {
        // SAFETY: a mutex guard or a read guard excludes writers until it is
        // dropped, on the thread that took it, whenever that is; `try_*`
        // never blocks.
        unsafe impl<T: $($bound)*> TraceLock for $($seg)::+<T> {
            type Value = T;
            type Guard<'a> = $guard where Self: 'a;
            fn try_lock_for_trace(&self) -> Option<Self::Guard<'_>> {
                trace_lock!(@$kind self.$method())
            }
        }

        // SAFETY: traced through `trace_lock` on itself: the contents are
        // read under the lock (or not at all, with `keep_alive`), so the
        // reported edges are exactly the handles the cell owns.
        unsafe impl<T: $($bound)*> Trace for $($seg)::+<T> {
            const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
            fn trace(&self, tracer: &mut Tracer<'_>) {
                tracer.trace_lock(self);
            }
        }
    };
    (@result $attempt:expr) => {
        match $attempt {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    };
    (@option $attempt:expr) => {
        $attempt
    };
}

trace_lock!(
    result,
    std::sync::Mutex,
    std::sync::MutexGuard<'a, T>,
    try_lock,
    [?Sized + Trace]
);
trace_lock!(
    result,
    std::sync::RwLock,
    std::sync::RwLockReadGuard<'a, T>,
    try_read,
    [?Sized + Trace]
);
trace_lock!(
    option,
    parking_lot::Mutex,
    parking_lot::MutexGuard<'a, T>,
    try_lock,
    [?Sized + Trace]
);
trace_lock!(
    option,
    parking_lot::RwLock,
    parking_lot::RwLockReadGuard<'a, T>,
    try_read,
    [?Sized + Trace]
);
#[cfg(loom)]
trace_lock!(
    result,
    loom::sync::Mutex,
    loom::sync::MutexGuard<'a, T>,
    try_lock,
    [Trace]
);
#[cfg(loom)]
trace_lock!(
    result,
    loom::sync::RwLock,
    loom::sync::RwLockReadGuard<'a, T>,
    try_read,
    [Trace]
);
