//! The model checker for random graph programs on the single-threaded `Gc`:
//! a world of `Gc` nodes driven by a stream of choices, checked after every
//! step against a model kept in plain collections. Shared by the randomized
//! test `tests/differential.rs` (choices from a seeded RNG) and the fuzz
//! target `fuzz/fuzz_targets/gc_graph.rs` (choices decoded from the fuzzer's
//! bytes, [`Bytes`]).
//!
//! # Model
//! Node ids are dense (`0..created`, in creation order). The model holds each
//! node's edge list, in the same order as the node's `RefCell<Vec<Gc<Node>>>`,
//! the ids of the handles held on the stack ("roots"), the ids of the `Weak`
//! handles, and which nodes the drop log says were dropped. A node that is
//! dropped loses its edges in the model too (its value, edge list included,
//! is gone). To act on a node the world walks the real heap from a root along
//! a model path, and asserts that every edge it follows points where the
//! model says.
//!
//! # Invariants
//! After every step:
//! * no node reachable from a root in the model was dropped, and no node was
//!   dropped twice;
//! * every node not dropped still has a handle: a root or an edge from a node
//!   not dropped (acyclic garbage goes at once, by counting);
//! * each root's strong count is its model count (roots plus edges from
//!   live nodes) and its weak count the number of model `Weak`s;
//! * a `Weak` has a strong count iff its node was not dropped;
//! * `stats().live` is the number of nodes created and not dropped.
//!
//! After every `collect()` (full) that no `trace` panic interrupted, and at
//! the end of a case, the dropped nodes are *exactly* the unreachable ones,
//! and `stats().live` is the number of reachable nodes. A teardown then drops
//! every handle and checks that everything is freed, each node once, and
//! that no root or old object is left in the collector's accounting.
//!
//! # Injected panics
//! With [`Mix::panics`], some steps arm nodes whose next `Drop` panics and/or
//! a countdown after which a `trace` call panics (payload [`Injected`]), run
//! one operation (dropping a root, removing an edge, a collection) under
//! `catch_unwind`, and disarm. The README's guarantee is checked: the panic
//! reaches the caller, every count and buffer is in order (the invariants
//! above hold), a full collection interrupted only by panicking `Drop`s
//! still drops every unreachable node, and later collections are exact.
//! Arming is confined to those operations, whose model update comes before
//! the real drop, so an unwinding step never leaves the model behind. An
//! armed node does not panic while the thread is already unwinding (that
//! aborts, as in any Rust program), except inside an explicit collection,
//! where only the collector drops values and must never drop one while a
//! panic unwinds through it (`injected.rs`).
//!
//! [`Plan::trace_clones`] makes every `trace` clone and drop each handle it
//! reports, an impl the README's contract allows (issue 12, defect 5).

// Each user (the test, the fuzz target) uses part of it.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};

use recycler::{AdaptiveConfig, Gc, Policy, Trace, Tracer, Weak};

/// Where the world's choices come from.
pub trait Choose {
    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize;
    /// `true` with probability `p` (roughly, for decoded bytes).
    fn chance(&mut self, p: f64) -> bool;
    /// Whether the source has run dry (a fuzz input is used up).
    fn exhausted(&self) -> bool {
        false
    }
}

/// Choices decoded from a fuzz input: each choice takes one byte (two when
/// `n > 256`); a used-up input yields zeros and ends the case.
pub struct Bytes {
    data: Vec<u8>,
    at: usize,
}

impl Bytes {
    pub fn new(data: &[u8]) -> Bytes {
        Bytes {
            data: data.to_vec(),
            at: 0,
        }
    }

    pub fn byte(&mut self) -> u8 {
        let byte = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        byte
    }
}

impl Choose for Bytes {
    fn below(&mut self, n: usize) -> usize {
        match n {
            0 | 1 => 0,
            2..=256 => self.byte() as usize % n,
            _ => u16::from_le_bytes([self.byte(), self.byte()]) as usize % n,
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            false
        } else if p >= 1.0 {
            true
        } else {
            (self.byte() as f64) < p * 256.0
        }
    }

    fn exhausted(&self) -> bool {
        self.at >= self.data.len()
    }
}

#[path = "injected.rs"]
mod injected;

pub use injected::quiet_injected_panics;
use injected::{caught, collecting, inject};

thread_local! {
    static DROPPED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<usize> = const { Cell::new(0) };
    /// Nodes whose next `Drop` panics.
    static ARMED_DROPS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// `n > 0`: the `n`-th `trace` call from now panics.
    static TRACE_PANIC_IN: Cell<usize> = const { Cell::new(0) };
    /// Every `trace` clones and drops the handles it reports.
    static TRACE_CLONES: Cell<bool> = const { Cell::new(false) };
}

/// A graph node: an id and a list of edges. Its drop is logged (per thread).
pub struct Node {
    pub id: usize,
    pub edges: RefCell<Vec<Gc<Node>>>,
}

impl Node {
    fn new() -> Gc<Node> {
        let id = NEXT_ID.with(|n| n.replace(n.get() + 1));
        Gc::new(Node {
            id,
            edges: RefCell::new(Vec::new()),
        })
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        DROPPED.with(|d| d.borrow_mut().push(self.id));
        let armed = ARMED_DROPS.with(|a| {
            let mut a = a.borrow_mut();
            let at = a.iter().position(|&id| id == self.id);
            at.map(|at| a.swap_remove(at)).is_some()
        });
        if armed {
            inject();
        }
    }
}

