//! `rust-cc` (`rust_cc::Cc`): strong back edges, automatic collection on
//! (the crate's default features).

use std::cell::RefCell;

use rust_cc::{Cc, Finalize, Trace};

use crate::live::Live;

/// Marker for `rust_cc::Cc`.
pub struct RustCc;

/// Pair node.
#[derive(Trace, Finalize)]
pub struct PairNode {
    left: Option<Cc<PairNode>>,
    right: Option<Cc<PairNode>>,
    back: RefCell<Option<Cc<PairNode>>>,
    #[rust_cc(ignore)]
    _live: Live,
}

/// Graph node.
#[derive(Trace, Finalize)]
pub struct GraphNode {
    _label: String,
    edges: RefCell<Vec<Cc<GraphNode>>>,
    back: RefCell<Option<Cc<GraphNode>>>,
    #[rust_cc(ignore)]
    _live: Live,
}

strong_back_heap!(
    impl[] RustCc,
    name: "rust-cc",
    ptr: Cc,
    collect: rust_cc::collect_cycles(),
);
