//! `dumpster::sync::Gc`: strong back edges in `Mutex` cells, the crate's
//! default collect condition.

use std::sync::Mutex;

use dumpster::sync::Gc;
use dumpster::Trace;

use crate::heap::SyncHeap;
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

/// Graph node.
#[derive(Trace)]
pub struct GraphNode {
    _label: String,
    edges: Mutex<Vec<Gc<GraphNode>>>,
    back: Mutex<Option<Gc<GraphNode>>>,
    _live: Live,
}

/// Node of the threaded workloads (random operations, cycle churn): one
/// locked edge list, the shape of `std_arc::SyncNode` (dumpster's own
/// `Multiref`), so that every pointer allocates, locks and drops the same
/// fields.
#[derive(Trace)]
pub struct SyncNode {
    edges: Mutex<Vec<Gc<SyncNode>>>,
    _live: Live,
}

strong_back_heap!(
    impl[] DumpsterSync,
    name: "dumpster-sync",
    ptr: Gc,
    collect: dumpster::sync::collect(),
);

impl SyncHeap for DumpsterSync {
    const NAME: &'static str = "dumpster-sync";
    type Node = Gc<SyncNode>;
    fn node() -> Self::Node {
        Gc::new(SyncNode {
            edges: Mutex::new(Vec::new()),
            _live: Live::new(),
        })
    }
    fn with_edges<R>(n: &Self::Node, f: impl FnOnce(&mut Vec<Self::Node>) -> R) -> R {
        f(&mut n.edges.lock().unwrap())
    }
    fn collect() {
        dumpster::sync::collect();
    }
}
