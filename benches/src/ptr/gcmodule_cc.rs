//! `gcmodule::Cc`: strong back edges; no automatic collection (cycles are
//! freed by `collect_thread_cycles`).

use std::cell::RefCell;

use gcmodule::{Cc, Trace, Tracer};

use crate::heap::Workload;
use crate::live::Live;

/// Marker for `gcmodule::Cc`.
pub struct GcmoduleCc;

/// Pair node.
pub struct PairNode {
    left: Option<Cc<PairNode>>,
    right: Option<Cc<PairNode>>,
    back: RefCell<Option<Cc<PairNode>>>,
    _live: Live,
}

impl Trace for PairNode {
    fn trace(&self, tracer: &mut Tracer) {
        self.left.trace(tracer);
        self.right.trace(tracer);
        self.back.trace(tracer);
    }
    fn is_type_tracked() -> bool {
        true
    }
}

/// Graph node.
pub struct GraphNode {
    _label: String,
    edges: RefCell<Vec<Cc<GraphNode>>>,
    back: RefCell<Option<Cc<GraphNode>>>,
    _live: Live,
}

impl Trace for GraphNode {
    fn trace(&self, tracer: &mut Tracer) {
        self.edges.trace(tracer);
        self.back.trace(tracer);
    }
    fn is_type_tracked() -> bool {
        true
    }
}

strong_back_heap!(
    impl[] GcmoduleCc,
    name: "gcmodule",
    ptr: Cc,
    collect: {
        gcmodule::collect_thread_cycles();
    },
    extra: {
        fn unsupported(w: Workload) -> Option<&'static str> {
            (w == Workload::Hub).then_some(
                "no automatic collection (cycles are freed only by collect_thread_cycles)",
            )
        }
    },
);