// SAFETY: reports each owned `Gc` once, through the `RefCell` impl. The
// injected panic and the clone-and-drop of `trace_clones` report nothing
// else (the contract forbids only reporting a pointer not owned).
unsafe impl Trace for Node {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        let countdown = TRACE_PANIC_IN.get();
        if countdown > 0 {
            TRACE_PANIC_IN.set(countdown - 1);
            if countdown == 1 {
                inject();
            }
        }
        if TRACE_CLONES.get() {
            if let Ok(edges) = self.edges.try_borrow() {
                for edge in edges.iter() {
                    drop(edge.clone());
                }
            }
        }
        self.edges.trace(tracer);
    }
}

/// Ids dropped on this thread so far, and clears the log.
fn take_dropped() -> Vec<usize> {
    DROPPED.with(|d| std::mem::take(&mut *d.borrow_mut()))
}

/// Arms the nodes `drops` and the `trace` countdown (see [`Node`]).
fn arm(drops: &[Option<usize>], trace_in: Option<usize>) {
    ARMED_DROPS.with(|a| a.borrow_mut().extend(drops.iter().flatten()));
    TRACE_PANIC_IN.set(trace_in.unwrap_or(0));
}

fn disarm() {
    ARMED_DROPS.with(|a| a.borrow_mut().clear());
    TRACE_PANIC_IN.set(0);
}

/// Prepares a thread to run a fresh world: node ids from zero, nothing armed,
/// empty drop log. (The collector's state is per thread: run each case on a
/// new thread.)
pub fn reset_thread() {
    NEXT_ID.set(0);
    take_dropped();
    disarm();
    TRACE_CLONES.set(false);
}

/// One mutation or collection, with the ids it acted on (for failure logs).
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // the fields are read through `Debug`, in failure reports
pub enum Op {
    /// A new node, held by a new root handle.
    New {
        id: usize,
    },
    /// `from` gets an edge to `to`.
    /// (`clones`: see [`World::with_node`].)
    Link {
        from: usize,
        to: usize,
        clones: bool,
    },
    /// `from` loses its edge number `index` (dropped while the cell is still
    /// mutably borrowed if `in_borrow`).
    Unlink {
        from: usize,
        index: usize,
        in_borrow: bool,
        clones: bool,
    },
    /// The root handle in `slot` (to `id`) is dropped.
    DropRoot {
        slot: usize,
        id: usize,
    },
    /// A handle to `id`, reached through the heap, becomes a new root.
    CloneRoot {
        id: usize,
        clones: bool,
    },
    /// A weak handle to `id` is kept.
    Downgrade {
        id: usize,
    },
    /// The weak handle to `id` is upgraded into a root (if it can be).
    Upgrade {
        id: usize,
        alive: bool,
    },
    /// The weak handle to `id` is dropped.
    DropWeak {
        id: usize,
    },
    /// A cycle of `len` new nodes starting at `first`, linked from and/or to
    /// an existing node, with at most one member kept as a root.
    Ring {
        first: usize,
        len: usize,
        from: Option<usize>,
        to: Option<usize>,
        keep: Option<usize>,
    },
    /// A new node `young` and an existing node `old` point to each other.
    CrossLink {
        old: usize,
        young: usize,
        keep: bool,
        clones: bool,
    },
    /// Every root handle is cloned and dropped: all roots become candidates.
    BufferRoots,
    /// A root is dropped (and maybe a collection run) while `id`'s cell is
    /// borrowed.
    DropWhileBorrowed {
        id: usize,
        mutable: bool,
        slot: usize,
        collect: Option<bool>,
    },
    Collect,
    CollectMinor,
    SetPolicy(Policy),
    /// The nodes `drops` panic when dropped and the `trace_in`-th trace call
    /// panics, during `what`; `panicked`: whether an injected panic came out.
    Panicking {
        what: Armed,
        drops: [Option<usize>; 3],
        trace_in: Option<usize>,
        panicked: bool,
    },
}

/// The operation run with injected panics armed.
#[derive(Clone, Copy, Debug)]
pub enum Armed {
    Collect,
    CollectMinor,
    DropRoot { slot: usize, id: usize },
    Unlink { from: usize, index: usize },
}

/// How a root of the model reaches a node: the first step back towards it.
#[derive(Clone, Copy)]
enum Via {
    Root(usize),
    Edge { from: usize, index: usize },
}

/// Which nodes are reachable from the roots, and how.
struct Reach {
    via: Vec<Option<Via>>,
    order: Vec<usize>,
}

impl Reach {
    fn reachable(&self, id: usize) -> bool {
        self.via[id].is_some()
    }
}

/// Relative frequencies of the operations in one case.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub new: u32,
    pub link: u32,
    pub unlink: u32,
    pub drop_root: u32,
    pub clone_root: u32,
    pub weak: u32,
    pub ring: u32,
    pub cross_link: u32,
    pub buffer_roots: u32,
    pub borrowed: u32,
    pub collect: u32,
    pub collect_minor: u32,
    pub set_policy: u32,
    /// Operations run with injected panics (see the module docs).
    pub panics: u32,
    /// How often a node is reached by cloning handles along the way rather
    /// than by borrowing (see [`World::with_node`]).
    pub clones: f64,
}

