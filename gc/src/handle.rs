//! The strong and weak handles shared by [`Gc`](crate::Gc) and
//! [`Rc`](crate::Rc). They differ only in what a decrement to a non-zero count
//! does: `Gc` may buffer the object as a possible cycle root, `Rc` never does.
//!
//! `COLLECT` selects the family: `Strong<T, true>` is a `Gc`, `Strong<T, false>`
//! an `Rc`.
//!
//! Invariants of a [`Strong`]: it owns one strong count of a live allocation
//! (so the header can always be read); the value may be dead (dropped by the
//! collector), which every access to the value checks.

use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::collector;
use crate::header::{GcBox, Header, BUFFERED, DEAD, IN_GRAPH};
use crate::trace::Trace;

/// Owns one strong count.
pub(crate) struct Strong<T: ?Sized + Trace, const COLLECT: bool> {
    ptr: NonNull<GcBox<T>>,
    _owns: PhantomData<GcBox<T>>,
}

/// Owns one weak count, or nothing (`Weak::new`, dangling).
pub(crate) struct WeakRef<T, const COLLECT: bool> {
    ptr: Option<NonNull<GcBox<T>>>,
}

impl<T: Trace + 'static, const COLLECT: bool> Strong<T, COLLECT> {
    pub(crate) fn new(value: T) -> Self {
        Strong::from_box(GcBox::allocate(value))
    }

    pub(crate) fn new_cyclic(init: impl FnOnce(&WeakRef<T, COLLECT>) -> T) -> Self {
        Strong::from_box(GcBox::allocate_cyclic(|header| {
            // SAFETY (of what follows): `allocate_cyclic` holds the implicit
            // weak count; this handle gets its own.
            let weak = WeakRef {
                ptr: Some(header.cast()),
            };
            // SAFETY: the header is initialised and live.
            unsafe { header.as_ref() }.inc_weak();
            init(&weak)
        }))
    }
}

impl<T: ?Sized + Trace, const COLLECT: bool> Strong<T, COLLECT> {
    fn from_box(ptr: NonNull<GcBox<T>>) -> Self {
        Strong {
            ptr,
            _owns: PhantomData,
        }
    }

    #[inline]
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: a strong handle keeps the allocation live.
        unsafe { GcBox::header(self.ptr) }
    }

    #[inline]
    pub(crate) fn header_ptr(&self) -> NonNull<Header> {
        self.ptr.cast()
    }

    /// The value, or `None` if the collector has dropped it.
    #[inline]
    pub(crate) fn try_get(&self) -> Option<&T> {
        if self.header().is_alive() {
            // SAFETY: the value is alive and this handle keeps it so for the
            // lifetime of `&self`: only the collector drops values of objects
            // with handles, and it never frees an object reachable from a
            // handle outside the heap (a `&self` borrow implies one).
            Some(unsafe { GcBox::value(self.ptr) })
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
        GcBox::value_ptr(self.ptr)
    }

    pub(crate) fn ptr_eq(&self, other: &Self) -> bool {
        core::ptr::addr_eq(self.ptr.as_ptr(), other.ptr.as_ptr())
    }

    pub(crate) fn strong_count(&self) -> usize {
        self.header().strong()
    }

    pub(crate) fn weak_count(&self) -> usize {
        // The strong side's implicit weak reference is not counted.
        self.header().weak() - 1
    }

    /// Whether this is the only handle of either kind.
    fn is_unique(&self) -> bool {
        let h = self.header();
        h.strong() == 1 && h.weak() == 1
    }

    pub(crate) fn get_mut(&mut self) -> Option<&mut T> {
        if !self.is_unique() || self.header().has(DEAD) {
            return None;
        }
        // A buffered root may be traced by a collection that starts while the
        // `&mut T` exists; take it out of the buffer first. Nothing can buffer
        // it again while this handle is borrowed: that needs another handle.
        collector::unbuffer(self.header_ptr());
        // SAFETY: this is the only handle (strong = 1, no weak), it is
        // borrowed mutably, the value is alive, and no collection can reach
        // the object (it is in no buffer and no other object points to it).
        Some(unsafe { GcBox::value_mut(self.ptr) })
    }

    pub(crate) fn downgrade(&self) -> WeakRef<T, COLLECT>
    where
        T: Sized,
    {
        self.header().inc_weak();
        WeakRef {
            ptr: Some(self.ptr),
        }
    }
}

