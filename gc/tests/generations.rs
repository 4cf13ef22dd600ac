//! Generational collection: a minor collection never enters old objects, and
//! cycles that span old and young objects are still freed by full ones.
mod common;

use common::*;
use recycler::{Gc, Policy};

/// Found by the differential test (family `cross_generation`): a garbage
/// cycle between an old object and a young one, with no member left in a
/// roots buffer after a minor collection.
#[test]
fn a_cycle_across_generations_is_freed_after_a_minor_collection() {
    recycler::set_policy(Policy::Adaptive);
    let root = Node::new();
    let old = Node::new();
    root.link(&old);
    drop(old); // buffered
    recycler::collect(); // live through `root`: promoted, no longer buffered
    assert_eq!(recycler::stats().old_objects, 1);

    let young = Node::new();
    young.link(&root.edges.borrow()[0]); // young -> old
    root.edges.borrow_mut().clear(); // the old node is buffered again...
    recycler::collect(); // ...and found live through `young`, which is not traced
    assert_eq!(recycler::stats().old_objects, 1);
    // old -> young, through a reference: the old node's count does not move,
    // so nothing buffers it.
    young.edges.borrow()[0].link(&young);
    let weak = Gc::downgrade(&young);

    drop(young); // the cycle is garbage; only `young` is buffered
                 // The minor collection does not enter the old node, so the edge from it
                 // counts as a reference from outside: `young` looks live and is
                 // promoted. It must stay a candidate for the next full collection.
    recycler::collect_minor();
    assert!(take_dropped().is_empty());
    recycler::collect();
    assert!(weak.upgrade().is_none(), "the old <-> young cycle leaked");
    assert_eq!(take_dropped().len(), 2);
    assert_eq!(recycler::stats().old_objects, 0);
    drop(root);
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn a_minor_collection_frees_young_cycles_and_keeps_old_ones() {
    recycler::set_policy(Policy::Adaptive);
    // An old cycle, garbage.
    let a = Node::new();
    let b = Node::new();
    a.link(&b);
    b.link(&a);
    let keep = a.clone();
    drop((a, b));
    recycler::collect(); // live through `keep`: promoted
    assert_eq!(recycler::stats().old_objects, 2);
    drop(keep);
    // A young cycle, garbage.
    let c = Node::new();
    c.link(&c);
    drop(c);
    recycler::collect_minor();
    assert_eq!(take_dropped().len(), 1, "only the young cycle");
    assert_eq!(recycler::stats().old_objects, 2);
    recycler::collect();
    assert_eq!(take_dropped().len(), 2);
    assert_eq!(recycler::stats().live, 0);
    assert_eq!(recycler::stats().old_objects, 0);
}
