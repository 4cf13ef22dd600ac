//! One loom model per race of DESIGN.md §4 (see the crate docs for the
//! command and the preemption bound). In each: no object is used after its
//! value was dropped, and at the end every object was dropped exactly once.
#![cfg(loom)]

use std::sync::Arc;

use loom::sync::Mutex;
use loom::thread;
use loom_tests::support::{
    garbage_pair_against_upgrade, model, mutators, pair, pair_against_collector, Book, Node,
};
use recycler::sync::{collect, set_policy, Gc};
use recycler::{Policy, Trace};

/// R1: the mutator trades its handle on `a` for one on `b` while the
/// collector reads their counts at different times.
#[test]
fn count_tear() {
    pair_against_collector(mutators::trade_a_for_b, false);
}

/// R2: a handle moves out of a cell onto the stack (no count change) while
/// its former owner is traced.
#[test]
fn move_through_mutex() {
    pair_against_collector(mutators::move_b_out, false);
}

/// R2, double count: with its own handle on `b`, the mutator moves the
/// `a -> b` handle into `b`'s cell between the collector's traces of `a` and
/// `b`, so the trial sees that handle twice and misses the stack handle.
/// Only the Σ-test (re-trace with all cells locked) catches this one.
#[test]
fn move_between_cells() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(2);
        let (a, b) = pair(&book);
        let hb = b.clone();
        drop(a); // buffered first, traced first
        drop(b); // buffered second
        let t = thread::spawn(move || {
            {
                let mut cell_b = hb.edges.lock().unwrap();
                let moved = cell_b[0].edges.lock().unwrap().pop().unwrap();
                cell_b.push(moved);
            }
            hb.check();
            hb.edges.lock().unwrap()[0].check();
        });
        collect();
        t.join().unwrap();
        book.finish();
    });
}

/// R2 across pin windows: the cycle `a -> b -> c -> a` is traced in two
/// windows (under loom a window closes at its second guard: `a`, `b` | `c`),
/// so `b`'s cell is unlocked before `c` is traced. With its own handle on
/// `c`, the mutator moves the `b -> c` handle into `c`'s cell in between: the
/// trial counts that handle twice and misses the stack handle. Only the
/// Σ-test re-trace of a component spanning windows catches this one
/// (planted bugs: trusting the trace of every component, `one_window` always
/// true in `collector::validate`: causality violation; the fast path's
/// window test `collector::edge_crosses_windows` always `false`: SIGSEGV,
/// `c` freed under `hc`). The native, deterministic version is
/// `recycler`'s `sync::tests::a_move_between_windows_is_caught_by_the_retrace`.
#[test]
fn move_between_cells_across_windows() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(3);
        let (a, b, c) = (
            Node::new(&book, 0),
            Node::new(&book, 1),
            Node::new(&book, 2),
        );
        a.link(&b);
        b.link(&c);
        c.link(&a);
        let hc = c.clone();
        drop(a); // buffered first: the trace starts with its tree
        drop(b);
        drop(c);
        let t = thread::spawn(move || {
            {
                let mut cell_c = hc.edges.lock().unwrap();
                let moved = {
                    let cell_a = cell_c[0].edges.lock().unwrap();
                    let mut cell_b = cell_a[0].edges.lock().unwrap();
                    cell_b.pop().unwrap()
                };
                cell_c.push(moved);
            }
            hc.check();
            hc.edges.lock().unwrap()[0].check();
        });
        collect();
        t.join().unwrap();
        book.finish();
    });
}

/// R2: a handle leaves its cell and comes back between the collector's
/// traces, so a re-trace sees the same edges as the first trace.
#[test]
fn move_out_and_back() {
    pair_against_collector(mutators::move_b_out_and_back, false);
}

/// R3: `Weak::upgrade` of a garbage cycle while the collector dooms it.
#[test]
fn upgrade_against_doom() {
    garbage_pair_against_upgrade(mutators::upgrade_and_check, false);
}

/// R4: the collector takes a hold through a buffer entry while the last
/// handle is dropped on another thread.
#[test]
fn last_drop_against_hold() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(1);
        let a = Node::new(&book, 0);
        drop(a.clone()); // buffered, count 1
        let t = thread::spawn(move || drop(a));
        collect();
        t.join().unwrap();
        book.finish();
    });
}

