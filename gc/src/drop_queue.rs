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
use crate::fallback::FallbackSlot;
use crate::header::{self, Object, RcBox};
use crate::payload::Payload;
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
    panic: Cell<Option<Payload>>,
    /// Objects waiting to be freed. Only `push` and `pop` touch it, and they
    /// run no user code, so no two borrows of it ever overlap.
    pending: UnsafeCell<Vec<Entry>>,
}

thread_local! {
    static QUEUE: Queue = const { Queue::new() };
    /// The queue once `QUEUE` is destroyed (see `crate::fallback`).
    static FALLBACK: FallbackSlot<Queue> = const { FallbackSlot::new() };
}

impl Queue {
    const fn new() -> Self {
        Queue {
            panic: Cell::new(None),
            pending: UnsafeCell::new(Vec::new()),
        }
    }

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
    fn drain(&self) -> Option<Payload> {
        // SAFETY: see `pending`: no other borrow exists during this call.
        if unsafe { (*self.pending.get()).is_empty() } {
            // Nothing was queued since the last drain, which trimmed.
            return self.panic.take();
        }
        self.drain_queued()
    }

    /// The rest of [`Queue::drain`]: objects are queued.
    #[inline(never)]
    fn drain_queued(&self) -> Option<Payload> {
        let mut first_panic = None;
        crate::payload::drain_catching(&mut first_panic, || {
            while let Some(entry) = self.pop() {
                // SAFETY: `free` queued it under the contract of `finish`.
                unsafe { (entry.finish)(entry.ptr) }
            }
        });
        self.trim();
        let nested = self.panic.take();
        crate::payload::first_of(first_panic, nested)
    }
}

/// Ends a drainer's turn when unwinding: frees what is still queued and
/// clears the drain limit. (The normal path does both itself.)
struct Drainer;

impl Drop for Drainer {
    fn drop(&mut self) {
        // Further panics are swallowed, the one in flight wins.
        crate::payload::discard(drain());
        collector::set_drain_limit(stack::NO_DRAINER);
    }
}

/// The drainer's drain of this thread's queue (see [`Queue::drain`]), or
/// once that is destroyed, of the fallback queue, which it then frees.
#[inline]
fn drain() -> Option<Payload> {
    QUEUE
        .try_with(Queue::drain)
        .unwrap_or_else(|_| drain_fallback())
}

/// Runs `f` on the fallback queue, allocated first if there is none and
/// `create`.
fn with_fallback<R>(create: bool, f: impl FnOnce(&Queue) -> R) -> Option<R> {
    // SAFETY: only `drain_fallback` frees the queue, after the drainer's
    // drain; the other callers are frees nested in the drainer.
    FALLBACK.with(|slot| unsafe { slot.with(create, Queue::new, f) })
}

/// The drainer's drain of the fallback queue, if there is one; then frees it.
#[cold]
#[inline(never)]
fn drain_fallback() -> Option<Payload> {
    let panic = with_fallback(false, Queue::drain).flatten();
    // SAFETY: drained; the frees that used it ran inside the drainer.
    FALLBACK.with(|slot| unsafe { slot.free() });
    panic
}

/// Keeps `payload`, caught in a nested free, for the drainer to re-raise
/// (only the first one on this thread's turn).
#[cold]
#[inline(never)]
fn keep_panic(payload: Payload) {
    let mut payload = Some(payload);
    let mut keep = |q: &Queue| {
        if let Some(payload) = payload.take() {
            crate::payload::keep_first_in(&q.panic, payload);
        }
    };
    if QUEUE.try_with(&mut keep).is_err() {
        with_fallback(true, keep);
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
        // The thread's queue is destroyed (a free in the destructor of a
        // later thread-local): the fallback queue, which the drainer drains.
        with_fallback(true, |q| q.push(object, finish_queued::<P>));
    }
}

