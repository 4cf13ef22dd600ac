//! `bacon_rajan_cc::Cc`: strong back edges; no automatic collection (roots
//! are buffered until `collect_cycles`).

use std::cell::RefCell;

use bacon_rajan_cc::{Cc, Trace, Tracer};

use crate::heap::Workload;
use crate::live::Live;

/// Marker for `bacon_rajan_cc::Cc`.
pub struct BaconRajanCc;

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
}

strong_back_heap!(
    impl[] BaconRajanCc,
    name: "bacon_rajan_cc",
    ptr: Cc,
    collect: bacon_rajan_cc::collect_cycles(),
    extra: {
        fn unsupported(w: Workload) -> Option<&'static str> {
            (w == Workload::Hub).then_some(
                "no automatic collection (roots are buffered until collect_cycles is called)",
            )
        }
    },
);
