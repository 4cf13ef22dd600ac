//! The per-thread cycle collector: roots buffers, triggers, and the freeing of
//! garbage cycles.
//!
//! # Roots
//! A `Gc` to a type that may own pointers ([`Trace::MAY_CONTAIN_GC`]) is
//! *buffered* the first time its strong count drops to a value above zero: it
//! may have become the entry of an unreachable cycle. Buffering sets the
//! object's `BUFFERED` flag and records its index, so later decrements cost
//! one branch and removing an object freed by counting is O(1) (swap-remove).
//! Young and old objects go to separate buffers.
//!
//! # Generations
//! Objects that a collection finds live are *promoted* (flag `OLD`) under the
//! default [`Policy::Adaptive`]. A minor collection starts from the young roots
//! only and does not enter old objects: an edge to an old object is ignored and
//! the old object keeps that reference as an external one, which can only keep
//! things alive. Long-lived hubs therefore stop costing anything. For the
//! same reason a minor collection cannot prove a young object live when a
//! reference from outside its graph may come from an old object (a member of
//! the same garbage cycle, perhaps): such objects go to the old roots for the
//! next full collection (see `graph.rs`). A full
//! collection starts from both buffers and enters everything; it runs when the
//! objects promoted since the last full one, or the old roots waiting, exceed
//! [`AdaptiveConfig::full_fraction`] of the old population then (CPython's
//! rule), so its cost is amortised over that growth, and exceed the live
//! objects the last full collection traced: as for minor collections, the
//! wasted work of one (tracing live objects: a structure still being built,
//! whose old members keep being re-buffered as old roots) is paid for by as
//! many promotions before the next. [`collect`] is always full.
//!
//! # Triggers
//! * Adaptive: a minor collection when the young roots, not counting the
//!   newest `min_roots` (see below), reach `max(min_roots, objects the
//!   previous collection found live)`: each collection's wasted work (tracing
//!   live objects) is paid for by as many new roots, and the memory waiting
//!   for collection stays bounded. Also when the live objects have grown by
//!   `max(young_objects, the same)` since the previous collection, as
//!   CPython's young generation counts allocations less deallocations
//!   (checked only when a root is buffered, off the allocation path): a few
//!   roots may hold large garbage (one root per dropped tree whose nodes
//!   point to their parents), which is collected at a fraction of the cost
//!   while it is still in the caches. Such a collection takes every young
//!   root, the newest included.
//! * Barren minor collections: after `BARREN_MINORS` (2) minor collections
//!   in a row that freed nothing, the young roots trigger full collections
//!   instead, at `max(min_roots, 2 × the live objects the previous one
//!   traced)` young roots, or twice the old objects if more (and as much
//!   growth of the live objects, for the other trigger; the same
//!   amortisation, for a full collection's wasted work, at half the waste
//!   per root: the structure still being built is traced half as often,
//!   and the roots waiting stay bounded, by twice the live objects instead
//!   of once). Minor collections come back when a full
//!   collection frees more young garbage than old, or [`collect`] is
//!   called; each time they are then found barren again, they wait for
//!   twice as many such full collections before being tried again (up to
//!   1024; one minor collection that frees something ends the wait). A
//!   structure being built and later dropped whole (a list pushed node by
//!   node: every minor collection finds the new nodes live and promotes
//!   them, and the dropped structure is old garbage that only a full
//!   collection frees) is then traced by the full collections alone, about
//!   1.5 times per node in all, instead of twice with an interval of
//!   once the live objects, and nearly three times with minor collections
//!   only (doubly linked lists: -24 % nodes traced; the longer interval
//!   alone left young garbage that kept bringing minor collections back,
//!   each of which promoted the list being built). Workloads whose minor
//!   collections free something keep them.
//! * Nim16: Nim 1.6.12's rule (see [`Policy::Nim16`]); every collection is
//!   full, as Nim's was. The threshold is per thread, as Nim 2.0 made it;
//!   [`set_nim16_shared_threshold`] reproduces Nim ≤ 1.6.12's one global
//!   threshold, read and written by every thread without synchronisation.
//! * Manual: only [`collect`].
//!
//! No trigger fires while the thread unwinds from a panic: the collection
//! would run destructors of unrelated garbage, and a panic of one of those,
//! re-raised during the unwind, would abort the process. The roots wait
//! for the next collection. A thread-local's destructor at thread exit is
//! the one place this cannot be told apart (no Rust API says that
//! thread-locals are being destroyed): a handle dropped there may still
//! trigger a collection while the collector's own state is alive, and a
//! panicking `Drop` of the garbage it finds then aborts the process, as any
//! panic out of a thread-local's destructor does.
//!
//! # Ripening
//! A collection the Adaptive policy starts on its root count (or a full one
//! it starts) leaves the newest `min_roots` young roots buffered for the
//! next one. A decrement that has just happened
//! is most often part of work in progress (a temporary clone dropped while a
//! structure is being built or used), so its object is likely still live:
//! judged now, it would be traced, found live and promoted, and if it dies a
//! moment later (a request's objects, say) it would be old garbage that only
//! a full collection, which traces the whole old generation, can free. Left
//! to ripen for one trigger interval, it is usually garbage by the time it is
//! judged, or freed by counting meanwhile. The trigger counts only the
//! roots beyond those, so each collection still takes the same number of
//! roots. [`collect`] and [`collect_minor`] take every root.
//!
//! # Freeing garbage
//! The pass that judges the graph also flags every garbage object `DEAD` and
//! gives it a *hold* (one extra strong count), so that no member is freed
//! while its own value is still to be dropped. Then each value is dropped in
//! turn and its hold released at once: a member's memory goes back to the
//! allocator as soon as the members that point to it have been dropped (the
//! last handle's `release` sees `DEAD`): frees follow the drops, one by one,
//! instead of one batch after all of them. That memory is kept for the next
//! allocations of candidates, which reuse it when the layout matches (see
//! "Deferred frees" in `drop_queue.rs`): a batch of frees would overflow the
//! allocator's per-thread cache. A panic in one `Drop` does not
//! stop the others; the first is re-raised afterwards. A handle that
//! survives (a `Drop` stored a clone of a member somewhere) points to a dead
//! object: dereferencing it panics, [`crate::Gc::try_deref`] returns `None`,
//! and its memory is freed when that handle goes. A collection requested
//! while one is running (from a `Drop`, say) runs right after it.

