//! Unsized values behind the thread-safe pointers: `sync::Gc<str>`,
//! `sync::Gc<[T]>`, `sync::Gc<dyn Trait + Send + Sync>`, the same for
//! `sync::Rc` and both `Weak`s (the user-facing design is the one of
//! [`crate::unsize`]: [`dyn_trace!`](crate::dyn_trace) declares the trait
//! object, [`coerce!`](crate::coerce) turns a handle into a trait-object
//! handle on stable, `CoerceUnsized` does it implicitly with the `nightly`
//! feature).
//!
//! Unlike the single-threaded header, the sync header names its object's
//! vtable, and the collector only ever uses that vtable (trace, drop, free):
//!
//! * A trait object is allocated as its concrete type `T`: its header names
//!   `T`'s vtable, and coercing a handle only attaches `dyn Trait`'s
//!   metadata to the same address ([`coerce_inner`]). Nothing the collector
//!   does depends on the handle's type.
//! * A slice (or the bytes of a `str`) has a vtable per element type, which
//!   reads the length from the word in front of the header:
//!
//!   ```text
//!   [ len: usize ][ Header ][ value: [T; len] ]
//!                 ^ the handle points here (as for every object)
//!   ```
//!
//!   so that dropping, tracing and freeing need only the header's address
//!   and never a reference to the (possibly dropped) value.
//!
//! A handle to an unsized value decides buffering and edge reporting from
//! the handle's type: `[T]` as `T` does, `str` never, and a trait object
//! declared with `dyn_trace!` always (conservatively: a leaf behind a
//! `dyn Trait` handle is buffered and traced like a candidate, which costs
//! time but is always safe; a type that reported fewer edges would only
//! make cycles leak).

use core::alloc::Layout;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use super::header::{Free, Header, Inner, VTable};
use crate::trace::{Trace, Tracer};

/// The same object as a `U`: `unsize` attaches `U`'s metadata for `T` (a
/// vtable, or an array's length) to the object's address.
///
/// # Safety
/// `unsize` returns its argument unsized to `U` (an `as` cast or an
/// unsizing coercion; it must not read through the pointer, which points to
/// the header, not to a `T`).
pub(crate) unsafe fn coerce_inner<T, U: ?Sized>(
    ptr: NonNull<Inner<T>>,
    unsize: impl FnOnce(*const T) -> *const U,
) -> NonNull<Inner<U>> {
    // `Inner<U>` with the metadata of `U` for `T` is laid out as `Inner<T>`:
    // the header, then the value at the offset that `T`'s alignment (which
    // the metadata records) gives.
    let fat = unsize(ptr.as_ptr().cast::<T>()) as *const Inner<U> as *mut Inner<U>;
    debug_assert!(ptr::addr_eq(fat, ptr.as_ptr()));
    // SAFETY: an unsizing cast keeps the address (non-null) and the
    // provenance of `ptr`.
    unsafe { NonNull::new_unchecked(fat) }
}

/// The address of `Weak::new()`'s handle: no allocation can have it (an
/// object is more than one byte long).
const DANGLING: usize = usize::MAX;

/// The pointer of `Weak::new()`'s handle, never dereferenced.
pub(crate) const fn dangling<T>() -> NonNull<Inner<T>> {
    // SAFETY: `DANGLING` is not null. The pointer has no provenance and is
    // only compared (`is_dangling`), never dereferenced.
    unsafe { NonNull::new_unchecked(ptr::null_mut::<u8>().wrapping_add(DANGLING).cast()) }
}

/// Whether a weak handle's pointer is [`dangling`] (possibly unsized since).
pub(crate) fn is_dangling<T: ?Sized>(ptr: NonNull<Inner<T>>) -> bool {
    ptr.as_ptr() as *const u8 as usize == DANGLING
}

/// The vtables of slice objects of `T` (allocated by [`from_vec`]).
pub(crate) struct SliceVTables<T>(PhantomData<T>);

impl<T: Trace> SliceVTables<T> {
    /// For `sync::Gc<[T]>`: traced by the collector.
    pub(crate) const GC: VTable = VTable {
        trace: trace_slice::<T>,
        drop_value: drop_slice::<T>,
        dealloc: dealloc_slice::<T>,
    };
}

impl<T> SliceVTables<T> {
    /// For `sync::Rc<[T]>`: never traced.
    pub(crate) const RC: VTable = VTable {
        trace: super::rc::no_trace,
        drop_value: drop_slice::<T>,
        dealloc: dealloc_slice::<T>,
    };
}