/// Releases `object` whose value's drop panicked, and keeps the panic.
///
/// # Safety
/// As for [`Dying::release`].
#[cold]
#[inline(never)]
unsafe fn released_after_panic<P: Dying>(object: P, payload: Payload) {
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
    let panic = drain();
    core::mem::forget(unwinding);
    collector::set_drain_limit(stack::NO_DRAINER);
    if let Some(payload) = panic {
        // Not while unwinding: this drainer may be a handle's drop that the
        // unwind runs, and a `collect()` in its value's `Drop` may have left
        // a garbage destructor's panic to it.
        crate::payload::resume(payload);
    }
    result
}

// Deferred frees.
//
// A collection frees its garbage in one go: dozens to thousands of objects
// of a few sizes, while glibc's per-thread cache holds 7 chunks of each
// size. The rest overflow into its fastbins and unsorted bins, which the
// next large allocation consolidates, and the next allocations of those
// sizes take the slow path: each refill of the per-thread cache walks a
// fastbin's chain through the freed chunks themselves, one dependent load
// per chunk, cold by then (a doubly linked list, collected 4096 nodes at a
// time, spent an eighth of its time in `_int_malloc`, most of it on that
// load, and ~190 instructions per node in `malloc` and `free`). So the
// memory of a collected object (`DEAD`) is not freed when its last
// reference goes but kept on a per-thread list (objects of at most
// `DEFERRED_SIZE` bytes, at most `DEFERRED_BYTES` in all; beyond that,
// freed at once), and each allocation of a candidate takes an entry: it
// reuses the newest of the last `REUSE_WINDOW` entries that has its layout
// (the common case: the garbage of a program is made of the objects it
// keeps allocating), and otherwise frees the newest one and asks the
// global allocator. The frees are thus spread over the allocations that
// follow, or skipped, and a reuse reads no freed memory: the list is an
// array. An explicit collection empties the list at its end, and so does
// the thread's exit (`DeferredExit`). The memory is never handed to
// another thread and never outlives the list's bound: this is a recycling
// of what the collector just freed, not an allocator.
//
// The cost outside collections is one thread-local load and test per
// allocation of a candidate (the count sits next to the allocation counter
// in `collector`'s counters).

/// The most bytes of deferred allocations per thread (a few thousand small
/// objects: the garbage of a collection or two, which the allocations after
/// it reuse).
const DEFERRED_BYTES: usize = 512 * 1024;

/// The first capacity of the list, in entries; it doubles when full, up to
/// `DEFERRED_MAX`.
const DEFERRED_FIRST: usize = 64;

/// The most entries of the list (`DEFERRED_BYTES` of 32-byte objects).
const DEFERRED_MAX: usize = DEFERRED_BYTES / 32;

/// How many of the newest deferred allocations an allocation looks at for
/// one of its layout.
const REUSE_WINDOW: usize = 4;

/// The largest allocation whose free is deferred (glibc's per-thread cache
/// takes chunks up to 1032 bytes).
const DEFERRED_SIZE: usize = 1024;

/// One allocation waiting to be freed.
type Pending = (NonNull<u8>, Layout);

/// Allocations waiting to be freed: `list[..len]` (`len` is
/// `collector::deferred()`), `len <= limit`, of at most `DEFERRED_BYTES`
/// in all. A buffer from the global allocator in a thread-local without
/// destructor, so that keeping and freeing an entry cost a few loads and
/// stores; [`DeferredExit`] frees what is left, and the buffer, when the
/// thread exits. Only the functions below touch it, and they run no user
/// code, so no two borrows of it ever overlap.
struct Deferred {
    /// The buffer's capacity in entries once this thread registered
    /// [`DEFERRED_EXIT`]; zero before (the first free registers it) and
    /// after it ran.
    limit: Cell<usize>,
    /// [`DEFERRED_EXIT`] ran: the thread is exiting, free at once.
    exited: Cell<bool>,
    /// `limit` entries from the global allocator (dangling while `limit`
    /// is zero).
    list: Cell<NonNull<MaybeUninit<Pending>>>,
    /// `DEFERRED_BYTES` less the sizes of `list[..len]`.
    room: Cell<usize>,
}

/// Frees the deferred allocations when the thread exits.
struct DeferredExit;