mod graph;

use core::cell::{Cell, RefCell};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use self::graph::Graph;
use crate::drop_queue;
use crate::header::{self, Header, Object, BUFFERED, DEAD, IN_GRAPH, OLD};
use crate::policy::Policy;
use crate::stats::{LazyPauseTimer, Stats};
#[cfg(doc)]
use crate::trace::Trace;

/// Counters touched on hot paths: no destructor, so access is a plain
/// thread-local load.
///
/// `live` is derived (allocated minus freed) so that allocating and freeing
/// by counting each touch one counter.
struct Counters {
    allocated: Cell<u64>,
    freed_by_rc: Cell<u64>,
    /// Objects freed by collections (the collector's share of `live`).
    collected: Cell<u64>,
    old_objects: Cell<u64>,
    /// A collection is running on this thread.
    collecting: Cell<bool>,
    /// `collect` was called while one was running.
    requested: Cell<bool>,
    /// Allocations waiting to be freed or reused (see "Deferred frees" in
    /// `drop_queue.rs`, which owns it; here so that the test on every
    /// candidate's allocation is a plain load next to `allocated`).
    deferred: Cell<usize>,
    /// The lowest stack address at which a nested free runs in place, or
    /// `stack::NO_DRAINER` (see `drop_queue.rs`, which owns it; here so that
    /// a free reaches one thread-local, not two, to count itself and read
    /// it: each costs two instructions before the first use).
    drain_limit: Cell<usize>,
}

thread_local! {
    static COUNTERS: Counters = const {
        Counters {
            allocated: Cell::new(0),
            freed_by_rc: Cell::new(0),
            collected: Cell::new(0),
            old_objects: Cell::new(0),
            collecting: Cell::new(false),
            requested: Cell::new(false),
            deferred: Cell::new(0),
            drain_limit: Cell::new(crate::stack::NO_DRAINER),
        }
    };
    static STATE: RefCell<State> = RefCell::new(State::default());
    /// The running collection's timer (see [`checkpoint`]).
    static PAUSE: Cell<Option<LazyPauseTimer>> = const { Cell::new(None) };
}

/// How many objects a collection traces, or frees, between two
/// [`checkpoint`]s.
const CHECKPOINT_EVERY: usize = 64;

/// Lets the running collection's timer read the thread CPU clock if the
/// collection has run long enough (see `LazyPauseTimer`); called every
/// [`CHECKPOINT_EVERY`] objects traced or freed.
fn checkpoint() {
    PAUSE.with(|p| {
        if let Some(mut timer) = p.get() {
            timer.checkpoint();
            p.set(Some(timer));
        }
    });
}

/// Minor collections in a row that must find no garbage before the young
/// roots trigger full collections instead (see "Barren minor collections").
const BARREN_MINORS: u32 = 2;

/// While minor collections are barren, the young roots that trigger the
/// next full collection are this many times the live objects the previous
/// one traced (see "Barren minor collections").
const BARREN_ROOT_FACTOR: usize = 2;

/// The longest wait before minor collections are tried again, as a power of
/// two: they are tried again after `2^(spells - 1)` full collections that
/// free mostly young garbage, where `spells` counts the times they were
/// found barren since one last freed something, up to `2^10`.
const MAX_BARREN_WAIT_LOG2: u32 = 10;

/// The floor of the full-collection budget, in units of `min_roots` (1024
/// roots by default).
const FULL_FLOOR_FACTOR: usize = 32;

/// Tuning of [`Policy::Adaptive`], set per thread with [`set_adaptive_config`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct AdaptiveConfig {
    /// The fewest young roots that trigger a minor collection, and how many
    /// of the newest ones a triggered collection leaves to ripen (default
    /// 32: small enough that the garbage of short cycles is still in the
    /// CPU's caches when it is collected, and that freeing it fits the
    /// allocator's per-thread caches; glibc's keeps 7 chunks of each size,
    /// beyond which its fastbins fill and are consolidated by the next large
    /// allocation). The fewest promotions or old roots that trigger a full
    /// collection is 32 times that.
    pub min_roots: usize,
    /// The growth of the live objects since the last collection that
    /// triggers a minor collection while young roots wait (default 4096),
    /// however few they are: a root may hold a large structure (a tree
    /// whose nodes point to their parents), and garbage collected while it
    /// is still in the CPU's caches costs a fraction of what it costs once
    /// evicted. Like `min_roots`, it grows to the objects the previous
    /// collection found live, so tracing live objects stays paid for.
    pub young_objects: usize,
    /// A full collection runs when objects promoted since the last one, or
    /// old roots waiting, exceed this fraction of the old objects counted at
    /// the last full collection (default 0.25, as CPython), and the live
    /// objects that collection traced.
    pub full_fraction: f64,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            min_roots: 32,
            young_objects: 4096,
            full_fraction: 0.25,
        }
    }
}

