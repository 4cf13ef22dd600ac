//! The memory protocol: who frees an allocation. Each release of a strong
//! or weak reference reads, and the free writes, a loom-tracked stand-in
//! for the memory (`MemoryTrack` in `gc/src/sync/prim.rs`), so a free not
//! ordered after another thread's last use of the allocation is a
//! causality violation.
#![cfg(loom)]

use std::sync::Arc;

use loom::sync::Mutex;
use loom::thread;
use loom_tests::support::{model, Book, Node};
use recycler::sync::{collect, set_policy, Gc};
use recycler::{Policy, Trace};

/// A `Weak` is dropped on one thread while the last strong handle drops on
/// another: both release a weak reference, one of them (whichever sees
/// `weak == 1`, with a load or a `fetch_sub`) frees the memory, once, after
/// the other's use. Planted bug found: the load of `Header::release_weak`'s
/// shortcut made `Relaxed` (causality violation on the memory).
#[test]
fn weak_release_against_last_drop() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(1);
        let a = Node::new(&book, 0);
        let wa = Gc::downgrade(&a);
        let t = thread::spawn(move || {
            if let Some(a) = wa.upgrade() {
                a.check();
            }
            drop(wa);
        });
        drop(a);
        t.join().unwrap();
        book.finish();
    });
}

/// The same against the collector: the `Weak` of a garbage cycle member is
/// dropped (after a failed or successful upgrade, which reads the member's
/// cell) while another thread's collection frees the cycle. Also the model
/// of the Δ-test by loads for members with no `Weak` (`collector::claim`):
/// planted bug found: the load path without the weak test (causality
/// violation: the value dropped while the upgrader reads its cell). Not
/// found at bounds 3 and 5: the same loads made `Relaxed` (the ordering argument
/// is in `claim`'s docs).
#[test]
fn weak_release_against_collection() {
    model(|| {
        set_policy(Policy::Manual);
        let book = Book::new(1);
        let a = Node::new(&book, 0);
        a.link(&a);
        let wa = Gc::downgrade(&a);
        drop(a);
        let t = thread::spawn(move || {
            if let Some(a) = wa.upgrade() {
                a.check();
                assert_eq!(a.edges.lock().unwrap().len(), 1);
            }
            drop(wa);
        });
        collect();
        t.join().unwrap();
        book.finish();
    });
}

/// A self-loop whose destructor hands its own (dead) handle to a new
/// thread, which drops it.
#[derive(Trace)]
struct Handover {
    me: Mutex<Option<Gc<Handover>>>,
    #[trace(skip)]
    out: Arc<Mutex<Option<thread::JoinHandle<()>>>>,
}

impl Drop for Handover {
    fn drop(&mut self) {
        if let Some(me) = self.me.lock().unwrap().take() {
            let t = thread::spawn(move || {
                assert!(Gc::try_deref(&me).is_none(), "a handed-over handle is dead");
                // A clone first: its RMW is what loom's DPOR sees race with
                // the collector's load (the drop's own load comes first
                // and would hide it, loom tracking one access per atomic).
                let twin = me.clone();
                drop(me);
                drop(twin);
            });
            *self.out.lock().unwrap() = Some(t);
        }
    }
}

/// A collected object's destructor hands a handle to the object itself to
/// another thread, which drops it while the collector releases its hold:
/// whichever reference goes last frees the memory, once, after the other's
/// use. When the collector finds the count at its hold alone it releases
/// with a load and a store, no RMW (`Header::release_doomed`). Planted bug
/// found: that load made `Relaxed` (causality violation on the memory: the
/// other thread's drop is not ordered before the free). The shortcut taken
/// with an entry pending (`BUFFERED` not tested) is found by
/// `buffer.rs::buffering_against_drain`.
#[test]
fn dead_handle_drop_against_release() {
    model(|| {
        set_policy(Policy::Manual);
        let out = Arc::new(Mutex::new(None));
        let h = Gc::new(Handover {
            me: Mutex::new(None),
            out: out.clone(),
        });
        *h.me.lock().unwrap() = Some(h.clone());
        drop(h);
        collect();
        let t = out.lock().unwrap().take();
        t.expect("the destructor ran").join().unwrap();
    });
}
