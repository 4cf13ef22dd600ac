//! The allocation shared by [`Gc`](crate::Gc) and [`Rc`](crate::Rc): a
//! header followed by the value.
//!
//! ```text
//! GcBox<T> (repr(C))
//! +---------+---------+--------------------+-------------+-------+
//! | strong  |  weak   | meta: slot | flags | &'static VT | value |
//! +---------+---------+--------------------+-------------+-------+
//! ```
//!
//! * `strong` counts handles. When it reaches zero the value is dropped (unless
//!   the collector already did, see `DEAD`) and the implicit weak reference that
//!   all strong handles share is released.
//! * `weak` counts `Weak` handles plus one for all strong handles together, as
//!   in `std::rc`. The memory is freed when it reaches zero, never earlier, so a
//!   `Weak` or a buffered root never points to freed memory.
//! * `meta` packs the flags below into its low 8 bits and a slot number into
//!   the rest: the object's index in its roots buffer while `BUFFERED`, its node
//!   index in the collector's side graph while `IN_GRAPH` (the two never
//!   overlap: a collection takes the buffer before it builds the graph), or the
//!   next object of the deferred-drop stack while the object waits there.
//! * the vtable erases `T` for the collector and for deferred drops.
//!
//! This module and [`crate::drop_queue`] hold the unsafe code of the
//! single-threaded pointers; everything else goes through the functions here.

use core::alloc::Layout;
use core::cell::Cell;
use core::ptr::{self, NonNull};

use crate::trace::{Trace, Tracer};

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

/// Per-type operations, erased so that the collector can handle any object.
pub(crate) struct VTable {
    /// Reports the value's pointers. Must not be called once the value is dropped.
    pub(crate) trace: unsafe fn(NonNull<Header>, &mut Tracer<'_>),
    /// Drops the value in place (not the memory).
    pub(crate) drop_value: unsafe fn(NonNull<Header>),
    /// Whether `drop_value` does anything.
    pub(crate) needs_drop: bool,
    /// The layout of the whole `GcBox<T>`.
    pub(crate) layout: Layout,
}

/// The header of every object.
#[repr(C)]
pub(crate) struct Header {
    strong: Cell<usize>,
    weak: Cell<usize>,
    /// Flags and slot, stored as a bare address, or the link of the
    /// deferred-drop stack, a real pointer. A pointer type so that the link
    /// keeps its provenance: no integer-to-pointer cast anywhere (Miri's
    /// strict provenance holds).
    meta: Cell<*mut Header>,
    vtable: &'static VTable,
}

/// An object: header, then value.
#[repr(C)]
pub(crate) struct GcBox<T: ?Sized> {
    header: Header,
    value: T,
}

impl Header {
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
        self.weak.get()
    }

    #[inline]
    pub(crate) fn inc_weak(&self) {
        let n = self.weak.get().wrapping_add(1);
        self.weak.set(n);
        if n == 0 {
            std::process::abort();
        }
    }

    /// Removes a weak reference and returns the remaining count.
    #[inline]
    pub(crate) fn dec_weak(&self) -> usize {
        let n = self.weak.get() - 1;
        self.weak.set(n);
        n
    }

    /// The `meta` word as flags and slot.
    #[inline]
    fn word(&self) -> usize {
        // A pointer-to-integer cast reads the address only.
        self.meta.get() as usize
    }

    #[inline]
    fn set_word(&self, word: usize) {
        // An address without provenance, never dereferenced.
        self.meta
            .set(ptr::null_mut::<u8>().wrapping_add(word).cast::<Header>())
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
        self.set_word(self.word() | flag)
    }

    #[inline]
    pub(crate) fn clear_flag(&self, flag: usize) {
        self.set_word(self.word() & !flag)
    }

    #[inline]
    pub(crate) fn slot(&self) -> usize {
        self.word() >> FLAG_BITS
    }

    #[inline]
    pub(crate) fn set_slot(&self, slot: usize) {
        self.set_word((slot << FLAG_BITS) | self.flags())
    }

    /// Sets the slot and a flag in one write.
    #[inline]
    pub(crate) fn set_slot_and_flag(&self, slot: usize, flag: usize) {
        self.set_word((slot << FLAG_BITS) | self.flags() | flag)
    }

