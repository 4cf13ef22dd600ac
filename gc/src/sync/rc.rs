//! `sync::Rc`: thread-safe plain reference counting that never collects
//! (the "ARC" baseline; cycles leak), with its own [`Weak`].
//!
//! It shares the header and the memory protocol of [`sync::Gc`](super::Gc)
//! but is never buffered, traced or doomed, so it behaves exactly like
//! [`std::sync::Arc`] (plus the statistics and iterative drops).

use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ptr::NonNull;

use super::header::{Header, Inner, VTable};
use super::state;
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
unsafe fn no_trace(_: NonNull<Header>, _: &mut Tracer<'_>) {}

/// A thread-safe reference-counted pointer that never collects cycles.
///
/// ```
/// use recycler::sync::Rc;
/// let a = Rc::new(5);
/// let b = a.clone();
/// assert_eq!(Rc::strong_count(&a), 2);
/// drop(b);
/// assert_eq!(Rc::try_unwrap(a).ok(), Some(5));
/// ```
pub struct Rc<T> {
    ptr: NonNull<Inner<T>>,
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: like `Arc<T>`.
unsafe impl<T: Send + Sync> Send for Rc<T> {}
// SAFETY: like `Arc<T>`.
unsafe impl<T: Send + Sync> Sync for Rc<T> {}

impl<T> Rc<T> {
    /// Allocates `value` with a strong count of one.
    pub fn new(value: T) -> Self {
        state::count_allocated();
        Rc::from_inner(Inner::allocate(value, 1, &VTables::<T>::RC))
    }

    /// Allocates a value built by `f`, which receives a [`Weak`] to the
    /// object being built (its `upgrade` returns `None` until `f` returns).
    pub fn new_cyclic(f: impl FnOnce(&Weak<T>) -> T) -> Self {
        let ptr = Inner::<MaybeUninit<T>>::allocate(MaybeUninit::uninit(), 0, &VTables::<T>::RC)
            .cast::<Inner<T>>();
        let weak = Weak {
            ptr: Some(ptr),
            _owns: PhantomData,
        };
        let value = f(&weak);
        // SAFETY: the value slot is uninitialised and unreachable (count 0).
        unsafe { (*ptr.as_ptr()).value.get().write(ManuallyDrop::new(value)) };
        // SAFETY: the header was just initialised.
        unsafe { ptr.as_ref() }.header.init_strong();
        core::mem::forget(weak);
        state::count_allocated();
        Rc::from_inner(ptr)
    }

    fn from_inner(ptr: NonNull<Inner<T>>) -> Self {
        Rc {
            ptr,
            _owns: PhantomData,
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: a strong handle keeps the header alive.
        unsafe { &self.ptr.as_ref().header }
    }

    /// Always `Some`: an `Rc` is never collected (API parity with `Gc`).
    #[inline]
    pub fn try_deref(this: &Self) -> Option<&T> {
        Some(this)
    }

    /// Whether both handles point to the same object.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }

    /// A raw pointer to the value.
    pub fn as_ptr(this: &Self) -> *const T {
        // SAFETY: the allocation is alive; no reference is created.
        unsafe { (*this.ptr.as_ptr()).value.get().cast::<T>() }
    }

    /// The number of strong handles.
    pub fn strong_count(this: &Self) -> usize {
        this.header().strong()
    }

    /// The number of [`Weak`] handles.
    pub fn weak_count(this: &Self) -> usize {
        this.header().weak_handles()
    }

    /// A new weak handle.
    pub fn downgrade(this: &Self) -> Weak<T> {
        this.header().inc_weak();
        Weak {
            ptr: Some(this.ptr),
            _owns: PhantomData,
        }
    }

    /// Mutable access if this is the only handle and no `Weak` exists.
    pub fn get_mut(this: &mut Self) -> Option<&mut T> {
        if this.header().claim_unique() {
            // SAFETY: no other strong or weak handle exists.
            Some(unsafe { &mut *(*this.ptr.as_ptr()).value.get() })
        } else {
            None
        }
    }

    /// The value, if this is the only strong handle; otherwise the handle.
    pub fn try_unwrap(this: Self) -> Result<T, Self> {
        let Some(old) = this.header().take_unique() else {
            return Err(this);
        };
        let ptr = this.ptr;
        core::mem::forget(this);
        // SAFETY: we moved the count from one to zero, so the value is ours.
        let value = unsafe { ManuallyDrop::take(&mut *(*ptr.as_ptr()).value.get()) };
        state::count_freed_by_rc();
        // SAFETY: the value is gone and we performed the transition to zero.
        unsafe { Header::finish_value(ptr.cast(), old) };
        Ok(value)
    }
}

impl<T> Clone for Rc<T> {
    #[inline]
    fn clone(&self) -> Self {
        self.header().inc_strong();
        Rc::from_inner(self.ptr)
    }
}

impl<T> Drop for Rc<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own one strong reference.
        unsafe { Header::dec_strong(self.ptr.cast()) };
    }
}

impl<T> core::ops::Deref for Rc<T> {
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
unsafe impl<T> Trace for Rc<T> {
    const MAY_CONTAIN_GC: bool = false;
    fn trace(&self, _: &mut Tracer<'_>) {}
}

/// A weak handle to an [`Rc`] object.
pub struct Weak<T> {
    ptr: Option<NonNull<Inner<T>>>,
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: like `std::sync::Weak<T>`.
unsafe impl<T: Send + Sync> Send for Weak<T> {}
// SAFETY: like `std::sync::Weak<T>`.
unsafe impl<T: Send + Sync> Sync for Weak<T> {}

impl<T> Weak<T> {
    /// A weak handle that never upgrades.
    pub const fn new() -> Self {
        Weak {
            ptr: None,
            _owns: PhantomData,
        }
    }

    fn header(&self) -> Option<&Header> {
        // SAFETY: a weak handle keeps the header alive.
        self.ptr.map(|ptr| unsafe { &(*ptr.as_ptr()).header })
    }

    /// A strong handle, unless the object was dropped.
    pub fn upgrade(&self) -> Option<Rc<T>> {
        let ptr = self.ptr?;
        self.header()?.upgrade().then(|| Rc::from_inner(ptr))
    }

    /// Whether both point to the same object.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }

    /// Strong handles of the object.
    pub fn strong_count(&self) -> usize {
        self.header().map_or(0, Header::strong)
    }

    /// Weak handles of the object (0 once it has no strong handle).
    pub fn weak_count(&self) -> usize {
        self.header().map_or(0, Header::weak_handles)
    }
}

impl<T> Default for Weak<T> {
    fn default() -> Self {
        Weak::new()
    }
}

impl<T> Clone for Weak<T> {
    fn clone(&self) -> Self {
        if let Some(h) = self.header() {
            h.inc_weak();
        }
        Weak {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T> Drop for Weak<T> {
    fn drop(&mut self) {
        if let Some(ptr) = self.ptr {
            // SAFETY: we own one weak reference.
            unsafe { Header::release_weak(ptr.cast()) };
        }
    }
}

impl<T> core::fmt::Debug for Weak<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("(Weak)")
    }
}

// SAFETY: owns no collected pointer.
unsafe impl<T> Trace for Weak<T> {
    const MAY_CONTAIN_GC: bool = false;
    fn trace(&self, _: &mut Tracer<'_>) {}
}

super::forward::forward_traits!(Rc, [Sized], [Sized]);
