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

strong_back_heap!(
    impl[] DumpsterSync,
    name: "dumpster-sync",
    ptr: Gc,
    collect: dumpster::sync::collect(),
);

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
