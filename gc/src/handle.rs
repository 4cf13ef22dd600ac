//! The strong and weak handles shared by [`Gc`](crate::Gc) and
//! [`Rc`](crate::Rc). They differ only in what a decrement to a non-zero count
//! does: `Gc` may buffer the object as a possible cycle root, `Rc` never does.
//!
//! `COLLECT` selects the family: `Strong<T, true>` is a `Gc`, `Strong<T, false>`
//! an `Rc`. Together with `T::MAY_CONTAIN_GC` it also selects the layout of
//! the object at compile time (see `header.rs`): only a candidate
//! (`Strong::candidate`) has a `meta` word, and only a candidate can be
//! buffered, traced or killed by the collector. Every access to `meta` is
//! behind that constant, so leaf handles compile to `std::rc`'s code.
//!
//! Invariants of a [`Strong`]: it owns one strong count of a live allocation
//! (so the counts can always be read); the value of a candidate may be dead
//! (dropped by the collector), which every access to the value checks.

use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::collector;
use crate::header::{
    self, Counts, Header, Kind, Object, RcBox, SliceKind, BUFFERED, DEAD, IN_GRAPH, OLD,
};
use crate::trace::Trace;
use crate::unsize::{CoerceTarget, Pointee};

/// Owns one strong count.
pub(crate) struct Strong<T: ?Sized + Pointee, const COLLECT: bool> {
    ptr: NonNull<RcBox<T>>,
    _owns: PhantomData<RcBox<T>>,
}

/// Owns one weak count, or nothing (`Weak::new`: a dangling pointer at
/// address `usize::MAX`, never dereferenced, which no allocation can have).
/// A bare pointer rather than an `Option` so that it can unsize
/// (`CoerceUnsized`), as `std::rc::Weak` does.
pub(crate) struct WeakRef<T: ?Sized + Pointee, const COLLECT: bool> {
    raw: NonNull<RcBox<T>>,
}

#[cfg(feature = "nightly")]
impl<T, U, const COLLECT: bool> core::ops::CoerceUnsized<WeakRef<U, COLLECT>>
    for WeakRef<T, COLLECT>
where
    T: ?Sized + Pointee + core::marker::Unsize<U>,
    U: ?Sized + CoerceTarget,
{
}

/// The address of `WeakRef::new()`.
const DANGLING: usize = usize::MAX;

#[cfg(feature = "nightly")]
impl<T, U, const COLLECT: bool> core::ops::CoerceUnsized<Strong<U, COLLECT>> for Strong<T, COLLECT>
where
    T: ?Sized + Pointee + core::marker::Unsize<U>,
    U: ?Sized + CoerceTarget,
{
}

/// The same pointer, unsized by `unsize` (see `unsize::Coerce`).
///
/// # Safety
/// `unsize` returns its argument unsized to `U`.
unsafe fn coerce_ptr<T: Trace, U: ?Sized + CoerceTarget>(
    ptr: NonNull<RcBox<T>>,
    unsize: impl FnOnce(*const T) -> *const U,
) -> NonNull<RcBox<U>> {
    let value = header::value_ptr(ptr);
    let unsized_value = unsize(value);
    debug_assert!(core::ptr::addr_eq(unsized_value, value));
    // The value's offset in the box; `RcBox<U>` puts it at the same place,
    // since the dynamic type of `U` is `T`.
    // SAFETY: both point into the same allocation.
    let offset = unsafe { value.byte_offset_from(ptr.as_ptr()) } as usize;
    let boxed = (unsized_value as *const RcBox<U>).wrapping_byte_sub(offset) as *mut RcBox<U>;
    // SAFETY: `boxed` is `ptr` (non-null) with `U`'s metadata, and keeps the
    // provenance of `ptr`, from which `value` was derived.
    unsafe { NonNull::new_unchecked(boxed) }
}

impl<T: Trace, const COLLECT: bool> Strong<T, COLLECT> {
    /// The same handle to `U` (see `unsize::Coerce`).
    ///
    /// # Safety
    /// `unsize` returns its argument unsized to `U`.
    pub(crate) unsafe fn coerce<U: ?Sized + CoerceTarget>(
        self,
        unsize: impl FnOnce(*const T) -> *const U,
    ) -> Strong<U, COLLECT> {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: forwarded; the strong count moves to the new handle.
        Strong::from_box(unsafe { coerce_ptr(this.ptr, unsize) })
    }
}

