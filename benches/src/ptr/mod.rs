//! One adapter per pointer under test. Adding a pointer is adding a file here
//! (a [`Heap`](crate::heap::Heap) and/or [`SyncHeap`](crate::heap::SyncHeap)
//! impl) and one line in [`for_each_heap!`](crate::for_each_heap) (or in
//! [`run_threaded`](crate::suite::run_threaded)).
//!
//! Each file defines its `PairNode` and `GraphNode` with the crate's own
//! `Trace` (derived where the crate has a derive) and writes its `Heap` impl
//! with one of the two macros below: the shapes are the same for every
//! pointer; only the pointer, the cell and the kind of back edge differ.

/// A mutable slot in a node: `RefCell`, `Mutex`, or `gc::GcCell`.
pub trait Slot<T> {
    /// A slot holding `value`.
    fn new(value: T) -> Self;
    /// Runs `f` on the contents.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

impl<T> Slot<T> for std::cell::RefCell<T> {
    fn new(value: T) -> Self {
        std::cell::RefCell::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.borrow_mut())
    }
}

impl<T> Slot<T> for std::sync::Mutex<T> {
    fn new(value: T) -> Self {
        std::sync::Mutex::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock().unwrap())
    }
}

/// The acyclic leaf handles, shared by both macros.
macro_rules! leaf_methods {
    ($ptr:ident) => {
        fn leaf(v: u64) -> Self::Leaf {
            $ptr::new(v)
        }
        fn leaf_value(l: &Self::Leaf) -> u64 {
            **l
        }
        fn text(s: String) -> Self::Text {
            $ptr::new(s)
        }
        fn text_len(t: &Self::Text) -> usize {
            t.len()
        }
    };
}

/// `Heap` for a cycle collector: back edges are strong (`Option<$ptr<_>>` in
/// a slot). The node types must be `PairNode { left, right, back, _live }`
/// and `GraphNode { _label, edges, back, _live }`.
macro_rules! strong_back_heap {
    (
        impl[$($gen:tt)*] $marker:ty, name: $name:expr, ptr: $ptr:ident,
        collect: $collect:expr $(, extra: { $($extra:tt)* })? $(,)?
    ) => {
        impl<$($gen)*> $crate::heap::Heap for $marker {
            const NAME: &'static str = $name;
            type Pair = $ptr<PairNode>;
            type Graph = $ptr<GraphNode>;
            type Leaf = $ptr<u64>;
            type Text = $ptr<String>;

            fn pair(left: Option<Self::Pair>, right: Option<Self::Pair>) -> Self::Pair {
                $ptr::new(PairNode {
                    left,
                    right,
                    back: $crate::ptr::Slot::new(None),
                    _live: $crate::live::Live::new(),
                })
            }
            fn left(p: &Self::Pair) -> Option<&Self::Pair> {
                p.left.as_ref()
            }
            fn right(p: &Self::Pair) -> Option<&Self::Pair> {
                p.right.as_ref()
            }
            fn set_back(p: &Self::Pair, to: &Self::Pair) {
                let old = $crate::ptr::Slot::with(&p.back, |b| b.replace(to.clone()));
                drop(old);
            }
            fn has_back(p: &Self::Pair) -> bool {
                $crate::ptr::Slot::with(&p.back, |b| b.is_some())
            }

            fn graph(label: String) -> Self::Graph {
                $ptr::new(GraphNode {
                    _label: label,
                    edges: $crate::ptr::Slot::new(Vec::new()),
                    back: $crate::ptr::Slot::new(None),
                    _live: $crate::live::Live::new(),
                })
            }
            fn with_edges<R>(g: &Self::Graph, f: impl FnOnce(&mut Vec<Self::Graph>) -> R) -> R {
                $crate::ptr::Slot::with(&g.edges, f)
            }
            fn set_graph_back(g: &Self::Graph, to: &Self::Graph) {
                let old = $crate::ptr::Slot::with(&g.back, |b| b.replace(to.clone()));
                drop(old);
            }
            fn clear_graph(g: &Self::Graph) {
                // Dropped outside the slot: a drop may start a collection.
                let edges = $crate::ptr::Slot::with(&g.edges, std::mem::take);
                let back = $crate::ptr::Slot::with(&g.back, Option::take);
                drop((edges, back));
            }

            leaf_methods!($ptr);

            fn collect() {
                $collect
            }
            $($($extra)*)?
        }
    };
}

/// `Heap` for a plain counting pointer: back edges are `$weak` (a slot
/// holding `$weak<_>`), as a Rust programmer writes them with `Rc`.
macro_rules! weak_back_heap {
    ($marker:ty, name: $name:expr, ptr: $ptr:ident, weak: $weak:ident $(,)?) => {
        impl $crate::heap::Heap for $marker {
            const NAME: &'static str = $name;
            const COUNTING_ONLY: bool = true;
            type Pair = $ptr<PairNode>;
            type Graph = $ptr<GraphNode>;
            type Leaf = $ptr<u64>;
            type Text = $ptr<String>;

            fn pair(left: Option<Self::Pair>, right: Option<Self::Pair>) -> Self::Pair {
                $ptr::new(PairNode {
                    left,
                    right,
                    back: $crate::ptr::Slot::new($weak::new()),
                    _live: $crate::live::Live::new(),
                })
            }
            fn left(p: &Self::Pair) -> Option<&Self::Pair> {
                p.left.as_ref()
            }
            fn right(p: &Self::Pair) -> Option<&Self::Pair> {
                p.right.as_ref()
            }
            fn set_back(p: &Self::Pair, to: &Self::Pair) {
                $crate::ptr::Slot::with(&p.back, |b| *b = $ptr::downgrade(to));
            }
            fn has_back(p: &Self::Pair) -> bool {
                $crate::ptr::Slot::with(&p.back, |b| b.upgrade().is_some())
            }

            fn graph(label: String) -> Self::Graph {
                $ptr::new(GraphNode {
                    _label: label,
                    edges: $crate::ptr::Slot::new(Vec::new()),
                    back: $crate::ptr::Slot::new($weak::new()),
                    _live: $crate::live::Live::new(),
                })
            }
            fn with_edges<R>(g: &Self::Graph, f: impl FnOnce(&mut Vec<Self::Graph>) -> R) -> R {
                $crate::ptr::Slot::with(&g.edges, f)
            }
            fn set_graph_back(g: &Self::Graph, to: &Self::Graph) {
                $crate::ptr::Slot::with(&g.back, |b| *b = $ptr::downgrade(to));
            }
            fn clear_graph(g: &Self::Graph) {
                let edges = $crate::ptr::Slot::with(&g.edges, std::mem::take);
                $crate::ptr::Slot::with(&g.back, |b| *b = $weak::new());
                drop(edges);
            }

            leaf_methods!($ptr);

            fn collect() {}
        }
    };
}

pub mod bacon_rajan_cc;
pub mod dumpster_sync;
pub mod dumpster_unsync;
pub mod gcmodule_cc;
pub mod gcmodule_threaded;
pub mod recycler_gc;
pub mod recycler_rc;
pub mod recycler_sync_gc;
pub mod rust_cc;
pub mod rust_gc;
pub mod std_arc;
pub mod std_rc;
