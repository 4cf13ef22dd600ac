//! Counting the benchmark nodes that are still alive.
//!
//! Every node type of every adapter embeds a [`Live`] token. A check run
//! ([`begin`] … [`end`]) has its own epoch number: a token created while the
//! run is active records the epoch and adds one to a global counter, and when
//! it is dropped during the same run it subtracts one. So [`end`] returns
//! exactly the number of nodes created during the check that were never
//! dropped: the leak of that run. Nodes of an earlier run that a lazy
//! collector frees later do not disturb the count, and outside a check run a
//! token costs one relaxed load, so the timed runs are not slowed by a shared
//! counter.

use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

/// Epoch of the active check run; 0 when none is active.
static CURRENT: AtomicU32 = AtomicU32::new(0);
static NEXT_EPOCH: AtomicU32 = AtomicU32::new(1);
static ALIVE: AtomicI64 = AtomicI64::new(0);

/// A drop counter embedded in every benchmark node (idle outside check runs).
#[derive(Debug)]
pub struct Live {
    epoch: u32,
}

impl Live {
    /// A token for a new node; counted if a check run is active.
    #[inline]
    pub fn new() -> Self {
        let epoch = CURRENT.load(Ordering::Relaxed);
        if epoch != 0 {
            ALIVE.fetch_add(1, Ordering::Relaxed);
        }
        Live { epoch }
    }
}

impl Default for Live {
    fn default() -> Self {
        Live::new()
    }
}

impl Drop for Live {
    #[inline]
    fn drop(&mut self) {
        if self.epoch != 0 && self.epoch == CURRENT.load(Ordering::Relaxed) {
            ALIVE.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Starts a check run: nodes created from now on are counted.
pub fn begin() {
    let epoch = NEXT_EPOCH.fetch_add(1, Ordering::SeqCst);
    ALIVE.store(0, Ordering::SeqCst);
    CURRENT.store(epoch, Ordering::SeqCst);
}

/// Number of nodes created since [`begin`] that are alive now.
pub fn alive() -> i64 {
    ALIVE.load(Ordering::SeqCst)
}

/// Ends the check run and returns the nodes created since [`begin`] that are
/// still alive.
pub fn end() -> i64 {
    let alive = ALIVE.load(Ordering::SeqCst);
    CURRENT.store(0, Ordering::SeqCst);
    alive
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_nodes_of_the_active_run() {
        let before = Live::new();
        begin();
        let a = Live::new();
        let b = Live::new();
        drop(before); // created before the run: must not decrement
        drop(a);
        assert_eq!(alive(), 1);
        assert_eq!(end(), 1);
        begin();
        drop(b); // from an earlier run: ignored
        assert_eq!(end(), 0);
    }
}
