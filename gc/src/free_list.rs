//! Deferred frees: the per-thread list of memory that a collection freed,
//! kept for the thread's next allocations. Both collectors use it (the
//! single-threaded one in `drop_queue.rs`, the thread-safe one in
//! `sync/state.rs`), each with its own list per thread.
//!
//! A collection frees its garbage in one go: dozens to thousands of objects
//! of a few sizes, while glibc's per-thread cache holds 7 chunks of each
//! size. The rest overflow into its fastbins and unsorted bins, which the
//! next large allocation consolidates, and the next allocations of those
//! sizes take the slow path: each refill of the per-thread cache walks a
//! fastbin's chain through the freed chunks themselves, one dependent load
//! per chunk, cold by then (a doubly linked list, collected 4096 nodes at a
//! time, spent an eighth of its time in `_int_malloc`, most of it on that
//! load, and ~190 instructions per node in `malloc` and `free`). So the
//! memory of a collected object is not freed when its last reference goes
//! but kept on a per-thread [`FreeList`] (objects of at most [`MAX_SIZE`]
//! bytes, at most `BYTES` in all; beyond that, freed at once), and each
//! allocation of an object takes an entry: it reuses the newest of the last
//! [`REUSE_WINDOW`] entries that has its layout (the common case: the
//! garbage of a program is made of the objects it keeps allocating), and
//! otherwise frees the newest one and asks the global allocator. The frees
//! are thus spread over the allocations that follow, or skipped, and a
//! reuse reads no freed memory: the list is an array. The owner empties the
//! list at the end of an explicit collection, and closes it ([`close`])
//! when the thread exits. The memory is never handed to another thread and
//! never outlives the list's bound: this is a recycling of what the
//! collector just freed, not an allocator.
//!
//! Invariants: the entries `list[..len]` are blocks from the global
//! allocator with the recorded layouts, each of at most [`MAX_SIZE`] bytes,
//! referenced by nothing else; `len <= limit`; their sizes sum to
//! `BYTES - room`. The buffer is allocated on the first kept free (a thread
//! that never collects carries a few words of thread-local storage) and
//! doubles when full, up to `BYTES / 32` entries.
//!
//! The length lives with the owner's allocation counter (a plain
//! `Cell<usize>` in a thread-local the allocation path touches anyway), so
//! that the test on every allocation costs no second thread-local access:
//! every method takes that cell, always the same one for a given list.
//!
//! [`close`]: FreeList::close

use core::alloc::Layout;
use core::cell::Cell;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

/// The first capacity of a list, in entries; it doubles when full.
const FIRST: usize = 64;

/// How many of the newest deferred allocations an allocation looks at for
/// one of its layout.
const REUSE_WINDOW: usize = 4;

/// The largest allocation whose free is deferred (glibc's per-thread cache
/// takes chunks up to 1032 bytes).
pub(crate) const MAX_SIZE: usize = 1024;

/// One allocation waiting to be freed.
type Pending = (NonNull<u8>, Layout);

/// Allocations waiting to be freed: `list[..len]`, where `len` is the
/// owner's length cell, at most `BYTES` bytes in all. Meant for a
/// thread-local (it is not `Sync`); only the methods below touch the
/// buffer, and they run no user code, so no two borrows of it ever overlap.
pub(crate) struct FreeList<const BYTES: usize> {
    /// The buffer's capacity in entries; zero while the list is closed
    /// (before the first kept free, and after [`FreeList::close`]).
    limit: Cell<usize>,
    /// [`FreeList::close`] ran: the thread is exiting, free at once.
    exited: Cell<bool>,
    /// `limit` entries from the global allocator (dangling while `limit`
    /// is zero).
    list: Cell<NonNull<MaybeUninit<Pending>>>,
    /// `BYTES` less the sizes of `list[..len]`.
    room: Cell<usize>,
}

