//! `recycler::sync::Gc`: the thread-safe collected pointer; strong back edges
//! in `std::sync::Mutex` cells (which its collector traces with `try_lock`),
//! the default policy, `recycler::sync::collect` for full collections.

use std::sync::Mutex;

use recycler::sync::Gc;
use recycler::{Policy, Trace};

use crate::heap::{Heap, SyncHeap};
use crate::live::Live;

/// Marker for `recycler::sync::Gc`.
pub struct RecyclerSyncGc;

/// Pair node.
#[derive(Trace)]
pub struct PairNode {
    left: Option<Gc<PairNode>>,
    right: Option<Gc<PairNode>>,
    back: Mutex<Option<Gc<PairNode>>>,
    #[trace(skip)]
    _live: Live,
}

/// Graph node (also the node of the threaded workload).
#[derive(Trace)]
pub struct GraphNode {
    _label: String,
    edges: Mutex<Vec<Gc<GraphNode>>>,
    back: Mutex<Option<Gc<GraphNode>>>,
    #[trace(skip)]
    _live: Live,
}

strong_back_heap!(
    impl[] RecyclerSyncGc,
    name: "recycler-sync-gc",
    ptr: Gc,
    collect: recycler::sync::collect(),
    extra: {
        fn prepare() {
            recycler::sync::set_policy(Policy::Adaptive);
        }
    },
);

impl SyncHeap for RecyclerSyncGc {
    const NAME: &'static str = "recycler-sync-gc";
    type Node = Gc<GraphNode>;
    fn node() -> Self::Node {
        <Self as Heap>::graph(String::new())
    }
    fn with_edges<R>(n: &Self::Node, f: impl FnOnce(&mut Vec<Self::Node>) -> R) -> R {
        <Self as Heap>::with_edges(n, f)
    }
    fn collect() {
        recycler::sync::collect();
    }
}