    /// Whether the value is still there (not dropped by the collector).
    #[inline]
    pub(crate) fn is_alive(&self) -> bool {
        !self.has(DEAD)
    }

    #[inline]
    pub(crate) fn vtable(&self) -> &'static VTable {
        self.vtable
    }

    /// Uses `meta` as the link of an intrusive stack. Only for objects whose
    /// strong count is zero and that are in no buffer and no graph; their
    /// flags are meaningless until [`Header::take_link`] clears the field.
    #[inline]
    pub(crate) fn set_link(&self, next: Option<NonNull<Header>>) {
        self.meta.set(next.map_or(ptr::null_mut(), NonNull::as_ptr));
    }

    /// Reads and clears the link written by [`Header::set_link`].
    #[inline]
    pub(crate) fn take_link(&self) -> Option<NonNull<Header>> {
        NonNull::new(self.meta.replace(ptr::null_mut()))
    }
}

impl<T: Trace + 'static> GcBox<T> {
    const VTABLE: VTable = VTable {
        trace: trace_value::<T>,
        drop_value: drop_value::<T>,
        needs_drop: core::mem::needs_drop::<T>(),
        layout: Layout::new::<GcBox<T>>(),
    };

    /// Allocates an object holding `value` with one strong reference.
    pub(crate) fn allocate(value: T) -> NonNull<GcBox<T>> {
        let boxed = Box::new(GcBox {
            header: Header {
                strong: Cell::new(1),
                weak: Cell::new(1),
                meta: Cell::new(ptr::null_mut()),
                vtable: &Self::VTABLE,
            },
            value,
        });
        crate::collector::on_allocate();
        // SAFETY: `Box::into_raw` never returns null. The memory is released
        // by `deallocate` with the same layout (`Layout::new::<GcBox<T>>()`,
        // as `Box` uses) and the global allocator.
        unsafe { NonNull::new_unchecked(Box::into_raw(boxed)) }
    }

    /// Allocates an object whose value `init` builds, given a weak reference
    /// to the object itself, as `Rc::new_cyclic` does.
    pub(crate) fn allocate_cyclic(init: impl FnOnce(NonNull<Header>) -> T) -> NonNull<GcBox<T>> {
        let layout = Layout::new::<GcBox<T>>();
        // SAFETY: the layout has a non-zero size (it contains a header).
        let raw = unsafe { std::alloc::alloc(layout) } as *mut GcBox<T>;
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        // SAFETY: `ptr` is a fresh allocation for a `GcBox<T>`; writing the
        // header initialises it. Strong is zero while the value is built, so
        // upgrading the weak reference fails and nothing reads the value; weak
        // is one (the strong side's implicit reference) so the memory survives
        // the weak references `init` drops.
        unsafe {
            ptr::addr_of_mut!((*raw).header).write(Header {
                strong: Cell::new(0),
                weak: Cell::new(1),
                meta: Cell::new(ptr::null_mut()),
                vtable: &Self::VTABLE,
            });
        }
        let header = ptr.cast::<Header>();
        /// Releases the implicit weak reference if `init` panics.
        struct Unwind(NonNull<Header>);
        impl Drop for Unwind {
            fn drop(&mut self) {
                // SAFETY: the header is initialised and the memory is live
                // while the implicit weak reference is held; the value was
                // never written, so only the memory is released.
                unsafe { release_weak(self.0) }
            }
        }
        let guard = Unwind(header);
        let value = init(header);
        core::mem::forget(guard);
        // SAFETY: the allocation is live (implicit weak reference held) and
        // the value field is uninitialised; no reference to it exists.
        unsafe {
            ptr::addr_of_mut!((*raw).value).write(value);
            (*raw).header.strong.set(1);
        }
        crate::collector::on_allocate();
        ptr
    }
}

impl<T: ?Sized> GcBox<T> {
    /// The header of the object at `ptr`.
    ///
    /// # Safety
    /// `ptr` must point to a live allocation (weak count > 0).
    #[inline]
    pub(crate) unsafe fn header<'a>(ptr: NonNull<GcBox<T>>) -> &'a Header {
        // SAFETY: the caller guarantees the allocation is live; `header` is
        // the first field of a repr(C) struct and only accessed through `Cell`s.
        unsafe { &(*ptr.as_ptr()).header }
    }

