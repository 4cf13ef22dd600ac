//! Loom model of a mutator thread exiting while the collector drains: the
//! exiting thread hands its root buffer over (to the orphans, under the
//! registry lock) while another thread — standing for the collector thread,
//! which runs the same collection code with the `Manual` policy — reads the
//! statistics and collects. Same end checks as `models.rs`: no object is
//! used after its value was dropped, and every object is dropped exactly
//! once.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use loom_tests::support::{model, Book, Node};
use recycler::sync::{collect, set_policy, stats};
use recycler::Policy;

/// A thread buffers the two roots of a garbage cycle `a <-> b` and exits,
/// handing its buffer over, while the collector thread reads `stats` and
/// collects. Once the roots are buffered, `stats` must count each exactly
/// once wherever it is (the thread's buffer or the orphans): the hand-over
/// and the removal from the registry are one step under the registry lock.
/// Whichever of the thread's buffer and the orphans the collection drains,
/// no root is lost or drained twice: the cycle is freed exactly once.
#[test]
fn thread_exit_against_collector() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(2);
        let buffered = Arc::new(AtomicBool::new(false));
        let (book2, buffered2) = (book.clone(), buffered.clone());
        let t = thread::spawn(move || {
            set_policy(Policy::Manual);
            let (a, b) = (Node::new(&book2, 0), Node::new(&book2, 1));
            a.link(&b);
            b.link(&a);
            drop((a, b)); // two roots in this thread's buffer
            buffered2.store(true, SeqCst);
            // Exit: the thread-local buffer is handed over.
        });
        let seen = buffered.load(SeqCst);
        let roots = stats().roots_buffered;
        if seen {
            assert_eq!(roots, 2, "a buffered root was lost or counted twice");
        }
        collect();
        t.join().unwrap();
        book.finish();
    });
}
