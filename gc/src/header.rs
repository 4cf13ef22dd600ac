//! The allocation shared by [`Gc`](crate::Gc) and [`Rc`](crate::Rc). Its
//! layout depends on the kind of object, decided at compile time:
//!
//! ```text
//! leaf: T::MAY_CONTAIN_GC == false, or any recycler::Rc<T> (std Rc's layout)
//!            handle
//!            v
//!            +---------+---------+-------+
//!            | strong  |  weak   | value |
//!            +---------+---------+-------+
//!
//! candidate: Gc<T> with T::MAY_CONTAIN_GC == true (one word more)
//! +----------------------+---------+---------+-------+
//! | meta: slot | flags   | strong  |  weak   | value |
//! +----------------------+---------+---------+-------+
//! ^ Object (the collector's view)  ^ handle
//! ```
//!
//! Handles of both kinds point at the counts ([`RcBox`]), so clone, drop and
//! deref are the same code; only a candidate has the `meta` word just before
//! them (and, for values aligned above a word, padding before `meta`). A
//! candidate slice (`Gc<[T]>`) also keeps its length in the word before
//! `meta`, for the collector.
//!
//! * `strong` counts handles. When it reaches zero the value is dropped (unless
//!   the collector already did, see `DEAD`) and the implicit weak reference that
//!   all strong handles share is released.
//! * `weak` counts `Weak` handles plus one for all strong handles together, as
//!   in `std::rc`. The memory is freed when it reaches zero, never earlier, so a
//!   `Weak` or a buffered root never points to freed memory. A candidate
//!   stores it negated (`-n`, so its sign bit is set): a trait-object handle
//!   (`Gc<dyn Trait>`) cannot tell from its type whether the object has
//!   `meta`, and must not look at the value to find out (it may be in the
//!   middle of its drop); and the last release of a candidate is then an
//!   increment to zero, as cheap as `std::rc`'s decrement to zero.
//! * `meta` packs the flags below into its low 8 bits and a slot number into
//!   the rest: the object's index in its roots buffer while `BUFFERED`, or its
//!   node index in the collector's side graph while `IN_GRAPH` (the two never
//!   overlap: a collection takes the buffer before it builds the graph).
//!
//! Nothing in the allocation names its type. The collector only ever reaches
//! a candidate through a typed path, a handle dropped into a roots buffer or a
//! `Gc<T>` reporting itself to a [`Tracer`], so each of those records an
//! [`Object`]: the address of the candidate header plus a `&'static` per-type
//! [`VTable`] (trace, drop, layout). Leaves never meet the collector; their
//! handles free them with static knowledge of `T`, and the drop queue keeps a
//! typed finishing function next to each pointer it holds.
//!
//! This module and [`crate::drop_queue`] hold the unsafe code of the
//! single-threaded pointers; everything else goes through the functions here.

use core::alloc::Layout;
use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crate::trace::{Trace, Tracer};
use crate::unsize::Pointee;

const WORD: usize = core::mem::size_of::<usize>();

/// The object is in a roots buffer at `slot`.
pub(crate) const BUFFERED: usize = 1 << 0;
/// The collector dropped the value; remaining handles are dead.
pub(crate) const DEAD: usize = 1 << 1;
/// The object survived a collection (old generation).
pub(crate) const OLD: usize = 1 << 2;
/// The object is a node of the running collection's graph, at `slot`.
pub(crate) const IN_GRAPH: usize = 1 << 3;

const FLAG_BITS: u32 = 8;
const FLAG_MASK: usize = (1 << FLAG_BITS) - 1;

/// The two counts every object starts with (what a handle points to).
#[repr(C)]
pub(crate) struct Counts {
    strong: Cell<usize>,
    weak: Cell<usize>,
}

/// What a handle points to: the counts, then the value. A candidate has its
/// `meta` word right before.
#[repr(C)]
pub(crate) struct RcBox<T: ?Sized> {
    counts: Counts,
    value: T,
}

