//! Per-thread candidate buffers, the process-wide registry that lets any
//! thread collect every thread's candidates, triggers and statistics.
//!
//! - Each thread owns a [`Slot`]: a `Mutex<Vec<Entry>>` that only its owner
//!   pushes to (uncontended except while a collector swaps it out) and a few
//!   counters that only its owner writes. No mutator operation touches a
//!   lock or counter shared with other threads.
//! - The registry (a global mutex) is touched only when a thread starts or
//!   exits and by collections. A thread's exit moves its entries to the
//!   orphan list, which the next collection drains.
//! - The collector mutex is only ever `try_lock`ed: one collection at a
//!   time, and a thread that finds one running simply carries on.

use core::cell::Cell;
use core::ptr::NonNull;
use core::sync::atomic::AtomicU64 as StatCounter;
use core::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

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
/// Smallest number of new roots between two adaptive collections.
const ADAPTIVE_MIN: usize = 256;

/// Counters a thread writes alone (statistics are sums over threads).
#[derive(Default)]
struct Counters {
    allocated: StatCounter,
    freed_by_rc: StatCounter,
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
    entries: Mutex<Vec<Entry>>,
    counters: Counters,
}

/// Process-wide state.
pub(crate) struct Global {
    registry: Mutex<Vec<Arc<Slot>>>,
    orphans: Mutex<Vec<Entry>>,
    /// Counters of threads that exited, plus everything the collector counts.
    pub(crate) collector_lock: Mutex<()>,
    retired_allocated: StatCounter,
    retired_freed_by_rc: StatCounter,
    retired_roots: StatCounter,
    pub(crate) freed_by_collector: StatCounter,
    pub(crate) collections: StatCounter,
    pub(crate) nodes_traced: StatCounter,
    pub(crate) last_traced: StatCounter,
    pub(crate) total_pause_ns: StatCounter,
    pub(crate) max_pause_ns: StatCounter,
}

impl Global {
    fn new() -> Self {
        Global {
            registry: Mutex::new(Vec::new()),
            orphans: Mutex::new(Vec::new()),
            collector_lock: Mutex::new(()),
            retired_allocated: StatCounter::new(0),
            retired_freed_by_rc: StatCounter::new(0),
            retired_roots: StatCounter::new(0),
            freed_by_collector: StatCounter::new(0),
            collections: StatCounter::new(0),
            nodes_traced: StatCounter::new(0),
            last_traced: StatCounter::new(0),
            total_pause_ns: StatCounter::new(0),
            max_pause_ns: StatCounter::new(0),
        }
    }

    /// Takes every buffered entry of every thread (and of exited threads).
    pub(crate) fn drain_all(&self, into: &mut Vec<Entry>) {
        into.append(&mut self.orphans.lock());
        let slots: Vec<Arc<Slot>> = self.registry.lock().clone();
        for slot in slots {
            into.append(&mut slot.entries.lock());
        }
    }

    /// The collector lock, if no collection is running.
    pub(crate) fn try_collector(&self) -> Option<MutexGuard<'_, ()>> {
        self.collector_lock.try_lock()
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
    /// Roots this thread buffered since it last triggered a collection.
    since: Cell<usize>,
}

impl Local {
    fn register() -> Self {
        let slot = Arc::new(Slot {
            entries: Mutex::new(Vec::new()),
            counters: Counters::default(),
        });
        let global = global_ref();
        global.registry.lock().push(slot.clone());
        Local {
            global,
            slot,
            policy: Cell::new(Policy::default()),
            threshold: Cell::new(NIM_START),
            since: Cell::new(0),
        }
    }
}

