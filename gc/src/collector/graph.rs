//! One collection: Bacon–Rajan trial deletion on a side graph.
//!
//! The three steps of the paper, over all buffered roots at once:
//!
//! 1. **Mark** (MarkRoots / MarkGray): starting from the roots, trace every
//!    object reachable through collected pointers and record it as a node of a
//!    side graph, with its outgoing edges. Each value is traced exactly once.
//!    A node's *trial count* loses one for every edge that points to it from
//!    inside the graph, as the edge is recorded. Real counts are never
//!    touched (but for one *hold* on each root, see [`Graph::collect`]): a
//!    panic half-way leaves the heap exactly as it was.
//! 2. **Scan** (ScanRoots / ScanBlack): each node's real strong count is
//!    added to its trial count, once marking is over (user code may change
//!    counts while it traces; from here on none runs until the verdict is
//!    carried out). A node whose trial count stays above zero is referenced
//!    from outside the graph (a stack handle, an untraced object, an old
//!    object in a minor collection); so is a node whose trace called
//!    [`Tracer::keep_alive`]. Those nodes and everything reachable from them
//!    in the graph are live. A count below zero, which only a `Trace` impl
//!    that breaks its contract can cause, makes every node live.
//! 3. **Collect** (CollectWhite): every other node is garbage: all of its
//!    handles come from other garbage nodes. The same pass that clears
//!    `IN_GRAPH` prepares the garbage for freeing (flag `DEAD`, one hold
//!    each; see `mod.rs`), so every header is visited three times in all:
//!    when entered, when scanned, when judged.
//!
//! Work is O(nodes + edges), with an explicit work list instead of recursion.
//! In a minor collection old objects are not entered: an edge to an old
//! object is ignored, and the old object's count keeps that edge as an
//! external reference, which is always safe (it can only keep things alive).
//! But an edge *from* an old object looks external too, so a minor collection
//! cannot prove a young node live: the old object may belong to the same
//! garbage cycle. Every node it keeps because of an outside reference (trial
//! count above zero) is therefore handed back to be buffered again (as an old
//! root, once promoted) for the next full collection, which enters
//! everything. Without this, a garbage cycle across the generations whose
//! only buffered member was young would leave every buffer and leak.
//! Dead objects (values already dropped by an earlier collection) are leaves.

use crate::header::{self, Object, BUFFERED, DEAD, IN_GRAPH, OLD};
use crate::trace::Tracer;

/// Bits of [`Graph::state`]: reachable from outside the graph (set by
/// `scan`).
const LIVE: u8 = 1 << 0;
/// Its trace could not inspect everything ([`Tracer::keep_alive`]).
const OPAQUE: u8 = 1 << 1;
/// It was in a roots buffer before this collection entered it: if a trace
/// panics, it goes back there.
const WAS_BUFFERED: u8 = 1 << 2;

/// Reusable buffers for collections (kept between collections to avoid
/// allocating on every run).
///
/// The side graph is stored by column, indexed by node number (the slot in
/// each node's header while it is `IN_GRAPH`): the passes that jump from
/// node to node (the in-edge count in `mark`, the liveness in `scan`) touch
/// arrays of 8 and 1 bytes per node, dense in the caches, rather than a
/// 40-byte record each.
#[derive(Default)]
pub(crate) struct Graph {
    /// Node `i`'s object.
    objects: Vec<Object>,
    /// Node `i`'s trial count: minus the edges to it from inside the graph
    /// while marking; from `scan` on, plus its strong count (less the hold
    /// of a root).
    trial: Vec<isize>,
    /// Node `i`'s bits ([`LIVE`], [`OPAQUE`], [`WAS_BUFFERED`]).
    state: Vec<u8>,
    /// Node `i`'s edges are `edges[ends[i]..ends[i + 1]]` (nodes are traced
    /// in order, so each one's edges follow the previous one's).
    ends: Vec<u32>,
    /// The first `roots` nodes are the roots, each held (one strong count)
    /// by the collection.
    roots: usize,
    edges: Vec<u32>,
    scratch: Vec<Object>,
    work: Vec<u32>,
    /// The last collection's garbage, no longer flagged `IN_GRAPH`, flagged
    /// `DEAD` (and not `OLD`), each with one hold.
    pub(crate) garbage: Vec<Object>,
    /// Live roots whose hold is the last strong reference (a trace dropped
    /// the others): the hold is to be released by the caller, which frees
    /// them by counting.
    pub(crate) held: Vec<Object>,
    /// Objects to buffer again after the last collection: those it kept
    /// alive only because their trace was incomplete, so that a later
    /// collection looks once more, and, after a minor collection, the live
    /// ones with references from outside the graph, which may come from old
    /// members of a garbage cycle, so that the next full collection judges
    /// them.
    pub(crate) retry: Vec<Object>,
}

