//! Hostile review: garbage promoted to the old generation (by minor
//! collections, the Adaptive trigger's local ones among them) in many shapes
//! and across threads is always freed by `collect()` once every thread has
//! joined: no unreachable cycle survives a full collection.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Mutex, RwLock};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use recycler::sync::{
    collect, collect_minor, set_collector_mode, set_policy, stats, CollectorMode, Gc, Weak,
};
use recycler::{Policy, Trace};

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicUsize = AtomicUsize::new(0);

#[derive(Trace)]
struct Node {
    edges: Mutex<Vec<Gc<Node>>>,
    other: RwLock<Option<Gc<Node>>>,
    weak: Mutex<Option<Weak<Node>>>,
    payload: Vec<u8>,
}

impl Node {
    fn new() -> Gc<Node> {
        ALLOCATED.fetch_add(1, SeqCst);
        Gc::new(Node {
            edges: Mutex::new(Vec::new()),
            other: RwLock::new(None),
            weak: Mutex::new(None),
            payload: vec![1; 8],
        })
    }
    fn link(&self, to: &Gc<Node>) {
        self.edges.lock().unwrap().push(to.clone());
    }
    fn set_other(&self, to: &Gc<Node>) {
        *self.other.write().unwrap() = Some(to.clone());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        assert_eq!(self.payload, [1; 8]);
        DROPPED.fetch_add(1, SeqCst);
    }
}

fn ring(n: usize) -> Vec<Gc<Node>> {
    let nodes: Vec<_> = (0..n).map(|_| Node::new()).collect();
    for i in 0..n {
        nodes[i].link(&nodes[(i + 1) % n]);
    }
    nodes
}

/// Churns short-lived garbage so that Adaptive triggers run local minor
/// collections (which promote whatever live objects they trace).
fn churn(rng: &mut SmallRng, n: usize) {
    for _ in 0..n {
        let r = ring(rng.gen_range(1..4));
        if rng.gen_bool(0.3) {
            r[0].set_other(&r[r.len() - 1]);
        }
        drop(r);
    }
}

fn worker(seed: u64, to: mpsc::Sender<Vec<Gc<Node>>>, from: mpsc::Receiver<Vec<Gc<Node>>>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    match seed % 3 {
        0 => set_policy(Policy::Adaptive),
        1 => set_policy(Policy::Nim16),
        _ => set_policy(Policy::Manual),
    }
    let mut kept: Vec<Vec<Gc<Node>>> = Vec::new();
    for round in 0..60 {
        // New structures, kept alive for a while so that they are promoted.
        let shape = rng.gen_range(0..6);
        let s = match shape {
            0 => ring(rng.gen_range(1..5)),
            1 => {
                // A hub with rings hanging off it, one pointing back.
                let hub = Node::new();
                let mut all = vec![hub.clone()];
                for _ in 0..rng.gen_range(1..4) {
                    let r = ring(rng.gen_range(1..3));
                    hub.link(&r[0]);
                    if rng.gen_bool(0.5) {
                        r[0].set_other(&hub);
                    }
                    all.extend(r);
                }
                all
            }
            2 => {
                // A chain of two rings: the second only reachable from the first.
                let a = ring(2);
                let b = ring(3);
                a[1].link(&b[2]);
                vec![a[0].clone()]
            }
            3 => {
                // Self-loop through a Weak upgrade stored in a cell.
                let a = Node::new();
                *a.weak.lock().unwrap() = Some(Gc::downgrade(&a));
                let up = a.weak.lock().unwrap().as_ref().unwrap().upgrade().unwrap();
                a.set_other(&up);
                vec![a]
            }
            4 => {
                // Built from pieces received from another thread.
                match from.try_recv() {
                    Ok(mut theirs) => {
                        let mine = ring(2);
                        if let Some(t) = theirs.first() {
                            mine[0].link(t);
                            t.link(&mine[1]);
                        }
                        theirs.extend(mine);
                        theirs
                    }
                    Err(_) => ring(3),
                }
            }
            _ => {
                let r = ring(rng.gen_range(2..5));
                let _ = to.send(r.clone());
                r
            }
        };
        kept.push(s);
        // Let minor collections (explicit and Adaptive local ones) promote.
        let n = rng.gen_range(50..400);
        churn(&mut rng, n);
        if rng.gen_bool(0.3) {
            collect_minor();
        }
        // Drop some of the kept structures now (old garbage), or partly.
        if rng.gen_bool(0.5) && !kept.is_empty() {
            let i = rng.gen_range(0..kept.len());
            let mut s = kept.swap_remove(i);
            if rng.gen_bool(0.3) && s.len() > 1 {
                // Keep one handle a little longer, dropped below.
                let last = s.pop().unwrap();
                churn(&mut rng, 100);
                drop(s);
                collect_minor();
                drop(last);
            }
        }
        if round % 17 == 0 {
            collect_minor();
        }
    }
    // Drop the rest partly before exit, partly by the thread exit.
    let rest = kept.split_off(kept.len() / 2);
    drop(kept);
    churn(&mut rng, 200);
    drop(rest);
    drop(to);
    // Drain what was sent to us and drop it on this thread.
    while let Ok(v) = from.try_recv() {
        drop(v);
    }
}

/// The collector and its statistics are process-wide: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of objects on four threads: too slow for Miri"
)]
fn every_old_garbage_cycle_is_freed_by_collect_after_join() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run(CollectorMode::Mutators);
}

/// The same with the collector thread, which may still be freeing when
/// `collect()` starts (`sync_collect_after_thread.rs`).
#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of objects on four threads: too slow for Miri"
)]
fn every_old_garbage_cycle_is_freed_by_collect_after_join_with_the_collector_thread() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run(CollectorMode::Thread);
    set_collector_mode(CollectorMode::Mutators);
}

fn run(mode: CollectorMode) {
    set_collector_mode(mode);
    collect();
    let threads = 4;
    for iteration in 0..iterations() {
        let mut senders = Vec::new();
        let mut receivers = Vec::new();
        for _ in 0..threads {
            let (tx, rx) = mpsc::channel();
            senders.push(tx);
            receivers.push(rx);
        }
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let to = senders[(t + 1) % threads].clone();
                let from = receivers.remove(0);
                std::thread::spawn(move || worker((iteration * 10 + t) as u64, to, from))
            })
            .collect();
        drop(senders);
        for h in handles {
            h.join().unwrap();
        }
        collect();
        let (allocated, dropped) = (ALLOCATED.load(SeqCst), DROPPED.load(SeqCst));
        let s = stats();
        assert_eq!(
            allocated - dropped,
            0,
            "iteration {iteration}: {} of {allocated} nodes survived collect(); stats {s:?}",
            allocated - dropped
        );
        assert_eq!(s.live, 0, "{s:?}");
        // Exactly (`live` saturates): every node freed once, by one of them.
        assert_eq!(
            s.freed_by_rc + s.freed_by_collector,
            allocated as u64,
            "{s:?}"
        );
        assert_eq!(s.old_objects, 0, "{s:?}");
    }
}

fn iterations() -> usize {
    std::env::var("ITER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}
