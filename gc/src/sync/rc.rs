//! `sync::Rc`: thread-safe plain reference counting that never collects
//! (the "ARC" baseline; cycles leak), with its own [`Weak`].
//!
//! It shares the header and the memory protocol of [`sync::Gc`](super::Gc)
//! but is never buffered, traced or doomed, so it behaves exactly like
//! [`std::sync::Arc`] (plus the statistics and iterative drops).

use core::marker::PhantomData;
use core::ptr::NonNull;

use super::header::{Header, Inner, VTable};
use crate::trace::{Trace, Tracer};

struct VTables<T>(PhantomData<T>);

impl<T> VTables<T> {
    const RC: VTable = VTable {
        trace: no_trace,
        drop_value: Inner::<T>::drop_value,
        dealloc: Inner::<T>::dealloc,
    };
}

/// `trace` of the `Rc` vtable: never called by a collector (never buffered,
/// never reported as an edge).
///
/// # Safety
/// None needed; it does nothing.
pub(super) unsafe fn no_trace(_: NonNull<Header>, _: &mut Tracer<'_>) {}

/// A thread-safe reference-counted pointer that never collects cycles.
///
/// `T` may be unsized (`Rc<str>`, `Rc<[T]>`, `Rc<dyn Trait + Send + Sync>`,
/// see the [module docs](super#unsized-values)).
///
/// ```
/// use recycler::sync::Rc;
/// let a = Rc::new(5);
/// let b = a.clone();
/// assert_eq!(Rc::strong_count(&a), 2);
/// drop(b);
/// assert_eq!(Rc::try_unwrap(a).ok(), Some(5));
/// ```
///
/// Unlike `Arc`, it requires `T: 'static` (in `new`, `new_cyclic` and
/// `get_mut`): a value whose last handle is dropped inside another value's
/// drop is dropped after it (iteratively), when what it borrowed may be gone.
/// An outside review's program, a use after free before the bound:
///
/// ```compile_fail,E0597
/// struct Reader<'a>(&'a String);
/// impl Drop for Reader<'_> {
///     fn drop(&mut self) {
///         println!("{}", self.0.len());
///     }
/// }
/// struct Outer;
/// impl Drop for Outer {
///     fn drop(&mut self) {
///         let s = String::from("a string on the heap");
///         drop(recycler::sync::Rc::new(Reader(&s))); // would run after `s` is freed
///     }
/// }
/// drop(recycler::sync::Rc::new(Outer));
/// ```
///
/// Nor can `get_mut` store a borrow through a handle whose type was
/// shortened (the handle is covariant, like `Arc`):
///
/// ```compile_fail,E0597
/// static EMPTY: String = String::new();
/// struct Reader<'a>(&'a String);
/// let s = String::from("short-lived");
/// let mut r: recycler::sync::Rc<Reader<'_>> = recycler::sync::Rc::new(Reader(&EMPTY));
/// recycler::sync::Rc::get_mut(&mut r).unwrap().0 = &s;
/// ```
pub struct Rc<T: ?Sized> {
    ptr: NonNull<Inner<T>>,
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: like `Arc<T>`.
unsafe impl<T: ?Sized + Send + Sync> Send for Rc<T> {}
// SAFETY: like `Arc<T>`.
unsafe impl<T: ?Sized + Send + Sync> Sync for Rc<T> {}

impl<T: ?Sized> Rc<T> {
    /// Always `Some`: an `Rc` is never collected (API parity with `Gc`).
    #[inline]
    pub fn try_deref(this: &Self) -> Option<&T> {
        Some(this)
    }
}

impl<T: ?Sized> Drop for Rc<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own one strong reference.
        unsafe { Header::dec_strong(self.ptr.cast()) };
    }
}

impl<T: ?Sized> core::ops::Deref for Rc<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: an `Rc` is never collected: while a handle exists the
        // value is initialised, and it is only shared.
        unsafe { &*self.ptr.as_ref().value.get() }
    }
}

// SAFETY: an `Rc` is not a collected pointer; its contents are shared, not
// owned by the value holding the `Rc`, so nothing may be reported.
unsafe impl<T: ?Sized> Trace for Rc<T> {
    const MAY_CONTAIN_GC: bool = false;
    fn trace(&self, _: &mut Tracer<'_>) {}
}

/// A weak handle to an [`Rc`] object.
pub struct Weak<T: ?Sized> {
    /// `unsize::dangling()` for `Weak::new()`: a bare pointer rather than
    /// an `Option`, so that it can unsize (`CoerceUnsized`), as in `std`.
    ptr: NonNull<Inner<T>>,
    _owns: PhantomData<Inner<T>>,
}

// `'static` on the constructors: a value whose count reaches zero inside
// another drop is dropped later (iteratively, see `drops.rs`), possibly after
// whatever a non-`'static` value borrows is gone.
super::shared::shared_pointer!(Rc, Weak, [?Sized], [Sized + 'static], &VTables::<T>::RC);

super::forward::forward_traits!(Rc, [?Sized], [Sized + 'static]);
super::unsize::unsized_pointer!(Rc, Weak, [?Sized], ['static], RC);
