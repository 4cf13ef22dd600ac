//! The [`Trace`] trait: how the collectors find the pointers a value owns.
//!
//! A cycle collector must know, for every object it examines, which collected
//! pointers that object *owns*. [`Trace::trace`] reports them to a [`Tracer`];
//! [`Trace::MAY_CONTAIN_GC`] says, at compile time, whether a type can own one
//! at all. Types for which it is `false` are never buffered as possible cycle
//! roots and never traced, so `Gc<String>` costs what `std::rc::Rc<String>`
//! costs.
//!
//! # The contract
//!
//! `Trace` is an `unsafe` trait because the collectors free memory on the
//! strength of what it reports. An implementation must meet exactly these
//! obligations:
//!
//! 1. `trace` reports only collected pointers (`Gc`, `sync::Gc`) that the
//!    value *owns* — held in the value or in memory it owns alone (`Box`,
//!    `Vec`, a `RefCell` or lock it contains), never one reached through a
//!    reference, a shared `std::rc::Rc`/`Arc`, a thread-local or a global —
//!    and each **at most once** per call. It reports a pointer by calling
//!    [`Trace::trace`] on it or on the field that holds it, and passes to
//!    [`Tracer::trace_lock`] only locks that the value owns, each once.
//! 2. While a collection runs, `trace` takes no collected pointer away from
//!    any value: it does not move, replace or drop a pointer that some value
//!    owns (no `take()` from a cell). It *may* clone pointers and drop its
//!    clones, allocate, upgrade `Weak`s, drop handles that no value owns, call
//!    `collect()` (the single-threaded collector runs it when the running
//!    collection ends; `sync::collect()` returns at once) and panic: the
//!    collectors stay consistent through all of that. (A `sync::Gc` cloned
//!    or dropped while traced changes its header word, so the thread-safe
//!    collector's validation fails on every attempt: that cycle leaks.)
//!    It must not *wait* for a lock (`lock()`, not `try_lock()`) that a
//!    collected value owns, its own or another's reached through an
//!    upgraded `Weak`: the thread-safe collector keeps the cells it has
//!    traced locked, on the thread that runs `trace`, until its pin window
//!    closes, so that lock may be held by the very thread that waits for it
//!    (a deadlock: `gc/tests/sync_trace_locks_a_pinned_cell.rs`). The same
//!    holds for the `Drop` of a [`sync::TraceLock`](crate::sync::TraceLock)
//!    guard, which the collector runs with other cells locked. Neither may
//!    wait for a thread that calls `sync::collect()` meanwhile (join it,
//!    say): that call waits for the collection that is running `trace`.
//! 3. `MAY_CONTAIN_GC` is `false` only if no value of the type can own a
//!    collected pointer, directly or through fields (generic ones included).
//! 4. A `sync::Gc` inside a value changes only through `&mut` or inside a
//!    lock that `trace` passes to [`Tracer::trace_lock`] (`std` and
//!    `parking_lot` `Mutex`/`RwLock`, or a user lock implementing
//!    [`sync::TraceLock`](crate::sync::TraceLock)), whose guards the
//!    thread-safe collector keeps while it validates a garbage component.
//!
//! What breaking them causes:
//!
//! - *Reporting too few pointers* (forgetting a field, `#[trace(skip)]` on a
//!   field that holds a pointer, `MAY_CONTAIN_GC = false` on a type that owns
//!   one) is allowed: the unreported pointers count as references from
//!   outside the heap, so the cycles through them are never collected. They
//!   **leak**; nothing is freed early.
//! - *Panicking* in `trace` is allowed: the panic propagates out of the
//!   collection that called it. Every reference count and every buffered
//!   root is left as it was, and later collections work. (The thread-safe
//!   collector catches it, treats the object as live for that collection,
//!   finishes the collection and then re-raises the first such panic.)
//! - *Reporting a pointer the value does not own*, or the same one twice,
//!   or breaking rule 2 or 4: the collector may believe an object
//!   unreachable while something outside still uses it, and drop its value
//!   under a live borrow. The collector detects some of these (a trial count
//!   below zero) and then gives up on the collection, but not all; this is
//!   the part of the contract that `unsafe` stands for.
//!
//! `#[derive(Trace)]` (behind the default `derive` feature) writes an
//! implementation that satisfies the contract for any struct or enum, so
//! ordinary code never needs `unsafe impl Trace`.
//!
//! # Interior mutability
//!
//! [`RefCell`] is traced through [`RefCell::try_borrow`]: a cell that is
//! mutably borrowed while the collector runs cannot be inspected, so its owner
//! is treated as reachable for that collection ([`Tracer::keep_alive`]).
//! [`Cell`] is traced only for `Copy` contents, which cannot own a pointer.
//! Implement `Trace` for your own cells the same way: if the contents cannot be
//! read right now, call [`Tracer::keep_alive`]. A lock type of your own that
//! holds `sync::Gc` handles implements [`sync::TraceLock`](crate::sync::TraceLock)
//! and is traced with [`Tracer::trace_lock`], so that the thread-safe
//! collector can keep it locked while it validates a cycle.
//!
//! # Depth
//!
//! A derived `trace` recurses with the value's owned structure (a field's
//! `Box`, the elements of a `Vec`, and so on down). The impls of those
//! owning indirections ask [`Tracer::too_deep`] before they descend: past
//! 128 KiB of stack below where the object's trace began (or half of what
//! the thread's stack had left there, if less), they report
//! nothing more and the object counts as reachable, like a borrowed cell.
//! A value nested that deep (a `Box` list of a million nodes whose `Drop`
//! is iterative) keeps its cycles alive (they leak) instead of overflowing
//! the stack. A hand-written container impl should ask too.
//!
//! "The thread's stack" is the one the thread library reports (Linux:
//! `pthread_getattr_np`). A collection that runs on a stack of its own (a
//! coroutine's, a green thread's) mapped below it finds nothing left and
//! keeps every object nested past 4 KiB (a leak, not a crash); mapped
//! above it, the budget is the 128 KiB, which such a stack must then have
//! to spare.

