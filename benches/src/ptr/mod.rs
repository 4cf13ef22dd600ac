//! One adapter per pointer under test. Adding a pointer is adding a file here
//! (a [`Heap`](crate::heap::Heap) and/or [`SyncHeap`](crate::heap::SyncHeap)
//! impl) and one line in `benches/suite.rs`'s pointer lists.

pub mod bacon_rajan_cc;
pub mod dumpster_sync;
pub mod dumpster_unsync;
pub mod gcmodule_cc;
pub mod gcmodule_threaded;
pub mod recycler_gc;
pub mod recycler_rc;
pub mod rust_cc;
pub mod rust_gc;
pub mod std_arc;
pub mod std_rc;