/// What a collection found, besides `garbage` and `retry`.
pub(crate) struct Verdict {
    /// Objects traced (`touched`, in Nim's terms).
    pub(crate) traced: usize,
    /// Live young objects that this collection made old.
    pub(crate) promoted: usize,
    /// Old objects among the garbage (no longer flagged `OLD`).
    pub(crate) old_garbage: usize,
}

/// Restores every node's header if a trace panics: clears `IN_GRAPH`,
/// releases the holds on the roots, and hands the roots (and the nodes taken
/// out of a buffer on the way) back so that they are buffered again.
struct Unmark<'a> {
    graph: &'a mut Graph,
    rebuffer: &'a mut dyn FnMut(Object),
}

impl Drop for Unmark<'_> {
    fn drop(&mut self) {
        let graph = &mut *self.graph;
        let nodes = graph.objects.iter().zip(&graph.state);
        for (i, (&object, &bits)) in nodes.enumerate() {
            // SAFETY: nodes are live: roots are held, every other node is
            // owned by a node traced before it (a `Trace` impl does not give
            // up pointers its value owns while a collection runs), and an
            // object whose count reaches zero in the graph is kept.
            let h = unsafe { object.as_ref() };
            h.clear_flag(IN_GRAPH);
            if i < graph.roots {
                if h.strong() == 1 {
                    // The hold is the last reference (a trace dropped the
                    // others). Freeing the value would run its `Drop` while
                    // unwinding, which aborts if it panics: leak it instead.
                    continue;
                }
                h.set_strong(h.strong() - 1);
            }
            if bits & WAS_BUFFERED != 0 {
                (self.rebuffer)(object);
            }
        }
        graph.clear();
        graph.scratch.clear();
        graph.work.clear();
    }
}

impl Graph {
    /// Runs mark, scan and collect-white from `roots`.
    ///
    /// `roots` must be live, alive (not `DEAD`) objects just taken out of the
    /// roots buffers; their `BUFFERED` flag is cleared here and each gets a
    /// *hold* (one strong count), so that no root is freed while user code
    /// (a `trace`) runs. On success, a garbage root keeps its hold (every
    /// garbage object gets one), a live root's hold is released, but where it
    /// is the last strong reference: those roots are left in `held`. An
    /// object that
    /// a trace buffers before the graph enters it is taken out of its buffer
    /// with `unbuffer` (its slot becomes its node index). If a trace panics,
    /// the holds are released, every root and every node taken out of a
    /// buffer is passed to `rebuffer` (to be buffered again), every other
    /// flag restored, and the panic propagates.
    pub(crate) fn collect(
        &mut self,
        roots: &[Object],
        minor: bool,
        promote: bool,
        rebuffer: &mut dyn FnMut(Object),
        unbuffer: &mut dyn FnMut(Object),
    ) -> Verdict {
        debug_assert!(self.objects.is_empty() && self.ends.is_empty());
        // Indices are u32 (see `add_node`).
        assert!(
            u32::try_from(roots.len()).is_ok(),
            "collection graph too large"
        );
        for (index, &root) in roots.iter().enumerate() {
            // SAFETY: buffered objects are live.
            let h = unsafe { root.as_ref() };
            debug_assert!(h.has(BUFFERED) && !h.has(IN_GRAPH) && h.is_alive());
            h.clear_flag(BUFFERED);
            h.inc_strong();
            h.set_slot_and_flag(index, IN_GRAPH);
        }
        // The roots are nodes `0..roots.len()`, as `add_node` would make them.
        self.objects.extend_from_slice(roots);
        self.trial.resize(roots.len(), 0);
        self.state.resize(roots.len(), WAS_BUFFERED);
        self.ends.push(0);
        self.roots = roots.len();
        let unmark = Unmark {
            graph: self,
            rebuffer,
        };
        unmark.graph.mark(minor, unbuffer);
        // From here on no user code runs until the verdict is carried out.
        core::mem::forget(unmark);
        self.scan();
        self.collect_white(minor, promote)
    }

