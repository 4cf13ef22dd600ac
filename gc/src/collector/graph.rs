//! One collection: Bacon–Rajan trial deletion on a side graph.
//!
//! The three steps of the paper, over all buffered roots at once:
//!
//! 1. **Mark** (MarkRoots / MarkGray): starting from the roots, trace every
//!    object reachable through collected pointers and record it as a node of a
//!    side graph, with its outgoing edges. Each value is traced exactly once.
//!    A node's *trial count* starts at its real strong count and loses one for
//!    every edge that points to it from inside the graph. Real counts are never
//!    touched: a panic half-way leaves the heap exactly as it was.
//! 2. **Scan** (ScanRoots / ScanBlack): a node whose trial count stays above
//!    zero is referenced from outside the graph (a stack handle, an untraced
//!    object, an old object in a minor collection); so is a node whose trace
//!    called [`Tracer::keep_alive`]. Those nodes and everything reachable from
//!    them in the graph are live.
//! 3. **Collect** (CollectWhite): every other node is garbage: all of its
//!    handles come from other garbage nodes.
//!
//! Work is O(nodes + edges), with an explicit work list instead of recursion.
//! In a minor collection old objects are not entered: an edge to an old
//! object is ignored, and the old object's count keeps that edge as an
//! external reference, which is always safe (it can only keep things alive).
//! Dead objects (values already dropped by an earlier collection) are leaves.

use core::ptr::NonNull;

use crate::header::{self, Header, DEAD, IN_GRAPH, OLD};
use crate::trace::{Family, Tracer};

/// A node of the side graph.
struct Node {
    object: NonNull<Header>,
    /// Strong count minus the edges from inside the graph.
    trial: isize,
    /// This node's edges are `edges[first_edge..end_edge]`.
    first_edge: usize,
    end_edge: usize,
    /// Reachable from outside the graph.
    live: bool,
    /// Its trace could not inspect everything ([`Tracer::keep_alive`]).
    opaque: bool,
}

/// Reusable buffers for collections (kept between collections to avoid
/// allocating on every run).
#[derive(Default)]
pub(crate) struct Graph {
    nodes: Vec<Node>,
    edges: Vec<usize>,
    scratch: Vec<NonNull<()>>,
    work: Vec<usize>,
}

/// What a collection found.
pub(crate) struct Verdict {
    /// Objects that are garbage; flagged `IN_GRAPH` no more.
    pub(crate) garbage: Vec<NonNull<Header>>,
    /// Objects traced (`touched`, in Nim's terms).
    pub(crate) traced: usize,
    /// Live young objects that this collection made old.
    pub(crate) promoted: usize,
    /// Objects kept alive only because their trace was incomplete; they are
    /// buffered again so that a later collection looks at them once more.
    pub(crate) retry: Vec<NonNull<Header>>,
}

/// Restores every node's header if a trace panics: clears `IN_GRAPH` and
/// hands the roots back so that they are buffered again.
struct Unmark<'a> {
    graph: &'a mut Graph,
    roots: usize,
    rebuffer: &'a mut dyn FnMut(NonNull<Header>),
}

impl Drop for Unmark<'_> {
    fn drop(&mut self) {
        for (i, node) in self.graph.nodes.drain(..).enumerate() {
            // SAFETY: nodes are live objects (a handle to each exists while
            // the collection runs, and nothing frees objects during marking).
            let h = unsafe { node.object.as_ref() };
            h.clear_flag(IN_GRAPH);
            if i < self.roots {
                (self.rebuffer)(node.object);
            }
        }
        self.graph.edges.clear();
        self.graph.scratch.clear();
        self.graph.work.clear();
    }
}

impl Graph {
    /// Runs mark, scan and collect-white from `roots`.
    ///
    /// `roots` must be live, alive (not `DEAD`) objects just taken out of the
    /// roots buffers (their `BUFFERED` flag cleared). If a trace panics, every
    /// root is passed to `rebuffer`, every flag restored, and the panic
    /// propagates.
    pub(crate) fn collect(
        &mut self,
        roots: &[NonNull<Header>],
        minor: bool,
        promote: bool,
        rebuffer: &mut dyn FnMut(NonNull<Header>),
    ) -> Verdict {
        for &root in roots {
            self.add_node(root);
        }
        let unmark = Unmark {
            graph: self,
            roots: roots.len(),
            rebuffer,
        };
        unmark.graph.mark(minor);
        let consistent = unmark.graph.trial_counts();
        // From here on no user code runs until the verdict is out.
        core::mem::forget(unmark);
        self.scan(consistent);
        self.collect_white(promote)
    }

