//! Hostile review: `set_collector_mode(Mutators)` stops the collector thread
//! for good. A buffering that read the mode `Thread` just before the switch
//! and asked for a collection just after its stop returned used to start a
//! new collector thread, which then ran under `Mutators` (idle for ever
//! after its one collection). The probe is probabilistic: it toggles the
//! mode while threads buffer roots as fast as they can, and looks for a
//! collector thread after each switch (`/proc/self/task/*/comm`).

#![cfg(target_os = "linux")]

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::Duration;

use recycler::sync::{set_collector_mode, CollectorMode, Gc};
use recycler::Trace;

#[path = "common/threads.rs"]
mod threads;
use threads::collector_threads;

#[derive(Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
}

#[test]
#[cfg_attr(
    miri,
    ignore = "reads /proc (isolation) and toggles thousands of times"
)]
fn no_collector_thread_runs_after_the_switch_to_mutators() {
    let switches: usize = std::env::var("SWITCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    static STOP: AtomicBool = AtomicBool::new(false);
    let churn: Vec<_> = (0..6)
        .map(|_| {
            std::thread::spawn(|| {
                while !STOP.load(SeqCst) {
                    let a = Gc::new(Node {
                        next: Mutex::new(None),
                    });
                    *a.next.lock().unwrap() = Some(a.clone());
                }
            })
        })
        .collect();
    let mut stray = None;
    for switch in 0..switches {
        set_collector_mode(CollectorMode::Thread);
        std::thread::sleep(Duration::from_micros(300));
        set_collector_mode(CollectorMode::Mutators);
        std::thread::sleep(Duration::from_millis(2));
        if collector_threads() > 0 {
            stray = Some(switch);
            break;
        }
    }
    STOP.store(true, SeqCst);
    for c in churn {
        c.join().unwrap();
    }
    assert_eq!(
        stray, None,
        "a collector thread runs under CollectorMode::Mutators"
    );
}
