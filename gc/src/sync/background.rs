//! The collector thread: runs the collections that the Adaptive trigger asks
//! for, so that mutators only buffer roots.
//!
//! - Started lazily, by the first buffering that finds a collection due while
//!   [`CollectorMode::Thread`] is selected; named `recycler-sync-collector`.
//! - A request is a flag and a wake-up: a thread that finds a collection due
//!   sets the flag under the collector thread's small state mutex and
//!   notifies it; requests made while one is pending coalesce (an atomic
//!   copy of the flag keeps the mutators off the mutex). The collector
//!   thread decides the kind (minor or full) when it starts the collection,
//!   with the Adaptive rule.
//! - Back-pressure is the trigger's own: a thread that has buffered four
//!   times its threshold since the last collection waits, boundedly, for the
//!   running one and then collects itself (see *Policies* in the module
//!   docs), so garbage stays bounded when the collector thread falls behind.
//! - [`stop_collector_thread`] stops and joins it; a later request starts a
//!   new one (select [`CollectorMode::Mutators`] to stop for good). Stops
//!   are serialised (`STOPPING`), so each one returns with the thread
//!   gone, and the last clears the mailbox: a request that the exiting
//!   thread left unserved must not look pending to the next one (it would
//!   keep every later request from starting a thread). A destructor on the
//!   collector thread that stops it cannot join its own thread: it asks the
//!   thread to exit after the collection it is in (`State::exit`), and the
//!   thread clears the mailbox and its handle as it goes. So does a stop
//!   from inside a collection on another thread (a `Trace` impl): the
//!   collector thread may be waiting for the collector lock it holds.
//! - The thread's own policy is `Manual`: destructors it runs may buffer
//!   roots, which wait for the next collection instead of triggering one
//!   inside this one.
//!
//! Not under loom: loom models need every thread they spawn joined inside
//! the model; the collections the thread runs are the same code the models
//! check.

use core::cell::Cell;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicBool, AtomicU8};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::collector;
use crate::Policy;

/// Where the collections that the Adaptive trigger asks for run
/// (process-wide; see [`set_collector_mode`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectorMode {
    /// On the thread whose buffering made one due (the default: faster on
    /// 2 cores; see the module docs' measurements). Measured on a shared
    /// 2-vCPU machine: the work-stealing server at 256 connections spent
    /// 14.0 µs of server CPU per request with it against 16.9 µs with the
    /// collector thread (consecutive runs); dumpster's random operations
    /// took 7–8 % more process CPU with the thread (the hand-over and the
    /// objects crossing cores), on 1 and on 2 threads.
    #[default]
    Mutators,
    /// On a collector thread: mutators buffer roots and wake it. Destructors
    /// of the cycles it collects run on the collector thread, but not all
    /// destructors do: a thread that buffers 4 times its threshold before
    /// the collector thread took its buffer (its garbage outruns the
    /// collector, as a busy tokio worker's easily does) waits for a running
    /// collection at most 10 ms and then collects itself, and the
    /// destructors of the garbage it finds run on it, under whatever locks
    /// it holds (see *Where collections run* in the [module docs](super)).
    /// The collector thread is no tokio worker: a destructor it runs has no
    /// runtime context (`tokio::spawn` panics there).
    Thread,
}

const MUTATORS: u8 = 0;
const THREAD: u8 = 1;

static MODE: AtomicU8 = AtomicU8::new(MUTATORS);
/// A request is pending (the mutators' fast check; the truth is `State`).
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// The collector thread's mailbox.
struct State {
    /// A collection was requested.
    pending: bool,
    /// A [`stop_collector_thread`] from another thread is joining the
    /// thread (its handle is taken).
    stop: bool,
    /// A destructor on the collector thread, or code inside a collection on
    /// another thread, stopped it: it exits after its collection (or at
    /// once, if idle), and clears its own handle.
    exit: bool,
    handle: Option<JoinHandle<()>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    pending: false,
    stop: false,
    exit: false,
    handle: None,
});
static WAKE: Condvar = Condvar::new();
/// Serialises the stops from other threads than the collector thread.
static STOPPING: Mutex<()> = Mutex::new(());