    fn add_node(&mut self, object: NonNull<Header>) -> usize {
        let index = self.nodes.len();
        // SAFETY: callers pass live objects reached through handles.
        let h = unsafe { object.as_ref() };
        debug_assert!(!h.has(IN_GRAPH) && h.is_alive());
        h.set_slot(index);
        h.set_flag(IN_GRAPH);
        self.nodes.push(Node {
            object,
            trial: 0,
            first_edge: 0,
            end_edge: 0,
            live: false,
            opaque: false,
        });
        index
    }

    /// Step 1: traces every node once, discovering new nodes as it goes.
    fn mark(&mut self, minor: bool) {
        let mut i = 0;
        while i < self.nodes.len() {
            let object = self.nodes[i].object;
            let mut tracer = Tracer::new(Family::Local, &mut self.scratch);
            // SAFETY: nodes are live and alive (dead objects are never added).
            unsafe { header::trace_erased(object, &mut tracer) };
            let kept_alive = tracer.kept_alive();
            let first_edge = self.edges.len();
            let mut scratch = core::mem::take(&mut self.scratch);
            for target in scratch.drain(..) {
                let target = target.cast::<Header>();
                // SAFETY: a traced handle keeps its target's memory live.
                let t = unsafe { target.as_ref() };
                if t.has(DEAD) || (minor && t.has(OLD)) {
                    continue;
                }
                let j = if t.has(IN_GRAPH) {
                    t.slot()
                } else {
                    self.add_node(target)
                };
                self.edges.push(j);
            }
            self.scratch = scratch;
            let node = &mut self.nodes[i];
            node.first_edge = first_edge;
            node.end_edge = self.edges.len();
            node.opaque = kept_alive;
            i += 1;
        }
    }

    /// Computes trial counts. Returns `false` if some count went below zero,
    /// which only a `Trace` impl that reports pointers it does not own can
    /// cause; the collection then keeps everything.
    fn trial_counts(&mut self) -> bool {
        for node in &mut self.nodes {
            // SAFETY: nodes are live.
            node.trial = unsafe { node.object.as_ref() }.strong() as isize;
        }
        for &target in &self.edges {
            self.nodes[target].trial -= 1;
        }
        self.nodes.iter().all(|n| n.trial >= 0)
    }

    /// Step 2: marks live every node referenced from outside, and everything
    /// such nodes reach.
    fn scan(&mut self, consistent: bool) {
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if node.trial > 0 || node.opaque || !consistent {
                node.live = true;
                self.work.push(i);
            }
        }
        while let Some(i) = self.work.pop() {
            let (first, end) = (self.nodes[i].first_edge, self.nodes[i].end_edge);
            for e in first..end {
                let j = self.edges[e];
                if !self.nodes[j].live {
                    self.nodes[j].live = true;
                    self.work.push(j);
                }
            }
        }
    }

    /// Step 3: clears `IN_GRAPH` on every node, promotes the live ones if
    /// asked, and returns the garbage.
    fn collect_white(&mut self, promote: bool) -> Verdict {
        let traced = self.nodes.len();
        let mut garbage = Vec::new();
        let mut retry = Vec::new();
        let mut promoted = 0;
        for node in self.nodes.drain(..) {
            // SAFETY: nodes are live.
            let h = unsafe { node.object.as_ref() };
            h.clear_flag(IN_GRAPH);
            if !node.live {
                garbage.push(node.object);
            } else if node.opaque && node.trial == 0 {
                retry.push(node.object);
            } else if promote && !h.has(OLD) {
                h.set_flag(OLD);
                promoted += 1;
            }
        }
        self.edges.clear();
        Verdict {
            traced,
            garbage,
            promoted,
            retry,
        }
    }
}