use core::cell::{Cell, RefCell};
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, LinkedList, VecDeque};

use crate::guards::GuardSink;
use crate::header::Object;

/// Which family of collected pointer a trace is looking for.
///
/// The single-threaded and the thread-safe collectors share one `Trace` trait;
/// each pointer type reports itself only to the collector of its own family.
/// `recycler::Gc` reports its typed candidates through [`Tracer::local_edge`]
/// to a tracer made by [`Tracer::local`]; the other families report headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// `recycler::sync::Gc`: the process-wide collector.
    Sync,
}

/// Receives the collected pointers owned by a value during [`Trace::trace`].
///
/// Its public operations are [`keep_alive`](Tracer::keep_alive) and
/// [`trace_lock`](Tracer::trace_lock) (for lock types of your own, see
/// [`sync::TraceLock`](crate::sync::TraceLock)); pointers report themselves
/// when their own `trace` is called.
pub struct Tracer<'a> {
    edges: Edges<'a>,
    keep_alive: bool,
    guards: Option<&'a mut GuardSink>,
    /// The stack address where this object's trace started (see
    /// [`Tracer::too_deep`]).
    base: usize,
}

/// Where a [`Tracer`] puts the pointers it is looking for.
enum Edges<'a> {
    /// The single-threaded collector's candidates, with their types.
    Local(&'a mut Vec<Object>),
    /// The headers of another family's objects.
    Raw(Family, &'a mut Vec<NonNull<()>>),
}

impl<'a> Tracer<'a> {
    /// A tracer that also keeps the lock guards that cells hand it through
    /// [`retain_at`](Tracer::retain_at) in `guards`, instead of releasing
    /// them when the cell's `trace` returns.
    pub(crate) fn with_guards(
        family: Family,
        edges: &'a mut Vec<NonNull<()>>,
        guards: &'a mut GuardSink,
    ) -> Self {
        Tracer {
            edges: Edges::Raw(family, edges),
            keep_alive: false,
            guards: Some(guards),
            base: crate::stack::stack_address(),
        }
    }

    /// How many guards this tracer's sink keeps, if it has one.
    #[inline]
    pub(crate) fn kept_guards(&self) -> Option<usize> {
        self.guards.as_deref().map(GuardSink::len)
    }

    /// Keeps `guard` (a lock guard of a cell being traced) alive in the guard
    /// sink, if this tracer has one, at position `index`: below the guards
    /// kept since the sink held `index` of them, which are dropped before it
    /// ([`GuardSink::keep_at`]). Without a sink, drops it now.
    ///
    /// # Safety
    ///
    /// Whatever `guard` borrows must stay alive and in place until the owner of
    /// the guard sink has dropped its contents.
    pub(crate) unsafe fn retain_at<'g, G: 'g>(&mut self, index: usize, guard: G) {
        if let Some(sink) = self.guards.as_deref_mut() {
            // SAFETY: forwarded contract.
            unsafe { sink.keep_at(index, guard) };
        }
    }

    /// Records an edge to the object whose header is at `header`, if the
    /// tracer is collecting pointers of `family`.
    #[inline]
    pub(crate) fn edge(&mut self, family: Family, header: NonNull<()>) {
        if let Edges::Raw(f, edges) = &mut self.edges {
            if *f == family {
                edges.push(header);
            }
        }
    }

    /// A tracer for the single-threaded collector, which appends the
    /// candidates that `Gc`s report to `objects`.
    pub(crate) fn local(objects: &'a mut Vec<Object>) -> Self {
        Tracer {
            edges: Edges::Local(objects),
            keep_alive: false,
            guards: None,
            base: crate::stack::stack_address(),
        }
    }

    /// Records an edge to a candidate of the single-threaded collector.
    #[inline]
    pub(crate) fn local_edge(&mut self, object: Object) {
        if let Edges::Local(objects) = &mut self.edges {
            objects.push(object);
        }
    }

    /// Whether [`keep_alive`](Tracer::keep_alive) was called.
    pub(crate) fn kept_alive(&self) -> bool {
        self.keep_alive
    }

    /// Declares that part of the value could not be inspected (for example a
    /// cell that is borrowed or locked right now). The object being traced is
    /// then treated as reachable for this collection: nothing it owns is freed
    /// by it, and a later collection looks again.
    pub fn keep_alive(&mut self) {
        self.keep_alive = true;
    }

    /// Whether the trace has nested deeper than its stack budget (128 KiB
    /// below where the object's trace started, or half of the stack the
    /// thread had left there if that is less); then the object is kept
    /// alive ([`keep_alive`](Tracer::keep_alive)) and the caller reports
    /// nothing below. The impls of the owning indirections (`Box`, the
    /// collections) ask before they descend: a value's owned structure can
    /// only nest through them, and a derived `trace` recurses with it. A
    /// value nested that deep stays alive for every collection (its cycles
    /// leak) rather than overflow the stack.
    #[inline]
    pub fn too_deep(&mut self) -> bool {
        let grown = crate::stack::grown_since(self.base);
        // One comparison while shallow; the thread's stack is looked at
        // only past a few KiB.
        grown > crate::stack::TRACE_UNCHECKED && self.too_deep_slow(grown)
    }

    /// [`Tracer::too_deep`] past [`TRACE_UNCHECKED`](crate::stack::TRACE_UNCHECKED).
    #[cold]
    #[inline(never)]
    fn too_deep_slow(&mut self, grown: usize) -> bool {
        let deep = grown > crate::stack::trace_budget(self.base);
        if deep {
            self.keep_alive = true;
        }
        deep
    }
}

/// Types whose collected pointers the cycle collectors can find.
///
/// See the [module documentation](crate::trace) for the full contract. Derive
/// it with `#[derive(Trace)]` rather than implementing it by hand.
///
/// # Safety
///
/// The four obligations of the [module documentation](crate::trace#the-contract),
/// in short: (1) `trace` reports only collected pointers the value owns, each
/// at most once per call; (2) while a collection runs it takes no collected
/// pointer away from any value (cloning, dropping its own clones, allocating,
/// `collect()` and panicking are fine) and waits for no lock a collected
/// value owns; (3) `MAY_CONTAIN_GC` is `false` only
/// for types that can never own a collected pointer; (4) `sync::Gc` handles
/// change only through `&mut` or inside the locks this crate traces.
/// Reporting *fewer* pointers than the value owns is safe (those cycles leak).
pub unsafe trait Trace {
    /// Whether a value of this type may own a collected pointer (`Gc` or
    /// `sync::Gc`), directly or through its fields.
    ///
    /// Decided at compile time. When `false`, a `Gc` to this type is never
    /// buffered as a possible cycle root and never traced. The default, `true`,
    /// is always safe.
    const MAY_CONTAIN_GC: bool = true;

    /// Reports every collected pointer this value owns by calling `trace` on
    /// it (or on the fields that hold it).
    fn trace(&self, tracer: &mut Tracer<'_>);
}

/// Implements `Trace` for types that never own a collected pointer.
macro_rules! trace_leaf {
    ($($ty:ty),* $(,)?) => {$(
        // SAFETY: the type owns no collected pointer; reporting nothing is exact.
        unsafe impl Trace for $ty {
            const MAY_CONTAIN_GC: bool = false;
            #[inline]
            fn trace(&self, _: &mut Tracer<'_>) {}
        }
    )*};
}

trace_leaf!(
    (),
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    str,
    String,
    core::num::NonZeroU8,
    core::num::NonZeroU16,
    core::num::NonZeroU32,
    core::num::NonZeroU64,
    core::num::NonZeroUsize,
    core::num::NonZeroI32,
    core::num::NonZeroI64,
    core::time::Duration,
    std::time::Instant,
    std::time::SystemTime,
    std::path::PathBuf,
    std::path::Path,
    std::ffi::OsString,
    std::ffi::CString,
    std::net::SocketAddr,
    std::net::IpAddr,
    core::sync::atomic::AtomicBool,
    core::sync::atomic::AtomicUsize,
    core::sync::atomic::AtomicU64,
    core::sync::atomic::AtomicI64,
    core::sync::atomic::AtomicU32,
);

// SAFETY: `'static` string slices are borrowed, never owned pointers.
unsafe impl Trace for &'static str {
    const MAY_CONTAIN_GC: bool = false;
    fn trace(&self, _: &mut Tracer<'_>) {}
}

// SAFETY: owns nothing.
unsafe impl<T: ?Sized> Trace for PhantomData<T> {
    const MAY_CONTAIN_GC: bool = false;
    fn trace(&self, _: &mut Tracer<'_>) {}
}

// SAFETY: a `Copy` type has no destructor and therefore cannot own a
// reference-counted pointer; there is nothing to report.
unsafe impl<T: Copy> Trace for Cell<T> {
    const MAY_CONTAIN_GC: bool = false;
    fn trace(&self, _: &mut Tracer<'_>) {}
}

// SAFETY: the contents are traced through a shared borrow, which excludes any
// concurrent `&mut` access; a mutably borrowed cell is reported with
// `keep_alive`, so its owner is never judged garbage on stale information.
unsafe impl<T: ?Sized + Trace> Trace for RefCell<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if !T::MAY_CONTAIN_GC {
            return;
        }
        match self.try_borrow() {
            Ok(value) => value.trace(tracer),
            Err(_) => tracer.keep_alive(),
        }
    }
}

// SAFETY: a box owns its contents; they are reported exactly once.
unsafe impl<T: ?Sized + Trace> Trace for Box<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    #[inline]
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if T::MAY_CONTAIN_GC && !tracer.too_deep() {
            (**self).trace(tracer);
        }
    }
}

// SAFETY: `Option` owns its contents, if any.
unsafe impl<T: Trace> Trace for Option<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    #[inline]
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if let Some(value) = self {
            value.trace(tracer);
        }
    }
}