/// The header of a candidate as the collector sees it: `meta`, then the
/// counts of the [`RcBox`] that follows.
#[repr(C)]
pub(crate) struct Header {
    meta: Cell<usize>,
    counts: Counts,
}

/// Per-type operations on candidates, erased so that the collector can
/// handle any object. (Public only so that [`crate::unsize::Pointee`] can
/// name it; nothing outside the crate can build or use one.)
pub struct VTable {
    /// Reports the value's pointers. Must not be called once the value is dropped.
    trace: unsafe fn(Object, &mut Tracer<'_>),
    /// Drops the value in place (not the memory).
    drop_value: unsafe fn(Object),
    /// Frees the memory.
    dealloc: unsafe fn(Object),
    /// Frees the memory later (see "Deferred frees" in `drop_queue.rs`).
    dealloc_later: unsafe fn(Object),
}

/// A candidate as the collector holds it: where its header is, and its type.
#[derive(Clone, Copy)]
pub(crate) struct Object {
    header: NonNull<Header>,
    vtable: &'static VTable,
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        self.header == other.header
    }
}

impl Counts {
    /// `weak` holds the count `n` for a leaf and `-n` (wrapping) for a
    /// candidate: the sign tells a trait-object handle, whose type cannot,
    /// whether the object has `meta` (see [`is_candidate`]; `n >= 1` while
    /// the allocation is live and stays below `2^63`, `inc_weak`), and a
    /// candidate's last release is an increment to zero: `std::rc`'s
    /// one-instruction update and test on every free (a flag bit in the
    /// count took two to four more).
    const fn new(strong: usize, candidate: bool) -> Self {
        Counts {
            strong: Cell::new(strong),
            weak: Cell::new(if candidate { 1usize.wrapping_neg() } else { 1 }),
        }
    }

    /// Whether the object was allocated as a candidate.
    #[inline]
    fn is_candidate(&self) -> bool {
        (self.weak.get() as isize) < 0
    }

    #[inline]
    pub(crate) fn strong(&self) -> usize {
        self.strong.get()
    }

    #[inline]
    pub(crate) fn set_strong(&self, n: usize) {
        self.strong.set(n)
    }

    /// Adds a strong reference; aborts on overflow like `std::rc`.
    #[inline]
    pub(crate) fn inc_strong(&self) {
        let n = self.strong.get().wrapping_add(1);
        self.strong.set(n);
        if n == 0 {
            std::process::abort();
        }
    }

    #[inline]
    pub(crate) fn weak(&self) -> usize {
        (self.weak.get() as isize).unsigned_abs()
    }

    /// Adds a weak reference to an object allocated as a candidate
    /// (`has_meta`) or not; aborts before the count reaches `2^63`, where
    /// its sign would flip.
    #[inline]
    pub(crate) fn inc_weak(&self, has_meta: bool) {
        debug_assert_eq!(self.is_candidate(), has_meta);
        let w = self.weak.get();
        let n = if has_meta {
            w.wrapping_sub(1)
        } else {
            w.wrapping_add(1)
        };
        if ((n as isize) < 0) != has_meta {
            std::process::abort();
        }
        self.weak.set(n);
    }

    /// Removes a weak reference of an object allocated as a candidate
    /// (`has_meta`) or not; whether it was the last one. `has_meta` is a
    /// constant for sized types, so for either kind this is `std::rc`'s
    /// update and test.
    #[inline]
    fn dec_weak_is_last(&self, has_meta: bool) -> bool {
        debug_assert_eq!(self.is_candidate(), has_meta);
        let n = if has_meta {
            self.weak.get().wrapping_add(1)
        } else {
            self.weak.get() - 1
        };
        self.weak.set(n);
        n == 0
    }
}

impl core::ops::Deref for Header {
    type Target = Counts;

    #[inline]
    fn deref(&self) -> &Counts {
        &self.counts
    }
}

impl Header {
    #[inline]
    fn word(&self) -> usize {
        self.meta.get()
    }