impl Drop for DeferredExit {
    fn drop(&mut self) {
        free_all_deferred();
        with_deferred(|d| {
            let limit = d.limit.replace(0);
            d.exited.set(true);
            let list = d.list.replace(NonNull::dangling());
            if limit != 0 {
                // SAFETY: the buffer was allocated by `grow` with this
                // layout, and the list is closed: nothing uses it any more.
                unsafe { std::alloc::dealloc(list.as_ptr().cast(), list_layout(limit)) }
            }
        });
    }
}

thread_local! {
    static DEFERRED: Deferred = const {
        Deferred {
            limit: Cell::new(0),
            exited: Cell::new(false),
            list: Cell::new(NonNull::dangling()),
            room: Cell::new(DEFERRED_BYTES),
        }
    };
    static DEFERRED_EXIT: DeferredExit = const { DeferredExit };
}

/// Runs `f` on this thread's [`DEFERRED`]. The closure given to
/// `LocalKey::with` only fetches the address, so that it is always inlined
/// (a larger one was not, and cost a call on every reuse).
#[inline(always)]
fn with_deferred<R>(f: impl FnOnce(&Deferred) -> R) -> R {
    let d: *const Deferred = DEFERRED.with(core::ptr::from_ref);
    // SAFETY: `DEFERRED` has no destructor, so its storage lives as long as
    // this thread, which runs `f`; the reference does not escape `f`.
    f(unsafe { &*d })
}

/// The layout of a list of `entries` entries.
fn list_layout(entries: usize) -> Layout {
    // At most `DEFERRED_MAX` entries: it cannot overflow.
    Layout::array::<Pending>(entries).expect("deferred list too large")
}

/// Frees the memory at `base`, allocated by the global allocator with
/// `layout`, now or at one of the next allocations.
///
/// # Safety
/// Nothing references the memory any more; it is freed once.
#[inline]
pub(crate) unsafe fn free_later(base: NonNull<u8>, layout: Layout) {
    let kept = with_deferred(|d| {
        let len = collector::deferred();
        let room = d.room.get();
        if len < d.limit.get() && layout.size() <= room.min(DEFERRED_SIZE) {
            // SAFETY: `len < limit`; see `Deferred` for the borrow.
            unsafe {
                d.list
                    .get()
                    .add(len)
                    .write(MaybeUninit::new((base, layout)))
            };
            d.room.set(room - layout.size());
            collector::set_deferred(len + 1);
            return true;
        }
        false
    });
    if !kept {
        // SAFETY: forwarded.
        unsafe { free_later_slow(base, layout) }
    }
}

/// The rest of [`free_later`], out of line: the list is full (or closed),
/// or the object too large for the room left.
///
/// # Safety
/// As for [`free_later`].
#[cold]
#[inline(never)]
unsafe fn free_later_slow(base: NonNull<u8>, layout: Layout) {
    let kept = with_deferred(|d| {
        let len = collector::deferred();
        if layout.size() > d.room.get().min(DEFERRED_SIZE) || !grow(d) {
            return false;
        }
        // SAFETY: `len < limit` (`grow` made room); see `Deferred` for the
        // borrow.
        unsafe {
            d.list
                .get()
                .add(len)
                .write(MaybeUninit::new((base, layout)))
        };
        d.room.set(d.room.get() - layout.size());
        collector::set_deferred(len + 1);
        true
    });
    if !kept {
        // SAFETY: guaranteed by the caller.
        unsafe { std::alloc::dealloc(base.as_ptr(), layout) }
    }
}

