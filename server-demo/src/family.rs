//! Pointer families: the one thing that differs between the `--mm` modes.
//!
//! The per-request object graph ([`crate::graph`]) and the hubs
//! ([`crate::hubs`]) are written once, generic over a [`Family`]. A family says
//! which strong pointer the graph allocates its objects with and which cell
//! holds a mutable link. With the per-thread runtime, `--mm arc` uses
//! [`RcFamily`] (plain reference counting, the cycles leak: Nim's ARC) and
//! `--mm orc-nim16` / `--mm orc` use [`GcFamily`] (reference counting plus the
//! cycle collector; the two differ only in the [`recycler::Policy`] each worker
//! thread sets). With the work-stealing runtime the same modes use the
//! thread-safe pointers: [`SyncRcFamily`] (`recycler::sync::Rc`) and
//! [`SyncGcFamily`] (`recycler::sync::Gc`), whose cells are
//! `parking_lot::Mutex`es (the collector traces them with `try_lock`).
//!
//! The graph only ever allocates through [`Alloc::alloc`], reads and writes
//! links through [`Pointers::read`] and [`Pointers::write`], and never names a
//! concrete pointer or cell type. The traits are split in three so that the
//! compiler checks thread safety without any `unsafe`: node types are declared
//! over [`Pointers`] (types only); [`Alloc<T>`] is implemented for every `T`
//! by the single-threaded families and only for `T: Send + Sync` by the
//! thread-safe ones; and [`Family`] lists every node type as a supertrait
//! `Alloc<Node<Self>>`, so `impl Family for SyncGcFamily` compiles only if
//! every node type built with it is `Send + Sync` (supertraits, unlike other
//! `where` clauses, are implied wherever `F: Family` is assumed).

use std::cell::RefCell;
use std::ops::Deref;

use parking_lot::Mutex;
use recycler::{Trace, Tracer};

use crate::graph::{Context, Env, Future, Headers, Request, Response};
use crate::hubs::{App, Dispatcher, Route};
use crate::jsondoc::JsonNode;

/// The pointer and cell types of a family.
///
/// `Trace` is a supertrait only because `#[derive(Trace)]` bounds every type
/// parameter of a node type by `Trace`; the markers are uninhabited and trace
/// nothing.
pub trait Pointers: Trace + Sized + 'static {
    /// The name printed in `/stats` and in the compare output.
    const NAME: &'static str;

    /// Whether the pointers are thread-safe, so that one set of hubs is
    /// shared by every worker thread of a work-stealing runtime (and a
    /// request's callbacks may be run by another worker polling the shared
    /// dispatcher).
    const SHARED_HUBS: bool;

    /// The strong pointer every graph object is allocated behind.
    type P<T: Trace + 'static>: Clone + Deref<Target = T> + Trace;

    /// A mutable slot inside a graph object (a back-link set after
    /// construction, a list that grows, a counter).
    type Cell<T: Trace + 'static>: Trace;

    /// Whether two pointers point to the same object.
    fn ptr_eq<T: Trace + 'static>(a: &Self::P<T>, b: &Self::P<T>) -> bool;

    /// A new cell holding `value`.
    fn cell<T: Trace + 'static>(value: T) -> Self::Cell<T>;

    /// Runs `f` on the contents of `cell`.
    fn read<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&T) -> R) -> R;

    /// Runs `f` on the contents of `cell`, mutably.
    fn write<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&mut T) -> R) -> R;
}

/// Allocation of a `T` behind the family's pointer (for the thread-safe
/// families only when `T: Send + Sync`).
pub trait Alloc<T: Trace + 'static>: Pointers {
    /// Allocates `value` behind a new pointer.
    fn alloc(value: T) -> Self::P<T>;
}

/// A family that can allocate every node type of the graph and the hubs.
pub trait Family:
    Pointers
    + Alloc<Future<Self>>
    + Alloc<Env<Self>>
    + Alloc<Headers>
    + Alloc<Request<Self>>
    + Alloc<Response<Self>>
    + Alloc<Context<Self>>
    + Alloc<Dispatcher<Self>>
    + Alloc<Route<Self>>
    + Alloc<App<Self>>
    + Alloc<JsonNode<Self>>
{
}

