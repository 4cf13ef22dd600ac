//! `recycler::sync::stats()` counts an exiting thread exactly once.
//!
//! A thread's exit moves its counters to the retired totals; `stats()` must
//! never see them both there and in the thread's slot (too many live
//! objects) nor in neither (too few). This file holds a single test:
//! `stats()` is process-wide.

use recycler::sync::{stats, Rc};

const THREADS: usize = if cfg!(miri) { 20 } else { 2_000 };
const PER_THREAD: usize = 100;

#[test]
fn live_count_is_exact_while_threads_exit() {
    let mut kept: Vec<Rc<u64>> = Vec::new();
    let mut reads = 0u64;
    for t in 0..THREADS {
        let before = kept.len() as u64;
        let worker = std::thread::spawn(move || {
            (0..PER_THREAD)
                .map(|i| Rc::new((t * PER_THREAD + i) as u64))
                .collect::<Vec<_>>()
        });
        loop {
            let finished = worker.is_finished();
            let live = stats().live;
            reads += 1;
            assert!(
                (before..=before + PER_THREAD as u64).contains(&live),
                "thread {t}: live {live} outside {before}..={}",
                before + PER_THREAD as u64
            );
            if finished {
                break;
            }
        }
        kept.extend(worker.join().expect("worker"));
        // The worker has exited (joined): its objects are counted once.
        assert_eq!(stats().live, kept.len() as u64);
    }
    assert!(reads >= THREADS as u64);
    let n = kept.len() as u64;
    let freed_before = stats().freed_by_rc;
    drop(kept);
    assert_eq!(stats().live, 0);
    assert_eq!(stats().freed_by_rc - freed_before, n);
}
