//! `recycler::Gc`: strong back edges, cycles freed by the collector. The
//! const parameter picks the policy set before each benchmark: the default
//! generational `Policy::Adaptive`, or the `Policy::Nim16` reproduction.

use std::cell::RefCell;

use recycler::{Gc, Policy, Trace};

use crate::heap::{CollectorCounters, Heap, Workload};
use crate::live::Live;

/// Marker for `recycler::Gc` under `Policy::Nim16` (`NIM16 = true`) or the
/// default `Policy::Adaptive`.
pub struct RecyclerGc<const NIM16: bool>;

/// `recycler::Gc` under the default policy.
pub type RecyclerGcDefault = RecyclerGc<false>;
/// `recycler::Gc` under `Policy::Nim16`.
pub type RecyclerGcNim16 = RecyclerGc<true>;

/// Pair node.
#[derive(Trace)]
pub struct PairNode {
    left: Option<Gc<PairNode>>,
    right: Option<Gc<PairNode>>,
    back: RefCell<Option<Gc<PairNode>>>,
    #[trace(skip)]
    _live: Live,
}

/// Graph node.
#[derive(Trace)]
pub struct GraphNode {
    _label: String,
    edges: RefCell<Vec<Gc<GraphNode>>>,
    back: RefCell<Option<Gc<GraphNode>>>,
    #[trace(skip)]
    _live: Live,
}

impl<const NIM16: bool> Heap for RecyclerGc<NIM16> {
    const NAME: &'static str = if NIM16 {
        "recycler-gc-nim16"
    } else {
        "recycler-gc"
    };
    type Pair = Gc<PairNode>;
    type Graph = Gc<GraphNode>;
    type Leaf = Gc<u64>;
    type Text = Gc<String>;

    fn pair(left: Option<Self::Pair>, right: Option<Self::Pair>) -> Self::Pair {
        Gc::new(PairNode {
            left,
            right,
            back: RefCell::new(None),
            _live: Live::new(),
        })
    }
    fn left(p: &Self::Pair) -> Option<&Self::Pair> {
        p.left.as_ref()
    }
    fn right(p: &Self::Pair) -> Option<&Self::Pair> {
        p.right.as_ref()
    }
    fn set_back(p: &Self::Pair, to: &Self::Pair) {
        *p.back.borrow_mut() = Some(to.clone());
    }
    fn has_back(p: &Self::Pair) -> bool {
        p.back.borrow().is_some()
    }

    fn graph(label: String) -> Self::Graph {
        Gc::new(GraphNode {
            _label: label,
            edges: RefCell::new(Vec::new()),
            back: RefCell::new(None),
            _live: Live::new(),
        })
    }
    fn with_edges<R>(g: &Self::Graph, f: impl FnOnce(&mut Vec<Self::Graph>) -> R) -> R {
        f(&mut g.edges.borrow_mut())
    }
    fn set_graph_back(g: &Self::Graph, to: &Self::Graph) {
        *g.back.borrow_mut() = Some(to.clone());
    }
    fn clear_graph(g: &Self::Graph) {
        let edges = std::mem::take(&mut *g.edges.borrow_mut());
        drop(edges);
        let back = g.back.borrow_mut().take();
        drop(back);
    }

    fn leaf(v: u64) -> Self::Leaf {
        Gc::new(v)
    }
    fn leaf_value(l: &Self::Leaf) -> u64 {
        **l
    }
    fn text(s: String) -> Self::Text {
        Gc::new(s)
    }
    fn text_len(t: &Self::Text) -> usize {
        t.len()
    }

    fn collect() {
        recycler::collect();
    }
    fn prepare() {
        recycler::set_policy(if NIM16 {
            Policy::Nim16
        } else {
            Policy::Adaptive
        });
    }
    fn collector_counters() -> Option<CollectorCounters> {
        let s = recycler::stats();
        Some(CollectorCounters {
            minor: s.minor_collections,
            full: s.full_collections,
            traced: s.nodes_traced,
            max_pause_us: u64::try_from(s.max_pause.as_micros()).unwrap_or(u64::MAX),
        })
    }
    fn unsupported(w: Workload) -> Option<&'static str> {
        // The Nim16 column exists for the hub comparison only.
        if NIM16 && w != Workload::Hub {
            Some("Nim16 policy measured on the hub workload only")
        } else {
            None
        }
    }
}
