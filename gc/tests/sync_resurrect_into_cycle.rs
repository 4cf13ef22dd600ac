//! Hostile review: a destructor of a cycle member stores dead handles to the
//! other members (and to itself via `Weak::upgrade`, which must fail) into a
//! new garbage cycle, which a later collection frees: the dead handles are
//! dropped by that collection's frees and by counting; each value is dropped
//! exactly once (Miri checks the memory).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use recycler::sync::{collect, set_policy, Gc, Weak};
use recycler::{Policy, Trace};

static DROPS: AtomicUsize = AtomicUsize::new(0);
static STASH: Mutex<Option<Gc<Node>>> = Mutex::new(None);

#[derive(Trace)]
struct Node {
    next: Mutex<Vec<Gc<Node>>>,
    #[trace(skip)]
    me: Mutex<Weak<Node>>,
    #[trace(skip)]
    stash: bool,
    data: Vec<u64>,
}

fn node(stash: bool) -> Gc<Node> {
    Gc::new_cyclic(|me| Node {
        next: Mutex::new(Vec::new()),
        me: Mutex::new(me.clone()),
        stash,
        data: vec![7; 4],
    })
}

impl Drop for Node {
    fn drop(&mut self) {
        assert_eq!(self.data, [7; 4]);
        DROPS.fetch_add(1, SeqCst);
        assert!(self.me.lock().unwrap().upgrade().is_none());
        if self.stash {
            let dead: Vec<Gc<Node>> = self.next.lock().unwrap().clone();
            // A new cycle holding the dead handles.
            let c = node(false);
            let d = node(false);
            c.next.lock().unwrap().push(d.clone());
            d.next.lock().unwrap().push(c.clone());
            c.next.lock().unwrap().extend(dead.iter().cloned());
            d.next.lock().unwrap().extend(dead);
            // And a live handle to the new cycle in a global.
            *STASH.lock().unwrap() = Some(c);
        }
    }
}

#[test]
fn dead_handles_stored_into_a_new_cycle_are_released_once() {
    set_policy(Policy::Manual);
    let a = node(true);
    let b = node(false);
    a.next.lock().unwrap().push(b.clone());
    b.next.lock().unwrap().push(a.clone());
    a.next.lock().unwrap().push(a.clone());
    drop((a, b));
    collect();
    assert_eq!(DROPS.load(SeqCst), 2);
    let c = STASH.lock().unwrap().take().unwrap();
    // Traced by a collection while it still lives: the dead handles are no edges.
    collect();
    assert_eq!(DROPS.load(SeqCst), 2);
    let weak = Gc::downgrade(&c);
    drop(c);
    let t = std::thread::spawn(collect);
    t.join().unwrap();
    assert!(weak.upgrade().is_none());
    assert_eq!(DROPS.load(SeqCst), 4);
}