    #[inline]
    pub(crate) fn flags(&self) -> usize {
        self.word() & FLAG_MASK
    }

    #[inline]
    pub(crate) fn has(&self, flag: usize) -> bool {
        self.word() & flag != 0
    }

    #[inline]
    pub(crate) fn set_flag(&self, flag: usize) {
        self.meta.set(self.word() | flag)
    }

    #[inline]
    pub(crate) fn clear_flag(&self, flag: usize) {
        self.meta.set(self.word() & !flag)
    }

    #[inline]
    pub(crate) fn slot(&self) -> usize {
        self.word() >> FLAG_BITS
    }

    #[inline]
    pub(crate) fn set_slot(&self, slot: usize) {
        self.meta.set((slot << FLAG_BITS) | self.flags())
    }

    /// Sets the slot and a flag in one write.
    #[inline]
    pub(crate) fn set_slot_and_flag(&self, slot: usize, flag: usize) {
        self.meta.set((slot << FLAG_BITS) | self.flags() | flag)
    }

    /// Whether the value is still there (not dropped by the collector).
    #[inline]
    pub(crate) fn is_alive(&self) -> bool {
        !self.has(DEAD)
    }
}

impl Object {
    /// The candidate's header.
    ///
    /// # Safety
    /// The allocation must be live (weak count > 0) for `'a`.
    #[inline]
    pub(crate) unsafe fn as_ref<'a>(self) -> &'a Header {
        // SAFETY: guaranteed by the caller; the header is only accessed
        // through `Cell`s.
        unsafe { self.header.as_ref() }
    }
}

/// The allocation of a `T` of either kind.
pub(crate) struct Kind<T>(PhantomData<T>);

impl<T: Trace> Kind<T> {
    /// Whether the allocation has a `meta` word: only `Gc`s of types that may
    /// own pointers are candidates.
    pub(crate) const fn has_meta(collect: bool) -> bool {
        collect && T::MAY_CONTAIN_GC
    }

    /// The layout of the allocation and the offset of the [`RcBox`] in it.
    const fn layout(has_meta: bool) -> (Layout, usize) {
        let inner = Layout::new::<RcBox<T>>();
        if !has_meta {
            return (inner, 0);
        }
        // `RcBox<T>` is aligned to at least a word, so one alignment unit of
        // padding in front holds `meta` in its last word.
        let offset = prefix(inner.align(), 1);
        let size = match inner.size().checked_add(offset) {
            Some(size) => size,
            None => panic!("type too large for a Gc"),
        };
        match Layout::from_size_align(size, inner.align()) {
            Ok(layout) => (layout, offset),
            Err(_) => panic!("type too large for a Gc"),
        }
    }

    const LEAF: (Layout, usize) = Self::layout(false);
    const CANDIDATE: (Layout, usize) = Self::layout(true);

    #[inline]
    pub(crate) const fn layout_of(has_meta: bool) -> (Layout, usize) {
        if has_meta {
            Self::CANDIDATE
        } else {
            Self::LEAF
        }
    }

    pub(crate) const VTABLE: VTable = VTable {
        trace: trace_value::<T>,
        drop_value: drop_value::<T>,
        dealloc: dealloc_sized::<T, false>,
        dealloc_later: dealloc_sized::<T, true>,
    };

    /// Allocates an object of this kind holding `value`, with `strong`
    /// references; the caller counts it with the collector.
    fn allocate_raw(has_meta: bool, strong: usize) -> NonNull<RcBox<T>> {
        let (layout, offset) = Self::layout_of(has_meta);
        let base = crate::drop_queue::allocate(layout, has_meta);
        // SAFETY: `offset < layout.size()`, so the pointer stays in the
        // allocation and is aligned for `RcBox<T>` (a multiple of its align).
        let ptr = unsafe { base.add(offset) }.cast::<RcBox<T>>();
        // SAFETY: the allocation is fresh and large enough for the header
        // (when `has_meta`, `meta` is the word right before the counts).
        unsafe {
            if has_meta {
                unsafe_sub_word(ptr.cast::<Counts>())
                    .as_ptr()
                    .write(Header {
                        meta: Cell::new(0),
                        counts: Counts::new(strong, true),
                    });
            } else {
                ptr::addr_of_mut!((*ptr.as_ptr()).counts).write(Counts::new(strong, false));
            }
        }
        ptr
    }

