//! No automatic collection while a thread unwinds.
//!
//! Dropping handles during an unwind buffers roots, and enough of them make
//! a collection due. Such a collection would run the destructors of
//! unrelated garbage on the unwinding thread; a panic of one of those,
//! re-raised there, is a panic during unwinding: the process aborts. The
//! roots must stay buffered instead, for a collection after the unwind.
//! (A test that fails aborts this test binary.)

mod common;

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use common::panic_message;

/// Live handles whose second handles the unwind drops: well past the
/// Adaptive trigger of both collectors.
const LIVE: usize = if cfg!(miri) { 600 } else { 5_000 };

/// The test, for one kind of pointer: `$gc` is the collector module
/// (`Gc`, `collect`, `stats`, `set_policy`), `$cell` the cell a node links
/// through and `$set` how a link is set.
macro_rules! unwinding_test {
    ($name:ident, $gc:path, $cell:ident, $set:expr) => {
        mod $name {
            use super::*;
            use recycler::{Policy, Trace};
            use $gc::{collect, set_policy, stats, Gc};

            static DROPS: AtomicUsize = AtomicUsize::new(0);

            #[derive(Trace)]
            struct Node {
                next: $cell<Option<Gc<Node>>>,
                #[trace(skip)]
                bomb: bool,
            }

            impl Drop for Node {
                fn drop(&mut self) {
                    if self.bomb {
                        DROPS.fetch_add(1, SeqCst);
                        panic!("the destructor of a garbage cycle panics");
                    }
                }
            }

            fn node(bomb: bool) -> Gc<Node> {
                Gc::new(Node {
                    next: $cell::new(None),
                    bomb,
                })
            }

            #[test]
            fn unwinding_defers_collection() {
                let set: fn(&Node, Gc<Node>) = $set;
                set_policy(Policy::Adaptive);
                let a = node(true);
                let b = node(false);
                set(&a, b.clone());
                set(&b, a.clone());
                drop((a, b));
                let live: Vec<Gc<Node>> = (0..LIVE).map(|_| node(false)).collect();
                let unwound = catch_unwind(AssertUnwindSafe(|| {
                    let _extra: Vec<Gc<Node>> = live.to_vec();
                    panic!("an ordinary panic");
                }));
                let payload = unwound.expect_err("the closure panics");
                assert_eq!(panic_message(&*payload), "an ordinary panic");
                assert_eq!(DROPS.load(SeqCst), 0, "collected while unwinding");
                // After the unwind the cycle is collected, and its panic
                // reaches the caller of `collect`.
                let collected = catch_unwind(collect).expect_err("the destructor panics");
                assert_eq!(
                    panic_message(&*collected),
                    "the destructor of a garbage cycle panics"
                );
                assert_eq!(DROPS.load(SeqCst), 1);
                assert_eq!(stats().live, LIVE as u64);
                drop(live);
                assert_eq!(stats().live, 0);
            }
        }
    };
}

unwinding_test!(single_threaded, recycler, RefCell, |n, next| {
    *n.next.borrow_mut() = Some(next);
});

// The only test of this binary that uses `recycler::sync`, whose collections
// are process-wide.
unwinding_test!(sync, recycler::sync, Mutex, |n, next| {
    *n.next.lock().unwrap() = Some(next);
});
