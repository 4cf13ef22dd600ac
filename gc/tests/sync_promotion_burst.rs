//! A large one-off promotion does not let garbage pile up under the default
//! (`Adaptive`) policy of `recycler::sync`.
//!
//! A structure of `HUB` live nodes is built and promoted by one minor
//! collection (a server's hubs, built at start). That collection's wasted
//! work (the live objects it traced) is `HUB`, but the next minor collection
//! never enters those old nodes again, so the trigger must not make this
//! thread wait `HUB` roots before collecting the garbage that follows: it
//! waits at most the longest interval (4096 roots). Without that cap the
//! garbage below reached `2 × HUB` objects.
//!
//! This file holds a single test: `stats()` is process-wide.

use std::sync::Mutex;

use recycler::sync::{collect, collect_minor, set_policy, stats, Gc};
use recycler::{Policy, Trace};

const HUB: usize = if cfg!(miri) { 300 } else { 50_000 };
const CYCLES: usize = if cfg!(miri) { 1_200 } else { 100_000 };
/// The longest Adaptive interval, in roots per thread.
const LONGEST_INTERVAL: usize = 4096;

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
}

fn node() -> Gc<Node> {
    Gc::new(Node {
        next: Mutex::new(None),
    })
}

#[test]
fn garbage_after_a_large_promotion_stays_within_the_longest_interval() {
    // Build the hub with no collection, buffer every node (a clone dropped),
    // and promote all of it in one minor collection.
    set_policy(Policy::Manual);
    let hub: Vec<Gc<Node>> = (0..HUB).map(|_| node()).collect();
    for n in &hub {
        drop(n.clone());
    }
    collect_minor();
    let promoted = stats().promoted;
    assert!(promoted >= HUB as u64, "the hub was promoted: {promoted}");

    // Churn garbage 2-cycles (one root, two objects each) under Adaptive.
    set_policy(Policy::Adaptive);
    let mut max_garbage = 0;
    for i in 0..CYCLES {
        let a = node();
        let b = node();
        *a.next.lock().unwrap() = Some(b.clone());
        *b.next.lock().unwrap() = Some(a);
        drop(b);
        if i % 64 == 0 {
            let live = stats().live as usize;
            max_garbage = max_garbage.max(live.saturating_sub(HUB));
        }
    }
    let s = stats();
    eprintln!("max garbage {max_garbage}; {s:?}");
    // At most the longest interval of roots (two objects each) waits, plus
    // the sampling step and a few objects a collection kept (a component
    // retried); without the cap it reached 2 × HUB.
    let bound = 2 * LONGEST_INTERVAL + 2 * 64 + 256;
    assert!(
        max_garbage <= bound,
        "garbage reached {max_garbage} objects (bound {bound}); {s:?}"
    );

    drop(hub);
    collect();
    assert_eq!(stats().live, 0);
}
