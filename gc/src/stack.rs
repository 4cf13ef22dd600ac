//! How deep the stack is, for the drop queues (`crate::drop_queue`,
//! `sync::drops`): a nested drop runs in place (std's order, caches warm)
//! only while the stack is less than [`STACK_BUDGET`] bytes below the frame
//! of the outermost drop (the *drainer*); deeper ones are queued, so stack
//! use is bounded whatever the graph.
//!
//! Measuring the distance from a stack address, rather than keeping a depth
//! counter, saves a store before and after every nested drop (a counter
//! made the in-place free 11 instructions longer).

#[cfg(miri)]
use core::cell::Cell;

/// Drops nested less than this many bytes of stack below the drainer run in
/// place; deeper ones are queued. About fifty levels of a small node's drop
/// (a `drop_slow` and a drop glue frame each, in release builds): enough
/// for the trees of the benchmarks and for shallow graphs.
pub(crate) const STACK_BUDGET: usize = 4096;

/// An address in the caller's stack frame: how deep the stack is.
#[cfg(not(miri))]
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
