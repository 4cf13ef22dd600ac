//! The concurrent cycle collector: trial deletion on a private snapshot,
//! then per-component validation before anything is freed.
//!
//! See the [module documentation](super) for the soundness argument. This
//! file holds the collector's graph (`Work`), the entry points and steps 1,
//! 3 and 6; step 2 is in `trace.rs`, step 4 in `validate.rs`, step 5 in
//! `free.rs`. In order, one collection:
//!
//! 1. **Drain** every thread's buffer (and, in a full collection, the old
//!    roots) — or, in a mutator's automatic minor collection
//!    ([`Kind::Local`]), its own buffer but the newest `RIPEN` entries
//!    (ripening, see `state.rs`), the exited threads' and the stale ones
//!    (see *Where collections run* in the module docs). Which roots a
//!    collection starts from never matters to soundness: any set of holds
//!    is validated the same way. Each armed entry of a live object becomes
//!    a *hold* (a strong reference owned by the collector) whose resulting
//!    header word is the object's snapshot `W`. A minor collection does not
//!    drain the entries of old objects: it moves them to the old roots,
//!    untouched.
//!
//!    A minor collection then runs steps 2 to 6 *group by group*: the trees
//!    of [`GROUP`] (128) roots at a time are traced, judged, validated and
//!    their garbage queued for step 5 before the next group starts, so that
//!    the passes after the trace find a group's objects still in the
//!    first-level cache (see *Cost*). Each group is judged as a collection
//!    of its own, with the holds of step 1: which roots it starts from does
//!    not matter to soundness. The objects an earlier group found live are
//!    old now, so a later group's trace does not enter them (the few it kept
//!    unpromoted, behind a cell it could not lock, it may trace again). A
//!    tree takes in every root it reaches, whatever its group, so a cycle is
//!    judged whole; but garbage that only a later group's garbage points to
//!    is kept by its own group (that reference comes from outside it) and
//!    freed by a later collection, after the drop of the later group's
//!    garbage buffers it again (the next full collection, as it was
//!    promoted). A full collection, [`collect`](super::collect)'s among
//!    them, judges all its roots at once: it enters old objects, so grouped
//!    it would trace what an earlier group found live again in every later
//!    group that reaches it (`tests.rs`,
//!    `a_minor_collection_judges_its_roots_in_groups`, counts it).
//! 2. **Trace** root by root: a root's *tree* is the root and the nodes it
//!    adds, traced in order (a root it reaches that is not in the graph yet
//!    is added there, with its tree). Nodes are numbered in this order, and
//!    every later step walks them in it: a garbage object is validated and
//!    freed next to the objects it points to, while their headers are in
//!    the cache (2-thread cycle churn: 30 % fewer simulated first-level
//!    cache misses and 13 % less CPU time than numbering every root first;
//!    the hub, all of whose nodes are roots, pays 1 % more instructions for
//!    the roots' list, within the timing noise).
//!    Each object is traced with its cells locked (guards kept in a
//!    sink) and a hold is taken on every newly seen target *before* its
//!    guards could be released, so the collector owns a strong reference to
//!    everything it has seen and never reads a value whose last handle is
//!    being dropped or that someone has `&mut` to. The guards are kept
//!    (*pinning*) until the current *pin window* closes: at the end of a
//!    root's tree once they exceed `PIN_BUDGET / 2`, within a tree once they
//!    exceed `PIN_BUDGET`, and at the end of the trace. An object's cells
//!    cannot change from its trace to its window's close, instant t*, and
//!    its other fields change only through `&mut` (impossible while we hold
//!    it): its traced edges are its edges at its window's t*. Tracing tree
//!    by tree keeps a small cycle in one window. Mutators wait for a pinned
//!    cell at most one window; the collector itself only `try_lock`s, so it
//!    never waits for a mutator and cannot deadlock with one.
//!    A minor collection does not enter old objects: an edge to one is not
//!    an edge of the graph, and the old object's handle stays an external
//!    reference in its target's count.
//! 3. **Trial deletion** on private counts (`count(W) - 1` minus internal
//!    edges); everything reachable from a node with a positive trial count,
//!    a cell that could not be locked, or an inconsistent (negative) count is
//!    live. The rest is the candidate garbage. The live nodes are promoted
//!    (unless a Nim16 trigger asked for this collection; a mutator's
//!    automatic minor collection, while the recent collections found mostly
//!    garbage, promotes a young node the second time it finds it live,
//!    *aging*, see `promote_node`); after a minor
//!    collection, each promoted node with a positive trial count is
//!    buffered again as an old root, because the reference that kept it may
//!    come from an old member of its own garbage cycle (the cross-generation
//!    rule).
//! 4. **Validate.** The Σ-test: at one instant t* with every member's
//!    cells locked, each member's snapshot count is exactly its in-degree
//!    from the members' cells (plus the hold); the Δ-test: CAS every
//!    member's word from `W` to `W | CLAIMED` (no clone, drop, upgrade or
//!    buffering since its snapshot, which covers t*; for a member with no
//!    `Weak`, loads instead of the CAS, see `claim`); if all succeed, set
//!    `DOOMED`. Together they prove that at t* every handle to a member was
//!    in a member's cell, and that none was made since: nothing outside can
//!    reach the members.
//!    - *Fast path* (`claim_pinned`): when no edge between candidates
//!      crosses pin windows, each component was traced within one window and
//!      the trace already is its Σ-test at that window's t* (its trial counts
//!      are zero, and every edge counted into it is a member's edge at t*),
//!      so only the Δ-test runs, on all candidates at once: no second trace,
//!      no components. The window test (`edge_crosses_windows`) is what
//!      keeps this sound: a handle moved from a cell of a closed window into
//!      a cell of a later one is traced twice with no word changing, which
//!      only the re-trace sees (`tests.rs::a_move_between_windows_is_caught_by_the_retrace`,
//!      loom model `move_between_cells_across_windows`: both fail with the
//!      test planted to return `false`).
//!    - *Slow path* (`validate_components`), when an edge crosses windows or
//!      a Δ-test failed: each weakly connected component of the candidate
//!      garbage on its own: if it spans windows, lock all of its cells at
//!      once and re-trace it (the Σ-test) and release the locks; then the
//!      Δ-test. A failing component is unclaimed and buffered again, and left
//!      for later.
//!    - *Stale snapshots*: a Δ-test compares words, which the 26-bit
//!      modification counter makes proof of no change only for snapshots
//!      younger than `age::MAX_AGE` (20 ms) at the claim. Past that, the
//!      fast path unclaims and each component is validated without its
//!      snapshots (`sigma_claim`): a re-trace with all of its cells locked,
//!      then each member claimed with its count equal to its in-degree plus
//!      the hold, then every member's word checked unchanged since its
//!      claim (the `TOUCHED` bit), all before the cells unlock.
//! 5. **Free** the doomed members (marked dead when doomed): drop every
//!    value (a panic is kept and re-raised at the end), then set `GONE` on
//!    each and release its hold (`Header::release_doomed`). With every value
//!    dropped first, the members' handles to each other are gone by the
//!    releases, so a hold is usually the last reference, which a load
//!    proves and a plain store releases: no RMW (loom model
//!    `dead_handle_drop_against_release`). This step runs *after the collector
//!    lock is released* (`Dying`), after step 6: a doomed object is
//!    reachable by no other thread, and `DOOMED` makes every upgrade and
//!    every other collector's hold fail, so the drops need no exclusion (the
//!    old members are counted under the lock, the only collector-private
//!    state they read). Another collection, or a mutator's, may run
//!    meanwhile: with one lock for every collection, two threads that both
//!    produce cyclic garbage spent their time waiting for each other's frees
//!    (2-thread cycle churn, `sync_profile churn`: a collection ran 81 % of
//!    the wall time and the two threads used 1.38 of 2 CPUs; freeing
//!    unlocked, 241 → 152 ns per cycle, 8 of 8 alternating pairs). The price
//!    is one more race, a drain of a doomed member's pending entry against
//!    its release (loom model `drain_against_unlocked_drop`), which the
//!    header word settles as it does a mutator's last drop against a drain;
//!    an explicit `collect()` waits for the frees of the collections that
//!    began before it (`Global::dying`, numbered in lock order), so that it
//!    still returns with them done — not for later ones, which may be
//!    waiting for it (a destructor of its own cycles that waits for another
//!    thread's `collect()`).
//! 6. Release the holds on everything else.
//!
//! A `Trace` impl that panics (steps 2 and 4) is treated as a cell that could
//! not be locked: its object is kept and buffered again; the panic is
//! re-raised at the end. The whole collection is a drop batch
//! (`drops::batch`): a value whose count reaches zero during it (released
//! by a field of a garbage value, or by our hold) is dropped at its end,
//! after the doomed values, so no user code runs under the collector lock
//! and a panicking `Drop` cannot unwind through the collection. A thread
//! starts no collection while it is in one (its destructors' `collect()`
//! and triggers do nothing).
//!
//! # Cost
//!
//! Per garbage object a collection makes a handful of atomic RMWs that this
//! design cannot remove: the drain's CAS (the hold: how a buffered object
//! passes atomically from its buffer to one collector), a `try_lock` and
//! an unlock per traced cell (the cells are the user's `Mutex`es), and the
//! decrements of the handles its value holds. A request cycle of the hub
//! benchmark makes about fifteen, where the single-threaded collector,
//! running the same steps, makes none (hub: 2.49× `recycler::Gc`, which
//! itself takes 0.92× a leaking `Arc`, thirtieth session). Builds that
//! remove them outright (measurement only, unsound with a second thread)
//! give the ceiling of any protocol that would: every count changed with a
//! plain load and store, the hub at 1.87× a leaking `Arc`; cells read
//! without locking, 1.90×; both, 1.46× (thirty-second session).
//!
//! The rest is where the lines come from. Every pass of a collection
//! (drain, trace, window close, claims, doom, drops, releases) walks the
//! objects of about a thousand roots, more than the first-level cache
//! holds; hence the groups of step 1 (first-level misses −30 % per hub
//! request, −43 % in 2-thread churn), nodes numbered in trace order and
//! dooming backwards, so that each pass starts where the previous one left
//! the cache; and 32-byte nodes, walked as slices. A hold that a load shows
//! to be the last reference is released with a store (step 5). The bursts
//! of frees that the values' own buffers make feed glibc's slower bins (see
//! *The allocator* in the module docs).
//!
//! Tried and not kept, each measured against the code it would replace:
//! prefetching roots or values, smaller pin windows, a smaller interval or
//! other group sizes (fewer misses, more live objects traced), tallying the
//! drops between members instead of decrementing, lazy sweeping, freeing
//! each group under the lock, and a crate-provided cell pinned with plain
//! stores (an upper bound: 13 % of the hub). The figures, and the profile
//! that bounds each, are in `docs/sync-collector-cost.md`.

