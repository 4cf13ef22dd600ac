//! `std::rc::Rc` with `Weak` back edges: the single-threaded baseline. Cycles
//! built from strong edges leak (reported by the check runs).

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use crate::heap::Heap;
use crate::live::Live;

/// Marker for `std::rc::Rc`.
pub struct StdRc;

/// Pair node.
pub struct PairNode {
    left: Option<Rc<PairNode>>,
    right: Option<Rc<PairNode>>,
    back: RefCell<Weak<PairNode>>,
    _live: Live,
}

/// Graph node.
pub struct GraphNode {
    _label: String,
    edges: RefCell<Vec<Rc<GraphNode>>>,
    back: RefCell<Weak<GraphNode>>,
    _live: Live,
}

impl Heap for StdRc {
    const NAME: &'static str = "rc";
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
        p.back.borrow().strong_count() != 0
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
