//! The memory of collected objects is kept for the next allocations of the
//! same layout ("Deferred frees" in `drop_queue.rs`). Nothing that still
//! names a freed object may see the new one at its address: `Weak`s to
//! collected members, dead handles kept by a `Drop`, the objects a `Drop`
//! allocates while the collector is still dropping the rest of the cycle
//! (reusing the memory of the members dropped before), objects of other
//! types with the same layout (trait objects, slices), panicking drops.
//! Run under Miri, which reports any use after free, double free, free
//! with the wrong layout or leak.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::mem::size_of;
use std::panic::{catch_unwind, AssertUnwindSafe};

use recycler::unsize::DynTrace;
use recycler::{coerce, dyn_trace, Gc, Trace, Weak};

trait Named: DynTrace {
    fn id(&self) -> u64;
}
dyn_trace!(Named);

#[derive(Trace)]
struct Member {
    id: u64,
    /// A ring member: its drop allocates (the others' do not).
    makes: bool,
    next: RefCell<Option<Gc<Member>>>,
    peers: RefCell<Vec<Weak<Member>>>,
}

impl Named for Member {
    fn id(&self) -> u64 {
        self.id
    }
}

/// Two candidates whose allocations have the same size and different
/// alignments: neither may take the other's memory, which is freed with
/// its own layout.
#[derive(Trace)]
#[repr(align(16))]
struct Aligned {
    next: RefCell<Option<Gc<Aligned>>>,
    pad: [u64; 6],
}

#[derive(Trace)]
struct Plain {
    next: RefCell<Option<Gc<Plain>>>,
    pad: [u64; 7],
}

/// A slice candidate (see [`same_layout_slice`]).
type Slice = Gc<[Option<Gc<Member>>]>;

/// Aligned and plain objects made by drops.
type Pairs = Vec<(Gc<Aligned>, Gc<Plain>)>;

thread_local! {
    static MADE_ALIGNED: RefCell<Pairs> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<u64> = const { Cell::new(1) };
    /// Ids of members whose value was dropped.
    static DROPPED: RefCell<HashSet<u64>> = RefCell::new(HashSet::new());
    /// Objects the drops allocated (into recycled memory), with their ids.
    static MADE: RefCell<Vec<(Gc<Member>, u64)>> = const { RefCell::new(Vec::new()) };
    static MADE_DYN: RefCell<Vec<(Gc<dyn Named>, u64)>> = const { RefCell::new(Vec::new()) };
    static MADE_SLICES: RefCell<Vec<Slice>> = const { RefCell::new(Vec::new()) };
    /// Dead handles kept by drops.
    static KEPT: RefCell<Vec<Gc<Member>>> = const { RefCell::new(Vec::new()) };
    /// Every `panic_every`-th drop panics (0: none).
    static PANIC_EVERY: Cell<u64> = const { Cell::new(0) };
}

fn fresh_id() -> u64 {
    NEXT_ID.with(|n| n.replace(n.get() + 1))
}

fn member() -> Gc<Member> {
    Gc::new(Member {
        id: fresh_id(),
        makes: false,
        next: RefCell::new(None),
        peers: RefCell::new(Vec::new()),
    })
}

/// A slice candidate with the same allocation layout as a `Gc<Member>`
/// (two header words and the counts, then the elements; a sized candidate
/// has one header word).
fn same_layout_slice() -> Slice {
    let member_box = size_of::<usize>() + 2 * size_of::<usize>() + size_of::<Member>();
    let slice_head = 4 * size_of::<usize>();
    assert_eq!((member_box - slice_head) % size_of::<usize>(), 0);
    let len = (member_box - slice_head) / size_of::<Option<Gc<Member>>>();
    (0..len).map(|_| None).collect()
}

