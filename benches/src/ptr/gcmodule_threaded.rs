//! `gcmodule::ThreadedCc` (one process-wide `ThreadedObjectSpace`), for the
//! threaded random-operations workload. Its values are read through a
//! `borrow()` guard that blocks the collector, so it does not fit the
//! single-threaded `Heap` shapes that hand out plain references.

use std::sync::{LazyLock, Mutex};

use gcmodule::{ThreadedCc, ThreadedObjectSpace, Trace, Tracer};

use crate::heap::SyncHeap;
use crate::live::Live;

/// Marker for `gcmodule::ThreadedCc`.
pub struct GcmoduleThreaded;

static SPACE: LazyLock<ThreadedObjectSpace> = LazyLock::new(ThreadedObjectSpace::default);

/// Node of the threaded workload.
pub struct SyncNode {
    edges: Mutex<Vec<ThreadedCc<SyncNode>>>,
    _live: Live,
}

impl Trace for SyncNode {
    fn trace(&self, tracer: &mut Tracer) {
        self.edges.trace(tracer);
    }
    fn is_type_tracked() -> bool {
        true
    }
}

impl SyncHeap for GcmoduleThreaded {
    const NAME: &'static str = "gcmodule-threaded";
    type Node = ThreadedCc<SyncNode>;
    fn node() -> Self::Node {
        SPACE.create(SyncNode {
            edges: Mutex::new(Vec::new()),
            _live: Live::new(),
        })
    }
    fn with_edges<R>(n: &Self::Node, f: impl FnOnce(&mut Vec<Self::Node>) -> R) -> R {
        let node = n.borrow();
        let mut edges = node.edges.lock().unwrap();
        f(&mut edges)
    }
    fn collect() {
        SPACE.collect_cycles();
    }
}
