//! `std::sync::Arc` with `Weak` back edges and `Mutex` cells: the thread-safe baseline. Cycles
//! built from strong edges leak (reported by the check runs).

use std::sync::{Arc, Mutex, Weak};

use crate::heap::SyncHeap;
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

weak_back_heap!(StdArc, name: "arc", ptr: Arc, weak: Weak);

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
