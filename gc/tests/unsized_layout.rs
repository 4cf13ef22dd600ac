//! Unsized values at the edges of their layout (hostile review): over-aligned
//! trait objects and slices (both families), slices of zero-sized candidates,
//! `Weak::new()` coerced to a trait object, weak handles to trait objects
//! that outlive their value (collected, moved out by `try_unwrap`, or never
//! written: a panicking `new_cyclic`). Run under Miri by `.ci/run`.

use std::cell::RefCell;
use std::sync::Mutex;

use recycler::unsize::DynTrace;
use recycler::{coerce, dyn_trace, Gc, Rc, Trace, Weak};

trait Shape: DynTrace {
    fn id(&self) -> usize;
    fn link(&self, _to: Gc<dyn Shape>) {}
}
dyn_trace!(Shape);

#[derive(Trace)]
#[repr(align(4096))]
struct Big {
    #[trace(skip)]
    id: usize,
    next: RefCell<Option<Gc<dyn Shape>>>,
}

impl Shape for Big {
    fn id(&self) -> usize {
        self.id
    }
    fn link(&self, to: Gc<dyn Shape>) {
        *self.next.borrow_mut() = Some(to);
    }
}

#[derive(Trace)]
#[repr(align(64))]
struct Leaf64(#[trace(skip)] u8);
impl Shape for Leaf64 {
    fn id(&self) -> usize {
        self.0 as usize
    }
}

#[test]
fn overaligned_dyn_cycle() {
    let a: Gc<dyn Shape> = coerce!(Gc::new(Big { id: 1, next: RefCell::new(None) }) => dyn Shape);
    let b: Gc<dyn Shape> = coerce!(Gc::new(Big { id: 2, next: RefCell::new(None) }) => dyn Shape);
    assert_eq!(Gc::as_ptr(&a) as *const u8 as usize % 4096, 0);
    assert_eq!((a.id(), b.id()), (1, 2));
    a.link(b.clone());
    b.link(a.clone());
    let w = Gc::downgrade(&a);
    let w2 = w.clone();
    let leaf: Gc<dyn Shape> = coerce!(Gc::new(Leaf64(7)) => dyn Shape);
    assert_eq!(leaf.id(), 7);
    let lw = Gc::downgrade(&leaf);
    drop((a, b, leaf));
    assert!(lw.upgrade().is_none());
    recycler::collect();
    assert!(w.upgrade().is_none());
    assert_eq!(w.strong_count(), 0);
    drop(w);
    // reuse deferred memory
    let c = Gc::new(Big {
        id: 3,
        next: RefCell::new(None),
    });
    drop(w2);
    drop(c);
    let n: Weak<dyn Shape> = coerce!(Weak::<Big>::new() => dyn Shape);
    assert!(n.upgrade().is_none());
    assert_eq!(n.weak_count(), 0);
    let n2 = n.clone();
    assert!(n.ptr_eq(&n2));
}

#[derive(Trace)]
#[repr(align(256))]
struct Elem {
    next: RefCell<Option<Gc<[Elem]>>>,
}

#[test]
fn overaligned_slice_cycle() {
    let s: Gc<[Elem]> = (0..3)
        .map(|_| Elem {
            next: RefCell::new(None),
        })
        .collect();
    assert_eq!(Gc::as_ptr(&s) as *const u8 as usize % 256, 0);
    *s[1].next.borrow_mut() = Some(s.clone());
    let w = Gc::downgrade(&s);
    drop(s);
    recycler::collect();
    assert!(w.upgrade().is_none());
    drop(w);
    let e: Gc<[Elem]> = Gc::from(Vec::new());
    assert_eq!(e.len(), 0);
    let r: Rc<[Elem]> = Rc::from(vec![Elem {
        next: RefCell::new(None),
    }]);
    drop(r);
}

#[derive(Trace)]
#[repr(align(1024))]
struct Zst([Gc<Elem>; 0]);

#[test]
fn zst_candidate_slices() {
    let s: Gc<[Zst]> = (0..1000).map(|_| Zst([])).collect();
    let t = s.clone();
    drop(s);
    recycler::collect();
    assert_eq!(t.len(), 1000);
    let w = Gc::downgrade(&t);
    drop(t);
    recycler::collect();
    assert!(w.upgrade().is_none());
}

#[test]
fn new_cyclic_with_coerced_weak_and_panic() {
    thread_local! {
        static KEEP: RefCell<Option<Weak<dyn Shape>>> = const { RefCell::new(None) };
    }
    let r = std::panic::catch_unwind(|| {
        Gc::<Big>::new_cyclic(|w| {
            let d: Weak<dyn Shape> = coerce!(w.clone() => dyn Shape);
            KEEP.with(|k| *k.borrow_mut() = Some(d));
            panic!("init");
        })
    });
    assert!(r.is_err());
    let w = KEEP.with(|k| k.borrow_mut().take()).unwrap();
    assert!(w.upgrade().is_none());
    assert_eq!(w.strong_count(), 0);
    drop(w);
}

#[test]
fn try_unwrap_with_coerced_weak() {
    let a = Gc::new(Big {
        id: 1,
        next: RefCell::new(None),
    });
    let w: Weak<dyn Shape> = coerce!(Gc::downgrade(&a) => dyn Shape);
    let v = Gc::try_unwrap(a).ok().unwrap();
    assert!(w.upgrade().is_none());
    drop(v);
    drop(w);
}

#[test]
fn get_mut_dyn() {
    let mut a: Gc<dyn Shape> =
        coerce!(Gc::new(Big { id: 1, next: RefCell::new(None) }) => dyn Shape);
    let b = a.clone();
    drop(b); // buffered
    assert!(Gc::get_mut(&mut a).is_some());
    recycler::collect();
    drop(a);
}

mod sync_side {
    use super::*;
    use recycler::sync;

    pub trait SShape: DynTrace + Send + Sync {
        fn link(&self, _to: sync::Gc<dyn SShape + Send + Sync>) {}
    }
    dyn_trace!(SShape);

    #[derive(Trace)]
    #[repr(align(4096))]
    struct SBig {
        next: Mutex<Option<sync::Gc<dyn SShape + Send + Sync>>>,
    }
    impl SShape for SBig {
        fn link(&self, to: sync::Gc<dyn SShape + Send + Sync>) {
            *self.next.lock().unwrap() = Some(to);
        }
    }

    #[derive(Trace)]
    #[repr(align(512))]
    struct SElem {
        next: Mutex<Option<sync::Gc<[SElem]>>>,
    }

    #[test]
    fn sync_overaligned() {
        let a: sync::Gc<dyn SShape + Send + Sync> =
            coerce!(sync::Gc::new(SBig { next: Mutex::new(None) }) => dyn SShape + Send + Sync);
        assert_eq!(sync::Gc::as_ptr(&a) as *const u8 as usize % 4096, 0);
        a.link(a.clone());
        let w = sync::Gc::downgrade(&a);
        drop(a);
        sync::collect();
        assert!(w.upgrade().is_none());
        drop(w);
        let s: sync::Gc<[SElem]> = (0..3)
            .map(|_| SElem {
                next: Mutex::new(None),
            })
            .collect();
        assert_eq!(sync::Gc::as_ptr(&s) as *const u8 as usize % 512, 0);
        *s[2].next.lock().unwrap() = Some(s.clone());
        let w = sync::Gc::downgrade(&s);
        drop(s);
        sync::collect();
        assert!(w.upgrade().is_none());
        drop(w);
        let n: sync::Weak<dyn SShape + Send + Sync> =
            coerce!(sync::Weak::<SBig>::new() => dyn SShape + Send + Sync);
        assert!(n.upgrade().is_none());
        let n2 = n.clone();
        assert!(sync::Weak::ptr_eq(&n, &n2));
        let r: sync::Rc<[SElem]> = sync::Rc::from(vec![SElem {
            next: Mutex::new(None),
        }]);
        drop(r);
    }

    #[test]
    fn sync_new_cyclic_panic_with_coerced_weak() {
        static KEEP: Mutex<Option<sync::Weak<dyn SShape + Send + Sync>>> = Mutex::new(None);
        let r = std::panic::catch_unwind(|| {
            sync::Gc::<SBig>::new_cyclic(|w| {
                let d: sync::Weak<dyn SShape + Send + Sync> =
                    coerce!(w.clone() => dyn SShape + Send + Sync);
                *KEEP.lock().unwrap() = Some(d);
                panic!("init");
            })
        });
        assert!(r.is_err());
        let w = KEEP.lock().unwrap().take().unwrap();
        assert!(w.upgrade().is_none());
        drop(w);
    }
}