impl<T: Trace, const COLLECT: bool> Strong<T, COLLECT> {
    pub(crate) fn try_unwrap(self) -> Result<T, Self> {
        let h = self.header();
        if h.strong() != 1 || h.has(DEAD) {
            return Err(self);
        }
        collector::unbuffer(self.header_ptr());
        let ptr = self.ptr;
        core::mem::forget(self);
        // SAFETY: the value is alive and this was the only strong handle; the
        // object is in no buffer, so nothing else reads the value.
        let value = unsafe { GcBox::take_value(ptr) };
        // SAFETY: strong is zero and the value was moved out.
        unsafe { collector::release_taken(ptr.cast()) };
        Ok(value)
    }
}

impl<T: ?Sized + Trace, const COLLECT: bool> Clone for Strong<T, COLLECT> {
    #[inline]
    fn clone(&self) -> Self {
        self.header().inc_strong();
        Strong::from_box(self.ptr)
    }
}

impl<T: ?Sized + Trace, const COLLECT: bool> Drop for Strong<T, COLLECT> {
    #[inline]
    fn drop(&mut self) {
        let header = self.header();
        let strong = header.strong() - 1;
        header.set_strong(strong);
        if strong == 0 {
            // SAFETY: this handle was the last strong reference.
            unsafe { collector::release(self.header_ptr()) };
        } else if COLLECT && T::MAY_CONTAIN_GC && header.flags() & (BUFFERED | DEAD | IN_GRAPH) == 0
        {
            // The first decrement to a non-zero count: a possible cycle root.
            collector::buffer(self.header_ptr());
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
        WeakRef { ptr: None }
    }

    pub(crate) fn upgrade(&self) -> Option<Strong<T, COLLECT>> {
        let h = self.header()?;
        if h.strong() == 0 || h.has(DEAD) {
            return None;
        }
        h.inc_strong();
        Some(Strong::from_box(self.ptr?))
    }

    pub(crate) fn strong_count(&self) -> usize {
        match self.header() {
            Some(h) if !h.has(DEAD) => h.strong(),
            _ => 0,
        }
    }

    pub(crate) fn weak_count(&self) -> usize {
        match self.header() {
            // Count the implicit reference only while strong handles exist.
            Some(h) if h.strong() > 0 => h.weak() - 1,
            Some(h) => h.weak(),
            None => 0,
        }
    }

    pub(crate) fn ptr_eq(&self, other: &Self) -> bool {
        self.ptr == other.ptr
    }

    pub(crate) fn as_ptr(&self) -> *const T {
        match self.ptr {
            Some(p) => GcBox::value_ptr(p),
            None => core::ptr::null(),
        }
    }
}

impl<T, const COLLECT: bool> WeakRef<T, COLLECT> {
    fn header(&self) -> Option<&Header> {
        // SAFETY: a weak handle keeps the allocation live.
        self.ptr.map(|p| unsafe { GcBox::header(p) })
    }
}

impl<T, const COLLECT: bool> Clone for WeakRef<T, COLLECT> {
    fn clone(&self) -> Self {
        if let Some(h) = self.header() {
            h.inc_weak();
        }
        WeakRef { ptr: self.ptr }
    }
}

impl<T, const COLLECT: bool> Drop for WeakRef<T, COLLECT> {
    fn drop(&mut self) {
        if let Some(p) = self.ptr {
            // SAFETY: this handle owns one weak count; the strong side holds
            // its own until the value is gone, so if this was the last one the
            // value is dropped and the memory may go.
            unsafe { crate::header::release_weak(p.cast()) }
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
            a.header().set_strong(usize::MAX - 1);
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
            a.header().set_strong(usize::MAX - 1);
            core::mem::forget(weak.upgrade().unwrap());
            assert_eq!(a.strong_count(), usize::MAX);
            reached();
            core::mem::forget(weak.upgrade());
        });
    }
}
