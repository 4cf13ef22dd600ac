//! The concurrent cycle collector: trial deletion on a private snapshot,
//! then per-component validation before anything is freed.
//!
//! See the [module documentation](super) for the soundness argument. In
//! order, one collection:
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
//!    (unless a Nim16 trigger asked for this collection); after a minor
//!    collection, each live node with a positive trial count is buffered
//!    again as an old root, because the reference that kept it may come from
//!    an old member of its own garbage cycle (the cross-generation rule).
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
//! Per garbage object the collection does a handful of atomic RMWs that no
//! reordering removes: the drain's CAS (the hold), a `try_lock` and an
//! unlock per traced cell, and the decrements of the handles its value
//! holds (`release_doomed` usually needs none, see below). A request cycle
//! of the hub benchmark (two objects, two locked cells each) costs about
//! thirteen, at ~6 ns each on the 2-vCPU EPYC of the benchmarks and ~10 ns
//! on the Intel Xeon: most of what separates it from a leaking `Arc`.
//! Tried and measured, not kept (paired runs on one CPU, callgrind,
//! cachegrind): prefetching root headers ahead of the drain (no gain);
//! closing pin windows at 256 guards so that unlocks hit the first-level
//! cache (6.7 % fewer D1 misses, 2.4 % more instructions, no gain);
//! leaving a root's header slot naming the root once it is a node (the root
//! recording its node), to save the header write: the trace reads that
//! line moments later anyway, so the miss only moved (+1 % instructions);
//! skipping the generation load of doomed members in minor collections
//! (the same line is loaded for the vtable: no fewer misses, no fewer
//! instructions); a smaller Adaptive interval (256 roots a thread instead
//! of 1024) so that a collection's objects stay in the first-level cache:
//! 22 % fewer D1 misses per hub request, but 7 % more instructions and 21 %
//! more D1 misses in the random operations, where a shorter interval lets
//! fewer buffered objects die by counting before they are traced (the
//! interval's floor is 128 now, with ripening: see *The allocator* in the
//! module docs);
//! *tallying* the drops of handles between members in step 5 instead of
//! decrementing (the freeing thread counts, per member, the handles to it
//! that its values drop, found through the member's graph slot, and the
//! release subtracts them with the hold; a hash map from address to member
//! instead cost 60 instructions per insertion and 40 per lookup): it saves
//! two of the hub request's RMWs, but the uncontended RMW on a header line
//! the drop has just brought in costs about what the thread-local access
//! and the table cost (hub 323.6 → 320.3 ns per request, 2-thread churn
//! 184.7 → 184.4 ns per cycle, medians of 10 alternating pairs; +5 %
//! instructions): removing an RMW on a line already in the cache does not
//! pay for any bookkeeping (the branch `experiment-tally` keeps the code);
//! prefetching the value lines of the root two ahead in the trace (no
//! difference beyond a host that alternated between two speeds, 20 pairs).
//! What was kept: nodes of 32 bytes, and dooming backwards between the
//! forward claims and frees (hub, per request: 2,470 to 2,449 instructions, 40.9 to
//! 38.4 simulated D1 misses). And `release_doomed` needs no RMW when a load
//! shows its hold to be the last reference (a member's `Drop` may hand a
//! handle to another member to a thread that drops it meanwhile, but until
//! that drop the count shows it): 2-thread cycle churn 220 → 208 ns per
//! cycle (medians of 12 alternating pairs, faster in 10), hub at H = 10k
//! 360 → 331 ns per request (9 of 12; Intel Xeon, `sync_profile`).
//! And steps 3 to 6 iterate the slices of the nodes, edges and doomed
//! members instead of indexing through `Work` (after each push into one of
//! its vectors the compiler reloaded and re-checked the others), with
//! `Free::release` and `payload::first_of` inlined: callgrind counts 2.1 to
//! 2.4 % fewer instructions on the hub, the 2-thread churn, the random
//! operations and `request_loop orc-ws`; in alternating pairs (2-vCPU AMD
//! EPYC) the hub took 0.977× and the churn 0.975×, the work-stealing
//! server 1.003× (60 pairs in 6 rounds), but one thread's random operations
//! 1.016×, with 11 % more simulated branch mispredictions (cachegrind) in
//! code the change does not touch: the layout.
//!
//! What the RMW count misses is where the lines come from. Cachegrind of
//! the hub (`sync_profile hub recycler-sync-gc 10000 100000 1`, Intel
//! Xeon's cache sizes) counts 36 first-level read misses per request, 27 of
//! them in the collector: `run_locked` 17 (the drain's and claims' header
//! words, the graph lookups), the guards' unlocks at window close 6 (the
//! cell's word and its poison flag, left the cache since the trace locked
//! them) and `trace_lock` 4; the mutator, which allocates, links and drops
//! the pair, about 9. Nearly all hit the last-level cache. Every pass of a
//! collection (drain, trace, window close, claims, doom, drops, releases)
//! ran over the objects of about a thousand roots, more than the
//! first-level cache holds, so each pass fetched each object again. Hence
//! the groups (step 1): steps 2 to 6 run over the trees of 128 roots at a
//! time (the drain stays whole: it takes every hold at once, so a
//! mutator's drop after it buffers the object again, as before). The
//! smaller Adaptive interval above also cut the hub's misses, by 22 %, but
//! cost the random operations, where fewer buffered objects then die by
//! counting; groups keep the interval. Cachegrind: first-level misses
//! −30 % per hub request and −43 % in 2-thread churn, instructions −0.5 %.
//! Time (alternating pairs on the Intel Xeon, `sync_profile`): 2-thread
//! churn 200.3 → 170.9 ns per cycle (medians of 10, faster in 10), while
//! the hub (349.0 → 348.0 ns, 12 pairs), dumpster's random operations
//! (22.95 → 22.6 ms, 10 pairs) and the server's orc/ws CPU ratio (4 pairs:
//! 1.23, 1.30, 1.37, 1.36 before, 1.22, 1.32, 1.33, 1.34 after; collector
//! share 11.0 → 10.8 %) did not move beyond their noise. With the
//! interval's floor of 128 roots (eighteenth session, 2-vCPU AMD EPYC,
//! `server-demo ab --a orc --b orc`, 160 pairs of half-second slices),
//! groups of 64 cost the work-stealing server 4.9 % more CPU per request
//! (95 % interval 1.027–1.072) and groups of 256 1.7 % (0.983–1.049, not
//! significant): 128 stays. Full collections
//! judge all their roots at once: grouped, they re-traced a live structure
//! reachable from many groups once per group (the hub's 10k nodes: 3× the
//! instructions). The misses left are not what holds the hub back:
//! dropping each group's garbage right after the group, still under the
//! collector lock (a quick test, not a design: destructors must not run
//! under the lock), cut the hub's misses by another 17 % but made it 7 %
//! slower (317.7 → 341.7 ns, 10 pairs), and the 2-thread churn 29 % slower,
//! the threads waiting for each other's frees again.
//!
//! Nor do the cells' lock RMWs bound the hub alone. A measurement-only
//! stand-in for a cell the collector could read without any RMW (the
//! benchmark's `Mutex` fields replaced by a cell whose `TraceLock` hands out
//! its value unlocked: unsound with a second thread, sound enough for the
//! single-threaded hub; the mutators still lock a `Mutex`) gives the upper
//! bound of any cheaper trace lock, a crate-provided cell pinned with plain
//! stores and one fence per window say: hub 375.7 → 326.7 ns per request
//! (medians of 8 alternating pairs, faster in 7; careful `Arc` 223.7 ns in
//! the same session, so still 1.46×), 2-thread cycle churn 177.2 → 160.4 ns
//! per cycle (6 of 6). Removing the eight lock and unlock RMWs of a hub
//! request saves 13 %; the rest of the gap is instructions: callgrind counts
//! about 2,350 per hub request against careful `Arc`'s 1,110 (`sync_profile
//! hub <ptr> 10000 100000 1`, the tree's construction and the last
//! collection taken out), of which the collections take about 1,500: the
//! trace about 600, step 5's drops and releases about 550 (the values'
//! drops, which `Arc` pays too, most of it), the trial, claims and window
//! closes the rest.
//!
//! The allocator's share is mostly the frees themselves, not the
//! collector's own buffers: in dumpster's random operations most drained
//! entries (about 25,000 per 250,000 operations) are objects that died by
//! counting while buffered, freed at the drain in one burst that overflows
//! glibc's per-thread cache into its fast bins. Of the 228
//! `malloc_consolidate` calls of four such runs in one process (gdb), 76 %
//! come from the mutators' node allocations finding the arena's top too
//! small while fast-bin chunks exist, 9 % from the workload's own vectors,
//! 9 % from the per-thread buffers of freshly spawned threads growing, and
//! 5 % from the collector's vectors (which keep their capacity between
//! collections): presizing them cannot remove the consolidations.
//!
//! Nor can dropping the values later. *Lazy sweeping* (step 5 leaving the
//! doomed values to the thread's next allocations, one dropped before each)
//! spread those frees out: in the work-stealing server, 7 % fewer
//! instructions per request, and in cachegrind's simulation 21 % fewer
//! first-level and 75 % fewer last-level misses, but no less time
//! (`request_loop orc-ws`; the server's CPU ratio to arc-weak/ws, medians
//! of 6 alternating pairs, 1.31× without, 1.34× with): each value
//! was then dropped cold, long after the trace had brought it in, which is
//! what step 5 right after the groups avoids. Nor does the request's own
//! cost depend on the mutator's side: `request_loop arc-ws` (the same
//! operations with a leaking `sync::Rc`) and `orc-ws-manual` (buffering
//! roots, never collecting) take the user time of careful `arc-weak-ws`
//! (0.37–0.43 s per 200,000 requests, against `orc-ws`'s 0.66–0.68 s): the
//! gap is the collections and the frees they make.
//!
//! What this costs beyond the single-threaded collector is those RMWs.
//! The same hub and the same cycle churn with `recycler::Gc`, which runs
//! this algorithm's steps with no atomic at all (`sync_profile hub|churn
//! recycler-gc`, medians of 30 alternating pairs, 2-vCPU AMD EPYC): the hub
//! takes 1.65× leaking `Rc` and this collector 2.29× leaking `Arc`, 1.54×
//! `recycler::Gc`; one thread's churn 1.50× leaking `Rc` against 1.98×
//! leaking `Arc`. A hub request makes about fifteen RMWs in its
//! collection (the drain's two holds, a lock and an unlock for each of its
//! 4.8 traced cells, three handle decrements as the values drop), where
//! `recycler::Gc` makes none, and 735 more instructions (callgrind: 2,359
//! against 1,624 per request; the holds, guards, pin windows and claims).
//! An uncontended RMW costs about 3 ns in a loop on this host, so the RMWs
//! make some 50 of the 85 ns between the two (152 → 237 ns) and the
//! bookkeeping that comes with them most of the rest. Neither kind of RMW
//! can go with this design. The drain's CAS is how a
//! buffered object passes from its buffer to a collector atomically (a hold
//! taken when the object is buffered would keep every acyclic object's
//! value alive until the next drain instead of dropping it with its last
//! handle, as `Arc` does). The cells are the user's `Mutex` and `RwLock`,
//! which lock with an RMW; a cell of this crate that the collector pinned
//! with plain stores (the upper bound above) would need a store–load
//! handshake with every mutator that locks it, which only a `SeqCst` fence
//! on the mutator's side makes verifiable under loom (loom models `SeqCst`
//! fences, not `SeqCst` accesses). Measured in a loop on the same host, the
//! fence adds 2.1–3.6 ns to an uncontended lock and unlock (6.2–6.5 ns),
//! and the pin (a store, a load, a store) saves the collector 2.3–3.0 ns of
//! its `try_lock` and unlock: a hub request locks three cells as a mutator
//! and 4.8 in its collection, so the handshake would about pay for itself
//! there, and cost more wherever mutators lock more cells than collections
//! trace, as in the server.

