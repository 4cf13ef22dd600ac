//! Multithreaded stress test of `recycler::sync`: random graph operations on
//! several threads — allocation, linking, unlinking, moving handles between
//! cells, handing handles to other threads through mailboxes, weak upgrades,
//! `get_mut`, `try_unwrap`, explicit collections and automatic ones (default
//! policy) — while every
//! dereference checks that the object's value has not been dropped. After
//! the threads are joined and the heap collected, the set of dropped objects
//! must be exactly the set of objects unreachable from the surviving roots.
//!
//! Bounded: a fixed number of operations per thread and a wall-clock cap
//! (the cap only shortens the run; nothing asserts on time). Under Miri the
//! sizes shrink to a few hundred operations on two threads.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use recycler::sync::{collect, Gc, Weak};
use recycler::Trace;

const THREADS: usize = if cfg!(miri) { 2 } else { 4 };
const OPS: usize = if cfg!(miri) { 150 } else { 40_000 };
const MAX_NODES: usize = if cfg!(miri) { 200 } else { 50_000 };
const CAP: Duration = Duration::from_secs(8);

struct World {
    dropped: Vec<AtomicBool>,
    next_id: AtomicUsize,
    mailboxes: Vec<Mutex<Vec<Gc<Node>>>>,
}

#[derive(Trace)]
struct Node {
    edges: Mutex<Vec<Gc<Node>>>,
    #[trace(skip)]
    id: usize,
    #[trace(skip)]
    world: Arc<World>,
}

impl Node {
    fn check(&self) {
        assert!(
            !self.world.dropped[self.id].load(SeqCst),
            "node {} used after its value was dropped",
            self.id
        );
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let was = self.world.dropped[self.id].swap(true, SeqCst);
        assert!(!was, "node {} dropped twice", self.id);
    }
}

fn new_node(world: &Arc<World>) -> Option<Gc<Node>> {
    let id = world.next_id.fetch_add(1, SeqCst);
    (id < MAX_NODES).then(|| {
        Gc::new(Node {
            edges: Mutex::new(Vec::new()),
            id,
            world: world.clone(),
        })
    })
}