impl Drop for Member {
    fn drop(&mut self) {
        // (At thread exit, after `DROPPED` is destroyed, nothing to check.)
        let Ok(first) = DROPPED.try_with(|d| d.borrow_mut().insert(self.id)) else {
            return;
        };
        assert!(first, "member {} dropped twice", self.id);
        // A peer that upgrades must be alive; collected peers must not.
        for peer in self.peers.borrow().iter() {
            if let Some(p) = peer.upgrade() {
                assert!(!DROPPED.with(|d| d.borrow().contains(&p.id)));
            }
        }
        if !self.makes {
            return;
        }
        // Keep a (dead) handle to the next member (a ring member is only
        // dropped by the collector).
        if let Some(next) = self.next.borrow().clone() {
            let _ = KEPT.try_with(|k| k.borrow_mut().push(next));
        }
        // Allocate while the collector is still freeing the cycle: these
        // take the memory of the members freed before.
        let a = member();
        let b = member();
        *a.next.borrow_mut() = Some(b.clone());
        a.peers
            .borrow_mut()
            .extend(self.peers.borrow().iter().cloned());
        let (ida, idb) = (a.id, b.id);
        let named: Gc<dyn Named> = coerce!(member() => dyn Named);
        let named_id = named.id();
        // (At thread exit, once these are destroyed, the objects just go.)
        let _ = MADE.try_with(|m| m.borrow_mut().extend([(a, ida), (b, idb)]));
        let _ = MADE_DYN.try_with(|m| m.borrow_mut().push((named, named_id)));
        let _ = MADE_SLICES.try_with(|m| m.borrow_mut().push(same_layout_slice()));
        let aligned = Gc::new(Aligned {
            next: RefCell::new(None),
            pad: [self.id; 6],
        });
        let plain = Gc::new(Plain {
            next: RefCell::new(None),
            pad: [self.id; 7],
        });
        assert_eq!(Gc::as_ptr(&aligned) as usize % 16, 0);
        // Self-cycles: collected, so that their memory is deferred too.
        *aligned.next.borrow_mut() = Some(aligned.clone());
        *plain.next.borrow_mut() = Some(plain.clone());
        let _ = MADE_ALIGNED.try_with(|m| m.borrow_mut().push((aligned, plain)));
        let every = PANIC_EVERY.with(Cell::get);
        if every != 0 && self.id % every == 0 {
            panic!("member {} panics in drop", self.id);
        }
    }
}

/// A ring of `len` members, each with `Weak`s to every other; returns the
/// `Weak`s (the ring itself is garbage).
fn ring(len: usize) -> Vec<Weak<Member>> {
    let members: Vec<Gc<Member>> = (0..len)
        .map(|_| {
            Gc::new(Member {
                id: fresh_id(),
                makes: true,
                next: RefCell::new(None),
                peers: RefCell::new(Vec::new()),
            })
        })
        .collect();
    for (i, m) in members.iter().enumerate() {
        *m.next.borrow_mut() = Some(members[(i + 1) % len].clone());
        let peers = members.iter().map(Gc::downgrade).collect();
        *m.peers.borrow_mut() = peers;
    }
    members.iter().map(Gc::downgrade).collect()
}

/// Everything made and kept is intact: the ids read back, dead handles are
/// dead, weak handles to collected members do not upgrade.
fn check(weaks: &[Weak<Member>]) {
    for w in weaks {
        assert!(w.upgrade().is_none());
        assert_eq!(w.strong_count(), 0);
    }
    MADE.with(|m| {
        for (g, id) in m.borrow().iter() {
            assert_eq!(g.id, *id);
            assert!(!DROPPED.with(|d| d.borrow().contains(id)));
        }
    });
    MADE_DYN.with(|m| {
        for (g, id) in m.borrow().iter() {
            assert_eq!(g.id(), *id);
        }
    });
    MADE_ALIGNED.with(|m| {
        for (a, p) in m.borrow().iter() {
            assert_eq!(Gc::as_ptr(a) as usize % 16, 0);
            assert!(a.pad.iter().all(|&w| w == a.pad[0]));
            assert!(p.pad.iter().all(|&w| w == p.pad[0]));
        }
    });
    MADE_SLICES.with(|m| {
        for s in m.borrow().iter() {
            assert!(s.iter().all(Option::is_none));
        }
    });
    KEPT.with(|k| {
        for g in k.borrow().iter() {
            assert!(Gc::try_deref(g).is_none());
        }
    });
}

/// Drops everything kept, in an order that interleaves the layouts.
fn release_all() {
    /// The list in `key`, emptied (none once the thread-local is gone).
    fn take<T>(key: &'static std::thread::LocalKey<RefCell<Vec<T>>>) -> Vec<T> {
        key.try_with(|m| std::mem::take(&mut *m.borrow_mut()))
            .unwrap_or_default()
    }
    let made = take(&MADE);
    let dyns = take(&MADE_DYN);
    let slices = take(&MADE_SLICES);
    let aligned = take(&MADE_ALIGNED);
    let kept = take(&KEPT);
    drop(kept);
    drop(made);
    drop(dyns);
    drop(aligned);
    drop(slices);
}

