//! `sync::collect()` waits for the frees of the collections that began
//! before it, and not for later ones.
//!
//! Earlier ones: another thread's collection is dropping a cycle (slowly)
//! when main calls `collect()`, which finds nothing itself; it returns only
//! after that drop has ended.
//!
//! Later ones: main collects a cycle whose destructor starts another thread's
//! `collect()` and waits until that collection is dropping its own cycle,
//! whose destructor in turn waits for main's `collect()` to return. Main's
//! call must not wait for that later collection: it would wait for a
//! destructor that waits for it. (It used to wait until no collection at
//! all was dropping values, which also starved it under steady churn.)
//! One test: collections are process-wide.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use recycler::sync::{collect, set_policy, Gc};
use recycler::{Policy, Trace};

/// Only bounds a failing run (which would otherwise hang).
const DEADLINE: Duration = Duration::from_secs(if cfg!(miri) { 600 } else { 20 });

static GO: AtomicBool = AtomicBool::new(false);
static LATER_DROPPING: AtomicBool = AtomicBool::new(false);
static MAIN_RETURNED: AtomicBool = AtomicBool::new(false);
static TIMED_OUT: Mutex<Vec<&str>> = Mutex::new(Vec::new());
static DROPPED: AtomicUsize = AtomicUsize::new(0);
static SLOW_DROPPING: AtomicBool = AtomicBool::new(false);
static SLOW_DROPPED: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Plain,
    /// In main's cycle: starts the other thread's collection and waits
    /// until that one drops its cycle.
    First,
    /// In the other thread's cycle: waits for main's `collect()` to return.
    Later,
    /// Drops slowly, in another thread's collection.
    Slow,
}

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    #[trace(skip)]
    role: Role,
}

fn wait_for(flag: &AtomicBool, what: &'static str) {
    let start = Instant::now();
    while !flag.load(SeqCst) {
        if start.elapsed() > DEADLINE {
            TIMED_OUT.lock().unwrap().push(what);
            return;
        }
        std::thread::yield_now();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, SeqCst);
        match self.role {
            Role::Plain => {}
            Role::First => {
                GO.store(true, SeqCst);
                wait_for(&LATER_DROPPING, "the later collection");
            }
            Role::Later => {
                LATER_DROPPING.store(true, SeqCst);
                wait_for(&MAIN_RETURNED, "main's collect()");
            }
            Role::Slow => {
                SLOW_DROPPING.store(true, SeqCst);
                std::thread::sleep(Duration::from_millis(100));
                SLOW_DROPPED.store(true, SeqCst);
            }
        }
    }
}

fn cycle(role: Role) {
    let a = Gc::new(Node {
        next: Mutex::new(None),
        role,
    });
    let b = Gc::new(Node {
        next: Mutex::new(Some(a.clone())),
        role: Role::Plain,
    });
    *a.next.lock().unwrap() = Some(b);
}

#[test]
fn collect_waits_for_earlier_collections_only() {
    set_policy(Policy::Manual);
    let earlier = std::thread::spawn(|| {
        set_policy(Policy::Manual);
        cycle(Role::Slow);
        collect();
    });
    wait_for(&SLOW_DROPPING, "the earlier collection");
    collect();
    assert!(
        SLOW_DROPPED.load(SeqCst),
        "collect() returned while an earlier collection was dropping"
    );
    earlier.join().unwrap();

    let later = std::thread::spawn(|| {
        set_policy(Policy::Manual);
        wait_for(&GO, "main's destructor");
        cycle(Role::Later);
        collect();
    });
    cycle(Role::First);
    collect();
    MAIN_RETURNED.store(true, SeqCst);
    later.join().unwrap();
    assert_eq!(*TIMED_OUT.lock().unwrap(), Vec::<&str>::new());
    assert_eq!(DROPPED.load(SeqCst), 6);
}
