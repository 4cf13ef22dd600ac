//! Criterion comparison suite: recycler's `Gc` and `Rc` against
//! `std::rc::Rc`/`std::sync::Arc` and the Rust cycle collectors on crates.io
//! (`bacon_rajan_cc`, `rust-cc`, `dumpster`, `gcmodule`, `gc`).
//!
//! - [`heap`]: the adapter traits; [`ptr`]: one adapter file per pointer.
//! - [`workloads`]: each workload written once, generic over the adapters.
//! - [`live`] and [`check`]: the untimed check run before each benchmark that
//!   counts the nodes left alive and catches panics.
//! - [`memory`]: keeps freed memory in the process (leaking baselines would
//!   otherwise measure their page faults).
//! - [`suite`]: what `benches/suite.rs` runs, and the table layout shared with
//!   the `report` binary that writes `BENCHMARKS.md`.
//!
//! Run `cargo bench -p benches`, then `cargo run --release -p benches --bin
//! report`.

// The `gc` crate is a dependency under the name `rust-gc`; its derive macros
// expand to `::gc::…` paths, which this alias (in the extern prelude) serves.
extern crate rust_gc as gc;

pub mod check;
pub mod heap;
pub mod live;
pub mod memory;
pub mod ptr;
pub mod suite;
pub mod workloads;