std::thread_local! {
    /// Whether this thread is a collector thread.
    static ON_COLLECTOR_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Selects where automatic collections run (process-wide). Switching to
/// [`CollectorMode::Mutators`] stops the collector thread.
pub fn set_collector_mode(mode: CollectorMode) {
    let value = match mode {
        CollectorMode::Mutators => MUTATORS,
        CollectorMode::Thread => THREAD,
    };
    MODE.store(value, Release);
    if mode == CollectorMode::Mutators {
        stop_collector_thread();
    }
}

/// Where automatic collections run now.
pub fn collector_mode() -> CollectorMode {
    match MODE.load(Acquire) {
        THREAD => CollectorMode::Thread,
        _ => CollectorMode::Mutators,
    }
}

/// Stops the collector thread, if one runs, after the collection it is
/// running, and waits for it to exit. Garbage buffered meanwhile waits for
/// the next collection; under [`CollectorMode::Thread`] the next request
/// starts a new thread.
///
/// Called from the collector thread itself (a destructor of a cycle it
/// collects), it cannot wait for its own exit: it returns at once, and the
/// thread exits when that collection ends. So does a call from inside a
/// collection on another thread (a `Trace` impl, a destructor of a cycle
/// it collects): the collector thread may be waiting for that collection.
pub fn stop_collector_thread() {
    // (Not by its handle: a stopper on another thread may have taken it
    // and be joining us.)
    // Nor from inside a collection on another thread (a `Trace` impl, a
    // `TraceLock` guard's drop): it holds the collector lock, which the
    // collector thread may be waiting for, so joining it would wait for
    // ever (`gc/tests/sync_stop_collector_from_trace.rs`). The thread is
    // asked to exit after its collection instead, as by its own
    // destructors, and woken in case it is idle.
    if ON_COLLECTOR_THREAD.with(Cell::get) {
        STATE.lock().exit = true;
        return;
    }
    if collector::collecting() {
        let mut state = STATE.lock();
        // Only a running thread clears `exit`: none, none to ask.
        if state.handle.is_some() {
            state.exit = true;
            WAKE.notify_all();
        }
        return;
    }
    // One stop at a time: a second one would otherwise find the handle
    // taken and return (and clear `stop`) while the thread still runs.
    let _stopping = STOPPING.lock();
    let handle = {
        let mut state = STATE.lock();
        state.stop = true;
        WAKE.notify_all();
        state.handle.take()
    };
    if let Some(handle) = handle {
        // A panic on the collector thread was a destructor's; it has been
        // reported there already.
        let _ = handle.join();
    }
    let mut state = STATE.lock();
    state.stop = false;
    // A self-stop that our stop overtook is done too.
    state.exit = false;
    // A request the thread exited without serving: the next one must
    // start a thread, not find this one pending.
    state.pending = false;
    REQUESTED.store(false, Relaxed);
}

/// Whether collections are to be handed to the collector thread.
#[inline]
pub(crate) fn enabled() -> bool {
    MODE.load(Relaxed) == THREAD
}

/// Asks the collector thread for a collection (starting it if needed).
/// Returns `false` if there is no thread to ask (being stopped, or it could
/// not be spawned): the caller then collects itself.
pub(crate) fn request() -> bool {
    if REQUESTED.load(Relaxed) {
        return true;
    }
    let mut state = STATE.lock();
    // The mode again, under the lock: a buffering that saw `Thread` before a
    // switch to `Mutators` must not start a thread after that switch's stop
    // returned (it ran for good, against the mode; the switch stores the
    // mode before its stop takes this lock).
    if state.stop || state.exit || !enabled() {
        return false;
    }
    state.pending = true;
    REQUESTED.store(true, Relaxed);
    if state.handle.as_ref().map_or(true, JoinHandle::is_finished) {
        let spawned = std::thread::Builder::new()
            .name("recycler-sync-collector".into())
            .spawn(run);
        match spawned {
            Ok(handle) => state.handle = Some(handle),
            Err(_) => {
                state.pending = false;
                REQUESTED.store(false, Relaxed);
                return false;
            }
        }
    }
    WAKE.notify_one();
    true
}

/// The collector thread.
fn run() {
    ON_COLLECTOR_THREAD.with(|c| c.set(true));
    super::state::set_policy(Policy::Manual);
    loop {
        {
            let mut state = STATE.lock();
            loop {
                if state.stop {
                    // The stopper joins us, then clears the mailbox.
                    return;
                }
                if core::mem::take(&mut state.exit) {
                    // Stopped by one of our destructors: nobody joins us.
                    // Detach our handle so that the next request starts a
                    // new thread, and drop an unserved request with it.
                    state.handle = None;
                    state.pending = false;
                    REQUESTED.store(false, Relaxed);
                    // A stop from our thread-local destructors is then an
                    // ordinary one (of the next thread, if any).
                    ON_COLLECTOR_THREAD.with(|c| c.set(false));
                    return;
                }
                if core::mem::take(&mut state.pending) {
                    REQUESTED.store(false, Relaxed);
                    break;
                }
                WAKE.wait(&mut state);
            }
        }
        // A panicking destructor of a collected cycle must not end the
        // thread (the panic has been printed by the hook), nor a payload
        // whose own drop panics.
        crate::payload::discard(std::panic::catch_unwind(collector::collect_requested).err());
        // This thread allocates nothing that would reuse the memory its
        // collections recycle (see *Recycling* in `header.rs`): free it.
        crate::drop_queue::free_all_deferred();
    }
}
