//! Randomized differential test: random graphs of `Gc` nodes under random
//! mutations and collections, checked after every step against a model kept
//! in plain collections.
//!
//! # Model
//! Node ids are dense (`0..created`, in creation order). The model holds each
//! node's edge list, in the same order as the node's `RefCell<Vec<Gc<Node>>>`,
//! the ids of the handles held on the stack ("roots"), the ids of the `Weak`
//! handles, and which nodes the drop log says were dropped. A node that is
//! dropped loses its edges in the model too (its value, edge list included,
//! is gone). To act on a node the test walks the real heap from a root along a
//! model path, and asserts that every edge it follows points where the model
//! says.
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
//! After every `collect()` (full), and at the end of a case, the dropped
//! nodes are *exactly* the unreachable ones, and `stats().live` is the number
//! of reachable nodes. A teardown then drops every handle and checks that
//! everything is freed, each node once, and that no root or old object is
//! left in the collector's accounting.
//!
//! # Cases
//! Each test is a *family* of cases (policy, collector tuning, mix of
//! operations); each case runs on a fresh thread (fresh collector state) from
//! its own seed. Cross-generation cycles come from cases that promote their
//! first nodes with an early collection and then link new nodes to them.
//!
//! A failing case prints its family, seed and last operations. Replay it
//! alone with `RECYCLER_DIFF_SEED=<seed> cargo test -p recycler --test
//! differential <family>`; `RECYCLER_DIFF_SCALE=<n>` runs n times as many
//! cases (a soak run).
mod common;

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};

use common::{take_dropped, Node};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use recycler::{AdaptiveConfig, Gc, Policy, Weak};

/// One mutation or collection, with the ids it acted on (for failure logs).
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // the fields are read through `Debug`, in failure reports
enum Op {
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
struct Mix {
    new: u32,
    link: u32,
    unlink: u32,
    drop_root: u32,
    clone_root: u32,
    weak: u32,
    ring: u32,
    cross_link: u32,
    buffer_roots: u32,
    borrowed: u32,
    collect: u32,
    collect_minor: u32,
    set_policy: u32,
    /// How often a node is reached by cloning handles along the way rather
    /// than by borrowing (see [`World::with_node`]).
    clones: f64,
}

impl Mix {
    /// No operation at all (the base for scripted phases).
    fn none(clones: f64) -> Mix {
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
            clones,
        }
    }

