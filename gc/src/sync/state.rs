//! Per-thread candidate buffers, the process-wide registry that lets any
//! thread collect every thread's candidates, triggers and statistics.
//!
//! - Each thread owns a [`Slot`]: a [`RootBuffer`] that only its owner
//!   pushes to (a ring filled with no read-modify-write, drained by
//!   collections under a lock; see `buffer.rs`) and a few counters that
//!   only its owner writes. No mutator operation touches a lock or counter
//!   shared with other threads.
//! - The registry (a global mutex) is touched only when a thread starts or
//!   exits, by collections and by `stats`. A thread's exit moves its entries
//!   to the orphan list, which the next collection drains, and its counters
//!   to the retired totals, both under the registry lock so that `stats`
//!   (which reads under it) counts the thread exactly once.
//! - The old roots (entries of old objects, which only a full collection
//!   drains) wait in a list of their own, owned by the collector.
//! - The collector mutex (each thread keeps its own buffers for the
//!   collections it runs) is `try_lock`ed: one collection at a time, and a
//!   thread that finds one running carries on — unless, under the Adaptive
//!   policy, it has buffered four times its threshold meanwhile: then it
//!   waits for the running collection at most 10 ms per buffering (pacing;
//!   see the module docs of `sync`).

use core::cell::Cell;
use core::ptr::NonNull;
use core::sync::atomic::AtomicU64 as StatCounter;
use core::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::buffer::RootBuffer;
use super::collector::Kind;
use super::header::Header;
use super::prim::{thread_local, Mutex, MutexGuard};
use crate::{Policy, Stats};

/// A buffered possible cycle root. Owning an entry means owning the
/// object's `BUFFERED` bit, which keeps its memory alive.
pub(crate) struct Entry(pub(crate) NonNull<Header>);

// SAFETY: an entry is a token for a header of a `Send + Sync` value (only
// `sync::Gc<T: Send + Sync>` buffers); any thread may drain it.
unsafe impl Send for Entry {}

/// Initial Nim threshold (Nim 1.6.12 `rootsThreshold`).
const NIM_START: usize = 128;
/// Nim's floor.
const NIM_FLOOR: usize = 16;

/// Nim ≤ 1.6.12's one threshold for every thread (see
/// [`super::set_nim16_shared_threshold`]): relaxed loads and stores, updated
/// by load–compute–store, so concurrent updates are lost as Nim's were.
static NIM_SHARED: core::sync::atomic::AtomicUsize =
    core::sync::atomic::AtomicUsize::new(NIM_START);
/// Smallest number of new roots (per thread) between two adaptive
/// collections: bounds the garbage a thread leaves between collections when
/// little is live, and the burst of frees a collection makes (see *The
/// allocator* in the module docs).
pub(crate) const ADAPTIVE_MIN: usize = 128;

/// How many of its newest roots a mutator's automatic collection
/// ([`Kind::Local`]) leaves in its buffer for the next one (*ripening*, as
/// the single-threaded collector's `min_roots`): a decrement that has just
/// happened is most often part of work in progress (a request's objects
/// still being built or used), so its object is likely live; judged now, it
/// would be traced, found live and promoted, and if it dies a moment later
/// it would be old garbage that only a full collection frees. Left for one
/// interval, it is usually garbage by then, or freed by counting. Other
/// collections ([`collect`](super::collect), `collect_minor`, the collector
/// thread's) take every root.
pub(crate) const RIPEN: usize = 64;

/// The Adaptive interval grows at most to this multiple of [`ADAPTIVE_MIN`]
/// (so a thread leaves at most 4096 roots, and waits for a running
/// collection at 16384; see [`PACE`]).
const ADAPTIVE_MAX_FACTOR: usize = 32;

