//! Regression tests of issue 12 (an outside review's hostile programs) and
//! more hostile-user tests of the thread-safe pointers. Each test takes
//! `serial()` (see `tests.rs`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use super::header::{CTR, MAX_COUNT, MAX_WEAK, ONE};
use super::tests::{link, node, serial, Node};
use super::{collect, Gc, Rc, TraceLock, Weak};
use crate::test_support::{assert_aborts, reached};
use crate::trace::{Trace, Tracer};

/// The payload of a caught panic, as text.
fn message(payload: &(dyn core::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("")
}

// ---------------------------------------------------------------------------
// Item 1: a deferred drop never outlives a borrow. The review's program no
// longer compiles (`compile_fail` doctests on `sync::Rc`, `sync::Gc::get_mut`
// and `Gc::get_mut`); with `'static` data it runs. The inner drops run in
// place, as `Arc`'s (nested drops are only queued past a stack budget, see
// `drops.rs`), and read live data.

#[test]
fn a_drop_inside_a_drop_runs_in_place_and_reads_live_data() {
    let _s = serial();
    static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
    struct Reader(Arc<String>);
    impl Drop for Reader {
        fn drop(&mut self) {
            LOG.lock().unwrap().push(format!("reader {}", self.0.len()));
        }
    }
    struct Outer;
    impl Drop for Outer {
        fn drop(&mut self) {
            let s = Arc::new(String::from("a string on the heap"));
            drop(Rc::new(Reader(s.clone())));
            let mut only = Rc::new(Reader(s));
            // `get_mut` needs `T: 'static`: only `'static` data goes in.
            Rc::get_mut(&mut only).unwrap().0 = Arc::new(String::from("x"));
            drop(only);
            LOG.lock().unwrap().push("outer returns".into());
        }
    }
    drop(Rc::new(Outer));
    assert_eq!(
        *LOG.lock().unwrap(),
        ["reader 20", "reader 1", "outer returns"],
        "nested drops run in place, as std's"
    );
}

// ---------------------------------------------------------------------------
// Item 2: every increment of a count aborts before it can overflow. The
// counts are forged close to the limit (2^31 real increments take seconds);
// the operations are the real ones, with the real limits.

/// A `Node` whose strong count is forged to `MAX_COUNT - 1`.
fn node_near_max(drops: &Arc<AtomicUsize>) -> Gc<Node> {
    let a = node(drops);
    a.header().word.fetch_add((MAX_COUNT - 2) * ONE, SeqCst);
    a
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process")]
fn clone_aborts_at_the_count_limit() {
    assert_aborts("sync::regressions::clone_aborts_at_the_count_limit", || {
        let a = node_near_max(&Arc::default());
        core::mem::forget(a.clone()); // reaches MAX_COUNT: fine
        assert_eq!(Gc::strong_count(&a) as u64, MAX_COUNT);
        reached();
        core::mem::forget(a.clone());
    });
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process")]
fn upgrade_aborts_at_the_count_limit() {
    assert_aborts(
        "sync::regressions::upgrade_aborts_at_the_count_limit",
        || {
            let a = node_near_max(&Arc::default());
            let weak = Gc::downgrade(&a);
            core::mem::forget(weak.upgrade().unwrap());
            assert_eq!(Gc::strong_count(&a) as u64, MAX_COUNT);
            reached();
            core::mem::forget(weak.upgrade());
        },
    );
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process")]
fn rc_upgrade_aborts_at_the_count_limit() {
    assert_aborts(
        "sync::regressions::rc_upgrade_aborts_at_the_count_limit",
        || {
            let a = Rc::new(5u8);
            a.header().word.fetch_add((MAX_COUNT - 1) * ONE, SeqCst);
            let weak = Rc::downgrade(&a);
            reached();
            core::mem::forget(weak.upgrade());
        },
    );
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process")]
fn a_collectors_hold_on_a_root_aborts_at_the_count_limit() {
    assert_aborts(
        "sync::regressions::a_collectors_hold_on_a_root_aborts_at_the_count_limit",
        || {
            let _s = serial();
            let a = node_near_max(&Arc::default());
            drop(a.clone()); // buffered as a root
            core::mem::forget(a.clone()); // count MAX_COUNT
            reached();
            collect(); // draining the entry takes a hold
        },
    );
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process")]
fn a_collectors_hold_on_a_target_aborts_at_the_count_limit() {
    assert_aborts(
        "sync::regressions::a_collectors_hold_on_a_target_aborts_at_the_count_limit",
        || {
            let _s = serial();
            let drops = Arc::default();
            let target = node_near_max(&drops);
            let root = node(&drops);
            link(&root, &target); // count MAX_COUNT
            drop(root.clone()); // `root` is buffered; `target` is not
            reached();
            collect(); // tracing `root` takes a hold on `target`
        },
    );
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process")]
fn downgrade_aborts_at_the_weak_limit() {
    assert_aborts(
        "sync::regressions::downgrade_aborts_at_the_weak_limit",
        || {
            let a = node(&Arc::default());
            let weak = Gc::downgrade(&a);
            a.header().weak.store(MAX_WEAK - 1, SeqCst);
            core::mem::forget(weak.clone()); // reaches MAX_WEAK: fine
            reached();
            core::mem::forget(weak.clone());
        },
    );
}

/// The modification counter wraps off the top of the word: with it forged
/// to its last value, every transition still works (plain `+` on the word
/// panicked in debug builds after 2^26 operations on one object).
#[test]
fn the_modification_counter_wraps() {
    let _s = serial();
    let drops = Arc::new(AtomicUsize::new(0));
    let (a, b) = (node(&drops), node(&drops));
    link(&a, &b);
    link(&b, &a);
    let saturate = |g: &Gc<Node>| {
        g.header().word.fetch_or(!(CTR - 1), SeqCst);
    };
    saturate(&a);
    let a2 = a.clone();
    saturate(&a);
    drop(a2); // the buffering CAS path
    let weak = Gc::downgrade(&b);
    saturate(&b);
    let b2 = weak.upgrade().unwrap();
    saturate(&b);
    drop(b2);
    assert_eq!((Gc::strong_count(&a), Gc::strong_count(&b)), (2, 2));
    saturate(&a);
    saturate(&b);
    drop((a, b));
    collect(); // drain (a hold), validation CAS, release
    assert!(weak.upgrade().is_none());
    assert_eq!(drops.load(SeqCst), 2);
}

// ---------------------------------------------------------------------------
// Item 3: a panicking `Trace` loses no root.

/// A node whose `trace` panics while `panics` is set.
struct Flaky {
    drops: Arc<AtomicUsize>,
    panics: Arc<AtomicBool>,
    edges: Mutex<Vec<Gc<Flaky>>>,
}

// SAFETY: reports the handles in `edges`, each once, through the mutex (or
// panics before reporting anything).
unsafe impl Trace for Flaky {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        if self.panics.load(SeqCst) {
            panic!("trace panics");
        }
        self.edges.trace(tracer);
    }
}

impl Drop for Flaky {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

#[test]
fn a_panicking_trace_loses_no_root() {
    let _s = serial();
    let (plain, flaky) = (Arc::new(AtomicUsize::new(0)), Arc::default());
    let panics = Arc::new(AtomicBool::new(true));
    // A garbage cycle buffered before the panic.
    let (a, b) = (node(&plain), node(&plain));
    link(&a, &b);
    link(&b, &a);
    drop((a, b));
    // A garbage cycle whose member `p` cannot be traced for now.
    let mk = || {
        Gc::new(Flaky {
            drops: Arc::clone(&flaky),
            panics: panics.clone(),
            edges: Mutex::new(Vec::new()),
        })
    };
    let (p, q) = (mk(), mk());
    p.edges.lock().unwrap().push(q.clone());
    q.edges.lock().unwrap().push(p.clone());
    drop((p, q));

    let payload = catch_unwind(collect).expect_err("the panic is re-raised");
    assert_eq!(message(&*payload), "trace panics");
    assert_eq!(plain.load(SeqCst), 2, "the rest of the graph was collected");
    assert_eq!(flaky.load(SeqCst), 0, "an object that panics is kept");

    // Nothing touched `p` or `q` since: they are found again only if the
    // panicking collection buffered them again.
    panics.store(false, SeqCst);
    collect();
    assert_eq!(flaky.load(SeqCst), 2);
}

// ---------------------------------------------------------------------------
// Item 4: several panicking `Drop`s in one collection: every value dropped,
// the first panic re-raised, no abort.

/// A value whose `Drop` counts and panics.
struct Bomb {
    drops: Arc<AtomicUsize>,
    next: Mutex<Option<Gc<Bomb>>>,
}

// SAFETY: reports the handle once, through its mutex.
unsafe impl Trace for Bomb {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        self.next.trace(tracer);
    }
}

impl Drop for Bomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
        panic!("bomb");
    }
}

fn bomb(drops: &Arc<AtomicUsize>) -> Gc<Bomb> {
    Gc::new(Bomb {
        drops: drops.clone(),
        next: Mutex::new(None),
    })
}

/// The review's case: garbage whose `Drop` panics releases the last outside
/// handles of two live objects the collector holds, whose `Drop`s panic when
/// the collector releases its holds.
#[test]
fn panicking_drops_of_values_whose_last_handle_is_a_hold() {
    let _s = serial();
    static SLOT: Mutex<Vec<Gc<Bomb>>> = Mutex::new(Vec::new());
    struct Releaser {
        drops: Arc<AtomicUsize>,
        next: Mutex<Option<Gc<Releaser>>>,
    }
    // SAFETY: reports the handle once, through its mutex.
    unsafe impl Trace for Releaser {
        fn trace(&self, tracer: &mut Tracer<'_>) {
            self.next.trace(tracer);
        }
    }
    impl Drop for Releaser {
        fn drop(&mut self) {
            self.drops.fetch_add(1, SeqCst);
            drop(core::mem::take(&mut *SLOT.lock().unwrap()));
            panic!("releaser");
        }
    }
    let (bombs, releasers) = (Arc::new(AtomicUsize::new(0)), Arc::default());
    for _ in 0..2 {
        let live = bomb(&bombs);
        drop(live.clone()); // buffered: the collector will hold it
        SLOT.lock().unwrap().push(live);
    }
    let mk = || {
        Gc::new(Releaser {
            drops: Arc::clone(&releasers),
            next: Mutex::new(None),
        })
    };
    let (g, h) = (mk(), mk());
    *g.next.lock().unwrap() = Some(h.clone());
    *h.next.lock().unwrap() = Some(g.clone());
    drop((g, h));
    let payload = catch_unwind(collect).expect_err("the first panic is re-raised");
    assert_eq!(message(&*payload), "releaser");
    assert_eq!(releasers.load(SeqCst), 2);
    assert_eq!(bombs.load(SeqCst), 2, "both holds released, both dropped");
    collect();
}

/// A garbage value whose `Drop` panics owns the last handle to another
/// value whose `Drop` panics: the second drop is not run while the first
/// unwinds (that would abort), but after it.
#[test]
fn a_panicking_drop_owning_a_panicking_value() {
    let _s = serial();
    struct Owner {
        drops: Arc<AtomicUsize>,
        inner: Rc<Inner>,
        next: Mutex<Option<Gc<Owner>>>,
    }
    struct Inner(Arc<AtomicUsize>);
    impl Drop for Inner {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
            panic!("inner");
        }
    }
    // SAFETY: reports the handle once, through its mutex (an `Rc` is opaque).
    unsafe impl Trace for Owner {
        fn trace(&self, tracer: &mut Tracer<'_>) {
            self.next.trace(tracer);
        }
    }
    impl Drop for Owner {
        fn drop(&mut self) {
            self.drops.fetch_add(1, SeqCst);
            panic!("owner");
        }
    }
    let (owners, inners) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mk = || {
        Gc::new(Owner {
            drops: owners.clone(),
            inner: Rc::new(Inner(inners.clone())),
            next: Mutex::new(None),
        })
    };
    let (g, h) = (mk(), mk());
    *g.next.lock().unwrap() = Some(h.clone());
    *h.next.lock().unwrap() = Some(g.clone());
    let inner = Rc::downgrade(&g.inner);
    drop((g, h));
    let payload = catch_unwind(collect).expect_err("the first panic is re-raised");
    assert_eq!(message(&*payload), "owner");
    assert_eq!(owners.load(SeqCst), 2);
    assert_eq!(inners.load(SeqCst), 2);
    assert!(inner.upgrade().is_none());
}

/// The same outside any collection: a value dropped by counting whose
/// `Drop` panics and owns the last handle of a value whose `Drop` panics.
#[test]
fn a_panicking_drop_owning_a_panicking_value_by_counting() {
    let _s = serial();
    struct Inner(Arc<AtomicUsize>);
    impl Drop for Inner {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
            panic!("inner");
        }
    }
    struct Outer(Arc<AtomicUsize>, #[allow(dead_code)] Rc<Inner>);
    impl Drop for Outer {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
            panic!("outer");
        }
    }
    let count = Arc::new(AtomicUsize::new(0));
    let outer = Rc::new(Outer(count.clone(), Rc::new(Inner(count.clone()))));
    let payload = catch_unwind(AssertUnwindSafe(|| drop(outer))).expect_err("re-raised");
    assert_eq!(message(&*payload), "outer");
    assert_eq!(count.load(SeqCst), 2);
}

// ---------------------------------------------------------------------------
// `TraceLock`: a lock type of the user's own.

/// Guards of `SpinLock`s taken by the collectors and alive right now, and
/// the most ever alive at once.
static TRACE_GUARDS: AtomicUsize = AtomicUsize::new(0);
static MOST_TRACE_GUARDS: AtomicUsize = AtomicUsize::new(0);

/// A minimal spin lock (as a user would write one).
struct SpinLock<T> {
    locked: AtomicBool,
    value: core::cell::UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, one at a time.
unsafe impl<T: Send> Sync for SpinLock<T> {}

struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    traced: bool,
}

impl<T> SpinLock<T> {
    fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: core::cell::UnsafeCell::new(value),
        }
    }

    fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        let won = self
            .locked
            .compare_exchange(false, true, SeqCst, SeqCst)
            .is_ok();
        won.then_some(SpinGuard {
            lock: self,
            traced: false,
        })
    }

    fn lock(&self) -> SpinGuard<'_, T> {
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            std::thread::yield_now();
        }
    }
}