    fn random(rng: &mut SmallRng) -> Mix {
        Mix {
            new: rng.gen_range(2..10),
            link: rng.gen_range(4..16),
            unlink: rng.gen_range(1..8),
            drop_root: rng.gen_range(2..10),
            clone_root: rng.gen_range(1..6),
            weak: rng.gen_range(0..4),
            ring: rng.gen_range(0..4),
            cross_link: rng.gen_range(0..3),
            buffer_roots: rng.gen_range(0..2),
            borrowed: rng.gen_range(0..3),
            collect: rng.gen_range(0..3),
            collect_minor: rng.gen_range(0..4),
            set_policy: 0,
            clones: [0.0, 0.5, 1.0][rng.gen_range(0..3)],
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
    }
}

/// Everything one case does, drawn from its seed.
#[derive(Clone, Copy, Debug)]
struct Plan {
    policy: Policy,
    adaptive: Option<AdaptiveConfig>,
    mix: Mix,
    steps: usize,
    max_nodes: usize,
    /// Start by building a few nodes and promoting them with a collection.
    promote_first: bool,
    /// Then build cycles across generations (see
    /// [`World::across_generations`]).
    across_generations: bool,
}

/// What a case exercised, summed over a family to check that the family
/// covers what it claims to.
#[derive(Default, Debug, Clone, Copy)]
struct Coverage {
    cases: usize,
    automatic_collections: u64,
    old_freed_by_full: u64,
    freed_by_collector: u64,
    borrowed_collections: u64,
}

impl std::ops::AddAssign for Coverage {
    fn add_assign(&mut self, o: Coverage) {
        self.cases += o.cases;
        self.automatic_collections += o.automatic_collections;
        self.old_freed_by_full += o.old_freed_by_full;
        self.freed_by_collector += o.freed_by_collector;
        self.borrowed_collections += o.borrowed_collections;
    }
}

/// The real heap's handles on the stack, and the model.
struct World {
    roots: Vec<(Gc<Node>, usize)>,
    weaks: Vec<(Weak<Node>, usize)>,
    adj: Vec<Vec<usize>>,
    dropped: Vec<bool>,
    dropped_count: usize,
    explicit_collections: u64,
    coverage: Coverage,
    log: VecDeque<Op>,
}

/// Operations kept for the failure report.
const LOG_LEN: usize = 40;

impl World {
    fn new() -> World {
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

    fn pick_reachable(&self, rng: &mut SmallRng, reach: &Reach) -> Option<usize> {
        if reach.order.is_empty() {
            None
        } else {
            Some(reach.order[rng.gen_range(0..reach.order.len())])
        }
    }

    /// A reachable node among the oldest third (by id) of the reachable ones.
    fn pick_older(&self, rng: &mut SmallRng, reach: &Reach) -> Option<usize> {
        let mut ids = reach.order.clone();
        ids.sort_unstable();
        ids.truncate(ids.len().div_ceil(3));
        if ids.is_empty() {
            None
        } else {
            Some(ids[rng.gen_range(0..ids.len())])
        }
    }

    /// Runs one random operation.
    fn step(&mut self, rng: &mut SmallRng, plan: &Plan) {
        let reach = self.reach();
        let mix = &plan.mix;
        let room = self.created() < plan.max_nodes;
        let mut pick = rng.gen_range(0..mix.total());
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
                self.roots[rng.gen_range(0..self.roots.len())].1
            };
            let (from, to) = match rng.gen_range(0..3) {
                0 => (a, young),
                1 => (young, a),
                _ => (self.pick_reachable(rng, &reach).unwrap_or(a), b),
            };
            let clones = rng.gen_bool(mix.clones);
            self.record(Op::Link { from, to, clones });
            let b = self.handle(&reach, to, clones);
            self.with_node(&reach, from, clones, |a| a.edges.borrow_mut().push(b));
            self.adj[from].push(to);
        } else if is(mix.unlink) {
            let with_edges: Vec<usize> = reach
                .order
                .iter()
                .copied()
                .filter(|&id| !self.adj[id].is_empty())
                .collect();
            if with_edges.is_empty() {
                return;
            }
            let from = with_edges[rng.gen_range(0..with_edges.len())];
            let index = rng.gen_range(0..self.adj[from].len());
            let in_borrow = rng.gen_bool(0.3);
            let clones = rng.gen_bool(mix.clones);
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
            let slot = rng.gen_range(0..self.roots.len());
            let id = self.roots[slot].1;
            self.record(Op::DropRoot { slot, id });
            drop(self.roots.swap_remove(slot));
        } else if is(mix.clone_root) {
            let Some(id) = self.pick_reachable(rng, &reach) else {
                return;
            };
            let clones = rng.gen_bool(mix.clones);
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
            let keep = rng.gen_bool(0.3);
            let clones = rng.gen_bool(mix.clones);
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
            let mutable = rng.gen_bool(0.5);
            let slot = rng.gen_range(0..self.roots.len());
            let collect = rng.gen_bool(0.5).then(|| rng.gen_bool(0.5));
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
        } else {
            let policy = [Policy::Adaptive, Policy::Nim16, Policy::Manual][rng.gen_range(0..3)];
            self.record(Op::SetPolicy(policy));
            recycler::set_policy(policy);
        }
    }

