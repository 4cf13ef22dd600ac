//! A program of graph operations on `recycler::sync::Gc`, decoded from bytes
//! and run on two or three threads at once, checked against what the
//! collector promises. Shared by the fuzz target
//! `fuzz/fuzz_targets/sync_graph.rs` and the test `tests/sync_fuzz_inputs.rs`
//! (which replays the fuzz corpus on stable).
//!
//! # Program
//! The first byte gives the number of threads (2 or 3) and whether injected
//! panics are allowed. Then each operation is one byte — its low bits name
//! the thread that runs it, the rest the operation — followed by its
//! operands (one byte each). `Phase` ends a phase. Each thread runs its own
//! operations of the phase in order, all threads at once; handles travel
//! between threads through shared slots (`Put`/`Take`). The interleaving of
//! the threads is the scheduler's, so the same input does not always run
//! the same way; each thread's own sequence, and every check below, are the
//! same.
//!
//! # Checks
//! * Every access to a node (deref through a handle, a walk along edges, an
//!   upgrade) asserts that its value was not dropped, and a value is never
//!   dropped twice.
//! * A thread that holds a strong handle to a node can upgrade its `Weak`s to
//!   that node.
//! * At the end of every phase the threads wait; the checker disarms the
//!   injected panics and collects (twice: a pass may leave garbage that a
//!   destructor released for the next one), then asserts that the dropped
//!   nodes are *exactly* the ones unreachable from the threads' roots and the
//!   slots, and that each reachable node's strong count is its number of
//!   handles (roots, slots, edges from reachable nodes). At the end every
//!   handle is dropped and, after a collection, every node must be dropped.
//!
//! # Injected panics
//! `PanicDrop` arms a node so that its next `Drop` panics; `PanicTrace`
//! makes one of the next `trace` calls panic and collects. Each operation
//! runs under `catch_unwind`, which accepts only the [`Injected`] payload. A
//! panicking `Drop` may fire on whichever thread drops the node (a counting
//! drop, or a collection on any thread); inside an explicit collection it
//! panics even while the thread unwinds, so a collector that drops a value
//! during unwinding aborts the run (see `injected.rs`). Allowed only with
//! [`Options::panics`] (issue 12, defects 3 and 4: the sync collector does
//! not yet keep its guarantees there).

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex};

use recycler::sync::{self, Gc, Weak};
use recycler::{Policy, Trace, Tracer};

/// At most this many nodes per program.
const MAX_NODES: usize = 96;
/// Shared slots through which handles move between threads.
const SLOTS: usize = 4;
/// At most this many operations per program (fuzz inputs are short anyway).
const MAX_OPS: usize = 4096;

#[path = "injected.rs"]
mod injected;

pub use injected::quiet_injected_panics;
use injected::{caught, collecting, inject};

/// What the nodes of one program share.
struct Flags {
    dropped: Vec<AtomicBool>,
    panic_on_drop: Vec<AtomicBool>,
    /// `n > 0`: the `n`-th `trace` call from now (on any thread) panics.
    trace_panic_in: AtomicUsize,
}

pub struct Node {
    id: usize,
    edges: Mutex<Vec<Gc<Node>>>,
    flags: Arc<Flags>,
}

impl Node {
    /// Asserts that the value is still there.
    fn check(&self) -> &Node {
        assert!(
            !self.flags.dropped[self.id].load(SeqCst),
            "node {} used after its value was dropped",
            self.id
        );
        self
    }

    fn edges(&self) -> std::sync::MutexGuard<'_, Vec<Gc<Node>>> {
        // A lock poisoned by an injected panic is still consistent: every
        // operation on it is a single push or remove.
        self.check()
            .edges
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let was = self.flags.dropped[self.id].swap(true, SeqCst);
        assert!(!was, "node {} dropped twice", self.id);
        if self.flags.panic_on_drop[self.id].swap(false, SeqCst) {
            inject();
        }
    }
}

// SAFETY: reports each owned `Gc` once, through the `Mutex` impl (which hands
// the guard to the collector). The injected panic reports nothing.
unsafe impl Trace for Node {
    fn trace(&self, tracer: &mut Tracer<'_>) {
        let countdown = &self.flags.trace_panic_in;
        let fire = countdown
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok_and(|n| n == 1);
        if fire {
            inject();
        }
        self.edges.trace(tracer);
    }
}

