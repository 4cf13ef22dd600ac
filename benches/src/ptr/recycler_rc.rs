//! `recycler::Rc`: recycler's header and `Trace`, plain counting, never
//! collects; back edges are `recycler::rc::Weak`, like `std::rc::Rc`'s.

use std::cell::RefCell;

use recycler::rc::Weak;
use recycler::{Rc, Trace};

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

weak_back_heap!(RecyclerRc, name: "recycler-rc", ptr: Rc, weak: Weak);