use core::ptr::NonNull;
use core::sync::atomic::Ordering::{Acquire, Relaxed};

use super::age::Stamp;
use super::drops::{self, Panic};
use super::header::{count, Drained, Header, DOOMED};
use super::prim::MutexGuard;
use super::state::{global, push_root_quietly, Entry, Global};
use crate::guards::GuardSink;
use crate::stats::LazyPauseTimer;
use crate::Policy;

use self::free::Dying;
use self::trace::trace_node;
use self::validate::{claim_pinned, validate_components};

mod free;
mod trace;
mod validate;

/// No node / not a member of any component.
const NONE: u32 = u32::MAX;
/// Tags a graph slot that names a drained root not yet in the graph (its
/// position in `Work::roots`); node numbers stay below it.
const ROOT: u32 = 1 << 31;

/// How many roots' trees one group of a minor collection judges at once:
/// steps 2 to 6 run group by group, so that the passes after the trace
/// find a group's objects still in the first-level cache (see *Cost*).
#[cfg(not(any(loom, miri)))]
pub(super) const GROUP: usize = 128;
/// Under Miri, whose tests use small graphs, four: they still span groups.
#[cfg(all(miri, not(loom)))]
pub(super) const GROUP: usize = 4;
/// Under loom, one: every root's tree is a group, so the models' minor
/// collections judge in as many groups as they have roots.
#[cfg(loom)]
pub(super) const GROUP: usize = 1;

