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
    on_stack(STACK, f);
}

fn on_stack(size: usize, f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(size)
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

/// Nodes of a `Box` list inside one value.
const BOXES: usize = if cfg!(miri) { 200 } else { 1_000_000 };

/// A value whose owned structure nests far deeper than a trace may go (a
/// `Box` list whose `Drop` the user made iterative), on a self-cycle: the
/// trace stops at its stack budget and keeps the object alive (its cycle
/// leaks) instead of overflowing the stack, and a shallow one is freed. On
/// a thread whose whole stack is smaller than the budget (64 KiB: it
/// overflowed before the budget took the thread's stack into account), the
/// same. (Under Miri the stack address does not move with the trace: no
/// budget.)
macro_rules! deep_value_test {
    ($name:ident, $gc:path, $cell:ident, $lock:ident, $stack:expr, $shallow:expr) => {
        #[test]
        fn $name() {
            use $gc::{collect, Gc};

            /// May own a pointer (so it is traced), owns none here.
            #[derive(Trace)]
            struct BoxNode {
                next: Option<Box<BoxNode>>,
                _gc: Option<Gc<Holder>>,
            }

            #[derive(Trace)]
            struct BoxList {
                head: Option<Box<BoxNode>>,
            }

            impl Drop for BoxList {
                fn drop(&mut self) {
                    let mut next = self.head.take();
                    while let Some(mut node) = next {
                        next = node.next.take();
                    }
                }
            }

            #[derive(Trace)]
            struct Holder {
                list: BoxList,
                me: $cell<Option<Gc<Holder>>>,
            }

            fn self_cycle(depth: usize) -> Gc<Holder> {
                let mut head = None;
                for _ in 0..depth {
                    head = Some(Box::new(BoxNode {
                        next: head,
                        _gc: None,
                    }));
                }
                let h = Gc::new(Holder {
                    list: BoxList { head },
                    me: $cell::new(None),
                });
                *h.me.$lock() = Some(h.clone());
                h
            }

            on_stack($stack, || {
                let deep = Gc::downgrade(&self_cycle(BOXES));
                let shallow = Gc::downgrade(&self_cycle($shallow));
                collect();
                assert!(shallow.upgrade().is_none(), "traced, and its cycle freed");
                let deep = deep.upgrade();
                assert!(cfg!(miri) || deep.is_some(), "too deep to trace: kept");
                if let Some(h) = deep {
                    drop(h.me.$lock().take());
                }
            });
        }
    };
}

trait LockCell<T> {
    fn lock_cell(&self) -> std::sync::MutexGuard<'_, T>;
}

impl<T> LockCell<T> for std::sync::Mutex<T> {
    fn lock_cell(&self) -> std::sync::MutexGuard<'_, T> {
        self.lock().unwrap()
    }
}

deep_value_test!(
    tracing_a_deeply_nested_value_keeps_it_instead_of_overflowing,
    recycler,
    RefCell,
    borrow_mut,
    STACK,
    100
);
deep_value_test!(
    sync_tracing_a_deeply_nested_value_keeps_it_instead_of_overflowing,
    recycler::sync,
    Mutex,
    lock_cell,
    STACK,
    100
);
deep_value_test!(
    on_a_64_kib_stack_tracing_a_deeply_nested_value_keeps_it,
    recycler,
    RefCell,
    borrow_mut,
    SMALLEST,
    10
);
deep_value_test!(
    on_a_64_kib_stack_sync_tracing_a_deeply_nested_value_keeps_it,
    recycler::sync,
    Mutex,
    lock_cell,
    SMALLEST,
    10
);

/// A thread stack below the trace budget.
const SMALLEST: usize = 64 * 1024;

use std::sync::Mutex;