/// One operation of a thread (operands are raw bytes, reduced modulo the
/// current sizes when run).
#[derive(Clone, Copy, Debug)]
enum Op {
    New,
    /// `roots[a]` gets an edge to `roots[b]`.
    Link(u8, u8),
    /// `roots[a]` loses an edge, kept as a root if `keep`.
    Unlink(u8, u8, bool),
    DropRoot(u8),
    /// Follows up to three edges from `roots[a]`; keeps the end if `keep`.
    Walk(u8, u8, bool),
    /// `roots[a]` moves into slot `s` (whatever was there is dropped).
    Put(u8, u8),
    /// Slot `s`'s handle (if any) becomes a root.
    Take(u8),
    Downgrade(u8),
    Upgrade(u8),
    DropWeak(u8),
    Collect,
    /// `roots[a]`'s edges stay locked during a collection (and an edge is
    /// dropped while locked if `drop_edge`).
    CollectLocked(u8, bool),
    /// Exclusive access through `Gc::get_mut` moves an edge to the roots.
    GetMut(u8),
    /// `Gc::try_unwrap` on a root.
    TryUnwrap(u8),
    SetPolicy(u8),
    /// The node of `roots[a]` panics when dropped; the root is dropped.
    PanicDrop(u8),
    /// The `n`-th trace call from now panics; then a collection.
    PanicTrace(u8),
}

const OPS: u8 = 17;

/// Which operations a program may use.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// `PanicDrop` and `PanicTrace`.
    pub panics: bool,
}

/// A decoded program: per phase, per thread, the operations.
#[derive(Debug)]
struct Program {
    threads: usize,
    phases: Vec<Vec<Vec<Op>>>,
}

fn decode(data: &[u8], options: Options) -> Program {
    let mut bytes = data.iter().copied();
    let mut next = || bytes.next().unwrap_or(0);
    let threads = 2 + (next() % 2) as usize;
    let mut phases = vec![vec![Vec::new(); threads]];
    let mut ops = 0;
    let mut rest = data.len().saturating_sub(1);
    while rest > 0 && ops < MAX_OPS {
        let byte = next();
        let thread = byte as usize % threads;
        let kind = (byte / 3) % (OPS + 1);
        let before = rest;
        let mut operand = || {
            rest = rest.saturating_sub(1);
            next()
        };
        let op = match kind {
            0 => Op::New,
            1 => Op::Link(operand(), operand()),
            2 => Op::Unlink(operand(), operand(), operand() & 1 == 1),
            3 => Op::DropRoot(operand()),
            4 => Op::Walk(operand(), operand(), operand() & 1 == 1),
            5 => Op::Put(operand(), operand()),
            6 => Op::Take(operand()),
            7 => Op::Downgrade(operand()),
            8 => Op::Upgrade(operand()),
            9 => Op::DropWeak(operand()),
            10 => Op::Collect,
            11 => Op::CollectLocked(operand(), operand() & 1 == 1),
            12 => Op::GetMut(operand()),
            13 => Op::TryUnwrap(operand()),
            14 => Op::SetPolicy(operand()),
            15 if options.panics => Op::PanicDrop(operand()),
            16 if options.panics => Op::PanicTrace(operand()),
            15 | 16 => Op::New,
            _ => {
                phases.push(vec![Vec::new(); threads]);
                rest = before - 1;
                continue;
            }
        };
        rest = rest.saturating_sub(1);
        phases.last_mut().unwrap()[thread].push(op);
        ops += 1;
    }
    Program { threads, phases }
}

/// The shared state of a running program.
struct World {
    flags: Arc<Flags>,
    created: AtomicUsize,
    /// Each thread's roots (behind a lock so that the checker can read them
    /// while the threads wait).
    roots: Vec<Mutex<Vec<Gc<Node>>>>,
    weaks: Vec<Mutex<Vec<Weak<Node>>>>,
    slots: Mutex<Vec<Option<Gc<Node>>>>,
    /// Operations that ended in an injected panic.
    injected: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn index(byte: u8, len: usize) -> Option<usize> {
    (len > 0).then(|| byte as usize % len)
}

impl World {
    fn new_node(&self) -> Option<Gc<Node>> {
        let id = self.created.fetch_add(1, SeqCst);
        (id < MAX_NODES).then(|| {
            Gc::new(Node {
                id,
                edges: Mutex::new(Vec::new()),
                flags: self.flags.clone(),
            })
        })
    }