impl<T: Trace, const COLLECT: bool> WeakRef<T, COLLECT> {
    /// The same handle to `U` (see `unsize::Coerce`).
    ///
    /// # Safety
    /// `unsize` returns its argument unsized to `U`.
    pub(crate) unsafe fn coerce<U: ?Sized + CoerceTarget>(
        self,
        unsize: impl FnOnce(*const T) -> *const U,
    ) -> WeakRef<U, COLLECT> {
        let this = core::mem::ManuallyDrop::new(self);
        let raw = match this.ptr() {
            // SAFETY: forwarded; the weak count moves to the new handle.
            Some(p) => unsafe { coerce_ptr(p, unsize) },
            None => {
                // The same dangling address, with `U`'s metadata; `unsize`
                // only casts it.
                let value = unsize(this.raw.as_ptr() as *const T);
                // SAFETY: the address is `DANGLING`, not null.
                unsafe { NonNull::new_unchecked(value as *const RcBox<U> as *mut RcBox<U>) }
            }
        };
        WeakRef { raw }
    }
}

impl<T: Trace, const COLLECT: bool> Strong<[T], COLLECT> {
    /// A slice object holding the elements of `vec`.
    pub(crate) fn from_vec(vec: Vec<T>) -> Self {
        Strong::from_box(SliceKind::<T>::from_vec(COLLECT && T::MAY_CONTAIN_GC, vec))
    }
}

impl<const COLLECT: bool> Strong<str, COLLECT> {
    /// A string object holding a copy of `s`.
    pub(crate) fn from_str(s: &str) -> Self {
        Strong::from_box(SliceKind::<u8>::from_str(s))
    }
}

impl<T: Trace, const COLLECT: bool> Strong<T, COLLECT> {
    /// Whether objects of this (sized) type are candidates.
    const CANDIDATE: bool = Kind::<T>::has_meta(COLLECT);

    pub(crate) fn try_unwrap(self) -> Result<T, Self> {
        if self.counts().strong() != 1 || !self.is_alive() {
            return Err(self);
        }
        // As in `get_mut`: not while a collection may be tracing it.
        if Self::CANDIDATE && self.header().has(header::IN_GRAPH) {
            return Err(self);
        }
        let ptr = self.ptr;
        core::mem::forget(self);
        if Self::CANDIDATE {
            // SAFETY: the handle's strong count keeps the allocation live.
            let object = unsafe { header::object(ptr) };
            collector::unbuffer(object);
            // SAFETY: the value is alive and this was the only strong handle;
            // the object is in no buffer, so nothing else reads the value.
            let value = unsafe { header::take_value(ptr) };
            // SAFETY: strong is zero and the value was moved out.
            unsafe { collector::release_taken(object) };
            Ok(value)
        } else {
            // SAFETY: as above; a leaf is in no buffer.
            let value = unsafe { header::take_value(ptr) };
            collector::on_free_by_rc();
            // SAFETY: the value is gone; release the strong side's weak
            // reference.
            unsafe { header::release_weak(ptr, false) };
            Ok(value)
        }
    }
}

impl<T: Trace + 'static, const COLLECT: bool> Strong<T, COLLECT> {
    pub(crate) fn new(value: T) -> Self {
        Strong::from_box(Kind::<T>::allocate(Self::CANDIDATE, value))
    }

    pub(crate) fn new_cyclic(init: impl FnOnce(&WeakRef<T, COLLECT>) -> T) -> Self {
        Strong::from_box(Kind::<T>::allocate_cyclic(Self::CANDIDATE, |ptr| {
            // `allocate_cyclic` holds the implicit weak count; this handle
            // gets its own.
            // SAFETY: the counts are initialised and live.
            unsafe { header::counts(ptr) }.inc_weak(Self::CANDIDATE);
            let weak = WeakRef { raw: ptr };
            init(&weak)
        }))
    }
}