    fn weak_op(&mut self, rng: &mut SmallRng, reach: &Reach, plan: &Plan) {
        match rng.gen_range(0..3) {
            0 if self.weaks.len() < 8 => {
                let Some(id) = self.pick_reachable(rng, reach) else {
                    return;
                };
                self.record(Op::Downgrade { id });
                let weak = self.with_node(reach, id, rng.gen_bool(plan.mix.clones), Gc::downgrade);
                self.weaks.push((weak, id));
            }
            1 if !self.weaks.is_empty() => {
                // Upgrading a node that is unreachable but not yet collected
                // makes it reachable again, as with `std::rc`.
                let slot = rng.gen_range(0..self.weaks.len());
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
                let slot = rng.gen_range(0..self.weaks.len());
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
    fn ring(&mut self, rng: &mut SmallRng, reach: &Reach, plan: &Plan) {
        let len = rng.gen_range(1..=6);
        let from = rng
            .gen_bool(0.4)
            .then(|| self.pick_reachable(rng, reach))
            .flatten();
        let to = rng
            .gen_bool(0.4)
            .then(|| self.pick_reachable(rng, reach))
            .flatten();
        let keep = rng.gen_bool(0.3).then(|| rng.gen_range(0..len));
        let clones = rng.gen_bool(plan.mix.clones);
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
    fn promote_first(&mut self, rng: &mut SmallRng, plan: &Plan) {
        let build = Mix {
            new: 3,
            link: 5,
            drop_root: 1,
            clone_root: 1,
            ring: 1,
            ..Mix::none(plan.mix.clones)
        };
        let steps = rng.gen_range(4..16);
        self.phase(rng, plan, build, steps);
        self.record(Op::BufferRoots);
        for (root, _) in &self.roots {
            drop(root.clone());
        }
        let first = recycler::stats().collections() == 0;
        let full = rng.gen_bool(0.5);
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
    fn phase(&mut self, rng: &mut SmallRng, plan: &Plan, mix: Mix, steps: usize) {
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
    fn across_generations(&mut self, rng: &mut SmallRng, plan: &Plan) {
        let clones = plan.mix.clones;
        let old: Vec<usize> = self.reach().order;
        if old.is_empty() {
            return;
        }
        let first_young = self.created();
        for _ in 0..rng.gen_range(1..=4) {
            let reach = self.reach();
            let young = self.create();
            let id = young.id;
            self.roots.push((young, id));
            let target = old[rng.gen_range(0..old.len())];
            if reach.reachable(target) {
                let via = rng.gen_bool(clones);
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
        for _ in 0..rng.gen_range(1..=4) {
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
            let from = old_reachable[rng.gen_range(0..old_reachable.len())];
            let to = self.roots[rng.gen_range(0..self.roots.len())].1;
            let via = rng.gen_bool(clones);
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
            let slot = rng.gen_range(0..self.roots.len());
            let id = self.roots[slot].1;
            self.record(Op::DropRoot { slot, id });
            drop(self.roots.swap_remove(slot));
            self.settle(false);
            if rng.gen_bool(0.5) {
                self.record(Op::CollectMinor);
                self.collect_minor();
                self.settle(false);
            }
        }
        if rng.gen_bool(0.8) {
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

    fn run(&mut self, rng: &mut SmallRng, plan: &Plan) {
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

/// A family of cases: a name (for replay) and how to draw a plan.
struct Family {
    name: &'static str,
    cases: usize,
    plan: fn(&mut SmallRng) -> Plan,
}

const MIRI: bool = cfg!(miri);

fn steps(rng: &mut SmallRng, native: std::ops::Range<usize>) -> usize {
    if MIRI {
        rng.gen_range(10..30)
    } else {
        rng.gen_range(native)
    }
}

fn max_nodes(rng: &mut SmallRng, native: std::ops::Range<usize>) -> usize {
    if MIRI {
        rng.gen_range(4..12)
    } else {
        rng.gen_range(native)
    }
}

/// SplitMix64: a case's seed from the family's and the case number.
fn mix_seed(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn family_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn parse_seed(text: &str) -> u64 {
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|_| {
        panic!("RECYCLER_DIFF_SEED must be a u64 (decimal or 0x hex), got {text:?}")
    })
}

/// Runs one case on a fresh thread (fresh collector state); on failure,
/// reports the seed and the last operations and fails the test.
fn run_case(family: &Family, seed: u64) -> Coverage {
    let plan_of = family.plan;
    let name = family.name;
    let result = std::thread::spawn(move || {
        let mut rng = SmallRng::seed_from_u64(seed);
        let plan = plan_of(&mut rng);
        let mut world = World::new();
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| world.run(&mut rng, &plan)));
        match outcome {
            Ok(()) => world.coverage,
            Err(payload) => {
                eprintln!(
                    "differential case failed: family `{name}`, seed {seed:#018x}\n\
                     replay: RECYCLER_DIFF_SEED={seed:#x} cargo test -p recycler --test differential {name}\n\
                     plan: {plan:?}\nlast operations (oldest first):"
                );
                for op in &world.log {
                    eprintln!("  {op:?}");
                }
                // Leak the handles: dropping them could panic again.
                std::mem::forget(world);
                panic::resume_unwind(payload)
            }
        }
    })
    .join();
    match result {
        Ok(coverage) => coverage,
        Err(_) => {
            panic!("differential case failed: family `{name}`, seed {seed:#018x} (see above)")
        }
    }
}

/// Runs a family's cases (or only `RECYCLER_DIFF_SEED`) and returns what they
/// covered.
fn run_family(family: Family) -> Coverage {
    let mut total = Coverage::default();
    if let Ok(seed) = std::env::var("RECYCLER_DIFF_SEED") {
        total += run_case(&family, parse_seed(&seed));
        return total;
    }
    let scale = std::env::var("RECYCLER_DIFF_SCALE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(1);
    let base = family_seed(family.name);
    let cases = if MIRI { 8 } else { family.cases * scale };
    for i in 0..cases {
        total += run_case(&family, mix_seed(base ^ i as u64));
    }
    eprintln!("{}: {total:?}", family.name);
    total
}

/// Whether the run is big enough to insist on coverage (not a single
/// replayed seed, not the few cases run under Miri).
fn full_run(coverage: &Coverage) -> bool {
    coverage.cases >= 50
}

#[test]
fn adaptive_default() {
    let coverage = run_family(Family {
        name: "adaptive_default",
        cases: 1000,
        plan: |rng| Plan {
            policy: Policy::Adaptive,
            adaptive: None,
            mix: Mix::random(rng),
            steps: steps(rng, 20..150),
            max_nodes: max_nodes(rng, 4..60),
            promote_first: rng.gen_bool(0.3),
            across_generations: false,
        },
    });
    if full_run(&coverage) {
        assert!(coverage.freed_by_collector > 0, "{coverage:?}");
        assert!(coverage.old_freed_by_full > 0, "{coverage:?}");
    }
}

#[test]
fn adaptive_eager() {
    // Tiny thresholds: automatic minor and full collections all the time.
    let coverage = run_family(Family {
        name: "adaptive_eager",
        cases: 1200,
        plan: |rng| {
            let fractions = [0.0, 0.25, 1.0, 4.0];
            let config = AdaptiveConfig::default()
                .min_roots(rng.gen_range(1..=8))
                .full_fraction(fractions[rng.gen_range(0..fractions.len())]);
            Plan {
                policy: Policy::Adaptive,
                adaptive: Some(config),
                mix: Mix::random(rng),
                steps: steps(rng, 20..150),
                max_nodes: max_nodes(rng, 4..60),
                promote_first: rng.gen_bool(0.3),
                across_generations: false,
            }
        },
    });
    if full_run(&coverage) {
        assert!(coverage.automatic_collections > 0, "{coverage:?}");
        assert!(coverage.borrowed_collections > 0, "{coverage:?}");
        assert!(coverage.old_freed_by_full > 0, "{coverage:?}");
    }
}

#[test]
fn cross_generation() {
    // Nodes promoted first, then linked into cycles with young nodes and
    // dropped, with minor collections in between.
    let coverage = run_family(Family {
        name: "cross_generation",
        cases: 1200,
        plan: |rng| {
            let mut mix = Mix::random(rng);
            mix.cross_link = rng.gen_range(4..10);
            mix.collect_minor = rng.gen_range(2..8);
            mix.collect = rng.gen_range(1..4);
            let config = rng
                .gen_bool(0.5)
                .then(|| AdaptiveConfig::default().min_roots(rng.gen_range(1..=16)));
            Plan {
                policy: Policy::Adaptive,
                adaptive: config,
                mix,
                steps: steps(rng, 10..100),
                max_nodes: max_nodes(rng, 8..60),
                promote_first: true,
                across_generations: true,
            }
        },
    });
    if full_run(&coverage) {
        assert!(coverage.old_freed_by_full > 0, "{coverage:?}");
    }
}

#[test]
fn nim16() {
    // Rings of garbage pile up roots until Nim's threshold (128, down to 16)
    // triggers collections.
    let coverage = run_family(Family {
        name: "nim16",
        cases: 500,
        plan: |rng| {
            let mut mix = Mix::random(rng);
            mix.ring = rng.gen_range(4..12);
            if rng.gen_bool(0.5) {
                mix.collect = 0;
                mix.collect_minor = 0;
            }
            Plan {
                policy: Policy::Nim16,
                adaptive: None,
                mix,
                steps: steps(rng, 50..250),
                max_nodes: max_nodes(rng, 100..400),
                promote_first: rng.gen_bool(0.2),
                across_generations: false,
            }
        },
    });
    if full_run(&coverage) {
        assert!(coverage.automatic_collections > 0, "{coverage:?}");
    }
}

#[test]
fn manual() {
    let coverage = run_family(Family {
        name: "manual",
        cases: 800,
        plan: |rng| Plan {
            policy: Policy::Manual,
            adaptive: None,
            mix: Mix::random(rng),
            steps: steps(rng, 20..150),
            max_nodes: max_nodes(rng, 4..60),
            promote_first: rng.gen_bool(0.2),
            across_generations: false,
        },
    });
    assert_eq!(
        coverage.automatic_collections, 0,
        "Manual never collects by itself"
    );
    if full_run(&coverage) {
        assert!(coverage.freed_by_collector > 0, "{coverage:?}");
    }
}

#[test]
fn policy_switches() {
    // The policy changes at random points, with old objects around.
    let coverage = run_family(Family {
        name: "policy_switches",
        cases: 800,
        plan: |rng| {
            let mut mix = Mix::random(rng);
            mix.set_policy = rng.gen_range(1..4);
            Plan {
                policy: Policy::Adaptive,
                adaptive: Some(AdaptiveConfig::default().min_roots(rng.gen_range(1..=32))),
                mix,
                steps: steps(rng, 20..150),
                max_nodes: max_nodes(rng, 4..80),
                promote_first: rng.gen_bool(0.5),
                across_generations: false,
            }
        },
    });
    if full_run(&coverage) {
        assert!(coverage.automatic_collections > 0, "{coverage:?}");
    }
}
