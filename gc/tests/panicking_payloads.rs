//! Panics whose payload's own `Drop` panics. The collectors and the drop
//! queues re-raise the first panic of the destructors they run and drop
//! the others; dropping such a payload in plain code unwound out of the
//! loop, which then dropped the kept payload while unwinding: an abort
//! (found by a hostile review). Now the second payload's panic is caught
//! and that payload forgotten.

use std::cell::Cell;
use std::panic::{catch_unwind, panic_any, AssertUnwindSafe};

/// A payload whose drop panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("a payload's drop panics");
    }
}

/// Takes the payload of a caught panic without dropping it (its drop
/// panics) and says whether it was a `Bomb`.
fn is_bomb(result: std::thread::Result<()>) -> bool {
    let payload = result.expect_err("a destructor's panic is re-raised");
    let bomb = payload.is::<Bomb>();
    std::mem::forget(payload);
    bomb
}

macro_rules! payload_tests {
    ($module:ident, $gc:path, $cell:ident, $set:ident) => {
        mod $module {
            use super::*;
            use $gc as family;
            use $gc::{collect, Gc};

            std::thread_local! {
                static DROPS: Cell<usize> = const { Cell::new(0) };
            }

            #[derive(recycler::Trace)]
            struct Node {
                next: $cell<Option<Gc<Node>>>,
            }

            impl Drop for Node {
                fn drop(&mut self) {
                    DROPS.with(|d| d.set(d.get() + 1));
                    panic_any(Bomb);
                }
            }

            fn node(next: Option<Gc<Node>>) -> Gc<Node> {
                Gc::new(Node {
                    next: $cell::new(next),
                })
            }

            #[test]
            fn a_collection_of_two_such_destructors_does_not_abort() {
                family::set_policy(recycler::Policy::Manual);
                let before = DROPS.with(Cell::get);
                for _ in 0..2 {
                    let a = node(None);
                    $set(&a.next, Some(a.clone()));
                }
                assert!(is_bomb(catch_unwind(collect)));
                assert_eq!(DROPS.with(Cell::get) - before, 2, "both values dropped");
            }

            #[test]
            fn a_chain_of_two_such_destructors_does_not_abort() {
                let before = DROPS.with(Cell::get);
                let chain = node(Some(node(None)));
                assert!(is_bomb(catch_unwind(AssertUnwindSafe(move || drop(chain)))));
                assert_eq!(DROPS.with(Cell::get) - before, 2, "both values dropped");
            }
        }
    };
}

fn set_refcell<T>(cell: &std::cell::RefCell<T>, value: T) {
    *cell.borrow_mut() = value;
}

fn set_mutex<T>(cell: &std::sync::Mutex<T>, value: T) {
    *cell.lock().unwrap() = value;
}

use std::cell::RefCell;
use std::sync::Mutex;

payload_tests!(single_threaded, recycler, RefCell, set_refcell);
payload_tests!(thread_safe, recycler::sync, Mutex, set_mutex);
