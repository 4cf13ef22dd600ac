//! Hostile review: with the collector thread, `collect()` after every user
//! thread has joined must leave no unreachable cycle, also when the
//! collector thread is freeing a cycle at that moment whose value owns the
//! last handle to an old garbage cycle (that handle's drop buffers the old
//! cycle only after `collect()`'s own drains).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use recycler::sync::{collect, collect_minor, set_collector_mode, set_policy, CollectorMode, Gc};
use recycler::{Policy, Trace};

static X_DROPPING: AtomicBool = AtomicBool::new(false);
static Y_DROPPED: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Plain,
    /// A member of `x`: drops slowly.
    Slow,
    /// A member of `y`.
    Y,
}

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    other: Option<Gc<Node>>,
    #[trace(skip)]
    role: Role,
}

impl Drop for Node {
    fn drop(&mut self) {
        match self.role {
            Role::Plain => {}
            Role::Slow => {
                X_DROPPING.store(true, SeqCst);
                std::thread::sleep(Duration::from_millis(300));
            }
            Role::Y => Y_DROPPED.store(true, SeqCst),
        }
    }
}

/// A two-node cycle; `first` has role `role` and owns `other`.
fn cycle(role: Role, other: Option<Gc<Node>>) -> Gc<Node> {
    let a = Gc::new(Node {
        next: Mutex::new(None),
        other,
        role,
    });
    let b = Gc::new(Node {
        next: Mutex::new(Some(a.clone())),
        other: None,
        role: Role::Plain,
    });
    *a.next.lock().unwrap() = Some(b);
    a
}

#[test]
#[cfg_attr(miri, ignore = "a liveness check that takes a minute under Miri")]
fn collect_after_join_frees_what_the_collector_threads_frees_release() {
    set_policy(Policy::Manual);
    set_collector_mode(CollectorMode::Thread);
    let worker = std::thread::spawn(|| {
        set_policy(Policy::Manual);
        let y = cycle(Role::Y, None);
        drop(y.clone()); // buffered
        collect_minor(); // `y` is live: promoted
        let x = cycle(Role::Slow, Some(y.clone()));
        drop(y); // `x` owns the last outside handle to the old cycle
        drop(x);
        // Garbage until the collector thread (asked by the Adaptive trigger)
        // frees `x`.
        set_policy(Policy::Adaptive);
        let start = Instant::now();
        while !X_DROPPING.load(SeqCst) {
            assert!(start.elapsed() < Duration::from_secs(20), "no collection");
            drop(cycle(Role::Plain, None));
            // Slowly: the collector thread, not this thread (pacing), must
            // collect.
            std::thread::sleep(Duration::from_micros(200));
        }
    });
    worker.join().unwrap();
    // Every user thread has joined; the collector thread is dropping `x`.
    collect();
    assert!(
        Y_DROPPED.load(SeqCst),
        "an unreachable cycle survived collect()"
    );
    set_collector_mode(CollectorMode::Mutators);
}