impl AdaptiveConfig {
    /// Sets [`AdaptiveConfig::min_roots`] (at least 1).
    pub fn min_roots(mut self, n: usize) -> Self {
        self.min_roots = n.max(1);
        self
    }

    /// Sets [`AdaptiveConfig::young_objects`] (at least 1).
    pub fn young_objects(mut self, n: usize) -> Self {
        self.young_objects = n.max(1);
        self
    }

    /// Sets [`AdaptiveConfig::full_fraction`] (clamped to `0.0..=16.0`).
    pub fn full_fraction(mut self, f: f64) -> Self {
        self.full_fraction = if f.is_nan() { 0.25 } else { f.clamp(0.0, 16.0) };
        self
    }
}

/// Nim 1.6.12's initial and lowest thresholds.
const NIM_INITIAL_THRESHOLD: usize = 128;
const NIM_MIN_THRESHOLD: usize = 16;

/// Nim ≤ 1.6.12's `rootsThreshold`, a plain global shared by all threads
/// (see [`set_nim16_shared_threshold`]). Relaxed loads and stores, and a
/// load–compute–store update that loses concurrent updates, as Nim's
/// unsynchronised global did, without a data race in Rust's sense.
static NIM_SHARED_THRESHOLD: AtomicUsize = AtomicUsize::new(NIM_INITIAL_THRESHOLD);

struct State {
    young: Vec<Object>,
    old: Vec<Object>,
    /// The roots vector of the last collection, kept for its capacity.
    spare: Vec<Object>,
    policy: Policy,
    config: AdaptiveConfig,
    /// Young roots that trigger the next minor collection (Adaptive).
    young_threshold: usize,
    /// Growth of the live objects since the last collection that triggers
    /// the next minor collection while young roots wait (Adaptive).
    growth_threshold: u64,
    /// Live objects counted after the last collection.
    live_after_last: u64,
    /// Roots that trigger the next collection (Nim16).
    nim_threshold: usize,
    /// Nim16 uses [`NIM_SHARED_THRESHOLD`] instead of `nim_threshold`.
    nim_shared: bool,
    promoted_since_full: u64,
    /// Minor collections in a row that freed nothing (Adaptive; see
    /// "Barren minor collections").
    barren_minors: u32,
    /// Times minor collections were found barren (`BARREN_MINORS` in a row)
    /// since one last freed something (Adaptive; see "Barren minor
    /// collections").
    barren_spells: u32,
    /// Full collections since minor ones were last found barren that freed
    /// mostly young garbage (Adaptive).
    young_fulls: u64,
    /// `promoted_since_full` or old roots above which a full collection
    /// is due (Adaptive).
    full_budget: u64,
    /// Kept between collections for the capacity of its buffers; boxed, so
    /// that a collection takes it out of `State` and puts it back by
    /// pointer, not by copying the whole struct.
    graph: Option<Box<Graph>>,
    minor_collections: u64,
    full_collections: u64,
    nodes_traced: u64,
    freed_by_collector: u64,
    promoted: u64,
    total_pause: Duration,
    max_pause: Duration,
    total_pause_cpu: Duration,
}