/// The most roots per thread that the wasted work of the last collection
/// (the objects it traced, found live and promoted) makes the next one wait
/// for: the longest interval.
///
/// A minor collection never enters an old object, so what one collection
/// promoted is not traced again by the next: each object is promoted once,
/// and the live objects minor collections trace are bounded by the objects
/// allocated, whatever the interval. Waiting for as many roots as a large
/// one-off promotion (a hub built at start) only let the garbage of that
/// interval pile up: in the work-stealing server the collection that
/// promoted the 10,411 hub nodes made each worker wait 10,411 roots, 16k
/// garbage objects waited, and glibc's heap grew to 13.8 MiB and kept
/// about 13 (11.8 MiB with the cap, in the same probe). `sync_profile hub` at H = 1M: the request
/// garbage was not collected at all for a million roots; with the cap it
/// is collected every 4096 (-14 % instructions per request over 400k
/// requests, after one full collection of the hub that the uncapped
/// trigger deferred past the run).
const WASTED_CAP: usize = ADAPTIVE_MAX_FACTOR * ADAPTIVE_MIN;

/// The Adaptive interval after a collection that traced `traced` objects
/// and freed `freed`, from `level` (Nim's yield rule, on the interval
/// between collections): a collection that freed less than half of what it
/// traced spent most of its work on live objects, so the next one waits
/// 1.5 times as many roots (up to `ADAPTIVE_MAX_FACTOR × ADAPTIVE_MIN`);
/// one that freed at least half halves it (down to [`ADAPTIVE_MIN`]).
///
/// Why: in a longer interval more of the buffered objects die by counting
/// before they are judged (they cost no tracing), and an object decremented
/// several times is traced once; the price is the garbage that waits, so
/// the interval shrinks back as soon as collections find mostly garbage
/// (churn, request cycles) and stays bounded.
pub(crate) fn next_level(level: usize, freed: usize, traced: usize) -> usize {
    if traced == 0 {
        level
    } else if freed.saturating_mul(2) >= traced {
        (level / 2).max(ADAPTIVE_MIN)
    } else {
        (level.saturating_mul(3) / 2).min(ADAPTIVE_MAX_FACTOR * ADAPTIVE_MIN)
    }
}

/// The Adaptive interval now (for tests).
#[cfg(test)]
pub(crate) fn adaptive_level() -> usize {
    global().level.load(Relaxed) as usize
}

/// A full collection is due under Adaptive once the objects promoted since
/// the last one, or the old roots waiting, exceed `1 / FULL_DIVISOR` of the
/// old objects counted at the last full collection (CPython's rule, as the
/// single-threaded collector's default `full_fraction` of 0.25), and at least
/// [`FULL_FLOOR`].
const FULL_DIVISOR: u64 = 4;

/// The fewest promotions or old roots waiting that make a full collection
/// due.
const FULL_FLOOR: u64 = 1024;

/// A minor collection on a mutator takes the buffers of other (live)
/// threads only when no collection took them for this many collections:
/// an idle thread's garbage waits at most that long, as long as any thread
/// collects.
pub(crate) const STALE: u64 = 8;

/// Counters a thread writes alone (statistics are sums over threads).
#[derive(Default)]
struct Counters {
    allocated: StatCounter,
    freed_by_rc: StatCounter,
    /// Of `freed_by_rc`, the old objects.
    old_freed_by_rc: StatCounter,
    roots_buffered: StatCounter,
}

impl Counters {
    /// Owner-only increment: a load and a store, no RMW.
    fn bump(counter: &StatCounter) {
        counter.store(counter.load(Relaxed) + 1, Relaxed);
    }
}

/// One thread's buffer and counters.
pub(crate) struct Slot {
    entries: RootBuffer,
    counters: Counters,
    /// One more than `Global::collections` when a collection last took
    /// this buffer (written under the registry lock): the owner's trigger
    /// counts its roots from there, and a buffer left [`STALE`]
    /// collections behind is taken by any collection.
    drained_at: StatCounter,
}

