//! Test objects and the model runner shared by the loom models.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use loom::cell::{MutPtr, UnsafeCell};
use loom::sync::atomic::{
    AtomicBool,
    Ordering::{Acquire, Release},
};
use recycler::sync::{Gc, TraceLock};
use recycler::{Trace, Tracer};

/// The nodes' cell: a spin lock whose `try_lock` is one CAS.
///
/// Not `loom::sync::Mutex`: loom (0.7) marks a thread whose next operation
/// is a `try_lock` of a mutex as *blocked* when another thread acquires that
/// mutex, although `try_lock` never waits. The collector try-locks a cell
/// while it keeps other cells locked (the pinned trace, the re-trace of a
/// component), so a mutator nesting the same two locks in the other order
/// made loom report a deadlock that cannot happen. With a CAS, loom models
/// exactly what the collector does: fail and carry on. `lock` spins, yielding
/// to loom's scheduler; the data accesses are checked by loom's `UnsafeCell`.
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, one at a time.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Exclusive access to a [`SpinLock`]'s value.
pub struct Guard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Loom's record of the access, ended before the lock is released.
    value: Option<MutPtr<T>>,
}

impl<T> SpinLock<T> {
    /// Records a write to the value through `&mut self` (no lock taken), as
    /// its drop does: loom reports it if an access through a guard on
    /// another thread is not ordered before it.
    pub fn touch_mut(&mut self) {
        self.value.with_mut(|_| ());
    }

    /// An unlocked lock.
    pub fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks if that is possible without waiting.
    pub fn try_lock(&self) -> Option<Guard<'_, T>> {
        let won = self
            .locked
            .compare_exchange(false, true, Acquire, Acquire)
            .is_ok();
        won.then(|| Guard {
            lock: self,
            value: Some(self.value.get_mut()),
        })
    }

    /// Locks, waiting as long as it takes. Returns a `Result` (never an
    /// error) so that call sites read like `Mutex`'s.
    #[allow(clippy::result_unit_err)]
    pub fn lock(&self) -> Result<Guard<'_, T>, ()> {
        loop {
            if let Some(guard) = self.try_lock() {
                return Ok(guard);
            }
            loom::thread::yield_now();
        }
    }
}

impl<T> core::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        let value = self.value.as_ref().expect("guard alive");
        // SAFETY: the guard holds the lock (exclusive access).
        unsafe { value.deref() }
    }
}

impl<T> core::ops::DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        let value = self.value.as_ref().expect("guard alive");
        // SAFETY: the guard holds the lock (exclusive access).
        unsafe { value.deref() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        drop(self.value.take());
        self.lock.locked.store(false, Release);
    }
}

// SAFETY: a guard excludes every other access to the value until it is
// dropped (on the thread that took it, whenever that is); `try_lock` never
// blocks.
unsafe impl<T: Trace> TraceLock for SpinLock<T> {
    type Value = T;
    type Guard<'a>
        = Guard<'a, T>
    where
        T: 'a;
    fn try_lock_for_trace(&self) -> Option<Guard<'_, T>> {
        self.try_lock()
    }
}

// SAFETY: traced through `trace_lock` on itself, which it owns.
unsafe impl<T: Trace> Trace for SpinLock<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        tracer.trace_lock(self);
    }
}

/// Drop counts of the objects of one execution.
pub struct Book {
    drops: Vec<AtomicUsize>,
}

