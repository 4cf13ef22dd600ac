//! Hostile review: the snapshot-free validation (`collector::sigma_claim`)
//! under real threads. The first collection of each `collect()` here
//! sleeps 25 ms in its first trace, so its snapshots are older than the
//! Δ-test trusts (20 ms) and each component is validated by a re-trace,
//! claims that clear `TOUCHED`, and the second pass over the words. Meanwhile mutators
//! upgrade `Weak`s to members, clone handles out of the cells, move them
//! between cells and drop them. Properties: no value is dropped while a
//! mutator holds a handle to it (checked in a table beside the heap, so a
//! failure reads no freed memory), none twice, and once the mutators are
//! joined, `collect()` frees everything. (With `sigma_claim`'s count test
//! planted to pass, it fails at once; the second pass's race, a clone
//! through an immutable field between two claims, is too narrow to hit
//! here: loom model `stale_clone_through_a_field` covers it.)

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use recycler::sync::{collect, Gc, Weak};
use recycler::{Trace, Tracer};

/// Cycles at once.
const CYCLES: usize = 32;
/// Node ids (each node gets a new one; the test makes fewer).
const IDS: usize = 1 << 16;

static DROPPED: [AtomicBool; IDS] = [const { AtomicBool::new(false) }; IDS];
static NEXT_ID: AtomicUsize = AtomicUsize::new(0);
static DROPS: AtomicUsize = AtomicUsize::new(0);
/// The next trace sleeps (set before each collection).
static SLOW: AtomicBool = AtomicBool::new(false);

struct Node {
    id: usize,
    /// An edge that never changes (to the member made before it).
    peer: Option<Gc<Node>>,
    next: Mutex<Vec<Gc<Node>>>,
}

// SAFETY: reports the one lock it owns, once.
unsafe impl Trace for Node {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if SLOW.swap(false, SeqCst) {
            std::thread::sleep(Duration::from_millis(25));
        }
        self.peer.trace(tracer);
        self.next.trace(tracer);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        assert!(!DROPPED[self.id].swap(true, SeqCst), "dropped twice");
        DROPS.fetch_add(1, SeqCst);
    }
}

fn alive(id: usize) {
    assert!(
        !DROPPED[id].load(SeqCst),
        "node {id} dropped under a live handle"
    );
}

/// A cycle's members: their `Weak`s and ids.
type Cycle = [(Weak<Node>, usize); 3];

/// A new garbage cycle of three.
fn cycle() -> Cycle {
    let mut nodes: Vec<Gc<Node>> = Vec::new();
    for _ in 0..3 {
        let id = NEXT_ID.fetch_add(1, SeqCst);
        assert!(id < IDS);
        nodes.push(Gc::new(Node {
            id,
            peer: nodes.last().cloned(),
            next: Mutex::new(Vec::new()),
        }));
    }
    for k in 0..3 {
        nodes[k]
            .next
            .lock()
            .unwrap()
            .push(nodes[(k + 1) % 3].clone());
    }
    core::array::from_fn(|k| (Gc::downgrade(&nodes[k]), nodes[k].id))
}

#[test]
#[cfg_attr(miri, ignore = "sleeps in traces, runs for a second")]
fn stale_validation_against_mutators() {
    recycler::sync::set_policy(recycler::Policy::Manual);
    let cycles: Vec<Mutex<Cycle>> = (0..CYCLES).map(|_| Mutex::new(cycle())).collect();

    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for seed in 0..2u64 {
            let cycles = &cycles;
            let stop = &stop;
            s.spawn(move || {
                recycler::sync::set_policy(recycler::Policy::Manual);
                let mut rng = SmallRng::seed_from_u64(seed);
                while !stop.load(SeqCst) {
                    let c = rng.gen_range(0..CYCLES);
                    let (k, j) = (rng.gen_range(0..3), rng.gen_range(0..3));
                    let ((wa, ia), (wb, ib)) = {
                        let mut slot = cycles[c].lock().unwrap();
                        if slot.iter().all(|(w, _)| w.strong_count() == 0) {
                            // Collected: a new one in its place.
                            *slot = cycle();
                        }
                        (slot[k].clone(), slot[j].clone())
                    };
                    let Some(a) = wa.upgrade() else {
                        continue;
                    };
                    alive(ia);
                    match rng.gen_range(0..5) {
                        // A clone through the immutable field, kept
                        // after the handle it came through is dropped
                        // (the second pass of `sigma_claim`).
                        4 => {
                            let peer = a.peer.clone();
                            drop(a);
                            std::thread::yield_now();
                            if let Some(peer) = peer {
                                alive(peer.id);
                            }
                            continue;
                        }
                        // A clone out of a cell, kept a moment.
                        0 => {
                            let out = a.next.lock().unwrap().first().cloned();
                            std::thread::yield_now();
                            if let Some(out) = out {
                                alive(out.id);
                            }
                        }
                        // A move into another member's cell.
                        1 => {
                            if let Some(b) = wb.upgrade() {
                                let moved = a.next.lock().unwrap().pop();
                                if let Some(moved) = moved {
                                    b.next.lock().unwrap().push(moved);
                                }
                                alive(ib);
                            }
                        }
                        // A new edge.
                        2 => {
                            if let Some(b) = wb.upgrade() {
                                let mut next = b.next.lock().unwrap();
                                if next.len() < 3 {
                                    next.push(a.clone());
                                }
                            }
                        }
                        // Held across a yield.
                        _ => std::thread::yield_now(),
                    }
                    alive(ia);
                }
            });
        }
        let deadline = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < deadline {
            SLOW.store(true, SeqCst);
            collect();
        }
        stop.store(true, SeqCst);
    });
    collect();
    assert_eq!(
        DROPS.load(SeqCst),
        NEXT_ID.load(SeqCst),
        "garbage left after collect()"
    );
    let slots = cycles.iter().flat_map(|c| c.lock().unwrap().clone());
    assert!(slots.into_iter().all(|(w, _)| w.upgrade().is_none()));
}