/// Process-wide state.
pub(crate) struct Global {
    registry: Mutex<Vec<Arc<Slot>>>,
    orphans: Mutex<Vec<Entry>>,
    /// Entries of old objects, left by minor collections for the next full
    /// one (also the young objects a minor collection could not prove live,
    /// see `collector/mod.rs`). Only collections touch it.
    pub(crate) old_roots: Mutex<Vec<Entry>>,
    /// `old_roots.len()`, for the mutators' full-collection trigger.
    pub(crate) old_roots_waiting: StatCounter,
    /// One collection at a time (each thread keeps its own buffers for its
    /// collections, `collector/mod.rs`).
    collector_lock: Mutex<()>,
    /// Counters of threads that exited (updated under the registry lock, so
    /// that `stats` sees an exiting thread exactly once), plus everything
    /// the collector counts.
    retired_allocated: StatCounter,
    retired_freed_by_rc: StatCounter,
    retired_old_freed_by_rc: StatCounter,
    retired_roots: StatCounter,
    pub(crate) freed_by_collector: StatCounter,
    /// Of `freed_by_collector`, the old objects.
    pub(crate) old_freed_by_collector: StatCounter,
    /// Minor plus full collections (the epoch of the per-thread triggers).
    pub(crate) collections: StatCounter,
    pub(crate) minor_collections: StatCounter,
    pub(crate) nodes_traced: StatCounter,
    /// Objects the last collection traced and found live that were not
    /// old already (its wasted work; what the next one may waste again).
    pub(crate) last_live_traced: StatCounter,
    /// The Adaptive trigger's level (roots per thread between collections),
    /// adapted to the yield of the collections (see `adapt_level`).
    pub(crate) level: StatCounter,
    /// Objects ever promoted.
    pub(crate) promoted: StatCounter,
    pub(crate) promoted_since_full: StatCounter,
    /// Old objects alive at the end of the last full collection.
    pub(crate) old_at_full: StatCounter,
    pub(crate) total_pause_ns: StatCounter,
    pub(crate) max_pause_ns: StatCounter,
    pub(crate) total_pause_cpu_ns: StatCounter,
    /// The free phases (step 5) of collections begun so far: each takes
    /// the next number under the collector lock, so the numbers follow the
    /// order of the collections.
    #[cfg(not(loom))]
    pub(crate) batches: StatCounter,
    /// The numbers of the free phases running now, after their collection
    /// released the collector lock; an explicit collection waits for those
    /// below the first number it saw (`collect_explicit`).
    #[cfg(not(loom))]
    pub(crate) dying: Mutex<Vec<u64>>,
}

impl Global {
    fn new() -> Self {
        Global {
            registry: Mutex::new(Vec::new()),
            orphans: Mutex::new(Vec::new()),
            old_roots: Mutex::new(Vec::new()),
            old_roots_waiting: StatCounter::new(0),
            collector_lock: Mutex::new(()),
            retired_allocated: StatCounter::new(0),
            retired_freed_by_rc: StatCounter::new(0),
            retired_old_freed_by_rc: StatCounter::new(0),
            retired_roots: StatCounter::new(0),
            freed_by_collector: StatCounter::new(0),
            old_freed_by_collector: StatCounter::new(0),
            collections: StatCounter::new(0),
            minor_collections: StatCounter::new(0),
            nodes_traced: StatCounter::new(0),
            last_live_traced: StatCounter::new(0),
            level: StatCounter::new(ADAPTIVE_MIN as u64),
            promoted: StatCounter::new(0),
            promoted_since_full: StatCounter::new(0),
            old_at_full: StatCounter::new(0),
            total_pause_ns: StatCounter::new(0),
            max_pause_ns: StatCounter::new(0),
            total_pause_cpu_ns: StatCounter::new(0),
            #[cfg(not(loom))]
            batches: StatCounter::new(0),
            #[cfg(not(loom))]
            dying: Mutex::new(Vec::new()),
        }
    }