fn worker(world: Arc<World>, me: usize, seed: u64) -> Vec<Gc<Node>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut roots: Vec<Gc<Node>> = Vec::new();
    let mut weaks: Vec<Weak<Node>> = Vec::new();
    let start = Instant::now();
    for op in 0..OPS {
        if op % 256 == 0 && start.elapsed() > CAP {
            break;
        }
        let pick = |rng: &mut SmallRng, roots: &Vec<Gc<Node>>| rng.gen_range(0..roots.len());
        match rng.gen_range(0..100) {
            0..=19 => {
                if let Some(n) = new_node(&world) {
                    roots.push(n);
                }
            }
            20..=39 if !roots.is_empty() => {
                // link a -> b
                let (a, b) = (pick(&mut rng, &roots), pick(&mut rng, &roots));
                roots[a].check();
                let b = roots[b].clone();
                roots[a].edges.lock().unwrap().push(b);
            }
            40..=49 if !roots.is_empty() => {
                // unlink: drop an edge or keep it as a root
                let a = pick(&mut rng, &roots);
                let e = roots[a].edges.lock().unwrap().pop();
                if let Some(e) = e {
                    e.check();
                    if rng.gen_bool(0.5) {
                        roots.push(e);
                    }
                }
            }
            50..=61 if !roots.is_empty() => {
                let i = pick(&mut rng, &roots);
                roots.swap_remove(i);
            }
            62..=67 if !roots.is_empty() => {
                // move a handle from one cell to another (no count change)
                let (a, b) = (pick(&mut rng, &roots), pick(&mut rng, &roots));
                let moved = roots[a].edges.lock().unwrap().pop();
                if let Some(h) = moved {
                    h.check();
                    roots[b].edges.lock().unwrap().push(h);
                }
            }
            68..=73 if !roots.is_empty() => {
                // walk a few steps along edges, checking every node
                let mut cur = roots[pick(&mut rng, &roots)].clone();
                for _ in 0..4 {
                    cur.check();
                    let next = {
                        let edges = cur.edges.lock().unwrap();
                        if edges.is_empty() {
                            break;
                        }
                        edges[rng.gen_range(0..edges.len())].clone()
                    };
                    cur = next;
                }
            }
            74..=79 if !roots.is_empty() => {
                // hand a root to another thread
                let i = pick(&mut rng, &roots);
                let h = roots.swap_remove(i);
                let to = rng.gen_range(0..THREADS);
                world.mailboxes[to].lock().unwrap().push(h);
            }
            80..=85 => {
                let got = std::mem::take(&mut *world.mailboxes[me].lock().unwrap());
                for h in got {
                    h.check();
                    roots.push(h);
                }
            }
            86..=91 => {
                if !roots.is_empty() && rng.gen_bool(0.5) {
                    weaks.push(Gc::downgrade(&roots[pick(&mut rng, &roots)]));
                } else if !weaks.is_empty() {
                    let w = weaks.swap_remove(rng.gen_range(0..weaks.len()));
                    if let Some(h) = w.upgrade() {
                        h.check();
                        if rng.gen_bool(0.3) {
                            roots.push(h);
                        }
                    }
                }
            }
            92..=93 => collect(),
            94..=95 if !roots.is_empty() => {
                // exclusive access through a unique handle
                let i = pick(&mut rng, &roots);
                if let Some(n) = Gc::get_mut(&mut roots[i]) {
                    let edges = n.edges.get_mut().unwrap();
                    if let Some(e) = edges.pop() {
                        e.check();
                        roots.push(e);
                    }
                }
            }
            96 if !roots.is_empty() => {
                // take the value out of a unique handle (drops it here)
                let i = pick(&mut rng, &roots);
                let h = roots.swap_remove(i);
                if let Err(h) = Gc::try_unwrap(h) {
                    roots.push(h);
                }
            }
            _ => {}
        }
    }
    roots
}

#[test]
fn random_operations_on_threads_free_exactly_the_unreachable() {
    let world = Arc::new(World {
        dropped: (0..MAX_NODES).map(|_| AtomicBool::new(false)).collect(),
        next_id: AtomicUsize::new(0),
        mailboxes: (0..THREADS).map(|_| Mutex::new(Vec::new())).collect(),
    });
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let world = world.clone();
            std::thread::spawn(move || worker(world, t, 0x5eed + t as u64))
        })
        .collect();
    let mut roots: Vec<Gc<Node>> = Vec::new();
    for h in handles {
        roots.extend(h.join().unwrap());
    }
    for mailbox in &world.mailboxes {
        roots.extend(std::mem::take(&mut *mailbox.lock().unwrap()));
    }
    // Keep every third root; the rest become garbage now.
    let mut i = 0;
    roots.retain(|_| {
        i += 1;
        i % 3 == 0
    });
    collect();
    collect();

    let allocated = world.next_id.load(SeqCst).min(MAX_NODES);
    let mut reachable = vec![false; allocated];
    let mut stack: Vec<Gc<Node>> = roots.clone();
    while let Some(n) = stack.pop() {
        n.check();
        if !std::mem::replace(&mut reachable[n.id], true) {
            stack.extend(n.edges.lock().unwrap().iter().cloned());
        }
    }
    for (id, &r) in reachable.iter().enumerate() {
        let dropped = world.dropped[id].load(SeqCst);
        assert_eq!(dropped, !r, "node {id}: reachable {r}, dropped {dropped}");
    }
    let live = reachable.iter().filter(|&&r| r).count();
    eprintln!("{allocated} nodes, {live} reachable at the end");
    drop(roots);
    collect();
    assert!(world.dropped[..allocated].iter().all(|d| d.load(SeqCst)));
}
