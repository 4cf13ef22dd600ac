//! The header word's modification counter has 26 bits: `2^26` operations on
//! one object that restore its count bring its word back to a collector's
//! snapshot. A collector stalled that long between its snapshot and its
//! Δ-test (here a slow `Trace` of an unrelated object, which the `Trace`
//! contract allows) used to accept the equal word, and drop a value that
//! another thread still borrowed through a handle of its own. Snapshots
//! older than `sync/age.rs`'s bound are now taken again and re-validated.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::Duration;

use recycler::sync::{collect, set_policy, Gc, Weak};
use recycler::{Policy, Trace, Tracer};

#[derive(Trace)]
struct Node {
    cell: Mutex<Vec<Gc<Node>>>,
    #[trace(skip)]
    canary: AtomicU64,
}

const ALIVE: u64 = 0xA11CE;
const DROPPED: u64 = 0xDEAD;

impl Node {
    fn new() -> Gc<Node> {
        Gc::new(Node {
            cell: Mutex::new(Vec::new()),
            canary: AtomicU64::new(ALIVE),
        })
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        *self.canary.get_mut() = DROPPED;
    }
}

/// Owns only a `Weak`; its trace upgrades it and drops the clone (rule 2
/// of the `Trace` contract allows it), which buffers `a` again.
struct Upgrades(Weak<Node>);

// SAFETY: it owns no `sync::Gc` (a `Weak` is not an edge).
unsafe impl Trace for Upgrades {
    fn trace(&self, _: &mut Tracer<'_>) {
        drop(self.0.upgrade());
    }
}

static SLOW_STARTED: AtomicBool = AtomicBool::new(false);
static MUTATOR_DONE: AtomicBool = AtomicBool::new(false);

/// Owns nothing; its first trace waits until the mutator is done.
struct Slow;

// SAFETY: it owns no `sync::Gc`.
unsafe impl Trace for Slow {
    fn trace(&self, _: &mut Tracer<'_>) {
        if !SLOW_STARTED.swap(true, SeqCst) {
            while !MUTATOR_DONE.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

static KEEP_UPGRADES: Mutex<Option<Gc<Upgrades>>> = Mutex::new(None);
static KEEP_SLOW: Mutex<Option<Gc<Slow>>> = Mutex::new(None);

#[test]
#[cfg_attr(miri, ignore = "2^27 operations")]
fn a_wrapped_modification_counter_is_not_trusted() {
    set_policy(Policy::Manual);
    // More nodes than half a pin window's guards: the ring's window closes
    // (its t*) at the end of its tree, before `Slow` is traced.
    const RING: usize = 4200;
    let a = Node::new();
    let weak = Gc::downgrade(&a);
    let upgrades = Gc::new(Upgrades(weak.clone()));
    *KEEP_UPGRADES.lock().unwrap() = Some(upgrades.clone());
    drop(upgrades); // the first root
    a.cell.lock().unwrap().push(a.clone());
    let mut prev = Node::new();
    a.cell.lock().unwrap().push(prev.clone());
    for _ in 2..RING {
        let n = Node::new();
        prev.cell.lock().unwrap().push(n.clone());
        prev = n;
    }
    prev.cell.lock().unwrap().push(a); // moved: `a` itself is never buffered
    drop(prev);
    let slow = Gc::new(Slow);
    *KEEP_SLOW.lock().unwrap() = Some(slow.clone());
    drop(slow); // the last root

    let mutator = {
        let weak = weak.clone();
        std::thread::spawn(move || {
            set_policy(Policy::Manual);
            while !SLOW_STARTED.load(SeqCst) {
                std::hint::spin_loop();
            }
            // After the ring's t*: a handle of our own, and a borrow.
            let h = weak.upgrade().expect("a is alive");
            let r: &Node = &h;
            {
                let mut cell = r.cell.lock().unwrap();
                let i = cell.iter().position(|x| Gc::ptr_eq(x, &h)).unwrap();
                drop(cell.remove(i)); // `a`'s count is back to its snapshot's
            }
            // The counter (26 bits) goes round: the upgrade and the
            // removal made 2 operations.
            for _ in 0..((1u64 << 25) - 1) {
                drop(h.clone());
            }
            MUTATOR_DONE.store(true, SeqCst);
            while KEEP_SLOW.lock().unwrap().is_some() {
                std::thread::sleep(Duration::from_millis(1));
            }
            // The collection is over: our borrow must still see a live value.
            assert_eq!(r.canary.load(SeqCst), ALIVE, "dropped while borrowed");
            assert!(Gc::try_deref(&h).is_some());
        })
    };
    collect();
    *KEEP_SLOW.lock().unwrap() = None;
    mutator.join().unwrap();
    // The ring is garbage now, and the next collection frees it.
    collect();
    assert!(weak.upgrade().is_none());
}
