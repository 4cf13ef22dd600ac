//! Hostile review: the runtime machinery under chaos — threads that churn
//! cycles, change their policy, call `collect()`/`collect_minor()`, switch
//! the collector mode, stop the collector thread (also from destructors,
//! which may run on it), spawn short-lived threads that drop handles and
//! exit, and read `stats()`. Watchdog: no deadlock; at the end everything
//! is freed and the statistics add up.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use recycler::sync::{
    collect, collect_minor, set_collector_mode, set_policy, stats, stop_collector_thread,
    CollectorMode, Gc, Weak,
};
use recycler::{Policy, Trace};

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicUsize = AtomicUsize::new(0);
static STASH: Mutex<Vec<Gc<Node>>> = Mutex::new(Vec::new());

#[derive(Clone, Copy, PartialEq, Eq)]
enum Act {
    None,
    Collect,
    CollectMinor,
    Stop,
    Stash,
    Spawn,
    Upgrade,
}

#[derive(Trace)]
struct Node {
    next: Mutex<Vec<Gc<Node>>>,
    #[trace(skip)]
    me: Weak<Node>,
    #[trace(skip)]
    act: Act,
}

fn node(act: Act) -> Gc<Node> {
    ALLOCATED.fetch_add(1, SeqCst);
    Gc::new_cyclic(|me| Node {
        next: Mutex::new(Vec::new()),
        me: me.clone(),
        act,
    })
}

impl Drop for Node {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, SeqCst);
        match self.act {
            Act::None => {}
            Act::Collect => collect(),
            Act::CollectMinor => collect_minor(),
            Act::Stop => stop_collector_thread(),
            Act::Stash => {
                let dead: Vec<_> = self.next.lock().unwrap().clone();
                STASH.lock().unwrap().extend(dead);
            }
            Act::Spawn => {
                // A short-lived thread that registers, reads the statistics,
                // buffers a root and exits; the handles come back and drop
                // here. (Not `collect()` there, nor drops that could run a
                // destructor calling it: a destructor must not join a thread
                // that calls `collect()`, see its docs.)
                let handles: Vec<_> = std::mem::take(&mut *self.next.lock().unwrap());
                let handles = std::thread::spawn(move || {
                    let _ = stats();
                    let plain = node(Act::None);
                    drop(plain.clone());
                    handles
                })
                .join()
                .unwrap();
                drop(handles);
            }
            Act::Upgrade => assert!(self.me.upgrade().is_none()),
        }
    }
}

fn act(rng: &mut SmallRng) -> Act {
    match rng.gen_range(0..40) {
        0 => Act::Collect,
        1 => Act::CollectMinor,
        2 => Act::Stop,
        3 => Act::Stash,
        4 => Act::Spawn,
        5..=8 => Act::Upgrade,
        _ => Act::None,
    }
}

fn worker(seed: u64, stop: &AtomicBool) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut kept: Vec<Gc<Node>> = Vec::new();
    while !stop.load(SeqCst) {
        match rng.gen_range(0..100) {
            0 => set_policy(Policy::Adaptive),
            1 => set_policy(Policy::Nim16),
            2 => set_policy(Policy::Manual),
            3 => collect(),
            4 => collect_minor(),
            5 => set_collector_mode(CollectorMode::Thread),
            6 => set_collector_mode(CollectorMode::Mutators),
            7 => stop_collector_thread(),
            8 => {
                let s = stats();
                assert!(s.minor_collections + s.full_collections >= s.minor_collections);
            }
            9 => {
                // A short-lived thread that takes some handles and exits.
                let mine: Vec<_> = kept.drain(..kept.len() / 2).collect();
                let mut r = SmallRng::seed_from_u64(rng.gen());
                std::thread::spawn(move || {
                    let n = node(act(&mut r));
                    for h in &mine {
                        h.next.lock().unwrap().push(n.clone());
                        n.next.lock().unwrap().push(h.clone());
                    }
                })
                .join()
                .unwrap();
            }
            10 => {
                let stash = std::mem::take(&mut *STASH.lock().unwrap());
                drop(stash); // unlocked: destructors lock it
            }
            _ => {
                let n = rng.gen_range(1..4);
                let ring: Vec<_> = (0..n).map(|_| node(act(&mut rng))).collect();
                for i in 0..n {
                    ring[i].next.lock().unwrap().push(ring[(i + 1) % n].clone());
                }
                if rng.gen_bool(0.2) {
                    kept.push(ring[0].clone());
                }
                if rng.gen_bool(0.2) && !kept.is_empty() {
                    let i = rng.gen_range(0..kept.len());
                    let k = kept[i].clone();
                    k.next.lock().unwrap().push(ring[n - 1].clone());
                }
                if kept.len() > 50 {
                    kept.drain(..25);
                }
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "runs for seconds of wall time: too slow for Miri")]
fn the_runtime_survives_chaos() {
    let secs: u64 = std::env::var("CHAOS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    static STOP: AtomicBool = AtomicBool::new(false);
    static FINISHED: AtomicUsize = AtomicUsize::new(0);
    let threads = 3;
    for t in 0..threads {
        std::thread::spawn(move || {
            worker(t as u64 + secs * 100, &STOP);
            FINISHED.fetch_add(1, SeqCst);
        });
    }
    std::thread::sleep(Duration::from_secs(secs));
    STOP.store(true, SeqCst);
    let start = Instant::now();
    while FINISHED.load(SeqCst) < threads {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "deadlock: {} of {threads} workers finished",
            FINISHED.load(SeqCst)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    set_collector_mode(CollectorMode::Mutators);
    let stash = std::mem::take(&mut *STASH.lock().unwrap());
    drop(stash); // unlocked: destructors lock it
    collect();
    let (a, d) = (ALLOCATED.load(SeqCst), DROPPED.load(SeqCst));
    assert_eq!(a, d, "{} of {a} nodes survived collect()", a - d);
    let s = stats();
    assert_eq!(s.live, 0, "{s:?}");
    assert_eq!(s.freed_by_rc + s.freed_by_collector, a as u64, "{s:?}");
}
