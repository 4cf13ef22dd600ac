//! `std::rc::Rc` with `Weak` back edges: the single-threaded baseline. Cycles
//! built from strong edges leak (reported by the check runs).

use std::cell::RefCell;
use std::rc::{Rc, Weak};

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

weak_back_heap!(StdRc, name: "rc", ptr: Rc, weak: Weak);
