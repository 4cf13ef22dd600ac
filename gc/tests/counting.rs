//! The `Rc`-style API of `Gc` and `Rc`: counts, weak handles, `new_cyclic`,
//! `try_unwrap`, `get_mut`, and the forwarded traits.
use std::cell::RefCell;
use std::collections::HashSet;

use recycler::{Gc, Rc, Trace};

#[derive(Trace, Default, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Value {
    n: u32,
}

#[derive(Trace)]
struct Parent {
    me: recycler::Weak<Parent>,
    children: RefCell<Vec<Gc<Parent>>>,
}

#[test]
fn counts_follow_clones_and_drops() {
    let a = Gc::new(Value { n: 1 });
    assert_eq!((Gc::strong_count(&a), Gc::weak_count(&a)), (1, 0));
    let b = a.clone();
    let w = Gc::downgrade(&a);
    assert_eq!((Gc::strong_count(&a), Gc::weak_count(&a)), (2, 1));
    assert_eq!((w.strong_count(), w.weak_count()), (2, 1));
    assert!(Gc::ptr_eq(&a, &b));
    assert!(w.ptr_eq(&Gc::downgrade(&b)));
    drop(b);
    assert_eq!(Gc::strong_count(&a), 1);
    drop(a);
    // No strong handle: no weak count either (std's rule).
    assert_eq!((w.strong_count(), w.weak_count()), (0, 0));
    assert!(w.upgrade().is_none());
    let empty = recycler::Weak::<Value>::new();
    assert!(empty.upgrade().is_none());
    assert_eq!((empty.strong_count(), empty.weak_count()), (0, 0));
    assert!(empty.as_ptr().is_null());
}