impl Book {
    /// A book for `n` objects.
    pub fn new(n: usize) -> Arc<Book> {
        Arc::new(Book {
            drops: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    /// Asserts that every object was dropped exactly once.
    pub fn assert_all_dropped_once(&self) {
        for (id, d) in self.drops.iter().enumerate() {
            assert_eq!(
                d.load(SeqCst),
                1,
                "object {id} dropped {} times",
                d.load(SeqCst)
            );
        }
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.drops.len()
    }

    /// Whether the book has no objects.
    pub fn is_empty(&self) -> bool {
        self.drops.is_empty()
    }

    /// How many objects have been dropped.
    pub fn dropped(&self) -> usize {
        self.drops.iter().filter(|d| d.load(SeqCst) > 0).count()
    }

    /// Ends a model: collects (fully), and requires every object dropped
    /// exactly once. Loom's `join` returns before the joined thread's
    /// thread-locals are destroyed (std's does not), so the buffer a finished
    /// thread hands over may arrive after the join: collect again after
    /// yielding to the exiting threads (a bounded number of times; a leak
    /// fails the assertion).
    pub fn finish(&self) {
        recycler::sync::collect();
        for _ in 0..3 {
            if self.dropped() == self.len() {
                break;
            }
            loom::thread::yield_now();
            recycler::sync::collect();
        }
        self.assert_all_dropped_once();
    }
}

/// A graph node: a lockable edge list and a probe that detects use after drop.
#[derive(Trace)]
pub struct Node {
    /// Outgoing edges.
    pub edges: SpinLock<Vec<Gc<Node>>>,
    /// An edge fixed at construction, outside any cell.
    pub fixed: Option<Gc<Node>>,
    #[trace(skip)]
    id: usize,
    #[trace(skip)]
    book: Arc<Book>,
}

impl Node {
    /// A new node numbered `id` in `book`.
    pub fn new(book: &Arc<Book>, id: usize) -> Gc<Node> {
        Node::with_fixed(book, id, None)
    }

    /// A new node numbered `id` in `book` whose fixed edge is `fixed`.
    pub fn with_fixed(book: &Arc<Book>, id: usize, fixed: Option<Gc<Node>>) -> Gc<Node> {
        Gc::new(Node {
            edges: SpinLock::new(Vec::new()),
            fixed,
            id,
            book: book.clone(),
        })
    }

    /// Asserts that this node's value has not been dropped (it is reachable).
    pub fn check(&self) {
        assert_eq!(
            self.book.drops[self.id].load(SeqCst),
            0,
            "object {} used after its value was dropped",
            self.id
        );
    }

    /// Adds an edge to `to`.
    pub fn link(&self, to: &Gc<Node>) {
        self.check();
        self.edges.lock().unwrap().push(to.clone());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Dropping the value writes its cell: every mutator's access to it
        // must happen before (loom checks it).
        self.edges.touch_mut();
        let before = self.book.drops[self.id].fetch_add(1, SeqCst);
        assert_eq!(before, 0, "object {} dropped twice", self.id);
    }
}

/// Runs `f` under loom, by default with at most five preemptions.
pub fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(5);
    }
    builder.max_branches = 100_000;
    builder.check(f);
}

/// Two nodes `a <-> b`.
pub fn pair(book: &Arc<Book>) -> (Gc<Node>, Gc<Node>) {
    let (a, b) = (Node::new(book, 0), Node::new(book, 1));
    a.link(&b);
    b.link(&a);
    (a, b)
}

/// The common shape: `a <-> b` with `b` buffered (its only handle is in
/// `a`'s cell); `mutator` gets the only outside handle, `a`, on a second
/// thread while the main thread collects. With `stale`, the collections'
/// snapshots count as too old for the Δ-test
/// (`recycler::sync::force_stale_snapshots`).
pub fn pair_against_collector(mutator: fn(Gc<Node>), stale: bool) {
    model(move || {
        recycler::sync::set_policy(recycler::Policy::Manual);
        recycler::sync::force_stale_snapshots(stale);
        let book = Book::new(2);
        let (a, b) = pair(&book);
        drop(b);
        let t = loom::thread::spawn(move || mutator(a));
        recycler::sync::collect();
        t.join().unwrap();
        book.finish();
        recycler::sync::force_stale_snapshots(false);
    });
}

/// A garbage `a <-> b` collected while `mutator` gets a `Weak` to `a` on a
/// second thread (`stale` as for [`pair_against_collector`]).
pub fn garbage_pair_against_upgrade(mutator: fn(recycler::sync::Weak<Node>), stale: bool) {
    model(move || {
        recycler::sync::set_policy(recycler::Policy::Manual);
        recycler::sync::force_stale_snapshots(stale);
        let book = Book::new(2);
        let (a, b) = pair(&book);
        let wa = Gc::downgrade(&a);
        drop((a, b));
        let t = loom::thread::spawn(move || mutator(wa));
        recycler::sync::collect();
        t.join().unwrap();
        book.finish();
        recycler::sync::force_stale_snapshots(false);
    });
}

/// Mutators for [`pair_against_collector`], each given `a`, and for
/// [`garbage_pair_against_upgrade`], given a `Weak` to `a`.
pub mod mutators {
    use super::Node;
    use recycler::sync::{Gc, Weak};

    /// R3: upgrades `a` (if the collector has not doomed it) and uses it.
    pub fn upgrade_and_check(wa: Weak<Node>) {
        if let Some(a) = wa.upgrade() {
            a.check();
            a.edges.lock().unwrap()[0].check();
        }
    }

    /// R2 and R3: upgrades `a`, moves its handle to `b` onto the stack and
    /// drops `a`.
    pub fn upgrade_then_move_b_out(wa: Weak<Node>) {
        if let Some(a) = wa.upgrade() {
            move_b_out(a);
        }
    }

    /// R1: trades the handle on `a` for one on `b`.
    pub fn trade_a_for_b(a: Gc<Node>) {
        let hb = a.edges.lock().unwrap()[0].clone();
        drop(a);
        hb.check();
        hb.edges.lock().unwrap()[0].check();
    }

    /// R2: moves `a`'s handle to `b` out of its cell onto the stack.
    pub fn move_b_out(a: Gc<Node>) {
        let hb = a.edges.lock().unwrap().pop().unwrap();
        drop(a); // a is now only reachable through hb
        hb.check();
        hb.edges.lock().unwrap()[0].check();
    }

    /// R2: moves `a`'s handle to `b` out of its cell and back.
    pub fn move_b_out_and_back(a: Gc<Node>) {
        let hb = a.edges.lock().unwrap().pop().unwrap();
        hb.check();
        a.edges.lock().unwrap().push(hb);
        a.check();
        drop(a);
    }
}
