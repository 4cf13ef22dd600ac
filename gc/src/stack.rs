//! How deep the stack is, for the drop queues (`crate::drop_queue`,
//! `sync::drops`): a nested drop runs in place (std's order, caches warm)
//! only while the stack is less than [`STACK_BUDGET`] bytes below the frame
//! of the outermost drop (the *drainer*); deeper ones are queued, so stack
//! use is bounded whatever the graph.
//!
//! Measuring the distance from a stack address, rather than keeping a depth
//! counter, saves a store before and after every nested drop (a counter
//! made the in-place free 11 instructions longer). The single-threaded
//! queue keeps the drainer's *limit* (its frame's address less the budget)
//! rather than the frame's address, so that the test is one comparison
//! ([`in_place`]).

#[cfg(miri)]
use core::cell::Cell;

/// Drops nested less than this many bytes of stack below the drainer run in
/// place; deeper ones are queued. About fifty levels of a small node's drop
/// (a `drop_slow` and a drop glue frame each, in release builds): enough
/// for the trees of the benchmarks and for shallow graphs.
pub(crate) const STACK_BUDGET: usize = 4096;

/// The stack pointer: how deep the stack is. Read from the register where
/// we know it: a local's address is not on the stack under AddressSanitizer
/// with its (default) detection of stack use after return, which moves
/// locals to a heap "fake stack" (the fuzz targets' trace depth test then
/// read nonsense and kept reachable-from-nowhere objects alive).
#[cfg(all(not(miri), any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
pub(crate) fn stack_address() -> usize {
    let sp: usize;
    // SAFETY: copies the stack pointer into a register: no memory access,
    // no stack use, no flags changed.
    unsafe {
        #[cfg(target_arch = "x86_64")]
        core::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags));
        #[cfg(target_arch = "aarch64")]
        core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    sp
}

/// An address in the caller's stack frame: how deep the stack is (on other
/// targets; see the register version for its limit).
#[cfg(all(not(miri), not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
#[inline(always)]
pub(crate) fn stack_address() -> usize {
    let here = 0u8;
    core::ptr::addr_of!(here) as usize
}

/// Under Miri, whose locals are not laid out as a stack, a simulated stack
/// pointer that each in-place drop ([`Frame`]) moves down by a sixteenth of
/// the budget: sixteen levels in place, then the queue, so that the tests
/// run both paths there too.
#[cfg(miri)]
pub(crate) fn stack_address() -> usize {
    MIRI_SP.with(Cell::get)
}

#[cfg(miri)]
std::thread_local! {
    static MIRI_SP: Cell<usize> = const { Cell::new(usize::MAX / 2) };
}

/// Whether a drop may run in place under the drainer whose frame is at
/// `base`: within the budget below it. One test: a `base` that is no stack
/// address (no drainer, or a batch that queues everything) makes the
/// difference wrap to a huge value, and so does a stack that grows upwards,
/// where everything is queued: slower, still bounded.
#[inline(always)]
pub(crate) fn within_budget(base: usize) -> bool {
    base.wrapping_sub(stack_address()) < STACK_BUDGET
}

/// The stack a value's trace may use below the frame that started it: a
/// value whose owned structure nests deeper (a `Box` list of a million
/// nodes inside one value, whose `Drop` the user made iterative) is not
/// traced further and keeps its object alive, instead of overflowing the
/// stack (`Tracer::too_deep`). Less on a thread with less stack left: see
/// [`trace_budget`].
pub(crate) const TRACE_BUDGET: usize = 128 * 1024;

/// A trace nested less than this is not checked against the thread's
/// stack (the nested drops' [`STACK_BUDGET`]: what any thread that runs
/// the collector must have to spare).
pub(crate) const TRACE_UNCHECKED: usize = STACK_BUDGET;

/// The stack a trace that started at `base` may use: [`TRACE_BUDGET`], or
/// half of what the thread's stack has left below `base` if that is less
/// (a thread spawned with a 64 KiB stack overflowed at 128 KiB).
#[cold]
#[inline(never)]
pub(crate) fn trace_budget(base: usize) -> usize {
    match floor() {
        Some(floor) if KNOWN_DOWN || grows_down() => {
            TRACE_BUDGET.min(base.saturating_sub(floor) / 2)
        }
        _ => TRACE_BUDGET,
    }
}

