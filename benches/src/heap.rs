//! The adapter traits every pointer implements (one file per pointer in
//! [`crate::ptr`]); the workloads in [`crate::workloads`] are written once
//! against them.
//!
//! A [`Heap`] offers three node shapes, enough for every single-threaded
//! workload without giving any pointer an extra allocation the original
//! benchmarks do not have:
//!
//! - **pair**: two child slots fixed at construction and one mutable *back
//!   edge* (binary trees, trees with parent pointers, doubly linked lists);
//! - **graph**: a label, a mutable list of strong edges and one back edge
//!   (stress test, random operations, the hub);
//! - **leaf**: an acyclic `u64` or `String` (churn and micro-benchmarks).
//!
//! A back edge is what a Rust programmer would write with that pointer: a
//! strong pointer for the cycle collectors, a `Weak` for the plain counting
//! pointers (`std::rc::Rc`, `Arc`, `recycler::Rc`), as in rust-cc-benchmarks.
//! Strong edges made with [`Heap::with_edges`] are strong for everyone, so a
//! workload that builds cycles from them leaks under plain counting — and the
//! check run reports it.

/// The workloads, used to ask a pointer whether it can run one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    /// rust-cc-benchmarks "binary trees".
    BinaryTrees,
    /// rust-cc-benchmarks "binary trees with parent pointers".
    ParentTrees,
    /// rust-cc-benchmarks "large linked list".
    LinkedList,
    /// rust-cc-benchmarks "stress test".
    StressTest,
    /// dumpster's random operations, one thread.
    RandomOps,
    /// 1M new + clone + drop of small acyclic values.
    Churn,
    /// The hub workload (automatic collection only).
    Hub,
    /// The micro-benchmarks against `std::rc::Rc`.
    Micro,
}

/// A single-threaded pointer under test.
pub trait Heap: 'static {
    /// Column name in the report (also the criterion function id).
    const NAME: &'static str;
    /// Whether the pointer is a plain counter whose back edges are `Weak`
    /// (the ratio baseline family); collectors say `false`.
    const COUNTING_ONLY: bool = false;

    /// Handle to a pair node.
    type Pair: Clone;
    /// Handle to a graph node.
    type Graph: Clone;
    /// Handle to an acyclic `u64`.
    type Leaf: Clone;
    /// Handle to an acyclic `String`.
    type Text: Clone;

    /// A new pair node owning `left` and `right`, with no back edge.
    fn pair(left: Option<Self::Pair>, right: Option<Self::Pair>) -> Self::Pair;
    /// The left child slot.
    fn left(p: &Self::Pair) -> Option<&Self::Pair>;
    /// The right child slot.
    fn right(p: &Self::Pair) -> Option<&Self::Pair>;
    /// Sets the back edge of `p` to `to` (strong, or `Weak` for counters).
    fn set_back(p: &Self::Pair, to: &Self::Pair);
    /// Whether `p` has a back edge set (keeps it observable to the optimiser).
    fn has_back(p: &Self::Pair) -> bool;

    /// A new graph node with `label` and no edges.
    fn graph(label: String) -> Self::Graph;
    /// Runs `f` on the strong edge list of `g`.
    fn with_edges<R>(g: &Self::Graph, f: impl FnOnce(&mut Vec<Self::Graph>) -> R) -> R;
    /// Sets the back edge of graph node `g` to `to` (strong, or `Weak`).
    fn set_graph_back(g: &Self::Graph, to: &Self::Graph);
    /// Removes every edge and the back edge of `g` (breaks leaked cycles
    /// outside the timed region).
    fn clear_graph(g: &Self::Graph);

    /// A new acyclic `u64`.
    fn leaf(v: u64) -> Self::Leaf;
    /// Reads a leaf.
    fn leaf_value(l: &Self::Leaf) -> u64;
    /// A new acyclic `String`.
    fn text(s: String) -> Self::Text;
    /// Reads a text's length.
    fn text_len(t: &Self::Text) -> usize;

    /// A full collection of this thread's cycles (no-op for plain counters).
    fn collect();
    /// Called before each benchmark of this pointer (e.g. to set a policy).
    fn prepare() {}
    /// Why this pointer cannot run `w`, if it cannot.
    fn unsupported(w: Workload) -> Option<&'static str> {
        let _ = w;
        None
    }
    /// Cumulative collector counters of this thread, for the check notes:
    /// (collections, nodes traced, maximum pause in µs), if the pointer
    /// exposes them.
    fn collector_counters() -> Option<CollectorCounters> {
        None
    }
}

/// Collector counters reported in the check notes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CollectorCounters {
    /// Minor collections so far.
    pub minor: u64,
    /// Full collections so far.
    pub full: u64,
    /// Nodes traced so far.
    pub traced: u64,
    /// Longest pause so far, in microseconds.
    pub max_pause_us: u64,
}

/// A thread-safe pointer under test, for random operations on several
/// threads (dumpster's `Multiref` shape: a node owning a locked edge list).
pub trait SyncHeap: 'static {
    /// Column name in the report.
    const NAME: &'static str;
    /// Handle to a node.
    type Node: Clone + Send + Sync;
    /// A new node with no edges.
    fn node() -> Self::Node;
    /// Runs `f` on the locked edge list of `n`.
    fn with_edges<R>(n: &Self::Node, f: impl FnOnce(&mut Vec<Self::Node>) -> R) -> R;
    /// A full collection (no-op for `Arc`).
    fn collect();
    /// Set-up before the check and the timing (e.g. the recycler policy).
    fn prepare() {}
    /// Why this pointer cannot run the threaded workload, if it cannot.
    fn unsupported() -> Option<&'static str> {
        None
    }
}
