//! `recycler::Rc`: recycler's header and `Trace`, plain counting, never
//! collects; back edges are `recycler::rc::Weak`, like `std::rc::Rc`'s.

use std::cell::RefCell;

use recycler::rc::Weak;
use recycler::{Rc, Trace};

use crate::heap::Heap;
use crate::live::Live;

/// Marker for `recycler::Rc`.
pub struct RecyclerRc;

/// Pair node.
#[derive(Trace)]
pub struct PairNode {
    left: Option<Rc<PairNode>>,
    right: Option<Rc<PairNode>>,
    back: RefCell<Weak<PairNode>>,
    #[trace(skip)]
    _live: Live,
}

/// Graph node.
#[derive(Trace)]
pub struct GraphNode {
    _label: String,
    edges: RefCell<Vec<Rc<GraphNode>>>,
    back: RefCell<Weak<GraphNode>>,
    #[trace(skip)]
    _live: Live,
}

impl Heap for RecyclerRc {
    const NAME: &'static str = "recycler-rc";
    const COUNTING_ONLY: bool = true;
    type Pair = Rc<PairNode>;
    type Graph = Rc<GraphNode>;
    type Leaf = Rc<u64>;
    type Text = Rc<String>;

    fn pair(left: Option<Self::Pair>, right: Option<Self::Pair>) -> Self::Pair {
        Rc::new(PairNode {
            left,
            right,
            back: RefCell::new(Weak::new()),
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
        *p.back.borrow_mut() = Rc::downgrade(to);
    }
    fn has_back(p: &Self::Pair) -> bool {
        p.back.borrow().upgrade().is_some()
    }

    fn graph(label: String) -> Self::Graph {
        Rc::new(GraphNode {
            _label: label,
            edges: RefCell::new(Vec::new()),
            back: RefCell::new(Weak::new()),
            _live: Live::new(),
        })
    }
    fn with_edges<R>(g: &Self::Graph, f: impl FnOnce(&mut Vec<Self::Graph>) -> R) -> R {
        f(&mut g.edges.borrow_mut())
    }
    fn set_graph_back(g: &Self::Graph, to: &Self::Graph) {
        *g.back.borrow_mut() = Rc::downgrade(to);
    }
    fn clear_graph(g: &Self::Graph) {
        let edges = std::mem::take(&mut *g.edges.borrow_mut());
        drop(edges);
        *g.back.borrow_mut() = Weak::new();
    }

    fn leaf(v: u64) -> Self::Leaf {
        Rc::new(v)
    }
    fn leaf_value(l: &Self::Leaf) -> u64 {
        **l
    }
    fn text(s: String) -> Self::Text {
        Rc::new(s)
    }
    fn text_len(t: &Self::Text) -> usize {
        t.len()
    }

    fn collect() {}
}