impl Default for State {
    fn default() -> Self {
        let config = AdaptiveConfig::default();
        State {
            young: Vec::new(),
            old: Vec::new(),
            spare: Vec::new(),
            policy: Policy::default(),
            config,
            young_threshold: config.min_roots,
            growth_threshold: config.young_objects as u64,
            live_after_last: 0,
            nim_threshold: NIM_INITIAL_THRESHOLD,
            nim_shared: false,
            promoted_since_full: 0,
            barren_minors: 0,
            barren_spells: 0,
            young_fulls: 0,
            full_budget: config.min_roots.saturating_mul(FULL_FLOOR_FACTOR) as u64,
            graph: None,
            minor_collections: 0,
            full_collections: 0,
            nodes_traced: 0,
            freed_by_collector: 0,
            promoted: 0,
            total_pause: Duration::ZERO,
            max_pause: Duration::ZERO,
            total_pause_cpu: Duration::ZERO,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Minor,
    Full,
}

impl State {
    fn buffer_of(&mut self, h: &Header) -> &mut Vec<Object> {
        if h.has(OLD) {
            &mut self.old
        } else {
            &mut self.young
        }
    }

    fn push(&mut self, object: Object) {
        // SAFETY: callers pass live objects.
        let h = unsafe { object.as_ref() };
        let buffer = self.buffer_of(h);
        h.set_slot_and_flag(buffer.len(), BUFFERED);
        buffer.push(object);
    }

    fn remove(&mut self, object: Object) {
        // SAFETY: callers pass live objects.
        let h = unsafe { object.as_ref() };
        let buffer = self.buffer_of(h);
        let slot = h.slot();
        debug_assert!(buffer[slot] == object);
        buffer.swap_remove(slot);
        if let Some(&moved) = buffer.get(slot) {
            // SAFETY: buffered objects are live.
            unsafe { moved.as_ref() }.set_slot(slot);
        }
        h.clear_flag(BUFFERED);
    }

    /// Which collection, if any, the policy asks for now, and whether it
    /// leaves the newest roots to ripen.
    fn due(&self) -> Option<(Kind, bool)> {
        match self.policy {
            Policy::Manual => None,
            Policy::Nim16 => (self.young.len() + self.old.len() >= self.nim_threshold())
                .then_some((Kind::Full, true)),
            Policy::Adaptive => {
                if self.full_due() {
                    Some((Kind::Full, true))
                } else if self.young.len() >= self.young_threshold.saturating_add(self.ripening()) {
                    // Full instead if minor ones are barren: `run` decides,
                    // off the path of every root.
                    Some((Kind::Minor, true))
                } else if !self.young.is_empty() && self.grown() {
                    // Large garbage behind few roots: take them all.
                    Some((Kind::Minor, false))
                } else {
                    None
                }
            }
        }
    }

    /// The collection that the young roots trigger: minor, unless the last
    /// minor collections found nothing (see "Barren minor collections").
    fn young_kind(&self) -> Kind {
        if self.barren_minors >= BARREN_MINORS {
            Kind::Full
        } else {
            Kind::Minor
        }
    }

    /// The Nim16 threshold in force: this thread's, or the shared one.
    fn nim_threshold(&self) -> usize {
        if self.nim_shared {
            NIM_SHARED_THRESHOLD.load(Relaxed)
        } else {
            self.nim_threshold
        }
    }

    /// Whether the live objects grew past the threshold since the last
    /// collection (only asked when a young root was just buffered).
    fn grown(&self) -> bool {
        let live = live_objects();
        live.saturating_sub(self.live_after_last) >= self.growth_threshold
    }

    fn full_due(&self) -> bool {
        // A minor collection re-buffers the live objects it could not prove
        // (see `graph.rs`) as old roots, so most promotions also sit in the
        // old buffer: take the larger count rather than counting them twice.
        self.promoted_since_full.max(self.old.len() as u64) > self.full_budget
    }

    /// Restarts the triggers from the current configuration.
    fn reset_triggers(&mut self) {
        self.nim_threshold = NIM_INITIAL_THRESHOLD;
        self.young_threshold = self.config.min_roots;
        self.growth_threshold = self.config.young_objects as u64;
        self.barren_minors = 0;
        self.barren_spells = 0;
        self.young_fulls = 0;
        self.live_after_last = live_objects();
        self.set_full_budget(COUNTERS.with(|c| c.old_objects.get()), 0);
    }

    /// Sets the promotions (or old roots) that make the next full collection
    /// due, given the old objects now and the live objects the last full
    /// collection traced.
    fn set_full_budget(&mut self, old_objects: u64, live_traced: u64) {
        let fraction = (old_objects as f64 * self.config.full_fraction) as u64;
        // A full collection enters the whole old generation: with the young
        // floor alone, long-lived structures were traced 32 times as often.
        let floor = self.config.min_roots.saturating_mul(FULL_FLOOR_FACTOR) as u64;
        // Its wasted work is paid for by as many promotions: a structure that
        // keeps growing (a list built node by node, each old node re-buffered
        // by a minor collection) is traced O(1) times per node, not once per
        // quarter of its size (doubly linked lists: -24 % nodes traced).
        self.full_budget = fraction.max(floor).max(live_traced);
    }

    /// Takes the roots of a collection out of the buffers; they stay flagged
    /// `BUFFERED` until [`Graph::collect`] enters them. With `ripen`, the
    /// newest young roots stay buffered (see "Ripening").
    fn take_roots(&mut self, kind: Kind, ripen: bool) -> Vec<Object> {
        let spare = core::mem::take(&mut self.spare);
        let mut roots = core::mem::replace(&mut self.young, spare);
        if ripen && self.policy == Policy::Adaptive {
            // The newest roots ripen: they stay buffered, moved to the front
            // of the new young buffer, for the next collection.
            let keep = self.ripening().min(roots.len());
            let start = roots.len() - keep;
            for (slot, &object) in roots[start..].iter().enumerate() {
                // SAFETY: buffered objects are live.
                unsafe { object.as_ref() }.set_slot(slot);
            }
            self.young.extend_from_slice(&roots[start..]);
            roots.truncate(start);
        }
        if kind == Kind::Full {
            roots.append(&mut self.old);
        }
        // The graph clears each root's `BUFFERED` flag as it enters it.
        roots
    }

    /// How many of the newest young roots a triggered minor collection
    /// leaves buffered (see "Ripening" in the module docs).
    fn ripening(&self) -> usize {
        self.config.min_roots
    }

    /// Updates statistics and thresholds after a collection.
    fn account(
        &mut self,
        kind: Kind,
        traced: usize,
        freed: usize,
        old_garbage: usize,
        promoted: usize,
        pause: Duration,
    ) {
        match kind {
            Kind::Minor => self.minor_collections += 1,
            Kind::Full => self.full_collections += 1,
        }
        self.nodes_traced += traced as u64;
        self.freed_by_collector += freed as u64;
        self.promoted += promoted as u64;
        self.promoted_since_full += promoted as u64;
        self.total_pause += pause;
        self.max_pause = self.max_pause.max(pause);
        match self.policy {
            Policy::Nim16 => {
                let threshold = self.nim_threshold();
                let next = if freed * 2 >= traced {
                    (threshold / 3 * 2).max(NIM_MIN_THRESHOLD)
                } else if threshold < usize::MAX / 4 {
                    threshold * 3 / 2
                } else {
                    threshold
                };
                if self.nim_shared {
                    // Not a read-modify-write: another thread's update
                    // between the load above and this store is lost.
                    NIM_SHARED_THRESHOLD.store(next, Relaxed);
                } else {
                    self.nim_threshold = next;
                }
            }
            Policy::Adaptive | Policy::Manual => {
                match kind {
                    Kind::Minor if freed == 0 => {
                        self.barren_minors = self.barren_minors.saturating_add(1);
                        if self.barren_minors == BARREN_MINORS {
                            self.barren_spells = self.barren_spells.saturating_add(1);
                            self.young_fulls = 0;
                        }
                    }
                    Kind::Minor => {
                        self.barren_minors = 0;
                        self.barren_spells = 0;
                    }
                    // Mostly young garbage: minor collections may pay again,
                    // but each time they were found barren again they wait
                    // twice as long (a list built and dropped whole leaves
                    // young garbage only because full collections ran
                    // rarely; minors would promote the next list first).
                    Kind::Full if freed.saturating_sub(old_garbage) > old_garbage => {
                        self.young_fulls += 1;
                        let wait = self
                            .barren_spells
                            .saturating_sub(1)
                            .min(MAX_BARREN_WAIT_LOG2);
                        if self.young_fulls >= 1 << wait {
                            self.barren_minors = 0;
                        }
                    }
                    Kind::Full => {}
                }
                // The wasted work of the next collection the young roots
                // trigger (tracing live objects) is paid for by as many
                // new roots: a minor one traces about the objects this one
                // promoted; a full one the live objects this one traced,
                // or the old generation if larger, paid for twice over
                // (see "Barren minor collections").
                let wasted = if self.young_kind() == Kind::Full {
                    let old = COUNTERS.with(|c| c.old_objects.get());
                    let live = traced.saturating_sub(freed).max(old as usize);
                    live.saturating_mul(BARREN_ROOT_FACTOR)
                } else {
                    promoted
                };
                self.young_threshold = wasted.max(self.config.min_roots);
                self.growth_threshold = wasted.max(self.config.young_objects) as u64;
            }
        }
        self.live_after_last = live_objects();
        if kind == Kind::Full {
            self.promoted_since_full = 0;
            let live_traced = traced.saturating_sub(freed) as u64;
            self.set_full_budget(COUNTERS.with(|c| c.old_objects.get()), live_traced);
        }
    }
}

/// This thread's counters, for the hot paths: every one of them reaches
/// `COUNTERS` through this function, so that a free or an allocation that
/// touches several counters computes the thread-local's address once.
///
/// Through `try_with`, not `with`: `LocalKey::with` is not `#[inline]`, so
/// where rustc placed its instance in another codegen unit than the caller
/// (which moved with unrelated edits), LLVM saw the accessor (an indirect
/// call through the key) only after ThinLTO had decided what to import, and
/// it stayed a call: `recycler::Rc`'s new+drop paid one on every allocation
/// and free, and fusing the counters with the drainer's stack limit moved
/// such calls into `Gc`'s allocation. `try_with` is `#[inline]`: the call
/// through the key is in the caller's own code from the start.
#[inline(always)]
fn counters() -> &'static Counters {
    let c: *const Counters = match COUNTERS.try_with(core::ptr::from_ref) {
        Ok(c) => c,
        // Never: a thread-local without destructor is never destroyed.
        Err(_) => counters_gone(),
    };
    // SAFETY: `COUNTERS` has no destructor, so its storage lives as long as
    // this thread, and `Counters` is `!Sync`: the reference cannot leave
    // the thread, and every caller uses it at once.
    unsafe { &*c }
}

#[cold]
#[inline(never)]
fn counters_gone() -> ! {
    panic!("the collector's thread-local counters were destroyed")
}

/// Counts a new object; returns the number of deferred frees waiting (see
/// `drop_queue.rs`), read in the same thread-local access.
#[inline]
pub(crate) fn on_allocate() -> usize {
    let c = counters();
    c.allocated.set(c.allocated.get() + 1);
    c.deferred.get()
}

/// Takes back the count of an object that was never made (its initialiser
/// panicked).
pub(crate) fn on_allocate_undone() {
    COUNTERS.with(|c| c.allocated.set(c.allocated.get() - 1));
}

/// The number of deferred frees waiting (see `drop_queue.rs`).
#[inline(always)]
pub(crate) fn deferred() -> usize {
    counters().deferred.get()
}

/// Sets the number of deferred frees waiting.
#[inline(always)]
pub(crate) fn set_deferred(n: usize) {
    counters().deferred.set(n)
}

/// The running drainer's stack limit (see `drop_queue.rs`).
#[inline(always)]
pub(crate) fn drain_limit() -> usize {
    counters().drain_limit.get()
}

/// Sets the running drainer's stack limit.
#[inline(always)]
pub(crate) fn set_drain_limit(limit: usize) {
    counters().drain_limit.set(limit)
}

/// Objects allocated and not yet freed on this thread. Inlined (a plain
/// thread-local load): `buffer` asks on every root, and the out-of-line
/// `LocalKey::with` it got cost a call each time.
#[inline(always)]
fn live_objects() -> u64 {
    let c = counters();
    c.allocated.get() - c.freed_by_rc.get() - c.collected.get()
}

/// Buffers `object` as a possible cycle root and runs a collection if the
/// policy says so. Called when a strong count drops to a non-zero value on an
/// unbuffered, alive object that may own pointers.
#[cold]
#[inline(never)]
pub(crate) fn buffer(object: Object) {
    let due = STATE.try_with(|state| {
        let Ok(mut state) = state.try_borrow_mut() else {
            return None;
        };
        state.push(object);
        state.due()
    });
    // Not while unwinding: the collection would run the destructors of
    // unrelated garbage, and re-raising one's panic now would abort the
    // process. The roots stay buffered for a later collection.
    if let Ok(Some((kind, ripen))) = due {
        if !std::thread::panicking() {
            run(kind, ripen, true);
        }
    }
}

/// Handles an object whose strong count just reached zero.
///
/// # Safety
/// The caller gave up the object's last strong reference.
#[inline]
pub(crate) unsafe fn release(object: Object) {
    // SAFETY: the implicit weak reference keeps the header live.
    let h = unsafe { object.as_ref() };
    let flags = h.flags() & (BUFFERED | OLD | DEAD | IN_GRAPH);
    if flags == DEAD {
        // The last handle to a member of a collected cycle (the common case
        // while the collector drops a garbage cycle's values): the value is
        // gone and counted; free the memory (deferred, see `drop_queue`).
        // SAFETY: strong is zero and the value is gone.
        return unsafe { header::release_weak_dead(object) };
    }
    if flags != 0 {
        // SAFETY: forwarded.
        return unsafe { release_flagged(object) };
    }
    on_free_by_rc();
    // SAFETY: strong is zero, the value alive (not DEAD), the object in no
    // buffer (not BUFFERED) and in no graph (not IN_GRAPH).
    unsafe { drop_queue::free_object(object) }
}

/// Counts an object freed by counting (the caller frees it).
#[inline]
pub(crate) fn on_free_by_rc() {
    let c = counters();
    c.freed_by_rc.set(c.freed_by_rc.get() + 1);
}

/// The slow part of [`release`]: unbuffer, leave the old generation, or free
/// the memory of a dead object.
#[cold]
#[inline(never)]
unsafe fn release_flagged(object: Object) {
    // SAFETY: the implicit weak reference keeps the header live.
    let h = unsafe { object.as_ref() };
    if h.has(IN_GRAPH) {
        // Only a `Trace` impl that gives up a pointer its value owns during
        // a collection gets here: the graph still refers to the object, so
        // keep it (leak) rather than free it under the graph's feet.
        return;
    }
    if h.has(BUFFERED) {
        let removed = STATE.try_with(|state| match state.try_borrow_mut() {
            Ok(mut state) => {
                state.remove(object);
                true
            }
            Err(_) => false,
        });
        match removed {
            Ok(true) => {}
            // The buffer was destroyed with the thread: nothing refers to it.
            Err(_) => h.clear_flag(BUFFERED),
            // The buffer is borrowed, which the collector never allows around
            // user code. Keep the object (leak) rather than free it under the
            // buffer's feet.
            Ok(false) => return,
        }
    }
    if h.has(OLD) {
        h.clear_flag(OLD);
        COUNTERS.with(|c| c.old_objects.set(c.old_objects.get() - 1));
    }
    if h.has(DEAD) {
        // The collector dropped the value and counted it; free the memory.
        // SAFETY: strong is zero and the value is gone.
        unsafe { header::release_weak_dead(object) };
        return;
    }
    // SAFETY: now unflagged; `release` handles it as an ordinary object.
    unsafe { release(object) }
}

/// Handles an object whose value `try_unwrap` moved out (strong is zero, the
/// object unbuffered).
///
/// # Safety
/// As stated; the value must not be dropped again.
pub(crate) unsafe fn release_taken(object: Object) {
    // SAFETY: the implicit weak reference keeps the header live.
    let h = unsafe { object.as_ref() };
    if h.has(OLD) {
        h.clear_flag(OLD);
        COUNTERS.with(|c| c.old_objects.set(c.old_objects.get() - 1));
    }
    on_free_by_rc();
    // SAFETY: the value is gone; release the strong side's weak reference.
    unsafe { header::release_weak_object(object) }
}

/// Removes a live object from its roots buffer, if it is in one (for
/// `get_mut`, which must not hand out `&mut T` to something a collection may
/// trace).
pub(crate) fn unbuffer(object: Object) {
    // SAFETY: callers hold a strong reference.
    if !unsafe { object.as_ref() }.has(BUFFERED) {
        return;
    }
    let _ = STATE.try_with(|state| {
        if let Ok(mut state) = state.try_borrow_mut() {
            state.remove(object);
        }
    });
}

/// Runs a collection of `kind` now, or defers it if one is running; with
/// `ripen`, it leaves the newest young roots buffered. A minor collection
/// that the young roots `triggered` is full instead while minor ones are
/// barren (see "Barren minor collections").
///
/// A `collect()` from a destructor that the collection runs is deferred and
/// runs right after it, here, in a loop of a few rounds at most (so
/// destructors that keep asking cannot loop forever), never nested: a chain
/// of cycles whose destructors each collect, each freed by the collection
/// its predecessor's destructor asked for, nested one collection per link
/// and overflowed the stack (an internal review found it, with 200,000
/// links).
fn run(kind: Kind, ripen: bool, triggered: bool) {
    if COUNTERS.with(|c| c.collecting.get()) {
        COUNTERS.with(|c| c.requested.set(true));
        return;
    }
    let rounds = || {
        run_once(kind, ripen, triggered);
        for _ in 0..4 {
            if !COUNTERS.with(|c| c.requested.replace(false)) {
                break;
            }
            run_once(Kind::Full, false, false);
        }
    };
    if std::thread::panicking() {
        // A `collect()` from a destructor that an unwind runs: a panic out
        // of the collection (a `Trace` impl's; a garbage destructor's is
        // discarded below already) would abort the process. The hook
        // reported it; the collection's state is what a panic leaves it
        // in otherwise (an internal review found the abort).
        crate::payload::discard(panic::catch_unwind(AssertUnwindSafe(rounds)).err());
    } else {
        rounds();
    }
}

/// One collection of [`run`]'s (none is running on this thread).
fn run_once(kind: Kind, ripen: bool, triggered: bool) {
    COUNTERS.with(|c| c.collecting.set(true));
    /// Ends the collection, also when unwinding.
    struct Running;
    impl Drop for Running {
        fn drop(&mut self) {
            COUNTERS.with(|c| c.collecting.set(false));
            PAUSE.with(|p| p.set(None));
        }
    }
    let running = Running;
    PAUSE.with(|p| p.set(Some(LazyPauseTimer::start())));
    let taken = STATE.try_with(|state| {
        let mut state = state.borrow_mut();
        let promote = state.policy == Policy::Adaptive;
        let kind = match kind {
            Kind::Minor if triggered => state.young_kind(),
            kind => kind,
        };
        let roots = state.take_roots(kind, ripen);
        (kind, roots, state.graph.take().unwrap_or_default(), promote)
    });
    let Ok((kind, mut roots, mut graph, promote)) = taken else {
        return;
    };
    let verdict = graph.collect(
        &roots,
        kind == Kind::Minor,
        promote,
        &mut |root| STATE.with(|state| state.borrow_mut().push(root)),
        &mut |object| STATE.with(|state| state.borrow_mut().remove(object)),
    );
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        for &object in &graph.retry {
            // SAFETY: live objects of the graph (no user code has run since
            // the verdict, so none was freed).
            if !unsafe { object.as_ref() }.has(BUFFERED) {
                state.push(object);
            }
        }
    });
    let freed = graph.garbage.len();
    COUNTERS.with(|c| {
        c.old_objects
            .set(c.old_objects.get() + verdict.promoted as u64 - verdict.old_garbage as u64);
        c.collected.set(c.collected.get() + freed as u64);
    });
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| kill(&graph.garbage, &graph.held)));
    graph.garbage.clear();
    graph.held.clear();
    roots.clear();
    let (pause, cpu) = PAUSE
        .with(Cell::take)
        .map_or((Duration::ZERO, Duration::ZERO), |timer| timer.stop());
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        state.spare = roots;
        state.graph = Some(graph);
        state.total_pause_cpu += cpu;
        state.account(
            kind,
            verdict.traced,
            freed,
            verdict.old_garbage,
            verdict.promoted,
            pause,
        );
    });
    drop(running);
    // Not while unwinding (a `collect()` from a destructor the unwind runs).
    if let Err(payload) = outcome {
        crate::payload::resume(payload);
    }
}