impl Mix {
    /// No operation at all (the base for scripted phases).
    pub fn none(clones: f64) -> Mix {
        Mix {
            new: 0,
            link: 0,
            unlink: 0,
            drop_root: 0,
            clone_root: 0,
            weak: 0,
            ring: 0,
            cross_link: 0,
            buffer_roots: 0,
            borrowed: 0,
            collect: 0,
            collect_minor: 0,
            set_policy: 0,
            panics: 0,
            clones,
        }
    }

    fn total(&self) -> u32 {
        self.new
            + self.link
            + self.unlink
            + self.drop_root
            + self.clone_root
            + self.weak
            + self.ring
            + self.cross_link
            + self.buffer_roots
            + self.borrowed
            + self.collect
            + self.collect_minor
            + self.set_policy
            + self.panics
    }
}

/// Everything one case does, drawn from its seed.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub policy: Policy,
    pub adaptive: Option<AdaptiveConfig>,
    pub mix: Mix,
    pub steps: usize,
    pub max_nodes: usize,
    /// Start by building a few nodes and promoting them with a collection.
    pub promote_first: bool,
    /// Then build cycles across generations (see
    /// [`World::across_generations`]).
    pub across_generations: bool,
    /// Every `trace` clones and drops the handles it reports.
    pub trace_clones: bool,
}

/// What a case exercised, summed over a family to check that the family
/// covers what it claims to.
#[derive(Default, Debug, Clone, Copy)]
pub struct Coverage {
    pub cases: usize,
    pub automatic_collections: u64,
    pub old_freed_by_full: u64,
    pub freed_by_collector: u64,
    pub borrowed_collections: u64,
    pub injected_panics: u64,
}

impl std::ops::AddAssign for Coverage {
    fn add_assign(&mut self, o: Coverage) {
        self.cases += o.cases;
        self.automatic_collections += o.automatic_collections;
        self.old_freed_by_full += o.old_freed_by_full;
        self.freed_by_collector += o.freed_by_collector;
        self.borrowed_collections += o.borrowed_collections;
        self.injected_panics += o.injected_panics;
    }
}

/// The real heap's handles on the stack, and the model.
pub struct World {
    roots: Vec<(Gc<Node>, usize)>,
    weaks: Vec<(Weak<Node>, usize)>,
    adj: Vec<Vec<usize>>,
    dropped: Vec<bool>,
    dropped_count: usize,
    explicit_collections: u64,
    pub coverage: Coverage,
    /// The last operations, oldest first (for failure reports).
    pub log: VecDeque<Op>,
}

/// Operations kept for the failure report.
const LOG_LEN: usize = 40;

impl World {
    pub fn new() -> World {
        World {
            roots: Vec::new(),
            weaks: Vec::new(),
            adj: Vec::new(),
            dropped: Vec::new(),
            dropped_count: 0,
            explicit_collections: 0,
            coverage: Coverage::default(),
            log: VecDeque::new(),
        }
    }

    fn record(&mut self, op: Op) {
        if self.log.len() == LOG_LEN {
            self.log.pop_front();
        }
        self.log.push_back(op);
    }

    fn created(&self) -> usize {
        self.adj.len()
    }

    /// A new node (not yet held by any root of the model).
    fn create(&mut self) -> Gc<Node> {
        let node = Node::new();
        assert_eq!(node.id, self.created(), "node ids are dense per thread");
        self.adj.push(Vec::new());
        self.dropped.push(false);
        node
    }

    /// Breadth-first search of the model from the roots.
    fn reach(&self) -> Reach {
        let mut via = vec![None; self.created()];
        let mut order = Vec::new();
        for (slot, &(_, id)) in self.roots.iter().enumerate() {
            if via[id].is_none() {
                via[id] = Some(Via::Root(slot));
                order.push(id);
            }
        }
        let mut i = 0;
        while i < order.len() {
            let from = order[i];
            for (index, &to) in self.adj[from].iter().enumerate() {
                if via[to].is_none() {
                    via[to] = Some(Via::Edge { from, index });
                    order.push(to);
                }
            }
            i += 1;
        }
        Reach { via, order }
    }

    /// The root slot and the edge indices (in order) of the model's path to
    /// the reachable node `id`.
    fn path(&self, reach: &Reach, id: usize) -> (usize, Vec<usize>) {
        let mut path = Vec::new();
        let mut at = id;
        loop {
            match reach.via[at] {
                Some(Via::Root(slot)) => {
                    path.reverse();
                    return (slot, path);
                }
                Some(Via::Edge { from, index }) => {
                    path.push(index);
                    at = from;
                }
                None => panic!("node {id} is not reachable"),
            }
        }
    }

