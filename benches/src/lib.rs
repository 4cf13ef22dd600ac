//! Criterion comparison suite (filled by the benchmarks issue).