    /// Takes the buffered entries of exited threads and of every thread —
    /// or, if `local`, only the calling thread's but its newest [`RIPEN`],
    /// and those of threads whose buffer no collection took in the last
    /// [`STALE`] collections (see *Where collections run* in the module
    /// docs).
    ///
    /// Under the registry lock (the order every path takes: registry, then
    /// a buffer or the orphans), rather than on a copy of the registry: no
    /// allocation and no reference-count traffic per collection, and a
    /// thread starting or exiting waits for a few `memcpy`s at most.
    pub(crate) fn drain(&self, into: &mut Vec<Entry>, local: bool) {
        // Before the registry lock: a first access registers the thread,
        // which takes that lock.
        let own = if local {
            LOCAL.try_with(|l| Arc::as_ptr(&l.slot)).ok()
        } else {
            None
        };
        let registry = self.registry.lock();
        let now = self.collections.load(Relaxed) + 1;
        into.append(&mut self.orphans.lock());
        for slot in registry.iter() {
            // `own` is only set for a local collection.
            let mine = own == Some(Arc::as_ptr(slot));
            let fresh = now.saturating_sub(slot.drained_at.load(Relaxed)) < STALE;
            if local && fresh && !mine {
                continue;
            }
            slot.entries
                .drain_oldest_into(into, if mine { RIPEN } else { 0 });
            slot.drained_at.store(now, Relaxed);
        }
    }

    /// Whether the Adaptive policy asks for a full collection now.
    pub(crate) fn full_due(&self) -> bool {
        let budget = (self.old_at_full.load(Relaxed) / FULL_DIVISOR).max(FULL_FLOOR);
        // A minor collection re-buffers the live objects it could not prove
        // as old roots, so most promotions also sit in the old roots: take
        // the larger count rather than counting them twice.
        let pending = self
            .promoted_since_full
            .load(Relaxed)
            .max(self.old_roots_waiting.load(Relaxed));
        pending > budget
    }

    /// Adapts the Adaptive trigger's interval to the yield of a collection
    /// that traced `traced` objects and freed `freed` (see [`next_level`]).
    pub(crate) fn adapt_level(&self, freed: usize, traced: usize) {
        let level = self.level.load(Relaxed) as usize;
        self.level
            .store(next_level(level, freed, traced) as u64, Relaxed);
    }

    /// Whether the recent collections found mostly garbage: the Adaptive
    /// interval is at its floor, where collections that freed at least half
    /// of what they traced bring it (see [`next_level`]). Automatic minor
    /// collections age what they find live only then
    /// (`collector::promote_node`).
    pub(crate) fn mostly_garbage(&self) -> bool {
        self.level.load(Relaxed) as usize <= ADAPTIVE_MIN
    }

    /// Old objects alive now: promoted, minus those freed since (exact once
    /// every thread's counters are read under the registry lock).
    pub(crate) fn old_objects(&self) -> u64 {
        let registry = self.registry.lock();
        self.old_objects_locked(&registry)
    }

    fn old_objects_locked(&self, registry: &[Arc<Slot>]) -> u64 {
        let mut freed =
            self.retired_old_freed_by_rc.load(Relaxed) + self.old_freed_by_collector.load(Relaxed);
        for slot in registry {
            freed += slot.counters.old_freed_by_rc.load(Relaxed);
        }
        self.promoted.load(Relaxed).saturating_sub(freed)
    }

    /// The collector lock, if no collection is running.
    pub(crate) fn try_collector(&self) -> Option<MutexGuard<'_, ()>> {
        self.collector_lock.try_lock()
    }

    /// The collector lock, waiting for a running collection to end.
    #[cfg(not(loom))]
    pub(crate) fn collector_lock(&self) -> MutexGuard<'_, ()> {
        self.collector_lock.lock()
    }

    /// The collector lock, waiting at most `patience` for a running
    /// collection to end.
    #[cfg(not(loom))]
    pub(crate) fn collector_within(
        &self,
        patience: core::time::Duration,
    ) -> Option<MutexGuard<'_, ()>> {
        self.collector_lock.try_lock_for(patience)
    }
}

