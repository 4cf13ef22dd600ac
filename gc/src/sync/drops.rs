//! Bounded-depth dropping of values whose strong count reached zero.
//!
//! Dropping a value can release the last handle to another object, whose
//! value then drops, and so on: dropping the head of a ten-million-node list
//! would recurse ten million times. As in the single-threaded pointers
//! (`crate::drop_queue`), a drop nested in another runs in place (as in
//! `std::sync::Arc`: children freed before their parent's memory, while the
//! caches are warm) only while the stack is less than [`STACK_BUDGET`](stack::STACK_BUDGET) bytes
//! deeper than where the outermost drop on this thread started (the
//! *drainer*); deeper ones are pushed onto a thread-local queue, which the
//! drainer works through after its own value, each entry again with up to
//! `STACK_BUDGET` of stack in place. Stack depth is bounded by the budget
//! plus one value's drop glue, not by the length of a chain. (Queueing every
//! drop, as an earlier version did, cost a thread-local borrow, a push, a
//! pop and a `catch_unwind` per object.) Under Miri, whose locals are not
//! laid out as a stack, a simulated stack pointer allows sixteen levels in
//! place; under loom every nested drop is queued, as before.
//!
//! A panic in one value's `Drop` does not stop the others: each drop is
//! caught and the drainer re-raises one panic once the queue is empty (as
//! `crate::drop_queue`: its own value's, else the first of a queued value,
//! else the first of a nested one). A collection runs as a *batch* ([`batch`]): while it
//! runs, every value whose count reaches zero is queued, never dropped in
//! place, so that no user `Drop` runs while the collector holds its lock or
//! its holds; the values are dropped after it, by the drainer.

use core::cell::{Cell, RefCell};
use core::ptr::NonNull;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::header::Header;
use crate::fallback::FallbackSlot;
use crate::stack::{self, stack_address, Frame};

type Pending = (NonNull<Header>, u64);

/// A caught panic, to be re-raised later.
pub(crate) type Panic = Option<crate::payload::Payload>;

/// This thread's queue and first kept panic. Only `push`, `pop` and `trim`
/// borrow `pending`, and they run no user code, so borrows never overlap.
struct Queue {
    pending: RefCell<Vec<Pending>>,
    panic: Cell<Panic>,
}

