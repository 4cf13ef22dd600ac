//! `sync::Gc` and its `Weak`.

use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ptr::NonNull;

use super::header::{Header, Inner, VTable};
use super::state::{self, Entry};
use crate::trace::{Family, Trace, Tracer};

/// The vtables of `Inner<T>`.
pub(crate) struct VTables<T>(PhantomData<T>);

impl<T: Trace> VTables<T> {
    /// For `sync::Gc<T>`: traced by the collector.
    pub(crate) const GC: VTable = VTable {
        trace: trace_value::<T>,
        drop_value: Inner::<T>::drop_value,
        dealloc: Inner::<T>::dealloc,
    };
}

/// `trace` of the vtable.
///
/// # Safety
/// `header` heads a live `Inner<T>` that the caller holds.
unsafe fn trace_value<T: Trace>(header: NonNull<Header>, tracer: &mut Tracer<'_>) {
    if T::MAY_CONTAIN_GC {
        // SAFETY: held, so the value is alive and nobody has `&mut` to it.
        let value: &T = unsafe { &*(*header.cast::<Inner<T>>().as_ptr()).value.get() };
        value.trace(tracer);
    }
}

/// A thread-safe reference-counted pointer whose cycles are collected.
///
/// Clone and drop are one atomic read-modify-write on one header word, as
/// with [`std::sync::Arc`]; dereferencing touches no atomic; the pointer is
/// one word. Values must be `Send + Sync + 'static` because the collector
/// may trace and drop them on any thread. Interior mutability that can hold
/// pointers must be a lock (`Mutex`/`RwLock` from `std` or `parking_lot`).
///
/// ```
/// use recycler::sync::{collect, Gc};
/// use std::sync::Mutex;
///
/// #[derive(recycler::Trace)]
/// struct Node {
///     next: Mutex<Option<Gc<Node>>>,
/// }
///
/// let a = Gc::new(Node { next: Mutex::new(None) });
/// let b = Gc::new(Node { next: Mutex::new(Some(a.clone())) });
/// *a.next.lock().unwrap() = Some(b.clone());
/// let weak = Gc::downgrade(&a);
/// drop((a, b));
/// collect();
/// assert!(weak.upgrade().is_none());
/// ```
pub struct Gc<T: Trace> {
    ptr: NonNull<Inner<T>>,
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: like `Arc<T>`: handles on several threads share `&T` (needs
// `Sync`) and the last one may drop `T` on any thread (needs `Send`).
unsafe impl<T: Trace + Send + Sync> Send for Gc<T> {}
// SAFETY: see `Send`.
unsafe impl<T: Trace + Send + Sync> Sync for Gc<T> {}

impl<T: Trace + Send + Sync + 'static> Gc<T> {
    /// Allocates `value` with a strong count of one.
    pub fn new(value: T) -> Self {
        state::count_allocated();
        Gc::from_inner(Inner::allocate(value, 1, &VTables::<T>::GC))
    }

    /// Allocates a value built by `f`, which receives a [`Weak`] to the
    /// object being built (its `upgrade` returns `None` until `f` returns).
    pub fn new_cyclic(f: impl FnOnce(&Weak<T>) -> T) -> Self {
        let ptr = Inner::<MaybeUninit<T>>::allocate(MaybeUninit::uninit(), 0, &VTables::<T>::GC)
            .cast::<Inner<T>>();
        // Owns the initial weak reference; if `f` panics it frees the memory.
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
        Gc::from_inner(ptr)
    }
}

impl<T: Trace> Gc<T> {
    fn from_inner(ptr: NonNull<Inner<T>>) -> Self {
        Gc {
            ptr,
            _owns: PhantomData,
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: a strong handle keeps the header alive.
        unsafe { &self.ptr.as_ref().header }
    }

    /// The value, or `None` if the collector has collected its cycle (only
    /// possible for a handle that a destructor of that cycle stored away).
    #[inline]
    pub fn try_deref(this: &Self) -> Option<&T> {
        // SAFETY: the dead flag is written only while no other thread can
        // reach the object, and that write happens-before any use of a
        // handle obtained afterwards (module docs).
        if unsafe { this.header().dead.get() } {
            return None;
        }
        // SAFETY: alive: the value is initialised and only shared.
        Some(unsafe { &*this.ptr.as_ref().value.get() })
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

    /// The number of strong handles (a running collection's transient hold
    /// may be included).
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
            // SAFETY: unique: no other handle, no weak, and the buffer entry
            // (if any) is disarmed, so no collector can reach the value.
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

impl<T: Trace> Clone for Gc<T> {
    #[inline]
    fn clone(&self) -> Self {
        self.header().inc_strong();
        Gc::from_inner(self.ptr)
    }
}

impl<T: Trace> Drop for Gc<T> {
    #[inline]
    fn drop(&mut self) {
        let header = self.ptr.cast::<Header>();
        if T::MAY_CONTAIN_GC {
            // SAFETY: we own one strong reference.
            if unsafe { Header::dec_strong_buffering(header) } {
                state::push_root(Entry(header));
            }
        } else {
            // SAFETY: we own one strong reference.
            unsafe { Header::dec_strong(header) };
        }
    }
}

impl<T: Trace> core::ops::Deref for Gc<T> {
    type Target = T;

    /// # Panics
    /// If the collector has collected this object's cycle.
    #[inline]
    fn deref(&self) -> &T {
        match Gc::try_deref(self) {
            Some(value) => value,
            None => dead(),
        }
    }
}

#[cold]
#[inline(never)]
fn dead() -> ! {
    panic!("dereferenced a recycler::sync::Gc whose cycle was collected")
}

// SAFETY: a `Gc` owns exactly one strong reference, reported once.
unsafe impl<T: Trace> Trace for Gc<T> {
    #[inline]
    fn trace(&self, tracer: &mut Tracer<'_>) {
        tracer.edge(Family::Sync, self.ptr.cast());
    }
}

/// A weak handle to a [`Gc`] object: does not keep it alive.
pub struct Weak<T: Trace> {
    ptr: Option<NonNull<Inner<T>>>,
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: as for `Gc`.
unsafe impl<T: Trace + Send + Sync> Send for Weak<T> {}
// SAFETY: as for `Gc`.
unsafe impl<T: Trace + Send + Sync> Sync for Weak<T> {}

impl<T: Trace> Weak<T> {
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

    /// A strong handle, unless the object was dropped or collected.
    pub fn upgrade(&self) -> Option<Gc<T>> {
        let ptr = self.ptr?;
        self.header()?.upgrade().then(|| Gc::from_inner(ptr))
    }

    /// Whether both point to the same object (two `Weak::new()` are equal).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }

    /// Strong handles of the object (0 once dropped or collected).
    pub fn strong_count(&self) -> usize {
        self.header().map_or(0, |h| {
            let word = h.word.load(core::sync::atomic::Ordering::Acquire);
            if word & super::header::DOOMED != 0 {
                0
            } else {
                super::header::count(word) as usize
            }
        })
    }

    /// Weak handles of the object (0 once it has no strong handle).
    pub fn weak_count(&self) -> usize {
        self.header().map_or(0, Header::weak_handles)
    }
}

impl<T: Trace> Default for Weak<T> {
    fn default() -> Self {
        Weak::new()
    }
}

impl<T: Trace> Clone for Weak<T> {
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

impl<T: Trace> Drop for Weak<T> {
    fn drop(&mut self) {
        if let Some(ptr) = self.ptr {
            // SAFETY: we own one weak reference.
            unsafe { Header::release_weak(ptr.cast()) };
        }
    }
}

impl<T: Trace> core::fmt::Debug for Weak<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("(Weak)")
    }
}

// SAFETY: a weak handle owns no strong reference: nothing to report.
unsafe impl<T: Trace> Trace for Weak<T> {
    const MAY_CONTAIN_GC: bool = false;
    fn trace(&self, _: &mut Tracer<'_>) {}
}

super::forward::forward_traits!(Gc, [Trace], [Trace + Send + Sync + 'static]);