// SAFETY: `Result` owns whichever variant it holds.
unsafe impl<T: Trace, E: Trace> Trace for Result<T, E> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC || E::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        match self {
            Ok(value) => value.trace(tracer),
            Err(error) => error.trace(tracer),
        }
    }
}

// SAFETY: arrays and slices own each element once.
unsafe impl<T: Trace, const N: usize> Trace for [T; N] {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        self.as_slice().trace(tracer);
    }
}

// SAFETY: see `[T; N]`.
unsafe impl<T: Trace> Trace for [T] {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if T::MAY_CONTAIN_GC {
            for value in self {
                value.trace(tracer);
            }
        }
    }
}

/// Implements `Trace` for sequences and sets that own their elements.
macro_rules! trace_sequence {
    ($($ty:ident),*) => {$(
        // SAFETY: the collection owns each element once, and `iter` visits
        // each element exactly once.
        unsafe impl<T: Trace> Trace for $ty<T> {
            const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
            fn trace(&self, tracer: &mut Tracer<'_>) {
                if T::MAY_CONTAIN_GC && !tracer.too_deep() {
                    self.iter().for_each(|x| x.trace(tracer));
                }
            }
        }
    )*};
}

trace_sequence!(Vec, VecDeque, LinkedList, BinaryHeap, BTreeSet);

