//! Triggers and generations: Nim16's exact threshold rule, Manual, and the
//! adaptive generational policy's bounded work and memory.
mod common;

use common::*;
use recycler::{AdaptiveConfig, Gc, Policy};

/// Creates a 2-node cycle and drops it: two roots buffered.
fn drop_two_cycle() {
    let a = Node::new();
    let b = Node::new();
    a.link(&b);
    b.link(&a);
}

#[test]
fn manual_never_collects_by_itself() {
    recycler::set_policy(Policy::Manual);
    let cycles: u64 = if cfg!(miri) { 200 } else { 2_000 };
    for _ in 0..cycles {
        drop_two_cycle();
    }
    let stats = recycler::stats();
    assert_eq!(stats.collections(), 0);
    assert_eq!(stats.roots_buffered, 2 * cycles);
    assert_eq!(stats.live, 2 * cycles);
    recycler::collect();
    let stats = recycler::stats();
    assert_eq!(stats.live, 0);
    assert_eq!(stats.freed_by_collector, 2 * cycles);
    assert_eq!(stats.roots_buffered, 0);
}

#[test]
fn nim16_threshold_shrinks_to_sixteen_when_collections_free_garbage() {
    recycler::set_policy(Policy::Nim16);
    // Thresholds 128, 84, 56, 36, 24, 16, 16: each collection frees all it
    // touches, so the threshold shrinks by a third down to the floor of 16.
    let mut cycles_between = Vec::new();
    let mut since = 0;
    let mut collections = 0;
    while cycles_between.len() < 7 {
        drop_two_cycle();
        since += 1;
        let now = recycler::stats().collections();
        if now != collections {
            collections = now;
            cycles_between.push(since);
            since = 0;
        }
    }
    assert_eq!(cycles_between, vec![64, 42, 28, 18, 12, 8, 8]);
    let stats = recycler::stats();
    assert_eq!(stats.full_collections, 7);
    assert_eq!(stats.minor_collections, 0);
    assert_eq!(stats.promoted, 0, "Nim16 has no generations");
}

/// Drops 2-cycles until the next collection; returns how many it took.
fn cycles_until_collection() -> u64 {
    let before = recycler::stats().collections();
    let mut cycles = 0;
    while recycler::stats().collections() == before {
        drop_two_cycle();
        cycles += 1;
    }
    cycles
}

