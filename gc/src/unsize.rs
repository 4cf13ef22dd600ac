//! Unsized values: `Gc<str>`, `Gc<[T]>` and `Gc<dyn Trait>` (and the same
//! for [`Rc`](crate::Rc) and the weak handles). The thread-safe pointers
//! have them too, with the same constructors and macros, as
//! `sync::Gc<dyn Trait + Send + Sync>` (see the
//! [`sync` docs](crate::sync#unsized-values)).
//!
//! * `str` and `[T]`: built with `From<&str>`, `From<String>`,
//!   `From<Box<str>>`, `From<Vec<T>>`, `From<&[T]>` (`T: Clone`),
//!   `From<Box<[T]>>` or `FromIterator`. A `Gc<[T]>` whose `T` may own
//!   pointers is a cycle candidate like any other.
//! * Trait objects. [`Trace`] has an associated constant, so it cannot be a
//!   supertrait of a trait used as `dyn Trait` (Rust rejects traits with
//!   associated constants as trait objects). Make [`DynTrace`] the
//!   supertrait instead (every `Trace` type implements it) and declare the
//!   trait object with [`dyn_trace!`](crate::dyn_trace). A handle is turned
//!   into a trait-object handle with [`coerce!`](crate::coerce) on stable,
//!   or implicitly (`let s: Gc<dyn Shape> = gc;`) with the `nightly`
//!   feature (`CoerceUnsized`).
//!
//! ```
//! use std::cell::RefCell;
//! use recycler::{coerce, dyn_trace, unsize::DynTrace, Gc, Trace};
//!
//! trait Shape: DynTrace {
//!     fn area(&self) -> f64;
//! }
//! dyn_trace!(Shape);
//!
//! #[derive(Trace)]
//! struct Square(f64);
//! impl Shape for Square {
//!     fn area(&self) -> f64 { self.0 * self.0 }
//! }
//!
//! // A shape that points to other shapes (and so may be on a cycle).
//! #[derive(Trace)]
//! struct Group(RefCell<Vec<Gc<dyn Shape>>>);
//! impl Shape for Group {
//!     fn area(&self) -> f64 { self.0.borrow().iter().map(|s| s.area()).sum() }
//! }
//!
//! let square: Gc<dyn Shape> = coerce!(Gc::new(Square(2.0)) => dyn Shape);
//! let group = Gc::new(Group(RefCell::new(vec![square])));
//! assert_eq!(group.area(), 4.0);
//!
//! let names: Gc<[String]> = ["a", "b"].iter().map(|s| s.to_string()).collect();
//! let text: Gc<str> = Gc::from("hello");
//! assert_eq!((names.len(), &*text), (2, "hello"));
//! ```
//!
//! How the collector handles them: a candidate's header names no type (see
//! `header.rs`); the collector gets the per-type [`VTable`] from the typed
//! handle that reports or buffers the object, through [`Pointee`]. For a
//! sized type it is a static; for a trait object, the concrete type's
//! static, found through the trait object's own vtable ([`DynTrace`]); for
//! a slice, a static per element type, with the length stored in the
//! object's header.

use core::alloc::Layout;

pub use crate::header::VTable;
use crate::header::{Kind, SliceKind};
use crate::trace::{Trace, Tracer};

/// What a [`Gc`](crate::Gc) or [`Rc`](crate::Rc) can point to: every sized
/// [`Trace`] type, `str`, `[T]`, and trait objects declared with
/// [`dyn_trace!`](crate::dyn_trace).
///
/// # Safety
/// Implemented by this crate and by [`dyn_trace!`](crate::dyn_trace) only:
/// the methods must describe the object's real type.
pub unsafe trait Pointee: Trace {
    /// Words of header a candidate has in front of its counts.
    #[doc(hidden)]
    const __PREFIX_WORDS: usize = 1;

    /// Whether an object of this type may be a candidate (for a trait
    /// object, whether some implementor may be).
    #[doc(hidden)]
    const __CANDIDATE: bool;

    /// Whether candidacy depends on the dynamic type (trait objects): then
    /// the object records it at allocation.
    #[doc(hidden)]
    const __DYNAMIC: bool = false;

