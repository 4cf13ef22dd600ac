//! Memory stays bounded under steady cycle churn with the default
//! (`Adaptive`) policy of `recycler::sync`.
//!
//! Two threads each keep making garbage 2-cycles whose members also point at
//! a shared live chain, so every collection traces the chain in vain. The
//! trigger must be based on that wasted work, not on everything the last
//! collection traced (garbage included): otherwise each interval between
//! collections is longer than the last and the garbage grows with the run.
//! The bound below does not depend on the run length.
//!
//! This file holds a single test: `stats()` is process-wide.

use std::sync::{Arc, Barrier, Mutex};

use recycler::sync::{collect, stats, Gc};
use recycler::Trace;

const THREADS: usize = 2;
const CYCLES: usize = if cfg!(miri) { 1_500 } else { 150_000 };
const CHAIN: usize = if cfg!(miri) { 20 } else { 2_000 };

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    live: Option<Gc<Node>>,
}

fn node(live: Option<Gc<Node>>) -> Gc<Node> {
    Gc::new(Node {
        next: Mutex::new(None),
        live,
    })
}

#[test]
fn garbage_stays_bounded_under_steady_churn() {
    let mut head: Option<Gc<Node>> = None;
    for _ in 0..CHAIN {
        let n = node(None);
        *n.next.lock().unwrap() = head.take();
        head = Some(n);
    }
    let head = head.expect("chain");
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let head = head.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let mut max_live = 0;
                for i in 0..CYCLES {
                    let a = node(Some(head.clone()));
                    let b = node(Some(head.clone()));
                    *a.next.lock().unwrap() = Some(b.clone());
                    *b.next.lock().unwrap() = Some(a);
                    drop(b);
                    if i % 256 == 0 {
                        max_live = max_live.max(stats().live);
                    }
                }
                max_live
            })
        })
        .collect();
    let max_live = workers
        .into_iter()
        .map(|w| w.join().expect("worker"))
        .max()
        .expect("workers");
    let s = stats();
    eprintln!("max live {max_live}; {s:?}");
    // Each thread collects after at most max(1024, live traced ≈ CHAIN)
    // new roots (one root and two objects per cycle); allow for the other
    // thread's garbage, a collection in progress and a retried component.
    let bound = (CHAIN + 8 * THREADS * 2 * 1024.max(CHAIN)) as u64;
    assert!(
        max_live <= bound,
        "live objects reached {max_live} (bound {bound}); {s:?}"
    );
    assert!(s.collections() > 0, "the default policy never collected");
    drop(head);
    collect();
    assert_eq!(stats().live, 0, "{:?}", stats());
}
