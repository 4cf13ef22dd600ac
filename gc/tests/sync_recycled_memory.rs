//! The thread-safe pointers recycle the memory of collected objects, and
//! of objects that died by counting while buffered, into the releasing
//! thread's deferred frees (*Recycling* in `sync/header.rs`). A `Weak` kept
//! across the release, on another thread, still names the old object: it
//! must keep the memory (no new object at its address while it exists),
//! never upgrade, and release it once; the thread that frees it last may
//! reuse it for a new object, of the same type or another with the same
//! layout, and returns what it kept when it exits. Run under Miri, which
//! reports any use after free, double free, wrong layout or leak.

use std::mem::size_of;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use recycler::sync::{collect, Gc, Weak};
use recycler::Trace;

/// Collections are process-wide: one test at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

static DROPS: AtomicUsize = AtomicUsize::new(0);

#[derive(Trace)]
struct Node {
    id: u64,
    next: Mutex<Option<Gc<Node>>>,
}

impl Drop for Node {
    fn drop(&mut self) {
        DROPS.fetch_add(1, SeqCst);
    }
}

fn node(id: u64) -> Gc<Node> {
    Gc::new(Node {
        id,
        next: Mutex::new(None),
    })
}

/// Another type with `Node`'s layout.
#[derive(Trace)]
struct Other {
    word: u64,
    next: Mutex<Option<Gc<Other>>>,
}

/// An object that died by counting while buffered: the entry keeps its
/// memory. A `Weak` to it moves to another thread, which drops it after the
/// drain (the last reference: recycled there) and then allocates objects
/// of the same layout, possibly at the old address.
#[test]
fn a_dead_entry_released_by_a_weak_on_another_thread() {
    let _serial = serial();
    collect();
    assert_eq!(size_of::<Node>(), size_of::<Other>());
    for round in 0..if cfg!(miri) { 3 } else { 200 } {
        let before = DROPS.load(SeqCst);
        let x = node(round);
        let old = Gc::as_ptr(&x) as usize;
        let weak = Gc::downgrade(&x);
        // Buffered by a drop to a non-zero count, then dead by counting.
        drop(x.clone());
        drop(x);
        assert_eq!(DROPS.load(SeqCst), before + 1);
        assert!(weak.upgrade().is_none());
        let drain_first = round % 2 == 0;
        if drain_first {
            // The drain leaves the memory to the weak handle.
            collect();
        }
        std::thread::spawn(move || {
            assert!(weak.upgrade().is_none());
            assert_eq!(weak.strong_count(), 0);
            drop(weak);
            let a = node(1000 + round);
            // Drained first, the weak handle was the last reference: its
            // memory went to this thread's deferred frees, and the next
            // allocation of its layout took it. (Never while it existed.)
            if drain_first {
                assert_eq!(Gc::as_ptr(&a) as usize, old, "recycled here");
            }
            let b = Gc::new(Other {
                word: 78,
                next: Mutex::new(None),
            });
            *a.next.lock().unwrap() = Some(node(2000 + round));
            assert_eq!(a.id, 1000 + round);
            assert_eq!(b.word, 78);
            drop(b);
            drop(a);
        })
        .join()
        .unwrap();
        if !drain_first {
            // The drain releases the last reference here (recycled, then
            // returned by the end of `collect()`).
            collect();
        }
    }
    collect();
}

/// A collected cycle whose members' `Weak`s live on other threads: the
/// collecting thread recycles what it frees last, allocates over it while
/// the other threads still hold their `Weak`s, which never upgrade and free
/// the rest there.
#[test]
fn collected_members_under_weaks_held_by_other_threads() {
    let _serial = serial();
    collect();
    let len = if cfg!(miri) { 4 } else { 64 };
    let members: Vec<Gc<Node>> = (0..len).map(node).collect();
    for (i, m) in members.iter().enumerate() {
        *m.next.lock().unwrap() = Some(members[(i + 1) % len as usize].clone());
    }
    let weaks: Vec<Weak<Node>> = members.iter().map(Gc::downgrade).collect();
    let (half, rest) = weaks.split_at(weaks.len() / 2);
    let (half, rest) = (half.to_vec(), rest.to_vec());
    drop(weaks);
    drop(members);
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        wait.recv().unwrap();
        for w in &half {
            assert!(w.upgrade().is_none());
        }
        drop(half);
        // Allocate here too, over what this thread just freed.
        let fresh: Vec<_> = (0..len).map(|i| node(5000 + i)).collect();
        assert!(fresh
            .iter()
            .enumerate()
            .all(|(i, n)| n.id == 5000 + i as u64));
    });
    let before = DROPS.load(SeqCst);
    collect();
    assert_eq!(DROPS.load(SeqCst), before + len as usize);
    // Every member still has a `Weak`: none of their memory can be reused
    // by these.
    let fresh: Vec<_> = (0..len).map(|i| node(9000 + i)).collect();
    for w in &rest {
        assert!(w.upgrade().is_none());
        assert!(!fresh.iter().any(|f| Weak::ptr_eq(&Gc::downgrade(f), w)));
    }
    go.send(()).unwrap();
    holder.join().unwrap();
    drop(rest);
    let more: Vec<_> = (0..len).map(|i| node(9500 + i)).collect();
    assert!(fresh
        .iter()
        .enumerate()
        .all(|(i, n)| n.id == 9000 + i as u64));
    assert!(more
        .iter()
        .enumerate()
        .all(|(i, n)| n.id == 9500 + i as u64));
    drop((fresh, more));
    collect();
}

/// A thread whose first recycled free happens in a thread-local's
/// destructor at its exit (the last `Weak` to a dead entry): the deferred
/// list's exit hook is registered then, and still runs: the memory kept in
/// the list is returned (nothing leaks under Miri).
#[test]
fn first_recycled_free_in_a_thread_local_destructor() {
    let _serial = serial();
    struct Holder(std::cell::RefCell<Option<Weak<Node>>>);
    impl Drop for Holder {
        fn drop(&mut self) {
            let weak = self.0.borrow_mut().take().expect("a weak handle");
            assert!(weak.upgrade().is_none());
            drop(weak);
        }
    }
    thread_local! {
        static HOLDER: Holder = const { Holder(std::cell::RefCell::new(None)) };
    }
    collect();
    let x = node(7);
    let weak = Gc::downgrade(&x);
    drop(x.clone());
    drop(x);
    collect();
    std::thread::spawn(move || {
        HOLDER.with(|h| *h.0.borrow_mut() = Some(weak));
    })
    .join()
    .unwrap();
}