/// The layout of a slice allocation of `len` elements (the length word,
/// then `Inner<[T]>`) and the offset of the header in it; `None` if it
/// overflows `isize`.
fn slice_layout<T>(len: usize) -> Option<(Layout, usize)> {
    // `Inner<[T]>` is `repr(C)`: the header, then the elements.
    let (inner, _) = Layout::new::<Header>()
        .extend(Layout::array::<T>(len).ok()?)
        .ok()?;
    let (whole, offset) = Layout::new::<usize>().extend(inner.pad_to_align()).ok()?;
    Some((whole.pad_to_align(), offset))
}

/// The typed pointer of a slice object, its length read from the word in
/// front of the header.
///
/// # Safety
/// `header` heads a live slice object of `T` allocated by [`from_vec`] (or
/// [`from_str`]), with the provenance of the whole allocation.
#[inline]
unsafe fn typed_slice<T>(header: NonNull<Header>) -> *mut Inner<[T]> {
    // SAFETY: the length word is right in front of the header, inside the
    // allocation, and was written before the object was published.
    let len = unsafe { header.as_ptr().cast::<usize>().sub(1).read() };
    ptr::slice_from_raw_parts_mut(header.as_ptr().cast::<T>(), len) as *mut Inner<[T]>
}

/// Allocates a slice object of `len` elements, with one strong and one weak
/// reference and the elements uninitialised.
fn allocate_uninit<T>(len: usize, vtable: &'static VTable) -> NonNull<Inner<[T]>> {
    let Some((layout, offset)) = slice_layout::<T>(len) else {
        panic!("slice too large for a recycler::sync pointer");
    };
    // SAFETY: the layout has a non-zero size (it contains the header).
    let base = unsafe { std::alloc::alloc(layout) };
    if base.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `offset` is inside the allocation and aligned for the header
    // (and so for the length word in front of it, whose alignment `offset`
    // includes); a `*mut [T]` cast to `*mut Inner<[T]>` keeps its length,
    // the element count of the value field. The allocation is fresh, so the
    // writes race with nothing.
    unsafe {
        let header = base.add(offset);
        header.cast::<usize>().sub(1).write(len);
        let ptr = ptr::slice_from_raw_parts_mut(header.cast::<T>(), len) as *mut Inner<[T]>;
        ptr::addr_of_mut!((*ptr).header).write(Header::new(1, vtable));
        NonNull::new_unchecked(ptr)
    }
}

/// Moves the elements of `vec` into a new slice object with one strong
/// reference (the caller wraps it in a handle).
pub(crate) fn from_vec<T>(vec: Vec<T>, vtable: &'static VTable) -> NonNull<Inner<[T]>> {
    let ptr = allocate_uninit::<T>(vec.len(), vtable);
    // SAFETY: the value field has room for `vec.len()` elements and is fresh
    // memory.
    unsafe { crate::unsize::move_elements(vec, ptr::addr_of_mut!((*ptr.as_ptr()).value).cast()) };
    super::state::count_allocated();
    ptr
}

/// A new string object holding a copy of `s` (a slice object of `u8` as far
/// as the collector is concerned), with one strong reference.
pub(crate) fn from_str(s: &str, vtable: &'static VTable) -> NonNull<Inner<str>> {
    let ptr = allocate_uninit::<u8>(s.len(), vtable);
    // SAFETY: room for `s.len()` bytes, no overlap; `Inner<[u8]>` and
    // `Inner<str>` have the same layout and metadata, and the bytes are
    // UTF-8.
    unsafe {
        ptr::copy_nonoverlapping(
            s.as_ptr(),
            ptr::addr_of_mut!((*ptr.as_ptr()).value).cast::<u8>(),
            s.len(),
        );
        super::state::count_allocated();
        NonNull::new_unchecked(ptr.as_ptr() as *mut Inner<str>)
    }
}

/// `trace` of [`SliceVTables::GC`].
///
/// # Safety
/// `header` heads a live slice object of `T` that the caller holds.
unsafe fn trace_slice<T: Trace>(header: NonNull<Header>, tracer: &mut Tracer<'_>) {
    if T::MAY_CONTAIN_GC {
        // SAFETY: held, so the elements are alive and nobody has `&mut` to
        // them.
        let value = unsafe { &*(ptr::addr_of!((*typed_slice::<T>(header)).value) as *const [T]) };
        value.trace(tracer);
    }
}

/// `drop_value` of the slice vtables.
///
/// # Safety
/// As for `Inner::drop_value`: the elements are initialised and exclusively
/// the caller's; they are dropped exactly once.
unsafe fn drop_slice<T>(header: NonNull<Header>) {
    // SAFETY: guaranteed by the caller; no reference to the elements is
    // made before the drop.
    unsafe {
        let value = ptr::addr_of_mut!((*typed_slice::<T>(header)).value) as *mut [T];
        ptr::drop_in_place(value)
    }
}