    /// The collector's operations for the value's (dynamic) type.
    ///
    /// # Safety
    /// `value` points into a live allocation; the value is alive or
    /// completely dropped, never in the middle of its drop.
    #[doc(hidden)]
    unsafe fn __vtable(value: *const Self) -> &'static VTable;

    /// The value's layout, without a reference to it for sized types,
    /// slices and `str` (their value may be uninitialised or dropped).
    ///
    /// # Safety
    /// As for [`Pointee::__vtable`]; for a trait object, the value is alive
    /// or completely dropped.
    #[doc(hidden)]
    unsafe fn __layout(value: *const Self) -> Layout;

    /// The layout of the whole allocation and the offset of the counts in
    /// it (constants for sized types).
    ///
    /// # Safety
    /// As for [`Pointee::__layout`].
    #[doc(hidden)]
    #[inline]
    unsafe fn __box_layout(value: *const Self, has_meta: bool) -> (Layout, usize) {
        // SAFETY: forwarded.
        let layout = unsafe { Self::__layout(value) };
        crate::header::box_layout(layout, has_meta, Self::__PREFIX_WORDS)
    }
}

// SAFETY: a sized type is its own dynamic type.
unsafe impl<T: Trace> Pointee for T {
    const __CANDIDATE: bool = T::MAY_CONTAIN_GC;

    #[inline]
    unsafe fn __vtable(_: *const Self) -> &'static VTable {
        &Kind::<T>::VTABLE
    }

    #[inline]
    unsafe fn __layout(_: *const Self) -> Layout {
        Layout::new::<T>()
    }

    #[inline]
    unsafe fn __box_layout(_: *const Self, has_meta: bool) -> (Layout, usize) {
        Kind::<T>::layout_of(has_meta)
    }
}

// SAFETY: candidate slices are allocated by `SliceKind::<T>` with their
// length in the extra header word that `__PREFIX_WORDS` accounts for.
unsafe impl<T: Trace> Pointee for [T] {
    const __PREFIX_WORDS: usize = 2;
    const __CANDIDATE: bool = T::MAY_CONTAIN_GC;

    #[inline]
    unsafe fn __vtable(_: *const Self) -> &'static VTable {
        &SliceKind::<T>::VTABLE
    }

    #[inline]
    unsafe fn __layout(value: *const Self) -> Layout {
        // The allocation that holds it had this layout: it cannot overflow.
        Layout::array::<T>(value.len()).unwrap_or_else(|_| unreachable!())
    }
}

// SAFETY: a `str` owns no pointer: never a candidate, never traced.
unsafe impl Pointee for str {
    const __CANDIDATE: bool = false;

    unsafe fn __vtable(_: *const Self) -> &'static VTable {
        // Never called: only candidates have an `Object`.
        &SliceKind::<u8>::VTABLE
    }

    #[inline]
    unsafe fn __layout(value: *const Self) -> Layout {
        // SAFETY: forwarded (a `str` is laid out as its bytes).
        unsafe { <[u8] as Pointee>::__layout(value as *const [u8]) }
    }
}

/// The concrete type's operations, through a trait object's vtable (for
/// [`dyn_trace!`](crate::dyn_trace)).
///
/// # Safety
/// As for [`Pointee::__vtable`].
#[doc(hidden)]
#[inline]
pub unsafe fn __dyn_vtable<U: ?Sized + DynTrace>(value: *const U) -> &'static VTable {
    // SAFETY: the value is alive or completely dropped, and no `&mut` to it
    // exists (not in the middle of its drop); only the vtable is used.
    unsafe { (*value).__dyn_vtable() }
}

mod sealed {
    /// Keeps [`super::DynTrace`] implemented by `Trace` types only.
    pub trait Sealed {}
    impl<T: crate::Trace> Sealed for T {}
}

/// The supertrait of traits whose trait objects a `Gc` or `Rc` can hold:
/// implemented by every sized [`Trace`] type. Declare the trait object with
/// [`dyn_trace!`](crate::dyn_trace).
pub trait DynTrace: sealed::Sealed {
    #[doc(hidden)]
    fn __dyn_trace(&self, tracer: &mut Tracer<'_>);
    #[doc(hidden)]
    fn __dyn_vtable(&self) -> &'static VTable;
}

impl<T: Trace> DynTrace for T {
    #[inline]
    fn __dyn_trace(&self, tracer: &mut Tracer<'_>) {
        self.trace(tracer)
    }

