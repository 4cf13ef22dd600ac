//! `recycler::sync::Gc`: the thread-safe collected pointer; strong back edges
//! in `std::sync::Mutex` cells (which its collector traces with `try_lock`),
//! the default policy, `recycler::sync::collect` for full collections; with
//! the collections on the mutators (the default) or on the collector thread.

use std::sync::Mutex;

use recycler::sync::{CollectorMode, Gc};
use recycler::{Policy, Trace};

use crate::heap::{CollectorCounters, Heap, SyncHeap};
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

/// Marker for `recycler::sync::Gc` with its collector thread
/// (`CollectorMode::Thread`): the mutators only buffer roots.
pub struct RecyclerSyncGcThread;

macro_rules! recycler_sync_heap {
    ($marker:ty, $name:expr, $mode:expr) => {
        strong_back_heap!(
            impl[] $marker,
            name: $name,
            ptr: Gc,
            collect: recycler::sync::collect(),
            extra: {
                fn prepare() {
                    recycler::sync::set_policy(Policy::Adaptive);
                    recycler::sync::set_collector_mode($mode);
                }
                fn collector_counters() -> Option<CollectorCounters> {
                    let s = recycler::sync::stats();
                    Some(CollectorCounters {
                        minor: s.minor_collections,
                        full: s.full_collections,
                        traced: s.nodes_traced,
                        max_pause_us: u64::try_from(s.max_pause.as_micros())
                            .unwrap_or(u64::MAX),
                    })
                }
            },
        );

        impl SyncHeap for $marker {
            const NAME: &'static str = $name;
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
            fn prepare() {
                <Self as Heap>::prepare();
            }
        }
    };
}

recycler_sync_heap!(RecyclerSyncGc, "recycler-sync-gc", CollectorMode::Mutators);
recycler_sync_heap!(
    RecyclerSyncGcThread,
    "recycler-sync-gc-thread",
    CollectorMode::Thread
);
