//! A `Trace` that reaches handles through thread-locals (the contract
//! allows it to clone, drop handles no value owns, and mark its object
//! live) must not get `&mut` to a value the collector is tracing, and a
//! destructor run while the collector frees must not get a handle to an
//! object the collector then frees. Both were found by an outside review
//! (a use after free each, Miri and natively).

use std::cell::RefCell;

use recycler::{collect, Gc, Trace, Tracer, Weak};

struct X {
    val: u64,
}

#[derive(Trace)]
struct Holder {
    x: RefCell<Gc<X>>,
}

thread_local! {
    static ROOT: RefCell<Option<Gc<Holder>>> = const { RefCell::new(None) };
    static GOT_MUT: RefCell<Option<bool>> = const { RefCell::new(None) };
}

// SAFETY: `X` owns no collected pointer and reports none; it takes no
// pointer away from any value (`get_mut` moves nothing).
unsafe impl Trace for X {
    const MAY_CONTAIN_GC: bool = true;
    fn trace(&self, _: &mut Tracer<'_>) {
        let before = self.val;
        ROOT.with(|r| {
            if let Some(h) = r.borrow().as_ref() {
                let mut slot = h.x.borrow_mut();
                let got = Gc::get_mut(&mut slot).map(|m| m.val += 1).is_some();
                GOT_MUT.with(|g| *g.borrow_mut() = Some(got));
            }
        });
        assert_eq!(self.val, before, "the value changed under `&self`");
    }
}

#[test]
fn get_mut_refuses_a_value_being_traced() {
    let h = Gc::new(Holder {
        x: RefCell::new(Gc::new(X { val: 0 })),
    });
    ROOT.with(|r| *r.borrow_mut() = Some(h.clone()));
    drop(h); // `Holder` is buffered; `X` is reached through its edge
    collect();
    assert_eq!(GOT_MUT.with(|g| *g.borrow()), Some(false), "traced X");
    let h = ROOT.with(|r| r.borrow_mut().take()).unwrap();
    // Outside a collection the only handle gets its `&mut` as before.
    assert!(Gc::get_mut(&mut h.x.borrow_mut()).is_some());
}

struct K {
    name: String,
}

thread_local! {
    static HANDLES: RefCell<Vec<Gc<K>>> = const { RefCell::new(Vec::new()) };
    static WEAKS: RefCell<Vec<Weak<K>>> = const { RefCell::new(Vec::new()) };
    static STASH: RefCell<Option<Gc<K>>> = const { RefCell::new(None) };
}

// SAFETY: `K` owns no collected pointer and reports none; the handles it
// drops are owned by no value (a thread-local's), which the contract allows.
unsafe impl Trace for K {
    const MAY_CONTAIN_GC: bool = true;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        tracer.keep_alive();
        drop(HANDLES.with(|h| std::mem::take(&mut *h.borrow_mut())));
    }
}

impl Drop for K {
    fn drop(&mut self) {
        // An ordinary destructor: upgrade a weak handle and keep it.
        for w in WEAKS.with(|w| std::mem::take(&mut *w.borrow_mut())) {
            if let Some(g) = w.upgrade() {
                if !std::ptr::eq(&*g, self) {
                    STASH.with(|s| *s.borrow_mut() = Some(g));
                }
            }
        }
    }
}

#[test]
fn a_root_upgraded_by_a_destructor_during_the_free_stays_alive() {
    let a = Gc::new(K {
        name: "a".repeat(20),
    });
    let b = Gc::new(K {
        name: "b".repeat(20),
    });
    WEAKS.with(|w| {
        w.borrow_mut()
            .extend([Gc::downgrade(&a), Gc::downgrade(&b)])
    });
    HANDLES.with(|h| h.borrow_mut().extend([a.clone(), b.clone()]));
    // Both are buffered; their only handles are in `HANDLES`, which their
    // traces drop: each is live at the verdict, held only by the collector.
    drop((a, b));
    collect();
    let stashed = STASH.with(|s| s.borrow_mut().take()).expect("upgraded");
    assert_eq!(stashed.name.len(), 20);
    assert!(Gc::try_deref(&stashed).is_some());
}
