//! `recycler::Gc`: strong back edges, cycles freed by the collector. The
//! const parameter picks the policy set before each benchmark: the default
//! generational `Policy::Adaptive`, or the `Policy::Nim16` reproduction.

use std::cell::RefCell;

use recycler::{Gc, Policy, Trace};

use crate::heap::{CollectorCounters, Workload};
use crate::live::Live;

/// Marker for `recycler::Gc` under `Policy::Nim16` (`NIM16 = true`) or the
/// default `Policy::Adaptive`.
pub struct RecyclerGc<const NIM16: bool>;

/// `recycler::Gc` under the default policy.
pub type RecyclerGcDefault = RecyclerGc<false>;
/// `recycler::Gc` under `Policy::Nim16`.
pub type RecyclerGcNim16 = RecyclerGc<true>;

/// Pair node.
#[derive(Trace)]
pub struct PairNode {
    left: Option<Gc<PairNode>>,
    right: Option<Gc<PairNode>>,
    back: RefCell<Option<Gc<PairNode>>>,
    #[trace(skip)]
    _live: Live,
}

/// Graph node.
#[derive(Trace)]
pub struct GraphNode {
    _label: String,
    edges: RefCell<Vec<Gc<GraphNode>>>,
    back: RefCell<Option<Gc<GraphNode>>>,
    #[trace(skip)]
    _live: Live,
}

strong_back_heap!(
    impl[const NIM16: bool] RecyclerGc<NIM16>,
    name: if NIM16 { "recycler-gc-nim16" } else { "recycler-gc" },
    ptr: Gc,
    collect: recycler::collect(),
    extra: {
        fn prepare() {
            recycler::set_policy(if NIM16 { Policy::Nim16 } else { Policy::Adaptive });
        }
        fn unsupported(w: Workload) -> Option<&'static str> {
            // The Nim16 column exists for the hub comparison only.
            (NIM16 && w != Workload::Hub)
                .then_some("Nim16 policy measured on the hub workload only")
        }
        fn collector_counters() -> Option<CollectorCounters> {
            let s = recycler::stats();
            Some(CollectorCounters {
                minor: s.minor_collections,
                full: s.full_collections,
                traced: s.nodes_traced,
                max_pause_us: u64::try_from(s.max_pause.as_micros()).unwrap_or(u64::MAX),
            })
        }
    },
);
