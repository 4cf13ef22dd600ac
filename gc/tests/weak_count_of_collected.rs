//! `Weak::weak_count` of the single-threaded families follows std's rule,
//! as `recycler::sync::Weak`'s does: 0 once no strong handle remains,
//! whether the object was dropped by counting or collected, and also while
//! a destructor of its cycle keeps a (dead) handle to it (which
//! `strong_count` already reported as 0). It used to count the weak handles
//! of an object without strong handles: 1 after the last drop, 2 with two
//! `Weak`s of a collected object whose dead handle a destructor kept.

use std::cell::RefCell;

use recycler::{collect, Gc, Rc, Trace};

thread_local! {
    static KEPT: RefCell<Vec<Gc<Node>>> = const { RefCell::new(Vec::new()) };
}

#[derive(Trace)]
struct Node {
    next: RefCell<Option<Gc<Node>>>,
    /// Whether its `Drop` keeps a handle to the next member (dead by then).
    #[trace(skip)]
    keeps: bool,
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.keeps {
            if let Some(next) = self.next.borrow().as_ref() {
                KEPT.with(|k| k.borrow_mut().push(next.clone()));
            }
        }
    }
}

#[test]
fn a_collected_object_has_no_weak_count_while_a_dead_handle_is_kept() {
    let a = Gc::new(Node {
        next: RefCell::new(None),
        keeps: true,
    });
    let b = Gc::new(Node {
        next: RefCell::new(Some(a.clone())),
        keeps: false,
    });
    *a.next.borrow_mut() = Some(b.clone());
    let weak = Gc::downgrade(&b);
    let other = weak.clone();
    assert_eq!((weak.strong_count(), weak.weak_count()), (2, 2));
    drop((a, b));
    collect();
    let dead = KEPT
        .with(|k| k.borrow_mut().pop())
        .expect("the destructor kept b");
    assert!(Gc::try_deref(&dead).is_none());
    assert!(weak.upgrade().is_none());
    assert_eq!(weak.strong_count(), 0);
    assert_eq!(weak.weak_count(), 0, "no strong handle: no weak count");
    drop((dead, other));
    assert_eq!((weak.strong_count(), weak.weak_count()), (0, 0));
}

#[test]
fn an_object_dropped_by_counting_has_no_weak_count() {
    let gc = Gc::new(5_u32);
    let rc = Rc::new(5_u32);
    let (wg, wr) = (Gc::downgrade(&gc), Rc::downgrade(&rc));
    let (wg2, wr2) = (wg.clone(), wr.clone());
    assert_eq!((wg.weak_count(), wr.weak_count()), (2, 2));
    assert_eq!((Gc::weak_count(&gc), Rc::weak_count(&rc)), (2, 2));
    drop((gc, rc));
    assert_eq!((wg.strong_count(), wg.weak_count()), (0, 0));
    assert_eq!((wr.strong_count(), wr.weak_count()), (0, 0));
    drop((wg2, wr2));
    assert_eq!((wg.weak_count(), wr.weak_count()), (0, 0));
}