    /// Runs `f` on the reachable node `id`, found by walking the real heap
    /// along the model's path and checking every edge against the model.
    ///
    /// With `clones`, the walk clones a handle at each step (and drops it at
    /// the next), which buffers every node on the way as a possible root.
    /// Without, it only borrows the edge lists on the path: no count changes
    /// and nothing is buffered, as when a program reads through references.
    fn with_node<R>(
        &self,
        reach: &Reach,
        id: usize,
        clones: bool,
        f: impl FnOnce(&Gc<Node>) -> R,
    ) -> R {
        let (slot, path) = self.path(reach, id);
        let root = &self.roots[slot].0;
        if clones {
            let mut handle = root.clone();
            let mut at = handle.id;
            for &index in &path {
                at = self.adj[at][index];
                let next = handle.edges.borrow()[index].clone();
                assert_eq!(next.id, at, "the heap's edge differs from the model's");
                handle = next;
            }
            assert_eq!(handle.id, id);
            f(&handle)
        } else {
            self.walk_borrowed(root, &path, f)
        }
    }

    /// The borrowing walk of [`World::with_node`] (one frame per step: paths
    /// are at most a few hundred nodes long).
    fn walk_borrowed<R>(
        &self,
        node: &Gc<Node>,
        path: &[usize],
        f: impl FnOnce(&Gc<Node>) -> R,
    ) -> R {
        match path.split_first() {
            None => f(node),
            Some((&index, rest)) => {
                let edges = node.edges.borrow();
                let next = &edges[index];
                assert_eq!(
                    next.id, self.adj[node.id][index],
                    "the heap's edge differs from the model's"
                );
                self.walk_borrowed(next, rest, f)
            }
        }
    }

    /// A new handle to the reachable node `id`.
    fn handle(&self, reach: &Reach, id: usize, clones: bool) -> Gc<Node> {
        self.with_node(reach, id, clones, Gc::clone)
    }

    fn pick_reachable(&self, rng: &mut dyn Choose, reach: &Reach) -> Option<usize> {
        if reach.order.is_empty() {
            None
        } else {
            Some(reach.order[rng.below(reach.order.len())])
        }
    }

    /// An edge (its node and index) of a reachable node.
    fn pick_edge(&self, rng: &mut dyn Choose, reach: &Reach) -> Option<(usize, usize)> {
        let with_edges: Vec<usize> = reach
            .order
            .iter()
            .copied()
            .filter(|&id| !self.adj[id].is_empty())
            .collect();
        if with_edges.is_empty() {
            return None;
        }
        let from = with_edges[rng.below(with_edges.len())];
        Some((from, rng.below(self.adj[from].len())))
    }

    /// A reachable node among the oldest third (by id) of the reachable ones.
    fn pick_older(&self, rng: &mut dyn Choose, reach: &Reach) -> Option<usize> {
        let mut ids = reach.order.clone();
        ids.sort_unstable();
        ids.truncate(ids.len().div_ceil(3));
        if ids.is_empty() {
            None
        } else {
            Some(ids[rng.below(ids.len())])
        }
    }