    /// Allocates an object holding `value` with one strong reference.
    #[inline]
    pub(crate) fn allocate(has_meta: bool, value: T) -> NonNull<RcBox<T>> {
        let ptr = Self::allocate_raw(has_meta, 1);
        // SAFETY: the value field is uninitialised memory of the new object.
        unsafe { ptr::addr_of_mut!((*ptr.as_ptr()).value).write(value) };
        ptr
    }

    /// Allocates an object whose value `init` builds, given a weak reference
    /// to the object itself (the implicit one is held by the caller until the
    /// value is written), as `Rc::new_cyclic` does.
    pub(crate) fn allocate_cyclic(
        has_meta: bool,
        init: impl FnOnce(NonNull<RcBox<T>>) -> T,
    ) -> NonNull<RcBox<T>> {
        // Strong is zero while the value is built, so upgrading a weak
        // reference fails and nothing reads the value; weak is one (the
        // strong side's implicit reference) so the memory survives the weak
        // references `init` drops.
        let ptr = Self::allocate_raw(has_meta, 0);
        /// Releases the implicit weak reference if `init` panics.
        struct Unwind<T: Trace>(NonNull<RcBox<T>>, bool);
        impl<T: Trace> Drop for Unwind<T> {
            fn drop(&mut self) {
                // SAFETY: the counts are initialised and the memory is live
                // while the implicit weak reference is held; the value was
                // never written, so only the memory is released.
                unsafe { release_weak(self.0, self.1) }
                crate::collector::on_allocate_undone();
            }
        }
        let guard = Unwind(ptr, has_meta);
        let value = init(ptr);
        core::mem::forget(guard);
        // SAFETY: the allocation is live (implicit weak reference held) and
        // the value field is uninitialised; no reference to it exists.
        unsafe {
            ptr::addr_of_mut!((*ptr.as_ptr()).value).write(value);
            counts(ptr).set_strong(1);
        }
        ptr
    }
}

/// Whether an object of type `T` (its dynamic type, for a trait object) is a
/// candidate when handled by the family `collect`.
///
/// A constant for every type but trait objects, which read the flag that
/// allocation left in the weak count. Never a reference to the value: this
/// runs while the value may be in the middle of its own drop (a `Weak` to
/// itself dropped by its destructor).
///
/// # Safety
/// `ptr` points to a live allocation.
#[inline]
pub(crate) unsafe fn is_candidate<T: ?Sized + Pointee>(
    ptr: NonNull<RcBox<T>>,
    collect: bool,
) -> bool {
    collect
        && T::MAY_CONTAIN_GC
        && T::__CANDIDATE
        // SAFETY: the allocation is live.
        && (!T::__DYNAMIC || unsafe { counts(ptr) }.is_candidate())
}

/// The collector's view of the candidate at `ptr`.
///
/// # Safety
/// `ptr` points to a live candidate allocation whose value is not in the
/// middle of being dropped.
#[inline]
pub(crate) unsafe fn object<T: ?Sized + Pointee>(ptr: NonNull<RcBox<T>>) -> Object {
    Object {
        // The header starts one word before the counts, inside the
        // allocation; `ptr` carries the provenance of the whole allocation.
        header: unsafe_sub_word(ptr.cast()),
        // SAFETY: the allocation is live and its value alive or completely
        // dropped (see `Pointee::__vtable`).
        vtable: unsafe { T::__vtable(value_ptr(ptr)) },
    }
}

