//! `sync::Gc` and its `Weak`.

use core::marker::PhantomData;
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
/// pointers must be a lock (`Mutex`/`RwLock` from `std` or `parking_lot`, or
/// a lock type of your own implementing [`TraceLock`](super::TraceLock):
/// async locks such as tokio's are not traced, see the
/// [module docs](super#on-tokio)).
///
/// `T` may be unsized: `Gc<str>`, `Gc<[T]>` and `Gc<dyn Trait + Send + Sync>`
/// (see the [module docs](super#unsized-values)).
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
///
/// `get_mut` requires `T: 'static` like `new`: through a handle whose type
/// was shortened (the handle is covariant), it could otherwise store a
/// borrow in a value that a later collection drops:
///
/// ```compile_fail,E0597
/// use recycler::sync::Gc;
/// static EMPTY: String = String::new();
/// #[derive(recycler::Trace)]
/// struct Reader<'a>(#[trace(skip)] &'a String);
/// let s = String::from("short-lived");
/// let mut r: Gc<Reader<'_>> = Gc::new(Reader(&EMPTY));
/// Gc::get_mut(&mut r).unwrap().0 = &s;
/// ```
pub struct Gc<T: ?Sized + Trace> {
    ptr: NonNull<Inner<T>>,
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: like `Arc<T>`: handles on several threads share `&T` (needs
// `Sync`) and the last one may drop `T` on any thread (needs `Send`).
unsafe impl<T: ?Sized + Trace + Send + Sync> Send for Gc<T> {}
// SAFETY: see `Send`.
unsafe impl<T: ?Sized + Trace + Send + Sync> Sync for Gc<T> {}

impl<T: ?Sized + Trace> Gc<T> {
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
}

impl<T: ?Sized + Trace> Drop for Gc<T> {
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

impl<T: ?Sized + Trace> core::ops::Deref for Gc<T> {
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

// SAFETY: a `Gc` owns exactly one strong reference, reported at most once.
// It is not reported when `T` cannot own pointers: such an object is never
// buffered or traced, can never be on a cycle and is freed by counting once
// its owners go. Leaving it out of the graph keeps the edge as an external
// reference in its count, which is always safe (reporting fewer pointers
// only makes the collector more conservative); the same as the
// single-threaded `Gc`.
unsafe impl<T: ?Sized + Trace> Trace for Gc<T> {
    #[inline]
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if T::MAY_CONTAIN_GC {
            tracer.edge(Family::Sync, self.ptr.cast());
        }
    }
}

/// A weak handle to a [`Gc`] object: does not keep it alive.
pub struct Weak<T: ?Sized + Trace> {
    /// `unsize::dangling()` for `Weak::new()`: a bare pointer rather than
    /// an `Option`, so that it can unsize (`CoerceUnsized`), as in `std`.
    ptr: NonNull<Inner<T>>,
    _owns: PhantomData<Inner<T>>,
}

super::shared::shared_pointer!(
    Gc,
    Weak,
    [?Sized + Trace],
    [Trace + Send + Sync + 'static],
    &VTables::<T>::GC
);
super::forward::forward_traits!(Gc, [?Sized + Trace], [Trace + Send + Sync + 'static]);
super::unsize::unsized_pointer!(
    Gc,
    Weak,
    [?Sized + Trace],
    [Trace + Send + Sync + 'static],
    GC
);