/// Two threads drop handles to one object at once: one buffer entry, and
/// the object is freed exactly once.
#[test]
fn concurrent_buffering() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(1);
        let a = Node::new(&book, 0);
        a.link(&a); // a self-loop
        let (a1, a2) = (a.clone(), a.clone());
        let t1 = thread::spawn(move || drop(a1));
        let t2 = thread::spawn(move || drop(a2));
        a.check();
        t1.join().unwrap();
        t2.join().unwrap();
        a.check();
        drop(a);
        book.finish();
    });
}

/// `try_unwrap` takes the value out of a buffered object while another
/// thread's collector drains its entry: one of them wins, the value is
/// dropped once and the memory freed once.
#[test]
fn try_unwrap_against_collector() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(1);
        let a = Node::new(&book, 0);
        drop(a.clone()); // buffered and armed, count 1
        let t = thread::spawn(collect);
        match Gc::try_unwrap(a) {
            Ok(node) => {
                node.check();
                drop(node);
            }
            Err(a) => drop(a), // the collector held it at that moment
        }
        t.join().unwrap();
        book.finish();
    });
}

/// The last two handles of a buffered object drop on two threads while a
/// third collects: the entry and the last release share the memory.
#[test]
fn drop_to_zero_while_buffered() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(1);
        let a = Node::new(&book, 0);
        let a2 = a.clone();
        drop(a.clone()); // buffered, count 2
        let t1 = thread::spawn(move || drop(a));
        let t2 = thread::spawn(move || drop(a2));
        collect();
        t1.join().unwrap();
        t2.join().unwrap();
        book.finish();
    });
}

/// A member's cell is locked (and its contents moved around) while the
/// collector traces and validates the cycle.
#[test]
fn cell_locked_across_collection() {
    pair_against_collector(
        |a| {
            {
                let mut edges = a.edges.lock().unwrap();
                let hb = edges.pop().unwrap();
                hb.check();
                edges.push(hb);
            }
            drop(a);
        },
        false,
    );
}

/// A node whose destructor publishes its partner handle.
#[derive(Trace)]
struct Stasher {
    partner: Mutex<Option<Gc<Node>>>,
    me: Mutex<Option<Gc<Stasher>>>,
    #[trace(skip)]
    stash: Arc<Mutex<Option<Gc<Node>>>>,
}

impl Drop for Stasher {
    fn drop(&mut self) {
        let partner = self.partner.lock().unwrap().take();
        *self.stash.lock().unwrap() = partner;
    }
}

/// A destructor of a collected cycle stores a handle to another member
/// where a second thread finds it: the handle is dead, not dangling.
#[test]
fn destructor_stores_dead_handle() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(1);
        let stash = Arc::new(Mutex::new(None));
        let n = Node::new(&book, 0);
        let s = Gc::new(Stasher {
            partner: Mutex::new(Some(n.clone())),
            me: Mutex::new(None),
            stash: stash.clone(),
        });
        *s.me.lock().unwrap() = Some(s.clone());
        n.link(&n);
        drop((n, s));
        let stash2 = stash.clone();
        let t = thread::spawn(move || {
            let found = stash2.lock().unwrap().take();
            if let Some(h) = found {
                assert!(Gc::try_deref(&h).is_none(), "a stored handle is dead");
            }
        });
        collect();
        t.join().unwrap();
        drop(stash.lock().unwrap().take());
        book.finish();
    });
}

/// A self-loop whose destructor calls `collect()`.
#[derive(Trace)]
struct Recollect {
    me: Mutex<Option<Gc<Recollect>>>,
    #[trace(skip)]
    _node: Option<Gc<Node>>,
}

impl Drop for Recollect {
    fn drop(&mut self) {
        collect();
    }
}

/// A destructor calls `collect()` inside a collection while another thread
/// collects too.
#[test]
fn destructor_calls_collect() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(1);
        let r = Gc::new(Recollect {
            me: Mutex::new(None),
            _node: Some(Node::new(&book, 0)),
        });
        *r.me.lock().unwrap() = Some(r.clone());
        drop(r);
        let t = thread::spawn(collect);
        collect();
        t.join().unwrap();
        book.finish();
    });
}

/// A value with plain (loom-tracked) data, read by its `Trace` impl.
struct Payload {
    data: loom::cell::UnsafeCell<usize>,
    edges: Mutex<Vec<Gc<Payload>>>,
}

