//! Loom models of the thread-safe collector's generations: promotion racing
//! a mutator's last drop and upgrade, validation of old members, and the
//! re-buffering of young objects as old roots after a minor collection (the
//! cross-generation rule). Same checks as `models.rs`: no object is used
//! after its value was dropped and, at the end, every object was dropped
//! exactly once.
#![cfg(loom)]

use loom::thread;
use loom_tests::support::{model, Book, Node};
use recycler::sync::{collect, collect_minor, set_policy, Gc};
use recycler::Policy;

/// `a -> b` (no cycle); `a` is buffered and its other handle is dropped on
/// a second thread while a minor collection holds, traces and promotes it.
/// The promotion (a collector-only write) must be ordered before the last
/// drop's read of the generation: promoting after releasing the hold races
/// with it (loom's tracked cell reports it).
#[test]
fn promotion_against_last_drop() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(2);
        let (a, b) = (Node::new(&book, 0), Node::new(&book, 1));
        a.link(&b);
        drop(b);
        let a2 = a.clone();
        drop(a); // buffered; its only handle is `a2`
        let t = thread::spawn(move || {
            a2.check();
            a2.edges.lock().unwrap()[0].check();
            drop(a2);
        });
        collect_minor();
        t.join().unwrap();
        book.finish();
    });
}

/// A garbage cycle `a <-> b`, buffered, while another thread upgrades a weak
/// handle to `a` during a minor collection that may promote it: the upgrade
/// either sees a live cycle or fails; the cycle is freed in the end.
#[test]
fn promotion_against_upgrade() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(2);
        let (a, b) = (Node::new(&book, 0), Node::new(&book, 1));
        a.link(&b);
        b.link(&a);
        let wa = Gc::downgrade(&a);
        drop((a, b));
        let t = thread::spawn(move || {
            if let Some(a) = wa.upgrade() {
                a.check();
                a.edges.lock().unwrap()[0].check();
            }
        });
        collect_minor();
        t.join().unwrap();
        book.finish();
    });
}

/// Generations against validation: an *old* garbage cycle (promoted while a
/// stack handle kept it) is judged by a full collection while another thread
/// upgrades a weak handle to it. Old members get the same Σ/Δ-tests as young
/// ones: skipping the Δ-test for old members (they are "stable") dooms a
/// cycle the upgrade has just resurrected.
#[test]
fn old_cycle_against_upgrade() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(2);
        let (a, b) = (Node::new(&book, 0), Node::new(&book, 1));
        a.link(&b);
        b.link(&a);
        let wa = Gc::downgrade(&a);
        drop(b); // buffered
        collect(); // live through `a`: both promoted
        drop(a); // buffered again (an old root): the old cycle is garbage
        let t = thread::spawn(move || {
            if let Some(a) = wa.upgrade() {
                a.check();
                a.edges.lock().unwrap()[0].check();
            }
        });
        collect();
        t.join().unwrap();
        book.finish();
    });
}

/// The cross-generation rule under concurrency: `old <-> young`, where the
/// old node is not buffered (its entry was consumed while `young` kept it)
/// and the young node's last outside handle is dropped on another thread
/// while a minor collection runs. The minor collection sees the old node's
/// edge as an outside reference and keeps `young`; it must buffer `young`
/// again as an old root, or the garbage cycle leaks.
#[test]
fn old_root_rebuffering() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(2);
        let (old, young) = (Node::new(&book, 0), Node::new(&book, 1));
        young.link(&old);
        drop(old); // buffered
        collect(); // live through `young` (not traced): promoted, unbuffered
        young.edges.lock().unwrap()[0].link(&young); // old -> young
        let t = thread::spawn(move || drop(young));
        collect_minor();
        t.join().unwrap();
        book.finish();
    });
}
