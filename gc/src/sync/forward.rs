//! Trait impls that forward to the pointed-to value, shared by `sync::Gc`
//! and `sync::Rc`.

/// `forward_traits!(Ptr, [base bounds], [constructor bounds])`.
macro_rules! forward_traits {
    ($ptr:ident, [$($base:tt)*], [$($new:tt)*]) => {
        impl<T: $($base)* + core::fmt::Debug> core::fmt::Debug for $ptr<T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match $ptr::try_deref(self) {
                    Some(value) => core::fmt::Debug::fmt(value, f),
                    None => f.write_str("(collected)"),
                }
            }
        }
        impl<T: $($base)* + core::fmt::Display> core::fmt::Display for $ptr<T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Display::fmt(&**self, f)
            }
        }
        impl<T: $($base)*> core::fmt::Pointer for $ptr<T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Pointer::fmt(&$ptr::as_ptr(self), f)
            }
        }
        impl<T: $($base)* + PartialEq> PartialEq for $ptr<T> {
            fn eq(&self, other: &Self) -> bool {
                **self == **other
            }
        }
        impl<T: $($base)* + Eq> Eq for $ptr<T> {}
        impl<T: $($base)* + PartialOrd> PartialOrd for $ptr<T> {
            fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
                (**self).partial_cmp(&**other)
            }
        }
        impl<T: $($base)* + Ord> Ord for $ptr<T> {
            fn cmp(&self, other: &Self) -> core::cmp::Ordering {
                (**self).cmp(&**other)
            }
        }
        impl<T: $($base)* + core::hash::Hash> core::hash::Hash for $ptr<T> {
            fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
                (**self).hash(state)
            }
        }
        impl<T: $($new)* + Default> Default for $ptr<T> {
            fn default() -> Self {
                $ptr::new(T::default())
            }
        }
        impl<T: $($new)*> From<T> for $ptr<T> {
            fn from(value: T) -> Self {
                $ptr::new(value)
            }
        }
        impl<T: $($base)*> core::borrow::Borrow<T> for $ptr<T> {
            fn borrow(&self) -> &T {
                self
            }
        }
        impl<T: $($base)*> AsRef<T> for $ptr<T> {
            fn as_ref(&self) -> &T {
                self
            }
        }
    };
}

pub(crate) use forward_traits;
