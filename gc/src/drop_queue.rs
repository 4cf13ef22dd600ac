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

impl Queue {
    fn push(&self, object: NonNull<Header>) {
        // SAFETY: queued objects have a zero strong count and are in no buffer
        // or graph, so their `meta` word is free to hold the link.
        unsafe { object.as_ref().set_link(self.head.get()) };
        self.head.set(Some(object));
    }

    fn pop(&self) -> Option<NonNull<Header>> {
        let object = self.head.get()?;
        // SAFETY: queued objects are live (their implicit weak reference is
        // held) and their links were written by `push`.
        self.head.set(unsafe { object.as_ref().take_link() });
        Some(object)
    }

    /// Frees every queued object, one `catch_unwind` for the whole run
    /// (resumed at the next object after a panic); returns the first panic.
    fn drain(&self) -> Option<Box<dyn std::any::Any + Send>> {
        let mut first_panic = None;
        loop {
            let run = panic::catch_unwind(AssertUnwindSafe(|| {
                while let Some(object) = self.pop() {
                    // SAFETY: `free` queued it under the contract of `finish`.
                    unsafe { finish(object) }
                }
            }));
            match run {
                Ok(()) => return first_panic,
                Err(payload) => {
                    first_panic.get_or_insert(payload);
                }
            }
        }
    }
}

/// Ends a drainer's turn, also when unwinding: frees what is still queued
/// and clears the flag. On the normal path the queue is already empty.
struct Drainer<'a>(&'a Queue);

impl Drop for Drainer<'_> {
    fn drop(&mut self) {
        // Only reached with a non-empty queue when unwinding: further panics
        // are swallowed, the one in flight wins.
        drop(self.0.drain());
        self.0.draining.set(false);
    }
}

/// Drops the value of an object whose strong count just reached zero, then
/// releases the strong side's weak reference.
///
/// # Safety
/// The object's strong count is zero, its value alive, it is in no roots
/// buffer and no collector graph, and the caller gives up its last strong
/// reference to it.
pub(crate) unsafe fn free(object: NonNull<Header>) {
    QUEUE.with(|q| {
        if q.draining.get() {
            q.push(object);
        } else {
            // SAFETY: forwarded from the caller.
            as_drainer(q, || unsafe { finish(object) });
        }
    })
}

/// Runs `f` as the drainer if none is running (then frees everything queued
/// meanwhile); inside a running drainer, just runs `f`.
///
/// Panics from `f` or from queued drops propagate after the queue is empty.
pub(crate) fn batch<R>(f: impl FnOnce() -> R) -> R {
    QUEUE.with(|q| {
        if q.draining.get() {
            f()
        } else {
            as_drainer(q, f)
        }
    })
}

fn as_drainer<R>(q: &Queue, f: impl FnOnce() -> R) -> R {
    q.draining.set(true);
    let drainer = Drainer(q);
    let result = f();
    let panic = q.drain();
    drop(drainer);
    if let Some(payload) = panic {
        panic::resume_unwind(payload);
    }
    result
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
