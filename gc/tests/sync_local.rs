//! Where a mutator's automatic collections take their roots: from its own
//! buffer (and those of exited threads), not from every thread's; the
//! buffer of a thread that stops buffering is taken once no collection took
//! it for 8 collections (`sync` module docs, *Where collections run*).
//!
//! One test in this file: the collector is process-wide, and another test's
//! `collect()` would take every buffer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};

use recycler::sync::{collect, stats, Gc};
use recycler::Trace;

/// Sets its flag when dropped.
struct Flag(Arc<AtomicBool>);

impl Drop for Flag {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

static CHURNED_DROPS: AtomicUsize = AtomicUsize::new(0);

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    #[trace(skip)]
    flag: Option<Flag>,
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.flag.is_none() {
            CHURNED_DROPS.fetch_add(1, SeqCst);
        }
    }
}

/// Builds a garbage two-node cycle (both nodes buffered by this thread).
fn garbage_cycle(flag: Option<Flag>) {
    let a = Gc::new(Node {
        next: Mutex::new(None),
        flag,
    });
    let b = Gc::new(Node {
        next: Mutex::new(Some(a.clone())),
        flag: None,
    });
    *a.next.lock().unwrap() = Some(b);
}

fn collections() -> u64 {
    let s = stats();
    s.minor_collections + s.full_collections
}

/// Churns garbage cycles on this thread until its automatic collections
/// have run `n` more times.
fn churn_until(n: u64) {
    let target = collections() + n;
    let mut cycles = 0u64;
    while collections() < target {
        garbage_cycle(None);
        cycles += 1;
        assert!(cycles < 10_000_000, "no automatic collection ran");
    }
}

#[test]
#[cfg_attr(miri, ignore = "needs thousands of roots per automatic collection")]
fn a_mutator_collects_its_own_roots_and_stale_buffers() {
    let idle_dropped = Arc::new(AtomicBool::new(false));
    let (built, wait_built) = mpsc::channel();
    let (release, wait_release) = mpsc::channel::<()>();
    let idle = {
        let flag = Flag(idle_dropped.clone());
        std::thread::spawn(move || {
            // A cycle whose roots sit in this thread's buffer; then the
            // thread stays alive and buffers nothing more.
            garbage_cycle(Some(flag));
            built.send(()).unwrap();
            wait_release.recv().unwrap();
        })
    };
    wait_built.recv().unwrap();

    // This thread's own collections free its own garbage...
    churn_until(1);
    assert!(
        CHURNED_DROPS.load(SeqCst) > 0,
        "the churned cycles were freed"
    );
    // ...and leave the idle thread's buffer alone while it is fresh.
    assert!(
        !idle_dropped.load(SeqCst),
        "a mutator's collection took another live thread's fresh buffer"
    );

    // Once no collection took that buffer for 8 collections, the next one
    // takes it and frees the idle thread's cycle.
    let before = collections();
    while !idle_dropped.load(SeqCst) {
        churn_until(1);
        assert!(
            collections() - before <= 9,
            "the idle thread's garbage outlived 9 collections"
        );
    }

    release.send(()).unwrap();
    idle.join().unwrap();
    collect();
    assert_eq!(stats().live, 0, "everything freed after collect()");
}