use core::ptr::NonNull;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use super::age::Stamp;
use super::drops::{self, Panic};
use super::header::{count, Drained, Header, CLAIMED, DOOMED, TOUCHED};
use super::prim::MutexGuard;
use super::state::{global, push_root_quietly, Entry, Global};
use crate::guards::GuardSink;
use crate::stats::LazyPauseTimer;
use crate::trace::{Family, Tracer};
use crate::Policy;

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

/// Traces the value of `header` into `edges`, keeping cell guards in
/// `guards`. Returns whether a cell could not be inspected.
///
/// A panicking `Trace` impl counts as a cell that could not be inspected,
/// and the edges it reported before panicking are dropped (reporting fewer
/// edges is safe: the object is kept): an edge reported from inside a lock
/// is only pinned by that lock's guard, and the unwind dropped the guard
/// before the sink could keep it, so another thread may already have taken
/// the handle out and freed its target (a use after free in the hold that
/// follows: `gc/tests/sync_trace_panic.rs`, under Miri). The panic goes to
/// `panic` (the first one is re-raised when the collection ends). So a
/// panic never unwinds through the collector, which keeps every root it
/// drained and collects the rest of the graph.
///
/// # Safety
/// The collector holds `header` (so its value is alive and not `&mut`
/// borrowed), and keeps holding it until `guards` is emptied.
unsafe fn trace_into(
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
        if std::thread::panicking() {
            crate::payload::discard(Some(payload));
        } else {
            resume_unwind(payload);
        }
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

/// The doomed objects of a collection, whose values step 5 drops after the
/// collector lock is released: each with the collector's hold (a strong
/// reference), `DOOMED` and marked dead, its value alive. A thread keeps
/// the list's buffer for its next collection.
struct Dying(Vec<NonNull<Header>>);

#[cfg(not(loom))]
std::thread_local! {
    static DYING: core::cell::Cell<Vec<NonNull<Header>>> = const { core::cell::Cell::new(Vec::new()) };
}

impl Dying {
    /// This thread's (empty) buffer.
    fn take() -> Dying {
        #[cfg(not(loom))]
        let buffer = DYING.try_with(core::cell::Cell::take).unwrap_or_default();
        #[cfg(loom)]
        let buffer = Vec::new();
        Dying(buffer)
    }

    /// Step 5 without the collector lock: drops every value, then sets
    /// `GONE` on each member and releases its hold (no member's count
    /// reaches zero while the values drop, so no memory is freed before the
    /// last value has dropped; a hold left as the only reference is
    /// released without an RMW, see `Header::release_doomed`). Returns the
    /// first panic of a `Drop`. Fields of a garbage value whose count reaches zero
    /// are only queued (we run in a drop batch), so a value whose `Drop`
    /// panics unwinds through no other user code.
    ///
    /// Why no lock is needed: a doomed object is reachable by no other
    /// thread. Validation proved every strong reference to it is held by
    /// a member of its garbage or is our hold, and `DOOMED` makes every
    /// upgrade and every other collector's hold fail, so nobody can make a
    /// new one; another collector draining its buffer entry touches only
    /// the header word (the entry's and our release agree through the word,
    /// as a mutator's last drop and a drain do). A `Drop` that stores a
    /// handle of a member elsewhere stores a dead handle: a later trace
    /// cannot hold it either. The collector-private header cells (graph
    /// slot, generation) were read under the lock (step 5 counts the old
    /// ones there).
    fn free(mut self) -> Panic {
        let mut panic = None;
        for &header in &self.0 {
            // SAFETY: doomed and held by us: the value is alive and ours
            // alone (see above).
            let result = catch_unwind(AssertUnwindSafe(|| unsafe {
                (header.as_ref().vtable.drop_value)(header)
            }));
            if let Err(payload) = result {
                crate::payload::keep_first(&mut panic, payload);
            }
        }
        for header in self.0.drain(..) {
            // SAFETY: held (the hold is consumed here), doomed, value dropped.
            unsafe { Header::release_doomed(header) };
        }
        #[cfg(not(loom))]
        {
            let buffer = core::mem::take(&mut self.0);
            let _ = DYING.try_with(|d| d.set(buffer));
        }
        panic
    }
}

/// One collection; the caller holds the collector lock.
fn collect_locked(
    global: &Global,
    w: &mut Work,
    kind: Kind,
    dying: &mut Vec<NonNull<Header>>,
    timer: &mut LazyPauseTimer,
) -> (usize, usize, Panic) {
    let minor = matches!(kind, Kind::Minor | Kind::Local);
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
    let (mut freed, mut traced, mut promoted, mut old_freed) = (0, 0, 0, 0);
    let group = if minor { GROUP } else { usize::MAX };
    let mut start = 0;
    while start < w.roots.len() {
        let end = w.roots.len().min(start.saturating_add(group));
        let (f, t, p, o) = judge_group(global, w, minor, promote, start..end, since, dying);
        freed += f;
        traced += t;
        promoted += p;
        old_freed += o;
        w.reset_group();
        timer.checkpoint();
        start = end;
    }
    w.roots.clear();
    let panic = w.panic.take();
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
    // The live objects traced for the first time are the wasted work the
    // next collection must pay for (the old ones are amortised by the full
    // trigger); without generations, every live object traced.
    let wasted = if promote { promoted } else { traced - freed };
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

/// Steps 2 to 6 of a collection for the trees of the drained roots in
/// `group`. Returns `(freed, traced, promoted, old freed)`.
fn judge_group(
    global: &Global,
    w: &mut Work,
    minor: bool,
    promote: bool,
    group: core::ops::Range<usize>,
    since: Stamp,
    dying: &mut Vec<NonNull<Header>>,
) -> (usize, usize, usize, u64) {
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
    let traced = w.nodes.len();

    // 3. Trial deletion on private counts. The live nodes are listed in
    //    `w.live` (the marking's work list, kept: step 6 releases them) and
    //    promoted as they are marked (`promote_node`). Only the order of the
    //    work differs from a separate promotion pass: the same nodes are
    //    live, promoted and queued as old roots, all before validation, and
    //    generations are private to the collector-lock holder.
    let mut promoted = 0;
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
            } else if promote {
                promoted += promote_node(node, minor, old_roots);
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
                if promote {
                    promoted += promote_node(node, minor, old_roots);
                }
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
    let mut old_freed = 0;
    for &m in &w.doomed {
        let node = &mut w.nodes[m as usize];
        // SAFETY: held; collector lock held.
        old_freed += u64::from(unsafe { node.header.as_ref().generation.is_old() });
        node.released = true;
        dying.push(node.header);
    }
    let freed = w.doomed.len();

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
    (freed, traced, promoted, old_freed)
}

/// Step 2 for node `i`, the next one to trace (all before it are traced):
/// traces it, and numbers its new targets (traced in that order after it):
/// holding those not held yet, adding the roots not in the graph yet.
fn trace_node(w: &mut Work, i: usize, minor: bool) {
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

/// The fast path of validation: if no edge between candidate garbage nodes
/// crosses from one pin window to another, every weakly connected component
/// of the candidate garbage was traced within one window, with all of its
/// cells locked from each member's trace to the window's close, t*: the
/// trace is a snapshot of its edges at t*, so the trial count of zero of
/// every member *is* the Σ-test of its component at t* (an edge into it
/// from a live node would make it live; from another candidate, that
/// candidate would be in the component; so every counted edge is a member's
/// edge at t*). Then the Δ-test: CAS every member's word from its snapshot
/// to `CLAIMED`; if all succeed, the counts held from each snapshot through
/// t* to the claim, and everything is doomed. Returns `false`, having
/// claimed nothing, if an edge crosses windows, a Δ-test failed or the
/// snapshots (taken after `since`) were too old for it (`age.rs`): the
/// caller then validates component by component.
fn claim_pinned(w: &mut Work, since: Stamp) -> bool {
    debug_assert!(w.doomed.is_empty());
    // With one window (the usual case) no edge can cross.
    if !w.windows.is_empty() && edge_crosses_windows(w) {
        return false;
    }
    let mut claimed = true;
    for (i, node) in w.nodes.iter().enumerate() {
        if node.live {
            continue;
        }
        if !claim(node) {
            claimed = false;
            break;
        }
        w.doomed.push(i as u32);
    }
    if !claimed {
        unclaim(w, &w.doomed);
        w.doomed.clear();
        return false;
    }
    // After the last claim: every equal word proved an unchanged one.
    if !since.fresh() {
        unclaim(w, &w.doomed);
        w.doomed.clear();
        return false;
    }
    // Backwards: the claims just walked the members forwards, and step 5
    // frees them forwards, so each pass starts on the headers the previous
    // one touched last, still in the first-level cache (a collection's
    // members usually outgrow it).
    for &m in w.doomed.iter().rev() {
        doom(&w.nodes[m as usize]);
    }
    true
}

/// The Δ-test of one member: its word is still its snapshot, and no
/// `Weak::upgrade` can reach it from now on. Returns `false` if the word
/// changed.
///
/// Usually a CAS from the snapshot `W` to `W | CLAIMED`: an upgrade before
/// it changed the word (the CAS fails), one after it waits while `CLAIMED`
/// is set. For a member with no `Weak` (an acquire load shows `weak == 1`:
/// only the reference the strong side shares) a load of the word equal to
/// `W` suffices, without an RMW:
///
/// - no upgrade can come later: a `Weak` is made from a strong handle or a
///   `Weak`, and by the Σ-test no strong handle outside the members existed
///   at t*, nor since (any clone, drop or upgrade changes the word, and the
///   word is `W`); so no `Weak` can appear, and there is none now;
/// - none came earlier unseen: a `Weak` dropped before our weak load
///   released it (a `Release` RMW our `Acquire` load reads from), so its
///   upgrades happen-before our word load, which would see their counter;
/// - the value's last uses by mutators happen-before our hold's RMW (it
///   acquired every release of the word), which wrote `W`: the CAS added no
///   ordering the load lacks.
///
/// From then on no other thread writes the word, as after a successful CAS
/// (`doom` stores into it). If another member fails, `fetch_and(!CLAIMED)`
/// on this one changes nothing. Loom models `upgrade_against_doom`,
/// `weak_release_against_collection` (planted bug found: the load path
/// without the weak test, an upgrade between the load and the doom).
fn claim(node: &Node) -> bool {
    // SAFETY: held.
    let header = unsafe { node.header.as_ref() };
    if header.weak.load(Acquire) == 1 && header.word.load(Acquire) == node.word {
        return true;
    }
    header
        .word
        .compare_exchange(node.word, node.word | CLAIMED, AcqRel, Acquire)
        .is_ok()
}

/// Takes back the claims on `members` (their validation failed).
fn unclaim(w: &Work, members: &[u32]) {
    for &m in members {
        // SAFETY: held.
        unsafe { w.nodes[m as usize].header.as_ref() }
            .word
            .fetch_and(!CLAIMED, AcqRel);
    }
}

/// Whether an edge between candidate garbage nodes crosses from one pin
/// window to another (then some component spans windows, and its trace is
/// no snapshot of one instant). Test
/// `a_move_between_windows_is_caught_by_the_retrace`, loom model
/// `move_between_cells_across_windows` (planted `false`: a component freed
/// under an outside handle).
fn edge_crosses_windows(w: &Work) -> bool {
    (0..w.nodes.len()).filter(|&i| !w.nodes[i].live).any(|i| {
        let window = w.window_of(i as u32);
        w.edges_of(i).any(|k| {
            let j = w.edges[k];
            !w.nodes[j as usize].live && w.window_of(j) != window
        })
    })
}

/// Dooms a node whose Δ-test succeeded as part of a validated set: marks
/// it dead, then sets `DOOMED` with a plain store.
///
/// A store suffices: from its successful CAS until its value is dropped, no
/// other thread writes the word (there is no handle to clone or drop
/// outside the validated set, `Weak::upgrade` only loads while `CLAIMED` is
/// set, and only the collector-lock holder drains or holds), and no user
/// code runs in between on this thread. Dead first: once the values drop,
/// their destructors may reach each other's handles.
fn doom(node: &Node) {
    // SAFETY: held; validation proved that no other thread can reach the
    // object (module docs), so nobody reads the flag concurrently.
    let header = unsafe { node.header.as_ref() };
    // SAFETY: as above.
    unsafe { header.dead.set() };
    header.word.store(node.word | CLAIMED | DOOMED, Release);
}

/// The slow path of validation: the weakly connected components of the
/// candidate garbage (union-find, grouped without hashing), each validated
/// on its own with a re-trace ([`validate`]); the members of the components
/// that pass go to `w.doomed`, the others are buffered again.
fn validate_components(w: &mut Work, since: Stamp) {
    let n = w.nodes.len();
    w.parent.extend(0..n as u32);

    fn find(parent: &mut [u32], mut i: u32) -> u32 {
        while parent[i as usize] != i {
            parent[i as usize] = parent[parent[i as usize] as usize];
            i = parent[i as usize];
        }
        i
    }
    for i in 0..n {
        if w.nodes[i].live {
            continue;
        }
        for k in w.edges_of(i) {
            let j = w.edges[k];
            if !w.nodes[j as usize].live {
                let ri = find(&mut w.parent, i as u32);
                let rj = find(&mut w.parent, j);
                w.parent[ri as usize] = rj;
            }
        }
    }
    // Number the components (by root), count their members, then lay the
    // members out grouped: `members[bounds[c]..bounds[c + 1]]`.
    w.member_of.resize(n, NONE);
    let mut components = 0u32;
    for i in 0..n {
        if w.nodes[i].live {
            continue;
        }
        let root = find(&mut w.parent, i as u32) as usize;
        if w.member_of[root] == NONE {
            w.member_of[root] = components;
            components += 1;
        }
        w.member_of[i] = w.member_of[root];
    }
    w.bounds.resize(components as usize + 1, 0);
    for i in 0..n {
        if !w.nodes[i].live {
            w.bounds[w.member_of[i] as usize + 1] += 1;
        }
    }
    for c in 0..components as usize {
        w.bounds[c + 1] += w.bounds[c];
    }
    let garbage = w.bounds[components as usize] as usize;
    w.members.resize(garbage, 0);
    // `stack` is empty: reuse it as the fill cursor of each component.
    w.stack.extend_from_slice(&w.bounds[..components as usize]);
    for i in 0..n {
        if !w.nodes[i].live {
            let c = w.member_of[i] as usize;
            w.members[w.stack[c] as usize] = i as u32;
            w.stack[c] += 1;
        }
    }
    w.stack.clear();
    for c in 0..components {
        let (a, b) = (
            w.bounds[c as usize] as usize,
            w.bounds[c as usize + 1] as usize,
        );
        if validate(w, a, b, c, since) {
            w.doomed.extend_from_slice(&w.members[a..b]);
        } else {
            for &m in &w.members[a..b] {
                rebuffer(w.nodes[m as usize].header);
            }
        }
    }
}

/// Promotes a node found live (not kept opaque by a cell, count consistent)
/// and, after a minor collection, queues it as an old root (in `old_roots`)
/// if its trial count is positive. Returns 1 if it was young.
///
/// The cross-generation rule: a minor collection sees a reference from an
/// old object as external, so a positive trial count does not prove the
/// node live: the old object may belong to the node's own garbage cycle. The
/// next full collection judges it (without the rule, a garbage cycle through
/// both generations whose only buffered member was young would leave every
/// buffer and leak for ever).
fn promote_node(node: &Node, minor: bool, old_roots: &mut Vec<Entry>) -> usize {
    debug_assert!(node.live && !node.kept && node.trial >= 0);
    // SAFETY: held; collector lock held.
    let header = unsafe { node.header.as_ref() };
    let mut promoted = 0;
    // SAFETY: as above.
    if !unsafe { header.generation.is_old() } {
        // SAFETY: as above.
        unsafe { header.generation.promote() };
        promoted = 1;
    }
    if minor && node.trial > 0 && header.rebuffer() {
        old_roots.push(Entry(node.header));
    }
    promoted
}

/// Gives back the hold on a drained root that does not enter the graph,
/// leaving it buffered for a later collection.
fn drop_root(header: NonNull<Header>) {
    // SAFETY: we hold it and the collector lock; a stale slot is harmless
    // (`lookup` checks the header), but this one must no longer name the root.
    unsafe { header.as_ref().slot.set(NONE) };
    rebuffer(header);
    // SAFETY: the hold is ours.
    unsafe { Header::dec_strong(header) };
}

/// Buffers an object we hold again so a later collection retries it.
fn rebuffer(header: NonNull<Header>) {
    // SAFETY: we hold `header`.
    if unsafe { header.as_ref() }.rebuffer() {
        push_root_quietly(Entry(header));
    }
}

/// Validates component `id` (members `w.members[a..b]`, their snapshots
/// taken after `since`) and, on success, dooms it.
///
/// Snapshots too old to back the Δ-test (`age.rs`) are not used: the
/// component is re-traced with all of its cells locked and each member
/// claimed at once, its count checked at its claim ([`sigma_claim`]).
fn validate(w: &mut Work, a: usize, b: usize, id: u32, since: Stamp) -> bool {
    if since.fresh() {
        // A component traced within one pin window needs no re-trace: its
        // trace is its Σ-test at that window's close (see `claim_pinned`).
        let window = w.window_of(w.members[a]);
        let one_window = w.members[a..b].iter().all(|&m| w.window_of(m) == window);
        if !one_window && !sigma_test(w, a, b, id) {
            return false;
        }
        if !claim_all(w, a, b) {
            return false;
        }
        if since.fresh() {
            doom_all(w, a, b);
            return true;
        }
        unclaim(w, &w.members[a..b]);
    }
    if !sigma_claim(w, a, b, id) {
        return false;
    }
    doom_all(w, a, b);
    // Only now are the cells unlocked: dropping a guard runs the lock's own
    // code (a `TraceLock` is user code), which may clone a handle out of its
    // cell or upgrade a `Weak` to a member. Before the doom, a clone's count
    // was erased by `doom`'s plain store (a use after free once the
    // component was freed), and an upgrade waited for ever on a claim only
    // this thread could take back; after it, a clone is a dead handle that
    // counts (as one a destructor keeps) and an upgrade fails. A panic of a
    // guard's drop is kept and re-raised when the collection ends: unwinding
    // from here would leave the doomed members undropped for ever. Tests
    // `gc/tests/sync_guard_drop_during_claim.rs`, `sync_guard_drop_upgrade.rs`.
    w.unlock();
    true
}

/// The Σ- and Δ-tests of component `id` (members `w.members[a..b]`) without
/// snapshots. A re-trace locks every cell of the component and counts each
/// member's in-degree from the members; then, with every cell still locked,
/// each member is claimed (its `TOUCHED` cleared in the same CAS), and its
/// count at its claim must be that in-degree plus our hold; then every
/// member's word must still be the one its claim wrote. Claims all, or none.
///
/// Once a member is claimed, `Weak::upgrade` waits, and every clone of one
/// of its handles changes its word and marks it `TOUCHED` (in a `fetch_or`
/// right after its `fetch_add`, whose count change shows until then: see
/// `header.rs`). Its count at the claim left no handle outside the
/// component, so a handle dropped after the claim was cloned after it, and
/// that clone marked the word before returning the handle. So a member
/// whose word is unchanged at the second pass had no clone or drop since
/// its claim, whatever the counter did; then at any instant between the last claim
/// and the first check, every member's count was its claim's: its
/// in-degree plus the hold, with every cell locked. That is the Σ-test at
/// one instant, and no handle to a member can be made after it (none
/// outside; upgrades wait; the cells are locked until the claims are
/// checked). One pass would not do: a thread that upgraded a member not
/// yet claimed could clone through its immutable fields a handle to one
/// already claimed, then drop its own before its member's claim (loom
/// model `stale_clone_through_a_field`).
///
/// On success the cells stay locked (`w.guards`): the caller dooms the
/// members, then releases them (a guard's `Drop` is user code, which must
/// not find a member claimed). On failure they are unclaimed and released.
fn sigma_claim(w: &mut Work, a: usize, b: usize, id: u32) -> bool {
    // `trial` becomes minus each member's in-degree from the members.
    for k in a..b {
        let m = w.members[k] as usize;
        w.nodes[m].trial = 0;
    }
    if !retrace(w, a, b, id) {
        w.unlock();
        return false;
    }
    let mut closed = true;
    for k in a..b {
        let node = &mut w.nodes[w.members[k] as usize];
        // SAFETY: held.
        let word = &unsafe { node.header.as_ref() }.word;
        let mut old = word.load(Relaxed);
        node.word = loop {
            let new = (old | CLAIMED) & !TOUCHED;
            match word.compare_exchange_weak(old, new, AcqRel, Relaxed) {
                Ok(_) => break new,
                Err(actual) => old = actual,
            }
        };
        if count(old) as i64 != 1 - node.trial {
            unclaim(w, &w.members[a..=k]);
            closed = false;
            break;
        }
    }
    if closed {
        let changed = w.members[a..b].iter().any(|&m| {
            let node = &w.nodes[m as usize];
            // SAFETY: held.
            unsafe { node.header.as_ref() }.word.load(Acquire) != node.word
        });
        if changed {
            unclaim(w, &w.members[a..b]);
            closed = false;
        }
    }
    // On success the cells stay locked until the caller has doomed the
    // members (see `validate`): no user code between the check and the doom.
    if !closed {
        w.unlock();
    }
    closed
}

/// The Σ-test of component `id` (members `w.members[a..b]`) by a re-trace.
fn sigma_test(w: &mut Work, a: usize, b: usize, id: u32) -> bool {
    // Σ-test: all cells locked at once; every member's snapshot count must be
    // its internal in-degree plus our hold. `trial` holds the remaining
    // counts of this component's members.
    for k in a..b {
        let m = w.members[k] as usize;
        w.nodes[m].trial = count(w.nodes[m].word) as i64 - 1;
    }
    let closed = retrace(w, a, b, id)
        && w.members[a..b]
            .iter()
            .all(|&m| w.nodes[m as usize].trial == 0);
    // t*: every cell of the component is locked right now.
    w.unlock();
    closed
}

/// Re-traces the members `w.members[a..b]` of component `id`, keeping
/// their cells locked (in `w.guards`), and takes one from a member's
/// `trial` for each edge to it from a member. `false` if a cell could not
/// be locked (or a trace panicked).
fn retrace(w: &mut Work, a: usize, b: usize, id: u32) -> bool {
    for k in a..b {
        let m = w.members[k] as usize;
        w.targets.clear();
        let header = w.nodes[m].header;
        // SAFETY: `m` is held until `finish`, after `guards` is emptied.
        if unsafe { trace_into(header, &mut w.targets, &mut w.guards, &mut w.panic) } {
            return false;
        }
        for t in 0..w.targets.len() {
            let target = w.targets[t].cast::<Header>();
            // SAFETY: reported by a handle in a locked cell or held object.
            if let Some(j) = unsafe { w.node_of(target) } {
                if w.member_of[j as usize] == id {
                    w.nodes[j as usize].trial -= 1;
                }
            }
        }
    }
    true
}

/// The Δ-test of the members `w.members[a..b]`: claims them all, or none.
fn claim_all(w: &mut Work, a: usize, b: usize) -> bool {
    // Δ-test: no clone, drop, upgrade or buffering happened on any member
    // since its snapshot, which covers t*.
    for k in a..b {
        if !claim(&w.nodes[w.members[k] as usize]) {
            unclaim(w, &w.members[a..k]);
            return false;
        }
    }
    true
}

/// Dooms the claimed members `w.members[a..b]`.
fn doom_all(w: &Work, a: usize, b: usize) {
    for &m in &w.members[a..b] {
        doom(&w.nodes[m as usize]);
    }
}