/// The lowest address of the calling thread's stack, if known; asked of
/// the thread library once per thread.
#[cfg(all(target_os = "linux", not(miri)))]
fn floor() -> Option<usize> {
    use core::cell::Cell;
    const UNKNOWN: usize = usize::MAX;
    std::thread_local! {
        // No destructor: usable while thread-locals are destroyed.
        static FLOOR: Cell<usize> = const { Cell::new(UNKNOWN) };
    }
    let floor = FLOOR
        .try_with(|f| {
            if f.get() == UNKNOWN {
                // 0: asked, not known.
                f.set(query_floor().unwrap_or(0));
            }
            f.get()
        })
        .ok()?;
    (floor != 0).then_some(floor)
}

/// Where the calling thread's stack ends, from `pthread_getattr_np` (for
/// the main thread, glibc derives it from the stack's mapping and its
/// size limit).
#[cfg(all(target_os = "linux", not(miri)))]
fn query_floor() -> Option<usize> {
    let mut attr = core::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: `pthread_getattr_np` initialises `attr` when it returns 0,
    // and only then is it read and destroyed (once).
    unsafe {
        if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
            return None;
        }
        let mut addr = core::ptr::null_mut();
        let mut size = 0;
        let got = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size);
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        (got == 0 && size != 0).then_some(addr as usize)
    }
}

/// Elsewhere the floor is unknown, and a trace gets [`TRACE_BUDGET`].
#[cfg(not(all(target_os = "linux", not(miri))))]
fn floor() -> Option<usize> {
    None
}

/// How far the stack has grown since `base`, the [`stack_address`] of an
/// enclosing frame.
#[inline(always)]
pub(crate) fn grown_since(base: usize) -> usize {
    if KNOWN_DOWN || grows_down() {
        base.wrapping_sub(stack_address())
    } else {
        stack_address().wrapping_sub(base)
    }
}

/// The drain limit (see [`limit_below`]) while no drainer runs: no stack
/// address is above it.
pub(crate) const NO_DRAINER: usize = usize::MAX;

/// A drain limit that queues every nested drop (a stack that grows upwards,
/// or a drainer within the budget of address zero): no stack address is
/// above it either, and it is not [`NO_DRAINER`].
const QUEUE_ALL: usize = usize::MAX - 1;

/// The limit for a drainer whose frame is at `base`: nested drops whose
/// frames are above it (less than [`STACK_BUDGET`] below `base`) run in
/// place.
#[inline(always)]
pub(crate) fn limit_below(base: usize) -> usize {
    match base.checked_sub(STACK_BUDGET) {
        Some(limit) if KNOWN_DOWN || grows_down() => limit,
        // Everything is queued: slower, still bounded.
        _ => QUEUE_ALL,
    }
}

/// Whether a drop may run in place under the drainer whose limit is
/// `limit` (from [`limit_below`], or [`NO_DRAINER`]).
#[inline(always)]
pub(crate) fn in_place(limit: usize) -> bool {
    stack_address() > limit
}

/// Targets whose stack grows towards lower addresses, known at compile
/// time (Miri's simulated stack does too). On others [`grows_down`] asks
/// once per process: on a stack growing upwards, [`in_place`] would hold
/// at every depth.
const KNOWN_DOWN: bool = cfg!(any(
    miri,
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64",
    target_arch = "riscv32",
    target_arch = "powerpc64",
    target_arch = "powerpc",
    target_arch = "s390x",
    target_arch = "loongarch64",
));

/// Whether the stack grows towards lower addresses, measured once.
#[cold]
#[inline(never)]
fn grows_down() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering::Relaxed};
    static GROWS_DOWN: AtomicU8 = AtomicU8::new(0);
    match GROWS_DOWN.load(Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let down = callee_address() < stack_address();
            GROWS_DOWN.store(if down { 1 } else { 2 }, Relaxed);
            down
        }
    }
}

/// An address in a frame called by the caller's.
#[inline(never)]
fn callee_address() -> usize {
    core::hint::black_box(stack_address())
}

/// One in-place drop on Miri's simulated stack; nothing otherwise.
pub(crate) struct Frame;

impl Frame {
    #[inline(always)]
    pub(crate) fn enter() -> Self {
        #[cfg(miri)]
        MIRI_SP.with(|sp| sp.set(sp.get() - STACK_BUDGET / 16));
        Frame
    }
}

#[cfg(miri)]
impl Drop for Frame {
    fn drop(&mut self) {
        MIRI_SP.with(|sp| sp.set(sp.get() + STACK_BUDGET / 16));
    }
}
