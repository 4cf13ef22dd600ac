//! The size of every allocation, measured at the allocator: a leaf `Gc<T>`
//! (`T::MAY_CONTAIN_GC == false`) and any `recycler::Rc<T>` allocate exactly
//! what `std::rc::Rc<T>` does; a candidate `Gc<T>` one word more. Weak
//! handles, `new_cyclic`, `try_unwrap` and collection free exactly what was
//! allocated (the allocator checks the layout on every free).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};

use recycler::{Gc, Rc, Trace};

/// Records allocation sizes on the current thread while `RECORD` is set, and
/// checks that every free uses the layout its allocation had.
struct Recording;

thread_local! {
    static RECORD: Cell<bool> = const { Cell::new(false) };
    static SIZES: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
    static OUTSTANDING: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: forwards to `System`; the bookkeeping allocates nothing while it
// runs (the recording flag is cleared around the push).
unsafe impl GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if RECORD.try_with(|r| r.replace(false)).unwrap_or(false) {
            SIZES.with(|s| s.borrow_mut().push((layout.size(), layout.align())));
            OUTSTANDING.with(|o| o.set(o.get() + layout.size() as isize));
            RECORD.with(|r| r.set(true));
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if RECORD.try_with(|r| r.get()).unwrap_or(false) {
            OUTSTANDING.with(|o| o.set(o.get() - layout.size() as isize));
        }
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Recording = Recording;

/// The sizes of the allocations `f` makes, and the bytes it leaves allocated.
fn sizes<R>(f: impl FnOnce() -> R) -> (Vec<usize>, isize) {
    SIZES.with(|s| s.borrow_mut().clear());
    OUTSTANDING.with(|o| o.set(0));
    RECORD.with(|r| r.set(true));
    let result = f();
    drop(result);
    RECORD.with(|r| r.set(false));
    let sizes = SIZES.with(|s| s.borrow().iter().map(|&(size, _)| size).collect());
    (sizes, OUTSTANDING.with(|o| o.get()))
}

/// A candidate: may own a `Gc`.
#[derive(Trace, Default)]
struct Node {
    next: RefCell<Option<Gc<Node>>>,
}

#[derive(Trace, Default)]
#[repr(align(32))]
struct Aligned {
    next: RefCell<Option<Gc<Aligned>>>,
}

const WORD: usize = std::mem::size_of::<usize>();

#[test]
fn leaves_and_rc_allocate_what_std_rc_does() {
    let std_u64 = sizes(|| std::rc::Rc::new(7u64)).0;
    assert_eq!(std_u64, vec![2 * WORD + 8]);
    assert_eq!(sizes(|| Gc::new(7u64)), (std_u64.clone(), 0));
    assert_eq!(sizes(|| Rc::new(7u64)), (std_u64, 0));

    let std_string = sizes(|| std::rc::Rc::new(String::new())).0;
    assert_eq!(sizes(|| Gc::new(String::new())).0, std_string);

    // `recycler::Rc` is never a candidate, whatever it holds.
    let std_node = sizes(|| std::rc::Rc::new(Node::default())).0;
    assert_eq!(sizes(|| Rc::new(Node::default())), (std_node, 0));
}

#[test]
fn candidates_add_one_word() {
    let std_node = sizes(|| std::rc::Rc::new(Node::default())).0[0];
    assert_eq!(
        sizes(|| Gc::new(Node::default())),
        (vec![std_node + WORD], 0)
    );
    // Above word alignment the `meta` word costs one alignment unit.
    let std_aligned = sizes(|| std::rc::Rc::new(Aligned::default())).0[0];
    let (gc_aligned, left) = sizes(|| {
        let a = Gc::new(Aligned::default());
        assert_eq!(Gc::as_ptr(&a) as usize % 32, 0);
        a
    });
    assert_eq!((gc_aligned, left), (vec![std_aligned + 32], 0));
}

#[test]
fn weak_cyclic_unwrap_and_collection_free_what_they_allocated() {
    // A weak handle that outlives the value keeps the memory, then frees it.
    let (_, left) = sizes(|| {
        let a = Gc::new(Node::default());
        let w = Gc::downgrade(&a);
        drop(a);
        assert!(w.upgrade().is_none());
        w
    });
    assert_eq!(left, 0);
    let (_, left) = sizes(|| {
        let a = Rc::new(5u64);
        let w = Rc::downgrade(&a);
        drop(a);
        w
    });
    assert_eq!(left, 0);
    // `new_cyclic`, both kinds.
    let (_, left) = sizes(|| {
        let n = Gc::new_cyclic(|w: &recycler::Weak<Node>| {
            assert!(w.upgrade().is_none());
            Node::default()
        });
        let l = Rc::new_cyclic(|_: &recycler::rc::Weak<u64>| 3u64);
        (n, l)
    });
    assert_eq!(left, 0);
    // `try_unwrap`, both kinds.
    let (_, left) = sizes(|| {
        let n = Gc::try_unwrap(Gc::new(Node::default())).ok().unwrap();
        let l = Rc::try_unwrap(Rc::new(String::from("x"))).unwrap();
        (n, l)
    });
    assert_eq!(left, 0);
    // A collected cycle, and a dead handle kept past the collection. The
    // first runs warm up the collector's buffers, which it keeps.
    let cycle = || {
        let a = Gc::new(Node::default());
        let b = Gc::new(Node::default());
        *a.next.borrow_mut() = Some(b.clone());
        *b.next.borrow_mut() = Some(a.clone());
        let w = Gc::downgrade(&a);
        drop((a, b));
        recycler::collect();
        assert!(w.upgrade().is_none());
    };
    cycle();
    cycle();
    let (sizes, left) = sizes(cycle);
    assert_eq!((sizes.len(), left), (2, 0));
}

/// The memory of objects freed by automatic collections goes back to the
/// allocator at the next allocations (at most a few dozen wait), and all of
/// it by an explicit `collect()`; every free has its allocation's layout.
#[test]
fn deferred_frees_are_bounded_and_returned_by_collect() {
    let churn = |n: usize| {
        for _ in 0..n {
            let a = Gc::new(Node::default());
            let b = Gc::new(Node::default());
            *a.next.borrow_mut() = Some(b.clone());
            *b.next.borrow_mut() = Some(a);
        }
    };
    let n = if cfg!(miri) { 300 } else { 20_000 };
    // Warm up the collector's buffers, which it keeps.
    churn(n);
    recycler::collect();
    let before = recycler::stats().freed_by_collector;
    let (_, left) = sizes(|| {
        churn(n);
        let collected = recycler::stats().freed_by_collector - before;
        assert!(collected > 0, "automatic collections ran");
        recycler::collect();
    });
    assert_eq!(left, 0);
    // While automatic collections run, what waits to be freed stays
    // bounded: the garbage not collected yet (the roots of a collection or
    // two) plus the deferred frees (at most one collection's garbage here,
    // which the next allocations reuse), whatever the number of cycles.
    let node = std::mem::size_of::<usize>() as isize * 3 + 16;
    let (_, left) = sizes(|| churn(n));
    assert!(left < 4096 * node, "{left} bytes outstanding");
    recycler::collect();
}

/// Large garbage (rings of thousands of nodes, built and dropped one after
/// the other with automatic collections) keeps at most 512 KiB of deferred
/// frees waiting, besides the garbage not collected yet, whatever the number
/// of rings; `collect()` returns them.
#[test]
fn deferred_frees_of_large_garbage_are_bounded() {
    let (len, rings) = if cfg!(miri) { (200, 3) } else { (8192, 12) };
    let ring = || {
        let first = Gc::new(Node::default());
        let mut last = first.clone();
        for _ in 1..len {
            let next = Gc::new(Node::default());
            *last.next.borrow_mut() = Some(next.clone());
            last = next;
        }
        *last.next.borrow_mut() = Some(first);
    };
    // Warm up the collector's buffers (and the deferred list's), which it
    // keeps.
    for _ in 0..3 {
        ring();
    }
    recycler::collect();
    let node = std::mem::size_of::<usize>() as isize * 3 + 16;
    let (_, left) = sizes(|| (0..rings).for_each(|_| ring()));
    // Up to two rings wait for a full collection.
    let bound = 512 * 1024 + 2 * len as isize * node;
    assert!(left < bound, "{left} bytes outstanding (bound {bound})");
    let (_, left) = sizes(recycler::collect);
    assert!(left <= 0, "collect() freed everything it kept");
}

/// A node whose `Drop` keeps a clone of the handle it owns: after a
/// collection, that clone is a dead handle, and dropping it later frees the
/// memory outside the collection (deferred).
#[derive(Trace, Default)]
struct Keeper {
    next: RefCell<Option<Gc<Keeper>>>,
}

thread_local! {
    static KEPT: RefCell<Vec<Gc<Keeper>>> = const { RefCell::new(Vec::new()) };
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if let Some(next) = self.next.borrow().clone() {
            KEPT.with(|k| k.borrow_mut().push(next));
        }
    }
}

/// The memory of collected objects still waiting to be freed when a thread
/// exits goes back to the allocator: a thread that leaves it to the exit
/// ends with the same bytes outstanding as one that calls `collect()`.
#[test]
fn deferred_frees_are_returned_at_thread_exit() {
    use std::sync::atomic::{AtomicIsize, Ordering::SeqCst};
    static LEFT: AtomicIsize = AtomicIsize::new(isize::MIN);
    /// Registered first, so destroyed last: reads what is left.
    struct Report;
    impl Drop for Report {
        fn drop(&mut self) {
            RECORD.with(|r| r.set(false));
            LEFT.store(OUTSTANDING.with(Cell::get), SeqCst);
        }
    }
    thread_local! {
        static REPORT: Report = const { Report };
    }
    let left_after = |flush: bool| {
        std::thread::spawn(move || {
            REPORT.with(|_| ());
            KEPT.with(|_| ());
            OUTSTANDING.with(|o| o.set(0));
            RECORD.with(|r| r.set(true));
            let a = Gc::new(Keeper::default());
            let b = Gc::new(Keeper::default());
            *a.next.borrow_mut() = Some(b.clone());
            *b.next.borrow_mut() = Some(a);
            drop(b);
            recycler::collect();
            // Two dead handles: their objects' memory is freed, or kept
            // for the next allocations, as they go.
            assert_eq!(KEPT.with(|k| k.borrow().len()), 2);
            KEPT.with(|k| k.borrow_mut().clear());
            if flush {
                recycler::collect();
            }
        })
        .join()
        .unwrap();
        LEFT.load(SeqCst)
    };
    assert_eq!(left_after(false), left_after(true));
}