impl<T> core::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> core::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        if self.traced {
            TRACE_GUARDS.fetch_sub(1, SeqCst);
        }
        self.lock.locked.store(false, SeqCst);
    }
}

// SAFETY: a guard excludes every other access until dropped; `try_lock`
// never blocks.
unsafe impl<T: Trace> TraceLock for SpinLock<T> {
    type Value = T;
    type Guard<'a>
        = SpinGuard<'a, T>
    where
        T: 'a;
    fn try_lock_for_trace(&self) -> Option<SpinGuard<'_, T>> {
        let mut guard = self.try_lock()?;
        guard.traced = true;
        let now = TRACE_GUARDS.fetch_add(1, SeqCst) + 1;
        MOST_TRACE_GUARDS.fetch_max(now, SeqCst);
        Some(guard)
    }
}

// SAFETY: traced through `trace_lock` on itself.
unsafe impl<T: Trace> Trace for SpinLock<T> {
    const MAY_CONTAIN_GC: bool = T::MAY_CONTAIN_GC;
    fn trace(&self, tracer: &mut Tracer<'_>) {
        tracer.trace_lock(self);
    }
}

#[derive(crate::Trace)]
#[trace(crate = "crate")]
struct Spun {
    #[trace(skip)]
    drops: Arc<AtomicUsize>,
    next: SpinLock<Option<Gc<Spun>>>,
}