    /// Runs one operation of thread `me`. Handles leave `roots` before they
    /// are dropped, so an injected panic never leaves a dangling entry.
    fn run(&self, me: usize, op: Op) {
        let mut roots = lock(&self.roots[me]);
        let mut weaks = lock(&self.weaks[me]);
        match op {
            Op::New => {
                if let Some(node) = self.new_node() {
                    roots.push(node);
                }
            }
            Op::Link(a, b) => {
                if let (Some(a), Some(b)) = (index(a, roots.len()), index(b, roots.len())) {
                    roots[b].check();
                    let handle = roots[b].clone();
                    roots[a].edges().push(handle);
                }
            }
            Op::Unlink(a, e, keep) => {
                if let Some(a) = index(a, roots.len()) {
                    let removed = {
                        let mut edges = roots[a].edges();
                        index(e, edges.len()).map(|e| edges.remove(e))
                    };
                    if let Some(removed) = removed {
                        removed.check();
                        if keep {
                            roots.push(removed);
                        }
                    }
                }
            }
            Op::DropRoot(a) => {
                if let Some(a) = index(a, roots.len()) {
                    drop(roots.swap_remove(a));
                }
            }
            Op::Walk(a, path, keep) => {
                if let Some(a) = index(a, roots.len()) {
                    let mut at = roots[a].clone();
                    for step in 0..3 {
                        let choice = (path >> (2 * step)) & 3;
                        let next = {
                            let edges = at.edges();
                            index(choice, edges.len()).map(|e| edges[e].clone())
                        };
                        match next {
                            Some(next) => at = next,
                            None => break,
                        }
                    }
                    at.check();
                    if keep {
                        roots.push(at);
                    }
                }
            }
            Op::Put(a, s) => {
                if let Some(a) = index(a, roots.len()) {
                    let handle = roots.swap_remove(a);
                    let old = lock(&self.slots)[s as usize % SLOTS].replace(handle);
                    drop(old);
                }
            }
            Op::Take(s) => {
                let taken = lock(&self.slots)[s as usize % SLOTS].take();
                if let Some(handle) = taken {
                    handle.check();
                    roots.push(handle);
                }
            }
            Op::Downgrade(a) => {
                if let Some(a) = index(a, roots.len()) {
                    if weaks.len() < 8 {
                        weaks.push(Gc::downgrade(&roots[a]));
                    }
                }
            }
            Op::Upgrade(w) => {
                if let Some(w) = index(w, weaks.len()) {
                    let held = roots
                        .iter()
                        .any(|root| Weak::ptr_eq(&Gc::downgrade(root), &weaks[w]));
                    match weaks[w].upgrade() {
                        Some(handle) => {
                            handle.check();
                            roots.push(handle);
                        }
                        None => assert!(!held, "a Weak to a node this thread holds failed"),
                    }
                }
            }
            Op::DropWeak(w) => {
                if let Some(w) = index(w, weaks.len()) {
                    drop(weaks.swap_remove(w));
                }
            }
            Op::Collect => {
                drop((roots, weaks));
                collecting(sync::collect);
            }
            Op::CollectLocked(a, drop_edge) => {
                if let Some(a) = index(a, roots.len()) {
                    let node = roots[a].clone();
                    drop((roots, weaks));
                    let mut edges = node.edges();
                    if drop_edge {
                        drop(edges.pop());
                    }
                    collecting(sync::collect);
                }
            }
            Op::GetMut(a) => {
                if let Some(a) = index(a, roots.len()) {
                    let moved = Gc::get_mut(&mut roots[a]).and_then(|node| {
                        node.edges
                            .get_mut()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .pop()
                    });
                    if let Some(moved) = moved {
                        moved.check();
                        roots.push(moved);
                    }
                }
            }
            Op::TryUnwrap(a) => {
                if let Some(a) = index(a, roots.len()) {
                    let handle = roots.swap_remove(a);
                    if let Err(handle) = Gc::try_unwrap(handle) {
                        roots.push(handle);
                    }
                }
            }
            Op::SetPolicy(p) => {
                sync::set_policy([Policy::Adaptive, Policy::Nim16, Policy::Manual][p as usize % 3]);
            }
            Op::PanicDrop(a) => {
                if let Some(a) = index(a, roots.len()) {
                    let handle = roots.swap_remove(a);
                    self.flags.panic_on_drop[handle.id].store(true, SeqCst);
                    drop(handle);
                }
            }
            Op::PanicTrace(n) => {
                drop((roots, weaks));
                self.flags.trace_panic_in.store(1 + n as usize % 8, SeqCst);
                collecting(sync::collect);
            }
        }
    }

    /// Runs one operation under `catch_unwind`: an injected panic is
    /// counted, anything else re-raised.
    fn run_caught(&self, me: usize, op: Op) {
        if caught(|| self.run(me, op)) {
            self.injected.fetch_add(1, SeqCst);
        }
    }