/// Frees the garbage of a collection (prepared by the graph: `DEAD`, one
/// hold each) in drop order, and frees by counting the live roots in `held`
/// whose hold was their last reference.
fn kill(garbage: &[Object], held: &[Object]) {
    drop_queue::batch(|| {
        for &root in held {
            // The hold was the last strong reference when the collection
            // judged, but the drop of an earlier root (in place, within the
            // stack budget) may have upgraded a `Weak` to this one since: a
            // decrement, as `release_hold`'s (an outside review found a
            // plain store of zero freeing it under the new handle).
            // SAFETY: the hold keeps the root live until here.
            unsafe {
                let h = root.as_ref();
                let strong = h.strong() - 1;
                h.set_strong(strong);
                if strong == 0 {
                    release(root);
                }
            }
        }
        let mut first_panic = None;
        // One `catch_unwind` for the whole run, resumed after a panic at the
        // next object.
        let mut next = 0;
        while next < garbage.len() {
            let dropped = panic::catch_unwind(AssertUnwindSafe(|| {
                while let Some(&object) = garbage.get(next) {
                    next += 1;
                    if next % CHECKPOINT_EVERY == 0 {
                        checkpoint();
                    }
                    // SAFETY: the value is alive (objects become DEAD only
                    // when judged, and the verdict contains no DEAD object);
                    // nothing references it but other members and handles
                    // that see DEAD. Its hold keeps the memory; the holds of
                    // the members not dropped yet keep theirs.
                    unsafe { header::drop_value_erased(object) }
                    // SAFETY: the hold is ours; the value is gone.
                    unsafe { release_hold(object) }
                }
            }));
            if let Err(payload) = dropped {
                // The panicking value is dropped (unwinding finished its
                // fields); its hold was not released yet.
                // SAFETY: as above.
                unsafe { release_hold(garbage[next - 1]) };
                crate::payload::keep_first(&mut first_panic, payload);
            }
        }
        if let Some(payload) = first_panic {
            panic::resume_unwind(payload);
        }
    });
}