/// The offset of the counts in a candidate allocation whose `RcBox` is
/// aligned to `align`, with `words` words of header in front.
const fn prefix(align: usize, words: usize) -> usize {
    let bytes = words * WORD;
    (bytes + align - 1) & !(align - 1)
}

/// Releases one weak reference and frees the memory if it was the last.
///
/// # Safety
/// The caller owns the weak reference (or the strong side's implicit one,
/// after the value is gone), the value is dropped or was never written,
/// and `has_meta` is the kind the object was allocated with.
#[inline]
pub(crate) unsafe fn release_weak<T: ?Sized + Pointee>(ptr: NonNull<RcBox<T>>, has_meta: bool) {
    // SAFETY: the memory is live while the caller's weak reference exists.
    if unsafe { counts(ptr) }.dec_weak_is_last(has_meta) {
        // SAFETY: no strong or weak reference remains.
        unsafe { dealloc(ptr, has_meta) }
    }
}

/// Frees the memory of an object.
///
/// # Safety
/// Nothing references the object any more, its value is dropped or was
/// never written, and `has_meta` is the kind it was allocated with.
#[inline]
unsafe fn dealloc<T: ?Sized + Pointee>(ptr: NonNull<RcBox<T>>, has_meta: bool) {
    // SAFETY: the allocation is live until the `dealloc` below.
    let (layout, offset) = unsafe { T::__box_layout(value_ptr(ptr), has_meta) };
    // SAFETY: it was allocated by the global allocator with `layout`,
    // `offset` bytes before the counts.
    unsafe { std::alloc::dealloc(ptr.cast::<u8>().as_ptr().sub(offset), layout) }
}

/// Frees memory that nothing references any more, now or, if `LATER`, at
/// one of the next allocations.
///
/// # Safety
/// The global allocator gave `base` with `layout`; nothing references the
/// memory any more.
#[inline(always)]
unsafe fn free_memory<const LATER: bool>(base: NonNull<u8>, layout: Layout) {
    // SAFETY: forwarded.
    unsafe {
        if LATER {
            crate::drop_queue::free_later(base, layout)
        } else {
            std::alloc::dealloc(base.as_ptr(), layout)
        }
    }
}

/// The layout of an allocation whose value has layout `value`, and the
/// offset of the counts in it (see [`crate::unsize::Pointee::__box_layout`]).
pub(crate) fn box_layout(value: Layout, has_meta: bool, prefix_words: usize) -> (Layout, usize) {
    // `RcBox<T>` is `repr(C)`: the counts, then the value.
    let inner = match Layout::new::<Counts>().extend(value) {
        Ok((inner, _)) => inner.pad_to_align(),
        // It was allocated with this layout.
        Err(_) => unreachable!(),
    };
    if has_meta {
        let offset = prefix(inner.align(), prefix_words);
        // SAFETY: the allocation was made with this size and alignment.
        let layout =
            unsafe { Layout::from_size_align_unchecked(inner.size() + offset, inner.align()) };
        (layout, offset)
    } else {
        (inner, 0)
    }
}

/// Drops the value in place (not the memory, not the counts).
///
/// # Safety
/// The strong count is zero, the value alive and referenced by nobody; it
/// is dropped exactly once.
#[inline]
pub(crate) unsafe fn drop_value_in_place<T: ?Sized>(ptr: NonNull<RcBox<T>>) {
    // SAFETY: guaranteed by the caller.
    unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*ptr.as_ptr()).value)) }
}

/// The address one word before `ptr`, with `ptr`'s provenance.
#[inline]
fn unsafe_sub_word(ptr: NonNull<Counts>) -> NonNull<Header> {
    // SAFETY: only used on candidates, whose allocation has the `meta` word
    // right before the counts, so the result is in bounds and non-null.
    unsafe { NonNull::new_unchecked(ptr.as_ptr().cast::<usize>().sub(1).cast::<Header>()) }
}