impl Queue {
    const fn new() -> Self {
        Queue {
            pending: RefCell::new(Vec::new()),
            panic: Cell::new(None),
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    static QUEUE: Queue = const { Queue::new() };
    /// [`NO_DRAINER`], [`QUEUE_ONLY`], or the stack address of the running
    /// drainer (see [`stack_address`]). Apart from `QUEUE` so that reading
    /// it is a plain thread-local load (no destructor to register).
    static BASE: Cell<usize> = const { Cell::new(NO_DRAINER) };
    /// Whether `QUEUE` may hold a value or a panic: set by every push and
    /// kept panic, cleared by [`drain`]. A drainer whose drop queued nothing
    /// (the common case) skips `drain`, which cost more than the in-place
    /// free of a small node (a `catch_unwind`, two accesses to `QUEUE`,
    /// whose destructor makes each one check its state). A push that did
    /// not set it would strand its value (`long_chains_drop_and_collect_without_recursion`
    /// fails).
    static QUEUED: Cell<bool> = const { Cell::new(false) };
    /// The queue once `QUEUE` is destroyed (see `crate::fallback`).
    static FALLBACK: FallbackSlot<Queue> = const { FallbackSlot::new() };
}

// loom's `thread_local!` takes no `const` initialiser.
#[cfg(loom)]
loom::thread_local! {
    static QUEUE: Queue = Queue::new();
    static BASE: Cell<usize> = Cell::new(NO_DRAINER);
    static QUEUED: Cell<bool> = Cell::new(false);
    static FALLBACK: FallbackSlot<Queue> = FallbackSlot::new();
}

/// Runs `f` on this thread's queue: `QUEUE`, or once that is destroyed,
/// the fallback queue (see `crate::fallback`), allocated first if there is
/// none and `create`.
fn with_queue<R>(create: bool, f: impl FnOnce(&Queue) -> R) -> Option<R> {
    let mut f = Some(f);
    match QUEUE.try_with(|q| f.take().map(|f| f(q))) {
        Ok(result) => result,
        // SAFETY: only `drain` frees the fallback queue, at the end of the
        // drainer's drain; the other callers are drops nested in the
        // drainer.
        Err(_) => FALLBACK.with(|slot| unsafe { slot.with(create, Queue::new, f.take()?) }),
    }
}

/// `BASE` when no drop loop runs on this thread: the next drop becomes
/// the drainer.
const NO_DRAINER: usize = 0;
/// `BASE` inside a [`batch`]: every drop is queued (the value is no stack
/// address, and `1 - sp` wraps to a huge distance).
const QUEUE_ONLY: usize = 1;

/// Whether a drop may run in place under drainer `base`: within the budget
/// below it (one test: with no drainer or in a batch the difference wraps
/// to a huge value, and so it does on a stack that grows upwards, where
/// everything is queued: slower, still bounded). Never under loom.
#[inline(always)]
fn in_place(base: usize) -> bool {
    cfg!(not(loom)) && stack::within_budget(base)
}

/// Drops the value of `this` (whose count reached zero by the RMW that
/// returned `old`) and finishes its release: in place if this thread is
/// dropping values less than [`STACK_BUDGET`](stack::STACK_BUDGET) above, as the drainer if it is
/// not, queued otherwise (deeper, or inside a collection's [`batch`]).
pub(crate) fn drop_value_later(this: NonNull<Header>, old: u64) {
    match BASE.try_with(Cell::get) {
        Ok(base) if in_place(base) => {
            let run = {
                let _frame = Frame::enter();
                // SAFETY: the caller performed the transition to zero, once.
                catch_unwind(AssertUnwindSafe(|| unsafe { drop_one(this, old) }))
            };
            if let Err(payload) = run {
                keep_panic(payload);
            }
        }
        // SAFETY: forwarded.
        Ok(base) => unsafe { drop_outer(this, old, base) },
        // Thread-locals are being destroyed: drop directly.
        // SAFETY: the caller performed the transition to zero, so the
        // value is ours alone.
        Err(_) => unsafe { drop_one(this, old) },
    }
}

/// The rest of [`drop_value_later`], out of line: the outermost drop
/// becomes the drainer; a deeper one, or one in a batch, is queued.
///
/// # Safety
/// As for [`drop_one`].
#[inline(never)]
unsafe fn drop_outer(this: NonNull<Header>, old: u64, base: usize) {
    if base == NO_DRAINER {
        BASE.with(|b| b.set(stack_address()));
        // SAFETY: forwarded.
        let own = catch_unwind(AssertUnwindSafe(|| unsafe { drop_one(this, old) })).err();
        // Unknown (thread-locals being destroyed): drain.
        let rest = if QUEUED.try_with(Cell::get).unwrap_or(true) {
            drain()
        } else {
            None
        };
        BASE.with(|b| b.set(NO_DRAINER));
        // The drainer's own value's panic first (it started first), as in
        // `crate::drop_queue`.
        if let Some(payload) = crate::payload::first_of(own, rest) {
            // Not while unwinding: this drop may be one that the unwind
            // runs, and a `collect()` in its value's `Drop` may have left a
            // garbage destructor's panic to it.
            crate::payload::resume(payload);
        }
    } else {
        // Once `QUEUE` is destroyed (a drop in the destructor of a later
        // thread-local), into the fallback queue, which the drainer drains.
        with_queue(true, |q| q.pending.borrow_mut().push((this, old)));
        let _ = QUEUED.try_with(|q| q.set(true));
    }
}

/// Keeps `payload` for the drainer to re-raise, unless an earlier panic is
/// kept already (then it is dropped).
#[cold]
#[inline(never)]
fn keep_panic(payload: crate::payload::Payload) {
    with_queue(true, |q| crate::payload::keep_first_in(&q.panic, payload));
    let _ = QUEUED.try_with(|q| q.set(true));
}

/// Runs `f` with every value whose count reaches zero inside it queued
/// instead of dropped in place; then, unless an enclosing drop loop will,
/// drops them, each under `catch_unwind`. Returns the first panic of those
/// drops instead of raising it: the collector runs in here, so that no user
/// `Drop` runs while it holds its lock or owns holds, and a panicking `Drop`
/// can neither unwind through it nor abort it (a second panic while
/// unwinding). If `f` unwinds, the queue is still drained (further panics
/// are dropped; the one in flight wins).
pub(crate) fn batch<R>(f: impl FnOnce() -> R) -> (R, Panic) {
    let Ok(outer) = BASE.try_with(|b| b.replace(QUEUE_ONLY)) else {
        // Thread-locals are being destroyed: values are dropped in place.
        return (f(), None);
    };
    /// Restores `BASE` (and, for the outermost batch, drains the queue)
    /// if `f` unwinds.
    struct Unwinding(usize);
    impl Drop for Unwinding {
        fn drop(&mut self) {
            if self.0 == NO_DRAINER {
                BASE.with(|b| b.set(stack_address()));
                crate::payload::discard(drain());
            }
            BASE.with(|b| b.set(self.0));
        }
    }
    let unwinding = Unwinding(outer);
    let result = f();
    core::mem::forget(unwinding);
    if outer != NO_DRAINER {
        // The enclosing drop loop (a destructor collecting) drops what `f`
        // queued.
        BASE.with(|b| b.set(outer));
        return (result, None);
    }
    BASE.with(|b| b.set(stack_address()));
    let panic = drain();
    BASE.with(|b| b.set(NO_DRAINER));
    (result, panic)
}

/// Drops every queued value (nested drops in place within the budget of
/// the caller, the drainer, whose stack address is in `BASE`). Returns the
/// first panic of a queued value's drop, else the first kept from a nested
/// one.
fn drain() -> Panic {
    // Cleared first: a drop below may queue again (and set it), and
    // everything it queues is dropped by this loop.
    let _ = QUEUED.try_with(|q| q.set(false));
    let mut first = None;
    crate::payload::drain_catching(&mut first, || {
        while let Some((header, old)) = pop() {
            // SAFETY: each queued object reached zero exactly once and was
            // queued by the thread that performed that transition.
            unsafe { drop_one(header, old) };
        }
    });
    let nested = with_queue(false, |q| {
        // Gives back the memory of an unusually long queue.
        const KEEP: usize = 1024;
        let mut pending = q.pending.borrow_mut();
        if pending.capacity() > KEEP {
            pending.shrink_to(KEEP);
        }
        drop(pending);
        q.panic.take()
    })
    .flatten();
    // SAFETY: drained; the drops that used it ran inside the drainer.
    FALLBACK.with(|slot| unsafe { slot.free() });
    crate::payload::first_of(first, nested)
}

/// The next queued value, if any.
fn pop() -> Option<Pending> {
    with_queue(false, |q| q.pending.borrow_mut().pop()).flatten()
}

/// Drops the value, then releases the memory reference (also if the
/// value's `Drop` panics: unwinding has dropped its fields).
///
/// # Safety
/// The caller performed the transition to zero recorded in `old`.
unsafe fn drop_one(this: NonNull<Header>, old: u64) {
    /// Finishes the release even if the value's `Drop` panics.
    struct Finish(NonNull<Header>, u64);
    impl Drop for Finish {
        fn drop(&mut self) {
            // SAFETY: the value is gone (dropped or unwound out of).
            unsafe { Header::finish_value(self.0, self.1) };
        }
    }
    let finish = Finish(this, old);
    // SAFETY: we performed the transition to zero (see `GraphSlot`).
    let old_gen = unsafe { this.as_ref().generation.is_old() };
    super::state::count_freed_by_rc(old_gen);
    // SAFETY: the count is zero and not doomed: nobody else can reach the value.
    unsafe { (this.as_ref().vtable.drop_value)(this) };
    drop(finish);
}