    /// The value of the object at `ptr`.
    ///
    /// # Safety
    /// `ptr` must point to a live allocation whose value has not been dropped,
    /// and the value must outlive `'a` (a strong handle is held for `'a`).
    #[inline]
    pub(crate) unsafe fn value<'a>(ptr: NonNull<GcBox<T>>) -> &'a T {
        // SAFETY: guaranteed by the caller.
        unsafe { &(*ptr.as_ptr()).value }
    }

    /// The value of the object at `ptr`, mutably.
    ///
    /// # Safety
    /// As for [`GcBox::value`], and no other reference to the value may exist
    /// for `'a`.
    #[inline]
    pub(crate) unsafe fn value_mut<'a>(ptr: NonNull<GcBox<T>>) -> &'a mut T {
        // SAFETY: guaranteed by the caller.
        unsafe { &mut (*ptr.as_ptr()).value }
    }

    /// A raw pointer to the value, without touching it.
    #[inline]
    pub(crate) fn value_ptr(ptr: NonNull<GcBox<T>>) -> *const T {
        // SAFETY: computing a field address does not dereference.
        unsafe { ptr::addr_of!((*ptr.as_ptr()).value) }
    }
}

impl<T> GcBox<T> {
    /// Moves the value out of the object and marks it as taken.
    ///
    /// # Safety
    /// The value must be alive and the caller must own the only strong
    /// reference, which it gives up (the strong count is set to zero).
    pub(crate) unsafe fn take_value(ptr: NonNull<GcBox<T>>) -> T {
        // SAFETY: guaranteed by the caller; with strong = 0 nobody reads the
        // value again and `Weak::upgrade` fails.
        unsafe {
            (*ptr.as_ptr()).header.strong.set(0);
            ptr::read(ptr::addr_of!((*ptr.as_ptr()).value))
        }
    }
}

/// # Safety
/// `header` heads a `GcBox<T>` whose value is alive.
unsafe fn trace_value<T: Trace>(header: NonNull<Header>, tracer: &mut Tracer<'_>) {
    // SAFETY: guaranteed by the caller.
    let value = unsafe { &(*header.cast::<GcBox<T>>().as_ptr()).value };
    value.trace(tracer);
}

/// # Safety
/// `header` heads a `GcBox<T>` whose value is alive and unreferenced; it is
/// dropped exactly once.
unsafe fn drop_value<T>(header: NonNull<Header>) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        ptr::drop_in_place(ptr::addr_of_mut!(
            (*header.cast::<GcBox<T>>().as_ptr()).value
        ))
    }
}

/// Drops the value of an object whose last strong reference is gone.
///
/// # Safety
/// The object's strong count is zero, its value alive, and nothing else will
/// drop it.
#[inline]
pub(crate) unsafe fn drop_value_erased(header: NonNull<Header>) {
    // SAFETY: the header is live (the implicit weak reference is held) and the
    // caller guarantees the value may be dropped now.
    unsafe {
        let vt = header.as_ref().vtable;
        (vt.drop_value)(header)
    }
}

/// Reports the pointers of an object's value.
///
/// # Safety
/// The object is live and its value alive.
#[inline]
pub(crate) unsafe fn trace_erased(header: NonNull<Header>, tracer: &mut Tracer<'_>) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let vt = header.as_ref().vtable;
        (vt.trace)(header, tracer)
    }
}

/// Releases one weak reference and frees the memory if it was the last.
///
/// # Safety
/// The caller owns the weak reference (or the strong side's implicit one,
/// after the value is gone), and the value is dropped or was never written.
#[inline]
pub(crate) unsafe fn release_weak(header: NonNull<Header>) {
    // SAFETY: the memory is live while the caller's weak reference exists.
    let h = unsafe { header.as_ref() };
    if h.dec_weak() == 0 {
        let layout = h.vtable.layout;
        // SAFETY: no strong or weak reference remains, so nothing can reach
        // the memory; it was allocated by the global allocator with `layout`.
        unsafe { std::alloc::dealloc(header.as_ptr().cast(), layout) }
    }
}