// SAFETY: the map owns each key and value once.
unsafe impl<K: Trace, V: Trace> Trace for BTreeMap<K, V> {
    const MAY_CONTAIN_GC: bool = K::MAY_CONTAIN_GC || V::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if Self::MAY_CONTAIN_GC && !tracer.too_deep() {
            for (k, v) in self {
                k.trace(tracer);
                v.trace(tracer);
            }
        }
    }
}

// SAFETY: the set owns each element once.
unsafe impl<T: Trace, S> Trace for HashSet<T, S> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if T::MAY_CONTAIN_GC && !tracer.too_deep() {
            self.iter().for_each(|x| x.trace(tracer));
        }
    }
}

// SAFETY: the map owns each key and value once.
unsafe impl<K: Trace, V: Trace, S> Trace for HashMap<K, V, S> {
    const MAY_CONTAIN_GC: bool = K::MAY_CONTAIN_GC || V::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if Self::MAY_CONTAIN_GC && !tracer.too_deep() {
            for (k, v) in self {
                k.trace(tracer);
                v.trace(tracer);
            }
        }
    }
}

/// Implements `Trace` for tuples of traceable types.
macro_rules! trace_tuple {
    ($(($($name:ident),+))*) => {$(
        // SAFETY: a tuple owns each of its fields once.
        unsafe impl<$($name: Trace),+> Trace for ($($name,)+) {
            const MAY_CONTAIN_GC: bool = false $(|| $name::MAY_CONTAIN_GC)+;
            #[allow(non_snake_case)]
            fn trace(&self, tracer: &mut Tracer<'_>) {
                let ($($name,)+) = self;
                $($name.trace(tracer);)+
            }
        }
    )*};
}