/// The most cell guards a trace keeps at once (one pin window; see step 2).
/// Bounds how long a mutator may wait for a cell the collector pinned: a
/// trace of a few thousand objects.
#[cfg(not(any(loom, miri)))]
pub(super) const PIN_BUDGET: usize = 8192;
/// Under Miri, whose tests use small graphs, sixteen: they still span
/// windows.
#[cfg(all(miri, not(loom)))]
pub(super) const PIN_BUDGET: usize = 16;
/// Under loom, one guard: a window closes after every root's tree and
/// within one at its second guard, so a three-object cycle spans two windows
/// (the fallback to re-tracing validation) while two-object cycles fit in
/// one.
#[cfg(loom)]
pub(super) const PIN_BUDGET: usize = 1;

/// Which collection to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// From the young roots only, never entering old objects; the live
    /// objects are promoted.
    Minor,
    /// A minor collection from the roots of the calling thread (and of
    /// exited threads, and of buffers no collection took for
    /// [`STALE`](super::state::STALE) collections): the Adaptive trigger's
    /// collection on a mutator.
    Local,
    /// From every root, entering everything; the live objects are promoted
    /// if `promote` (not for Nim16, which has no generations).
    Full { promote: bool },
}

impl Kind {
    /// Whether it starts from the young roots only and never enters an old
    /// object.
    fn is_minor(self) -> bool {
        matches!(self, Kind::Minor | Kind::Local)
    }

    /// Which live objects this collection promotes (step 3); `aging`:
    /// whether the recent collections found mostly garbage (see
    /// `promote_node`).
    fn promotion(self, aging: bool) -> Promotion {
        match self {
            Kind::Full { promote: false } => Promotion::Never,
            Kind::Local if aging => Promotion::OnSecondSurvival,
            Kind::Local | Kind::Minor | Kind::Full { promote: true } => Promotion::Live,
        }
    }

    /// The full collection the calling thread's policy runs on `collect`.
    pub(crate) fn full_for_this_thread() -> Kind {
        Kind::Full {
            promote: super::state::policy() != Policy::Nim16,
        }
    }
}

/// A drained root (held) that no tree has reached yet: it becomes a node
/// when its own tree starts or another tree reaches it.
struct Root {
    header: NonNull<Header>,
    /// The snapshot its hold produced; [`TAKEN`] once it is a node or its
    /// hold was given back.
    word: u64,
}

/// [`Root::word`] of a root that left the list: no snapshot, which counts
/// our hold, is zero.
const TAKEN: u64 = 0;

/// What a graph slot says about an object (see [`Work::lookup`]).
enum Seen {
    /// Node `i` of the graph.
    Node(u32),
    /// Drained root `k`, not in the graph yet.
    Root(usize),
    /// Neither: not held by this collection.
    New,
}

/// One object the collector holds: 32 bytes, two to a cache line (every
/// step after the trace walks the nodes once or twice).
///
/// Its out-edges and its pin window are not stored: nodes are traced in
/// the order of their numbers, each exactly once, and each pushes its edges
/// when traced, so node `i`'s edges run from its `first` to node `i + 1`'s
/// (see [`Work::edges_of`]); windows are ranges of consecutive nodes (see
/// [`Work::window_of`]).
struct Node {
    header: NonNull<Header>,
    /// The header word right after our hold: the Δ-test snapshot.
    word: u64,
    /// The trial count: the snapshot count minus our hold minus the
    /// internal edges seen so far (then, in a component's Σ-test, what is
    /// left of it).
    trial: i64,
    /// Where this node's out-edges start in `Work::edges` (set when it is
    /// traced).
    first: u32,
    /// Found live (reachable from an external reference or a kept node).
    live: bool,
    /// A cell could not be inspected.
    kept: bool,
    /// Our hold has been released.
    released: bool,
}

#[cfg(all(not(loom), target_pointer_width = "64"))]
const _: () = assert!(core::mem::size_of::<Node>() == 32);

/// Everything one collection works on. Each thread keeps its own between
/// its collections so that the buffers are reused (each is empty outside a
/// collection; only the capacity is kept). Kept behind the collector lock
/// instead, they moved between cores whenever two threads took turns at
/// collecting: each collection first fetched the lines of the nodes, edges
/// and guards the other core had written (2-thread cycle churn with an
/// interval of 256 roots: 176 → 143 ns per cycle; see *The allocator* in
/// the module docs).
///
/// Nodes are numbered by position, in the order they are traced: a root,
/// then the nodes its tree reaches (roots included), then the next root not
/// reached yet. An object's number is also stored in its header's
/// [`GraphSlot`](super::header::GraphSlot) so that an edge is resolved
/// without hashing: `lookup` trusts the slot only when `nodes[slot].header`
/// is that very header (or, tagged [`ROOT`], `roots[slot].header`). Every
/// later step walks the nodes in that order, so a garbage object is
/// validated and freed next to the objects it points to, while their
/// headers are still in the cache (numbering all roots first, as the drain
/// meets them, put every member reached from a root about a whole
/// collection's worth of objects away from it).
#[derive(Default)]
struct Work {
    nodes: Vec<Node>,
    /// The drained roots (step 1), until the trace adds them (step 2).
    roots: Vec<Root>,
    /// Out-edges (node numbers), grouped by source in node order.
    edges: Vec<u32>,
    /// The first node of every pin window but the first (step 2), in order.
    windows: Vec<u32>,
    /// Edge targets reported by one trace.
    targets: Vec<NonNull<()>>,
    /// Cell guards kept while a trace's targets are held / a component is
    /// validated.
    guards: GuardSink,
    entries: Vec<Entry>,
    stack: Vec<u32>,
    /// The nodes found live (step 3), in marking order.
    live: Vec<u32>,
    /// Union-find parents, then component numbers by node.
    parent: Vec<u32>,
    member_of: Vec<u32>,
    /// Members of every component, grouped; `bounds[c]..bounds[c + 1]`.
    members: Vec<u32>,
    bounds: Vec<u32>,
    doomed: Vec<u32>,
    /// Entries bound for `Global::old_roots` (moved there in one step).
    old_roots: Vec<Entry>,
    /// The first panic of a `Trace` impl in this collection (caught: the
    /// object is kept, as if a cell could not be locked; re-raised at the
    /// end), or of a cell guard's drop ([`Work::unlock`]).
    panic: Panic,
}

