//! `sync::Weak::weak_count` is "0 once it has no strong handle", and
//! `Weak::strong_count` is 0 once the object is collected, even while a
//! destructor of its cycle keeps a (dead) handle to it. `weak_count` read
//! the raw count instead and went on counting the weak handles of a
//! collected object (found by an outside review: 2 with two `Weak`s).

use std::sync::Mutex;

use recycler::sync::{collect, Gc};
use recycler::Trace;

static KEPT: Mutex<Vec<Gc<Node>>> = Mutex::new(Vec::new());

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    /// Whether its `Drop` keeps a handle to the next member (dead by then).
    #[trace(skip)]
    keeps: bool,
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.keeps {
            if let Some(next) = self.next.lock().unwrap().as_ref() {
                KEPT.lock().unwrap().push(next.clone());
            }
        }
    }
}

#[test]
fn a_collected_object_has_no_weak_count_while_a_dead_handle_is_kept() {
    let a = Gc::new(Node {
        next: Mutex::new(None),
        keeps: true,
    });
    let b = Gc::new(Node {
        next: Mutex::new(Some(a.clone())),
        keeps: false,
    });
    *a.next.lock().unwrap() = Some(b.clone());
    let weak = Gc::downgrade(&b);
    let other = weak.clone();
    assert_eq!((weak.strong_count(), weak.weak_count()), (2, 2));
    drop((a, b));
    collect();
    let dead = KEPT.lock().unwrap().pop().expect("the destructor kept b");
    assert!(Gc::try_deref(&dead).is_none());
    assert!(weak.upgrade().is_none());
    assert_eq!(weak.strong_count(), 0);
    assert_eq!(weak.weak_count(), 0, "no strong handle: no weak count");
    drop((dead, other));
    assert_eq!((weak.strong_count(), weak.weak_count()), (0, 0));
}
