//! Validation without snapshots: a collection whose snapshots are too old
//! for the Δ-test (the header's modification counter may have wrapped, see
//! `gc/src/sync/age.rs`) re-traces each component with its cells locked and
//! claims each member with a `fetch_or` that checks its count. Here every
//! collection's drained snapshots are forced stale, against the races of
//! `models.rs` that concern validation: a count read while a handle is
//! traded, a handle moved through a cell or out and back, an upgrade.
#![cfg(loom)]

use loom::thread;
use loom_tests::support::{
    garbage_pair_against_upgrade, model, mutators, pair_against_collector, Book, Node,
};
use recycler::sync::{collect, force_stale_snapshots, set_policy, Gc};
use recycler::Policy;

/// R1: the mutator trades its handle on `a` for one on `b`.
#[test]
fn stale_count_tear() {
    pair_against_collector(mutators::trade_a_for_b, true);
}

/// R2: a handle moves out of a cell onto the stack.
#[test]
fn stale_move_through_mutex() {
    pair_against_collector(mutators::move_b_out, true);
}

/// R2: a handle leaves its cell and comes back.
#[test]
fn stale_move_out_and_back() {
    pair_against_collector(mutators::move_b_out_and_back, true);
}

/// R3: `Weak::upgrade` of a garbage cycle while the collector claims it.
#[test]
fn stale_upgrade_against_claim() {
    garbage_pair_against_upgrade(mutators::upgrade_and_check, true);
}

/// R2 and R3 together: after the collector counted the in-degrees, the
/// mutator upgrades a `Weak` to `a`, moves `a`'s handle to `b` onto its
/// stack and drops `a`. The cells stay locked until every member is
/// claimed, so the move waits for the claims (which see the upgrade) or
/// happens before the count (which then misses the moved handle). Releasing
/// the locks before the claims is caught here.
#[test]
fn stale_upgrade_then_move() {
    garbage_pair_against_upgrade(mutators::upgrade_then_move_b_out, true);
}

/// `a <-> b`, `a -> b` through a field outside any cell: the claims take
/// `b` first. After `b`'s claim, the mutator upgrades `a` (not claimed yet),
/// clones `b` through the field and drops `a` before `a`'s claim, whose
/// count is then right. Only the check that every word is unchanged after
/// the claims sees the clone (`b` is `TOUCHED`); with the claims alone,
/// `b` was freed under the mutator's handle.
#[test]
fn stale_clone_through_a_field() {
    model(|| {
        set_policy(Policy::Manual);
        force_stale_snapshots(true);
        let book = Book::new(2);
        let b = Node::new(&book, 1);
        let a = Node::with_fixed(&book, 0, Some(b.clone()));
        b.link(&a);
        let wa = Gc::downgrade(&a);
        drop(b); // buffered first, so traced and claimed first
        drop(a);
        let t = thread::spawn(move || {
            if let Some(a) = wa.upgrade() {
                let hb = a.fixed.clone().unwrap();
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
