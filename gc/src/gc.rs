//! [`Gc`]: a reference-counted pointer whose cycles are collected.

use crate::handle::{Strong, WeakRef};
use crate::pointer::define_pointer;
use crate::trace::{Trace, Tracer};
use crate::unsize::Pointee;

define_pointer! {
    /// A single-threaded reference-counted pointer that frees unreachable
    /// cycles.
    ///
    /// Acyclic garbage is freed at once, by counting, as with
    /// `std::rc::Rc`. When a handle to a type that may own pointers
    /// ([`Trace::MAY_CONTAIN_GC`]) is dropped and the count stays above zero,
    /// the object is remembered as a possible cycle root; the thread's
    /// collector (see [`crate::collect`] and [`crate::Policy`]) later finds and frees the cycles
    /// among them. `Gc<T>` is one machine word for a sized `T` (two for
    /// `str`, slices and trait objects, see [`crate::unsize`]), `!Send` and
    /// `!Sync`.
    ///
    /// A handle can outlive its object only in one case: a destructor that
    /// runs while the collector frees a cycle stores a clone of a member
    /// somewhere. Dereferencing such a dead handle panics and
    /// [`Gc::try_deref`] returns `None`; it is never a use after free.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use recycler::{Gc, Trace};
    ///
    /// #[derive(Trace)]
    /// struct Person {
    ///     name: String,
    ///     friend: RefCell<Option<Gc<Person>>>,
    /// }
    ///
    /// let alice = Gc::new(Person { name: "Alice".into(), friend: RefCell::new(None) });
    /// let bob = Gc::new(Person { name: "Bob".into(), friend: RefCell::new(Some(alice.clone())) });
    /// *alice.friend.borrow_mut() = Some(bob.clone());
    /// assert_eq!(Gc::strong_count(&alice), 2);
    ///
    /// let live = recycler::stats().live;
    /// drop((alice, bob)); // a cycle: counting alone cannot free it
    /// recycler::collect();
    /// assert_eq!(recycler::stats().live, live - 2);
    /// ```
    ///
    /// A `Gc` cannot leave its thread (use [`crate::sync::Gc`] for that):
    ///
    /// ```compile_fail
    /// fn send<T: Send>(_: T) {}
    /// send(recycler::Gc::new(1u8));
    /// ```
    ///
    /// Values are `'static` (`new` and `get_mut` require it; the handle is
    /// covariant): a value's drop may be deferred (to the end of an
    /// enclosing drop, or to a collection) past the end of a borrow. Before
    /// `get_mut` had the bound, this was a use after free under Miri:
    ///
    /// ```compile_fail,E0597
    /// use recycler::{Gc, Trace};
    /// static EMPTY: String = String::new();
    /// #[derive(Trace)]
    /// struct Reader<'a>(#[trace(skip)] &'a String);
    /// impl Drop for Reader<'_> {
    ///     fn drop(&mut self) {
    ///         println!("{}", self.0.len());
    ///     }
    /// }
    /// #[derive(Trace)]
    /// struct Outer;
    /// impl Drop for Outer {
    ///     fn drop(&mut self) {
    ///         let s = String::from("a string on the heap");
    ///         let mut r: Gc<Reader<'_>> = Gc::new(Reader(&EMPTY));
    ///         Gc::get_mut(&mut r).unwrap().0 = &s;
    ///         drop(r); // queued: would run after `s` is freed
    ///     }
    /// }
    /// drop(Gc::new(Outer));
    /// ```
    strong Gc;
    /// A weak handle to a [`Gc`] object: does not keep it alive.
    ///
    /// `upgrade` returns `None` once the object's value is gone, whether
    /// counting or the cycle collector freed it. The allocation itself lives
    /// until the last weak handle goes.
    weak Weak;
    collect = true;
}

// SAFETY: a `Gc` owns exactly one strong reference to its object and reports
// it once. Objects that cannot own pointers are not reported: they cannot be
// on a cycle, and counting frees them when their owners go.
unsafe impl<T: ?Sized + Pointee> Trace for Gc<T> {
    const MAY_CONTAIN_GC: bool = true;

    #[inline]
    fn trace(&self, tracer: &mut Tracer<'_>) {
        // A constant test for sized types; a trait object's concrete type
        // may be a leaf.
        if T::MAY_CONTAIN_GC && self.inner.candidate() {
            tracer.local_edge(self.inner.object());
        }
    }
}