impl<const BYTES: usize> FreeList<BYTES> {
    /// The most entries of the list (`BYTES` of 32-byte objects).
    const MAX: usize = BYTES / 32;

    pub(crate) const fn new() -> Self {
        FreeList {
            limit: Cell::new(0),
            exited: Cell::new(false),
            list: Cell::new(NonNull::dangling()),
            room: Cell::new(BYTES),
        }
    }

    /// Frees the memory at `base`, allocated by the global allocator with
    /// `layout`, now or at one of the next allocations (see the module
    /// docs). `open` runs before the list's first kept free; it returns
    /// whether the owner will [`close`](FreeList::close) the list when the
    /// thread exits (if not, nothing is kept).
    ///
    /// # Safety
    /// `len` is this list's length cell; nothing references the memory any
    /// more; it is freed once.
    #[inline]
    pub(crate) unsafe fn free_later(
        &self,
        len: &Cell<usize>,
        base: NonNull<u8>,
        layout: Layout,
        open: impl FnOnce() -> bool,
    ) {
        let n = len.get();
        let room = self.room.get();
        if n < self.limit.get() && layout.size() <= room.min(MAX_SIZE) {
            // SAFETY: `n < limit`: within the buffer; see `FreeList` for the
            // borrow.
            unsafe {
                self.list
                    .get()
                    .add(n)
                    .write(MaybeUninit::new((base, layout)))
            };
            self.room.set(room - layout.size());
            len.set(n + 1);
            return;
        }
        // SAFETY: forwarded.
        unsafe { self.free_later_slow(len, base, layout, open) }
    }

    /// The rest of [`FreeList::free_later`], out of line: the list is full
    /// (or closed), or the object too large for the room left.
    ///
    /// # Safety
    /// As for [`FreeList::free_later`].
    #[cold]
    #[inline(never)]
    unsafe fn free_later_slow(
        &self,
        len: &Cell<usize>,
        base: NonNull<u8>,
        layout: Layout,
        open: impl FnOnce() -> bool,
    ) {
        let n = len.get();
        if layout.size() <= self.room.get().min(MAX_SIZE) && self.grow(n, open) {
            // SAFETY: `n < limit` (`grow` made room); see `FreeList` for the
            // borrow.
            unsafe {
                self.list
                    .get()
                    .add(n)
                    .write(MaybeUninit::new((base, layout)))
            };
            self.room.set(self.room.get() - layout.size());
            len.set(n + 1);
            return;
        }
        // SAFETY: guaranteed by the caller.
        unsafe { std::alloc::dealloc(base.as_ptr(), layout) }
    }

    /// Makes room in the full list of `n` entries: on the first kept free
    /// (the list is closed: `limit` is zero), asks `open` and allocates the
    /// buffer; later, doubles it, up to `MAX` entries. Returns whether
    /// there is room (not at the bound, after `close`, if `open` refuses or
    /// the allocator fails: the caller frees at once).
    #[cold]
    #[inline(never)]
    fn grow(&self, n: usize, open: impl FnOnce() -> bool) -> bool {
        let limit = self.limit.get();
        if n < limit {
            return true;
        }
        if limit >= Self::MAX {
            return false;
        }
        if limit == 0 && (self.exited.get() || !open()) {
            return false;
        }
        let new_limit = (limit * 2).max(FIRST);
        let new_layout = list_layout(new_limit);
        let list = if limit == 0 {
            // SAFETY: a non-zero size.
            unsafe { std::alloc::alloc(new_layout) }
        } else {
            // SAFETY: the buffer was allocated with `list_layout(limit)`; a
            // non-zero size that does not overflow (`list_layout`).
            unsafe {
                std::alloc::realloc(
                    self.list.get().as_ptr().cast(),
                    list_layout(limit),
                    new_layout.size(),
                )
            }
        };
        match NonNull::new(list.cast()) {
            Some(list) => {
                self.list.set(list);
                self.limit.set(new_limit);
                true
            }
            // The old buffer, if any, is untouched.
            None => false,
        }
    }

