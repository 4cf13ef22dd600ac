//! Unsized values: `Gc<str>`, `Gc<[T]>` and `Gc<dyn Trait>` (and the same
//! for [`Rc`](crate::Rc) and the weak handles).
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

    /// Whether the value's (dynamic) type may own a collected pointer.
    /// `value` may be dropped: only its type is used.
    #[doc(hidden)]
    fn __candidate(value: &Self) -> bool;

    /// The collector's operations for the value's (dynamic) type.
    #[doc(hidden)]
    fn __vtable(value: &Self) -> &'static VTable;
}

// SAFETY: a sized type is its own dynamic type.
unsafe impl<T: Trace> Pointee for T {
    #[inline]
    fn __candidate(_: &Self) -> bool {
        T::MAY_CONTAIN_GC
    }

    #[inline]
    fn __vtable(_: &Self) -> &'static VTable {
        &Kind::<T>::VTABLE
    }
}

// SAFETY: candidate slices are allocated by `SliceKind::<T>` with their
// length in the extra header word that `__PREFIX_WORDS` accounts for.
unsafe impl<T: Trace> Pointee for [T] {
    const __PREFIX_WORDS: usize = 2;

    #[inline]
    fn __candidate(_: &Self) -> bool {
        T::MAY_CONTAIN_GC
    }

    #[inline]
    fn __vtable(_: &Self) -> &'static VTable {
        &SliceKind::<T>::VTABLE
    }
}

// SAFETY: a `str` owns no pointer: never a candidate, never traced.
unsafe impl Pointee for str {
    #[inline]
    fn __candidate(_: &Self) -> bool {
        false
    }

    fn __vtable(_: &Self) -> &'static VTable {
        // Never called: only candidates have an `Object`.
        &SliceKind::<u8>::VTABLE
    }
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
    fn __dyn_candidate(&self) -> bool;
    #[doc(hidden)]
    fn __dyn_vtable(&self) -> &'static VTable;
}

impl<T: Trace> DynTrace for T {
    #[inline]
    fn __dyn_trace(&self, tracer: &mut Tracer<'_>) {
        self.trace(tracer)
    }

    #[inline]
    fn __dyn_candidate(&self) -> bool {
        T::MAY_CONTAIN_GC
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

/// Declares `dyn Trait` (for a trait with [`DynTrace`] as a supertrait) as
/// something a [`Gc`](crate::Gc), [`Rc`](crate::Rc) or weak handle can point
/// to: implements [`Trace`] for it (tracing the concrete value),
/// [`Pointee`] and [`CoerceTarget`]. See the [module docs](crate::unsize).
#[macro_export]
macro_rules! dyn_trace {
    ($trait:path) => {
        // SAFETY: traces the concrete value through its own `Trace` impl.
        unsafe impl $crate::Trace for dyn $trait {
            const MAY_CONTAIN_GC: bool = true;
            fn trace(&self, tracer: &mut $crate::Tracer<'_>) {
                $crate::unsize::DynTrace::__dyn_trace(self, tracer)
            }
        }
        // SAFETY: both answers come from the concrete type, through the
        // trait object's vtable.
        unsafe impl $crate::unsize::Pointee for dyn $trait {
            fn __candidate(value: &Self) -> bool {
                $crate::unsize::DynTrace::__dyn_candidate(value)
            }
            fn __vtable(value: &Self) -> &'static $crate::unsize::VTable {
                $crate::unsize::DynTrace::__dyn_vtable(value)
            }
        }
        // SAFETY: the `Pointee` impl above forwards to `DynTrace`.
        unsafe impl $crate::unsize::CoerceTarget for dyn $trait {}
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
#[macro_export]
macro_rules! coerce {
    ($handle:expr => $target:ty) => {{
        // SAFETY: the closure is an `as` cast from a thin pointer to the
        // trait object `$target` (`CoerceTarget`), which can only be an
        // unsizing coercion of the same pointer.
        #[allow(unused_unsafe)]
        unsafe {
            $crate::unsize::Coerce::__coerce($handle, |value| value as *const $target)
        }
    }};
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
