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
//! Two more families change the graph's shape without changing its code:
//!
//! * [`WeakRcFamily`] / [`SyncWeakRcFamily`] (`--mm arc-weak`): careful ARC.
//!   Every back-edge (a link that closes a cycle, declared with
//!   [`Pointers::Back`]) is a `Weak`, and the request path unlinks what a
//!   careful programmer would ([`Pointers::UNLINKS`]: a completed future
//!   hands its callbacks to the ready queue instead of keeping them), so
//!   every object is freed by counting. Nothing leaks, nothing is collected.
//! * [`GcAllCyclicFamily`] / [`SyncGcAllCyclicFamily`] (`--mm
//!   orc-nim16-faithful` with the `all-cyclic` defect): leaf payloads carry
//!   a [`CycleCandidate`] marker, so that, as with Nim 1.6.12's
//!   `canFormAcycle` bug, the collector treats them as possible cycle
//!   members. (`recycler` has no acyclic-type analysis: every type that may
//!   own a pointer is a candidate in every collecting mode, so the leaves are
//!   the only types the bug adds here.)
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

    /// A back-edge: the link that closes a cycle (an environment's link to
    /// the future it is registered on, a request's link to its context, a
    /// JSON node's parent). The strong pointer in every family but the
    /// careful-ARC ones, where it is a `Weak`.
    type Back<T: Trace + 'static>: Trace;

    /// The marker field of leaf payloads (types that own no pointer):
    /// `()` (not a cycle candidate), or [`CycleCandidate`] for the families
    /// that reproduce Nim 1.6.12's "every type is cyclic" defect.
    type Candidate: Trace + Default + Send + Sync + 'static;

    /// Whether the request path unlinks what a careful programmer would
    /// (a completed future gives its callbacks away), so that with weak
    /// back-edges nothing is left in a cycle.
    const UNLINKS: bool;

    /// Whether two pointers point to the same object.
    fn ptr_eq<T: Trace + 'static>(a: &Self::P<T>, b: &Self::P<T>) -> bool;

    /// A new cell holding `value`.
    fn cell<T: Trace + 'static>(value: T) -> Self::Cell<T>;

    /// Runs `f` on the contents of `cell`.
    fn read<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&T) -> R) -> R;

    /// Runs `f` on the contents of `cell`, mutably.
    fn write<T: Trace + 'static, R>(cell: &Self::Cell<T>, f: impl FnOnce(&mut T) -> R) -> R;

    /// A back-edge to `target`.
    fn back<T: Trace + 'static>(target: &Self::P<T>) -> Self::Back<T>;

    /// Runs `f` on the object a back-edge points to, if it is still alive
    /// (a strong back-edge always is; a weak one is upgraded for the call).
    fn with_back<T: Trace + 'static, R>(
        back: &Self::Back<T>,
        f: impl FnOnce(&Self::P<T>) -> R,
    ) -> Option<R>;
}

/// The marker that makes a leaf payload a cycle candidate: a zero-sized
/// field whose [`Trace::MAY_CONTAIN_GC`] is `true` although it owns nothing,
/// as Nim 1.6.12's compiler classified every type as possibly cyclic (fixed
/// by Nim PR 21815). The collector then buffers the payload's object when a
/// count drops to a value above zero, and traces the edges to it.
#[derive(Clone, Copy, Debug, Default)]
pub struct CycleCandidate;