    /// Between phases, with every thread waiting: see the module docs.
    fn check_quiescent(&self) {
        for armed in &self.flags.panic_on_drop {
            armed.store(false, SeqCst);
        }
        self.flags.trace_panic_in.store(0, SeqCst);
        sync::collect();
        sync::collect();
        let created = self.created.load(SeqCst).min(MAX_NODES);
        let mut handles: Vec<Gc<Node>> = Vec::new();
        for roots in &self.roots {
            handles.extend(lock(roots).iter().cloned());
        }
        handles.extend(lock(&self.slots).iter().flatten().cloned());
        // Handles per node: the stack and slot handles (the clones above
        // add one each) and the edges of reachable nodes.
        let mut expected = vec![0usize; created];
        let mut reachable = vec![false; created];
        let mut stack = Vec::new();
        for handle in &handles {
            expected[handle.id] += 2;
            stack.push(handle.clone());
        }
        while let Some(node) = stack.pop() {
            if std::mem::replace(&mut reachable[node.id], true) {
                continue;
            }
            for edge in node.edges().iter() {
                expected[edge.id] += 1;
                stack.push(edge.clone());
            }
        }
        for (id, &reachable) in reachable.iter().enumerate() {
            let dropped = self.flags.dropped[id].load(SeqCst);
            assert_eq!(
                dropped, !reachable,
                "node {id}: reachable {reachable}, dropped {dropped}"
            );
        }
        let mut seen = vec![false; created];
        for handle in &handles {
            if !std::mem::replace(&mut seen[handle.id], true) {
                // The walk's own clones are gone; the `handles` clones remain.
                assert_eq!(
                    Gc::strong_count(handle),
                    expected[handle.id],
                    "strong count of node {}",
                    handle.id
                );
            }
        }
        for weaks in &self.weaks {
            for weak in lock(weaks).iter() {
                let alive = weak.strong_count() > 0;
                let target = weak.upgrade();
                assert_eq!(alive, target.is_some(), "a Weak's strong count and upgrade");
                if let Some(target) = target {
                    assert!(reachable[target.id], "a Weak upgraded to a dropped node");
                }
            }
        }
    }
}

/// Runs a program decoded from `data`; returns how many operations ended in
/// an injected panic. Panics (on some thread, then here) if a check fails.
pub fn run_input(data: &[u8], options: Options) -> usize {
    let program = decode(data, options);
    let threads = program.threads;
    let world = Arc::new(World {
        flags: Arc::new(Flags {
            dropped: (0..MAX_NODES).map(|_| AtomicBool::new(false)).collect(),
            panic_on_drop: (0..MAX_NODES).map(|_| AtomicBool::new(false)).collect(),
            trace_panic_in: AtomicUsize::new(0),
        }),
        created: AtomicUsize::new(0),
        roots: (0..threads).map(|_| Mutex::new(Vec::new())).collect(),
        weaks: (0..threads).map(|_| Mutex::new(Vec::new())).collect(),
        slots: Mutex::new((0..SLOTS).map(|_| None).collect()),
        injected: AtomicUsize::new(0),
    });
    let program = Arc::new(program);
    // Workers and the checker meet twice per phase: after the phase's
    // operations, and after the check.
    let barrier = Arc::new(Barrier::new(threads + 1));
    let failed = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|me| {
            let (world, program, barrier, failed) = (
                world.clone(),
                program.clone(),
                barrier.clone(),
                failed.clone(),
            );
            std::thread::spawn(move || {
                for phase in &program.phases {
                    if !failed.load(SeqCst) {
                        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
                            for &op in &phase[me] {
                                world.run_caught(me, op);
                            }
                        }));
                        if outcome.is_err() {
                            failed.store(true, SeqCst);
                        }
                    }
                    barrier.wait();
                    barrier.wait();
                }
                // The thread's buffers and roots go before it exits.
                lock(&world.roots[me]).clear();
                lock(&world.weaks[me]).clear();
            })
        })
        .collect();
    let mut check_failed = None;
    for _ in &program.phases {
        barrier.wait();
        if !failed.load(SeqCst) && check_failed.is_none() {
            check_failed = panic::catch_unwind(AssertUnwindSafe(|| world.check_quiescent())).err();
            if check_failed.is_some() {
                failed.store(true, SeqCst);
            }
        }
        barrier.wait();
    }
    for worker in workers {
        worker.join().expect("a worker thread panicked");
    }
    if let Some(payload) = check_failed {
        panic::resume_unwind(payload);
    }
    assert!(!failed.load(SeqCst), "a worker failed a check (see above)");
    // Teardown: everything goes.
    for slot in lock(&world.slots).iter_mut() {
        drop(slot.take());
    }
    sync::collect();
    sync::collect();
    let created = world.created.load(SeqCst).min(MAX_NODES);
    for id in 0..created {
        assert!(
            world.flags.dropped[id].load(SeqCst),
            "node {id} survived the teardown"
        );
    }
    world.injected.load(SeqCst)
}