trace_tuple! {
    (A)
    (A, B)
    (A, B, C)
    (A, B, C, D)
    (A, B, C, D, E)
    (A, B, C, D, E, F)
    (A, B, C, D, E, F, G)
    (A, B, C, D, E, F, G, H)
    (A, B, C, D, E, F, G, H, I)
    (A, B, C, D, E, F, G, H, I, J)
    (A, B, C, D, E, F, G, H, I, J, K)
    (A, B, C, D, E, F, G, H, I, J, K, L)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read through a function so the test exercises the trait, not a literal.
    fn candidate<T: Trace + ?Sized>() -> bool {
        T::MAY_CONTAIN_GC
    }

    #[test]
    fn leaves_are_not_candidates() {
        assert!(!candidate::<String>());
        assert!(!candidate::<Vec<u64>>());
        assert!(!candidate::<HashMap<String, Vec<u8>>>());
        assert!(!candidate::<Option<Box<(u8, char)>>>());
        assert!(!candidate::<RefCell<Vec<String>>>());
        assert!(!candidate::<Cell<u32>>());
        assert!(!candidate::<[u8; 16]>());
        assert!(!candidate::<Result<u8, String>>());
    }

    #[test]
    fn keep_alive_is_recorded() {
        let mut edges = Vec::new();
        let mut tracer = Tracer::local(&mut edges);
        let cell = RefCell::new(vec![Some(1u8)]);
        cell.trace(&mut tracer);
        assert!(!tracer.kept_alive());
        assert!(edges.is_empty());
    }
}

/// Stands in for a type inside its own definition when `#[derive(Trace)]`
/// computes [`Trace::MAY_CONTAIN_GC`] of a recursive type (the least fixed
/// point: a recursive type may contain a `Gc` only if some non-recursive part
/// does). Not for use outside the derive.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecursionMarker;

trace_leaf!(RecursionMarker);