    /// Runs one random operation.
    fn step(&mut self, rng: &mut dyn Choose, plan: &Plan) {
        let reach = self.reach();
        let mix = &plan.mix;
        let room = self.created() < plan.max_nodes;
        let mut pick = rng.below(mix.total() as usize) as u32;
        let mut is = |weight: u32| {
            if pick < weight {
                true
            } else {
                pick -= weight;
                false
            }
        };
        if is(mix.new) {
            if room || reach.order.is_empty() {
                let node = self.create();
                self.record(Op::New { id: node.id });
                let id = node.id;
                self.roots.push((node, id));
            }
        } else if is(mix.link) {
            // Often between an older node (likely promoted) and one held on
            // the stack (likely young), in either direction.
            let (Some(a), Some(b)) = (
                self.pick_older(rng, &reach),
                self.pick_reachable(rng, &reach),
            ) else {
                return;
            };
            let young = if self.roots.is_empty() {
                b
            } else {
                self.roots[rng.below(self.roots.len())].1
            };
            let (from, to) = match rng.below(3) {
                0 => (a, young),
                1 => (young, a),
                _ => (self.pick_reachable(rng, &reach).unwrap_or(a), b),
            };
            let clones = rng.chance(mix.clones);
            self.record(Op::Link { from, to, clones });
            let b = self.handle(&reach, to, clones);
            self.with_node(&reach, from, clones, |a| a.edges.borrow_mut().push(b));
            self.adj[from].push(to);
        } else if is(mix.unlink) {
            let Some((from, index)) = self.pick_edge(rng, &reach) else {
                return;
            };
            let in_borrow = rng.chance(0.3);
            let clones = rng.chance(mix.clones);
            self.record(Op::Unlink {
                from,
                index,
                in_borrow,
                clones,
            });
            let to = self.adj[from][index];
            self.with_node(&reach, from, clones, |a| {
                if in_borrow {
                    // The drop may free by counting or trigger a collection
                    // that meets this mutably borrowed cell.
                    let mut edges = a.edges.borrow_mut();
                    let removed = edges.remove(index);
                    assert_eq!(removed.id, to);
                    drop(removed);
                } else {
                    let removed = a.edges.borrow_mut().remove(index);
                    assert_eq!(removed.id, to);
                    drop(removed);
                }
            });
            self.adj[from].remove(index);
        } else if is(mix.drop_root) {
            if self.roots.is_empty() {
                return;
            }
            let slot = rng.below(self.roots.len());
            let id = self.roots[slot].1;
            self.record(Op::DropRoot { slot, id });
            drop(self.roots.swap_remove(slot));
        } else if is(mix.clone_root) {
            let Some(id) = self.pick_reachable(rng, &reach) else {
                return;
            };
            let clones = rng.chance(mix.clones);
            self.record(Op::CloneRoot { id, clones });
            let handle = self.handle(&reach, id, clones);
            self.roots.push((handle, id));
        } else if is(mix.weak) {
            self.weak_op(rng, &reach, plan);
        } else if is(mix.ring) {
            if room {
                self.ring(rng, &reach, plan);
            }
        } else if is(mix.cross_link) {
            let Some(old) = self.pick_reachable(rng, &reach) else {
                return;
            };
            if !room {
                return;
            }
            let keep = rng.chance(0.3);
            let clones = rng.chance(mix.clones);
            let young = self.create();
            self.record(Op::CrossLink {
                old,
                young: young.id,
                keep,
                clones,
            });
            self.with_node(&reach, old, clones, |handle| {
                handle.edges.borrow_mut().push(young.clone());
                young.edges.borrow_mut().push(handle.clone());
            });
            self.adj[old].push(young.id);
            self.adj[young.id].push(old);
            if keep {
                let id = young.id;
                self.roots.push((young, id));
            }
        } else if is(mix.buffer_roots) {
            self.record(Op::BufferRoots);
            for (root, _) in &self.roots {
                drop(root.clone());
            }
        } else if is(mix.borrowed) {
            let Some(id) = self.pick_reachable(rng, &reach) else {
                return;
            };
            if self.roots.is_empty() {
                return;
            }
            let mutable = rng.chance(0.5);
            let slot = rng.below(self.roots.len());
            let collect = rng.chance(0.5).then(|| rng.chance(0.5));
            self.record(Op::DropWhileBorrowed {
                id,
                mutable,
                slot,
                collect,
            });
            let handle = self.handle(&reach, id, true);
            let before = recycler::stats().collections();
            {
                let _borrow = if mutable {
                    (None, Some(handle.edges.borrow_mut()))
                } else {
                    (Some(handle.edges.borrow()), None)
                };
                drop(self.roots.swap_remove(slot));
                match collect {
                    Some(true) => self.collect(),
                    Some(false) => self.collect_minor(),
                    None => {}
                }
            }
            self.coverage.borrowed_collections += recycler::stats().collections() - before;
        } else if is(mix.collect) {
            self.record(Op::Collect);
            self.collect_exact();
        } else if is(mix.collect_minor) {
            self.record(Op::CollectMinor);
            self.collect_minor();
        } else if is(mix.panics) {
            self.panicking(rng, &reach);
        } else {
            let policy = [Policy::Adaptive, Policy::Nim16, Policy::Manual][rng.below(3)];
            self.record(Op::SetPolicy(policy));
            recycler::set_policy(policy);
        }
    }

    /// An operation with injected panics armed (see the module docs): the
    /// panic, if any, must come out as [`Injected`] and leave every
    /// invariant in place.
    fn panicking(&mut self, rng: &mut dyn Choose, reach: &Reach) {
        // Nodes to arm: mostly garbage waiting for the collector (not
        // dropped, not reachable), else any node not dropped.
        let garbage: Vec<usize> = (0..self.created())
            .filter(|&id| !self.dropped[id] && !reach.reachable(id))
            .collect();
        let mut drops = [None; 3];
        for armed in &mut drops {
            *armed = if !garbage.is_empty() && rng.chance(0.6) {
                Some(garbage[rng.below(garbage.len())])
            } else if rng.chance(0.5) && !reach.order.is_empty() {
                Some(reach.order[rng.below(reach.order.len())])
            } else {
                None
            };
        }
        let trace_in = rng.chance(0.4).then(|| 1 + rng.below(8));
        let what = match rng.below(4) {
            0 => Armed::Collect,
            1 => Armed::CollectMinor,
            2 if !self.roots.is_empty() => {
                let slot = rng.below(self.roots.len());
                // The root's own node is the likeliest to be freed.
                drops[0] = Some(self.roots[slot].1);
                Armed::DropRoot {
                    slot,
                    id: self.roots[slot].1,
                }
            }
            3 => {
                let Some((from, index)) = self.pick_edge(rng, reach) else {
                    return;
                };
                drops[0] = Some(self.adj[from][index]);
                Armed::Unlink { from, index }
            }
            _ => return,
        };
        self.record(Op::Panicking {
            what,
            drops,
            trace_in,
            panicked: false,
        });
        arm(&drops, trace_in);
        let before = recycler::stats().collections();
        // The model is updated before the real drop, which may unwind.
        let panicked = caught(|| match what {
            // (Counted below: an interrupted collection may not count.)
            Armed::Collect => collecting(recycler::collect),
            Armed::CollectMinor => collecting(recycler::collect_minor),
            Armed::DropRoot { slot, .. } => drop(self.roots.swap_remove(slot)),
            Armed::Unlink { from, index } => {
                let to = self.adj[from].remove(index);
                // Reached by borrowing: nothing is dropped on the way.
                self.with_node(reach, from, false, |node| {
                    let removed = node.edges.borrow_mut().remove(index);
                    assert_eq!(removed.id, to);
                    drop(removed);
                });
            }
        });
        disarm();
        if matches!(what, Armed::Collect | Armed::CollectMinor) {
            self.explicit_collections += recycler::stats().collections() - before;
        }
        if let Some(Op::Panicking { panicked: p, .. }) = self.log.back_mut() {
            *p = panicked;
        }
        self.coverage.injected_panics += panicked as u64;
        let traced_clean = trace_in.is_none() || !panicked;
        if matches!(what, Armed::Collect) && traced_clean {
            // Panicking `Drop`s do not stop the others.
            self.settle(true);
        }
    }

