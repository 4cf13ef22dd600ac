//! The concurrent cycle collector: trial deletion on a private snapshot,
//! then per-component validation before anything is freed.
//!
//! See the [module documentation](super) for the soundness argument. In
//! order, one collection:
//!
//! 1. **Drain** every thread's buffer. Each armed entry of a live object
//!    becomes a *hold* (a strong reference owned by the collector) whose
//!    resulting header word is the object's snapshot `W`.
//! 2. **Trace** breadth-first from the roots. Each object is traced with its
//!    cells locked (guards kept in a sink) and a hold is taken on every
//!    newly seen target *before* the guards are released, so the collector
//!    owns a strong reference to everything it has seen and never reads a
//!    value whose last handle is being dropped or that someone has `&mut` to.
//! 3. **Trial deletion** on private counts (`count(W) - 1` minus internal
//!    edges); everything reachable from a node with a positive trial count,
//!    a cell that could not be locked, or an inconsistent (negative) count is
//!    live. The rest is the candidate garbage.
//! 4. **Validate each weakly connected component** of the candidate garbage:
//!    lock all of its cells at once and re-trace it; with every lock held,
//!    check that each member's snapshot count is exactly its internal
//!    in-degree (plus the hold). Release the locks, then CAS every member's
//!    word from `W` to `W | CLAIMED`; if all succeed, set `DOOMED`. Any
//!    failure unclaims, buffers the members again and leaves them for later.
//! 5. **Free** the doomed members: mark them dead, drop every value (a panic
//!    is kept and re-raised at the end), mark them `GONE`, release the holds.
//! 6. Release the holds on everything else.

use core::ptr::NonNull;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use super::header::{count, Drained, Header, CLAIMED, DOOMED, GONE};
use super::state::{global, push_root_quietly, Entry, Global};
use crate::trace::{Family, HeldGuard, Tracer};

/// One object the collector holds.
struct Node {
    header: NonNull<Header>,
    /// The header word right after our hold: the Δ-test snapshot.
    word: u64,
    /// Range of this node's out-edges in `Graph::edges`.
    edges: (usize, usize),
    /// A cell could not be inspected.
    kept: bool,
    /// Our hold has been released.
    released: bool,
}

/// The private graph: the held objects and their traced edges.
#[derive(Default)]
struct Graph {
    nodes: Vec<Node>,
    index: HashMap<NonNull<Header>, usize>,
    edges: Vec<usize>,
}

impl Graph {
    fn add(&mut self, header: NonNull<Header>, word: u64) -> usize {
        let i = self.nodes.len();
        self.nodes.push(Node {
            header,
            word,
            edges: (0, 0),
            kept: false,
            released: false,
        });
        self.index.insert(header, i);
        i
    }

    /// Releases our hold on node `i` (may drop its value if it was the last
    /// reference).
    fn release(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        if !node.released {
            node.released = true;
            // SAFETY: the hold is a strong reference we own.
            unsafe { Header::dec_strong(node.header) };
        }
    }
}

impl Drop for Graph {
    /// Releases whatever holds remain (also when a `Trace` impl panicked).
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.release(i);
        }
    }
}

/// Traces the value of `header` into `edges`, keeping cell guards in
/// `guards`. Returns whether a cell could not be inspected.
///
/// # Safety
/// The collector holds `header` (so its value is alive and not `&mut`
/// borrowed), and keeps holding it until `guards` is emptied.
unsafe fn trace_into(
    header: NonNull<Header>,
    edges: &mut Vec<NonNull<()>>,
    guards: &mut Vec<Box<dyn HeldGuard>>,
) -> bool {
    let mut tracer = Tracer::with_guards(Family::Sync, edges, guards);
    // SAFETY: forwarded contract.
    unsafe { (header.as_ref().vtable.trace)(header, &mut tracer) };
    tracer.kept_alive()
}

/// Runs one collection if no other is running. Returns `(freed, traced)`.
pub(crate) fn try_collect() -> Option<(usize, usize)> {
    let global = global();
    let _lock = global.try_collector()?;
    Some(collect_locked(global))
}

