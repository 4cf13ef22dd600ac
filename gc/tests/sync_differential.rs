//! Multi-threaded differential test of the generational thread-safe
//! collector.
//!
//! Two to four threads run random graph operations over their own young
//! nodes and a shared *hub* that is old from the start: links in both
//! directions between young and old nodes (old → young edges are the
//! cross-generation case), handles moved between threads through shared
//! `Mutex` cells, weak upgrades, and minor and full collections at random
//! points (besides the Adaptive policy's own). Every access checks the
//! node's alive flag: nothing may be dropped while reachable. After the
//! threads are joined and the heap collected, the dropped nodes must be
//! exactly those unreachable from what survives (the oracle is the real
//! graph, walked single-threaded at the end).
//!
//! Bounded by operation counts (seconds in `cargo test`); under Miri the
//! sizes shrink to a few hundred operations on two threads.
//!
//! A last run makes 80 collections stall in a node's trace for longer than
//! the collector trusts its snapshots (20 ms): those validate their garbage
//! without snapshots, with every cell of a component locked and each
//! member's count checked at its claim (`sync/age.rs`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use recycler::sync::{collect, collect_minor, stats, Gc, Weak};
use recycler::{Trace, Tracer};

const THREADS: &[usize] = if cfg!(miri) { &[2] } else { &[2, 3, 4] };
const OPS: usize = if cfg!(miri) { 120 } else { 12_000 };
const HUB: usize = if cfg!(miri) { 8 } else { 200 };
const CELLS: usize = if cfg!(miri) { 2 } else { 8 };
const MAX_NODES: usize = if cfg!(miri) { 400 } else { 60_000 };

struct World {
    alive: Vec<AtomicBool>,
    next_id: AtomicUsize,
    /// Shared cells through which handles move between threads.
    cells: Vec<Mutex<Option<Gc<Node>>>>,
    /// One node in this many stalls its traces (0: none).
    stall_every: usize,
}

/// Stalls left in this run (see [`Stall`]).
static STALLS: AtomicUsize = AtomicUsize::new(0);

/// If armed, sleeps in its traces while the run has stalls left, past the
/// age at which the collector stops trusting its snapshots.
struct Stall(bool);

// SAFETY: it owns no `sync::Gc`.
unsafe impl Trace for Stall {
    fn trace(&self, _: &mut Tracer<'_>) {
        if self.0
            && STALLS
                .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
    }
}

#[derive(Trace)]
struct Node {
    edges: Mutex<Vec<Gc<Node>>>,
    #[trace(skip)]
    id: usize,
    #[trace(skip)]
    world: Arc<World>,
    stall: Stall,
}

impl Node {
    fn new(world: &Arc<World>) -> Option<Gc<Node>> {
        let id = world.next_id.fetch_add(1, SeqCst);
        (id < MAX_NODES).then(|| {
            world.alive[id].store(true, SeqCst);
            let stall = world.stall_every != 0 && id % world.stall_every == 0;
            Gc::new(Node {
                edges: Mutex::new(Vec::new()),
                id,
                world: world.clone(),
                stall: Stall(stall),
            })
        })
    }

    /// Asserts that the value has not been dropped.
    fn check(&self) -> &Self {
        assert!(
            self.world.alive[self.id].load(SeqCst),
            "node {} accessed after its value was dropped",
            self.id
        );
        self
    }

    fn link(&self, to: &Gc<Node>) {
        to.check();
        self.check().edges.lock().unwrap().push(to.clone());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let was = self.world.alive[self.id].swap(false, SeqCst);
        assert!(was, "node {} dropped twice", self.id);
    }
}

