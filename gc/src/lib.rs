//! Reference-counted smart pointers that collect their own cycles.
//!
//! * [`Gc<T>`]: single-threaded reference counting plus a Bacon–Rajan
//!   trial-deletion cycle collector (the design of Nim's ORC), made
//!   generational so that collection work grows with the garbage, not with the
//!   live heap. Acyclic garbage is freed at once by counting.
//! * [`Rc<T>`]: the same header and API with plain counting and no collector
//!   (the "ARC" baseline: cycles leak).
//! * [`Weak`], [`rc::Weak`]: weak handles.
//! * [`Trace`] and `#[derive(Trace)]`: how the collector finds the pointers a
//!   value owns, and whether a type can own any at all
//!   ([`Trace::MAY_CONTAIN_GC`], decided at compile time: `Gc<String>` costs
//!   what `std::rc::Rc<String>` costs).
//! * [`collect`], [`stats()`], [`set_policy`]: per-thread control of the
//!   collector ([`Policy::Adaptive`] by default, [`Policy::Nim16`] to
//!   reproduce Nim 1.6's trigger, [`Policy::Manual`]).
//! * [`sync`]: the thread-safe counterparts.
//! * [`unsize`]: `Gc<str>`, `Gc<[T]>` and `Gc<dyn Trait>` (and the same for
//!   `Rc`, the weak handles, and the [`sync`] pointers, as
//!   `sync::Gc<dyn Trait + Send + Sync>`): [`coerce!`], [`dyn_trace!`], and
//!   implicit coercions behind the `nightly` feature.
//!
//! A `Gc<T>` whose `T` cannot own a pointer, and any `Rc<T>`, is allocated
//! exactly as `std::rc::Rc<T>`: two counts and the value. A `Gc<T>` that may
//! be on a cycle has one word more (flags and the collector's slot); the
//! collector finds each object's type through the typed handle that reaches
//! it, not through the object.
//!
//! ```
//! use std::cell::RefCell;
//! use recycler::{Gc, Trace};
//!
//! #[derive(Trace)]
//! struct Node {
//!     label: &'static str,
//!     edges: RefCell<Vec<Gc<Node>>>,
//! }
//!
//! let a = Gc::new(Node { label: "a", edges: RefCell::new(vec![]) });
//! let b = Gc::new(Node { label: "b", edges: RefCell::new(vec![a.clone()]) });
//! a.edges.borrow_mut().push(b.clone());
//! let weak = Gc::downgrade(&a);
//!
//! drop((a, b));
//! assert!(weak.upgrade().is_some()); // the cycle keeps itself alive...
//! recycler::collect();
//! assert!(weak.upgrade().is_none()); // ...until the collector frees it
//! ```
//!
//! # Safety contract
//! Safe code cannot cause undefined behaviour with these pointers. A wrong
//! [`Trace`] impl that reports too few pointers, a panic in `Drop` or `trace`,
//! a `Drop` that touches a member of its own garbage cycle, or a collection
//! that starts while a `RefCell` in the heap is mutably borrowed may leak
//! memory or panic, but never frees memory that is still in use. An
//! `unsafe impl Trace` carries four obligations (see [`trace`]): report
//! only pointers the value owns, each at most once; take no pointer away
//! from a value and wait for no lock a collected value owns while tracing;
//! `MAY_CONTAIN_GC = false` only for types that can never own a pointer;
//! and change a `sync::Gc` inside a value only through `&mut` or inside a
//! lock it traces with [`Tracer::trace_lock`].
#![warn(missing_docs)]
#![cfg_attr(feature = "nightly", feature(coerce_unsized, unsize))]

mod collector;
mod drop_queue;
mod fallback;
mod guards;
mod handle;
mod header;
mod payload;
mod pointer;
mod stack;

pub mod gc;
pub mod policy;
pub mod rc;
pub mod stats;
pub mod sync;
pub mod trace;
pub mod unsize;

#[cfg(test)]
mod test_support;

pub use collector::{
    collect, collect_minor, nim16_threshold, policy, set_adaptive_config,
    set_nim16_shared_threshold, set_policy, stats, AdaptiveConfig,
};
pub use gc::{Gc, Weak};
pub use policy::Policy;
pub use rc::Rc;
pub use stats::Stats;
pub use trace::{Trace, Tracer};

