//! Loom model of a thread's root buffer (`gc/src/sync/buffer.rs`): a ring
//! that only its owner fills, with a release store of its tail and no
//! read-modify-write, drained by collections under a lock, and grown by the
//! owner under that lock when full. Under loom a new ring has two cells, so
//! the third root buffered grows it unless a drain emptied it first. Same
//! end checks as `models.rs`: no object is used after its value was
//! dropped, and every object is dropped exactly once (an entry lost, or
//! drained twice, fails them).
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use loom_tests::support::{model, Book, Node};
use recycler::sync::{collect, set_policy, stats};
use recycler::Policy;

/// A thread buffers the three roots of a garbage cycle `a <-> b` with a
/// child `a -> c` (growing its ring at the third unless a drain came
/// between) while another thread reads `stats` and collects. Once the three
/// are buffered and before that collection, `stats` counts exactly three.
/// Each cell a drain reads was published by the owner's release store, and
/// a cell is overwritten only after the drain that read it moved the head
/// (loom checks the cells' accesses); whichever pushes the collection
/// drains, the rest wait in the buffer for the final collections.
#[test]
fn buffering_against_drain() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(3);
        let buffered = Arc::new(AtomicBool::new(false));
        let (book2, buffered2) = (book.clone(), buffered.clone());
        let t = thread::spawn(move || {
            set_policy(Policy::Manual);
            let (a, b, c) = (
                Node::new(&book2, 0),
                Node::new(&book2, 1),
                Node::new(&book2, 2),
            );
            a.link(&b);
            b.link(&a);
            a.link(&c);
            drop(c);
            drop(a);
            drop(b); // three roots in this thread's ring
            buffered2.store(true, SeqCst);
            // Keep the thread (and its buffer) alive past the collection
            // when the scheduler allows.
            thread::yield_now();
        });
        let seen = buffered.load(SeqCst);
        let roots = stats().roots_buffered;
        if seen {
            assert_eq!(roots, 3, "a buffered root was lost or counted twice");
        }
        collect();
        t.join().unwrap();
        book.finish();
    });
}
