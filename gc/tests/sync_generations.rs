//! Generations of the thread-safe collector: a minor collection never enters
//! old objects, cycles that span old and young objects are still freed by a
//! full one, and the statistics count promotions and old objects exactly.
//!
//! The collector and its statistics are process-wide, so the tests of this
//! file run one at a time (`SERIAL`) with the Manual policy.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};

use recycler::sync::{collect, collect_minor, set_policy, stats, Gc};
use recycler::{Policy, Trace};

static SERIAL: Mutex<()> = Mutex::new(());
static DROPPED: AtomicUsize = AtomicUsize::new(0);

fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    set_policy(Policy::Manual);
    collect();
    DROPPED.store(0, SeqCst);
    guard
}

#[derive(Trace)]
struct Node {
    edges: Mutex<Vec<Gc<Node>>>,
}

impl Node {
    fn new() -> Gc<Node> {
        Gc::new(Node {
            edges: Mutex::new(Vec::new()),
        })
    }

    fn link(&self, to: &Gc<Node>) {
        self.edges.lock().unwrap().push(to.clone());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, SeqCst);
    }
}

/// The single-threaded collector's differential-test finding, on threads:
/// a garbage cycle between an old object and a young one whose only
/// buffered member is young. The minor collection sees the old object's
/// edge as an outside reference; the young member must wait for the next
/// full collection instead of leaving every buffer.
#[test]
fn a_cycle_across_generations_is_freed_by_the_next_full_collection() {
    let _serial = serial();
    let root = Node::new();
    let old = Node::new();
    root.link(&old);
    drop(old); // buffered
    collect(); // live through `root`: promoted
    let old_before = stats().old_objects;

    let young = Node::new();
    young.link(&root.edges.lock().unwrap()[0]); // young -> old
    root.edges.lock().unwrap().clear(); // the old node is buffered again...
    collect(); // ...and found live through `young`, which is not traced
               // old -> young, through a handle: the old node's count does not move,
               // so nothing buffers it.
    young.edges.lock().unwrap()[0].link(&young);
    let weak = Gc::downgrade(&young);
    drop(young); // the cycle is garbage; only `young` is buffered
                 // The minor collection does not enter the old node, so its edge counts
                 // as a reference from outside: `young` looks live and is promoted. It
                 // must stay a candidate for the next full collection.
    collect_minor();
    assert_eq!(
        DROPPED.load(SeqCst),
        0,
        "a minor collection entered an old object"
    );
    // (An upgrade here would buffer `young` again and hide the bug.)
    assert_eq!(weak.strong_count(), 1);
    collect();
    assert!(weak.upgrade().is_none(), "the old <-> young cycle leaked");
    assert_eq!(DROPPED.load(SeqCst), 2);
    assert_eq!(stats().old_objects, old_before - 1);
    drop(root);
}

/// Young cycles hanging off a large old graph cost a minor collection only
/// their own nodes: the old hub is not traced again.
#[test]
fn a_minor_collection_traces_only_young_objects() {
    let _serial = serial();
    const HUB: usize = if cfg!(miri) { 40 } else { 1000 };
    let hub: Vec<Gc<Node>> = (0..HUB).map(|_| Node::new()).collect();
    for w in hub.windows(2) {
        w[0].link(&w[1]);
    }
    hub[HUB - 1].link(&hub[0]);
    for n in &hub[1..] {
        // Buffer every hub node (count drops from 2 to 1).
        drop(n.clone());
    }
    collect(); // the whole ring is live: promoted
    let before = stats();
    assert!(before.old_objects >= HUB as u64);

    const CYCLES: usize = if cfg!(miri) { 10 } else { 100 };
    for i in 0..CYCLES {
        let (a, b) = (Node::new(), Node::new());
        a.link(&b);
        b.link(&a);
        a.link(&hub[i * 7 % HUB]);
        drop((a, b));
    }
    collect_minor();
    let after = stats();
    assert_eq!(DROPPED.load(SeqCst), 2 * CYCLES);
    assert_eq!(after.minor_collections, before.minor_collections + 1);
    // The hub nodes whose counts dropped are old roots, left for a full
    // collection; nothing old was traced.
    assert_eq!(after.nodes_traced - before.nodes_traced, 2 * CYCLES as u64);
    assert_eq!(after.old_objects, before.old_objects);

    drop(hub);
    collect();
    assert_eq!(DROPPED.load(SeqCst), 2 * CYCLES + HUB);
    assert_eq!(stats().old_objects, before.old_objects - HUB as u64);
}

/// Promotion counts each object once; old objects freed by counting or by
/// the collector leave the old population.
#[test]
fn old_objects_are_counted_exactly() {
    let _serial = serial();
    let base = stats();
    let keep = Node::new();
    let other = Node::new();
    keep.link(&other);
    let spare = other.clone();
    drop(other); // buffered
    drop(keep.clone()); // buffered
    collect_minor(); // both live (through `keep`, `spare`): promoted
    collect_minor(); // nothing young left: no new promotion
    let s = stats();
    assert_eq!(s.promoted - base.promoted, 2);
    assert_eq!(s.old_objects - base.old_objects, 2);

    drop(spare);
    drop(keep); // an old object freed by counting, and its child with it
    assert_eq!(DROPPED.load(SeqCst), 2);
    assert_eq!(stats().old_objects, base.old_objects);
}

/// The Adaptive trigger runs minor collections and, once enough objects
/// have been promoted, full ones; a churn of young cycles over an old
/// graph is freed without ever tracing the whole graph at each collection.
#[test]
#[cfg_attr(
    miri,
    ignore = "tens of thousands of cycles to reach the triggers; the paths it runs are covered by the other tests"
)]
fn the_adaptive_policy_runs_minor_and_full_collections() {
    let _serial = serial();
    set_policy(Policy::Adaptive);
    let before = stats();
    const HUB: usize = 5000;
    const CYCLES: usize = 50_000;
    let hub: Vec<Gc<Node>> = (0..HUB).map(|_| Node::new()).collect();
    let mut survivors = Vec::new();
    for i in 0..CYCLES {
        let (a, b) = (Node::new(), Node::new());
        a.link(&b);
        b.link(&a);
        a.link(&hub[i % hub.len()]);
        if i % 50 == 0 {
            // Some cycles live a while: they get promoted.
            survivors.push(a.clone());
        }
        if survivors.len() > 20 {
            survivors.remove(0);
        }
        drop((a, b));
    }
    drop(survivors);
    let s = stats();
    assert!(s.minor_collections > before.minor_collections);
    assert!(s.full_collections > before.full_collections);
    assert!(s.promoted > before.promoted);
    set_policy(Policy::Manual);
    drop(hub);
    collect();
    assert_eq!(DROPPED.load(SeqCst), HUB + 2 * CYCLES);
}