#[cfg(not(loom))]
std::thread_local! {
    /// This thread's collector buffers (empty between collections).
    static WORK: core::cell::Cell<Work> = core::cell::Cell::new(Work::default());
}

/// The most nodes whose buffers a thread keeps between its collections
/// (32 bytes each, plus edges): after a larger collection (a full one over
/// a large heap) it gives them back to the allocator.
#[cfg(not(loom))]
const KEEP_NODES: usize = 1 << 14;

impl Work {
    /// This thread's buffers (new ones under loom, or while the thread
    /// exits).
    fn take() -> Work {
        #[cfg(not(loom))]
        let work = WORK.try_with(core::cell::Cell::take).unwrap_or_default();
        #[cfg(loom)]
        let work = Work::default();
        work
    }

    /// Adds a held object; `None` if the graph cannot number more nodes
    /// (the object is then simply left out: an edge to it stays an external
    /// reference, which is always safe).
    #[inline]
    fn add(&mut self, header: NonNull<Header>, word: u64) -> Option<u32> {
        let i = u32::try_from(self.nodes.len()).ok().filter(|&i| i < ROOT)?;
        self.nodes.push(Node {
            header,
            word,
            trial: count(word) as i64 - 1,
            first: 0,
            live: false,
            kept: false,
            released: false,
        });
        // SAFETY: we hold the collector lock and `header`.
        unsafe { header.as_ref().slot.set(i) };
        Some(i)
    }

    /// Where `header` is in this collection, if anywhere.
    ///
    /// # Safety
    /// `header` is alive (reported by a pinned handle); collector lock held.
    #[inline]
    unsafe fn lookup(&self, header: NonNull<Header>) -> Seen {
        // SAFETY: forwarded contract.
        let i = unsafe { header.as_ref().slot.get() };
        if i & ROOT == 0 {
            match self.nodes.get(i as usize) {
                Some(node) if node.header == header => return Seen::Node(i),
                _ => {}
            }
        } else {
            let k = (i & !ROOT) as usize;
            match self.roots.get(k) {
                Some(root) if root.header == header => return Seen::Root(k),
                _ => {}
            }
        }
        Seen::New
    }

    /// The node of `header`, if it is in the graph.
    ///
    /// # Safety
    /// As for [`Work::lookup`].
    #[inline]
    unsafe fn node_of(&self, header: NonNull<Header>) -> Option<u32> {
        // SAFETY: forwarded contract.
        match unsafe { self.lookup(header) } {
            Seen::Node(i) => Some(i),
            _ => None,
        }
    }

    /// The out-edges of node `i` (traced, as every node is once step 2 is
    /// over): from its `first` to the next node's, or to the end.
    #[inline]
    fn edges_of(&self, i: usize) -> core::ops::Range<usize> {
        edges_of(&self.nodes, &self.edges, i)
    }

    /// The pin window node `i` was traced in (step 2).
    #[inline]
    fn window_of(&self, i: u32) -> usize {
        self.windows.partition_point(|&start| start <= i)
    }

    /// Adds drained root `k` to the graph (as the next node). If the graph
    /// is full, gives its hold back and leaves it buffered for a later
    /// collection (an edge to it then stays an external reference).
    #[inline]
    fn add_root(&mut self, k: usize) -> Option<u32> {
        let Root { header, word } = self.roots[k];
        debug_assert_ne!(word, TAKEN);
        self.roots[k].word = TAKEN;
        let added = self.add(header, word);
        if added.is_none() {
            drop_root(header);
        }
        added
    }

    /// Unlocks every cell whose guard is kept. A guard's drop is user code
    /// (`sync::TraceLock`): each is caught, and the first panic kept in
    /// `panic`, re-raised when the collection ends. Unwinding from here
    /// aborted the process when a second guard's drop panicked during the
    /// unwind (two panicking unlocks of one pin window), and left the
    /// members of a component being validated claimed (every later upgrade
    /// of one waited for ever) or doomed and never dropped. Test
    /// `gc/tests/sync_guard_drop_during_claim.rs`.
    #[inline]
    fn unlock(&mut self) {
        self.guards.clear_catching(&mut self.panic);
    }

    /// Empties what one group of a collection used (`judge_group`).
    fn reset_group(&mut self) {
        self.unlock();
        // Step 6 of the group released every hold.
        debug_assert!(self.nodes.iter().all(|node| node.released));
        self.nodes.clear();
        self.edges.clear();
        self.windows.clear();
        self.targets.clear();
        self.stack.clear();
        self.live.clear();
        self.parent.clear();
        self.member_of.clear();
        self.members.clear();
        self.bounds.clear();
        self.doomed.clear();
    }

