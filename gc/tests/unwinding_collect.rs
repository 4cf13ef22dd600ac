//! `collect()` called while the thread unwinds (from a destructor the
//! unwind runs) collects, but does not re-raise the panic of a garbage
//! destructor: raised there, it would be a panic during unwinding and abort
//! the process. (A test that fails aborts this test binary.)

mod common;

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use common::panic_message;

/// The test, for one kind of pointer: `$gc` is the collector module, `$cell`
/// the cell a node links through and `$set` how a link is set.
macro_rules! collect_while_unwinding {
    ($name:ident, $gc:path, $cell:ident, $set:expr) => {
        #[test]
        fn $name() {
            use recycler::{Policy, Trace};
            use $gc::{collect, set_policy, Gc};

            static DROPS: AtomicUsize = AtomicUsize::new(0);

            #[derive(Trace)]
            struct Node {
                next: $cell<Option<Gc<Node>>>,
            }

            impl Drop for Node {
                fn drop(&mut self) {
                    DROPS.fetch_add(1, SeqCst);
                    panic!("the destructor of a garbage cycle panics");
                }
            }

            /// Collects when the unwind drops it.
            struct CollectOnDrop;

            impl Drop for CollectOnDrop {
                fn drop(&mut self) {
                    assert!(std::thread::panicking());
                    collect();
                }
            }

            let set: fn(&Node, Gc<Node>) = $set;
            set_policy(Policy::Manual);
            let a = Gc::new(Node {
                next: $cell::new(None),
            });
            let b = Gc::new(Node {
                next: $cell::new(None),
            });
            set(&a, b.clone());
            set(&b, a.clone());
            drop((a, b));
            let unwound = catch_unwind(AssertUnwindSafe(|| {
                let _collect = CollectOnDrop;
                panic!("an ordinary panic");
            }));
            let payload = unwound.expect_err("the closure panics");
            assert_eq!(panic_message(&*payload), "an ordinary panic");
            assert_eq!(DROPS.load(SeqCst), 2, "the cycle was collected");
        }
    };
}

collect_while_unwinding!(single_threaded, recycler, RefCell, |n, next| {
    *n.next.borrow_mut() = Some(next);
});

// The only test of this binary that uses `recycler::sync`, whose collections
// are process-wide.
collect_while_unwinding!(sync, recycler::sync, Mutex, |n, next| {
    *n.next.lock().unwrap() = Some(next);
});
