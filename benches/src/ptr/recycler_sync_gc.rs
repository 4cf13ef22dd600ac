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

/// Graph node.
#[derive(Trace)]
pub struct GraphNode {
    _label: String,
    edges: Mutex<Vec<Gc<GraphNode>>>,
    back: Mutex<Option<Gc<GraphNode>>>,
    #[trace(skip)]
    _live: Live,
}

/// Node of the threaded workloads (random operations, cycle churn): one
/// locked edge list, the shape of `std_arc::SyncNode` (dumpster's
/// `Multiref`), so that both sides allocate, lock and drop the same fields.
#[derive(Trace)]
pub struct SyncNode {
    edges: Mutex<Vec<Gc<SyncNode>>>,
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