    /// Empties the buffers and keeps them for this thread's next
    /// collection, unless they are larger than [`KEEP_NODES`] needs.
    fn finish(mut self) {
        self.reset_group();
        self.roots.clear();
        self.entries.clear();
        debug_assert!(self.old_roots.is_empty());
        #[cfg(not(loom))]
        if self.nodes.capacity() <= KEEP_NODES {
            let _ = WORK.try_with(|w| w.set(self));
        }
    }
}

impl Drop for Work {
    /// Only finds nodes if a collection unwinds (`Trace` and `Drop` panics
    /// are caught, so only on a bug or an allocation failure): buffers every
    /// object that is not doomed again, so that no root drained by this
    /// collection is forgotten, and releases the holds (inside the
    /// collection's drop batch: no user code runs here).
    fn drop(&mut self) {
        if !self.old_roots.is_empty() {
            flush_old_roots(global(), &mut self.old_roots);
        }
        // Guards are left only when a collection unwinds: a guard's panic
        // is then dropped, not kept.
        let mut panic = None;
        self.guards.clear_catching(&mut panic);
        crate::payload::discard(panic);
        for root in &self.roots {
            if root.word != TAKEN {
                drop_root(root.header);
            }
        }
        self.roots.clear();
        for i in 0..self.nodes.len() {
            let node = &self.nodes[i];
            // SAFETY: held until `release` below.
            if !node.released && unsafe { node.header.as_ref() }.word.load(Acquire) & DOOMED == 0 {
                rebuffer(node.header);
            }
            release(&mut self.nodes[i]);
        }
    }
}

/// Releases our hold on `node` (may drop its value if it was the last
/// reference).
fn release(node: &mut Node) {
    if !node.released {
        node.released = true;
        // SAFETY: the hold is a strong reference we own.
        unsafe { Header::dec_strong(node.header) };
    }
}

/// [`Work::edges_of`], on the fields.
#[inline]
fn edges_of(nodes: &[Node], edges: &[u32], i: usize) -> core::ops::Range<usize> {
    let end = match nodes.get(i + 1) {
        Some(next) => next.first,
        None => edges.len() as u32,
    };
    nodes[i].first as usize..end as usize
}

/// Moves `entries` to the old roots.
fn flush_old_roots(global: &Global, entries: &mut Vec<Entry>) {
    if entries.is_empty() {
        return;
    }
    let mut old_roots = global.old_roots.lock();
    old_roots.append(entries);
    global
        .old_roots_waiting
        .store(old_roots.len() as u64, Relaxed);
}

/// Runs one collection if no other is running. Returns `(freed, traced)`.
pub(crate) fn try_collect(kind: Kind) -> Option<(usize, usize)> {
    if collecting() {
        // A destructor of this thread's collection, which may run after the
        // lock is released (step 5): no collection inside another.
        return None;
    }
    let global = global();
    let lock = global.try_collector()?;
    Some(run(global, lock, kind))
}

/// Pacing for a thread whose garbage outruns a running collection: waits
/// for that collection to end, but at most `patience` (so a destructor of
/// the running collection that needs a lock this thread holds delays it,
/// never deadlocks it), then collects the roots buffered meanwhile. Never
/// waits when called from inside a collection (a destructor), nor under
/// loom.
pub(crate) fn collect_paced(kind: Kind, patience: std::time::Duration) -> Option<(usize, usize)> {
    if collecting() {
        return None;
    }
    let global = global();
    #[cfg(not(loom))]
    let lock = global.collector_within(patience);
    #[cfg(loom)]
    let lock = {
        let _ = patience;
        global.try_collector()
    };
    Some(run(global, lock?, kind))
}

/// An explicit collection ([`collect`](super::collect)): up to `rounds`
/// collections of `kind`, until one frees nothing, each waiting for a
/// running collection to end; then waits for the free phases (step 5) of
/// the collections that began before the first round, so that the garbage
/// they took is dropped when it returns (with the values those released by
/// counting), and if it had to wait, runs once more: those frees may have
/// dropped the last outside handle to a cycle. Not for the collections that
/// began later: one of those may be waiting for this thread (a destructor it
/// runs joins this thread, say), and their garbage was only found after ours.
/// Returns at once when called from inside a collection (a destructor), and,
/// under loom, runs one round if no other thread is collecting (models need
/// no blocking).
pub(crate) fn collect_explicit(kind: Kind, rounds: usize) {
    if collecting() {
        return;
    }
    let global = global();
    // The number of the first free phase (step 5) not begun before us.
    #[cfg_attr(loom, allow(unused_mut))]
    let mut first = None;
    // A second pass only after waiting for an earlier collection's frees:
    // the values they dropped may have released the last outside handle to
    // a cycle (an old one that collection did not enter), which is buffered
    // only then, after our drains (`gc/tests/sync_collect_after_thread.rs`:
    // it survived `collect()`). Our own rounds' frees are done when `run`
    // returns, and later collections are not waited for, so one more pass
    // suffices.
    for _pass in 0..2 {
        for _ in 0..rounds {
            #[cfg(not(loom))]
            let lock = global.collector_lock();
            #[cfg(not(loom))]
            first.get_or_insert(global.batches.load(Relaxed));
            #[cfg(loom)]
            let Some(lock) = global.try_collector() else {
                return;
            };
            let (freed, _) = run(global, lock, kind);
            if freed == 0 {
                break;
            }
        }
        if !wait_for_earlier_frees(global, first) {
            break;
        }
    }
}

/// Waits for the free phases numbered below `first` (begun before an
/// explicit collection's first round); returns whether any was running.
#[cfg(not(loom))]
fn wait_for_earlier_frees(global: &Global, first: Option<u64>) -> bool {
    let Some(first) = first else {
        return false;
    };
    let mut waited = false;
    while global.dying.lock().iter().any(|&batch| batch < first) {
        waited = true;
        super::prim::spin_wait();
    }
    waited
}

/// Under loom there are no free-phase numbers: nothing to wait for.
#[cfg(loom)]
fn wait_for_earlier_frees(_: &Global, _: Option<u64>) -> bool {
    false
}

