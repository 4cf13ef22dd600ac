//! Iterative freeing: dropping a chain of ten million objects must not
//! overflow the stack.
//!
//! Dropping a value can drop the last handle to another object, whose value
//! then drops the last handle to a third, and so on: done naively, the stack
//! grows with the length of the chain. Instead, the first free on a thread
//! becomes the *drainer*: while it runs, every object whose strong count
//! reaches zero is pushed onto a per-thread stack and the drainer frees them
//! one by one after its own value. Stack depth is bounded by the nesting of a
//! single value's drop glue, not by the length of the chain.
//!
//! Objects carry no type information (a leaf is laid out exactly as
//! `std::rc`'s), so each entry is a pointer plus the monomorphised function
//! that finishes it: a leaf's typed pointer and `finish_leaf::<T>` (or
//! `finish_candidate::<T>`), or a candidate's [`Object`] and `finish_object`. The stack is a `Vec` whose
//! capacity (up to 1024 entries) is kept between drains. A queued object's
//! own memory cannot hold the link: a leaf has no spare word (its strong
//! count must keep reading zero for `Weak::upgrade`, its weak count keeps
//! counting, and the rest is the value, still to be dropped).
//!
//! A panic in a value's `Drop` is caught by the drainer, which keeps freeing
//! the rest of the stack and re-raises the first panic at the end; the object
//! whose `Drop` panicked keeps its memory (a leak, never a use after free).

use core::cell::{Cell, UnsafeCell};
use core::mem::{align_of, size_of, MaybeUninit};
use core::ptr::NonNull;
use std::panic::{self, AssertUnwindSafe};

use crate::header::{self, Object, RcBox};
use crate::unsize::Pointee;

/// Room for one pointer to a queued object (thin or wide), kept as raw bytes
/// so that the pointer keeps its provenance.
type Raw = MaybeUninit<[*const (); 2]>;

/// One queued object.
#[derive(Clone, Copy)]
struct Entry {
    ptr: Raw,
    /// Drops the value and releases the strong side's weak reference.
    finish: unsafe fn(Raw),
}

/// Reads back the `P` written by [`Queue::push`].
///
/// # Safety
/// `raw` holds a `P`.
unsafe fn read<P: Copy>(raw: Raw) -> P {
    // SAFETY: forwarded.
    unsafe { raw.as_ptr().cast::<P>().read() }
}

struct Queue {
    /// A drainer is running on this thread.
    draining: Cell<bool>,
    /// Objects waiting to be freed. Only `push` and `pop` touch it, and they
    /// run no user code, so no two borrows of it ever overlap.
    pending: UnsafeCell<Vec<Entry>>,
}

thread_local! {
    static QUEUE: Queue = const {
        Queue {
            draining: Cell::new(false),
            pending: UnsafeCell::new(Vec::new()),
        }
    };
}

impl Queue {
    /// Queues `ptr`, to be finished by `finish`. Writes the pointer in
    /// place, at its own size: building a whole `Entry` first and copying
    /// it made the CPU load 16 bytes right after an 8-byte store (a
    /// store-forwarding stall on every nested drop).
    #[inline]
    fn push<P: Copy>(&self, ptr: P, finish: unsafe fn(Raw)) {
        const { assert!(size_of::<P>() <= size_of::<Raw>() && align_of::<P>() <= align_of::<Raw>()) };
        // SAFETY: see `pending`: no other borrow exists during this call.
        let pending = unsafe { &mut *self.pending.get() };
        if pending.len() == pending.capacity() {
            pending.reserve(1);
        }
        // SAFETY: there is room for one more entry; its fields are written
        // before the length covers it; `P` fits in `Raw` (checked above) and
        // is read back as `P` by `finish`, which was made for it.
        unsafe {
            let slot = pending.as_mut_ptr().add(pending.len());
            core::ptr::addr_of_mut!((*slot).ptr).cast::<P>().write(ptr);
            core::ptr::addr_of_mut!((*slot).finish).write(finish);
            pending.set_len(pending.len() + 1);
        }
    }

    fn pop(&self) -> Option<Entry> {
        // SAFETY: see `pending`.
        unsafe { (*self.pending.get()).pop() }
    }

    /// Gives back the memory of an unusually long queue (a value that owned
    /// a million handles), keeping enough for ordinary nesting.
    fn trim(&self) {
        const KEEP: usize = 1024;
        // SAFETY: see `pending`.
        let pending = unsafe { &mut *self.pending.get() };
        if pending.capacity() > KEEP {
            pending.shrink_to(KEEP);
        }
    }

