//! Reference-counted smart pointers that collect their own cycles.
#![warn(missing_docs)]

pub mod policy;
pub mod stats;
pub mod trace;

pub use policy::Policy;
pub use stats::Stats;
pub use trace::{Trace, Tracer};

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

pub mod sync;