    fn weak_op(&mut self, rng: &mut dyn Choose, reach: &Reach, plan: &Plan) {
        match rng.below(3) {
            0 if self.weaks.len() < 8 => {
                let Some(id) = self.pick_reachable(rng, reach) else {
                    return;
                };
                self.record(Op::Downgrade { id });
                let weak = self.with_node(reach, id, rng.chance(plan.mix.clones), Gc::downgrade);
                self.weaks.push((weak, id));
            }
            1 if !self.weaks.is_empty() => {
                // Upgrading a node that is unreachable but not yet collected
                // makes it reachable again, as with `std::rc`.
                let slot = rng.below(self.weaks.len());
                let id = self.weaks[slot].1;
                let upgraded = self.weaks[slot].0.upgrade();
                self.record(Op::Upgrade {
                    id,
                    alive: upgraded.is_some(),
                });
                match upgraded {
                    Some(handle) => {
                        assert!(!self.dropped[id], "a dropped node {id} upgraded");
                        assert_eq!(handle.id, id);
                        self.roots.push((handle, id));
                    }
                    None => assert!(self.dropped[id], "live node {id} failed to upgrade"),
                }
            }
            2 if !self.weaks.is_empty() => {
                let slot = rng.below(self.weaks.len());
                self.record(Op::DropWeak {
                    id: self.weaks[slot].1,
                });
                drop(self.weaks.swap_remove(slot));
            }
            _ => {}
        }
    }

    /// A ring of new nodes, maybe linked from and to existing ones; all its
    /// handles but at most one are dropped, so its members become candidates.
    fn ring(&mut self, rng: &mut dyn Choose, reach: &Reach, plan: &Plan) {
        let len = 1 + rng.below(6);
        let from = rng
            .chance(0.4)
            .then(|| self.pick_reachable(rng, reach))
            .flatten();
        let to = rng
            .chance(0.4)
            .then(|| self.pick_reachable(rng, reach))
            .flatten();
        let keep = rng.chance(0.3).then(|| rng.below(len));
        let clones = rng.chance(plan.mix.clones);
        let to_handle = to.map(|id| self.handle(reach, id, clones));
        let members: Vec<Gc<Node>> = (0..len).map(|_| self.create()).collect();
        let first = members[0].id;
        self.record(Op::Ring {
            first,
            len,
            from,
            to,
            keep: keep.map(|k| first + k),
        });
        for (k, member) in members.iter().enumerate() {
            let next = &members[(k + 1) % len];
            member.edges.borrow_mut().push(next.clone());
            self.adj[member.id].push(next.id);
        }
        if let Some(id) = from {
            self.with_node(reach, id, clones, |handle| {
                handle.edges.borrow_mut().push(members[0].clone())
            });
            self.adj[id].push(first);
        }
        if let (Some(id), Some(handle)) = (to, to_handle) {
            let last = &members[len - 1];
            last.edges.borrow_mut().push(handle);
            self.adj[last.id].push(id);
        }
        for (k, member) in members.into_iter().enumerate() {
            if keep == Some(k) {
                let id = member.id;
                self.roots.push((member, id));
            }
        }
    }

    fn collect(&mut self) {
        self.explicit_collections += 1;
        recycler::collect();
    }

    fn collect_minor(&mut self) {
        self.explicit_collections += 1;
        recycler::collect_minor();
    }

    /// A full collection outside any borrow, after which the dropped nodes
    /// must be exactly the unreachable ones.
    fn collect_exact(&mut self) {
        let before = recycler::stats();
        self.collect();
        let after = recycler::stats();
        // Old objects leave the count only when freed; the ones this
        // collection freed are the old ones before, plus its promotions,
        // minus the old ones after.
        self.coverage.old_freed_by_full += (before.old_objects + after.promoted - before.promoted)
            .checked_sub(after.old_objects)
            .expect("old objects grew by more than the promotions");
        self.settle(true);
    }