impl<T: ?Sized + Pointee, const COLLECT: bool> Strong<T, COLLECT> {
    /// Whether this object is a candidate (has `meta`). A constant for
    /// sized types, slices and `str`; a trait object asks its vtable.
    #[inline]
    pub(crate) fn candidate(&self) -> bool {
        // SAFETY: a strong handle keeps the allocation live.
        unsafe { header::is_candidate(self.ptr, COLLECT) }
    }

    fn from_box(ptr: NonNull<RcBox<T>>) -> Self {
        Strong {
            ptr,
            _owns: PhantomData,
        }
    }

    #[inline]
    fn counts(&self) -> &Counts {
        // SAFETY: a strong handle keeps the allocation live.
        unsafe { header::counts(self.ptr) }
    }

    /// The candidate header. Only for candidates.
    #[inline]
    fn header(&self) -> &Header {
        debug_assert!(self.candidate());
        // SAFETY: a strong handle keeps the allocation live, and candidates
        // have a header.
        unsafe { header::header(self.ptr) }
    }

    /// The collector's view of this candidate.
    #[inline]
    pub(crate) fn object(&self) -> Object {
        debug_assert!(self.candidate());
        // SAFETY: a strong handle keeps the allocation live.
        unsafe { header::object(self.ptr) }
    }

    /// Whether the value is alive: always for leaves, which the collector
    /// never touches.
    #[inline]
    fn is_alive(&self) -> bool {
        !self.candidate() || self.header().is_alive()
    }

    /// The value, or `None` if the collector has dropped it.
    #[inline]
    pub(crate) fn try_get(&self) -> Option<&T> {
        if self.is_alive() {
            // SAFETY: the value is alive and this handle keeps it so for the
            // lifetime of `&self`: only the collector drops values of objects
            // with handles, and it never frees an object reachable from a
            // handle outside the heap (a `&self` borrow implies one).
            Some(unsafe { header::value(self.ptr) })
        } else {
            None
        }
    }

    #[inline]
    pub(crate) fn get(&self) -> &T {
        match self.try_get() {
            Some(value) => value,
            None => dead(),
        }
    }

    pub(crate) fn as_ptr(&self) -> *const T {
        header::value_ptr(self.ptr)
    }

    pub(crate) fn ptr_eq(&self, other: &Self) -> bool {
        core::ptr::addr_eq(self.ptr.as_ptr(), other.ptr.as_ptr())
    }

    pub(crate) fn strong_count(&self) -> usize {
        self.counts().strong()
    }

    pub(crate) fn weak_count(&self) -> usize {
        // The strong side's implicit weak reference is not counted.
        self.counts().weak() - 1
    }

    /// Whether this is the only handle of either kind.
    fn is_unique(&self) -> bool {
        let c = self.counts();
        c.strong() == 1 && c.weak() == 1
    }

    pub(crate) fn get_mut(&mut self) -> Option<&mut T> {
        if !self.is_unique() || !self.is_alive() {
            return None;
        }
        // A collection reached the object through an edge (no count of its
        // own) and may be tracing it through `&T` right now: a `trace` can
        // reach its only handle through a thread-local (an outside review
        // found `&mut T` then, and a use after free).
        if self.candidate() && self.header().has(header::IN_GRAPH) {
            return None;
        }
        if self.candidate() {
            // A buffered root may be traced by a collection that starts while
            // the `&mut T` exists; take it out of the buffer first. Nothing
            // can buffer it again while this handle is borrowed: that needs
            // another handle.
            collector::unbuffer(self.object());
        }
        // SAFETY: this is the only handle (strong = 1, no weak), it is
        // borrowed mutably, the value is alive, and no collection can reach
        // the object (it is in no buffer and no other object points to it).
        Some(unsafe { header::value_mut(self.ptr) })
    }

    pub(crate) fn downgrade(&self) -> WeakRef<T, COLLECT> {
        self.counts().inc_weak(self.candidate());
        WeakRef { raw: self.ptr }
    }
}

impl<T: ?Sized + Pointee, const COLLECT: bool> Clone for Strong<T, COLLECT> {
    #[inline]
    fn clone(&self) -> Self {
        self.counts().inc_strong();
        Strong::from_box(self.ptr)
    }
}

