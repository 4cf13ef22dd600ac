//! Reference-counted smart pointers that collect their own cycles.
#![warn(missing_docs)]

pub mod trace;

pub use trace::{Trace, Tracer};

#[cfg(feature = "derive")]
pub use recycler_derive::Trace;

pub mod sync;
