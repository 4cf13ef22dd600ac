//! Collections of one object racing a thread that replaces the contents of
//! its outer cell (`sync_nested_locks.rs`, `sync_nested_locks_panic.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use recycler::sync::Gc;
use recycler::Trace;

/// Collections (and, natively, at least that many replacements of the
/// outer cell's contents while they run).
pub const ROUNDS: usize = if cfg!(miri) { 40 } else { 200_000 };

/// Runs `ROUNDS` collections of `n` while another thread keeps replacing
/// the contents of its outer cell through `replace` (which returns whether
/// it could); returns how many times it did.
pub fn race<T: Trace + Send + Sync + 'static>(
    n: Gc<T>,
    replace: fn(&T) -> bool,
    collect_once: fn(),
) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let replaced = Arc::new(AtomicU64::new(0));
    let mutator = {
        let n = n.clone();
        let stop = stop.clone();
        let replaced = replaced.clone();
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                if replace(&n) {
                    replaced.fetch_add(1, SeqCst);
                } else {
                    std::hint::spin_loop();
                }
                #[cfg(miri)]
                std::thread::yield_now();
            }
        })
    };
    for _ in 0..ROUNDS {
        // Buffers `n` as a possible root of a cycle: the collection traces it.
        drop(n.clone());
        collect_once();
    }
    stop.store(true, SeqCst);
    mutator.join().unwrap();
    replaced.load(SeqCst)
}