fn worker(world: Arc<World>, hub: Vec<Gc<Node>>, seed: u64) -> Vec<Gc<Node>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut roots: Vec<Gc<Node>> = Vec::new();
    let mut weaks: Vec<Weak<Node>> = Vec::new();
    // Operations pick recent roots half of the time, so that cycles form
    // often, and old ones otherwise.
    let pick = |rng: &mut SmallRng, n: usize| {
        if rng.gen_bool(0.5) {
            n - 1 - rng.gen_range(0..n.min(8))
        } else {
            rng.gen_range(0..n)
        }
    };
    for _ in 0..OPS {
        let n = roots.len();
        match rng.gen_range(0..100) {
            0..=21 => roots.extend(Node::new(&world)),
            22..=37 if n > 0 => {
                let (a, b) = (pick(&mut rng, n), pick(&mut rng, n));
                roots[a].link(&roots[b]);
            }
            38..=41 if n > 1 => {
                // move a root into another node's cell: no count changes
                let b = roots.swap_remove(pick(&mut rng, n));
                roots[pick(&mut rng, n - 1)]
                    .check()
                    .edges
                    .lock()
                    .unwrap()
                    .push(b);
            }
            42 if n > 0 => {
                // adopt: a root (perhaps old) moves into a new node's cell
                // and points back to it: a cycle whose older member's count
                // did not change
                if let Some(y) = Node::new(&world) {
                    let o = roots.swap_remove(rng.gen_range(0..n));
                    o.link(&y);
                    y.edges.lock().unwrap().push(o);
                    roots.push(y);
                }
            }
            43 if n > 0 => {
                // young -> old
                let h = &hub[rng.gen_range(0..hub.len())];
                roots[pick(&mut rng, n)].link(h);
            }
            44..=47 if n > 0 => {
                // old -> young: the cross-generation edge
                let h = &hub[rng.gen_range(0..hub.len())];
                h.link(&roots[pick(&mut rng, n)]);
            }
            48..=51 => {
                // unlink from a hub node
                let h = &hub[rng.gen_range(0..hub.len())];
                let e = h.check().edges.lock().unwrap().pop();
                if let Some(e) = e {
                    e.check();
                    if rng.gen_bool(0.3) {
                        roots.push(e);
                    }
                }
            }
            52..=59 if n > 0 => {
                let e = roots[pick(&mut rng, n)].check().edges.lock().unwrap().pop();
                if let Some(e) = e {
                    e.check();
                    if rng.gen_bool(0.5) {
                        roots.push(e);
                    }
                }
            }
            60..=69 if n > 0 => {
                roots.swap_remove(pick(&mut rng, n));
            }
            70..=75 => {
                // Swap a handle with a shared cell: handles move between
                // threads without any count changing.
                let cell = &world.cells[rng.gen_range(0..world.cells.len())];
                let mine = if n > 0 && rng.gen_bool(0.6) {
                    Some(roots.swap_remove(pick(&mut rng, n)))
                } else {
                    None
                };
                let theirs = std::mem::replace(&mut *cell.lock().unwrap(), mine);
                if let Some(h) = theirs {
                    h.check();
                    roots.push(h);
                }
            }
            76..=81 if n > 0 => {
                // walk along edges, young and old
                let mut cur = roots[pick(&mut rng, n)].clone();
                for _ in 0..4 {
                    let next = {
                        let edges = cur.check().edges.lock().unwrap();
                        if edges.is_empty() {
                            break;
                        }
                        edges[rng.gen_range(0..edges.len())].clone()
                    };
                    cur = next;
                }
                if rng.gen_bool(0.2) {
                    roots.push(cur);
                }
            }
            82..=87 => {
                if n > 0 && rng.gen_bool(0.5) {
                    weaks.push(Gc::downgrade(&roots[pick(&mut rng, n)]));
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
            88..=90 => collect_minor(),
            91 => collect(),
            _ => {}
        }
    }
    roots
}

fn run(threads: usize, seed: u64, stall_every: usize) {
    let world = Arc::new(World {
        alive: (0..MAX_NODES).map(|_| AtomicBool::new(false)).collect(),
        next_id: AtomicUsize::new(0),
        cells: (0..CELLS).map(|_| Mutex::new(None)).collect(),
        stall_every,
    });
    // The hub: old before the threads start.
    let hub: Vec<Gc<Node>> = (0..HUB).filter_map(|_| Node::new(&world)).collect();
    for h in &hub {
        drop(h.clone()); // buffered, so that the collection promotes it
    }
    collect();
    let promoted = stats().promoted;

    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (world, hub) = (world.clone(), hub.clone());
            std::thread::spawn(move || worker(world, hub, seed + t as u64))
        })
        .collect();
    let mut roots: Vec<Gc<Node>> = Vec::new();
    for w in workers {
        roots.extend(w.join().unwrap());
    }
    for cell in &world.cells {
        roots.extend(cell.lock().unwrap().take());
    }
    // Keep a third of the roots and one hub node in eight.
    let mut i = 0;
    roots.retain(|_| {
        i += 1;
        i % 3 == 0
    });
    roots.extend(hub.into_iter().step_by(8));
    // With stalls, the collection that frees most is stale too.
    if stall_every != 0 {
        STALLS.store(1, SeqCst);
    }
    collect();

    let allocated = world.next_id.load(SeqCst).min(MAX_NODES);
    let mut reachable = vec![false; allocated];
    let mut stack: Vec<Gc<Node>> = roots.clone();
    while let Some(n) = stack.pop() {
        if !std::mem::replace(&mut reachable[n.check().id], true) {
            stack.extend(n.edges.lock().unwrap().iter().cloned());
        }
    }
    for (id, &r) in reachable.iter().enumerate() {
        let alive = world.alive[id].load(SeqCst);
        assert_eq!(alive, r, "node {id}: reachable {r}, alive {alive}");
    }
    let s = stats();
    eprintln!(
        "{threads} threads: {allocated} nodes, {} reachable; {} minor and {} full \
         collections, {} freed by the collector, {} promoted",
        reachable.iter().filter(|&&r| r).count(),
        s.minor_collections,
        s.full_collections,
        s.freed_by_collector,
        s.promoted - promoted,
    );
    assert!(s.promoted > promoted);
    drop(roots);
    collect();
    assert!(world.alive[..allocated].iter().all(|a| !a.load(SeqCst)));
}

/// The runs share the process-wide collector, so they run one after the
/// other in a single test.
#[test]
fn threads_with_minor_and_full_collections_free_exactly_the_unreachable() {
    for (k, &threads) in THREADS.iter().enumerate() {
        run(threads, 0xd1ff + 100 * k as u64, 0);
    }
    // Stalled collections (not under Miri, which has no clock to age them).
    if !cfg!(miri) {
        STALLS.store(80, SeqCst);
        run(2, 0x57a1e, 50);
    }
}
