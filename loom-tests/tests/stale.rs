//! Validation without snapshots: a collection whose snapshots are too old
//! for the Δ-test (the header's modification counter may have wrapped, see
//! `gc/src/sync/age.rs`) re-traces each component with its cells locked and
//! claims each member with a `fetch_or` that checks its count. Here every
//! collection's drained snapshots are forced stale, against the races of
//! `models.rs` that concern validation: a count read while a handle is
//! traded, a handle moved through a cell or out and back, an upgrade.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use loom_tests::support::{model, Book, Node};
use recycler::sync::{collect, force_stale_snapshots, set_policy, Gc};
use recycler::Policy;

/// `a <-> b` with `b` buffered; `mutator` gets `a` on a second thread while
/// the main thread collects with stale snapshots.
fn pair_against_stale_collector(mutator: fn(Gc<Node>)) {
    model(move || {
        set_policy(Policy::Manual);
        force_stale_snapshots(true);
        let book = Book::new(2);
        let (a, b) = pair(&book);
        drop(b);
        let t = thread::spawn(move || mutator(a));
        collect();
        t.join().unwrap();
        book.finish();
        force_stale_snapshots(false);
    });
}

fn pair(book: &Arc<Book>) -> (Gc<Node>, Gc<Node>) {
    let (a, b) = (Node::new(book, 0), Node::new(book, 1));
    a.link(&b);
    b.link(&a);
    (a, b)
}

/// R1: the mutator trades its handle on `a` for one on `b`.
#[test]
fn stale_count_tear() {
    pair_against_stale_collector(|a| {
        let hb = a.edges.lock().unwrap()[0].clone();
        drop(a);
        hb.check();
        hb.edges.lock().unwrap()[0].check();
    });
}

/// R2: a handle moves out of a cell onto the stack.
#[test]
fn stale_move_through_mutex() {
    pair_against_stale_collector(|a| {
        let hb = a.edges.lock().unwrap().pop().unwrap();
        drop(a);
        hb.check();
        hb.edges.lock().unwrap()[0].check();
    });
}

/// R2: a handle leaves its cell and comes back.
#[test]
fn stale_move_out_and_back() {
    pair_against_stale_collector(|a| {
        let hb = a.edges.lock().unwrap().pop().unwrap();
        hb.check();
        a.edges.lock().unwrap().push(hb);
        a.check();
        drop(a);
    });
}

/// R3: `Weak::upgrade` of a garbage cycle while the collector claims it.
#[test]
fn stale_upgrade_against_claim() {
    model(|| {
        set_policy(Policy::Manual);
        force_stale_snapshots(true);
        let book = Book::new(2);
        let (a, b) = pair(&book);
        let wa = Gc::downgrade(&a);
        drop((a, b));
        let t = thread::spawn(move || {
            if let Some(a) = wa.upgrade() {
                a.check();
                a.edges.lock().unwrap()[0].check();
            }
        });
        collect();
        t.join().unwrap();
        book.finish();
        force_stale_snapshots(false);
    });
}

/// R2 and R3 together: after the collector counted the in-degrees, the
/// mutator upgrades a `Weak` to `a`, moves `a`'s handle to `b` onto its
/// stack and drops `a`. The cells stay locked until every member is
/// claimed, so the move waits for the claims (which see the upgrade) or
/// happens before the count (which then misses the moved handle).
#[test]
fn stale_upgrade_then_move() {
    model(|| {
        set_policy(Policy::Manual);
        force_stale_snapshots(true);
        let book = Book::new(2);
        let (a, b) = pair(&book);
        let wa = Gc::downgrade(&a);
        drop((a, b));
        let t = thread::spawn(move || {
            if let Some(a) = wa.upgrade() {
                let hb = a.edges.lock().unwrap().pop().unwrap();
                drop(a);
                hb.check();
                hb.edges.lock().unwrap()[0].check();
            }
        });
        collect();
        t.join().unwrap();
        book.finish();
        force_stale_snapshots(false);
    });
}
