//! Stopping the collector thread never leaves [`CollectorMode::Thread`]
//! without one: a destructor running on the collector thread may stop it
//! (it cannot join itself: the thread exits after that collection), and a
//! stop racing a request must not leave the request looking pending (which
//! kept every later request from starting a thread). In both cases the next
//! garbage starts a new collector thread, which frees it. One test: the
//! collector mode is process-wide.
// The collector thread does not exist in loom builds.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use recycler::sync::{set_collector_mode, stop_collector_thread, CollectorMode, Gc};
use recycler::Trace;

const COLLECTOR: &str = "recycler-sync-collector";
/// Rounds of a stop racing requests (the race showed in the first few).
const ROUNDS: usize = if cfg!(miri) { 2 } else { 100 };
/// Only bounds a failing run; a passing one takes milliseconds.
const DEADLINE: Duration = Duration::from_secs(if cfg!(miri) { 600 } else { 30 });

/// Values dropped on a collector thread.
static ON_COLLECTOR: AtomicUsize = AtomicUsize::new(0);
/// The collector thread that ran the stopping destructor, and whether its
/// `stop_collector_thread()` returned normally.
static STOPPER: Mutex<Option<(ThreadId, bool)>> = Mutex::new(None);
/// Collector threads other than the stopper's that dropped values since.
static AFTER_STOP: AtomicBool = AtomicBool::new(false);

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    #[trace(skip)]
    stops: bool,
}

impl Drop for Node {
    fn drop(&mut self) {
        let thread = std::thread::current();
        if thread.name() != Some(COLLECTOR) {
            return;
        }
        ON_COLLECTOR.fetch_add(1, SeqCst);
        let mut stopper = STOPPER.lock().unwrap();
        if self.stops && stopper.is_none() {
            let returned = std::panic::catch_unwind(stop_collector_thread).is_ok();
            *stopper = Some((thread.id(), returned));
        } else if stopper.is_some_and(|(id, _)| id != thread.id()) {
            AFTER_STOP.store(true, SeqCst);
        }
    }
}

fn cycle(stops: bool) {
    let a = Gc::new(Node {
        next: Mutex::new(None),
        stops,
    });
    let b = Gc::new(Node {
        next: Mutex::new(Some(a.clone())),
        stops: false,
    });
    *a.next.lock().unwrap() = Some(b);
}

/// Makes garbage in small bursts (which the collector thread keeps up
/// with, so that it, not this thread's pacing, collects) until `done`.
fn churn_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < DEADLINE, "{what}");
        for _ in 0..200 {
            cycle(false);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_collector_thread_survives_its_stops() {
    set_collector_mode(CollectorMode::Thread);

    // A destructor on the collector thread stops it.
    let start = Instant::now();
    while STOPPER.lock().unwrap().is_none() {
        assert!(start.elapsed() < DEADLINE, "no stopper ran on the thread");
        // A stopper that a mutator's own collection dropped does nothing:
        // make another.
        cycle(true);
        churn_until("no collection", || ON_COLLECTOR.load(SeqCst) > 0);
        for _ in 0..20 {
            cycle(false);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let (_, returned) = STOPPER.lock().unwrap().unwrap();
    assert!(
        returned,
        "stop_collector_thread() panicked on its own thread"
    );
    churn_until("no collector thread after one stopped itself", || {
        AFTER_STOP.load(SeqCst)
    });

    // Stops racing the requests of another thread.
    for round in 0..ROUNDS {
        let requests = std::thread::spawn(|| {
            for _ in 0..300 {
                cycle(false);
            }
        });
        stop_collector_thread();
        requests.join().unwrap();
        stop_collector_thread();
        let before = ON_COLLECTOR.load(SeqCst);
        churn_until(
            &format!("round {round}: no collector thread after a stop"),
            || ON_COLLECTOR.load(SeqCst) > before,
        );
    }
    set_collector_mode(CollectorMode::Mutators);
}