    #[inline]
    fn __dyn_vtable(&self) -> &'static VTable {
        &Kind::<T>::VTABLE
    }
}

/// Trait objects that a handle to a sized value can be coerced to (with
/// [`coerce!`](crate::coerce), or implicitly with the `nightly` feature).
/// Implemented by [`dyn_trace!`](crate::dyn_trace).
///
/// # Safety
/// Only for trait objects whose [`Pointee`] impl forwards to [`DynTrace`].
pub unsafe trait CoerceTarget: Pointee {}

/// Declares `dyn Trait` and `dyn Trait + Send + Sync` (for a trait with
/// [`DynTrace`] as a supertrait) as something a [`Gc`](crate::Gc),
/// [`Rc`](crate::Rc), weak handle, or [`sync`](crate::sync) pointer (with
/// `+ Send + Sync`) can point to: implements [`Trace`] for both (tracing the
/// concrete value), [`Pointee`] and [`CoerceTarget`]. See the
/// [module docs](crate::unsize).
#[macro_export]
macro_rules! dyn_trace {
    ($trait:path) => {
        $crate::dyn_trace!(@object dyn $trait);
        $crate::dyn_trace!(@object dyn $trait + ::core::marker::Send + ::core::marker::Sync);
    };
    (@object $object:ty) => {
        // SAFETY: traces the concrete value through its own `Trace` impl.
        unsafe impl $crate::Trace for $object {
            const MAY_CONTAIN_GC: bool = true;
            fn trace(&self, tracer: &mut $crate::Tracer<'_>) {
                $crate::unsize::DynTrace::__dyn_trace(self, tracer)
            }
        }
        // SAFETY: candidacy is read from the object, the operations come
        // from the concrete type through the trait object's vtable.
        unsafe impl $crate::unsize::Pointee for $object {
            const __CANDIDATE: bool = true;
            const __DYNAMIC: bool = true;
            #[allow(unsafe_code)]
            unsafe fn __vtable(value: *const Self) -> &'static $crate::unsize::VTable {
                // SAFETY: forwarded.
                unsafe { $crate::unsize::__dyn_vtable(value) }
            }
            #[allow(unsafe_code)]
            unsafe fn __layout(value: *const Self) -> ::core::alloc::Layout {
                // SAFETY: forwarded: the value is alive or completely
                // dropped; only the vtable is read.
                ::core::alloc::Layout::for_value(unsafe { &*value })
            }
        }
        // SAFETY: the `Pointee` impl above forwards to `DynTrace`.
        unsafe impl $crate::unsize::CoerceTarget for $object {}
    };
}

/// Turns a handle (`Gc`, `Rc` or a weak handle) to a sized value into a
/// handle to a trait object declared with [`dyn_trace!`](crate::dyn_trace):
/// `coerce!(handle => dyn Trait)`. The counts are shared: it is the same
/// object.
///
/// ```
/// use recycler::{coerce, dyn_trace, unsize::DynTrace, Rc, Trace};
///
/// trait Named: DynTrace { fn name(&self) -> String; }
/// dyn_trace!(Named);
///
/// #[derive(Trace)]
/// struct Cat;
/// impl Named for Cat { fn name(&self) -> String { "cat".into() } }
///
/// let cat = Rc::new(Cat);
/// let named: Rc<dyn Named> = coerce!(cat.clone() => dyn Named);
/// assert_eq!(named.name(), "cat");
/// assert_eq!(Rc::strong_count(&cat), 2);
/// ```
///
/// Only coercions to such trait objects compile:
///
/// ```compile_fail
/// let x = recycler::Gc::new(1u32);
/// let y = recycler::coerce!(x => u64);
/// ```
///
/// The handle expression is evaluated outside the macro's own `unsafe`
/// block, so an unsafe operation in it still needs one of its own:
///
/// ```compile_fail,E0133
/// use recycler::{coerce, dyn_trace, unsize::DynTrace, Gc, Trace};
///
/// trait Named: DynTrace {}
/// dyn_trace!(Named);
/// #[derive(Trace)]
/// struct Cat;
/// impl Named for Cat {}
///
/// let dangling = 16 as *const Gc<Cat>;
/// let named: Gc<dyn Named> = coerce!(std::ptr::read(dangling) => dyn Named);
/// ```
#[macro_export]
macro_rules! coerce {
    ($handle:expr => $target:ty) => {{
        // Both user-written parts, the handle and the target type, are
        // outside the `unsafe` block below.
        let handle = $handle;
        let unsize = $crate::unsize::__unsizer(&handle, |value| value as *const $target);
        // SAFETY: `unsize` is an `as` cast from a thin pointer to the trait
        // object `$target` (`CoerceTarget`), which can only be an unsizing
        // coercion of the same pointer.
        #[allow(unused_unsafe)]
        unsafe {
            $crate::unsize::Coerce::__coerce(handle, unsize)
        }
    }};
}

