//! `recycler::sync::stats()` counts an exiting thread exactly once.
//!
//! A thread's exit moves its counters to the retired totals; `stats()` must
//! never see them both there and in the thread's slot (too many live
//! objects) nor in neither (too few). Main spawns threads one after another,
//! each allocating objects that main keeps, while a reader thread checks
//! every `stats().live` against bounds that main publishes around each
//! spawn and join. This file holds a single test: `stats()` is process-wide.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use recycler::sync::{stats, Rc};

const THREADS: usize = if cfg!(miri) { 10 } else { 2_000 };
const PER_THREAD: u64 = 100;

#[test]
fn live_count_is_exact_while_threads_exit() {
    // `lower` = objects of joined threads, `upper` = that plus the objects of
    // the thread in flight; both only grow.
    let lower = Arc::new(AtomicU64::new(0));
    let upper = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (lower, upper, stop) = (lower.clone(), upper.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            let mut wrong = Vec::new();
            while !stop.load(SeqCst) {
                let lo = lower.load(SeqCst);
                let live = stats().live;
                let hi = upper.load(SeqCst);
                reads += 1;
                if !(lo..=hi).contains(&live) && wrong.len() < 10 {
                    wrong.push((lo, live, hi));
                }
            }
            (reads, wrong)
        })
    };
    let mut kept: Vec<Rc<u64>> = Vec::new();
    for t in 0..THREADS as u64 {
        upper.fetch_add(PER_THREAD, SeqCst);
        let worker = std::thread::spawn(move || {
            (0..PER_THREAD)
                .map(|i| Rc::new(t * PER_THREAD + i))
                .collect::<Vec<_>>()
        });
        kept.extend(worker.join().expect("worker"));
        lower.fetch_add(PER_THREAD, SeqCst);
        // The worker has exited (joined): its objects are counted once.
        assert_eq!(stats().live, kept.len() as u64);
    }
    stop.store(true, SeqCst);
    let (reads, wrong) = reader.join().expect("reader");
    assert!(
        wrong.is_empty(),
        "stats().live outside [objects of joined threads, + the thread in flight] \
         (lower, live, upper): {wrong:?} in {reads} reads"
    );
    assert!(reads > 0);
    let n = kept.len() as u64;
    let freed_before = stats().freed_by_rc;
    drop(kept);
    assert_eq!(stats().live, 0);
    assert_eq!(stats().freed_by_rc - freed_before, n);
}
