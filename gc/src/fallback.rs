//! A drop queue for the frees that run after the thread's own queue (a
//! thread-local with a destructor) was destroyed: frees in the destructors
//! of thread-locals destroyed after it, at thread exit.
//!
//! Both drop queues (`drop_queue.rs`, `sync/drops.rs`) keep one
//! [`FallbackSlot`] in a thread-local without a destructor, so it is never
//! destroyed. The first free that must queue an object or keep a panic once
//! the queue is gone allocates a fallback queue there; the drainer frees it
//! once it has drained it. Without it such frees ran in place, and a chain
//! of a million objects dropped by a thread-local's destructor overflowed
//! the stack (`tests/thread_exit.rs`).

use core::cell::Cell;
use core::ptr;

/// The fallback queue of one thread, if any (see the module docs).
pub(crate) struct FallbackSlot<Q>(Cell<*mut Q>);

impl<Q> FallbackSlot<Q> {
    pub(crate) const fn new() -> Self {
        FallbackSlot(Cell::new(ptr::null_mut()))
    }

    /// Runs `f` on the fallback queue, allocated first (by `new`) if there
    /// is none and `create`.
    ///
    /// # Safety
    /// The slot is a thread-local, and its queue is freed only by
    /// [`FallbackSlot::free`], which the caller must not call while `f` runs
    /// (the drainer frees it after its drain, and every other use runs
    /// inside the drainer).
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn with<R>(
        &self,
        create: bool,
        new: fn() -> Q,
        f: impl FnOnce(&Q) -> R,
    ) -> Option<R> {
        let mut queue = self.0.get();
        if queue.is_null() {
            if !create {
                return None;
            }
            queue = Box::into_raw(Box::new(new()));
            self.0.set(queue);
        }
        // SAFETY: a non-null slot holds a live `Box` of this thread's, which
        // stays alive while `f` runs (the caller's contract).
        Some(f(unsafe { &*queue }))
    }

    /// Frees the fallback queue, if any.
    ///
    /// # Safety
    /// No reference to the queue is in use: the drainer has drained it,
    /// and the frees that used it ran inside the drainer, before.
    pub(crate) unsafe fn free(&self) {
        let queue = self.0.replace(ptr::null_mut());
        if !queue.is_null() {
            // SAFETY: allocated by `with`; unused (the caller's contract).
            drop(unsafe { Box::from_raw(queue) });
        }
    }
}
