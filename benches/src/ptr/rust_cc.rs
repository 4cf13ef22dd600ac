//! `rust-cc` (`rust_cc::Cc`): strong back edges, automatic collection on
//! (the crate's default features).

use std::cell::RefCell;

use rust_cc::{Cc, Finalize, Trace};

use crate::heap::Heap;
use crate::live::Live;

/// Marker for `rust_cc::Cc`.
pub struct RustCc;

/// Pair node.
#[derive(Trace, Finalize)]
pub struct PairNode {
    left: Option<Cc<PairNode>>,
    right: Option<Cc<PairNode>>,
    back: RefCell<Option<Cc<PairNode>>>,
    #[rust_cc(ignore)]
    _live: Live,
}

/// Graph node.
#[derive(Trace, Finalize)]
pub struct GraphNode {
    _label: String,
    edges: RefCell<Vec<Cc<GraphNode>>>,
    back: RefCell<Option<Cc<GraphNode>>>,
    #[rust_cc(ignore)]
    _live: Live,
}

impl Heap for RustCc {
    const NAME: &'static str = "rust-cc";
    type Pair = Cc<PairNode>;
    type Graph = Cc<GraphNode>;
    type Leaf = Cc<u64>;
    type Text = Cc<String>;

    fn pair(left: Option<Self::Pair>, right: Option<Self::Pair>) -> Self::Pair {
        Cc::new(PairNode {
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
        Cc::new(GraphNode {
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
        Cc::new(v)
    }
    fn leaf_value(l: &Self::Leaf) -> u64 {
        **l
    }
    fn text(s: String) -> Self::Text {
        Cc::new(s)
    }
    fn text_len(t: &Self::Text) -> usize {
        t.len()
    }

    fn collect() {
        rust_cc::collect_cycles();
    }
}
