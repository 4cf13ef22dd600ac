//! Step 2 of a collection: the trace, node by node in the order the nodes
//! were numbered, each target held before the source's cells could unlock
//! (see the [collector's documentation](super), step 2).

use core::ptr::NonNull;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{Seen, Work};
use crate::guards::GuardSink;
use crate::sync::drops::Panic;
use crate::sync::header::Header;
use crate::trace::{Family, Tracer};

/// Step 2 for node `i`, the next one to trace (all before it are traced):
/// traces it, and numbers its new targets (traced in that order after it):
/// holding those not held yet, adding the roots not in the graph yet.
#[inline]
pub(super) fn trace_node(w: &mut Work, i: usize, minor: bool) {
    let header = w.nodes[i].header;
    w.targets.clear();
    // SAFETY: we hold `header` until `finish`, after `guards` is emptied.
    let kept = unsafe { trace_into(header, &mut w.targets, &mut w.guards, &mut w.panic) };
    let first = w.edges.len() as u32;
    for k in 0..w.targets.len() {
        let target = w.targets[k].cast::<Header>();
        // SAFETY: the handle that reported `target` is pinned in place
        // (locked cell or held object), so the header is alive.
        let j = match unsafe { w.lookup(target) } {
            Seen::Node(j) => j,
            // A root not reached yet: the tree continues there.
            Seen::Root(k) => match w.add_root(k) {
                Some(j) => j,
                None => continue,
            },
            // A minor collection does not enter old objects: the edge's
            // handle stays an external reference of its target.
            // SAFETY: as above, and we hold the collector lock.
            Seen::New if minor && unsafe { target.as_ref().generation.is_old() } => continue,
            // SAFETY: as above.
            Seen::New => match unsafe { target.as_ref() }.hold() {
                Some(word) => match w.add(target, word) {
                    Some(j) => j,
                    None => {
                        // Graph full: not an edge we follow.
                        // SAFETY: the hold we just took.
                        unsafe { Header::dec_strong(target) };
                        continue;
                    }
                },
                None => continue, // doomed: a dead handle, not an edge
            },
        };
        w.edges.push(j);
        w.nodes[j as usize].trial -= 1;
    }
    let node = &mut w.nodes[i];
    node.first = first;
    node.kept = kept;
}

/// Traces the value of `header` into `edges`, keeping cell guards in
/// `guards`. Returns whether a cell could not be inspected.
///
/// A panicking `Trace` impl counts as a cell that could not be inspected,
/// and the edges it reported before panicking are dropped (reporting fewer
/// edges is safe: the object is kept). An edge reported from inside a lock
/// is only pinned by that lock's guard, which the unwind used to drop before
/// the sink could keep it, so another thread could take the handle out and
/// free its target (a use after free in the hold that followed:
/// `gc/tests/sync_trace_panic.rs`, under Miri); `Tracer::trace_lock` now
/// keeps the guard through the unwind too (`sync_nested_locks_panic.rs`),
/// and the edges are dropped all the same. The panic goes to
/// `panic` (the first one is re-raised when the collection ends). So a
/// panic never unwinds through the collector, which keeps every root it
/// drained and collects the rest of the graph.
///
/// # Safety
/// The collector holds `header` (so its value is alive and not `&mut`
/// borrowed), and keeps holding it until `guards` is emptied.
#[inline]
pub(super) unsafe fn trace_into(
    header: NonNull<Header>,
    edges: &mut Vec<NonNull<()>>,
    guards: &mut GuardSink,
    panic: &mut Panic,
) -> bool {
    let mut tracer = Tracer::with_guards(Family::Sync, edges, guards);
    // SAFETY: forwarded contract.
    let traced = catch_unwind(AssertUnwindSafe(|| unsafe {
        (header.as_ref().vtable.trace)(header, &mut tracer)
    }));
    match traced {
        Ok(()) => tracer.kept_alive(),
        Err(payload) => {
            edges.clear();
            crate::payload::keep_first(panic, payload);
            true
        }
    }
}
