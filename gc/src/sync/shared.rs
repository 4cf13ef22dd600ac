//! The constructors, accessors and weak type that `sync::Gc` and `sync::Rc`
//! share, written once. The two differ in their vtable (traced or not),
//! in `try_deref` (a `Gc` can be dead) and in `Drop` (a `Gc` buffers).

/// `shared_pointer!(Strong, Weak, [base bounds], [constructor bounds], vtable)`
/// for `struct Strong<T> { ptr: NonNull<Inner<T>>, _owns }` and
/// `struct Weak<T> { ptr: NonNull<Inner<T>>, _owns }` (whose `ptr` is
/// [`dangling`](super::unsize::dangling) for `Weak::new()`).
macro_rules! shared_pointer {
    ($Strong:ident, $Weak:ident, [$($base:tt)*], [$($new:tt)*], $vtable:expr) => {
        impl<T: $($new)*> $Strong<T> {
            /// Allocates `value` with a strong count of one.
            pub fn new(value: T) -> Self {
                // The value goes to the heap first: counting first made the
                // call spill it, and copying it twice (stalling on the
                // reload of its freshly stored fields).
                let ptr = $crate::sync::header::Inner::allocate(value, 1, $vtable);
                $crate::sync::state::count_allocated();
                $Strong::from_inner(ptr)
            }

            /// Allocates a value built by `f`, which receives a weak handle to
            /// the object being built (its `upgrade` returns `None` until `f`
            /// returns).
            pub fn new_cyclic(f: impl FnOnce(&$Weak<T>) -> T) -> Self {
                use core::mem::{ManuallyDrop, MaybeUninit};
                use $crate::sync::header::Inner;
                let ptr = Inner::<MaybeUninit<T>>::allocate(MaybeUninit::uninit(), 0, $vtable)
                    .cast::<Inner<T>>();
                // Owns the initial weak reference; if `f` panics it frees the
                // memory (the value was never written).
                let weak = $Weak {
                    ptr,
                    _owns: core::marker::PhantomData,
                };
                let value = f(&weak);
                // SAFETY: the value slot is uninitialised and unreachable
                // (count 0: upgrades fail).
                unsafe { (*ptr.as_ptr()).value.get().write(ManuallyDrop::new(value)) };
                // SAFETY: the header was initialised by `allocate`.
                unsafe { ptr.as_ref() }.header.init_strong();
                core::mem::forget(weak);
                $crate::sync::state::count_allocated();
                $Strong::from_inner(ptr)
            }
        }

        impl<T: $($base)*> $Strong<T>
        where
            T: Sized,
        {
            /// The value, if this is the only strong handle; otherwise the
            /// handle.
            pub fn try_unwrap(this: Self) -> Result<T, Self> {
                let Some(old) = this.header().take_unique() else {
                    return Err(this);
                };
                let ptr = this.ptr;
                core::mem::forget(this);
                // SAFETY: we moved the count from one to zero: the value is ours.
                let slot = unsafe { &mut *(*ptr.as_ptr()).value.get() };
                // SAFETY: as above; the slot is not read again.
                let value = unsafe { core::mem::ManuallyDrop::take(slot) };
                // SAFETY: we performed the transition to zero (see `GraphSlot`).
                let old_gen = unsafe { (*ptr.as_ptr()).header.generation.is_old() };
                $crate::sync::state::count_freed_by_rc(old_gen);
                // SAFETY: the value is gone and we performed the transition to zero.
                unsafe { $crate::sync::header::Header::finish_value(ptr.cast(), old) };
                Ok(value)
            }
        }

        impl<T: $($base)*> $Strong<T> {
            fn from_inner(ptr: core::ptr::NonNull<$crate::sync::header::Inner<T>>) -> Self {
                $Strong {
                    ptr,
                    _owns: core::marker::PhantomData,
                }
            }

            pub(crate) fn header(&self) -> &$crate::sync::header::Header {
                // SAFETY: a strong handle keeps the header alive.
                unsafe { &self.ptr.as_ref().header }
            }

            /// Whether both handles point to the same object (addresses only:
            /// the metadata of trait objects is not compared, as in `Arc`).
            pub fn ptr_eq(a: &Self, b: &Self) -> bool {
                core::ptr::addr_eq(a.ptr.as_ptr(), b.ptr.as_ptr())
            }

            /// A raw pointer to the value.
            pub fn as_ptr(this: &Self) -> *const T {
                // SAFETY: the allocation is alive; no reference is created.
                unsafe { (*this.ptr.as_ptr()).value.get() as *const T }
            }

            /// The number of strong handles (for a `sync::Gc`, a running
            /// collection's transient hold may be included).
            pub fn strong_count(this: &Self) -> usize {
                this.header().strong()
            }

            /// The number of weak handles.
            pub fn weak_count(this: &Self) -> usize {
                this.header().weak_handles()
            }

            /// A new weak handle.
            pub fn downgrade(this: &Self) -> $Weak<T> {
                this.header().inc_weak();
                $Weak {
                    ptr: this.ptr,
                    _owns: core::marker::PhantomData,
                }
            }

            /// Mutable access if this is the only handle and no weak handle
            /// exists.
            ///
            /// Requires `T: 'static`, as the constructors do: the handle type
            /// is covariant, so without the bound a `&mut` to a value built
            /// as `'static` could store a shorter borrow in it, and the value
            /// may be dropped after that borrow ends (drops are deferred to
            /// the end of an enclosing drop, or to a collection).
            pub fn get_mut(this: &mut Self) -> Option<&mut T>
            where
                T: 'static,
            {
                if this.header().claim_unique() {
                    // SAFETY: unique: no other strong or weak handle, and the
                    // buffer entry (if any) is disarmed, so no collector can
                    // take a hold on the value while `&mut` lives.
                    Some(unsafe { &mut *(*this.ptr.as_ptr()).value.get() })
                } else {
                    None
                }
            }
        }

        impl<T: $($base)*> Clone for $Strong<T> {
            #[inline]
            fn clone(&self) -> Self {
                self.header().inc_strong();
                $Strong::from_inner(self.ptr)
            }
        }

        // SAFETY: like `std::sync::Weak<T>`: it can produce strong handles.
        unsafe impl<T: $($base)* + Send + Sync> Send for $Weak<T> {}
        // SAFETY: see `Send`.
        unsafe impl<T: $($base)* + Send + Sync> Sync for $Weak<T> {}

        impl<T: $($base)*> $Weak<T>
        where
            T: Sized,
        {
            /// A weak handle that never upgrades.
            pub const fn new() -> Self {
                $Weak {
                    ptr: $crate::sync::unsize::dangling(),
                    _owns: core::marker::PhantomData,
                }
            }
        }

        impl<T: $($base)*> $Weak<T> {
            /// The object, unless this handle was made by `new()`.
            fn inner(&self) -> Option<core::ptr::NonNull<$crate::sync::header::Inner<T>>> {
                (!$crate::sync::unsize::is_dangling(self.ptr)).then_some(self.ptr)
            }

            fn header(&self) -> Option<&$crate::sync::header::Header> {
                // SAFETY: a weak handle keeps the header alive.
                self.inner().map(|ptr| unsafe { &(*ptr.as_ptr()).header })
            }

            /// A strong handle, unless the object was dropped or collected.
            pub fn upgrade(&self) -> Option<$Strong<T>> {
                let ptr = self.inner()?;
                self.header()?.upgrade().then(|| $Strong::from_inner(ptr))
            }

            /// Whether both point to the same object (two `new()` are equal;
            /// addresses only, as in `std::sync::Weak`).
            pub fn ptr_eq(a: &Self, b: &Self) -> bool {
                core::ptr::addr_eq(a.ptr.as_ptr(), b.ptr.as_ptr())
            }

            /// Strong handles of the object (0 once dropped or collected).
            pub fn strong_count(&self) -> usize {
                self.header()
                    .map_or(0, $crate::sync::header::Header::live_strong)
            }

            /// Weak handles of the object (0 once it has no strong handle,
            /// as `strong_count` says: dropped or collected).
            pub fn weak_count(&self) -> usize {
                self.header()
                    .map_or(0, $crate::sync::header::Header::live_weak_handles)
            }
        }

        impl<T: $($base)*> Default for $Weak<T>
        where
            T: Sized,
        {
            fn default() -> Self {
                $Weak::new()
            }
        }

        impl<T: $($base)*> Clone for $Weak<T> {
            fn clone(&self) -> Self {
                if let Some(h) = self.header() {
                    h.inc_weak();
                }
                $Weak {
                    ptr: self.ptr,
                    _owns: core::marker::PhantomData,
                }
            }
        }

        impl<T: $($base)*> Drop for $Weak<T> {
            fn drop(&mut self) {
                if let Some(ptr) = self.inner() {
                    // SAFETY: we own one weak reference.
                    unsafe { $crate::sync::header::Header::release_weak(ptr.cast()) };
                }
            }
        }

        impl<T: $($base)*> core::fmt::Debug for $Weak<T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str("(Weak)")
            }
        }

        // SAFETY: a weak handle owns no strong reference: nothing to report.
        unsafe impl<T: $($base)*> $crate::trace::Trace for $Weak<T> {
            const MAY_CONTAIN_GC: bool = false;
            fn trace(&self, _: &mut $crate::trace::Tracer<'_>) {}
        }
    };
}

pub(crate) use shared_pointer;
