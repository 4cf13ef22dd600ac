mod common;
use common::*;
use recycler::Gc;

#[test]
fn two_cycle_is_collected() {
    let a = Node::new();
    let b = Node::new();
    a.link(&b);
    b.link(&a);
    drop(a);
    drop(b);
    assert_eq!(dropped_count(), 0);
    recycler::collect();
    assert_eq!(dropped_count(), 2);
    let s = recycler::stats();
    assert_eq!(s.live, 0);
    assert_eq!(s.freed_by_collector, 2);
    let _ = Gc::new(1u8);
}