/// The collector thread's collection: waits for a running one, then runs
/// the kind the Adaptive rule asks for now.
#[cfg(not(loom))]
pub(crate) fn collect_requested() {
    let global = global();
    let kind = if global.full_due() {
        Kind::Full { promote: true }
    } else {
        Kind::Minor
    };
    let lock = global.collector_lock();
    run(global, lock, kind);
}

#[cfg(not(loom))]
std::thread_local! {
    /// Whether this thread is running a collection (its destructors may
    /// buffer roots; they must not wait for the collection they are in,
    /// nor start one inside it).
    static COLLECTING: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

#[cfg(loom)]
loom::thread_local! {
    static COLLECTING: core::cell::Cell<bool> = core::cell::Cell::new(false);
}

/// Whether this thread is inside a collection (see `COLLECTING`).
pub(super) fn collecting() -> bool {
    COLLECTING.try_with(core::cell::Cell::get).unwrap_or(false)
}

/// One collection under `lock`, as a drop batch: the values whose count
/// reaches zero during it (a hold released last, a field of a garbage value)
/// are dropped after the lock is released, each under `catch_unwind`. Then
/// the first panic (of a `Trace`, then of a `Drop`) is re-raised, unless
/// the thread is unwinding (a `collect()` from a destructor the unwind
/// runs): a second panic would abort the process. The hook reported it.
///
/// The thread counts as collecting (`COLLECTING`) and the collection's free
/// phase as running (`Global::dying`) until the values its drop batch
/// queued are dropped too: those values (a `sync::Gc` that only a member of
/// a collected cycle owned) are part of its garbage, and an explicit
/// `collect()` on another thread returns only after them (it used to return
/// while they were being dropped: `gc/tests/sync_collect_wait_leaf.rs`).
/// Their destructors' `collect()` therefore returns at once, as the
/// members' do, instead of waiting for the batch that runs them. (A
/// collection nested in an enclosing drop loop leaves its queued values to
/// that loop, which it cannot wait for.)
fn run(global: &Global, lock: MutexGuard<'_, ()>, kind: Kind) -> (usize, usize) {
    /// Clears the in-collection flag and ends the free phase (its number
    /// in `Global::dying`), also when unwinding.
    struct Collecting<'g> {
        #[cfg_attr(loom, allow(dead_code))]
        global: &'g Global,
        #[cfg_attr(loom, allow(dead_code))]
        batch: Option<u64>,
    }
    impl Drop for Collecting<'_> {
        fn drop(&mut self) {
            #[cfg(not(loom))]
            if let Some(batch) = self.batch {
                self.global.dying.lock().retain(|&b| b != batch);
            }
            let _ = COLLECTING.try_with(|c| c.set(false));
        }
    }
    COLLECTING.with(|c| c.set(true));
    let mut collecting = Collecting {
        global,
        batch: None,
    };
    let ((freed, traced, panic), dropped) =
        drops::batch(|| run_locked(global, lock, kind, &mut collecting.batch));
    drop(collecting);
    if let Some(payload) = crate::payload::first_of(panic, dropped) {
        crate::payload::resume(payload);
    }
    (freed, traced)
}

/// [`run`]'s collection proper.
/// `batch` receives the number of its free phase (step 5), which `run`
/// ends.
fn run_locked(
    global: &Global,
    lock: MutexGuard<'_, ()>,
    kind: Kind,
    #[cfg_attr(loom, allow(unused_variables))] batch: &mut Option<u64>,
) -> (usize, usize, Panic) {
    // This thread's buffers, taken out so that a panic (a `Trace` impl or a
    // destructor) drops them with their holds released.
    let mut work = Work::take();
    let mut timer = LazyPauseTimer::start();
    let mut dying = Dying::take();
    let (freed, traced, mut panic) =
        collect_locked(global, &mut work, kind, &mut dying.0, &mut timer);
    work.finish();
    // Numbered before the lock goes: an explicit collection that takes it
    // next waits for these frees (`collect_explicit`).
    #[cfg(not(loom))]
    {
        let number = global.batches.fetch_add(1, Relaxed);
        global.dying.lock().push(number);
        *batch = Some(number);
    }
    drop(lock);
    // 5 (unlocked). Drop the doomed values and release their holds.
    timer.checkpoint();
    let dropped = dying.free();
    panic = crate::payload::first_of(panic, dropped);
    let (pause, cpu) = timer.stop();
    let pause = pause.as_nanos() as u64;
    global.total_pause_ns.fetch_add(pause, Relaxed);
    global.max_pause_ns.fetch_max(pause, Relaxed);
    global
        .total_pause_cpu_ns
        .fetch_add(cpu.as_nanos() as u64, Relaxed);
    (freed, traced, panic)
}

