//! The public pointer types, generated once for both families so that `Gc`
//! and `Rc` cannot drift apart: same header, same API, same trait impls; they
//! differ in `COLLECT` (whether a decrement may buffer a cycle root) and in
//! what their `Trace` impl reports.

/// Defines a strong pointer type, its weak type and their trait impls.
macro_rules! define_pointer {
    (
        $(#[$strong_meta:meta])*
        strong $Strong:ident;
        $(#[$weak_meta:meta])*
        weak $Weak:ident;
        collect = $collect:literal;
    ) => {
        $(#[$strong_meta])*
        pub struct $Strong<T: ?Sized + Pointee> {
            inner: Strong<T, $collect>,
        }

        $(#[$weak_meta])*
        pub struct $Weak<T: ?Sized + Pointee> {
            inner: WeakRef<T, $collect>,
        }

        #[cfg(feature = "nightly")]
        impl<T, U> core::ops::CoerceUnsized<$Strong<U>> for $Strong<T>
        where
            T: ?Sized + Pointee + core::marker::Unsize<U>,
            U: ?Sized + $crate::unsize::CoerceTarget,
        {
        }

        #[cfg(feature = "nightly")]
        impl<T, U> core::ops::CoerceUnsized<$Weak<U>> for $Weak<T>
        where
            T: ?Sized + Pointee + core::marker::Unsize<U>,
            U: ?Sized + $crate::unsize::CoerceTarget,
        {
        }

        impl<T: Trace> $crate::unsize::Coerce for $Strong<T> {
            type Value = T;
            type Output<U: ?Sized + $crate::unsize::CoerceTarget> = $Strong<U>;

            unsafe fn __coerce<U: ?Sized + $crate::unsize::CoerceTarget>(
                self,
                unsize: impl FnOnce(*const T) -> *const U,
            ) -> $Strong<U> {
                // SAFETY: forwarded.
                $Strong { inner: unsafe { self.inner.coerce(unsize) } }
            }
        }

        impl<T: Trace> $crate::unsize::Coerce for $Weak<T> {
            type Value = T;
            type Output<U: ?Sized + $crate::unsize::CoerceTarget> = $Weak<U>;

            unsafe fn __coerce<U: ?Sized + $crate::unsize::CoerceTarget>(
                self,
                unsize: impl FnOnce(*const T) -> *const U,
            ) -> $Weak<U> {
                // SAFETY: forwarded.
                $Weak { inner: unsafe { self.inner.coerce(unsize) } }
            }
        }

        impl<T: Trace + 'static> From<Vec<T>> for $Strong<[T]> {
            /// Moves the elements into a new object.
            fn from(vec: Vec<T>) -> Self {
                $Strong { inner: Strong::from_vec(vec) }
            }
        }

        impl From<&str> for $Strong<str> {
            fn from(s: &str) -> Self {
                $Strong { inner: Strong::from_str(s) }
            }
        }

        $crate::unsize::conversions!($Strong, [Trace + 'static]);

        impl<T: Trace + 'static> $Strong<T> {
            /// Allocates `value` with a strong count of one.
            #[inline]
            pub fn new(value: T) -> Self {
                $Strong { inner: Strong::new(value) }
            }

            /// Allocates a value that holds a weak reference to itself, built
            /// by `init`. Upgrading that reference inside `init` returns `None`.
            pub fn new_cyclic(init: impl FnOnce(&$Weak<T>) -> T) -> Self {
                $Strong {
                    inner: Strong::new_cyclic(|weak| init(&$Weak { inner: weak.clone() })),
                }
            }
        }

        impl<T: ?Sized + Pointee> $Strong<T> {
            /// The value, or `None` if the cycle collector has freed it (a
            /// handle that a destructor kept to a member of a garbage cycle).
            #[inline]
            pub fn try_deref(this: &Self) -> Option<&T> {
                this.inner.try_get()
            }

            /// Whether two handles point to the same object.
            #[inline]
            pub fn ptr_eq(this: &Self, other: &Self) -> bool {
                this.inner.ptr_eq(&other.inner)
            }

            /// The number of strong handles.
            #[inline]
            pub fn strong_count(this: &Self) -> usize {
                this.inner.strong_count()
            }

            /// The number of weak handles.
            #[inline]
            pub fn weak_count(this: &Self) -> usize {
                this.inner.weak_count()
            }

            /// A mutable reference to the value if this is the only handle
            /// (strong or weak) and the value is alive.
            ///
            /// Requires `T: 'static`, as `new` does: the handle is covariant,
            /// so without the bound a `&mut` to a value built as `'static`
            /// could store a shorter borrow in it, and the value may be
            /// dropped after that borrow ends (drops queued by an enclosing
            /// drop, or a collection).
            #[inline]
            pub fn get_mut(this: &mut Self) -> Option<&mut T>
            where
                T: 'static,
            {
                this.inner.get_mut()
            }

            /// A raw pointer to the value (valid while a handle exists).
            #[inline]
            pub fn as_ptr(this: &Self) -> *const T {
                this.inner.as_ptr()
            }
        }

        impl<T: ?Sized + Pointee> $Strong<T> {
            /// A weak handle to the same object.
            #[inline]
            pub fn downgrade(this: &Self) -> $Weak<T> {
                $Weak { inner: this.inner.downgrade() }
            }
        }

        impl<T: Trace> $Strong<T> {
            /// The value, if this is the only strong handle and the value is
            /// alive; otherwise the handle back. Weak handles then fail to
            /// upgrade.
            pub fn try_unwrap(this: Self) -> Result<T, Self> {
                this.inner.try_unwrap().map_err(|inner| $Strong { inner })
            }
        }

        impl<T: ?Sized + Pointee> Clone for $Strong<T> {
            #[inline]
            fn clone(&self) -> Self {
                $Strong { inner: self.inner.clone() }
            }
        }

        impl<T: ?Sized + Pointee> core::ops::Deref for $Strong<T> {
            type Target = T;

            /// # Panics
            /// If the cycle collector has freed the object (see `try_deref`).
            #[inline]
            fn deref(&self) -> &T {
                self.inner.get()
            }
        }

        impl<T: ?Sized + Pointee> core::borrow::Borrow<T> for $Strong<T> {
            fn borrow(&self) -> &T {
                self
            }
        }

        impl<T: ?Sized + Pointee> AsRef<T> for $Strong<T> {
            fn as_ref(&self) -> &T {
                self
            }
        }

        impl<T: ?Sized + Pointee + core::fmt::Debug> core::fmt::Debug for $Strong<T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.inner.try_get() {
                    Some(value) => core::fmt::Debug::fmt(value, f),
                    None => f.write_str("(collected)"),
                }
            }
        }

        impl<T: ?Sized + Pointee + core::fmt::Display> core::fmt::Display for $Strong<T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Display::fmt(&**self, f)
            }
        }

        impl<T: ?Sized + Pointee> core::fmt::Pointer for $Strong<T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Pointer::fmt(&Self::as_ptr(self), f)
            }
        }

        impl<T: ?Sized + Pointee + PartialEq> PartialEq for $Strong<T> {
            #[inline]
            fn eq(&self, other: &Self) -> bool {
                **self == **other
            }
        }

        impl<T: ?Sized + Pointee + Eq> Eq for $Strong<T> {}

        impl<T: ?Sized + Pointee + PartialOrd> PartialOrd for $Strong<T> {
            fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
                (**self).partial_cmp(&**other)
            }
        }

        impl<T: ?Sized + Pointee + Ord> Ord for $Strong<T> {
            fn cmp(&self, other: &Self) -> core::cmp::Ordering {
                (**self).cmp(&**other)
            }
        }

        impl<T: ?Sized + Pointee + core::hash::Hash> core::hash::Hash for $Strong<T> {
            fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
                (**self).hash(state)
            }
        }

        impl<T: Trace + Default + 'static> Default for $Strong<T> {
            fn default() -> Self {
                $Strong::new(T::default())
            }
        }

        impl<T: Trace + 'static> From<T> for $Strong<T> {
            fn from(value: T) -> Self {
                $Strong::new(value)
            }
        }

        impl<T: Trace> $Weak<T> {
            /// A weak handle to nothing: `upgrade` always returns `None`.
            pub const fn new() -> Self {
                $Weak { inner: WeakRef::new() }
            }

            /// A raw pointer to the value's place (null for `Weak::new()`).
            pub fn as_ptr(&self) -> *const T {
                self.inner.as_ptr().unwrap_or(core::ptr::null())
            }
        }

        impl<T: ?Sized + Pointee> $Weak<T> {
            /// A strong handle, if the object's value is still alive.
            #[inline]
            pub fn upgrade(&self) -> Option<$Strong<T>> {
                self.inner.upgrade().map(|inner| $Strong { inner })
            }

            /// Whether two weak handles point to the same object (or both to
            /// nothing).
            pub fn ptr_eq(&self, other: &Self) -> bool {
                self.inner.ptr_eq(&other.inner)
            }

            /// The number of strong handles (0 once the value is gone).
            pub fn strong_count(&self) -> usize {
                self.inner.strong_count()
            }

            /// The number of weak handles, 0 once no strong handle remains
            /// (the value dropped or collected, as `strong_count` says), as
            /// `std::rc::Weak::weak_count`; 0 for `Weak::new()`.
            pub fn weak_count(&self) -> usize {
                self.inner.weak_count()
            }
        }

        impl<T: ?Sized + Pointee> Clone for $Weak<T> {
            fn clone(&self) -> Self {
                $Weak { inner: self.inner.clone() }
            }
        }

        impl<T: Trace> Default for $Weak<T> {
            fn default() -> Self {
                $Weak::new()
            }
        }

        impl<T: ?Sized + Pointee> core::fmt::Debug for $Weak<T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str("(Weak)")
            }
        }

        // SAFETY: a weak handle owns no strong reference: nothing to report.
        unsafe impl<T: ?Sized + Pointee> Trace for $Weak<T> {
            const MAY_CONTAIN_GC: bool = false;
            fn trace(&self, _: &mut Tracer<'_>) {}
        }
    };
}

pub(crate) use define_pointer;