#[cfg(not(loom))]
pub(crate) fn global() -> &'static Global {
    static GLOBAL: std::sync::OnceLock<Global> = std::sync::OnceLock::new();
    GLOBAL.get_or_init(Global::new)
}

#[cfg(loom)]
loom::lazy_static! {
    static ref GLOBAL: Arc<Global> = Arc::new(Global::new());
}

#[cfg(loom)]
pub(crate) fn global() -> &'static Global {
    &GLOBAL
}

/// What a thread's registration keeps of the global state. Under loom, the
/// lazy statics are torn down before the main thread's thread-locals, so a
/// thread keeps its own reference for its exit.
#[cfg(not(loom))]
type GlobalRef = &'static Global;
#[cfg(loom)]
type GlobalRef = Arc<Global>;

#[cfg(not(loom))]
fn global_ref() -> GlobalRef {
    global()
}

#[cfg(loom)]
fn global_ref() -> GlobalRef {
    GLOBAL.clone()
}

/// This thread's registration and trigger state.
struct Local {
    global: GlobalRef,
    slot: Arc<Slot>,
    policy: Cell<Policy>,
    /// Nim16: the current threshold; Adaptive: unused.
    threshold: Cell<usize>,
    /// Nim16 uses [`NIM_SHARED`] instead of `threshold`.
    nim_shared: Cell<bool>,
    /// Roots this thread buffered since a collection last took its buffer
    /// (as far as it noticed).
    since: Cell<usize>,
    /// `Slot::drained_at` when `since` was last reset.
    epoch: Cell<u64>,
}

impl Local {
    fn register() -> Self {
        let slot = Arc::new(Slot {
            entries: RootBuffer::new(),
            counters: Counters::default(),
            drained_at: StatCounter::new(0),
        });
        let global = global_ref();
        // Fresh, as if a collection had just taken it.
        let epoch = global.collections.load(Relaxed) + 1;
        slot.drained_at.store(epoch, Relaxed);
        global.registry.lock().push(slot.clone());
        Local {
            global,
            slot,
            policy: Cell::new(Policy::default()),
            threshold: Cell::new(NIM_START),
            nim_shared: Cell::new(false),
            since: Cell::new(0),
            epoch: Cell::new(epoch),
        }
    }
}

impl Local {
    /// The Nim16 threshold in force: this thread's or the shared one.
    fn nim_threshold(&self) -> usize {
        if self.nim_shared.get() {
            NIM_SHARED.load(Relaxed)
        } else {
            self.threshold.get()
        }
    }
}

impl Drop for Local {
    /// Thread exit: hand the buffer over and fold the counters into the
    /// retired totals.
    ///
    /// All of it happens under the registry lock, which `stats` also holds
    /// while it reads: it sees this thread either in the registry or in the
    /// retired totals and orphans, never both and never neither.
    fn drop(&mut self) {
        let global = &self.global;
        let mut registry = global.registry.lock();
        self.slot.entries.drain_into(&mut global.orphans.lock());
        let c = &self.slot.counters;
        global
            .retired_allocated
            .fetch_add(c.allocated.load(Relaxed), Relaxed);
        global
            .retired_freed_by_rc
            .fetch_add(c.freed_by_rc.load(Relaxed), Relaxed);
        global
            .retired_old_freed_by_rc
            .fetch_add(c.old_freed_by_rc.load(Relaxed), Relaxed);
        global
            .retired_roots
            .fetch_add(c.roots_buffered.load(Relaxed), Relaxed);
        registry.retain(|slot| !Arc::ptr_eq(slot, &self.slot));
    }
}

thread_local! {
    static LOCAL: Local = Local::register();
}

/// Counts an allocation on this thread.
pub(crate) fn count_allocated() {
    if LOCAL
        .try_with(|l| Counters::bump(&l.slot.counters.allocated))
        .is_err()
    {
        global().retired_allocated.fetch_add(1, Relaxed);
    }
}

