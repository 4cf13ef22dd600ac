//! A chain of cycles whose destructors each call `collect()`: every
//! collection frees one link, whose `Drop` asks for the next collection, and
//! that collection's garbage is the next link (the link to it is in a
//! `#[trace(skip)]` field, so it is an outside reference until the link
//! before it is freed). The collections a destructor asks for run one after
//! the other, a few rounds per `collect()`, never nested: nested, they
//! overflowed the stack one collection per link (an internal review found
//! it with 200,000 links on an 8 MiB stack).

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

/// Links in the chain; the test thread's stack is small enough that one
/// nested collection per link would overflow it.
const LINKS: usize = if cfg!(miri) { 40 } else { 20_000 };
/// The test thread's stack.
const STACK: usize = 1 << 20;

macro_rules! chain_of_collecting_destructors {
    ($name:ident, $gc:path, $cell:ident, $set:expr) => {
        #[test]
        fn $name() {
            use recycler::Trace;
            use $gc::{collect, Gc};

            static DROPS: AtomicUsize = AtomicUsize::new(0);

            #[derive(Trace)]
            struct Link {
                me: $cell<Option<Gc<Link>>>,
                /// The next link, hidden from the collector.
                #[trace(skip)]
                _next: Option<Gc<Link>>,
            }

            impl Drop for Link {
                fn drop(&mut self) {
                    DROPS.fetch_add(1, SeqCst);
                    collect();
                }
            }

            let set: fn(&Link, Gc<Link>) = $set;
            let run = move || {
                let mut next = None;
                for _ in 0..LINKS {
                    let link = Gc::new(Link {
                        me: $cell::new(None),
                        _next: next.take(),
                    });
                    set(&link, link.clone());
                    next = Some(link);
                }
                drop(next);
                // Each `collect()` frees at least one link (its rounds are
                // bounded, so it may leave the rest for the next call).
                let mut calls = 0;
                while DROPS.load(SeqCst) < LINKS {
                    let before = DROPS.load(SeqCst);
                    collect();
                    calls += 1;
                    assert!(DROPS.load(SeqCst) > before, "collect() freed no link");
                }
                assert_eq!(DROPS.load(SeqCst), LINKS);
                assert!(calls < LINKS, "several links a call ({calls} calls)");
            };
            std::thread::Builder::new()
                .stack_size(STACK)
                .spawn(run)
                .unwrap()
                .join()
                .unwrap();
        }
    };
}

chain_of_collecting_destructors!(single_threaded, recycler, RefCell, |l, me| {
    *l.me.borrow_mut() = Some(me);
});

// The only test of this binary that uses `recycler::sync`, whose collections
// are process-wide.
chain_of_collecting_destructors!(sync, recycler::sync, Mutex, |l, me| {
    *l.me.lock().unwrap() = Some(me);
});