/// Releases the hold on a garbage object whose value is dropped, and frees
/// its memory if no handle remains. Otherwise the last handle frees it (its
/// `release` sees `DEAD`): a member is freed as soon as the members that
/// point to it are dropped, while the allocator's caches are warm.
///
/// # Safety
/// The caller owns the hold; the value is dropped.
#[inline]
unsafe fn release_hold(object: Object) {
    // SAFETY: the hold keeps the object live until here.
    let h = unsafe { object.as_ref() };
    let strong = h.strong() - 1;
    h.set_strong(strong);
    if strong == 0 {
        // SAFETY: no handle remains and the value is dropped.
        unsafe { header::release_weak_dead(object) };
    }
}

/// Runs a full collection of this thread's cycles now.
///
/// Every object that is unreachable from handles outside the heap is freed;
/// nothing reachable is. A thread's collector does not run when the thread
/// exits (user destructors cannot run safely inside thread-local
/// destruction), so a thread that leaves garbage cycles behind should call
/// `collect()` before it ends; otherwise they leak. Called from a destructor during a collection, it runs
/// right after the current collection. A panic from a value's `Drop` is
/// re-raised here once the collector is consistent again, unless the thread
/// is unwinding (a `collect()` from a destructor that an unwind runs): a
/// second panic would abort the process, so it is only reported (by the
/// panic hook).
///
/// ```
/// use std::cell::RefCell;
/// use recycler::{Gc, Trace};
///
/// #[derive(Trace, Default)]
/// struct Node { next: RefCell<Option<Gc<Node>>> }
///
/// let a = Gc::new(Node::default());
/// let b = Gc::new(Node::default());
/// *a.next.borrow_mut() = Some(b.clone());
/// *b.next.borrow_mut() = Some(a.clone());
/// let before = recycler::stats().freed_by_collector;
/// drop((a, b));
/// recycler::collect();
/// assert_eq!(recycler::stats().freed_by_collector - before, 2);
/// ```
pub fn collect() {
    // It judges every object: whether minor collections pay is judged
    // afresh after it (see "Barren minor collections").
    let _ = STATE.try_with(|state| {
        if let Ok(mut state) = state.try_borrow_mut() {
            state.barren_minors = 0;
        }
    });
    run(Kind::Full, false, false);
    // Memory kept for the next allocations (see `drop_queue`) goes back now.
    drop_queue::free_all_deferred();
}

