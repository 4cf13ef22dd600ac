//! Collector statistics, in the spirit of Nim's `GC_orcStats`.

use core::time::Duration;

/// A snapshot of one collector's counters.
///
/// The single-threaded collector keeps one set per thread
/// ([`crate::stats()`]); counts cover the `Gc` and `Rc` objects allocated on that
/// thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Stats {
    /// Objects allocated and not yet freed (`Gc` and `Rc`, leaked ones included).
    pub live: u64,
    /// Objects freed because their strong count reached zero.
    pub freed_by_rc: u64,
    /// Objects freed by the cycle collector.
    pub freed_by_collector: u64,
    /// Minor (young-generation) collections run.
    pub minor_collections: u64,
    /// Full collections run (explicit `collect()` calls included).
    pub full_collections: u64,
    /// Possible cycle roots waiting in the buffer now.
    pub roots_buffered: u64,
    /// Objects traced by all collections so far (each visit counts).
    pub nodes_traced: u64,
    /// Objects promoted to the old generation.
    pub promoted: u64,
    /// Old objects alive now.
    pub old_objects: u64,
    /// Time spent in collections.
    pub total_pause: Duration,
    /// Longest single collection.
    pub max_pause: Duration,
}

impl Stats {
    /// Minor plus full collections.
    pub fn collections(&self) -> u64 {
        self.minor_collections + self.full_collections
    }
}