/// One collection; the caller holds the collector lock.
fn collect_locked(
    global: &Global,
    w: &mut Work,
    kind: Kind,
    dying: &mut Vec<NonNull<Header>>,
    timer: &mut LazyPauseTimer,
) -> (usize, usize, Panic) {
    let minor = kind.is_minor();
    let promote = kind != Kind::Full { promote: false };

    // 1. Drain (a minor collection leaves the old objects' entries alone).
    //    Every snapshot is taken after `since`, which bounds its age.
    let since = Stamp::drain();
    global.drain(&mut w.entries, kind == Kind::Local);
    if !minor {
        w.entries.append(&mut global.old_roots.lock());
        global.old_roots_waiting.store(0, Relaxed);
    }
    let mut entries = core::mem::take(&mut w.entries);
    for Entry(header) in entries.drain(..) {
        // SAFETY: the entry's `BUFFERED` bit keeps the header alive, and we
        // hold the collector lock.
        if minor && unsafe { header.as_ref().generation.is_old() } {
            w.old_roots.push(Entry(header));
            continue;
        }
        // SAFETY: we own the entry.
        if let Drained::Held(word) = unsafe { Header::drain(header) } {
            let k = w.roots.len();
            match u32::try_from(k).ok().filter(|&k| k < ROOT) {
                Some(k) => {
                    // SAFETY: we hold it and the collector lock.
                    unsafe { header.as_ref().slot.set(k | ROOT) };
                    w.roots.push(Root { header, word });
                }
                // Too many roots: for a later collection.
                None => drop_root(header),
            }
        }
    }
    w.entries = entries;
    flush_old_roots(global, &mut w.old_roots);

    // Steps 2 to 6, in a minor collection `GROUP` roots' trees at a time (a
    // tree takes in the roots it reaches, whatever their group); a full one
    // judges all at once (step 1).
    let mut tally = Tally::default();
    let group = if minor { GROUP } else { usize::MAX };
    let mut start = 0;
    while start < w.roots.len() {
        let end = w.roots.len().min(start.saturating_add(group));
        judge_group(global, w, kind, start..end, since, dying, &mut tally);
        w.reset_group();
        timer.checkpoint();
        start = end;
    }
    w.roots.clear();
    let panic = w.panic.take();
    let Tally {
        freed,
        traced,
        promoted,
        aged,
        old_freed,
    } = tally;
    global.freed_by_collector.fetch_add(freed as u64, Relaxed);
    if !minor {
        global.old_freed_by_collector.fetch_add(old_freed, Relaxed);
    }

    global.nodes_traced.fetch_add(traced as u64, Relaxed);
    global.promoted.fetch_add(promoted as u64, Relaxed);
    if minor {
        global.minor_collections.fetch_add(1, Relaxed);
        global
            .promoted_since_full
            .fetch_add(promoted as u64, Relaxed);
    } else {
        global.promoted_since_full.store(0, Relaxed);
        global.old_at_full.store(global.old_objects(), Relaxed);
    }
    // The live objects traced for the first time (or the second, when they
    // were aged the first) are the wasted work the next collection must pay
    // for (the old ones are amortised by the full trigger); without
    // generations, every live object traced.
    let wasted = if promote {
        promoted + aged
    } else {
        traced - freed
    };
    global.last_live_traced.store(wasted as u64, Relaxed);
    // The trigger's interval follows the yield (not for Nim16, whose
    // threads keep their own rule).
    if promote {
        global.adapt_level(freed, traced);
    }
    // Last: the per-thread triggers restart when they see a new epoch.
    global.collections.fetch_add(1, Relaxed);
    (freed, traced, panic)
}

/// What a collection did, summed over its groups.
#[derive(Default)]
struct Tally {
    freed: usize,
    traced: usize,
    /// Young objects promoted.
    promoted: usize,
    /// Young objects found live for the first time and left young (aging).
    aged: usize,
    /// Of `freed`, the old objects.
    old_freed: u64,
}

/// Which live objects a collection promotes (step 3).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Promotion {
    /// None: a `Nim16` thread's collection (Nim 1.6.12 had no generations).
    Never,
    /// Every young object found live: explicit collections and the
    /// collector thread's.
    Live,
    /// A young object the second time a collection finds it live (*aging*):
    /// a mutator's automatic minor collection, which leaves its newest roots
    /// to ripen (see `promote_node`).
    OnSecondSurvival,
}

/// Steps 2 to 6 of a collection for the trees of the drained roots in
/// `group`, adding what it did to `tally`.
fn judge_group(
    global: &Global,
    w: &mut Work,
    kind: Kind,
    group: core::ops::Range<usize>,
    since: Stamp,
    dying: &mut Vec<NonNull<Header>>,
    tally: &mut Tally,
) {
    let (minor, rule) = (kind.is_minor(), kind.promotion(global.mostly_garbage()));
    // 2. Trace root by root (each root's tree at once), holding every target
    //    before the source's cells unlock. The cells stay locked (pinned)
    //    until the current *window* closes: when the guards exceed
    //    `PIN_BUDGET / 2` at the end of a root's tree, or
    //    `PIN_BUDGET` within one, they are released and a new window starts.
    //    The edges of the nodes traced in one window are a snapshot of one
    //    instant: the window's close. Tree by tree, a small garbage cycle is
    //    traced within one window. Nodes are traced in the order they are
    //    added (a tree adds the roots it reaches, too).
    let mut next = 0; // the next node to trace
    for k in group {
        if w.roots[k].word == TAKEN {
            continue; // reached by an earlier root's tree
        }
        if w.add_root(k).is_none() {
            continue;
        }
        // The tree of root `k`: everything it adds, in order.
        while next < w.nodes.len() {
            trace_node(w, next, minor);
            next += 1;
            if w.guards.len() > PIN_BUDGET {
                // t* of this window: its nodes' cells are all locked now.
                w.unlock();
                w.windows.push(next as u32);
            }
        }
        if w.guards.len() > PIN_BUDGET / 2 {
            // t* of this window.
            w.unlock();
            w.windows.push(next as u32);
        }
    }
    // Every root of the group is a node now (or was given back), and every
    // node is traced.
    debug_assert_eq!(next, w.nodes.len());
    // t* of the last window.
    w.unlock();
    tally.traced += w.nodes.len();

    // 3. Trial deletion on private counts. The live nodes are listed in
    //    `w.live` (the marking's work list, kept: step 6 releases them) and
    //    promoted as they are marked (`promote_node`). Only the order of the
    //    work differs from a separate promotion pass: the same nodes are
    //    live, promoted and queued as old roots, all before validation, and
    //    generations are private to the collector-lock holder.
    // Through the fields, so that the passes iterate slices: indexing
    // through `w` re-checked bounds at every step (a push may reallocate
    // another of its vectors, as far as the compiler knows).
    let Work {
        nodes,
        edges,
        live,
        old_roots,
        ..
    } = &mut *w;
    for (i, node) in nodes.iter_mut().enumerate() {
        if node.trial != 0 || node.kept {
            node.live = true;
            live.push(i as u32);
            if node.kept || node.trial < 0 {
                // Opaque right now (a locked cell) or seen inconsistently
                // while it changed: not known to be live, so look again
                // next time.
                rebuffer(node.header);
            } else {
                promote_node(node, minor, rule, old_roots, tally);
            }
        }
    }
    let mut next = 0;
    while let Some(&i) = live.get(next) {
        next += 1;
        for &j in &edges[edges_of(nodes, edges, i as usize)] {
            let node = &mut nodes[j as usize];
            if !node.live {
                node.live = true;
                live.push(j);
                // Marked from a live node, not by its own count: `trial`
                // is zero and `kept` clear (else the loop above marked it).
                promote_node(node, minor, rule, old_roots, tally);
            }
        }
    }
    flush_old_roots(global, &mut w.old_roots);

    // 4. Validation. Fast path: the whole candidate garbage at once, when all
    //    of it was pinned (its Σ-test is the trial itself); otherwise, or if
    //    a Δ-test fails, component by component with a re-trace.
    let pinned = claim_pinned(w, since);
    if !pinned {
        validate_components(w, since);
    }

    // 5. Free the doomed (marked dead by `doom`): their holds go to `dying`,
    //    whose values `run_locked` drops after the lock is released (see
    //    `Dying::free`). Counted here, where generations may be read.
    for &m in &w.doomed {
        let node = &mut w.nodes[m as usize];
        // SAFETY: held; collector lock held.
        tally.old_freed += u64::from(unsafe { node.header.as_ref().generation.is_old() });
        node.released = true;
        dying.push(node.header);
    }
    tally.freed += w.doomed.len();

    // 6. Everything else: after the fast path, exactly the live nodes (every
    //    other node was doomed and released in step 5); after the slow path,
    //    also the members of the components that failed validation.
    w.unlock();
    if pinned {
        for &i in &w.live {
            release(&mut w.nodes[i as usize]);
        }
    } else {
        w.nodes.iter_mut().for_each(release);
    }
}