/// Runs a minor collection now: the young generation only, as the default
/// policy's trigger does. Cycles that involve old objects wait for a full
/// collection.
pub fn collect_minor() {
    run(Kind::Minor, false, false);
    drop_queue::free_all_deferred();
}

/// This thread's collector statistics.
pub fn stats() -> Stats {
    let live = live_objects();
    let (freed_by_rc, old_objects) = COUNTERS.with(|c| (c.freed_by_rc.get(), c.old_objects.get()));
    let mut stats = Stats {
        live,
        freed_by_rc,
        old_objects,
        ..Stats::default()
    };
    let _ = STATE.try_with(|state| {
        let state = state.borrow();
        stats.minor_collections = state.minor_collections;
        stats.full_collections = state.full_collections;
        stats.roots_buffered = (state.young.len() + state.old.len()) as u64;
        stats.nodes_traced = state.nodes_traced;
        stats.freed_by_collector = state.freed_by_collector;
        stats.promoted = state.promoted;
        stats.total_pause = state.total_pause;
        stats.max_pause = state.max_pause;
        stats.total_pause_cpu = state.total_pause_cpu;
    });
    stats
}

/// Sets this thread's collection policy. Thresholds start afresh.
pub fn set_policy(policy: Policy) {
    let _ = STATE.try_with(|state| {
        let mut state = state.borrow_mut();
        state.policy = policy;
        state.reset_triggers();
    });
}

