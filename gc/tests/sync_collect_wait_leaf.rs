//! Hostile review: `collect()` returns only after the frees of the
//! collections begun before it — including the values those frees release
//! by counting (a `sync::Gc` leaf owned by a member of the collected cycle),
//! not only the members themselves.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use recycler::sync::{collect, set_policy, Gc};
use recycler::{Policy, Trace};

static MEMBER_DROPPED: AtomicBool = AtomicBool::new(false);
static LEAF_DROPPED: AtomicBool = AtomicBool::new(false);

/// A resource a cycle member owns alone (say, a file to flush).
#[derive(Trace)]
struct Leaf;

impl Drop for Leaf {
    fn drop(&mut self) {
        std::thread::sleep(Duration::from_millis(200));
        LEAF_DROPPED.store(true, SeqCst);
    }
}

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    leaf: Option<Gc<Leaf>>,
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.leaf.is_some() {
            MEMBER_DROPPED.store(true, SeqCst);
        }
    }
}

#[test]
fn collect_waits_for_the_leaves_of_earlier_collections() {
    set_policy(Policy::Manual);
    let earlier = std::thread::spawn(|| {
        set_policy(Policy::Manual);
        let a = Gc::new(Node {
            next: Mutex::new(None),
            leaf: Some(Gc::new(Leaf)),
        });
        let b = Gc::new(Node {
            next: Mutex::new(Some(a.clone())),
            leaf: None,
        });
        *a.next.lock().unwrap() = Some(b);
        drop(a);
        collect();
    });
    let start = Instant::now();
    while !MEMBER_DROPPED.load(SeqCst) {
        assert!(start.elapsed() < Duration::from_secs(20));
        std::thread::yield_now();
    }
    collect();
    assert!(
        LEAF_DROPPED.load(SeqCst),
        "collect() returned before the leaf of an earlier collection's cycle was dropped"
    );
    earlier.join().unwrap();
}