/// One collection; the caller holds the collector lock.
fn collect_locked(global: &Global) -> (usize, usize) {
    let start = std::time::Instant::now();
    let mut graph = Graph::default();

    // 1. Drain.
    let mut entries = Vec::new();
    global.drain_all(&mut entries);
    for Entry(header) in entries {
        // SAFETY: we own the entry.
        if let Drained::Held(word) = unsafe { Header::drain(header) } {
            graph.add(header, word);
        }
    }

    // 2. Trace, holding every target before the source's cells unlock.
    let mut scratch = Vec::new();
    let mut i = 0;
    while i < graph.nodes.len() {
        let header = graph.nodes[i].header;
        let mut guards = Vec::new();
        scratch.clear();
        // SAFETY: we hold `header` until the graph is dropped, after `guards`.
        let kept = unsafe { trace_into(header, &mut scratch, &mut guards) };
        let first = graph.edges.len();
        for target in scratch.drain(..) {
            let target = target.cast::<Header>();
            let j = match graph.index.get(&target) {
                Some(&j) => j,
                // SAFETY: the handle that reported `target` is pinned in
                // place (locked cell or held object), so the header is alive.
                None => match unsafe { target.as_ref() }.hold() {
                    Some(word) => graph.add(target, word),
                    None => continue, // doomed: a dead handle, not an edge
                },
            };
            graph.edges.push(j);
        }
        drop(guards);
        let node = &mut graph.nodes[i];
        node.edges = (first, graph.edges.len());
        node.kept = kept;
        i += 1;
    }
    let traced = graph.nodes.len();

    // 3. Trial deletion on private counts.
    let n = traced;
    let mut trial: Vec<i64> = graph
        .nodes
        .iter()
        .map(|node| count(node.word) as i64 - 1)
        .collect();
    for &j in &graph.edges {
        trial[j] -= 1;
    }
    let mut live = vec![false; n];
    let mut stack: Vec<usize> = (0..n)
        .filter(|&i| trial[i] != 0 || graph.nodes[i].kept)
        .collect();
    for &i in &stack {
        live[i] = true;
        if graph.nodes[i].kept || trial[i] < 0 {
            // Opaque right now (a locked cell) or seen inconsistently while
            // it changed: not known to be live, so look again next time.
            rebuffer(&graph, i);
        }
    }
    while let Some(i) = stack.pop() {
        let (a, b) = graph.nodes[i].edges;
        for &j in &graph.edges[a..b] {
            if !live[j] {
                live[j] = true;
                stack.push(j);
            }
        }
    }

    // 4. Components of the candidate garbage (union-find), then validation.
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for i in (0..n).filter(|&i| !live[i]) {
        let (a, b) = graph.nodes[i].edges;
        for k in a..b {
            let j = graph.edges[k];
            if !live[j] {
                let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                parent[ri] = rj;
            }
        }
    }
    let mut components: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in (0..n).filter(|&i| !live[i]) {
        let root = find(&mut parent, i);
        components.entry(root).or_default().push(i);
    }
    let mut doomed = Vec::new();
    let mut member_of = vec![usize::MAX; n];
    for (root, members) in components {
        for &m in &members {
            member_of[m] = root;
        }
        if validate(&graph, &members, root, &member_of) {
            doomed.extend_from_slice(&members);
        } else {
            for &m in &members {
                rebuffer(&graph, m);
            }
        }
    }

    // 5. Free the doomed: dead first, then drop every value, then memory.
    for &m in &doomed {
        // SAFETY: validation proved that no other thread can reach `m`
        // (module docs), so nobody reads the flag concurrently.
        unsafe { graph.nodes[m].header.as_ref().dead.set() };
    }
    let mut panic = None;
    for &m in &doomed {
        let header = graph.nodes[m].header;
        // SAFETY: doomed and held: the value is alive and ours alone.
        let result = catch_unwind(AssertUnwindSafe(|| unsafe {
            (header.as_ref().vtable.drop_value)(header)
        }));
        if let Err(payload) = result {
            panic.get_or_insert(payload);
        }
        // SAFETY: still held.
        unsafe { header.as_ref() }.word.fetch_or(GONE, Release);
    }
    let freed = doomed.len();
    global.freed_by_collector.fetch_add(freed as u64, Relaxed);
    for &m in &doomed {
        graph.release(m);
    }

    // 6. Everything else.
    drop(graph);

    let pause = start.elapsed().as_nanos() as u64;
    global.collections.fetch_add(1, Relaxed);
    global.nodes_traced.fetch_add(traced as u64, Relaxed);
    global.last_traced.store(traced as u64, Relaxed);
    global.total_pause_ns.fetch_add(pause, Relaxed);
    global.max_pause_ns.fetch_max(pause, Relaxed);
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
    (freed, traced)
}

/// Buffers node `i` again (we hold it) so a later collection retries it.
fn rebuffer(graph: &Graph, i: usize) {
    let header = graph.nodes[i].header;
    // SAFETY: we hold `header`.
    if unsafe { header.as_ref() }.rebuffer() {
        push_root_quietly(Entry(header));
    }
}

/// Validates one candidate component and, on success, dooms it.
fn validate(graph: &Graph, members: &[usize], id: usize, member_of: &[usize]) -> bool {
    // Σ-test: all cells locked at once; every member's snapshot count must be
    // its internal in-degree plus our hold.
    let mut need: HashMap<usize, i64> = members
        .iter()
        .map(|&m| (m, count(graph.nodes[m].word) as i64 - 1))
        .collect();
    let mut guards = Vec::new();
    let mut edges = Vec::new();
    let mut closed = true;
    for &m in members {
        edges.clear();
        // SAFETY: `m` is held until the graph is dropped, after `guards`.
        if unsafe { trace_into(graph.nodes[m].header, &mut edges, &mut guards) } {
            closed = false;
            break;
        }
        for target in &edges {
            if let Some(&j) = graph.index.get(&target.cast::<Header>()) {
                if member_of[j] == id {
                    *need.get_mut(&j).expect("member") -= 1;
                }
            }
        }
    }
    closed = closed && need.values().all(|&k| k == 0);
    // t*: every cell of the component is locked right now.
    drop(guards);
    if !closed {
        return false;
    }

    // Δ-test: no clone, drop, upgrade or buffering happened on any member
    // since its snapshot, which covers t*.
    for (k, &m) in members.iter().enumerate() {
        let node = &graph.nodes[m];
        // SAFETY: held.
        let word = &unsafe { node.header.as_ref() }.word;
        if word
            .compare_exchange(node.word, node.word | CLAIMED, AcqRel, Acquire)
            .is_err()
        {
            for &undo in &members[..k] {
                // SAFETY: held.
                unsafe { graph.nodes[undo].header.as_ref() }
                    .word
                    .fetch_and(!CLAIMED, AcqRel);
            }
            return false;
        }
    }
    for &m in members {
        // SAFETY: held.
        unsafe { graph.nodes[m].header.as_ref() }
            .word
            .fetch_or(DOOMED, AcqRel);
    }
    true
}