impl Drop for Spun {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

#[test]
fn a_user_lock_takes_part_in_validation() {
    let _s = serial();
    let drops = Arc::new(AtomicUsize::new(0));
    let mk = || {
        Gc::new(Spun {
            drops: drops.clone(),
            next: SpinLock::new(None),
        })
    };
    let (a, b, c) = (mk(), mk(), mk());
    *a.next.lock() = Some(b.clone());
    *b.next.lock() = Some(c.clone());
    *c.next.lock() = Some(a.clone());
    let weak = Gc::downgrade(&a);

    // A cell locked by the program keeps its cycle alive.
    let keep = Gc::downgrade(&c).upgrade().unwrap();
    drop((a, b, c));
    let held = keep.next.lock();
    MOST_TRACE_GUARDS.store(0, SeqCst);
    collect();
    assert_eq!(drops.load(SeqCst), 0);
    assert!(weak.upgrade().is_some());
    drop(held);
    drop(keep);

    MOST_TRACE_GUARDS.store(0, SeqCst);
    collect();
    assert_eq!(drops.load(SeqCst), 3);
    assert!(weak.upgrade().is_none());
    assert_eq!(TRACE_GUARDS.load(SeqCst), 0, "every guard was released");
    assert_eq!(
        MOST_TRACE_GUARDS.load(SeqCst),
        3,
        "the Σ-test held the three cells locked at once"
    );
}

#[test]
fn a_user_lock_is_traced_by_the_single_threaded_collector_too() {
    let _s = serial();
    #[derive(crate::Trace)]
    #[trace(crate = "crate")]
    struct Local {
        #[trace(skip)]
        drops: Arc<AtomicUsize>,
        next: SpinLock<Option<crate::Gc<Local>>>,
    }
    impl Drop for Local {
        fn drop(&mut self) {
            self.drops.fetch_add(1, SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let a = crate::Gc::new(Local {
        drops: drops.clone(),
        next: SpinLock::new(None),
    });
    *a.next.lock() = Some(a.clone());
    drop(a);
    crate::collect();
    assert_eq!(drops.load(SeqCst), 1);
    assert_eq!(TRACE_GUARDS.load(SeqCst), 0, "the guard was not kept");
}

// ---------------------------------------------------------------------------
// More hostile programs.

/// A destructor of a garbage cycle stores handles to its members, upgrades
/// weak handles to them, and the program then tries every access.
#[test]
fn handles_resurrected_by_a_destructor_are_dead_for_every_access() {
    let _s = serial();
    static STASH: Mutex<Vec<Gc<Zombie>>> = Mutex::new(Vec::new());
    static UPGRADED: AtomicUsize = AtomicUsize::new(0);
    struct Zombie {
        next: Mutex<Option<Gc<Zombie>>>,
        me: Mutex<Weak<Zombie>>,
    }
    // SAFETY: reports the handle once, through its mutex.
    unsafe impl Trace for Zombie {
        fn trace(&self, tracer: &mut Tracer<'_>) {
            self.next.trace(tracer);
        }
    }
    impl Drop for Zombie {
        fn drop(&mut self) {
            if self.me.lock().unwrap().upgrade().is_some() {
                UPGRADED.fetch_add(1, SeqCst);
            }
            if let Some(next) = self.next.lock().unwrap().take() {
                STASH.lock().unwrap().push(next.clone());
                STASH.lock().unwrap().push(next);
            }
        }
    }
    let mk = || {
        Gc::new_cyclic(|me| Zombie {
            next: Mutex::new(None),
            me: Mutex::new(me.clone()),
        })
    };
    let (a, b) = (mk(), mk());
    *a.next.lock().unwrap() = Some(b.clone());
    *b.next.lock().unwrap() = Some(a.clone());
    let weak = Gc::downgrade(&a);
    drop((a, b));
    collect();
    assert_eq!(UPGRADED.load(SeqCst), 0, "no upgrade during the drops");
    assert!(weak.upgrade().is_none());
    let mut stash = core::mem::take(&mut *STASH.lock().unwrap());
    assert_eq!(stash.len(), 4);
    for dead in &mut stash {
        assert!(Gc::try_deref(dead).is_none());
        assert!(Gc::get_mut(dead).is_none());
        assert!(Gc::downgrade(dead).upgrade().is_none());
        assert!(catch_unwind(AssertUnwindSafe(|| dead.next.lock().is_ok())).is_err());
    }
    let last = stash.pop().unwrap();
    let (first, rest) = (stash.remove(0), stash);
    drop(rest);
    assert!(
        Gc::try_unwrap(first).is_err(),
        "a dead handle is never unwrapped"
    );
    drop(last);
    collect(); // nothing left to find: the dead handles are gone
}

/// Upgrades racing a collection of their target: each upgrade either fails
/// or yields a live value; the value is dropped exactly once.
#[test]
fn upgrades_racing_collections() {
    let _s = serial();
    let rounds = if cfg!(miri) { 3 } else { 200 };
    for _ in 0..rounds {
        let drops = Arc::new(AtomicUsize::new(0));
        let (a, b) = (node(&drops), node(&drops));
        link(&a, &b);
        link(&b, &a);
        let weak = Gc::downgrade(&a);
        drop((a, b));
        let upgrader = std::thread::spawn(move || {
            let mut got = 0;
            for _ in 0..3 {
                if let Some(a) = weak.upgrade() {
                    assert_eq!(a.drops.load(SeqCst), 0, "a live value");
                    got += 1;
                }
            }
            got
        });
        collect();
        let got = upgrader.join().unwrap();
        collect();
        assert_eq!(drops.load(SeqCst), 2, "{got} upgrades, then collected");
    }
}

/// `get_mut` and `try_unwrap` on a buffered root while another thread
/// collects: the disarmed entry is never traced while `&mut` lives.
#[test]
fn get_mut_and_try_unwrap_while_another_thread_collects() {
    let _s = serial();
    let rounds = if cfg!(miri) { 3 } else { 200 };
    let stop = Arc::new(AtomicBool::new(false));
    let collector = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                collect();
                std::thread::yield_now();
            }
        })
    };
    let drops = Arc::new(AtomicUsize::new(0));
    for i in 0..rounds {
        let mut a = node(&drops);
        drop(a.clone()); // buffered
        loop {
            // A running collection may hold `a` for a moment.
            if let Some(value) = Gc::get_mut(&mut a) {
                value.edges.get_mut().unwrap().push(node(&drops));
                break;
            }
            std::thread::yield_now();
        }
        if i % 2 == 0 {
            let value = loop {
                match Gc::try_unwrap(a) {
                    Ok(value) => break value,
                    Err(back) => a = back,
                }
                std::thread::yield_now();
            };
            assert_eq!(value.edges.lock().unwrap().len(), 1);
        }
    }
    stop.store(true, SeqCst);
    collector.join().unwrap();
    assert_eq!(drops.load(SeqCst), 2 * rounds);
}