/// `recycler::Rc`: reference counting without a cycle collector (Nim's ARC).
/// Every cycle a request builds leaks.
pub enum RcFamily {}

/// `recycler::Gc`: reference counting plus the cycle collector (Nim's ORC).
/// The collection trigger is the thread's [`recycler::Policy`].
pub enum GcFamily {}

/// `recycler::sync::Rc`: thread-safe reference counting without a cycle
/// collector (ARC on a work-stealing runtime).
pub enum SyncRcFamily {}

/// `recycler::sync::Gc`: thread-safe reference counting plus the concurrent
/// cycle collector (ORC on a work-stealing runtime). The trigger is the
/// policy set with `recycler::sync::set_policy` on each worker thread.
pub enum SyncGcFamily {}

/// Implements [`Pointers`] and [`Family`] for a family marker.
macro_rules! family {
    ($marker:ident, $name:literal, shared: $shared:literal, $ptr:path, $cell:ident,
     read: |$rc:ident| $read:expr, write: |$wc:ident| $write:expr) => {
        impl Pointers for $marker {
            const NAME: &'static str = $name;
            const SHARED_HUBS: bool = $shared;
            type P<T: Trace + 'static> = $ptr;
            type Cell<T: Trace + 'static> = $cell<T>;

            fn ptr_eq<T: Trace + 'static>(a: &Self::P<T>, b: &Self::P<T>) -> bool {
                <$ptr>::ptr_eq(a, b)
            }
            fn cell<T: Trace + 'static>(value: T) -> Self::Cell<T> {
                $cell::new(value)
            }
            fn read<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&T) -> R) -> R {
                let $rc = cell;
                f(&$read)
            }
            fn write<T: Trace + 'static, R>(
                cell: &Self::Cell<T>,
                f: impl FnOnce(&mut T) -> R,
            ) -> R {
                let $wc = cell;
                f(&mut $write)
            }
        }

        impl Family for $marker {}

        // The family markers appear as type parameters of the graph's node
        // types; a derived `Trace` may require them to be `Trace` themselves.
        //
        // SAFETY: the markers are uninhabited enums: no value exists, so there
        // is never a pointer to report and `MAY_CONTAIN_GC = false` is exact.
        unsafe impl Trace for $marker {
            const MAY_CONTAIN_GC: bool = false;
            fn trace(&self, _: &mut Tracer<'_>) {}
        }
    };
}

family!(RcFamily, "recycler::Rc", shared: false, recycler::Rc<T>, RefCell,
    read: |c| c.borrow(), write: |c| c.borrow_mut());
family!(GcFamily, "recycler::Gc", shared: false, recycler::Gc<T>, RefCell,
    read: |c| c.borrow(), write: |c| c.borrow_mut());
family!(SyncRcFamily, "recycler::sync::Rc", shared: true, recycler::sync::Rc<T>, Mutex,
    read: |c| c.lock(), write: |c| c.lock());
family!(SyncGcFamily, "recycler::sync::Gc", shared: true, recycler::sync::Gc<T>, Mutex,
    read: |c| c.lock(), write: |c| c.lock());

impl<T: Trace + 'static> Alloc<T> for RcFamily {
    fn alloc(value: T) -> Self::P<T> {
        recycler::Rc::new(value)
    }
}

impl<T: Trace + 'static> Alloc<T> for GcFamily {
    fn alloc(value: T) -> Self::P<T> {
        recycler::Gc::new(value)
    }
}

// `sync::Rc::new` itself would accept any `T`; requiring `Send + Sync` here
// is what makes the compiler check that the shared hubs and every request
// object may cross threads.
impl<T: Trace + Send + Sync + 'static> Alloc<T> for SyncRcFamily {
    fn alloc(value: T) -> Self::P<T> {
        recycler::sync::Rc::new(value)
    }
}

impl<T: Trace + Send + Sync + 'static> Alloc<T> for SyncGcFamily {
    fn alloc(value: T) -> Self::P<T> {
        recycler::sync::Gc::new(value)
    }
}