impl<T: ?Sized + Pointee, const COLLECT: bool> Strong<T, COLLECT> {
    /// Whether the last handle frees the object inline: a leaf (it can never
    /// be a candidate) with nothing to drop, which cannot free anything else.
    const FREE_INLINE: bool =
        !core::mem::needs_drop::<T>() && !(COLLECT && T::MAY_CONTAIN_GC && T::__CANDIDATE);

    /// The last strong reference is gone: free the object, or hand it to the
    /// collector if it is flagged. Out of line, as `std::rc::Rc::drop_slow`:
    /// the decrement that calls it stays small enough to inline into every
    /// drop glue that owns a handle (an `Option<Gc<_>>` that is `None` then
    /// costs a test, not a call).
    ///
    /// # Safety
    /// The strong count is zero and this handle gave up the last strong
    /// reference; it is not used again.
    #[inline(never)]
    unsafe fn drop_slow(&mut self) {
        let candidate = self.candidate();
        if candidate && self.header().flags() & (BUFFERED | OLD | DEAD | IN_GRAPH) != 0 {
            // Buffered, old, dead, or in a collection's graph (a `Trace`
            // that dropped a handle its value owns: the collector leaks the
            // object rather than free it under the graph): the collector's
            // bookkeeping first.
            // SAFETY: this handle was the last strong reference.
            unsafe { collector::release(self.object()) };
        } else {
            collector::on_free_by_rc();
            if core::mem::needs_drop::<T>() {
                // SAFETY: strong is zero, the value alive (not DEAD) and
                // this handle was the last strong reference; the object
                // is in no buffer (not BUFFERED) and no graph (not
                // IN_GRAPH; a leaf is never in either).
                unsafe { crate::drop_queue::free_typed(self.ptr, candidate) }
            } else {
                // SAFETY: nothing to drop; release the strong side's weak
                // reference.
                unsafe { header::release_weak(self.ptr, candidate) }
            }
        }
    }
}

impl<T: ?Sized + Pointee, const COLLECT: bool> Drop for Strong<T, COLLECT> {
    #[inline]
    fn drop(&mut self) {
        let counts = self.counts();
        let strong = counts.strong() - 1;
        counts.set_strong(strong);
        if strong == 0 {
            if Self::FREE_INLINE {
                // A leaf with nothing to drop cannot free anything else:
                // freed here, inline (a `Gc<u64>` costs less than
                // `std::rc`'s out-of-line `drop_slow`).
                collector::on_free_by_rc();
                // SAFETY: strong is zero and there is no value to drop;
                // release the strong side's weak reference.
                unsafe { header::release_weak(self.ptr, false) }
            } else {
                // SAFETY: this handle held the last strong reference.
                unsafe { self.drop_slow() }
            }
        } else if self.candidate() && self.header().flags() & (BUFFERED | DEAD | IN_GRAPH) == 0 {
            // The first decrement to a non-zero count: a possible cycle root.
            collector::buffer(self.object());
        }
    }
}

/// Panics for a dereference of a collected object.
#[cold]
#[inline(never)]
#[track_caller]
fn dead() -> ! {
    panic!("dereferenced a Gc whose object was freed by the cycle collector")
}

impl<T: Trace, const COLLECT: bool> WeakRef<T, COLLECT> {
    pub(crate) const fn new() -> Self {
        // SAFETY: `DANGLING` is not null; the pointer is never dereferenced.
        let raw = unsafe {
            NonNull::new_unchecked(core::ptr::null_mut::<u8>().wrapping_add(DANGLING).cast())
        };
        WeakRef { raw }
    }
}

impl<T: ?Sized + Pointee, const COLLECT: bool> WeakRef<T, COLLECT> {
    /// The object, or `None` for `WeakRef::new()`.
    #[inline]
    fn ptr(&self) -> Option<NonNull<RcBox<T>>> {
        (self.raw.as_ptr() as *const u8 as usize != DANGLING).then_some(self.raw)
    }