/// Counts a value freed because its count reached zero (`old`: it was in
/// the old generation).
pub(crate) fn count_freed_by_rc(old: bool) {
    let counted = LOCAL.try_with(|l| {
        Counters::bump(&l.slot.counters.freed_by_rc);
        if old {
            Counters::bump(&l.slot.counters.old_freed_by_rc);
        }
    });
    if counted.is_err() {
        let global = global();
        global.retired_freed_by_rc.fetch_add(1, Relaxed);
        if old {
            global.retired_old_freed_by_rc.fetch_add(1, Relaxed);
        }
    }
}

/// Roots (as a multiple of its Adaptive threshold) that a thread may buffer
/// while another thread's collection runs before it waits for that
/// collection (see [`PATIENCE`]).
const PACE: usize = 4;
/// The longest a thread waits for a running collection at one buffering.
const PATIENCE: core::time::Duration = core::time::Duration::from_millis(10);

/// What a buffering asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Due {
    No,
    /// Collect if no other thread is collecting.
    Collect(Kind),
    /// This thread's garbage is outrunning a running collection: wait for
    /// it (boundedly), then collect.
    Pace(Kind),
}

/// Pushes a new buffer entry and runs a collection if this thread's policy
/// says one is due (and no other thread is collecting).
///
/// With the Adaptive policy a thread that has buffered [`PACE`] times its
/// threshold while another thread collects waits up to [`PATIENCE`] for
/// that collection to end (then collects): without such pacing, one thread
/// collecting cannot keep up with another that only allocates, and the
/// garbage of each interval grows with the previous collection's pause.
pub(crate) fn push_root(entry: Entry) {
    let due = LOCAL.try_with(|l| {
        // SAFETY: `LOCAL` is this thread's: it owns the buffer.
        let len = unsafe { l.slot.entries.push(Entry(entry.0)) };
        Counters::bump(&l.slot.counters.roots_buffered);
        match l.policy.get() {
            Policy::Manual => Due::No,
            Policy::Nim16 if len >= l.nim_threshold() => {
                Due::Collect(Kind::Full { promote: false })
            }
            Policy::Nim16 => Due::No,
            Policy::Adaptive => {
                // A collection by another thread may have taken this
                // thread's roots too: count only the roots buffered since.
                let global = global();
                let epoch = l.slot.drained_at.load(Relaxed);
                if epoch != l.epoch.get() {
                    l.epoch.set(epoch);
                    l.since.set(0);
                }
                l.since.set(l.since.get() + 1);
                // Collect once the roots could pay for the live objects the
                // last collection traced in vain (as the single-threaded
                // collector's young threshold), up to the longest interval
                // (see [`WASTED_CAP`]), and at least the interval that the
                // yield of the collections set (`next_level`).
                let wasted = (global.last_live_traced.load(Relaxed) as usize).min(WASTED_CAP);
                let level = global.level.load(Relaxed) as usize;
                let threshold = level.max(wasted);
                let kind = || {
                    if global.full_due() {
                        Kind::Full { promote: true }
                    } else {
                        Kind::Local
                    }
                };
                if l.since.get() >= threshold.saturating_mul(PACE) {
                    Due::Pace(kind())
                } else if l.since.get() >= threshold {
                    Due::Collect(kind())
                } else {
                    Due::No
                }
            }
        }
    });
    let due = due.map(|due| match due {
        Due::No => None,
        #[cfg(not(loom))]
        Due::Collect(Kind::Local | Kind::Full { promote: true })
            if super::background::enabled() && super::background::request() =>
        {
            None
        }
        // Unwinding: a collection would run the destructors of unrelated
        // garbage, and re-raising one's panic now would abort the process.
        // The roots stay buffered for a later collection.
        Due::Collect(_) | Due::Pace(_) if std::thread::panicking() => None,
        Due::Collect(kind) => Some(super::collector::try_collect(kind)),
        Due::Pace(kind) => Some(super::collector::collect_paced(kind, PATIENCE)),
    });
    match due {
        Ok(Some(collected)) => {
            if let Some((freed, touched)) = collected {
                let _ = LOCAL.try_with(|l| {
                    l.since.set(0);
                    l.epoch.set(l.slot.drained_at.load(Relaxed));
                    if l.policy.get() == Policy::Nim16 {
                        let t = l.nim_threshold();
                        let next = if freed * 2 >= touched {
                            (t / 3 * 2).max(NIM_FLOOR)
                        } else {
                            t * 3 / 2
                        };
                        if l.nim_shared.get() {
                            NIM_SHARED.store(next, Relaxed);
                        } else {
                            l.threshold.set(next);
                        }
                    }
                });
            }
        }
        Ok(None) => {}
        Err(_) => global().orphans.lock().push(entry),
    }
}