    /// Frees every queued object, one `catch_unwind` for the whole run
    /// (resumed at the next object after a panic); returns the first panic.
    fn drain(&self) -> Option<Box<dyn std::any::Any + Send>> {
        let mut first_panic = None;
        loop {
            let run = panic::catch_unwind(AssertUnwindSafe(|| {
                while let Some(entry) = self.pop() {
                    // SAFETY: `free` queued it under the contract of `finish`.
                    unsafe { (entry.finish)(entry.ptr) }
                }
            }));
            match run {
                Ok(()) => {
                    self.trim();
                    return first_panic;
                }
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

/// Frees `ptr` now with `direct`, or queues it, to be finished by `finish`,
/// behind the running drainer.
///
/// # Safety
/// As for [`free_typed`], for the object at `ptr`; `direct` and `finish`
/// finish it.
#[inline]
unsafe fn free<P: Copy>(ptr: P, finish: unsafe fn(Raw), direct: unsafe fn(P)) {
    let queued = QUEUE.try_with(|q| {
        if q.draining.get() {
            q.push(ptr, finish);
        } else {
            // SAFETY: forwarded from the caller.
            as_drainer(q, || unsafe { direct(ptr) });
        }
    });
    if queued.is_err() {
        // The thread's queue is gone (thread-local destruction): free in
        // place. Only destructors running at thread exit get here.
        // SAFETY: forwarded from the caller.
        unsafe { direct(ptr) }
    }
}

/// Drops the value of an object whose strong count just reached zero, then
/// releases the strong side's weak reference; typed, so no indirect call
/// but the one of the queue.
///
/// # Safety
/// The object's strong count is zero, its value alive, it is in no roots
/// buffer and no collector graph (not flagged, if a candidate), `has_meta` is
/// its kind, and the caller gives up its last strong reference to it.
#[inline]
pub(crate) unsafe fn free_typed<T: ?Sized + Pointee>(ptr: NonNull<RcBox<T>>, has_meta: bool) {
    /// # Safety
    /// `raw` holds a leaf `NonNull<RcBox<T>>` (thin or wide) queued by
    /// `free_typed`.
    unsafe fn finish_leaf<T: ?Sized + Pointee>(raw: Raw) {
        // SAFETY: forwarded from `free_typed`'s caller.
        unsafe { header::finish::<T>(read(raw), false) }
    }
    /// # Safety
    /// As `finish_leaf`, for a candidate.
    unsafe fn finish_candidate<T: ?Sized + Pointee>(raw: Raw) {
        // SAFETY: forwarded from `free_typed`'s caller.
        unsafe { header::finish::<T>(read(raw), true) }
    }
    /// # Safety
    /// As `finish_leaf`, not queued.
    unsafe fn direct_leaf<T: ?Sized + Pointee>(ptr: NonNull<RcBox<T>>) {
        // SAFETY: forwarded from `free_typed`'s caller.
        unsafe { header::finish::<T>(ptr, false) }
    }
    /// # Safety
    /// As `finish_candidate`, not queued.
    unsafe fn direct_candidate<T: ?Sized + Pointee>(ptr: NonNull<RcBox<T>>) {
        // SAFETY: forwarded from `free_typed`'s caller.
        unsafe { header::finish::<T>(ptr, true) }
    }
    // SAFETY: forwarded.
    unsafe {
        if has_meta {
            free(ptr, finish_candidate::<T>, direct_candidate::<T>)
        } else {
            free(ptr, finish_leaf::<T>, direct_leaf::<T>)
        }
    }
}

/// As [`free_typed`], for a candidate the collector handles.
///
/// # Safety
/// The object's strong count is zero, its value alive, it is in no roots
/// buffer and no collector graph, and the caller gives up its last strong
/// reference to it.
pub(crate) unsafe fn free_object(object: Object) {
    /// # Safety
    /// `raw` holds an `Object` queued by `free_object`.
    unsafe fn finish_object(raw: Raw) {
        // SAFETY: forwarded from `free_object`'s caller.
        unsafe { direct_object(read(raw)) }
    }
    /// # Safety
    /// As `finish_object`, not queued.
    unsafe fn direct_object(object: Object) {
        // SAFETY: forwarded from `free_object`'s caller.
        unsafe {
            header::drop_value_erased(object);
            header::release_weak_object(object);
        }
    }
    // SAFETY: forwarded.
    unsafe { free(object, finish_object, direct_object) }
}

/// Runs `f` as the drainer if none is running (then frees everything queued
/// meanwhile); inside a running drainer, just runs `f`.
///
/// Panics from `f` or from queued drops propagate after the queue is empty.
pub(crate) fn batch<R>(f: impl FnOnce() -> R) -> R {
    match QUEUE.try_with(|q| q.draining.get()) {
        Ok(false) => QUEUE.with(|q| as_drainer(q, f)),
        _ => f(),
    }
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
