//! Bounded-depth freeing: dropping a chain of ten million objects must not
//! overflow the stack, and dropping a tree must cost what `std::rc` costs.
//!
//! Dropping a value can drop the last handle to another object, whose value
//! then drops the last handle to a third, and so on: done naively, the stack
//! grows with the length of the chain. Here a free nested in another free's
//! drop runs in place, as in `std::rc` (children freed before their parent's
//! memory, while the allocator's caches are warm), but only while the stack
//! is less than [`STACK_BUDGET`](stack::STACK_BUDGET) bytes deeper than where the outermost free
//! started; deeper ones are pushed onto a per-thread stack. The outermost
//! free on a thread is the *drainer*: after its own value it frees the
//! stacked objects one by one, each again with up to `STACK_BUDGET` of
//! stack in place. Stack depth is bounded by `STACK_BUDGET` plus the stack
//! of a single value's drop glue, not by the length of the chain. (Queueing
//! every nested free, as an earlier version did, cost a push, a pop and an
//! indirect call per object: binary trees ran 1.5× `std::rc`.) The depth is
//! measured as the distance between two stack addresses rather than counted
//! in levels: a counter cost a load, a store before and a store after every
//! nested drop, and it could not tell a small frame from a large one. The
//! drainer stores its frame's address less the budget (the *drain limit*,
//! in the collector's counters, which every free touches anyway: one
//! thread-local per free), so a nested free compares its own stack address
//! with it, once.
//!
//! Objects carry no type information (a leaf is laid out exactly as
//! `std::rc`'s), so each stacked entry is a pointer plus the monomorphised
//! function that finishes it (`finish_queued::<P>` for a [`Dying`] `P`: a
//! typed pointer to a leaf or a candidate, or a candidate's [`Object`]). The
//! stack is a `Vec` whose capacity (up to 1024 entries)
//! is kept between drains. A queued object's own memory cannot hold the
//! link: a leaf has no spare word (its strong count must keep reading zero
//! for `Weak::upgrade`, its weak count keeps counting, and the rest is the
//! value, still to be dropped).
//!
//! A panic in a value's `Drop` never crosses another object's drop glue:
//! each nested free catches it and keeps it, the drainer keeps freeing the
//! rest of the stack and re-raises the first panic at the end. The memory of
//! an object whose `Drop` panicked is released all the same: unwinding has
//! dropped the value's fields, so the value counts as dropped.
//!
//! The nested in-place free is the hot path of every tree's drop, so it is
//! kept to what `std::rc` does plus the depth test: the catch covers the
//! value's drop only (the release after it needs no guard on the stack), the
//! depth is one comparison, and the drainer, the queue
//! and the panic path are out of line. The handle's own decrement stays
//! inline in the drop glue that owns it, everything after it is out of line
//! (`Strong::drop_slow`, as `std::rc::Rc::drop_slow`).

use core::alloc::Layout;
use core::cell::{Cell, UnsafeCell};
use core::mem::{align_of, size_of, MaybeUninit};
use core::ptr::NonNull;
use std::panic::{self, AssertUnwindSafe};

use crate::collector;
use crate::free_list::{self, FreeList};
use crate::header::{self, Object, RcBox};
use crate::stack::{self, stack_address, Frame};
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
    /// The first panic caught in a nested free, re-raised by the drainer.
    panic: Cell<Option<Box<dyn std::any::Any + Send>>>,
    /// Objects waiting to be freed. Only `push` and `pop` touch it, and they
    /// run no user code, so no two borrows of it ever overlap.
    pending: UnsafeCell<Vec<Entry>>,
}

