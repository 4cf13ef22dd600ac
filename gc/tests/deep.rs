//! Long chains drop and collect without recursion: ten million nodes on a
//! 256 KiB stack (a thousand under Miri).
use std::cell::RefCell;

use recycler::{Gc, Rc, Trace, Tracer};

const STACK: usize = 256 * 1024;
const LEN: usize = if cfg!(miri) { 1_000 } else { 10_000_000 };

struct Link {
    next: RefCell<Option<Gc<Link>>>,
}

// SAFETY: reports the one owned pointer.
unsafe impl Trace for Link {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        self.next.trace(tracer);
    }
}

struct RcLink {
    _next: Option<Rc<RcLink>>,
}

// SAFETY: `Rc` reports nothing.
unsafe impl Trace for RcLink {
    fn trace(&self, _: &mut Tracer<'_>) {}
}

fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn dropping_a_long_gc_chain_is_iterative() {
    on_small_stack(|| {
        let mut head = Gc::new(Link {
            next: RefCell::new(None),
        });
        for _ in 1..LEN {
            head = Gc::new(Link {
                next: RefCell::new(Some(head)),
            });
        }
        assert_eq!(recycler::stats().live, LEN as u64);
        drop(head);
        let stats = recycler::stats();
        assert_eq!(stats.live, 0);
        assert_eq!(stats.freed_by_rc, LEN as u64);
    });
}

#[test]
fn dropping_a_long_rc_chain_is_iterative() {
    on_small_stack(|| {
        let mut head = Rc::new(RcLink { _next: None });
        for _ in 1..LEN {
            head = Rc::new(RcLink { _next: Some(head) });
        }
        drop(head);
        assert_eq!(recycler::stats().live, 0);
    });
}

#[test]
fn collecting_a_long_cycle_is_iterative() {
    on_small_stack(|| {
        recycler::set_policy(recycler::Policy::Manual);
        let first = Gc::new(Link {
            next: RefCell::new(None),
        });
        let mut head = first.clone();
        for _ in 1..LEN {
            head = Gc::new(Link {
                next: RefCell::new(Some(head)),
            });
        }
        *first.next.borrow_mut() = Some(head);
        drop(first);
        assert_eq!(recycler::stats().live, LEN as u64);
        recycler::collect();
        let stats = recycler::stats();
        assert_eq!(stats.live, 0);
        assert_eq!(stats.freed_by_collector, LEN as u64);
    });
}