    /// Reads the drop log and checks the invariants; with `exact`, also that
    /// every unreachable node was dropped.
    fn settle(&mut self, exact: bool) {
        for id in take_dropped() {
            assert!(id < self.created(), "unknown node {id} dropped");
            assert!(!self.dropped[id], "node {id} was dropped twice");
            self.dropped[id] = true;
            self.dropped_count += 1;
            self.adj[id].clear();
        }
        let reach = self.reach();
        let n = self.created();
        let mut strong = vec![0usize; n];
        for &(_, id) in &self.roots {
            strong[id] += 1;
        }
        for edges in &self.adj {
            for &to in edges {
                strong[to] += 1;
            }
        }
        for (id, &count) in strong.iter().enumerate() {
            if self.dropped[id] {
                assert!(!reach.reachable(id), "reachable node {id} was dropped");
            } else {
                assert!(count > 0, "node {id} has no handle left but is alive");
                if exact {
                    assert!(
                        reach.reachable(id),
                        "unreachable node {id} survived a full collection"
                    );
                }
            }
        }
        let mut weak = vec![0usize; n];
        for (handle, id) in &self.weaks {
            weak[*id] += 1;
            assert_eq!(
                handle.strong_count() > 0,
                !self.dropped[*id],
                "weak handle to node {id}"
            );
        }
        for (handle, id) in &self.roots {
            assert_eq!(
                Gc::strong_count(handle),
                strong[*id],
                "strong count of {id}"
            );
            assert_eq!(Gc::weak_count(handle), weak[*id], "weak count of {id}");
        }
        let stats = recycler::stats();
        assert_eq!(stats.live as usize, n - self.dropped_count, "stats().live");
        if exact {
            assert_eq!(stats.live as usize, reach.order.len());
        }
    }

    /// Builds a few nodes, makes every root a candidate and collects, so that
    /// everything reachable is promoted (under `Adaptive`).
    fn promote_first(&mut self, rng: &mut dyn Choose, plan: &Plan) {
        let build = Mix {
            new: 3,
            link: 5,
            drop_root: 1,
            clone_root: 1,
            ring: 1,
            ..Mix::none(plan.mix.clones)
        };
        let steps = 4 + rng.below(12);
        self.phase(rng, plan, build, steps);
        self.record(Op::BufferRoots);
        for (root, _) in &self.roots {
            drop(root.clone());
        }
        let first = recycler::stats().collections() == 0;
        let full = rng.chance(0.5);
        if full {
            self.record(Op::Collect);
            self.collect_exact();
        } else {
            self.record(Op::CollectMinor);
            self.collect_minor();
            self.settle(false);
        }
        // Every reachable node was traced from a buffered root (a minor
        // collection reaches them all only if nothing is old yet), found live
        // and promoted.
        if recycler::policy() == Policy::Adaptive && (full || first) {
            assert_eq!(
                recycler::stats().old_objects as usize,
                self.reach().order.len(),
                "promotion of everything reachable"
            );
        }
    }

    /// Runs `steps` operations drawn from `mix`.
    fn phase(&mut self, rng: &mut dyn Choose, plan: &Plan, mix: Mix, steps: usize) {
        let phase = Plan { mix, ..*plan };
        for _ in 0..steps {
            self.step(rng, &phase);
            self.settle(false);
        }
    }

    /// After `promote_first`: cycles that span the generations without any
    /// member waiting in a roots buffer, the case a minor collection cannot
    /// judge (an edge from an old object counts as a reference from outside).
    ///
    /// New (young) nodes, held on the stack, point to old ones; the old ones
    /// lose their stack handles, and a full collection finds them live
    /// through the young ones (and takes them out of the buffer); then old
    /// nodes come to point to young ones, reached by borrowing so that no
    /// count changes on the old side; then the young nodes are dropped, with
    /// minor collections in between. Random operations follow.
    fn across_generations(&mut self, rng: &mut dyn Choose, plan: &Plan) {
        let clones = plan.mix.clones;
        let old: Vec<usize> = self.reach().order;
        if old.is_empty() {
            return;
        }
        let first_young = self.created();
        for _ in 0..1 + rng.below(4) {
            let reach = self.reach();
            let young = self.create();
            let id = young.id;
            self.roots.push((young, id));
            let target = old[rng.below(old.len())];
            if reach.reachable(target) {
                let via = rng.chance(clones);
                self.record(Op::New { id });
                self.record(Op::Link {
                    from: id,
                    to: target,
                    clones: via,
                });
                let handle = self.handle(&reach, target, via);
                self.roots.last().unwrap().0.edges.borrow_mut().push(handle);
                self.adj[id].push(target);
            }
            self.settle(false);
        }
        // The old nodes lose their stack handles.
        let mut slot = 0;
        while slot < self.roots.len() {
            let id = self.roots[slot].1;
            if id < first_young {
                self.record(Op::DropRoot { slot, id });
                drop(self.roots.swap_remove(slot));
                self.settle(false);
            } else {
                slot += 1;
            }
        }
        self.record(Op::Collect);
        self.collect_exact();
        // Old nodes (reached from young ones) come to point to young ones.
        for _ in 0..1 + rng.below(4) {
            let reach = self.reach();
            let old_reachable: Vec<usize> = reach
                .order
                .iter()
                .copied()
                .filter(|&id| id < first_young)
                .collect();
            if old_reachable.is_empty() || self.roots.is_empty() {
                break;
            }
            let from = old_reachable[rng.below(old_reachable.len())];
            let to = self.roots[rng.below(self.roots.len())].1;
            let via = rng.chance(clones);
            self.record(Op::Link {
                from,
                to,
                clones: via,
            });
            let target = self.handle(&reach, to, via);
            self.with_node(&reach, from, via, |node| {
                node.edges.borrow_mut().push(target)
            });
            self.adj[from].push(to);
            self.settle(false);
        }
        // The young nodes are dropped, with minor collections in between.
        while !self.roots.is_empty() {
            let slot = rng.below(self.roots.len());
            let id = self.roots[slot].1;
            self.record(Op::DropRoot { slot, id });
            drop(self.roots.swap_remove(slot));
            self.settle(false);
            if rng.chance(0.5) {
                self.record(Op::CollectMinor);
                self.collect_minor();
                self.settle(false);
            }
        }
        if rng.chance(0.8) {
            self.record(Op::CollectMinor);
            self.collect_minor();
            self.settle(false);
        }
        // Something for the random steps to work on.
        let node = self.create();
        let id = node.id;
        self.record(Op::New { id });
        self.roots.push((node, id));
    }

