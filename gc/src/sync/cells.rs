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

/// Implements `Trace` for a lock whose `try_*` returns a `TryLockResult`
/// (`std`'s and loom's) or an `Option` (`parking_lot`'s).
macro_rules! trace_lock {
    ($kind:ident, $($seg:ident)::+, $method:ident, [$($bound:tt)*]) => {
        // SAFETY: the contents are read under the lock (or not at all, with
        // `keep_alive`), so the reported edges are exactly the handles the
        // cell owns; a read lock excludes writers.
        unsafe impl<T: $($bound)*> Trace for $($seg)::+<T> {
            const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
            fn trace(&self, tracer: &mut Tracer<'_>) {
                if T::MAY_CONTAIN_GC {
                    trace_lock!(@$kind tracer, self.$method());
                }
            }
        }
    };
    (@result $tracer:ident, $attempt:expr) => {
        match $attempt {
            Ok(guard) => trace_guard!($tracer, guard),
            Err(TryLockError::Poisoned(poisoned)) => trace_guard!($tracer, poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => $tracer.keep_alive(),
        }
    };
    (@option $tracer:ident, $attempt:expr) => {
        match $attempt {
            Some(guard) => trace_guard!($tracer, guard),
            None => $tracer.keep_alive(),
        }
    };
}

trace_lock!(result, std::sync::Mutex, try_lock, [?Sized + Trace]);
trace_lock!(result, std::sync::RwLock, try_read, [?Sized + Trace]);
trace_lock!(option, parking_lot::Mutex, try_lock, [?Sized + Trace]);
trace_lock!(option, parking_lot::RwLock, try_read, [?Sized + Trace]);
#[cfg(loom)]
trace_lock!(result, loom::sync::Mutex, try_lock, [Trace]);
#[cfg(loom)]
trace_lock!(result, loom::sync::RwLock, try_read, [Trace]);
