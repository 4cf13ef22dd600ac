//! Handles dropped by thread-local destructors at thread exit, after the
//! collector's own thread-locals were destroyed: long chains still drop
//! without recursion (a million nodes overflowed the stack when such drops
//! ran in place).

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use recycler::{sync, Gc, Trace};

const CHAIN: usize = if cfg!(miri) { 200 } else { 1_000_000 };

/// Counts its drops in the counter it points to.
struct Counted(&'static AtomicUsize);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Relaxed);
    }
}

macro_rules! chain_test {
    ($name:ident, $gc:ident) => {
        #[test]
        fn $name() {
            #[derive(Trace)]
            struct Link {
                next: Option<$gc<Link>>,
                #[trace(skip)]
                _counted: Counted,
            }
            static DROPPED: AtomicUsize = AtomicUsize::new(0);
            thread_local! {
                static HOLD: RefCell<Option<$gc<Link>>> = const { RefCell::new(None) };
            }
            let link = |next| Link {
                next,
                _counted: Counted(&DROPPED),
            };
            std::thread::spawn(move || {
                // HOLD's destructor is registered first, so it runs last,
                // after the collector's thread-locals are destroyed.
                HOLD.with(|h| drop(h.borrow()));
                // A chain deeper than the in-place budget: its drop queues
                // objects, which registers the drop queue's destructor.
                let mut head = $gc::new(link(None));
                for _ in 1..CHAIN {
                    head = $gc::new(link(Some(head)));
                }
                drop(head);
                assert_eq!(DROPPED.load(Relaxed), CHAIN);
                let mut head = $gc::new(link(None));
                for _ in 1..CHAIN {
                    head = $gc::new(link(Some(head)));
                }
                HOLD.with(|h| *h.borrow_mut() = Some(head));
            })
            .join()
            .unwrap();
            assert_eq!(DROPPED.load(Relaxed), 2 * CHAIN);
        }
    };
}

chain_test!(a_chain_dropped_by_a_late_thread_local_destructor, Gc);
chain_test!(
    a_sync_chain_dropped_by_a_late_thread_local_destructor,
    sync_gc
);

use sync::Gc as sync_gc;
