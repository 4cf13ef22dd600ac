//! The "hub" workload (bounded-cost issue): a live tree of `h` nodes with
//! parent back-pointers, rooted by one held handle, and a stream of requests.
//! Each request is a small cycle (request ↔ context) whose context holds a
//! clone of the root; it is dropped at once and left to the pointer's
//! automatic collection. A trial-deletion collector that re-walks the live
//! tree on every collection pays O(h) per collection here.

use crate::heap::Heap;

/// How the context points back at its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Back {
    /// A strong edge: a real cycle (leaks under plain counting).
    Strong,
    /// The pointer's native back edge (`Weak` for the plain counters, strong
    /// for the collectors).
    Native,
}

/// Builds the live tree: node `i`'s parent is node `(i - 1) / 2`; children are
/// strong edges, the parent is a back edge. Returns the root.
pub fn build_tree<H: Heap>(h: usize) -> H::Graph {
    let mut nodes: Vec<H::Graph> = Vec::with_capacity(h);
    nodes.push(H::graph(String::new()));
    for i in 1..h {
        let child = H::graph(String::new());
        let parent = &nodes[(i - 1) / 2];
        H::with_edges(parent, |edges| edges.push(child.clone()));
        H::set_graph_back(&child, parent);
        nodes.push(child);
    }
    nodes.swap_remove(0)
}

/// One request: creates request ↔ context, the context holding the root, and
/// returns the request handle (the caller drops it or keeps it).
#[inline]
pub fn request<H: Heap>(root: &H::Graph, back: Back) -> H::Graph {
    let req = H::graph(String::new());
    let ctx = H::graph(String::new());
    let hub = root.clone();
    H::with_edges(&ctx, |edges| edges.push(hub));
    let c = ctx.clone();
    H::with_edges(&req, |edges| edges.push(c));
    match back {
        Back::Strong => {
            let r = req.clone();
            H::with_edges(&ctx, |edges| edges.push(r));
        }
        Back::Native => H::set_graph_back(&ctx, &req),
    }
    req
}

/// Breaks the cycle of a request kept by a leaking run (outside timing).
pub fn release<H: Heap>(req: H::Graph) {
    H::clear_graph(&req);
}
