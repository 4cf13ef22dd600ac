//! Iterative freeing: dropping a chain of ten million objects must not
//! overflow the stack.
//!
//! Dropping a value can drop the last handle to another object, whose value
//! then drops the last handle to a third, and so on: done naively, the stack
//! grows with the length of the chain. Instead, the first free on a thread
//! becomes the *drainer*: while it runs, every object whose strong count
//! reaches zero is pushed onto an intrusive stack (linked through the header's
//! `meta` word) and the drainer frees them one by one after its own value.
//! Stack depth is bounded by the nesting of a single value's drop glue, not by
//! the length of the chain.
//!
//! A panic in a value's `Drop` is caught by the drainer, which keeps freeing
//! the rest of the stack and re-raises the first panic at the end; the object
//! whose `Drop` panicked keeps its memory (a leak, never a use after free).

use core::cell::Cell;
use core::ptr::NonNull;
use std::panic::{self, AssertUnwindSafe};

use crate::header::{self, Header};

struct Queue {
    /// A drainer is running on this thread.
    draining: Cell<bool>,
    /// Objects waiting to be freed.
    head: Cell<Option<NonNull<Header>>>,
}

thread_local! {
    static QUEUE: Queue = const {
        Queue {
            draining: Cell::new(false),
            head: Cell::new(None),
        }
    };
}

/// Drops the value of an object whose strong count just reached zero, then
/// releases the strong side's weak reference.
///
/// # Safety
/// The object's strong count is zero, its value alive, it is in no roots
/// buffer and no collector graph, and the caller gives up its last strong
/// reference to it.
pub(crate) unsafe fn free(object: NonNull<Header>) {
    let queued = QUEUE.with(|q| {
        if q.draining.get() {
            // SAFETY: strong is zero and the object is in no buffer or graph,
            // so its `meta` word is free to hold the link.
            unsafe { object.as_ref().set_link(q.head.get()) };
            q.head.set(Some(object));
            true
        } else {
            false
        }
    });
    if !queued {
        // SAFETY: forwarded from the caller.
        batch(|| unsafe { finish(object) });
    }
}

/// Runs `f` as the drainer if none is running (then frees everything queued
/// meanwhile); inside a running drainer, just runs `f`.
///
/// Panics from `f` or from queued drops propagate after the queue is empty.
pub(crate) fn batch<R>(f: impl FnOnce() -> R) -> R {
    if QUEUE.with(|q| q.draining.replace(true)) {
        return f();
    }
    /// Empties the queue and ends draining, also when unwinding.
    struct Drainer;
    impl Drop for Drainer {
        fn drop(&mut self) {
            if let Err(payload) = drain() {
                if !std::thread::panicking() {
                    QUEUE.with(|q| q.draining.set(false));
                    panic::resume_unwind(payload);
                }
            }
            QUEUE.with(|q| q.draining.set(false));
        }
    }
    let drainer = Drainer;
    let result = f();
    drop(drainer);
    result
}

/// Frees every queued object; returns the first panic payload, if any.
fn drain() -> Result<(), Box<dyn std::any::Any + Send>> {
    let mut first_panic = None;
    while let Some(object) = QUEUE.with(|q| q.head.get()) {
        // SAFETY: queued objects are live (their implicit weak reference is
        // held) and their links were written by `free`.
        let next = unsafe { object.as_ref().take_link() };
        QUEUE.with(|q| q.head.set(next));
        // SAFETY: `free` queued it under the contract of `finish`.
        let result = panic::catch_unwind(AssertUnwindSafe(|| unsafe { finish(object) }));
        if let Err(payload) = result {
            first_panic.get_or_insert(payload);
        }
    }
    first_panic.map_or(Ok(()), Err)
}

/// Drops the value, then releases the strong side's weak reference.
///
/// # Safety
/// As for [`free`]. If the drop panics the memory is leaked.
unsafe fn finish(object: NonNull<Header>) {
    // SAFETY: forwarded from the caller: strong is zero and the value alive.
    unsafe {
        header::drop_value_erased(object);
        header::release_weak(object);
    }
}