thread_local! {
    static QUEUE: Queue = const {
        Queue {
            panic: Cell::new(None),
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
    /// Inline when nothing is queued, the common end of a drainer's turn
    /// (the value's own drop freed everything in place).
    #[inline]
    fn drain(&self) -> Option<Box<dyn std::any::Any + Send>> {
        // SAFETY: see `pending`: no other borrow exists during this call.
        if unsafe { (*self.pending.get()).is_empty() } {
            // Nothing was queued since the last drain, which trimmed.
            return self.panic.take();
        }
        self.drain_queued()
    }

    /// The rest of [`Queue::drain`]: objects are queued.
    #[inline(never)]
    fn drain_queued(&self) -> Option<Box<dyn std::any::Any + Send>> {
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
                    let nested = self.panic.take();
                    return first_panic.or(nested);
                }
                Err(payload) => {
                    first_panic.get_or_insert(payload);
                }
            }
        }
    }
}

/// Ends a drainer's turn when unwinding: frees what is still queued and
/// clears the drain limit. (The normal path does both itself.)
struct Drainer;

impl Drop for Drainer {
    fn drop(&mut self) {
        // Further panics are swallowed, the one in flight wins.
        drop(QUEUE.try_with(Queue::drain));
        collector::set_drain_limit(stack::NO_DRAINER);
    }
}

/// Keeps `payload`, caught in a nested free, for the drainer to re-raise
/// (only the first one on this thread's turn).
#[cold]
#[inline(never)]
fn keep_panic(payload: Box<dyn std::any::Any + Send>) {
    let mut payload = Some(payload);
    let _ = QUEUE.try_with(|q| {
        let first = q.panic.take();
        q.panic.set(first.or(payload.take()));
    });
    if let Some(payload) = payload {
        // The thread's queue is gone (thread-local destruction): nobody
        // would re-raise it.
        panic::resume_unwind(payload);
    }
}

/// An object whose last strong reference is gone, as the queue frees it.
///
/// # Safety
/// Implementations drop the value exactly as the object's type requires and
/// release the strong side's weak reference of that same object.
unsafe trait Dying: Copy {
    /// Drops the value in place.
    ///
    /// # Safety
    /// The object's strong count is zero, its value alive and unreferenced;
    /// called once.
    unsafe fn drop_value(self);

    /// Releases the strong side's weak reference (frees the memory if no
    /// `Weak` remains).
    ///
    /// # Safety
    /// The value is dropped (or its drop unwound); called once.
    unsafe fn release(self);

    /// Drops the value, then releases the weak reference, also if the
    /// value's `Drop` panics: unwinding has then dropped its fields, and
    /// the value counts as dropped.
    ///
    /// # Safety
    /// As for [`Dying::drop_value`].
    #[inline]
    unsafe fn finish(self) {
        struct Release<P: Dying>(P);
        impl<P: Dying> Drop for Release<P> {
            fn drop(&mut self) {
                // SAFETY: runs once, after the value's drop (finished or
                // unwound).
                unsafe { self.0.release() }
            }
        }
        let _release = Release(self);
        // SAFETY: forwarded.
        unsafe { self.drop_value() }
    }
}

/// A typed object: a leaf (`META == false`) or a candidate.
struct Typed<T: ?Sized + Pointee, const META: bool>(NonNull<RcBox<T>>);

impl<T: ?Sized + Pointee, const META: bool> Clone for Typed<T, META> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized + Pointee, const META: bool> Copy for Typed<T, META> {}

// SAFETY: the value's own drop glue, and the release of the kind the object
// was allocated with (`free_typed`'s contract).
unsafe impl<T: ?Sized + Pointee, const META: bool> Dying for Typed<T, META> {
    #[inline]
    unsafe fn drop_value(self) {
        // SAFETY: forwarded.
        unsafe { header::drop_value_in_place(self.0) }
    }

    #[inline]
    unsafe fn release(self) {
        // SAFETY: forwarded.
        unsafe { header::release_weak(self.0, META) }
    }
}

// SAFETY: the object's vtable drops its value; the release is the
// candidate's.
unsafe impl Dying for Object {
    #[inline]
    unsafe fn drop_value(self) {
        // SAFETY: forwarded.
        unsafe { header::drop_value_erased(self) }
    }