/// The counts of the object at `ptr`.
///
/// # Safety
/// `ptr` must point to a live allocation (weak count > 0) for `'a`.
#[inline]
pub(crate) unsafe fn counts<'a, T: ?Sized>(ptr: NonNull<RcBox<T>>) -> &'a Counts {
    // SAFETY: the caller guarantees the allocation is live; the counts are
    // the first field of a repr(C) struct and only accessed through `Cell`s.
    unsafe { &(*ptr.as_ptr()).counts }
}

/// The candidate header of the object at `ptr`.
///
/// # Safety
/// `ptr` must point to a live candidate allocation (one with `meta`).
#[inline]
pub(crate) unsafe fn header<'a, T: ?Sized>(ptr: NonNull<RcBox<T>>) -> &'a Header {
    // SAFETY: guaranteed by the caller.
    unsafe { unsafe_sub_word(ptr.cast()).as_ref() }
}

/// The value of the object at `ptr`.
///
/// # Safety
/// `ptr` must point to a live allocation whose value has not been dropped,
/// and the value must outlive `'a` (a strong handle is held for `'a`).
#[inline]
pub(crate) unsafe fn value<'a, T: ?Sized>(ptr: NonNull<RcBox<T>>) -> &'a T {
    // SAFETY: guaranteed by the caller.
    unsafe { &(*ptr.as_ptr()).value }
}

/// The value of the object at `ptr`, mutably.
///
/// # Safety
/// As for [`value`], and no other reference to the value may exist for `'a`.
#[inline]
pub(crate) unsafe fn value_mut<'a, T: ?Sized>(ptr: NonNull<RcBox<T>>) -> &'a mut T {
    // SAFETY: guaranteed by the caller.
    unsafe { &mut (*ptr.as_ptr()).value }
}

/// A raw pointer to the value, without touching it.
#[inline]
pub(crate) fn value_ptr<T: ?Sized>(ptr: NonNull<RcBox<T>>) -> *const T {
    // SAFETY: computing a field address does not dereference.
    unsafe { ptr::addr_of!((*ptr.as_ptr()).value) }
}

/// Moves the value out of the object and marks it as taken.
///
/// # Safety
/// The value must be alive and the caller must own the only strong
/// reference, which it gives up (the strong count is set to zero).
pub(crate) unsafe fn take_value<T>(ptr: NonNull<RcBox<T>>) -> T {
    // SAFETY: guaranteed by the caller; with strong = 0 nobody reads the
    // value again and `Weak::upgrade` fails.
    unsafe {
        counts(ptr).set_strong(0);
        ptr::read(ptr::addr_of!((*ptr.as_ptr()).value))
    }
}

/// The typed pointer of a candidate.
#[inline]
fn typed<T>(object: Object) -> NonNull<RcBox<T>> {
    // SAFETY: one word after the header are the counts, in bounds.
    unsafe { NonNull::new_unchecked(object.header.as_ptr().cast::<usize>().add(1)) }.cast()
}

/// # Safety
/// `object` is a candidate of type `T` whose value is alive.
unsafe fn trace_value<T: Trace>(object: Object, tracer: &mut Tracer<'_>) {
    // SAFETY: guaranteed by the caller.
    let value = unsafe { value(typed::<T>(object)) };
    value.trace(tracer);
}

/// # Safety
/// `object` is a candidate of type `T` whose value is alive and
/// unreferenced; it is dropped exactly once.
unsafe fn drop_value<T>(object: Object) {
    // SAFETY: guaranteed by the caller.
    unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*typed::<T>(object).as_ptr()).value)) }
}

/// Drops the value of a candidate whose last strong reference is gone, or
/// which the collector found garbage.
///
/// # Safety
/// The value is alive and nothing else will drop it or read it.
#[inline]
pub(crate) unsafe fn drop_value_erased(object: Object) {
    // SAFETY: forwarded.
    unsafe { (object.vtable.drop_value)(object) }
}