// SAFETY: the marker owns no pointer and reports none. `MAY_CONTAIN_GC =
// true` is the conservative value, always allowed: it only makes the
// collector consider the owning object a possible cycle member.
unsafe impl Trace for CycleCandidate {
    const MAY_CONTAIN_GC: bool = true;
    fn trace(&self, _: &mut Tracer<'_>) {}
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
    + Alloc<Headers<Self>>
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

/// `recycler::Rc` with every back-edge a `recycler::rc::Weak` and explicit
/// unlinking: careful ARC, the baseline that neither leaks nor collects.
pub enum WeakRcFamily {}

/// `recycler::sync::Rc` with weak back-edges and explicit unlinking: careful
/// ARC on a work-stealing runtime.
pub enum SyncWeakRcFamily {}

/// `recycler::Gc` whose leaf payloads are cycle candidates too (Nim 1.6.12's
/// `canFormAcycle` defect).
pub enum GcAllCyclicFamily {}

/// `recycler::sync::Gc` whose leaf payloads are cycle candidates too.
pub enum SyncGcAllCyclicFamily {}

/// `recycler::sync::Gc`: thread-safe reference counting plus the concurrent
/// cycle collector (ORC on a work-stealing runtime). The trigger is the
/// policy set with `recycler::sync::set_policy` on each worker thread.
pub enum SyncGcFamily {}

/// Implements [`Pointers`] and [`Family`] for a family marker.
macro_rules! family {
    ($marker:ident, $name:literal, shared: $shared:literal, $ptr:path, $cell:ident,
     read: |$rc:ident| $read:expr, write: |$wc:ident| $write:expr,
     back: $back:ty, candidate: $candidate:ty) => {
        family!($marker, $name, shared: $shared, $ptr, $cell,
            read: |$rc| $read, write: |$wc| $write,
            back: $back, candidate: $candidate, unlinks: false,
            downgrade: |p| p.clone(), with_back: |b, f| Some(f(b)));
    };
    ($marker:ident, $name:literal, shared: $shared:literal, $ptr:path, $cell:ident,
     read: |$rc:ident| $read:expr, write: |$wc:ident| $write:expr,
     back: $back:ty, candidate: $candidate:ty, unlinks: $unlinks:literal,
     downgrade: |$dp:ident| $down:expr, with_back: |$bb:ident, $bf:ident| $with:expr) => {
        impl Pointers for $marker {
            const NAME: &'static str = $name;
            const SHARED_HUBS: bool = $shared;
            const UNLINKS: bool = $unlinks;
            type P<T: Trace + 'static> = $ptr;
            type Cell<T: Trace + 'static> = $cell<T>;
            type Back<T: Trace + 'static> = $back;
            type Candidate = $candidate;

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
            fn back<T: Trace + 'static>($dp: &Self::P<T>) -> Self::Back<T> {
                $down
            }
            fn with_back<T: Trace + 'static, R>(
                $bb: &Self::Back<T>,
                $bf: impl FnOnce(&Self::P<T>) -> R,
            ) -> Option<R> {
                $with
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
    read: |c| c.borrow(), write: |c| c.borrow_mut(),
    back: recycler::Rc<T>, candidate: ());
family!(GcFamily, "recycler::Gc", shared: false, recycler::Gc<T>, RefCell,
    read: |c| c.borrow(), write: |c| c.borrow_mut(),
    back: recycler::Gc<T>, candidate: ());
family!(GcAllCyclicFamily, "recycler::Gc (all types cyclic)", shared: false, recycler::Gc<T>,
    RefCell, read: |c| c.borrow(), write: |c| c.borrow_mut(),
    back: recycler::Gc<T>, candidate: CycleCandidate);
family!(WeakRcFamily, "recycler::Rc + rc::Weak", shared: false, recycler::Rc<T>, RefCell,
    read: |c| c.borrow(), write: |c| c.borrow_mut(),
    back: recycler::rc::Weak<T>, candidate: (), unlinks: true,
    downgrade: |p| recycler::Rc::downgrade(p),
    with_back: |b, f| b.upgrade().map(|p| f(&p)));
family!(SyncRcFamily, "recycler::sync::Rc", shared: true, recycler::sync::Rc<T>, Mutex,
    read: |c| c.lock(), write: |c| c.lock(),
    back: recycler::sync::Rc<T>, candidate: ());
family!(SyncGcFamily, "recycler::sync::Gc", shared: true, recycler::sync::Gc<T>, Mutex,
    read: |c| c.lock(), write: |c| c.lock(),
    back: recycler::sync::Gc<T>, candidate: ());
family!(SyncGcAllCyclicFamily, "recycler::sync::Gc (all types cyclic)", shared: true,
    recycler::sync::Gc<T>, Mutex, read: |c| c.lock(), write: |c| c.lock(),
    back: recycler::sync::Gc<T>, candidate: CycleCandidate);
family!(SyncWeakRcFamily, "recycler::sync::Rc + sync::rc::Weak", shared: true,
    recycler::sync::Rc<T>, Mutex, read: |c| c.lock(), write: |c| c.lock(),
    back: recycler::sync::rc::Weak<T>, candidate: (), unlinks: true,
    downgrade: |p| recycler::sync::Rc::downgrade(p),
    with_back: |b, f| b.upgrade().map(|p| f(&p)));

/// Implements [`Alloc`] for every `T` (single-threaded families) or every
/// `T: Send + Sync` (thread-safe ones).
macro_rules! alloc {
    ($($marker:ident),* => $new:path) => {$(
        impl<T: Trace + 'static> Alloc<T> for $marker {
            fn alloc(value: T) -> Self::P<T> {
                $new(value)
            }
        }
    )*};
    (sync: $($marker:ident),* => $new:path) => {$(
        // `sync::Gc::new` requires `Send + Sync` itself, `sync::Rc::new` only
        // `T: 'static`; requiring `Send + Sync` here for both is what makes
        // the compiler check, in every thread-safe family, that the shared
        // hubs and every request object may cross threads.
        impl<T: Trace + Send + Sync + 'static> Alloc<T> for $marker {
            fn alloc(value: T) -> Self::P<T> {
                $new(value)
            }
        }
    )*};
}

alloc!(RcFamily, WeakRcFamily => recycler::Rc::new);
alloc!(GcFamily, GcAllCyclicFamily => recycler::Gc::new);
alloc!(sync: SyncRcFamily, SyncWeakRcFamily => recycler::sync::Rc::new);
alloc!(sync: SyncGcFamily, SyncGcAllCyclicFamily => recycler::sync::Gc::new);