    #[inline]
    unsafe fn release(self) {
        // SAFETY: forwarded.
        unsafe { header::release_weak_object(self) }
    }
}

/// Finishes a queued `P`.
///
/// # Safety
/// `raw` holds a `P` queued by [`free`] under its contract.
unsafe fn finish_queued<P: Dying>(raw: Raw) {
    // SAFETY: forwarded.
    unsafe { read::<P>(raw).finish() }
}

/// Frees `object` now (as the drainer if none runs, or nested in place
/// within [`STACK_BUDGET`](stack::STACK_BUDGET) of the drainer's frame), or queues it.
///
/// # Safety
/// As for [`free_typed`], for `object`.
#[inline]
unsafe fn free<P: Dying>(object: P) {
    // One test: with no drainer the limit is above every stack address
    // (and so it is on a stack that grows upwards: everything is queued
    // there, slower, still bounded). The limit sits next to the counter the
    // caller just updated (`collector::on_free_by_rc`): one thread-local.
    let limit = collector::drain_limit();
    if stack::in_place(limit) {
        let run = {
            let _frame = Frame::enter();
            // Only the value's drop is inside the catch: the release after
            // it needs no guard on the stack.
            // SAFETY: forwarded from the caller.
            panic::catch_unwind(AssertUnwindSafe(|| unsafe { object.drop_value() }))
        };
        match run {
            // SAFETY: the value is dropped.
            Ok(()) => unsafe { object.release() },
            // SAFETY: its drop unwound (the fields are dropped).
            Err(payload) => unsafe { released_after_panic(object, payload) },
        }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { free_outer(object, limit) }
    }
}

/// The rest of [`free`], out of line so that the nested path keeps few
/// registers: the outermost free (no drainer) becomes the drainer; a free
/// nested deeper than [`STACK_BUDGET`](stack::STACK_BUDGET) is queued.
///
/// # Safety
/// As for [`free`].
#[inline(never)]
unsafe fn free_outer<P: Dying>(object: P, limit: usize) {
    if limit == stack::NO_DRAINER {
        // SAFETY: forwarded from the caller.
        as_drainer(|| unsafe { object.finish() });
    } else if QUEUE
        .try_with(|q| q.push(object, finish_queued::<P>))
        .is_err()
    {
        // The thread's queue is gone (thread-local destruction): free in
        // place. Only destructors running at thread exit get here.
        // SAFETY: forwarded from the caller.
        unsafe { object.finish() }
    }
}

