//! `dumpster::unsync::Gc`: strong back edges, the crate's default collect
//! condition (it collects once enough `Gc`s were dropped).

use std::cell::RefCell;

use dumpster::unsync::Gc;
use dumpster::{Trace, TraceWith, Visitor};

use crate::heap::Heap;
use crate::live::Live;

/// Marker for `dumpster::unsync::Gc`.
pub struct DumpsterUnsync;

// SAFETY: `Live` owns no `Gc` of any kind, so visiting nothing reports every
// pointer it owns (none). Also used by `dumpster::sync` nodes.
unsafe impl<V: Visitor> TraceWith<V> for Live {
    #[inline]
    fn accept(&self, _: &mut V) -> Result<(), ()> {
        Ok(())
    }
}

/// Pair node.
#[derive(Trace)]
pub struct PairNode {
    left: Option<Gc<PairNode>>,
    right: Option<Gc<PairNode>>,
    back: RefCell<Option<Gc<PairNode>>>,
    _live: Live,
}

/// Graph node.
#[derive(Trace)]
pub struct GraphNode {
    _label: String,
    edges: RefCell<Vec<Gc<GraphNode>>>,
    back: RefCell<Option<Gc<GraphNode>>>,
    _live: Live,
}

impl Heap for DumpsterUnsync {
    const NAME: &'static str = "dumpster";
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
        dumpster::unsync::collect();
    }
}