impl Drop for Local {
    /// Thread exit: hand the buffer over and fold the counters into the
    /// retired totals.
    fn drop(&mut self) {
        let global = &self.global;
        let entries = core::mem::take(&mut *self.slot.entries.lock());
        global.orphans.lock().extend(entries);
        let c = &self.slot.counters;
        global
            .retired_allocated
            .fetch_add(c.allocated.load(Relaxed), Relaxed);
        global
            .retired_freed_by_rc
            .fetch_add(c.freed_by_rc.load(Relaxed), Relaxed);
        global
            .retired_roots
            .fetch_add(c.roots_buffered.load(Relaxed), Relaxed);
        global
            .registry
            .lock()
            .retain(|slot| !Arc::ptr_eq(slot, &self.slot));
    }
}

thread_local! {
    static LOCAL: Local = Local::register();
}

/// Counts an allocation on this thread.
pub(crate) fn count_allocated() {
    let _ = LOCAL.try_with(|l| Counters::bump(&l.slot.counters.allocated));
}

/// Counts a value freed because its count reached zero.
pub(crate) fn count_freed_by_rc() {
    if LOCAL
        .try_with(|l| Counters::bump(&l.slot.counters.freed_by_rc))
        .is_err()
    {
        global().retired_freed_by_rc.fetch_add(1, Relaxed);
    }
}

/// Pushes a new buffer entry and runs a collection if this thread's policy
/// says one is due (and no other thread is collecting).
pub(crate) fn push_root(entry: Entry) {
    let due = LOCAL.try_with(|l| {
        let len = {
            let mut entries = l.slot.entries.lock();
            entries.push(Entry(entry.0));
            entries.len()
        };
        Counters::bump(&l.slot.counters.roots_buffered);
        l.since.set(l.since.get() + 1);
        match l.policy.get() {
            Policy::Manual => false,
            Policy::Nim16 => len >= l.threshold.get(),
            Policy::Adaptive => {
                let last = global().last_traced.load(Relaxed) as usize;
                l.since.get() >= ADAPTIVE_MIN.max(last)
            }
        }
    });
    match due {
        Ok(true) => {
            if let Some((freed, touched)) = super::collector::try_collect() {
                let _ = LOCAL.try_with(|l| {
                    l.since.set(0);
                    if l.policy.get() == Policy::Nim16 {
                        let t = l.threshold.get();
                        l.threshold.set(if freed * 2 >= touched {
                            (t / 3 * 2).max(NIM_FLOOR)
                        } else {
                            t * 3 / 2
                        });
                    }
                });
            }
        }
        Ok(false) => {}
        Err(_) => global().orphans.lock().push(entry),
    }
}

/// Pushes an entry on behalf of the running collector (no trigger).
pub(crate) fn push_root_quietly(entry: Entry) {
    let pushed = LOCAL.try_with(|l| l.slot.entries.lock().push(Entry(entry.0)));
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

/// This thread's current Nim16 threshold (for tests).
#[cfg(test)]
pub(crate) fn nim_threshold() -> usize {
    LOCAL.with(|l| l.threshold.get())
}

/// Process-wide statistics.
pub(crate) fn stats() -> Stats {
    let global = global();
    let mut allocated = global.retired_allocated.load(Relaxed);
    let mut freed_by_rc = global.retired_freed_by_rc.load(Relaxed);
    let mut roots_now = global.orphans.lock().len() as u64;
    let _ = global.retired_roots.load(Relaxed);
    for slot in global.registry.lock().iter() {
        allocated += slot.counters.allocated.load(Relaxed);
        freed_by_rc += slot.counters.freed_by_rc.load(Relaxed);
        roots_now += slot.entries.lock().len() as u64;
    }
    let freed_by_collector = global.freed_by_collector.load(Relaxed);
    Stats {
        live: allocated.saturating_sub(freed_by_rc + freed_by_collector),
        freed_by_rc,
        freed_by_collector,
        minor_collections: 0,
        full_collections: global.collections.load(Relaxed),
        roots_buffered: roots_now,
        nodes_traced: global.nodes_traced.load(Relaxed),
        promoted: 0,
        old_objects: 0,
        total_pause: core::time::Duration::from_nanos(global.total_pause_ns.load(Relaxed)),
        max_pause: core::time::Duration::from_nanos(global.max_pause_ns.load(Relaxed)),
    }
}