/// Releases `object` whose value's drop panicked, and keeps the panic.
///
/// # Safety
/// As for [`Dying::release`].
#[cold]
#[inline(never)]
unsafe fn released_after_panic<P: Dying>(object: P, payload: Box<dyn std::any::Any + Send>) {
    // SAFETY: forwarded.
    unsafe { object.release() };
    keep_panic(payload);
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
    // SAFETY: forwarded.
    unsafe {
        if has_meta {
            free(Typed::<T, true>(ptr))
        } else {
            free(Typed::<T, false>(ptr))
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
    // SAFETY: forwarded.
    unsafe { free(object) }
}

/// Runs `f` as the drainer if none is running (then frees everything queued
/// meanwhile); inside a running drainer, just runs `f`.
///
/// Panics from `f` or from nested drops propagate after the queue is empty.
pub(crate) fn batch<R>(f: impl FnOnce() -> R) -> R {
    if collector::drain_limit() == stack::NO_DRAINER {
        as_drainer(f)
    } else {
        f()
    }
}

fn as_drainer<R>(f: impl FnOnce() -> R) -> R {
    collector::set_drain_limit(stack::limit_below(stack_address()));
    let unwinding = Drainer;
    let result = f();
    let panic = QUEUE.try_with(Queue::drain).ok().flatten();
    core::mem::forget(unwinding);
    collector::set_drain_limit(stack::NO_DRAINER);
    if let Some(payload) = panic {
        panic::resume_unwind(payload);
    }
    result
}

// Deferred frees (see `crate::free_list`, shared with `sync`).
//
// The memory of a collected object (`DEAD`) is not freed when its last
// reference goes but kept on this thread's `DEFERRED` list (objects of at
// most 1 KiB, at most `DEFERRED_BYTES` in all), and each allocation of a
// candidate takes an entry. An explicit collection empties the list at its
// end, and the thread's exit closes it (`DeferredExit`).
//
// The cost outside collections is one thread-local load and test per
// allocation of a candidate (the count sits next to the allocation counter
// in `collector`'s counters).

/// The most bytes of deferred allocations per thread (a few thousand small
/// objects: the garbage of a collection or two, which the allocations after
/// it reuse).
const DEFERRED_BYTES: usize = 512 * 1024;

/// Closes this thread's [`DEFERRED`] list when the thread exits.
struct DeferredExit;

impl Drop for DeferredExit {
    fn drop(&mut self) {
        // SAFETY: the length cell of `DEFERRED`.
        with_deferred(|d| unsafe { d.close(collector::deferred_len()) });
    }
}

thread_local! {
    /// This thread's deferred frees; the length is `collector`'s. Without
    /// destructor: [`DEFERRED_EXIT`], registered by its first kept free,
    /// closes it.
    static DEFERRED: FreeList<DEFERRED_BYTES> = const { FreeList::new() };
    static DEFERRED_EXIT: DeferredExit = const { DeferredExit };
}

/// Runs `f` on this thread's [`DEFERRED`]. The closure given to
/// `LocalKey::with` only fetches the address, so that it is always inlined
/// (a larger one was not, and cost a call on every reuse).
#[inline(always)]
fn with_deferred<R>(f: impl FnOnce(&FreeList<DEFERRED_BYTES>) -> R) -> R {
    let d: *const FreeList<DEFERRED_BYTES> = DEFERRED.with(core::ptr::from_ref);
    // SAFETY: `DEFERRED` has no destructor, so its storage lives as long as
    // this thread, which runs `f`; the reference does not escape `f`.
    f(unsafe { &*d })
}

/// Frees the memory at `base`, allocated by the global allocator with
/// `layout`, now or at one of the next allocations.
///
/// # Safety
/// Nothing references the memory any more; it is freed once.
#[inline]
pub(crate) unsafe fn free_later(base: NonNull<u8>, layout: Layout) {
    // SAFETY: the length cell of `DEFERRED`; the memory is forwarded. The
    // list is opened once `DEFERRED_EXIT` is registered (not while the
    // thread exits), which closes it.
    with_deferred(|d| unsafe {
        d.free_later(collector::deferred_len(), base, layout, || {
            DEFERRED_EXIT.try_with(|_| ()).is_ok()
        })
    })
}

/// Allocates memory for a new object (a candidate if `candidate`) from
/// the global allocator, or, for a candidate, a deferred allocation of the
/// same layout (see "Deferred frees"); counts the object with the
/// collector.
///
/// `layout` has a non-zero size.
#[inline(always)]
pub(crate) fn allocate(layout: Layout, candidate: bool) -> NonNull<u8> {
    // One thread-local access counts the object and tells whether
    // allocations wait (a second one was not always inlined).
    let waiting = collector::on_allocate();
    if candidate && waiting != 0 {
        return reuse_or_allocate(layout);
    }
    free_list::allocate_new(layout)
}

/// [`FreeList::reuse_or_allocate`] on this thread's list, which is not
/// empty.
#[inline(never)]
fn reuse_or_allocate(layout: Layout) -> NonNull<u8> {
    // SAFETY: the length cell of `DEFERRED`, not zero (`allocate` checked).
    with_deferred(|d| unsafe { d.reuse_or_allocate(collector::deferred_len(), layout) })
}

/// Frees every deferred allocation (at the end of an explicit collection).
pub(crate) fn free_all_deferred() {
    // SAFETY: the length cell of `DEFERRED`.
    with_deferred(|d| unsafe { d.free_all(collector::deferred_len()) })
}
