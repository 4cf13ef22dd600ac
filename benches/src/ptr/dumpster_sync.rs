//! `dumpster::sync::Gc`: strong back edges in `Mutex` cells, the crate's
//! default collect condition.

use std::sync::Mutex;

use dumpster::sync::Gc;
use dumpster::Trace;

use crate::heap::{Heap, SyncHeap};
use crate::live::Live;

/// Marker for `dumpster::sync::Gc`.
pub struct DumpsterSync;

/// Pair node.
#[derive(Trace)]
pub struct PairNode {
    left: Option<Gc<PairNode>>,
    right: Option<Gc<PairNode>>,
    back: Mutex<Option<Gc<PairNode>>>,
    _live: Live,
}

/// Graph node (also the node of the threaded workload).
#[derive(Trace)]
pub struct GraphNode {
    _label: String,
    edges: Mutex<Vec<Gc<GraphNode>>>,
    back: Mutex<Option<Gc<GraphNode>>>,
    _live: Live,
}

impl Heap for DumpsterSync {
    const NAME: &'static str = "dumpster-sync";
    type Pair = Gc<PairNode>;
    type Graph = Gc<GraphNode>;
    type Leaf = Gc<u64>;
    type Text = Gc<String>;

    fn pair(left: Option<Self::Pair>, right: Option<Self::Pair>) -> Self::Pair {
        Gc::new(PairNode {
            left,
            right,
            back: Mutex::new(None),
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
        *p.back.lock().unwrap() = Some(to.clone());
    }
    fn has_back(p: &Self::Pair) -> bool {
        p.back.lock().unwrap().is_some()
    }

    fn graph(label: String) -> Self::Graph {
        Gc::new(GraphNode {
            _label: label,
            edges: Mutex::new(Vec::new()),
            back: Mutex::new(None),
            _live: Live::new(),
        })
    }
    fn with_edges<R>(g: &Self::Graph, f: impl FnOnce(&mut Vec<Self::Graph>) -> R) -> R {
        f(&mut g.edges.lock().unwrap())
    }
    fn set_graph_back(g: &Self::Graph, to: &Self::Graph) {
        *g.back.lock().unwrap() = Some(to.clone());
    }
    fn clear_graph(g: &Self::Graph) {
        let edges = std::mem::take(&mut *g.edges.lock().unwrap());
        drop(edges);
        let back = g.back.lock().unwrap().take();
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
        dumpster::sync::collect();
    }
}

impl SyncHeap for DumpsterSync {
    const NAME: &'static str = "dumpster-sync";
    type Node = Gc<GraphNode>;
    fn node() -> Self::Node {
        <Self as Heap>::graph(String::new())
    }
    fn with_edges<R>(n: &Self::Node, f: impl FnOnce(&mut Vec<Self::Node>) -> R) -> R {
        <Self as Heap>::with_edges(n, f)
    }
    fn collect() {
        dumpster::sync::collect();
    }
}
