//! `collect()` called while the thread unwinds (from a destructor the unwind
//! runs), where a `Trace` impl panics: the panic does not leave the
//! collection, which would abort the process (a second panic while
//! unwinding; an internal review found it in the single-threaded collector);
//! the cycle is kept, and freed by a later collection once its trace no
//! longer panics. (A test that fails aborts this test binary.)

mod common;

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use common::panic_message;

macro_rules! trace_panics_in_a_collection_while_unwinding {
    ($name:ident, $gc:path, $cell:ident, $set:expr) => {
        #[test]
        fn $name() {
            use recycler::{Policy, Trace, Tracer};
            use $gc::{collect, set_policy, Gc};

            static PANIC: AtomicBool = AtomicBool::new(true);
            static DROPS: AtomicUsize = AtomicUsize::new(0);

            struct Node {
                next: $cell<Option<Gc<Node>>>,
            }

            // SAFETY: reports the one handle it owns (or panics first, which
            // the contract allows).
            unsafe impl Trace for Node {
                fn trace(&self, tracer: &mut Tracer<'_>) {
                    if PANIC.load(SeqCst) {
                        panic!("a trace panics");
                    }
                    self.next.trace(tracer);
                }
            }

            impl Drop for Node {
                fn drop(&mut self) {
                    DROPS.fetch_add(1, SeqCst);
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
            set(&a, a.clone());
            drop(a);
            let unwound = catch_unwind(AssertUnwindSafe(|| {
                let _collect = CollectOnDrop;
                panic!("an ordinary panic");
            }));
            let payload = unwound.expect_err("the closure panics");
            assert_eq!(panic_message(&*payload), "an ordinary panic");
            assert_eq!(
                DROPS.load(SeqCst),
                0,
                "a cycle whose trace panicked is kept"
            );
            PANIC.store(false, SeqCst);
            collect();
            assert_eq!(DROPS.load(SeqCst), 1, "and freed by a later collection");
        }
    };
}

trace_panics_in_a_collection_while_unwinding!(single_threaded, recycler, RefCell, |n, next| {
    *n.next.borrow_mut() = Some(next);
});

// The only test of this binary that uses `recycler::sync`, whose collections
// are process-wide.
trace_panics_in_a_collection_while_unwinding!(sync, recycler::sync, Mutex, |n, next| {
    *n.next.lock().unwrap() = Some(next);
});
