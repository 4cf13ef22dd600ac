//! [`Rc`]: plain reference counting with the same header and API as
//! [`Gc`](crate::Gc), and no cycle collection — the "ARC" baseline.

use crate::handle::{Strong, WeakRef};
use crate::pointer::define_pointer;
use crate::trace::{Trace, Tracer};
use crate::unsize::Pointee;

define_pointer! {
    /// A single-threaded reference-counted pointer that never collects
    /// cycles: the baseline that [`Gc`](crate::Gc) is measured against.
    ///
    /// Same header, API and [`Trace`] as `Gc`, but a decrement never buffers
    /// the object, so a cycle of `Rc`s leaks; [`crate::stats()`] counts the
    /// leaked objects in `live`. Dropping long chains is iterative, as for
    /// `Gc`.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use recycler::{Rc, Trace};
    ///
    /// #[derive(Trace, Default)]
    /// struct Node { next: RefCell<Option<Rc<Node>>> }
    ///
    /// let live = recycler::stats().live;
    /// let a = Rc::new(Node::default());
    /// *a.next.borrow_mut() = Some(a.clone());
    /// let weak = Rc::downgrade(&a);
    /// drop(a);
    /// recycler::collect(); // Rc objects are never collected
    /// assert_eq!(recycler::stats().live, live + 1);
    ///
    /// // As with `std::rc::Rc`, the cycle must be broken by hand.
    /// weak.upgrade().unwrap().next.take();
    /// assert_eq!(recycler::stats().live, live);
    /// ```
    strong Rc;
    /// A weak handle to an [`Rc`] object.
    weak Weak;
    collect = false;
}

// SAFETY: an `Rc` is opaque to the collectors: it reports nothing, so every
// pointer it owns counts as a reference from outside the heap. Reporting
// fewer pointers than owned is always safe (cycles through an `Rc` leak, which
// is the point of this type).
unsafe impl<T: ?Sized + Pointee> Trace for Rc<T> {
    const MAY_CONTAIN_GC: bool = false;

    fn trace(&self, _: &mut Tracer<'_>) {}
}
