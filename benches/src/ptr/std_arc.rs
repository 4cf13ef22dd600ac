//! `std::sync::Arc` with `Weak` back edges and `Mutex` cells: the thread-safe baseline. Cycles
//! built from strong edges leak (reported by the check runs).

use std::sync::{Arc, Mutex, Weak};

use crate::heap::{Heap, SyncHeap};
use crate::live::Live;

/// Marker for `std::sync::Arc`.
pub struct StdArc;

/// Pair node.
pub struct PairNode {
    left: Option<Arc<PairNode>>,
    right: Option<Arc<PairNode>>,
    back: Mutex<Weak<PairNode>>,
    _live: Live,
}

/// Graph node.
pub struct GraphNode {
    _label: String,
    edges: Mutex<Vec<Arc<GraphNode>>>,
    back: Mutex<Weak<GraphNode>>,
    _live: Live,
}

impl Heap for StdArc {
    const NAME: &'static str = "arc";
    const COUNTING_ONLY: bool = true;
    type Pair = Arc<PairNode>;
    type Graph = Arc<GraphNode>;
    type Leaf = Arc<u64>;
    type Text = Arc<String>;

    fn pair(left: Option<Self::Pair>, right: Option<Self::Pair>) -> Self::Pair {
        Arc::new(PairNode {
            left,
            right,
            back: Mutex::new(Weak::new()),
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
        *p.back.lock().unwrap() = Arc::downgrade(to);
    }
    fn has_back(p: &Self::Pair) -> bool {
        p.back.lock().unwrap().strong_count() != 0
    }

    fn graph(label: String) -> Self::Graph {
        Arc::new(GraphNode {
            _label: label,
            edges: Mutex::new(Vec::new()),
            back: Mutex::new(Weak::new()),
            _live: Live::new(),
        })
    }
    fn with_edges<R>(g: &Self::Graph, f: impl FnOnce(&mut Vec<Self::Graph>) -> R) -> R {
        f(&mut g.edges.lock().unwrap())
    }
    fn set_graph_back(g: &Self::Graph, to: &Self::Graph) {
        *g.back.lock().unwrap() = Arc::downgrade(to);
    }
    fn clear_graph(g: &Self::Graph) {
        let edges = std::mem::take(&mut *g.edges.lock().unwrap());
        drop(edges);
        *g.back.lock().unwrap() = Weak::new();
    }

    fn leaf(v: u64) -> Self::Leaf {
        Arc::new(v)
    }
    fn leaf_value(l: &Self::Leaf) -> u64 {
        **l
    }
    fn text(s: String) -> Self::Text {
        Arc::new(s)
    }
    fn text_len(t: &Self::Text) -> usize {
        t.len()
    }

    fn collect() {}
}

/// Node of the threaded random-operations workload.
pub struct SyncNode {
    edges: Mutex<Vec<Arc<SyncNode>>>,
    _live: Live,
}

impl SyncHeap for StdArc {
    const NAME: &'static str = "arc";
    type Node = Arc<SyncNode>;
    fn node() -> Self::Node {
        Arc::new(SyncNode {
            edges: Mutex::new(Vec::new()),
            _live: Live::new(),
        })
    }
    fn with_edges<R>(n: &Self::Node, f: impl FnOnce(&mut Vec<Self::Node>) -> R) -> R {
        f(&mut n.edges.lock().unwrap())
    }
    fn collect() {}
}