// ---------------------------------------------------------------------------
// The modification counter's wrap: snapshots older than `age::MAX_AGE` are
// taken again and the component re-traced against them
// (`gc/tests/sync_counter_wrap.rs` has the stalled collector itself). Here
// every snapshot counts as stale, and the collections still free exactly
// the garbage: cycles, cells locked by mutators, components across pin
// windows, a handle moved between windows, destructors storing handles.

#[test]
fn with_stale_snapshots_collections_still_free_exactly_the_garbage() {
    struct Fresh;
    impl Drop for Fresh {
        fn drop(&mut self) {
            super::age::force_stale(false);
        }
    }
    super::age::force_stale(true);
    let _fresh = Fresh;
    super::tests::cycles_are_collected_and_reachable_ones_kept();
    super::tests::a_locked_cell_keeps_its_cycle_until_unlocked();
    super::tests::cycles_within_and_across_pin_windows();
    super::tests::a_move_between_windows_is_caught_by_the_retrace();
    super::tests::a_destructor_that_stores_a_dead_handle();
}

// ---------------------------------------------------------------------------
// A drop that is not the last must not touch the header after its
// decrement: the last one, on another thread, may free the memory at once
// (as in `Arc`). A call on `&Header` after the `fetch_add` was a read of
// freed memory in the abstract machine (Miri: a data race between a retag
// and the deallocation, found in `gc/tests/sync_unsized.rs`); natively it
// was a `fetch_or` into freed memory when the word was claimed. This test
// fails under Miri with that call put back, on whichever thread drops
// first.

#[test]
fn concurrent_drops_never_touch_a_header_after_their_decrement() {
    let _s = serial();
    let rounds = if cfg!(miri) { 8 } else { 1000 };
    for _ in 0..rounds {
        let rc = Rc::new(7u64);
        let gc = Gc::new(String::from("a leaf: its drop is one fetch_add"));
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let (rc2, gc2, b2) = (rc.clone(), gc.clone(), barrier.clone());
        let other = std::thread::spawn(move || {
            b2.wait();
            drop(rc2);
            drop(gc2);
        });
        barrier.wait();
        drop(gc);
        drop(rc);
        other.join().unwrap();
    }
}