// SAFETY: `data` is only written through `&mut Payload` (`Gc::get_mut`);
// loom checks that no read overlaps such a write.
unsafe impl Sync for Payload {}

// SAFETY: reports the edges once; reading `data` models a collector reading
// the value's plain fields.
unsafe impl Trace for Payload {
    fn trace(&self, tracer: &mut recycler::Tracer<'_>) {
        self.data.with(|p| {
            // SAFETY: the collector holds the object, so no `&mut` exists.
            let _ = unsafe { *p };
        });
        self.edges.trace(tracer);
    }
}

/// `get_mut` on a buffered unique object while another thread collects:
/// no trace may overlap the mutation.
#[test]
fn get_mut_against_collector() {
    model(|| {
        set_policy(Policy::Manual);
        let mut a = Gc::new(Payload {
            data: loom::cell::UnsafeCell::new(0),
            edges: Mutex::new(Vec::new()),
        });
        drop(a.clone()); // buffered and armed
        let t = thread::spawn(collect);
        if let Some(p) = Gc::get_mut(&mut a) {
            p.data.with_mut(|d| {
                // SAFETY: `&mut Payload`: exclusive.
                unsafe { *d += 1 }
            });
        }
        t.join().unwrap();
        a.data.with(|d| {
            // SAFETY: shared access only from here on.
            assert!(unsafe { *d } <= 1)
        });
    });
}

/// The mutator churns the counts of a cycle while the collector validates
/// it, which may abort; a later collection must free it.
#[test]
fn abort_then_eventual_collection() {
    pair_against_collector(
        |a| {
            let c = a.clone();
            drop(a);
            c.check();
            drop(c);
        },
        false,
    );
}

/// Two threads collect the same garbage at once: one collector at a time,
/// each object freed once.
#[test]
fn two_concurrent_collectors() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(2);
        let (a, b) = pair(&book);
        drop((a, b));
        let t = thread::spawn(collect);
        collect();
        t.join().unwrap();
        book.finish();
    });
}

/// A collection drops its doomed values after releasing the collector lock
/// while a second thread collects: `b`'s only outside handle is dropped on
/// that thread, so `b` (reached by tracing from `a`, never drained) may be
/// doomed with its buffer entry in the second thread's buffer, which the
/// second collection drains while the first releases `b`. Each value is
/// dropped once and each memory freed once (no use after free).
#[test]
fn drain_against_unlocked_drop() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(2);
        let (a, b) = pair(&book);
        let t = thread::spawn(move || {
            drop(b);
            collect();
        });
        drop(a);
        collect();
        t.join().unwrap();
        book.finish();
    });
}

/// A self-loop whose `Trace` panics the first time it runs.
struct Fragile {
    me: Mutex<Option<Gc<Fragile>>>,
    /// Not a loom atomic: only the collecting thread touches it.
    traced: std::sync::atomic::AtomicBool,
    /// Dropped with the value: records the drop in the book.
    _node: Gc<Node>,
}

// SAFETY: reports the handle once, through its mutex (or panics before
// reporting anything).
unsafe impl Trace for Fragile {
    fn trace(&self, tracer: &mut recycler::Tracer<'_>) {
        if !self.traced.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::panic::panic_any(FragileTrace);
        }
        self.me.trace(tracer);
    }
}

/// The payload of `Fragile`'s panic (not printed by the panic hook).
struct FragileTrace;

/// A `Trace` impl panics in a collection while another thread drops the
/// last outside handle of a cycle: the panic is re-raised at the end of the
/// collection, no drained root is lost (the panicking object is buffered
/// again) and a later collection frees everything, each object once.
#[test]
fn trace_panic_against_mutator() {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<FragileTrace>() {
                hook(info);
            }
        }));
    });
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(3);
        let (a, b) = pair(&book);
        drop(b);
        let f = Gc::new(Fragile {
            me: Mutex::new(None),
            traced: std::sync::atomic::AtomicBool::new(false),
            _node: Node::new(&book, 2),
        });
        *f.me.lock().unwrap() = Some(f.clone());
        drop(f);
        let t = thread::spawn(move || drop(a));
        let result = std::panic::catch_unwind(collect);
        t.join().unwrap();
        assert!(result.unwrap_err().is::<FragileTrace>());
        book.finish();
    });
}