/// Makes this thread's [`Policy::Nim16`] trigger read and update one
/// threshold shared by every thread that does the same, instead of its own.
///
/// This reproduces a defect of Nim ≤ 1.6.12 (fixed by Nim PR 21818), for
/// experiments such as `server-demo`'s `orc-nim16-faithful` mode: the
/// threshold was a plain global, so one thread's collections moved every
/// other thread's trigger, and concurrent updates were lost. The shared
/// value starts at 128 and is never reset. Other policies ignore it.
///
/// ```
/// use recycler::Policy;
///
/// recycler::set_policy(Policy::Nim16);
/// recycler::set_nim16_shared_threshold(true);
/// let shared = recycler::nim16_threshold();
/// std::thread::spawn(move || {
///     recycler::set_policy(Policy::Nim16);
///     recycler::set_nim16_shared_threshold(true);
///     assert_eq!(recycler::nim16_threshold(), shared);
/// })
/// .join()
/// .unwrap();
/// recycler::set_nim16_shared_threshold(false);
/// assert_eq!(recycler::nim16_threshold(), 128);
/// ```
pub fn set_nim16_shared_threshold(shared: bool) {
    let _ = STATE.try_with(|state| state.borrow_mut().nim_shared = shared);
}

/// The [`Policy::Nim16`] threshold in force on this thread: the number of
/// buffered roots that triggers its next collection (its own, or the shared
/// one after [`set_nim16_shared_threshold`]).
pub fn nim16_threshold() -> usize {
    STATE
        .try_with(|state| state.borrow().nim_threshold())
        .unwrap_or(NIM_INITIAL_THRESHOLD)
}

/// This thread's collection policy.
pub fn policy() -> Policy {
    STATE
        .try_with(|state| state.borrow().policy)
        .unwrap_or_default()
}

/// Tunes this thread's [`Policy::Adaptive`].
pub fn set_adaptive_config(config: AdaptiveConfig) {
    let _ = STATE.try_with(|state| {
        let mut state = state.borrow_mut();
        state.config = config;
        state.reset_triggers();
    });
}