/// Step 3 for a node found live (not kept opaque by a cell, count
/// consistent), under `rule`: promotes it if it is young and, after a
/// minor collection, queues it as an old root (in `old_roots`) if its trial
/// count is positive; or, aging, leaves it young the first time.
///
/// The cross-generation rule: a minor collection sees a reference from an
/// old object as external, so a positive trial count does not prove the
/// node live: the old object may belong to the node's own garbage cycle. The
/// next full collection judges it (without the rule, a garbage cycle through
/// both generations whose only buffered member was young would leave every
/// buffer and leak for ever).
///
/// Aging: a mutator's automatic minor collection leaves its newest roots to
/// ripen, and that boundary usually cuts through some piece of work (a
/// request's objects): the drained part is found live through the edges of
/// the ripening part, which the trace never entered (edges are followed
/// forwards only). Promoted, the drained part would be old garbage a moment
/// later, and, worse, its edges would then keep the rest of its work
/// alive in every minor collection (nepotism), until a full collection. So
/// such a collection promotes a young object only the second time it finds
/// it live; the first time it marks it, and buffers it again if its trial
/// count is positive (the cross-generation rule's case, a young root now:
/// the next minor collection judges it, with the rest of its work, and
/// promotes it if it is still live, with the rule).
///
/// Aging pays where collections find mostly garbage, as in a server, whose
/// cut-off requests die a moment later. Where they find mostly live objects
/// (long-lived graphs that the mutators keep buffering, as in dumpster's
/// random operations), the object found live is live, and a second trace
/// before promoting it is wasted. So a collection ages only while the
/// Adaptive interval is at its floor, that is while the recent collections
/// freed at least half of what they traced (`Global::mostly_garbage`; the
/// generational collectors' adaptive tenuring, on the same signal as the
/// trigger). Measured on a 2-vCPU AMD EPYC (thirtieth session): dumpster's
/// random operations 0.979× on two threads and 0.982× on one (20 pairs
/// each), the work-stealing server, the hub and the cycle churn unchanged
/// (`ab --a orc --b orc` 0.996×, 0.992–1.002, 100 pairs; 1.001× and
/// 0.986×, 12 pairs each).
fn promote_node(
    node: &Node,
    minor: bool,
    rule: Promotion,
    old_roots: &mut Vec<Entry>,
    tally: &mut Tally,
) {
    debug_assert!(node.live && !node.kept && node.trial >= 0);
    // SAFETY: held; collector lock held.
    let header = unsafe { node.header.as_ref() };
    // SAFETY: as above.
    let young = !unsafe { header.generation.is_old() };
    match rule {
        Promotion::Never => return,
        // SAFETY: as above.
        Promotion::OnSecondSurvival if young && !unsafe { header.generation.survive() } => {
            tally.aged += 1;
            if node.trial > 0 {
                rebuffer(node.header);
            }
            return;
        }
        Promotion::Live | Promotion::OnSecondSurvival => {}
    }
    if young {
        // SAFETY: as above.
        unsafe { header.generation.promote() };
        tally.promoted += 1;
    }
    if minor && node.trial > 0 && header.rebuffer() {
        old_roots.push(Entry(node.header));
    }
}

/// Gives back the hold on a drained root that does not enter the graph,
/// leaving it buffered for a later collection.
#[inline]
fn drop_root(header: NonNull<Header>) {
    // SAFETY: we hold it and the collector lock; a stale slot is harmless
    // (`lookup` checks the header), but this one must no longer name the root.
    unsafe { header.as_ref().slot.set(NONE) };
    rebuffer(header);
    // SAFETY: the hold is ours.
    unsafe { Header::dec_strong(header) };
}

/// Buffers an object we hold again so a later collection retries it.
#[inline]
fn rebuffer(header: NonNull<Header>) {
    // SAFETY: we hold `header`.
    if unsafe { header.as_ref() }.rebuffer() {
        push_root_quietly(Entry(header));
    }
}