    /// Reuses the newest of the last [`REUSE_WINDOW`] kept allocations that
    /// has `layout` (moving the newest entry into its place); if none has
    /// it, frees the newest and allocates.
    ///
    /// # Safety
    /// `len` is this list's length cell, and it is not zero; `layout` has a
    /// non-zero size.
    #[inline(always)]
    pub(crate) unsafe fn reuse_or_allocate(
        &self,
        len: &Cell<usize>,
        layout: Layout,
    ) -> NonNull<u8> {
        let n = len.get();
        debug_assert!(n != 0 && n <= self.limit.get());
        // SAFETY: `n <= limit`; the entries below it were written by
        // `free_later` (see `FreeList` for the borrow).
        let pending = unsafe { core::slice::from_raw_parts_mut(self.list.get().as_ptr(), n) };
        let newest = n - 1;
        len.set(newest);
        // SAFETY: as above; the newest entry leaves the list here.
        let (base, kept) = unsafe { pending[newest].assume_init() };
        // Whichever entry leaves, it has `layout` or `kept`.
        if kept == layout {
            self.room.set(self.room.get() + kept.size());
            return base;
        }
        let window = n.saturating_sub(REUSE_WINDOW)..newest;
        for i in window.rev() {
            // SAFETY: as above.
            let (other, other_layout) = unsafe { pending[i].assume_init() };
            if other_layout == layout {
                // The newest entry takes the place of the reused one.
                pending[i].write((base, kept));
                self.room.set(self.room.get() + layout.size());
                return other;
            }
        }
        self.room.set(self.room.get() + kept.size());
        // SAFETY: the newest entry left the list: nothing references its
        // memory, which the global allocator gave with `kept`.
        unsafe { std::alloc::dealloc(base.as_ptr(), kept) };
        allocate_new(layout)
    }

    /// Frees every kept allocation (at the end of an explicit collection).
    ///
    /// # Safety
    /// `len` is this list's length cell.
    pub(crate) unsafe fn free_all(&self, len: &Cell<usize>) {
        while let Some(n) = len.get().checked_sub(1) {
            len.set(n);
            // SAFETY: `n < limit`; the entry was written by `free_later` and
            // leaves the list here: nothing references its memory, which the
            // global allocator gave with `layout`.
            unsafe {
                let (base, layout) = self.list.get().add(n).read().assume_init();
                std::alloc::dealloc(base.as_ptr(), layout)
            }
        }
        self.room.set(BYTES);
    }

    /// Frees every kept allocation and the buffer, for good: later frees
    /// are immediate (when the thread exits).
    ///
    /// # Safety
    /// `len` is this list's length cell.
    pub(crate) unsafe fn close(&self, len: &Cell<usize>) {
        // SAFETY: forwarded.
        unsafe { self.free_all(len) };
        let limit = self.limit.replace(0);
        self.exited.set(true);
        let list = self.list.replace(NonNull::dangling());
        if limit != 0 {
            // SAFETY: the buffer was allocated by `grow` with this layout,
            // and the list is closed: nothing uses it any more.
            unsafe { std::alloc::dealloc(list.as_ptr().cast(), list_layout(limit)) }
        }
    }
}

/// The layout of a list of `entries` entries.
fn list_layout(entries: usize) -> Layout {
    // At most `BYTES / 32` entries of a static bound: it cannot overflow.
    Layout::array::<Pending>(entries).expect("deferred list too large")
}

/// Memory from the global allocator.
///
/// `layout` has a non-zero size.
#[inline]
pub(crate) fn allocate_new(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() != 0);
    // SAFETY: the layout has a non-zero size (callers allocate objects,
    // which contain their counts).
    let base = unsafe { std::alloc::alloc(layout) };
    match NonNull::new(base) {
        Some(base) => base,
        None => std::alloc::handle_alloc_error(layout),
    }
}
