//! The comparison suite: `cargo bench -p benches` (filter with a substring of
//! a benchmark id, e.g. `cargo bench -p benches -- hub`). Then
//! `cargo run --release -p benches --bin report` writes BENCHMARKS.md.

fn main() {
    benches::suite::Suite::new().run_all();
}
