//! `gc` (rust-gc, renamed `rust-gc` here): a tracing mark-and-sweep
//! collector; strong back edges in `GcCell`s, automatic collection by the
//! crate's allocation threshold.

// gc_derive 0.5 wraps its impls in `const _: () = { ... }` blocks.
#![allow(non_local_definitions)]

use rust_gc::{Finalize, Gc, GcCell, Trace};

use crate::heap::Heap;
use crate::live::Live;

/// Marker for `gc::Gc`.
pub struct RustGc;

/// Pair node.
#[derive(Trace, Finalize)]
pub struct PairNode {
    left: Option<Gc<PairNode>>,
    right: Option<Gc<PairNode>>,
    back: GcCell<Option<Gc<PairNode>>>,
    #[unsafe_ignore_trace]
    _live: Live,
}

/// Graph node.
#[derive(Trace, Finalize)]
pub struct GraphNode {
    _label: String,
    edges: GcCell<Vec<Gc<GraphNode>>>,
    back: GcCell<Option<Gc<GraphNode>>>,
    #[unsafe_ignore_trace]
    _live: Live,
}

impl Heap for RustGc {
    const NAME: &'static str = "gc";
    type Pair = Gc<PairNode>;
    type Graph = Gc<GraphNode>;
    type Leaf = Gc<u64>;
    type Text = Gc<String>;

    fn pair(left: Option<Self::Pair>, right: Option<Self::Pair>) -> Self::Pair {
        Gc::new(PairNode {
            left,
            right,
            back: GcCell::new(None),
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
            edges: GcCell::new(Vec::new()),
            back: GcCell::new(None),
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
        rust_gc::force_collect();
    }
}