    /// Makes `object` a node with `bits` and trial count `trial`, and
    /// returns its index. Its `BUFFERED` flag must be clear: the slot becomes
    /// the node index.
    #[inline]
    fn add_node(&mut self, object: Object, bits: u8, trial: isize) -> u32 {
        // Indices are u32 to halve the graph's memory; four billion objects
        // in one collection would exhaust memory long before.
        let index = u32::try_from(self.objects.len()).expect("collection graph too large");
        // SAFETY: callers pass live objects reached through handles.
        let h = unsafe { object.as_ref() };
        debug_assert!(!h.has(IN_GRAPH | BUFFERED) && h.is_alive());
        h.set_slot_and_flag(index as usize, IN_GRAPH);
        self.objects.push(object);
        self.trial.push(trial);
        self.state.push(bits);
        index
    }

    /// Empties the graph (keeping the capacity).
    fn clear(&mut self) {
        self.objects.clear();
        self.trial.clear();
        self.state.clear();
        self.ends.clear();
        self.edges.clear();
    }

    /// Step 1: traces every node once, discovering new nodes as it goes.
    ///
    /// User code runs here (`trace`, and whatever it drops). It may clone,
    /// drop and buffer handles and call `collect()` (deferred); a node cannot
    /// be freed meanwhile (roots are held, the others owned by traced values)
    /// and cannot be buffered (`IN_GRAPH` stops it); a node's count that
    /// reaches zero anyway (a broken `Trace`) keeps the object, leaked.
    fn mark(&mut self, minor: bool, unbuffer: &mut dyn FnMut(Object)) {
        // Edges to these are not followed: dead objects are leaves, and a
        // minor collection does not enter the old generation.
        let skip = if minor { DEAD | OLD } else { DEAD };
        // Taken for the whole loop; if a trace panics only its capacity is lost.
        let mut scratch = core::mem::take(&mut self.scratch);
        let mut i = 0;
        while let Some(&object) = self.objects.get(i) {
            scratch.clear();
            let mut tracer = Tracer::local(&mut scratch);
            // SAFETY: nodes are live and alive (dead objects are never added).
            unsafe { header::trace_erased(object, &mut tracer) };
            if tracer.kept_alive() {
                self.state[i] |= OPAQUE;
            }
            for &target in &scratch {
                // SAFETY: a traced handle keeps its target's memory live.
                let t = unsafe { target.as_ref() };
                let flags = t.flags();
                if flags & skip != 0 {
                    continue;
                }
                let j = if flags & IN_GRAPH != 0 {
                    let j = t.slot();
                    self.trial[j] -= 1;
                    j as u32
                } else if flags & BUFFERED != 0 {
                    // A trace dropped a clone of it (before or after the
                    // collection began): its slot is about to be reused.
                    unbuffer(target);
                    self.add_node(target, WAS_BUFFERED, -1)
                } else {
                    self.add_node(target, 0, -1)
                };
                self.edges.push(j);
            }
            let end = u32::try_from(self.edges.len()).expect("collection graph too large");
            self.ends.push(end);
            i += 1;
            if i % super::CHECKPOINT_EVERY == 0 {
                super::checkpoint();
            }
        }
        self.scratch = scratch;
    }

