//! Hostile review probe: under the default policy and mode, dropping a
//! handle can run the destructors of *unrelated* garbage cycles on the
//! dropping thread (the Adaptive trigger collects there). A thread that
//! drops a handle while holding a lock that such a destructor takes (a
//! registry the objects deregister from) deadlocks on itself. Documented
//! now (*Where collections run* in the module docs of `sync`); the probe
//! is ignored (it fails by design: run it with `--ignored`).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use recycler::sync::Gc;
use recycler::Trace;

static REGISTRY: Mutex<Vec<u32>> = Mutex::new(Vec::new());

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    #[trace(skip)]
    id: u32,
}

impl Drop for Node {
    fn drop(&mut self) {
        // Deregister.
        REGISTRY.lock().unwrap().retain(|&i| i != self.id);
    }
}

#[test]
#[ignore = "deadlocks by design: probe"]
fn dropping_a_handle_under_a_lock_that_unrelated_destructors_take() {
    static DONE: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(|| {
        // Garbage cycles, buffered (below the trigger's threshold).
        for id in 0..60 {
            let a = Gc::new(Node {
                next: Mutex::new(None),
                id,
            });
            *a.next.lock().unwrap() = Some(a.clone());
        }
        let live: Vec<_> = (0..200)
            .map(|id| {
                Gc::new(Node {
                    next: Mutex::new(None),
                    id,
                })
            })
            .collect();
        let clones = live.to_vec();
        {
            let mut registry = REGISTRY.lock().unwrap();
            registry.push(1000);
            // Unrelated drops under the lock: each buffers a root; the
            // trigger collects here and runs the cycles' destructors.
            drop(clones);
        }
        drop(live);
        DONE.store(true, SeqCst);
    });
    let start = Instant::now();
    while !DONE.load(SeqCst) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the dropping thread deadlocked on its own lock"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