/// Makes room in the full list: on the thread's first deferred free (the
/// list is closed: `limit` is zero), registers the thread-exit destructor
/// ([`DEFERRED_EXIT`]) unless the thread is exiting, and allocates the
/// buffer; later, doubles it, up to [`DEFERRED_MAX`] entries. Returns
/// whether there is room (not at the bound, when the thread exits, or if
/// the allocator fails: the caller frees at once).
#[cold]
#[inline(never)]
fn grow(d: &Deferred) -> bool {
    if collector::deferred() < d.limit.get() {
        return true;
    }
    let limit = d.limit.get();
    if limit >= DEFERRED_MAX {
        return false;
    }
    if limit == 0 {
        if d.exited.get() {
            return false;
        }
        if DEFERRED_EXIT.try_with(|_| ()).is_err() {
            d.exited.set(true);
            return false;
        }
    }
    let new_limit = (limit * 2).max(DEFERRED_FIRST);
    let new_layout = list_layout(new_limit);
    let list = if limit == 0 {
        // SAFETY: a non-zero size.
        unsafe { std::alloc::alloc(new_layout) }
    } else {
        // SAFETY: the buffer was allocated with `list_layout(limit)`; a
        // non-zero size that does not overflow (`list_layout`).
        unsafe {
            std::alloc::realloc(
                d.list.get().as_ptr().cast(),
                list_layout(limit),
                new_layout.size(),
            )
        }
    };
    match NonNull::new(list.cast()) {
        Some(list) => {
            d.list.set(list);
            d.limit.set(new_limit);
            true
        }
        // The old buffer, if any, is untouched.
        None => false,
    }
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
    allocate_new(layout)
}

/// Allocates memory for an object of the thread-safe pointers (which do
/// not count with the per-thread collector): a deferred allocation of the
/// same layout if one waits (the garbage of a `sync` collection this thread
/// freed, see "Deferred frees"), else the global allocator's.
///
/// `layout` has a non-zero size.
#[inline(always)]
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn allocate_uncounted(layout: Layout) -> NonNull<u8> {
    if collector::deferred() != 0 {
        return reuse_or_allocate(layout);
    }
    allocate_new(layout)
}

/// Memory from the global allocator.
#[inline]
fn allocate_new(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() != 0);
    // SAFETY: the layout has a non-zero size (callers allocate objects,
    // which contain their counts).
    let base = unsafe { std::alloc::alloc(layout) };
    match NonNull::new(base) {
        Some(base) => base,
        None => std::alloc::handle_alloc_error(layout),
    }
}

/// Reuses the newest of the last [`REUSE_WINDOW`] deferred allocations that
/// has `layout` (moving the newest entry into its place); if none has it,
/// frees the newest and allocates.
#[inline(never)]
fn reuse_or_allocate(layout: Layout) -> NonNull<u8> {
    let reused = with_deferred(|d| {
        let len = collector::deferred();
        // SAFETY: `len <= limit`; the entries below it were written by
        // `free_later` (see `Deferred` for the borrow).
        let pending = unsafe { core::slice::from_raw_parts_mut(d.list.get().as_ptr(), len) };
        let newest = len - 1;
        collector::set_deferred(newest);
        // SAFETY: as above; the newest entry leaves the list here.
        let (base, kept) = unsafe { pending[newest].assume_init() };
        // Whichever entry leaves, it has `layout` or `kept`.
        if kept == layout {
            d.room.set(d.room.get() + kept.size());
            return Some(base);
        }
        let window = len.saturating_sub(REUSE_WINDOW)..newest;
        for i in window.rev() {
            // SAFETY: as above.
            let (other, other_layout) = unsafe { pending[i].assume_init() };
            if other_layout == layout {
                // The newest entry takes the place of the reused one.
                pending[i].write((base, kept));
                d.room.set(d.room.get() + layout.size());
                return Some(other);
            }
        }
        d.room.set(d.room.get() + kept.size());
        // SAFETY: the newest entry left the list: nothing references its
        // memory, which the global allocator gave with `kept`.
        unsafe { std::alloc::dealloc(base.as_ptr(), kept) };
        None
    });
    reused.unwrap_or_else(|| allocate_new(layout))
}

/// Frees every deferred allocation (at the end of an explicit collection,
/// and when the thread exits).
pub(crate) fn free_all_deferred() {
    with_deferred(|d| {
        while let Some(len) = collector::deferred().checked_sub(1) {
            collector::set_deferred(len);
            // SAFETY: `len < limit`; the entry was written by `free_later`
            // and leaves the list here: nothing references its memory,
            // which the global allocator gave with `layout`.
            unsafe {
                let (base, layout) = d.list.get().add(len).read().assume_init();
                std::alloc::dealloc(base.as_ptr(), layout)
            }
        }
        d.room.set(DEFERRED_BYTES);
    })
}