    /// Whether the collector dropped the value (only candidates).
    fn is_dead(&self, ptr: NonNull<RcBox<T>>) -> bool {
        // SAFETY: a weak handle keeps the allocation live; only candidates'
        // headers are read.
        unsafe { header::is_candidate(ptr, COLLECT) && header::header(ptr).has(DEAD) }
    }

    pub(crate) fn upgrade(&self) -> Option<Strong<T, COLLECT>> {
        let ptr = self.ptr()?;
        // SAFETY: a weak handle keeps the allocation live.
        let c = unsafe { header::counts(ptr) };
        if c.strong() == 0 || self.is_dead(ptr) {
            return None;
        }
        c.inc_strong();
        Some(Strong::from_box(ptr))
    }

    pub(crate) fn strong_count(&self) -> usize {
        match self.ptr() {
            Some(ptr) if !self.is_dead(ptr) => {
                // SAFETY: a weak handle keeps the allocation live.
                unsafe { header::counts(ptr) }.strong()
            }
            _ => 0,
        }
    }

    /// As `std::rc::Weak::weak_count`: 0 once no strong handle remains,
    /// dropped by counting or collected (`strong_count` is then 0, also
    /// while a destructor keeps a dead handle).
    pub(crate) fn weak_count(&self) -> usize {
        match self.ptr() {
            // Less the strong side's implicit weak reference.
            // SAFETY: a weak handle keeps the allocation live.
            Some(ptr) if self.strong_count() > 0 => unsafe { header::counts(ptr) }.weak() - 1,
            _ => 0,
        }
    }

    pub(crate) fn ptr_eq(&self, other: &Self) -> bool {
        match (self.ptr(), other.ptr()) {
            (Some(a), Some(b)) => core::ptr::addr_eq(a.as_ptr(), b.as_ptr()),
            (a, b) => a.is_none() && b.is_none(),
        }
    }

    pub(crate) fn as_ptr(&self) -> Option<*const T> {
        self.ptr().map(header::value_ptr)
    }
}

impl<T: ?Sized + Pointee, const COLLECT: bool> Clone for WeakRef<T, COLLECT> {
    fn clone(&self) -> Self {
        if let Some(p) = self.ptr() {
            // SAFETY: a weak handle keeps the allocation live.
            unsafe { header::counts(p).inc_weak(header::is_candidate(p, COLLECT)) }
        }
        WeakRef { raw: self.raw }
    }
}

impl<T: ?Sized + Pointee, const COLLECT: bool> Drop for WeakRef<T, COLLECT> {
    fn drop(&mut self) {
        if let Some(p) = self.ptr() {
            // SAFETY: this handle owns one weak count; the strong side holds
            // its own until the value is gone, so if this was the last one the
            // value is dropped and the memory may go.
            unsafe { header::release_weak(p, header::is_candidate(p, COLLECT)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Strong, WeakRef};
    use crate::test_support::{assert_aborts, reached};

    /// Every strong increment (clone, upgrade) aborts when the count would
    /// wrap, as `std::rc` does. The count starts near the top (`set_strong`):
    /// `usize::MAX` real increments would take centuries.
    #[test]
    #[cfg_attr(miri, ignore = "spawns a process")]
    fn clone_aborts_on_overflow() {
        assert_aborts("handle::tests::clone_aborts_on_overflow", || {
            let a = Strong::<u8, true>::new(1);
            a.counts().set_strong(usize::MAX - 1);
            core::mem::forget(a.clone()); // reaches usize::MAX: fine
            assert_eq!(a.strong_count(), usize::MAX);
            reached();
            core::mem::forget(a.clone());
        });
    }

    #[test]
    #[cfg_attr(miri, ignore = "spawns a process")]
    fn upgrade_aborts_on_overflow() {
        assert_aborts("handle::tests::upgrade_aborts_on_overflow", || {
            let a = Strong::<u8, false>::new(1);
            let weak: WeakRef<u8, false> = a.downgrade();
            a.counts().set_strong(usize::MAX - 1);
            core::mem::forget(weak.upgrade().unwrap());
            assert_eq!(a.strong_count(), usize::MAX);
            reached();
            core::mem::forget(weak.upgrade());
        });
    }
}