/// `dealloc` of the slice vtables: the layout comes from the length word,
/// never from the (dropped) elements.
///
/// # Safety
/// As for `Inner::dealloc`: `header` heads a slice object of `T` allocated
/// by [`from_vec`] or [`from_str`] whose value is gone and which nothing
/// references any more.
unsafe fn dealloc_slice<T>(header: NonNull<Header>, free: Free) {
    // SAFETY: the length word is still there (only the elements are gone).
    let len = unsafe { header.as_ptr().cast::<usize>().sub(1).read() };
    // It was allocated with this layout.
    let (layout, offset) = slice_layout::<T>(len).unwrap_or_else(|| unreachable!());
    // SAFETY: the allocation starts `offset` bytes before the header, was
    // made by the global allocator with `layout`, and nothing references it
    // any more (the caller's contract).
    unsafe { free.release(header.cast::<u8>().sub(offset), layout) }
}

/// `unsized_pointer!(Strong, Weak, [base bounds], [element bounds], KIND)`:
/// coercions (`coerce!` and, with the `nightly` feature, `CoerceUnsized`)
/// and the constructors of slices and strings (`From<Vec<T>>` and
/// `From<&str>`, and the rest through `unsize::conversions!`), for the
/// pointer types of `shared_pointer!`. `KIND` names the [`SliceVTables`]
/// constant.
macro_rules! unsized_pointer {
    ($Strong:ident, $Weak:ident, [$($base:tt)*], [$($elem:tt)*], $KIND:ident) => {
        #[cfg(feature = "nightly")]
        impl<T, U> core::ops::CoerceUnsized<$Strong<U>> for $Strong<T>
        where
            T: $($base)* + core::marker::Unsize<U>,
            U: $($base)*,
        {
        }

        #[cfg(feature = "nightly")]
        impl<T, U> core::ops::CoerceUnsized<$Weak<U>> for $Weak<T>
        where
            T: $($base)* + core::marker::Unsize<U>,
            U: $($base)*,
        {
        }

        impl<T: $($base)*> $crate::unsize::Coerce for $Strong<T>
        where
            T: Sized,
        {
            type Value = T;
            type Output<U: ?Sized + $crate::unsize::CoerceTarget> = $Strong<U>;

            unsafe fn __coerce<U: ?Sized + $crate::unsize::CoerceTarget>(
                self,
                unsize: impl FnOnce(*const T) -> *const U,
            ) -> $Strong<U> {
                let this = core::mem::ManuallyDrop::new(self);
                $Strong {
                    // SAFETY: forwarded; the strong reference moves to the
                    // new handle.
                    ptr: unsafe { $crate::sync::unsize::coerce_inner(this.ptr, unsize) },
                    _owns: core::marker::PhantomData,
                }
            }
        }

        impl<T: $($base)*> $crate::unsize::Coerce for $Weak<T>
        where
            T: Sized,
        {
            type Value = T;
            type Output<U: ?Sized + $crate::unsize::CoerceTarget> = $Weak<U>;

            unsafe fn __coerce<U: ?Sized + $crate::unsize::CoerceTarget>(
                self,
                unsize: impl FnOnce(*const T) -> *const U,
            ) -> $Weak<U> {
                let this = core::mem::ManuallyDrop::new(self);
                $Weak {
                    // SAFETY: forwarded (`coerce_inner` only attaches the
                    // metadata, so the dangling pointer of `new()` stays
                    // dangling); the weak reference, if any, moves to the new
                    // handle.
                    ptr: unsafe { $crate::sync::unsize::coerce_inner(this.ptr, unsize) },
                    _owns: core::marker::PhantomData,
                }
            }
        }

        impl<T: $($elem)*> From<Vec<T>> for $Strong<[T]> {
            /// Moves the elements into a new object.
            fn from(vec: Vec<T>) -> Self {
                let vtable = &$crate::sync::unsize::SliceVTables::<T>::$KIND;
                $Strong::from_inner($crate::sync::unsize::from_vec(vec, vtable))
            }
        }

        impl From<&str> for $Strong<str> {
            fn from(s: &str) -> Self {
                let vtable = &$crate::sync::unsize::SliceVTables::<u8>::$KIND;
                $Strong::from_inner($crate::sync::unsize::from_str(s, vtable))
            }
        }

        $crate::unsize::conversions!($Strong, [$($elem)*]);
    };
}

pub(crate) use unsized_pointer;