fn baseline<R>(f: impl FnOnce() -> R) -> R {
    recycler::collect();
    let live = recycler::stats().live;
    let r = f();
    // The members made by drops point to each other only in pairs: freed by
    // counting, or by this collection (a drop of theirs makes more).
    for _ in 0..4 {
        release_all();
        recycler::collect();
    }
    release_all();
    recycler::collect();
    assert_eq!(recycler::stats().live, live);
    r
}

#[test]
fn same_size_layouts_differ_in_alignment() {
    let word = size_of::<usize>();
    // A candidate's allocation: its header word (padded to the alignment),
    // the counts, the value.
    let plain = word + 2 * word + size_of::<Plain>();
    let aligned = 16 + (2 * word + size_of::<Aligned>()).next_multiple_of(16);
    assert_eq!(plain, aligned, "the test needs equal sizes");
}

#[test]
fn weaks_and_dead_handles_survive_the_reuse_of_collected_memory() {
    baseline(|| {
        let len = if cfg!(miri) { 6 } else { 64 };
        let weaks = ring(len);
        recycler::collect();
        check(&weaks);
        // Drop the dead handles (their memory is deferred) and allocate
        // over them while the weak handles still name them.
        KEPT.with(|k| k.borrow_mut().clear());
        let fresh: Vec<_> = (0..len).map(|_| member()).collect();
        check(&weaks);
        for f in &fresh {
            assert!(!weaks
                .iter()
                .any(|w| std::ptr::eq(w.as_ptr(), Gc::as_ptr(f))));
        }
        drop(fresh);
        drop(weaks);
    });
}

#[test]
fn panicking_drops_while_memory_is_reused() {
    // Only the explicit collection below runs (an automatic one would
    // re-raise a drop's panic where the ring is dropped).
    recycler::set_policy(recycler::Policy::Manual);
    PANIC_EVERY.with(|p| p.set(3));
    baseline(|| {
        let len = if cfg!(miri) { 7 } else { 64 };
        let weaks = ring(len);
        let r = catch_unwind(AssertUnwindSafe(recycler::collect));
        assert!(r.is_err(), "a drop panicked");
        PANIC_EVERY.with(|p| p.set(0));
        check(&weaks);
    });
}

/// Automatic collections, whose deferred frees stay waiting for the
/// allocations after them (an explicit `collect()` returns them).
#[test]
fn automatic_collections_reuse_memory_under_weak_handles() {
    baseline(|| {
        let rounds = if cfg!(miri) { 40 } else { 4000 };
        let mut weaks = Vec::new();
        for i in 0..rounds {
            let w = ring(2 + i % 3);
            if i % 4 == 0 {
                weaks.extend(w);
            }
            // Drop some of the kept handles as we go.
            if i % 7 == 0 {
                release_all();
            }
        }
        recycler::collect();
        check(&weaks);
    });
}

/// A thread that exits with deferred frees waiting, and whose later
/// thread-local destructor drops dead handles (their memory is freed once
/// the deferred list is closed) and allocates: nothing leaks (Miri),
/// nothing is freed twice.
#[test]
fn thread_exit_after_the_deferred_list_is_closed() {
    struct Late(RefCell<Vec<Gc<Member>>>);
    impl Drop for Late {
        fn drop(&mut self) {
            let dead = std::mem::take(&mut *self.0.borrow_mut());
            assert!(!dead.is_empty());
            for g in &dead {
                assert!(Gc::try_deref(g).is_none());
            }
            drop(dead);
            let x = member();
            let y = member();
            *x.next.borrow_mut() = Some(y);
            drop(x);
        }
    }
    thread_local! {
        // Registered before the deferred list's exit hook: destroyed after.
        static LATE: Late = const { Late(RefCell::new(Vec::new())) };
    }
    std::thread::spawn(|| {
        LATE.with(|_| ());
        for _ in 0..if cfg!(miri) { 10 } else { 500 } {
            ring(3);
        }
        let weaks = ring(3);
        recycler::collect();
        // Half the dead handles go at exit, after the deferred list is
        // closed; the other half now, so that their memory waits in the
        // list when the thread exits.
        let mut kept = KEPT.with(|k| std::mem::take(&mut *k.borrow_mut()));
        assert!(kept.len() >= 2);
        let later = kept.split_off(kept.len() / 2);
        LATE.with(|l| l.0.borrow_mut().extend(later));
        // The weak handles first, so that the dead handles' objects go to
        // the deferred list (the last `Weak` frees at once).
        drop(weaks);
        // The self-cycles that drops made: collected now (a thread's
        // collector does not run at its exit).
        release_all();
        recycler::collect();
        drop(kept);
    })
    .join()
    .unwrap();
}