/// Reports the pointers of a candidate's value.
///
/// # Safety
/// The object is live and its value alive.
#[inline]
pub(crate) unsafe fn trace_erased(object: Object, tracer: &mut Tracer<'_>) {
    // SAFETY: guaranteed by the caller.
    unsafe { (object.vtable.trace)(object, tracer) }
}

/// Releases one weak reference of a candidate and frees the memory if it was
/// the last.
///
/// # Safety
/// The caller owns the weak reference (or the strong side's implicit one,
/// after the value is gone), and the value is dropped or was never written.
#[inline]
pub(crate) unsafe fn release_weak_object(object: Object) {
    // SAFETY: the memory is live while the caller's weak reference exists.
    let h = unsafe { object.as_ref() };
    if h.dec_weak_is_last(true) {
        // SAFETY: no strong or weak reference remains, so nothing can reach
        // the memory.
        unsafe { (object.vtable.dealloc)(object) }
    }
}

/// As [`release_weak_object`], for an object the collector found garbage
/// (`DEAD`): its memory is freed at one of the next allocations rather
/// than now (see "Deferred frees" in `drop_queue.rs`).
///
/// # Safety
/// As for [`release_weak_object`].
#[inline]
pub(crate) unsafe fn release_weak_dead(object: Object) {
    // SAFETY: the memory is live while the caller's weak reference exists.
    let h = unsafe { object.as_ref() };
    if h.dec_weak_is_last(true) {
        // SAFETY: no strong or weak reference remains, so nothing can reach
        // the memory.
        unsafe { (object.vtable.dealloc_later)(object) }
    }
}

/// Frees the memory of a sized candidate (`LATER`: see [`free_memory`]).
///
/// # Safety
/// `object` is a candidate of type `T` that nothing references any more.
unsafe fn dealloc_sized<T: Trace, const LATER: bool>(object: Object) {
    let (layout, offset) = Kind::<T>::CANDIDATE;
    // SAFETY: it was allocated by the global allocator with `layout`,
    // `offset` bytes before the counts, which follow the header (in
    // bounds, not null).
    unsafe {
        let base = object.header.cast::<u8>().add(WORD).sub(offset);
        free_memory::<LATER>(base, layout)
    }
}

/// Slices (`Gc<[T]>`, `Rc<[T]>`, and as `[u8]` the bytes of a `str`). A
/// candidate slice stores its length in the word before `meta`, so that the
/// collector, which holds only the header's address, can trace it.
pub(crate) struct SliceKind<T>(PhantomData<T>);

impl<T: Trace> SliceKind<T> {
    pub(crate) const VTABLE: VTable = VTable {
        trace: trace_slice::<T>,
        drop_value: drop_slice::<T>,
        dealloc: dealloc_slice::<T, false>,
        dealloc_later: dealloc_slice::<T, true>,
    };

    /// The layout of a candidate slice allocation of `len` elements, and
    /// the offset of the counts in it; `None` if it overflows.
    fn layout(has_meta: bool, len: usize) -> Option<(Layout, usize)> {
        let (inner, _) = Layout::new::<Counts>()
            .extend(Layout::array::<T>(len).ok()?)
            .ok()?;
        let inner = inner.pad_to_align();
        if !has_meta {
            return Some((inner, 0));
        }
        let offset = prefix(inner.align(), 2);
        let layout =
            Layout::from_size_align(inner.size().checked_add(offset)?, inner.align()).ok()?;
        Some((layout, offset))
    }