/// Pushes an entry on behalf of the running collector (no trigger).
pub(crate) fn push_root_quietly(entry: Entry) {
    // SAFETY: `LOCAL` is this thread's: it owns the buffer.
    let pushed = LOCAL.try_with(|l| unsafe { l.slot.entries.push(Entry(entry.0)) });
    if pushed.is_err() {
        global().orphans.lock().push(entry);
    }
}

/// Sets this thread's trigger policy.
pub(crate) fn set_policy(policy: Policy) {
    let _ = LOCAL.try_with(|l| {
        l.policy.set(policy);
        l.threshold.set(NIM_START);
        l.since.set(0);
    });
}

/// This thread's policy.
pub(crate) fn policy() -> Policy {
    LOCAL.try_with(|l| l.policy.get()).unwrap_or_default()
}

/// Makes this thread's Nim16 trigger use the shared threshold, or its own.
pub(crate) fn set_nim16_shared_threshold(shared: bool) {
    let _ = LOCAL.try_with(|l| l.nim_shared.set(shared));
}

/// This thread's current Nim16 threshold (for tests).
#[cfg(test)]
pub(crate) fn nim_threshold() -> usize {
    LOCAL.with(|l| l.nim_threshold())
}

/// Process-wide statistics.
pub(crate) fn stats() -> Stats {
    let global = global();
    // Under the registry lock: an exiting thread moves its counters and
    // entries to the retired totals and orphans under the same lock.
    let registry = global.registry.lock();
    let mut allocated = global.retired_allocated.load(Relaxed);
    let mut freed_by_rc = global.retired_freed_by_rc.load(Relaxed);
    let mut roots_now = global.orphans.lock().len() as u64;
    for slot in registry.iter() {
        allocated += slot.counters.allocated.load(Relaxed);
        freed_by_rc += slot.counters.freed_by_rc.load(Relaxed);
        roots_now += slot.entries.len() as u64;
    }
    roots_now += global.old_roots_waiting.load(Relaxed);
    let freed_by_collector = global.freed_by_collector.load(Relaxed);
    let collections = global.collections.load(Relaxed);
    let minor_collections = global.minor_collections.load(Relaxed);
    Stats {
        live: allocated.saturating_sub(freed_by_rc + freed_by_collector),
        freed_by_rc,
        freed_by_collector,
        minor_collections,
        full_collections: collections.saturating_sub(minor_collections),
        roots_buffered: roots_now,
        nodes_traced: global.nodes_traced.load(Relaxed),
        promoted: global.promoted.load(Relaxed),
        old_objects: global.old_objects_locked(&registry),
        total_pause: core::time::Duration::from_nanos(global.total_pause_ns.load(Relaxed)),
        max_pause: core::time::Duration::from_nanos(global.max_pause_ns.load(Relaxed)),
        total_pause_cpu: core::time::Duration::from_nanos(global.total_pause_cpu_ns.load(Relaxed)),
    }
}
