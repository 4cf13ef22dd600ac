//! `dumpster::unsync::Gc`: strong back edges, the crate's default collect
//! condition (it collects once enough `Gc`s were dropped).

use std::cell::RefCell;

use dumpster::unsync::Gc;
use dumpster::{Trace, TraceWith, Visitor};

use crate::live::Live;

/// Marker for `dumpster::unsync::Gc`.
pub struct DumpsterUnsync;

// SAFETY: `Live` owns no `Gc` of any kind, so visiting nothing reports every
// pointer it owns (none). Also used by `dumpster::sync` nodes.
unsafe impl<V: Visitor> TraceWith<V> for Live {
    #[inline]
    fn accept(&self, _: &mut V) -> Result<(), ()> {
        Ok(())
    }
}

/// Pair node.
#[derive(Trace)]
pub struct PairNode {
    left: Option<Gc<PairNode>>,
    right: Option<Gc<PairNode>>,
    back: RefCell<Option<Gc<PairNode>>>,
    _live: Live,
}

/// Graph node.
#[derive(Trace)]
pub struct GraphNode {
    _label: String,
    edges: RefCell<Vec<Gc<GraphNode>>>,
    back: RefCell<Option<Gc<GraphNode>>>,
    _live: Live,
}

strong_back_heap!(
    impl[] DumpsterUnsync,
    name: "dumpster",
    ptr: Gc,
    collect: dumpster::unsync::collect(),
);
