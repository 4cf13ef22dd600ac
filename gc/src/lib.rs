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
//! * [`collect`], [`stats`], [`set_policy`]: per-thread control of the
//!   collector ([`Policy::Adaptive`] by default, [`Policy::Nim16`] to
//!   reproduce Nim 1.6's trigger, [`Policy::Manual`]).
//! * [`sync`]: the thread-safe counterparts.
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
//! memory or panic, but never frees memory that is still in use. The one
//! obligation that `unsafe impl Trace` carries is to never report a pointer
//! the value does not own (see [`trace`]).
#![warn(missing_docs)]

mod collector;
mod drop_queue;
mod handle;
mod header;
mod pointer;

pub mod gc;
pub mod policy;
pub mod rc;
pub mod stats;
pub mod sync;
pub mod trace;

pub use collector::{
    collect, collect_minor, policy, set_adaptive_config, set_policy, stats, AdaptiveConfig,
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
pub use recycler_derive::Trace;
