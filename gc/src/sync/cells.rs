//! `Trace` for the lockable cells that may hold `sync::Gc` pointers.
//!
//! A cell is traced through `try_lock` / `try_read`; the guard is handed to
//! the tracer ([`Tracer::retain`]) so that a collector validating a component
//! keeps all of its cells locked at once. A cell that cannot be locked right
//! now makes its owner live for this collection ([`Tracer::keep_alive`]).
//!
//! A poisoned `std` lock is traced through its inner value: poisoning only
//! records that a panic happened while the lock was held; Rust's unwinding
//! guarantees still leave the value memory-safe, so the handles it holds are
//! valid owned handles and counting them as edges is exact.

use std::sync::TryLockError;

use crate::trace::{Trace, Tracer};

/// Traces the guarded value and keeps the guard in the tracer's sink.
macro_rules! trace_guard {
    ($tracer:ident, $guard:expr) => {{
        let guard = $guard;
        (*guard).trace($tracer);
        // SAFETY: the guard borrows a cell inside a value that the collector
        // holds (a strong reference) until it empties its guard sink; without
        // a sink the guard is dropped right here.
        unsafe { $tracer.retain(guard) };
    }};
}

// SAFETY: the contents are read under the lock (or not at all, with
// `keep_alive`), so the reported edges are exactly the handles it owns.
unsafe impl<T: ?Sized + Trace> Trace for std::sync::Mutex<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if !T::MAY_CONTAIN_GC {
            return;
        }
        match self.try_lock() {
            Ok(guard) => trace_guard!(tracer, guard),
            Err(TryLockError::Poisoned(poisoned)) => trace_guard!(tracer, poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => tracer.keep_alive(),
        }
    }
}

// SAFETY: as for `Mutex`; a read lock excludes writers.
unsafe impl<T: ?Sized + Trace> Trace for std::sync::RwLock<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if !T::MAY_CONTAIN_GC {
            return;
        }
        match self.try_read() {
            Ok(guard) => trace_guard!(tracer, guard),
            Err(TryLockError::Poisoned(poisoned)) => trace_guard!(tracer, poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => tracer.keep_alive(),
        }
    }
}

// SAFETY: as for `std::sync::Mutex`.
unsafe impl<T: ?Sized + Trace> Trace for parking_lot::Mutex<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if !T::MAY_CONTAIN_GC {
            return;
        }
        match self.try_lock() {
            Some(guard) => trace_guard!(tracer, guard),
            None => tracer.keep_alive(),
        }
    }
}

// SAFETY: as for `std::sync::RwLock`.
unsafe impl<T: ?Sized + Trace> Trace for parking_lot::RwLock<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if !T::MAY_CONTAIN_GC {
            return;
        }
        match self.try_read() {
            Some(guard) => trace_guard!(tracer, guard),
            None => tracer.keep_alive(),
        }
    }
}

// SAFETY: as for `std::sync::Mutex`.
#[cfg(loom)]
unsafe impl<T: Trace> Trace for loom::sync::Mutex<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if !T::MAY_CONTAIN_GC {
            return;
        }
        match self.try_lock() {
            Ok(guard) => trace_guard!(tracer, guard),
            Err(TryLockError::Poisoned(poisoned)) => trace_guard!(tracer, poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => tracer.keep_alive(),
        }
    }
}

// SAFETY: as for `std::sync::RwLock`.
#[cfg(loom)]
unsafe impl<T: Trace> Trace for loom::sync::RwLock<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if !T::MAY_CONTAIN_GC {
            return;
        }
        match self.try_read() {
            Ok(guard) => trace_guard!(tracer, guard),
            Err(TryLockError::Poisoned(poisoned)) => trace_guard!(tracer, poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => tracer.keep_alive(),
        }
    }
}