#[test]
fn nim16_shared_threshold_is_one_threshold_for_every_thread() {
    // One thread shrinks the shared threshold (every collection frees all it
    // touches): 128, 84, 56, 36, 24, 16.
    std::thread::spawn(|| {
        recycler::set_policy(Policy::Nim16);
        recycler::set_nim16_shared_threshold(true);
        let periods: Vec<u64> = (0..5).map(|_| cycles_until_collection()).collect();
        assert_eq!(periods, [64, 42, 28, 18, 12]);
        assert_eq!(recycler::nim16_threshold(), 16);
        recycler::collect();
    })
    .join()
    .unwrap();
    // Another thread that opts in starts from there, not from 128.
    std::thread::spawn(|| {
        recycler::set_policy(Policy::Nim16);
        recycler::set_nim16_shared_threshold(true);
        assert_eq!(recycler::nim16_threshold(), 16);
        assert_eq!(cycles_until_collection(), 8);
        recycler::collect();
    })
    .join()
    .unwrap();
    // A thread that does not opt in keeps its own threshold.
    recycler::set_policy(Policy::Nim16);
    assert_eq!(recycler::nim16_threshold(), 128);
    assert_eq!(cycles_until_collection(), 64);
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn nim16_threshold_grows_when_collections_touch_live_objects() {
    recycler::set_policy(Policy::Manual);
    // A live hub that every dropped cycle points into: 1000 nodes (400 under
    // Miri; more than the 288 garbage nodes of the third collection, so each
    // collection still frees less than half of what it touches).
    const HUB: u64 = if cfg!(miri) { 400 } else { 1000 };
    let hub = Node::new();
    for _ in 0..HUB {
        let n = Node::new();
        n.link(&hub);
        hub.link(&n);
    }
    recycler::collect();
    recycler::set_policy(Policy::Nim16);
    let base = recycler::stats();
    // Each request: a 2-cycle holding the hub; dropping the hub clone buffers
    // the hub, so every collection re-traverses all the hub's nodes and frees
    // far fewer than half of what it touches: the threshold grows by 3/2.
    let mut points: Vec<u64> = Vec::new();
    let mut since = 0;
    let mut collections = base.collections();
    while points.len() < 3 {
        {
            let a = Node::new();
            let b = Node::new();
            a.link(&b);
            b.link(&a);
            a.link(&hub.clone());
        }
        since += 1;
        let now = recycler::stats().collections();
        if now != collections {
            collections = now;
            points.push(since);
            since = 0;
        }
    }
    // Thresholds 128, 192, 288 roots: each cycle adds two roots, the hub one
    // per collection period.
    assert_eq!(points[0], 64);
    for (i, threshold) in [128u64, 192, 288].into_iter().enumerate() {
        assert!(points[i].abs_diff(threshold / 2) <= 1, "{points:?}");
    }
    let traced = recycler::stats().nodes_traced - base.nodes_traced;
    assert!(
        traced >= 3 * (HUB + 1),
        "every collection walked the hub: {traced}"
    );
    drop(hub);
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn adaptive_minor_collections_do_not_retrace_an_old_hub() {
    recycler::set_policy(Policy::Adaptive);
    recycler::set_adaptive_config(AdaptiveConfig::default().min_roots(64));
    // Smaller under Miri; the ratio of requests to hub nodes stays 2.
    const HUB: u64 = if cfg!(miri) { 300 } else { 10_000 };
    let hub = Node::new();
    for _ in 0..HUB {
        let n = Node::new();
        n.link(&hub);
        hub.link(&n);
    }
    // The first collection promotes the hub.
    recycler::collect();
    assert_eq!(recycler::stats().old_objects, HUB + 1);
    let base = recycler::stats();
    const REQUESTS: u64 = 2 * HUB;
    for _ in 0..REQUESTS {
        let req = Node::new();
        let ctx = Node::new();
        req.link(&ctx);
        ctx.link(&req);
        ctx.link(&hub);
    }
    let stats = recycler::stats();
    let minors = stats.minor_collections - base.minor_collections;
    let traced = stats.nodes_traced - base.nodes_traced;
    assert!(
        minors >= REQUESTS * 2 / 64 / 2,
        "minor collections ran: {minors}"
    );
    // Work grows with the garbage (two nodes per request), not with the hub.
    assert!(
        traced <= 2 * REQUESTS + 64,
        "traced {traced} nodes for {REQUESTS} requests"
    );
    assert_eq!(stats.full_collections, base.full_collections);
    assert!(stats.live <= HUB + 1 + 2 * 64 + 2);
    drop(hub);
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn adaptive_memory_stays_flat_under_cycle_churn() {
    recycler::set_policy(Policy::Adaptive);
    // Under Miri, a smaller trigger and fewer rounds (still ten times the
    // bound in nodes).
    let (config, rounds) = if cfg!(miri) {
        (AdaptiveConfig::default().min_roots(64), 700)
    } else {
        (AdaptiveConfig::default(), 300_000)
    };
    recycler::set_adaptive_config(config);
    let mut max_live = 0;
    for _ in 0..rounds {
        drop_two_cycle();
        max_live = max_live.max(recycler::stats().live);
    }
    assert!(
        max_live <= 2 * config.min_roots as u64 + 2,
        "max live {max_live}"
    );
    assert!(recycler::stats().freed_by_collector >= rounds as u64 * 2 - max_live);
    // The garbage still waiting goes with an explicit collection (a thread
    // that exits does not collect; Miri's leak check would see it).
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn adaptive_roots_of_work_in_progress_ripen_instead_of_being_promoted() {
    recycler::set_policy(Policy::Adaptive);
    recycler::set_adaptive_config(AdaptiveConfig::default().min_roots(32));
    recycler::collect();
    let base = recycler::stats();
    // Requests of two nodes in a cycle, a few in flight at a time: each
    // buffers a live root when it starts (a handle dropped while the other
    // node still holds it) and becomes garbage a few requests later.
    let in_flight = cycle_requests(8);
    let stats = recycler::stats();
    assert!(stats.minor_collections - base.minor_collections >= CYCLE_REQUESTS / 64);
    // The in-flight requests' roots are among the newest 32 whenever the
    // trigger runs: none is judged while live, so nothing is promoted, no
    // full collection is needed, and every collection traces garbage only.
    assert_eq!(stats.promoted, base.promoted);
    assert_eq!(stats.full_collections, base.full_collections);
    assert_eq!(
        stats.nodes_traced - base.nodes_traced,
        stats.freed_by_collector - base.freed_by_collector
    );
    // At most two trigger intervals of garbage wait (64 roots, two nodes
    // each), besides the requests in flight.
    assert!(stats.live <= 2 * 64 + 2 * 9, "live {}", stats.live);
    drop(in_flight);
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn promoted_cycles_are_collected_by_an_automatic_full_collection() {
    recycler::set_policy(Policy::Adaptive);
    // Cycles that survive a collection become old...
    let mut held = Vec::new();
    for _ in 0..100 {
        let a = Node::new();
        let b = Node::new();
        a.link(&b);
        b.link(&a);
        held.push(a);
    }
    let old_cycles: Vec<_> = held.iter().map(Gc::downgrade).collect();
    recycler::collect();
    assert_eq!(recycler::stats().old_objects, 200);
    // ...and become garbage while old: minor collections cannot free them.
    drop(held);
    recycler::collect_minor();
    assert_eq!(recycler::stats().live, 200);
    // Work like a server with a small trigger (8 roots, so a full
    // collection is due after 256 promotions or old roots): requests stay in
    // flight longer than the newest roots ripen (64 requests against 8
    // roots), so many survive a minor collection and are promoted;
    // promotions plus the old roots waiting trigger a full collection on
    // their own, which frees the old cycles.
    recycler::set_adaptive_config(AdaptiveConfig::default().min_roots(8));
    let fulls = recycler::stats().full_collections;
    let in_flight = cycle_requests(64);
    assert!(recycler::stats().full_collections > fulls);
    drop(in_flight);
    let left = old_cycles.iter().filter(|w| w.upgrade().is_some()).count();
    assert_eq!(left, 0, "old cycles freed automatically");
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn a_cycle_across_generations_waits_for_a_full_collection() {
    recycler::set_policy(Policy::Manual);
    let old = Node::new();
    recycler::set_policy(Policy::Adaptive);
    let keep = old.clone();
    drop(keep); // buffer `old`
    recycler::collect_minor(); // `old` is live: promoted
    assert_eq!(recycler::stats().old_objects, 1);
    recycler::set_policy(Policy::Manual);
    let young = Node::new();
    old.link(&young);
    young.link(&old);
    drop((old, young));
    recycler::collect_minor();
    assert!(
        take_dropped().is_empty(),
        "a minor collection keeps old objects"
    );
    recycler::collect();
    assert_eq!(take_dropped().len(), 2);
    assert_eq!(recycler::stats().old_objects, 0);
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn leaf_types_are_never_buffered() {
    recycler::set_policy(Policy::Adaptive);
    let s = Gc::new(String::from("leaf"));
    for _ in 0..100 {
        let c = s.clone();
        drop(c);
    }
    assert_eq!(recycler::stats().roots_buffered, 0);
    let n = Node::new();
    for _ in 0..100 {
        drop(n.clone());
    }
    assert_eq!(recycler::stats().roots_buffered, 1, "buffered once");
    drop(n);
    assert_eq!(recycler::stats().roots_buffered, 0, "unbuffered when freed");
}

/// A complete tree of `depth` whose children point back to their parent
/// (every edge a 2-cycle); returns the root. The children are moved into
/// their parent, so building it buffers no root.
fn parent_tree(depth: u32) -> Gc<Node> {
    let node = Node::new();
    if depth > 0 {
        for _ in 0..2 {
            let child = parent_tree(depth - 1);
            child.link(&node);
            node.edges.borrow_mut().push(child);
        }
    }
    node
}

#[test]
fn adaptive_collects_large_garbage_behind_few_roots() {
    recycler::set_policy(Policy::Adaptive);
    // Each dropped tree buffers a single root (its root, still pointed to by
    // its children), far fewer than `min_roots`: the growth of the live
    // objects triggers the minor collections.
    let (config, depth, trees) = if cfg!(miri) {
        (AdaptiveConfig::default().young_objects(64), 4, 40)
    } else {
        (AdaptiveConfig::default(), 9, 100)
    };
    // Roots alone would not trigger anything here.
    let config = config.min_roots(1024);
    recycler::set_adaptive_config(config);
    let tree = (1u64 << (depth + 1)) - 1;
    let base = recycler::stats();
    let mut max_live = 0;
    for _ in 0..trees {
        drop(parent_tree(depth));
        max_live = max_live.max(recycler::stats().live - base.live);
    }
    let stats = recycler::stats();
    // One root per tree, far fewer than `min_roots` in all.
    assert!(trees < config.min_roots as u64);
    assert!(
        max_live <= config.young_objects as u64 + tree,
        "max live {max_live}"
    );
    assert!(stats.freed_by_collector - base.freed_by_collector >= trees * tree - max_live);
    recycler::collect();
    assert_eq!(recycler::stats().live, base.live);
}

/// Requests of [`cycle_requests`].
const CYCLE_REQUESTS: u64 = if cfg!(miri) { 500 } else { 5_000 };

/// Runs [`CYCLE_REQUESTS`] requests of a 2-node cycle each, keeping the
/// last `keep` in flight; returns those.
fn cycle_requests(keep: usize) -> std::collections::VecDeque<Gc<Node>> {
    let mut in_flight = std::collections::VecDeque::new();
    for _ in 0..CYCLE_REQUESTS {
        let a = Node::new();
        let b = Node::new();
        a.link(&b);
        b.link(&a);
        in_flight.push_back(a);
        if in_flight.len() > keep {
            in_flight.pop_front();
        }
    }
    in_flight
}

/// Grows the doubly linked list at `head` by `n` nodes, pushing at the head
/// as the benchmark does: each replaced head is buffered (its handle drops
/// while the new head still points to it) and stays live.
fn grow_list(head: &mut Gc<Node>, n: u64) {
    for _ in 0..n {
        let node = Node::new();
        node.link(head);
        head.link(&node);
        *head = node;
    }
}

#[test]
fn a_full_collections_live_work_is_paid_for_by_new_roots() {
    recycler::set_policy(Policy::Adaptive);
    // A small trigger (8 roots: the floor of the full budget is 256
    // promotions) and a list larger than that and than a quarter of the old
    // generation, so that only the amortisation holds the next full
    // collection.
    recycler::set_adaptive_config(AdaptiveConfig::default().min_roots(8));
    let len: u64 = if cfg!(miri) { 600 } else { 4_000 };
    let mut head = Node::new();
    grow_list(&mut head, len);
    // Every node is in one strongly connected component with the head, so
    // this traces the whole list, all live, and promotes it.
    recycler::collect();
    let base = recycler::stats();
    assert_eq!(base.old_objects, len + 1);
    // Building on: the first minor collections find only live nodes (and
    // would re-buffer the old ones next to them as old roots), so the young
    // roots trigger full collections instead, which re-trace the whole
    // list: the first waits for as many new roots as the list has nodes.
    // Under CPython's rule alone a full collection would run every
    // `len / 4` promotions.
    grow_list(&mut head, len * 3 / 4);
    let stats = recycler::stats();
    assert_eq!(stats.full_collections, base.full_collections);
    assert!(stats.minor_collections - base.minor_collections <= 2);
    // Minor collections traced some of the new nodes, never the old list.
    let traced = stats.nodes_traced - base.nodes_traced;
    assert!(traced <= len * 3 / 4, "traced {traced}");
    // The rule delays full collections, it does not stop them: once the
    // list is garbage, further new roots bring one that frees it (while
    // minor collections are barren, a full one waits for twice as many
    // young roots as the live objects the last one traced).
    let first = Gc::downgrade(&head);
    head = Node::new();
    grow_list(&mut head, len * 4);
    assert!(recycler::stats().full_collections > base.full_collections);
    assert!(first.upgrade().is_none(), "the first list was collected");
    drop(head);
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn barren_minor_collections_give_way_to_full_ones_until_young_garbage_returns() {
    recycler::set_policy(Policy::Adaptive);
    recycler::set_adaptive_config(AdaptiveConfig::default().min_roots(8));
    recycler::collect();
    let base = recycler::stats();
    // A list pushed node by node: every minor collection finds live nodes
    // only. After two of them, the young roots trigger full collections.
    let len: u64 = if cfg!(miri) { 400 } else { 4_000 };
    let mut head = Node::new();
    grow_list(&mut head, len);
    let built = recycler::stats();
    assert_eq!(built.minor_collections - base.minor_collections, 2);
    assert!(built.full_collections > base.full_collections);
    assert_eq!(built.freed_by_collector, base.freed_by_collector);
    // The full collections' live work is paid for by new roots: a bounded
    // number of traces per node (each full one waits for twice as many
    // young roots as there are live objects).
    let traced = built.nodes_traced - base.nodes_traced;
    assert!(traced <= 3 * len, "traced {traced} for {len} nodes");
    // The list dies and garbage cycles follow: the full collections free
    // the list, then mostly young garbage, and minor collections resume.
    drop(head);
    let mut churned = 0;
    while recycler::stats().minor_collections == built.minor_collections {
        drop_two_cycle();
        churned += 1;
        assert!(churned <= 4 * len, "minor collections never resumed");
    }
    let stats = recycler::stats();
    assert!(stats.freed_by_collector - built.freed_by_collector >= len);
    // Garbage cycles are freed by minor collections again: memory stays
    // within the trigger's bound.
    for _ in 0..len {
        drop_two_cycle();
    }
    let stats = recycler::stats();
    assert!(stats.live <= 2 * 8 * 2 + 2 * 2, "live {}", stats.live);
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn lists_built_and_dropped_whole_are_traced_by_rare_full_collections() {
    recycler::set_policy(Policy::Adaptive);
    recycler::set_adaptive_config(AdaptiveConfig::default().min_roots(8));
    recycler::collect();
    // The linked-list benchmark: lists pushed node by node, each dropped
    // whole once built. Minor collections find only live nodes, so full
    // collections replace them, each waiting for twice as many young roots
    // as the live objects it traced. Those free young garbage (lists that
    // died before any collection promoted them), which brings minor
    // collections back, to be found barren again: each time they wait
    // twice as long before being tried again.
    let (len, lists): (u64, u64) = if cfg!(miri) { (300, 16) } else { (4_096, 32) };
    let settle = lists / 4;
    let mut base = recycler::stats();
    for list in 0..lists {
        if list == settle {
            base = recycler::stats();
        }
        let mut head = Node::new();
        grow_list(&mut head, len);
        drop(head);
    }
    let stats = recycler::stats();
    let minors = stats.minor_collections - base.minor_collections;
    let traced = stats.nodes_traced - base.nodes_traced;
    let nodes = (lists - settle) * (len + 1);
    // Measured: 4 minor collections and 1.53 traces per node (1.70 for the
    // short lists). Full collections every live-objects' worth of roots
    // gave 2.0 traces per node (1.9); twice that but minor collections
    // tried again after every full one that freed young garbage, 18 minor
    // collections (8).
    assert!(minors <= 6, "{minors} minor collections");
    assert!(traced * 5 <= nodes * 9, "traced {traced} for {nodes} nodes");
    recycler::collect();
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn adaptive_config_at_its_limits_does_not_overflow() {
    // `min_roots` is also how many roots ripen, so the trigger compares the
    // young roots with twice it: that sum overflowed (a debug build's panic
    // in the drop that buffers a root; an internal review found it).
    recycler::set_policy(Policy::Adaptive);
    recycler::set_adaptive_config(
        AdaptiveConfig::default()
            .min_roots(usize::MAX)
            .young_objects(usize::MAX),
    );
    let before = recycler::stats();
    let a = Node::new();
    a.link(&a);
    drop(a.clone());
    drop(a);
    assert_eq!(
        recycler::stats().collections(),
        before.collections(),
        "never due"
    );
    recycler::collect();
    assert_eq!(
        recycler::stats().freed_by_collector - before.freed_by_collector,
        1
    );
    recycler::set_adaptive_config(AdaptiveConfig::default());
}
