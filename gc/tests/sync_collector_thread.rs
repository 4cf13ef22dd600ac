//! The collector thread ([`CollectorMode::Thread`]): started lazily by the
//! first buffering that finds a collection due, named, it runs the
//! destructors of collected cycles; mutators keep churning with bounded
//! garbage; `collect()` stays synchronous; stopping joins the thread and a
//! later request starts a new one.
// The collector thread does not exist in loom builds.
#![cfg(not(loom))]

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use recycler::sync::{
    collect, collector_mode, set_collector_mode, stats, stop_collector_thread, CollectorMode, Gc,
};
use recycler::Trace;

const THREADS: usize = 2;
const CYCLES: usize = if cfg!(miri) { 1500 } else { 100_000 };

#[derive(Default)]
struct Log {
    allocated: AtomicUsize,
    dropped: AtomicUsize,
    threads: Mutex<HashSet<String>>,
}

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    #[trace(skip)]
    log: Arc<Log>,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.log.dropped.fetch_add(1, SeqCst);
        let name = std::thread::current().name().unwrap_or("").to_owned();
        self.log.threads.lock().unwrap().insert(name);
    }
}

fn cycle(log: &Arc<Log>) {
    log.allocated.fetch_add(2, SeqCst);
    let a = Gc::new(Node {
        next: Mutex::new(None),
        log: log.clone(),
    });
    let b = Gc::new(Node {
        next: Mutex::new(Some(a.clone())),
        log: log.clone(),
    });
    *a.next.lock().unwrap() = Some(b);
}

#[test]
fn the_collector_thread_frees_cycles_off_the_mutators() {
    assert_eq!(collector_mode(), CollectorMode::Mutators, "the default");
    set_collector_mode(CollectorMode::Thread);
    let log = Arc::new(Log::default());
    let before = stats();
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut most_pending = 0;
                for i in 0..CYCLES {
                    cycle(&log);
                    if i % 1000 == 0 {
                        let dropped = log.dropped.load(SeqCst);
                        let pending = log.allocated.load(SeqCst).saturating_sub(dropped);
                        most_pending = most_pending.max(pending);
                    }
                }
                most_pending
            })
        })
        .collect();
    let most_pending = workers.into_iter().map(|w| w.join().unwrap()).max();
    collect(); // synchronous: waits for the collector thread's collection
    assert_eq!(log.dropped.load(SeqCst), 2 * CYCLES * THREADS);
    let threads = log.threads.lock().unwrap().clone();
    assert!(
        threads.contains("recycler-sync-collector"),
        "no destructor ran on the collector thread: {threads:?}"
    );
    // Garbage stayed bounded: far below everything allocated (the pacing
    // of a thread that outruns the collector keeps it so).
    let most_pending = most_pending.unwrap();
    assert!(
        cfg!(miri) || most_pending < CYCLES,
        "{most_pending} objects waited for collection"
    );
    assert!(stats().collections() > before.collections());

    // Stopping joins the thread; a later request starts a new one.
    stop_collector_thread();
    log.threads.lock().unwrap().clear();
    for _ in 0..CYCLES / 10 {
        cycle(&log);
    }
    collect();
    assert_eq!(
        log.dropped.load(SeqCst),
        2 * (CYCLES * THREADS + CYCLES / 10)
    );
    set_collector_mode(CollectorMode::Mutators);
}
