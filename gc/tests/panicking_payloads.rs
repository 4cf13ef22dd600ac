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

            std::thread_local! {
                /// The last handle of a value whose drop panics with a
                /// `Bomb`, dropped by a `Carrier` payload's drop.
                static HELD: RefCell<Option<Gc<Part>>> = const { RefCell::new(None) };
            }

            /// A value whose drop panics (`kind` 1: with "first"; 2: with a
            /// `Carrier`; 3: with a `Bomb`) after its children are dropped.
            #[derive(recycler::Trace)]
            struct Part {
                #[trace(skip)]
                kind: u8,
                kids: Vec<Gc<Part>>,
            }

            impl Drop for Part {
                fn drop(&mut self) {
                    match self.kind {
                        1 => panic_any("first"),
                        2 => panic_any(Carrier),
                        3 => panic_any(Bomb),
                        _ => {}
                    }
                }
            }

            /// A payload whose drop drops the value in `HELD`.
            struct Carrier;

            impl Drop for Carrier {
                fn drop(&mut self) {
                    drop(HELD.with(|h| h.borrow_mut().take()));
                }
            }

            fn part(kind: u8, kids: Vec<Gc<Part>>) -> Gc<Part> {
                Gc::new(Part { kind, kids })
            }

            /// The second panic's payload is dropped (the first is kept),
            /// and its drop frees a value whose drop panics in turn: that
            /// panic was kept meanwhile, and its payload (a `Bomb`) was then
            /// dropped by a plain `Cell::set`, whose panic unwound out of the
            /// drop and replaced the first panic (found by a hostile review;
            /// while unwinding, an abort).
            #[test]
            fn a_payload_that_frees_a_panicking_value_leaves_the_first_panic_kept() {
                HELD.with(|h| *h.borrow_mut() = Some(part(3, Vec::new())));
                let top = part(0, vec![part(1, Vec::new()), part(2, Vec::new())]);
                let payload = catch_unwind(AssertUnwindSafe(move || drop(top)))
                    .expect_err("a destructor's panic is re-raised");
                assert_eq!(payload.downcast_ref::<&str>(), Some(&"first"));
                assert!(
                    HELD.with(|h| h.borrow().is_none()),
                    "the held value was dropped"
                );
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