#[test]
fn new_cyclic_sees_a_weak_handle_to_itself() {
    let p = Gc::new_cyclic(|me: &recycler::Weak<Parent>| {
        assert!(me.upgrade().is_none(), "not yet constructed");
        Parent {
            me: me.clone(),
            children: RefCell::new(Vec::new()),
        }
    });
    assert!(Gc::ptr_eq(&p.me.upgrade().unwrap(), &p));
    assert_eq!((Gc::strong_count(&p), Gc::weak_count(&p)), (1, 1));
    let weak = Gc::downgrade(&p);
    drop(p);
    assert!(weak.upgrade().is_none());
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn new_cyclic_releases_the_allocation_if_init_panics() {
    let result = std::panic::catch_unwind(|| {
        Gc::new_cyclic(|_: &recycler::Weak<Value>| -> Value { panic!("no value") })
    });
    assert!(result.is_err());
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn try_unwrap_and_get_mut_need_a_unique_handle() {
    let mut a = Gc::new(Value { n: 1 });
    Gc::get_mut(&mut a).unwrap().n = 2;
    let b = a.clone();
    assert!(Gc::get_mut(&mut a).is_none());
    let a = Gc::try_unwrap(a).unwrap_err();
    drop(b);
    let w = Gc::downgrade(&a);
    let mut a = a;
    assert!(Gc::get_mut(&mut a).is_none(), "a weak handle exists");
    assert_eq!(Gc::try_unwrap(a).unwrap(), Value { n: 2 });
    assert!(w.upgrade().is_none());
    assert_eq!(recycler::stats().live, 0);
}

#[test]
fn get_mut_takes_a_buffered_root_out_of_the_buffer() {
    let mut p = Gc::new(Parent {
        me: recycler::Weak::new(),
        children: RefCell::new(Vec::new()),
    });
    drop(p.clone());
    assert_eq!(recycler::stats().roots_buffered, 1);
    assert!(Gc::get_mut(&mut p).is_some());
    assert_eq!(recycler::stats().roots_buffered, 0);
    recycler::collect();
    assert_eq!(Gc::strong_count(&p), 1);
}

#[test]
fn forwarded_traits_use_the_value() {
    let a = Gc::new(Value { n: 3 });
    let b = Gc::new(Value { n: 4 });
    assert_eq!(a, Gc::new(Value { n: 3 }));
    assert!(a < b);
    assert_eq!(a.cmp(&b), std::cmp::Ordering::Less);
    assert_eq!(format!("{a:?}"), "Value { n: 3 }");
    let s: Gc<String> = Gc::from(String::from("hi"));
    assert_eq!(format!("{s}"), "hi");
    assert_eq!(format!("{s:p}"), format!("{:p}", Gc::as_ptr(&s)));
    let set: HashSet<Gc<Value>> = [a.clone(), a.clone(), b].into_iter().collect();
    assert_eq!(set.len(), 2);
    let d: Gc<Value> = Gc::default();
    assert_eq!(d.n, 0);
    let borrowed: &Value = std::borrow::Borrow::borrow(&a);
    assert_eq!(borrowed.n, 3);
    assert_eq!(AsRef::<Value>::as_ref(&a).n, 3);
}

#[test]
fn rc_has_the_same_api_and_never_buffers() {
    let a = Rc::new(Value { n: 1 });
    let w = Rc::downgrade(&a);
    let b = a.clone();
    assert_eq!(Rc::strong_count(&a), 2);
    assert_eq!(Rc::weak_count(&a), 1);
    drop(b);
    assert_eq!(recycler::stats().roots_buffered, 0);
    assert_eq!(Rc::try_unwrap(a).unwrap().n, 1);
    assert!(w.upgrade().is_none());
    let c = Rc::new_cyclic(|me: &recycler::rc::Weak<Value>| {
        assert!(me.upgrade().is_none());
        Value { n: 9 }
    });
    assert_eq!(*Rc::try_deref(&c).unwrap(), Value { n: 9 });
}

#[test]
fn stats_count_objects_by_how_they_were_freed() {
    let before = recycler::stats();
    let a = Gc::new(Value { n: 1 });
    let r = Rc::new(Value { n: 2 });
    assert_eq!(recycler::stats().live, before.live + 2);
    drop((a, r));
    let after = recycler::stats();
    assert_eq!(after.live, before.live);
    assert_eq!(after.freed_by_rc, before.freed_by_rc + 2);
    assert_eq!(after.freed_by_collector, before.freed_by_collector);
}

#[test]
fn gc_is_one_word_and_not_send() {
    assert_eq!(
        std::mem::size_of::<Gc<Value>>(),
        std::mem::size_of::<usize>()
    );
    assert_eq!(
        std::mem::size_of::<Option<Gc<Value>>>(),
        std::mem::size_of::<usize>()
    );
    assert_eq!(
        std::mem::size_of::<Rc<Value>>(),
        std::mem::size_of::<usize>()
    );
}

thread_local! {
    static DROPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Nodes whose `Drop` counts itself and, if `bomb`, panics.
macro_rules! bomb {
    ($name:ident, $ptr:ident) => {
        struct $name {
            bomb: bool,
            children: Vec<$ptr<$name>>,
        }

        impl Drop for $name {
            fn drop(&mut self) {
                DROPS.with(|d| d.set(d.get() + 1));
                if self.bomb {
                    panic!("bomb");
                }
            }
        }

        // SAFETY: reports every `Gc` the node owns (`Rc`s report nothing).
        unsafe impl Trace for $name {
            fn trace(&self, tracer: &mut recycler::Tracer<'_>) {
                self.children.trace(tracer);
            }
        }

        impl $name {
            /// Drops a chain of nodes, each with a panicking leaf child
            /// (deeper than the nesting freed in place, 4 KiB of stack or,
            /// under Miri, sixteen levels, so both the in-place and the
            /// queued paths run): every value is dropped, one panic reaches
            /// the caller, and nothing aborts.
            fn nested_panics() {
                DROPS.with(|d| d.set(0));
                let len = if cfg!(miri) { 40 } else { 1000 };
                let mut chain = $ptr::new($name {
                    bomb: false,
                    children: Vec::new(),
                });
                for _ in 1..len {
                    let leaf = $ptr::new($name {
                        bomb: true,
                        children: Vec::new(),
                    });
                    chain = $ptr::new($name {
                        bomb: false,
                        children: vec![leaf, chain],
                    });
                }
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(chain)));
                assert!(result.is_err(), "a destructor's panic is re-raised");
                assert_eq!(DROPS.with(|d| d.get()), 2 * len - 1);
            }
        }
    };
}

bomb!(RcBomb, Rc);
bomb!(GcBomb, Gc);

#[test]
fn panics_in_nested_drops_do_not_stop_the_others() {
    RcBomb::nested_panics();
    GcBomb::nested_panics();
}
