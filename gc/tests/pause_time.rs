//! `Stats::total_pause_cpu` (the collecting thread's CPU time) is positive
//! after a collection that freed garbage and never exceeds the wall-clock
//! `total_pause`, for both collectors.

use std::cell::RefCell;
use std::sync::Mutex;

use recycler::{Gc, Trace};

const RING: usize = if cfg!(miri) { 20 } else { 10_000 };

#[derive(Trace)]
struct Node {
    next: RefCell<Option<Gc<Node>>>,
}

#[derive(Trace)]
struct SyncNode {
    next: Mutex<Option<recycler::sync::Gc<SyncNode>>>,
}

#[test]
fn cpu_pause_is_positive_and_within_wall_pause() {
    let before = recycler::stats();
    let first = Gc::new(Node {
        next: RefCell::new(None),
    });
    let mut last = first.clone();
    for _ in 1..RING {
        let node = Gc::new(Node {
            next: RefCell::new(None),
        });
        *last.next.borrow_mut() = Some(node.clone());
        last = node;
    }
    *last.next.borrow_mut() = Some(first);
    drop(last);
    recycler::collect();
    let after = recycler::stats();
    assert_eq!(
        after.freed_by_collector,
        before.freed_by_collector + RING as u64
    );
    let cpu = after.total_pause_cpu - before.total_pause_cpu;
    let wall = after.total_pause - before.total_pause;
    assert!(cpu > std::time::Duration::ZERO, "cpu {cpu:?}");
    assert!(cpu <= wall, "cpu {cpu:?} > wall {wall:?}");
}

#[test]
fn sync_cpu_pause_is_positive_and_within_wall_pause() {
    use recycler::sync::Gc;
    let before = recycler::sync::stats();
    let first = Gc::new(SyncNode {
        next: Mutex::new(None),
    });
    let mut last = first.clone();
    for _ in 1..RING {
        let node = Gc::new(SyncNode {
            next: Mutex::new(None),
        });
        *last.next.lock().unwrap() = Some(node.clone());
        last = node;
    }
    *last.next.lock().unwrap() = Some(first);
    drop(last);
    recycler::sync::collect();
    let after = recycler::sync::stats();
    assert!(after.freed_by_collector >= before.freed_by_collector + RING as u64);
    let cpu = after.total_pause_cpu - before.total_pause_cpu;
    let wall = after.total_pause - before.total_pause;
    assert!(cpu > std::time::Duration::ZERO, "cpu {cpu:?}");
    assert!(cpu <= wall, "cpu {cpu:?} > wall {wall:?}");
}