    /// Step 2: completes the trial counts and marks live every node
    /// referenced from outside, and everything such nodes reach.
    fn scan(&mut self) {
        let roots = self.roots;
        let mut consistent = true;
        // The work list holds each node at most once (it is pushed when it
        // becomes `LIVE`): the spare capacity of `work`, reserved for every
        // node, with a local top (`work[..top]` written), rather than
        // `Vec::push` and `pop`, whose length the compiler reloaded and
        // stored around every write to `state`.
        self.work.clear();
        self.work.reserve(self.objects.len());
        let work = self.work.spare_capacity_mut();
        let mut top = 0;
        let nodes = self
            .objects
            .iter()
            .zip(&mut self.trial)
            .zip(&mut self.state);
        for (i, ((object, trial), bits)) in nodes.enumerate() {
            // SAFETY: nodes are live.
            let strong = unsafe { object.as_ref() }.strong() as isize;
            // A root's hold is not a reference from outside.
            *trial += strong - isize::from(i < roots);
            consistent &= *trial >= 0;
            if *trial > 0 || *bits & OPAQUE != 0 {
                *bits |= LIVE;
                work[top].write(i as u32);
                top += 1;
            }
        }
        if !consistent {
            // Reported pointers the value does not own (or twice): give up.
            self.state.iter_mut().for_each(|bits| *bits |= LIVE);
            return;
        }
        let (state, ends, edges) = (&mut self.state[..], &self.ends[..], &self.edges[..]);
        while let Some(next) = top.checked_sub(1) {
            top = next;
            // SAFETY: `work[..top + 1]` is written.
            let i = unsafe { work[top].assume_init() } as usize;
            let (start, end) = (ends[i] as usize, ends[i + 1] as usize);
            for &j in &edges[start..end] {
                let bits = &mut state[j as usize];
                if *bits & LIVE == 0 {
                    *bits |= LIVE;
                    work[top].write(j);
                    top += 1;
                }
            }
        }
    }

    /// Step 3: clears `IN_GRAPH` on every node; prepares the garbage for
    /// freeing (flag `DEAD`, not `OLD`, one hold: a root's is already there);
    /// promotes the live ones if asked; releases the holds on live roots.
    fn collect_white(&mut self, minor: bool, promote: bool) -> Verdict {
        self.garbage.clear();
        self.retry.clear();
        self.held.clear();
        let mut judge = Judge {
            garbage: &mut self.garbage,
            retry: &mut self.retry,
            held: &mut self.held,
            minor,
            promote,
            verdict: Verdict {
                traced: self.objects.len(),
                promoted: 0,
                old_garbage: 0,
            },
        };
        // The roots first, then the other nodes: two loops, so that neither
        // tests which kind each node is.
        let mut nodes = self.objects.iter().zip(&self.trial).zip(&self.state);
        for ((&object, &trial), &bits) in nodes.by_ref().take(self.roots) {
            // SAFETY: a node of the graph: live (roots are held; every other
            // node is owned by one traced before it, see `Unmark::drop`).
            unsafe { judge.node::<true>(object, trial, bits) };
        }
        for ((&object, &trial), &bits) in nodes {
            // SAFETY: as above.
            unsafe { judge.node::<false>(object, trial, bits) };
        }
        let verdict = judge.verdict;
        self.clear();
        verdict
    }
}

/// What [`Graph::collect_white`] fills in.
struct Judge<'a> {
    garbage: &'a mut Vec<Object>,
    retry: &'a mut Vec<Object>,
    held: &'a mut Vec<Object>,
    minor: bool,
    promote: bool,
    verdict: Verdict,
}

impl Judge<'_> {
    /// Carries out the verdict on one node (`ROOT`: one of the roots, which
    /// holds a hold already).
    ///
    /// # Safety
    /// `object` is a node of the graph being judged (its allocation is live).
    #[inline(always)]
    unsafe fn node<const ROOT: bool>(&mut self, object: Object, trial: isize, bits: u8) {
        // SAFETY: live, by the caller's contract.
        let h = unsafe { object.as_ref() };
        h.clear_flag(IN_GRAPH);
        if bits & LIVE == 0 {
            // Garbage: its handles are dead from now on.
            if h.has(OLD) {
                h.clear_flag(OLD);
                self.verdict.old_garbage += 1;
            }
            h.set_flag(DEAD);
            if !ROOT {
                h.inc_strong();
            }
            self.garbage.push(object);
            return;
        }
        if bits & OPAQUE != 0 && trial == 0 {
            self.retry.push(object);
        } else {
            if self.promote && !h.has(OLD) {
                h.set_flag(OLD);
                self.verdict.promoted += 1;
            }
            if self.minor && trial > 0 {
                self.retry.push(object);
            }
        }
        if ROOT {
            match h.strong() {
                1 => self.held.push(object),
                n => h.set_strong(n - 1),
            }
        }
    }
}
