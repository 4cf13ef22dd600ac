//! Reference-counted smart pointers that collect their own cycles.
#![warn(missing_docs)]

pub mod policy;
pub mod stats;
pub mod trace;

pub use policy::Policy;
pub use stats::Stats;
pub use trace::{Trace, Tracer};

#[cfg(feature = "derive")]
pub use recycler_derive::Trace;

pub mod sync;