/// Derives [`Trace`] for a struct or enum.
///
/// Every field is traced unless marked `#[trace(skip)]` (for fields that hold
/// no pointer and need not implement `Trace`; skipping a field that does hold
/// one only makes the cycles through it leak). A user `Drop` impl is allowed.
#[cfg(feature = "derive")]
/// Derives [`Trace`](trait@Trace) for a struct or enum.
///
/// The generated `unsafe impl` traces every field (for an enum, every field of
/// the variant the value holds) exactly once and sets
/// [`MAY_CONTAIN_GC`](trait@Trace#associatedconstant.MAY_CONTAIN_GC) to the
/// `||` of the fields' constants, so a type that cannot own a [`Gc`] is a leaf
/// that is never buffered nor traced. All field and variant shapes, and type,
/// lifetime and const parameters are supported; `where` clauses are kept.
/// Each type parameter that occurs in a traced field (outside `PhantomData`)
/// gets a `T: Trace` bound.
///
/// ```
/// use std::cell::RefCell;
/// use std::collections::HashMap;
/// use recycler::{Gc, Trace};
///
/// #[derive(Trace)]
/// struct Config {
///     name: String,
///     limits: HashMap<String, u32>,
/// }
///
/// #[derive(Trace)]
/// struct Node {
///     config: Config,
///     children: RefCell<Vec<Gc<Node>>>,
/// }
///
/// #[derive(Trace)]
/// enum Event<T> {
///     Tick(u64),
///     Payload { value: T, from: Option<Gc<Node>> },
/// }
///
/// assert!(!<Config as Trace>::MAY_CONTAIN_GC); // a leaf: never buffered
/// assert!(<Node as Trace>::MAY_CONTAIN_GC);
/// assert!(<Event<String> as Trace>::MAY_CONTAIN_GC);
/// ```
///
/// # `#[trace(skip)]` (field)
///
/// The field is not traced, counts as `false` in `MAY_CONTAIN_GC`, and its
/// type need not implement `Trace` (no bound is generated for a parameter
/// used only in skipped fields). Skipping a field that owns a `Gc` is
/// memory-safe: the pointer counts as a reference from outside the heap, so
/// cycles through it are never collected — they leak, nothing is freed early.
///
/// ```
/// use recycler::Trace;
///
/// struct Handle(std::rc::Rc<u32>); // does not implement `Trace`
///
/// #[derive(Trace)]
/// struct Session {
///     id: u64,
///     #[trace(skip)]
///     handle: Handle,
/// }
/// assert!(!<Session as Trace>::MAY_CONTAIN_GC);
/// ```
///
/// # Recursive types
///
/// Naively, `MAY_CONTAIN_GC` of a recursive type refers to itself, which
/// const evaluation rejects as a cycle. The derive computes the least fixed
/// point instead: inside the type's own definition, `Self` and the type's own
/// name (with its own parameters, `List<T>` in `List<T>`) count as a leaf. A
/// recursive type may therefore contain a `Gc` only if a non-recursive part
/// can.
///
/// ```
/// use recycler::{Gc, Trace};
///
/// #[derive(Trace)]
/// enum Expr {
///     Num(i64),
///     Add(Box<Expr>, Box<Expr>),
///     Call { name: String, args: Vec<Self> },
/// }
/// assert!(!<Expr as Trace>::MAY_CONTAIN_GC);
///
/// #[derive(Trace)]
/// enum List<T> {
///     Nil,
///     Cons(T, Box<List<T>>),
/// }
/// assert!(!<List<u8> as Trace>::MAY_CONTAIN_GC);
/// assert!(<List<Gc<u8>> as Trace>::MAY_CONTAIN_GC);
/// ```
///
/// A type that holds itself with *other* arguments (`Nested<Vec<T>>` inside
/// `Nested<T>`) has no finite answer to compute; the derive conservatively
/// makes it `true`.
///
/// # `#[trace(may_contain_gc)]` (struct or enum)
///
/// Sets `MAY_CONTAIN_GC = true` without evaluating the fields. Types that are
/// *mutually* recursive through `Box`, `Vec` or other owning containers (`A`
/// holds `Box<B>`, `B` holds `Box<A>`), or recursive through a type alias,
/// are still a const-evaluation cycle, reported as a compile error
/// (`E0391`) wherever the constant is used:
///
/// ```compile_fail,E0391
/// use recycler::Trace;
///
/// #[derive(Trace)]
/// struct A { b: Option<Box<B>> }
/// #[derive(Trace)]
/// struct B { a: Option<Box<A>> }
///
/// let _ = <A as Trace>::MAY_CONTAIN_GC; // error: cycle in const evaluation
/// ```
///
/// Putting `#[trace(may_contain_gc)]` on one of them breaks the cycle (it is
/// always safe: at worst a leaf type is buffered and traced needlessly).
/// Mutual recursion through [`Gc`] needs nothing: `Gc<T>` is `true`
/// whatever `T` is.
///
/// ```
/// use recycler::{Gc, Trace};
///
/// #[derive(Trace)]
/// #[trace(may_contain_gc)]
/// struct A { b: Option<Box<B>>, shared: Option<Gc<String>> }
/// #[derive(Trace)]
/// struct B { a: Option<Box<A>> }
/// assert!(<A as Trace>::MAY_CONTAIN_GC && <B as Trace>::MAY_CONTAIN_GC);
///
/// #[derive(Trace)]
/// struct Parent { child: Option<Gc<Child>> }
/// #[derive(Trace)]
/// struct Child { parent: Option<Gc<Parent>> }
/// assert!(<Parent as Trace>::MAY_CONTAIN_GC);
/// ```
///
/// # `#[trace(crate = "path")]` (struct or enum)
///
/// Names the `recycler` crate when it is not reachable as `::recycler`
/// (a renamed dependency, or a facade that re-exports `Trace`, `Tracer` and
/// the `trace` module).
///
/// ```
/// mod facade {
///     pub use recycler::{trace, Trace, Tracer};
/// }
///
/// #[derive(facade::Trace)]
/// #[trace(crate = "facade")]
/// enum Tree {
///     Leaf(i32),
///     Node(Vec<Tree>),
/// }
/// assert!(!<Tree as facade::Trace>::MAY_CONTAIN_GC);
/// ```
///
/// # Errors and `Drop`
///
/// Unions (which field is live is unknown), `#[repr(packed)]` types (their
/// fields cannot be borrowed), unknown options and options in the wrong place
/// are compile errors pointing at the offending tokens:
///
/// ```compile_fail
/// #[derive(recycler::Trace)]
/// union Bits { int: u32, float: f32 }
/// ```
///
/// ```compile_fail
/// #[derive(recycler::Trace)]
/// struct S { #[trace(ignore)] field: u32 } // the field option is `skip`
/// ```
///
/// The generated code only borrows the fields, so a derived type may
/// implement `Drop`.
///
/// ```
/// #[derive(recycler::Trace)]
/// struct Guard { name: String }
///
/// impl Drop for Guard {
///     fn drop(&mut self) {
///         println!("dropping {}", self.name);
///     }
/// }
/// ```
pub use recycler_derive::Trace;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