    /// Runs a case: the plan's opening phases, then `plan.steps` random
    /// operations (fewer if the choices run dry), then a final exact
    /// collection and the teardown.
    pub fn run(&mut self, rng: &mut dyn Choose, plan: &Plan) {
        TRACE_CLONES.set(plan.trace_clones);
        recycler::set_policy(plan.policy);
        if let Some(config) = plan.adaptive {
            recycler::set_adaptive_config(config);
        }
        if plan.promote_first {
            self.promote_first(rng, plan);
        }
        if plan.across_generations {
            self.across_generations(rng, plan);
        }
        for _ in 0..plan.steps {
            if rng.exhausted() {
                break;
            }
            self.step(rng, plan);
            self.settle(false);
        }
        self.record(Op::Collect);
        self.collect_exact();
        // Teardown: with every handle gone, everything goes.
        self.weaks.clear();
        self.roots.clear();
        self.collect();
        self.settle(true);
        let stats = recycler::stats();
        assert_eq!(self.dropped_count, self.created(), "all nodes dropped");
        assert_eq!(stats.live, 0);
        assert_eq!(stats.roots_buffered, 0, "no freed object stays buffered");
        assert_eq!(stats.old_objects, 0, "no freed object stays counted old");
        self.coverage.cases = 1;
        self.coverage.automatic_collections = stats.collections() - self.explicit_collections;
        self.coverage.freed_by_collector = stats.freed_by_collector;
    }
}

/// Runs one case on a fresh thread (fresh collector state): the plan is
/// drawn from `choices` by `plan_of`, then the world runs on the same
/// choices. On failure, prints `label`, the plan and the last operations to
/// stderr and returns the panic.
pub fn run_case<C: Choose + Send + 'static>(
    label: String,
    mut choices: C,
    plan_of: impl FnOnce(&mut C) -> Plan + Send + 'static,
) -> std::thread::Result<Coverage> {
    std::thread::spawn(move || {
        reset_thread();
        let plan = plan_of(&mut choices);
        let mut world = World::new();
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| world.run(&mut choices, &plan)));
        match outcome {
            Ok(()) => world.coverage,
            Err(payload) => {
                eprintln!("{label}\nplan: {plan:?}\nlast operations (oldest first):");
                for op in &world.log {
                    eprintln!("  {op:?}");
                }
                // Leak the handles: dropping them could panic again.
                std::mem::forget(world);
                panic::resume_unwind(payload)
            }
        }
    })
    .join()
}

/// Which operations a decoded input may use.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Injected panics in `Drop` and `trace` ([`Mix::panics`]).
    pub panics: bool,
    /// [`Plan::trace_clones`].
    pub trace_clones: bool,
}

/// A plan decoded from the first bytes of a fuzz input (the rest drives the
/// steps, until it runs out).
pub fn decode_plan(bytes: &mut Bytes, options: Options) -> Plan {
    let policy = [Policy::Adaptive, Policy::Nim16, Policy::Manual][bytes.below(3)];
    let adaptive = bytes.chance(0.5).then(|| {
        AdaptiveConfig::default()
            .min_roots(1 + bytes.below(32))
            .full_fraction([0.0, 0.25, 1.0, 4.0][bytes.below(4)])
    });
    let mut weight = || bytes.below(8) as u32;
    let mix = Mix {
        new: 1 + weight(),
        link: weight(),
        unlink: weight(),
        drop_root: weight(),
        clone_root: weight(),
        weak: weight(),
        ring: weight(),
        cross_link: weight(),
        buffer_roots: weight(),
        borrowed: weight(),
        collect: weight(),
        collect_minor: weight(),
        set_policy: weight(),
        panics: if options.panics { weight() } else { 0 },
        clones: [0.0, 0.5, 1.0][bytes.below(3)],
    };
    let promote_first = bytes.chance(0.3);
    Plan {
        policy,
        adaptive,
        mix,
        steps: 10_000,
        max_nodes: 4 + bytes.below(60),
        promote_first,
        across_generations: promote_first && bytes.chance(0.5),
        trace_clones: options.trace_clones && bytes.chance(0.5),
    }
}

/// Runs a fuzz input (see [`decode_plan`]) on a fresh thread.
pub fn run_input(data: &[u8], options: Options) -> std::thread::Result<Coverage> {
    run_case(
        format!("fuzz input failed: {} bytes, {options:?}", data.len()),
        Bytes::new(data),
        move |bytes| decode_plan(bytes, options),
    )
}