    /// Allocates a slice object of `len` elements with one strong reference;
    /// the elements are uninitialised.
    fn allocate_uninit(has_meta: bool, len: usize) -> NonNull<RcBox<[T]>> {
        let Some((layout, offset)) = Self::layout(has_meta, len) else {
            panic!("slice too large for a Gc");
        };
        let base = crate::drop_queue::allocate(layout, has_meta);
        // SAFETY: `offset` is inside the allocation and aligned for the
        // counts; a `*mut [T]` cast to `*mut RcBox<[T]>` keeps its length,
        // which is the element count of the value field.
        let ptr = unsafe {
            let counts = base.as_ptr().add(offset);
            NonNull::new_unchecked(
                ptr::slice_from_raw_parts_mut(counts.cast::<T>(), len) as *mut RcBox<[T]>
            )
        };
        // SAFETY: the allocation is fresh; a candidate has two words (length
        // and `meta`) right before the counts.
        unsafe {
            ptr::addr_of_mut!((*ptr.as_ptr()).counts).write(Counts::new(1, has_meta));
            if has_meta {
                let header = unsafe_sub_word(ptr.cast::<Counts>());
                header.as_ptr().cast::<Cell<usize>>().write(Cell::new(0));
                header.as_ptr().cast::<usize>().sub(1).write(len);
            }
        }
        ptr
    }

    /// Moves the elements of `vec` into a new slice object.
    pub(crate) fn from_vec(has_meta: bool, vec: Vec<T>) -> NonNull<RcBox<[T]>> {
        let ptr = Self::allocate_uninit(has_meta, vec.len());
        // SAFETY: the value field has room for `vec.len()` elements and is
        // fresh memory.
        unsafe {
            crate::unsize::move_elements(vec, ptr::addr_of_mut!((*ptr.as_ptr()).value).cast())
        };
        ptr
    }
}

impl SliceKind<u8> {
    /// A leaf object holding a copy of `s`.
    pub(crate) fn from_str(s: &str) -> NonNull<RcBox<str>> {
        let ptr = Self::allocate_uninit(false, s.len());
        // SAFETY: room for `s.len()` bytes, no overlap; `RcBox<[u8]>` and
        // `RcBox<str>` have the same layout and metadata, and the bytes are
        // UTF-8.
        unsafe {
            ptr::copy_nonoverlapping(
                s.as_ptr(),
                ptr::addr_of_mut!((*ptr.as_ptr()).value).cast::<u8>(),
                s.len(),
            );
            NonNull::new_unchecked(ptr.as_ptr() as *mut RcBox<str>)
        }
    }
}

/// The typed pointer of a candidate slice, its length read from the word
/// before `meta`.
///
/// # Safety
/// `object` is a live candidate slice of `T`.
#[inline]
unsafe fn typed_slice<T>(object: Object) -> NonNull<RcBox<[T]>> {
    // SAFETY: guaranteed by the caller: the length is the word before the
    // header and the counts the word after, all inside the allocation.
    unsafe {
        let len = object.header.as_ptr().cast::<usize>().sub(1).read();
        let counts = object.header.as_ptr().cast::<usize>().add(1);
        NonNull::new_unchecked(
            ptr::slice_from_raw_parts_mut(counts.cast::<T>(), len) as *mut RcBox<[T]>
        )
    }
}

/// # Safety
/// `object` is a candidate slice of `T` whose value is alive.
unsafe fn trace_slice<T: Trace>(object: Object, tracer: &mut Tracer<'_>) {
    // SAFETY: guaranteed by the caller.
    unsafe { value(typed_slice::<T>(object)) }.trace(tracer);
}

/// # Safety
/// `object` is a candidate slice of `T` whose value is alive and
/// unreferenced; it is dropped exactly once.
unsafe fn drop_slice<T>(object: Object) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        ptr::drop_in_place(ptr::addr_of_mut!(
            (*typed_slice::<T>(object).as_ptr()).value
        ))
    }
}

/// # Safety
/// `object` is a candidate slice of `T` that nothing references any more.
unsafe fn dealloc_slice<T: Trace, const LATER: bool>(object: Object) {
    // SAFETY: guaranteed by the caller; the slice was allocated by
    // `allocate_uninit` with this layout, `offset` bytes before the counts.
    unsafe {
        let ptr = typed_slice::<T>(object);
        let (layout, offset) = <[T] as Pointee>::__box_layout(value_ptr(ptr), true);
        free_memory::<LATER>(ptr.cast::<u8>().sub(offset), layout)
    }
}
