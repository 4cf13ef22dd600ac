//! `collect()` from the `Drop` of a value that the unwind frees (the value
//! is in a `Gc`, so its free is the thread's outermost drop and keeps the
//! panics of the drops nested in it for the end): a garbage value that the
//! collection releases by counting panics in its `Drop`, and that panic is
//! not re-raised while the thread unwinds, which would abort the process (an
//! internal review found it). `unwinding_collect.rs` has the same with the
//! collecting value on the stack. (A test that fails aborts this test
//! binary.)

mod common;

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use common::panic_message;

macro_rules! collect_in_a_value_while_unwinding {
    ($name:ident, $gc:path, $cell:ident, $set:expr) => {
        #[test]
        fn $name() {
            use recycler::{Policy, Trace};
            use $gc::{collect, set_policy, Gc};

            static BOMBS: AtomicUsize = AtomicUsize::new(0);
            static NODES: AtomicUsize = AtomicUsize::new(0);
            static COLLECTED: AtomicUsize = AtomicUsize::new(0);

            /// Freed by counting when the cycle's values drop.
            #[derive(Trace)]
            struct Bomb;

            impl Drop for Bomb {
                fn drop(&mut self) {
                    BOMBS.fetch_add(1, SeqCst);
                    panic!("a value released by a garbage cycle panics");
                }
            }

            #[derive(Trace)]
            struct Node {
                next: $cell<Option<Gc<Node>>>,
                _bomb: Gc<Bomb>,
            }

            impl Drop for Node {
                fn drop(&mut self) {
                    NODES.fetch_add(1, SeqCst);
                }
            }

            /// Collects when the unwind drops the last handle to it.
            #[derive(Trace)]
            struct CollectOnDrop;

            impl Drop for CollectOnDrop {
                fn drop(&mut self) {
                    assert!(std::thread::panicking());
                    collect();
                    COLLECTED.fetch_add(1, SeqCst);
                }
            }

            let set: fn(&Node, Gc<Node>) = $set;
            set_policy(Policy::Manual);
            let a = Gc::new(Node {
                next: $cell::new(None),
                _bomb: Gc::new(Bomb),
            });
            set(&a, a.clone());
            drop(a);
            let unwound = catch_unwind(AssertUnwindSafe(|| {
                let _collect = Gc::new(CollectOnDrop);
                panic!("an ordinary panic");
            }));
            let payload = unwound.expect_err("the closure panics");
            assert_eq!(panic_message(&*payload), "an ordinary panic");
            assert_eq!(COLLECTED.load(SeqCst), 1, "collect() returned");
            assert_eq!(NODES.load(SeqCst), 1, "the cycle was collected");
            assert_eq!(BOMBS.load(SeqCst), 1, "its value released the bomb");
        }
    };
}

collect_in_a_value_while_unwinding!(single_threaded, recycler, RefCell, |n, next| {
    *n.next.borrow_mut() = Some(next);
});

// The only test of this binary that uses `recycler::sync`, whose collections
// are process-wide.
collect_in_a_value_while_unwinding!(sync, recycler::sync, Mutex, |n, next| {
    *n.next.lock().unwrap() = Some(next);
});