/// Gives [`coerce!`](crate::coerce)'s cast its argument type (the handle's
/// value type) before the `unsafe` call, so that the cast and the handle
/// can be written outside the `unsafe` block.
#[doc(hidden)]
#[inline(always)]
pub fn __unsizer<H: Coerce, U: ?Sized + CoerceTarget>(
    _: &H,
    unsize: impl FnOnce(*const H::Value) -> *const U,
) -> impl FnOnce(*const H::Value) -> *const U {
    unsize
}

/// The handles that [`coerce!`](crate::coerce) works on.
pub trait Coerce: Sized {
    /// The sized type pointed to.
    #[doc(hidden)]
    type Value;
    /// The same kind of handle, to `U`.
    #[doc(hidden)]
    type Output<U: ?Sized + CoerceTarget>;

    /// # Safety
    /// `unsize` must return its argument unsized to `U` (an `as` cast).
    #[doc(hidden)]
    unsafe fn __coerce<U: ?Sized + CoerceTarget>(
        self,
        unsize: impl FnOnce(*const Self::Value) -> *const U,
    ) -> Self::Output<U>;
}

/// Moves the elements of `vec` to `dst` and frees the vector's buffer.
///
/// # Safety
/// `dst` is valid for writing `vec.len()` elements and does not overlap the
/// vector's buffer.
pub(crate) unsafe fn move_elements<T>(vec: Vec<T>, dst: *mut T) {
    let mut vec = core::mem::ManuallyDrop::new(vec);
    // SAFETY: guaranteed by the caller. The elements are moved: the vector
    // is then freed with a length of zero, so they are not dropped twice.
    unsafe {
        core::ptr::copy_nonoverlapping(vec.as_ptr(), dst, vec.len());
        vec.set_len(0);
        core::mem::ManuallyDrop::drop(&mut vec);
    }
}

/// `conversions!(Strong, [element bounds])`: the conversions into handles
/// of every pointer type (single-threaded and [`sync`](crate::sync)) that
/// follow from its `From<Vec<T>>`, `From<&str>` and `new`.
macro_rules! conversions {
    ($Strong:ident, [$($elem:tt)*]) => {
        impl<T: $($elem)* + Clone> From<&[T]> for $Strong<[T]> {
            /// Clones the elements into a new object.
            fn from(slice: &[T]) -> Self {
                $Strong::from(slice.to_vec())
            }
        }

        impl<T: $($elem)*> From<Box<[T]>> for $Strong<[T]> {
            fn from(slice: Box<[T]>) -> Self {
                $Strong::from(slice.into_vec())
            }
        }

        impl<T: $($elem)*> FromIterator<T> for $Strong<[T]> {
            fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
                $Strong::from(iter.into_iter().collect::<Vec<T>>())
            }
        }

        impl From<String> for $Strong<str> {
            fn from(s: String) -> Self {
                $Strong::from(s.as_str())
            }
        }

        impl From<Box<str>> for $Strong<str> {
            fn from(s: Box<str>) -> Self {
                $Strong::from(&*s)
            }
        }

        impl<T: $($elem)*> From<Box<T>> for $Strong<T> {
            /// Moves the value out of the box into a new object.
            fn from(value: Box<T>) -> Self {
                $Strong::new(*value)
            }
        }
    };
}

pub(crate) use conversions;
