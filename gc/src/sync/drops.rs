//! Iterative dropping of values whose strong count reached zero.
//!
//! Dropping a value can release the last handle to another object, whose
//! value then drops, and so on: dropping the head of a ten-million-node list
//! would recurse ten million times. Instead, the first such drop on a thread
//! becomes a loop that works through a thread-local queue; drops that happen
//! inside it are queued. A panic in one value's `Drop` does not stop the
//! others; the first panic is re-raised once the queue is empty. A
//! collection runs as such a loop too ([`batch`]), so that the values it
//! releases are dropped after it, outside its lock.

use core::cell::RefCell;
use core::ptr::NonNull;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use super::header::Header;

type Pending = (NonNull<Header>, u64);

#[cfg(not(loom))]
std::thread_local! {
    /// `Some` while this thread is running the drop loop.
    static QUEUE: RefCell<Option<Vec<Pending>>> = const { RefCell::new(None) };
}

// loom's `thread_local!` takes no `const` initialiser.
#[cfg(loom)]
loom::thread_local! {
    /// `Some` while this thread is running the drop loop.
    static QUEUE: RefCell<Option<Vec<Pending>>> = RefCell::new(None);
}

/// A caught panic, to be re-raised later.
pub(crate) type Panic = Option<Box<dyn core::any::Any + Send>>;

/// Drops the value of `this` (whose count reached zero by the RMW that
/// returned `old`) and finishes its release, now or, if this thread is
/// already dropping values, right after the current one.
pub(crate) fn drop_value_later(this: NonNull<Header>, old: u64) {
    let queued = QUEUE.try_with(|queue| match &mut *queue.borrow_mut() {
        Some(pending) => {
            pending.push((this, old));
            true
        }
        slot @ None => {
            *slot = Some(Vec::new());
            false
        }
    });
    match queued {
        Ok(true) => return,
        Ok(false) => {}
        Err(_) => {
            // Thread-locals are being destroyed: drop directly.
            // SAFETY: the caller performed the transition to zero, so the
            // value is ours alone.
            unsafe { drop_one(this, old) };
            return;
        }
    }
    // SAFETY: the caller performed the transition to zero, once.
    let first = catch_unwind(AssertUnwindSafe(|| unsafe { drop_one(this, old) })).err();
    let rest = drain_queue();
    if let Some(payload) = first.or(rest) {
        resume_unwind(payload);
    }
}

/// Runs `f` with this thread's drop loop running (unless it already is), so
/// that every value whose count reaches zero inside `f` is queued instead of
/// dropped in place; then drops them, each under `catch_unwind`. Returns the
/// first panic of those drops instead of raising it: the collector runs in
/// here, so that no user `Drop` runs while it holds its lock or owns holds,
/// and a panicking `Drop` can neither unwind through it nor abort it (a
/// second panic while unwinding). If `f` unwinds, the queue is still drained
/// (further panics are dropped; the one in flight wins).
pub(crate) fn batch<R>(f: impl FnOnce() -> R) -> (R, Panic) {
    let started = QUEUE.try_with(|queue| {
        let mut queue = queue.borrow_mut();
        queue.is_none() && {
            *queue = Some(Vec::new());
            true
        }
    });
    if !matches!(started, Ok(true)) {
        // The enclosing loop drops what `f` queues (or, while thread-locals
        // are destroyed, values are dropped in place).
        return (f(), None);
    }
    /// Drains the queue if `f` unwinds.
    struct Unwinding;
    impl Drop for Unwinding {
        fn drop(&mut self) {
            drop(drain_queue());
        }
    }
    let unwinding = Unwinding;
    let result = f();
    core::mem::forget(unwinding);
    (result, drain_queue())
}

/// Drops every queued value (and those their drops queue), then ends this
/// thread's drop loop. Returns the first panic.
fn drain_queue() -> Panic {
    let mut panic = None;
    while let Some((header, old)) =
        QUEUE.with(|queue| queue.borrow_mut().as_mut().and_then(Vec::pop))
    {
        // SAFETY: each queued object reached zero exactly once and was queued
        // by the thread that performed that transition.
        let result = catch_unwind(AssertUnwindSafe(|| unsafe { drop_one(header, old) }));
        if let Err(payload) = result {
            panic.get_or_insert(payload);
        }
    }
    QUEUE.with(|queue| *queue.borrow_mut() = None);
    panic
}

/// Drops the value, then releases the memory reference.
///
/// # Safety
/// The caller performed the transition to zero recorded in `old`.
unsafe fn drop_one(this: NonNull<Header>, old: u64) {
    /// Finishes the release even if the value's `Drop` panics.
    struct Finish(NonNull<Header>, u64);
    impl Drop for Finish {
        fn drop(&mut self) {
            // SAFETY: the value is gone (dropped or unwound out of).
            unsafe { Header::finish_value(self.0, self.1) };
        }
    }
    let finish = Finish(this, old);
    // SAFETY: we performed the transition to zero (see `GraphSlot`).
    let old_gen = unsafe { this.as_ref().generation.is_old() };
    super::state::count_freed_by_rc(old_gen);
    // SAFETY: the count is zero and not doomed: nobody else can reach the value.
    unsafe { (this.as_ref().vtable.drop_value)(this) };
    drop(finish);
}
