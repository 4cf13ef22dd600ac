//! The object header of `sync::Gc` / `sync::Rc` and every atomic transition
//! on it.
//!
//! # The header word
//!
//! ```text
//!  63 ........ 38 | 37      | 36   | 35     | 34      | 33    | 32       | 31 ..... 0
//!  modification   | TOUCHED | GONE | DOOMED | CLAIMED | ARMED | BUFFERED | strong count
//!  counter (26 b) |
//! ```
//!
//! - Every mutator transition (clone, drop, upgrade, buffering) is one RMW
//!   that also adds [`CTR`] to the counter, so a collector that compares the
//!   whole word with a snapshot detects *any* mutator activity in between
//!   (not just a net change of the count). Clone is `fetch_add(ONE + CTR)`,
//!   drop is `fetch_add(CTR - ONE)` (one instruction each, as in `Arc`), or,
//!   for types that may own pointers, one CAS that also decides buffering
//!   ([`Header::dec_strong_buffering`]).
//! - `BUFFERED`: exactly one buffer entry for the object exists. While it is
//!   set, the entry keeps the allocation alive (see *memory lifetime*).
//! - `ARMED`: the entry may be used to take a hold. `get_mut` disarms it, so a
//!   collector can never reach an object that is being mutated through
//!   `&mut`.
//! - `CLAIMED`: a collector is deciding, right now, whether this object is
//!   garbage; `Weak::upgrade` waits (a bounded section with no user code).
//! - `TOUCHED`: a clone found the object `CLAIMED`. The clone's `fetch_add`
//!   follows with a `fetch_or` when the word it returned was claimed, so the
//!   rare path costs nothing on the common one (the test shares the
//!   count-overflow branch). A collector that claims without snapshots
//!   (`collector::sigma_claim`) clears it in its claim and requires it
//!   still clear, and the word unchanged, once every member is claimed: a
//!   handle made in between is seen whatever the counter. Drops need not
//!   set it: a claim requires the count to be the in-degree plus the
//!   collector's hold, so a handle dropped after the claim was made after
//!   it, and its clone marked the word before the handle could be used.
//!   (The buffering drop's CAS sets it anyway, at no cost; the one-RMW drop
//!   must not: the memory may be freed by another thread right after its
//!   decrement.)
//! - `DOOMED`: the collector decided; upgrades fail for ever.
//! - `GONE`: the value has been dropped (or moved out by `try_unwrap`).
//!
//! # Memory lifetime (Arc's weak protocol, extended)
//!
//! `weak` counts the `Weak` handles plus one reference shared by all strong
//! handles *and* the buffer entry. That shared reference is released by
//! whichever RMW reaches the state "count == 0, not `BUFFERED`, value gone":
//! the last strong release (after dropping the value), or the collector
//! draining the entry, whichever comes last ([`Header::finish_value`],
//! [`Header::drain`]). Memory is freed when `weak` reaches zero, or, with
//! no read-modify-write at all, when the releasing thread's acquire load
//! shows `weak == 1`: its reference is the last one and no other can be
//! made ([`Header::release_weak`]).
//!
//! # Recycling
//!
//! The memory of a collected object (`DOOMED`) is not handed to the global
//! allocator when its last reference goes but to the releasing thread's
//! deferred frees (`crate::drop_queue`, "Deferred frees", shared with the
//! per-thread pointers), and the next allocations of the same layout on
//! that thread reuse it ([`Inner::allocate`]). A collection frees its
//! garbage in one burst (after the collector lock is released), hundreds of
//! objects of a few sizes, far beyond glibc's per-thread cache (7 chunks of
//! each size): the rest went through its slower bins, and the allocations
//! after it took the slow path to get them back. The list is bounded (512
//! KiB per thread); an explicit [`collect`](super::collect) and the thread's
//! exit empty it, and the collector thread empties it after each
//! collection (it allocates nothing that could reuse it).
//!
//! So is the memory of an object that died by counting while buffered: its
//! last release dropped the value and left the memory to the entry, and the
//! drain frees it ([`Header::drain`], whose word keeps `BUFFERED`: the one
//! way a freed word can still have it). Drains come in bursts too; in
//! dumpster's random operations most drained entries are such objects
//! (about 25,000 per 250,000 operations). Recycling them cut that
//! workload's instructions by 5.5 % (callgrind, 1 thread; glibc's
//! `_int_malloc`, `_int_free` and `malloc_consolidate` by 4.1 M of 4.9 M)
//! and its time by 3 % (`sync_profile`, median of 200 alternating pairs,
//! cheaper in 124), and the work-stealing server's CPU per request by
//! 4.5 % (`server-demo ab`, 160 pairs, 95 % interval 0.932–0.986).
//! Memory freed by counting with no entry pending is freed at once, as
//! `Arc` frees it.
//!
//! After a release RMW that reaches zero, the acquiring side is an acquire
//! *load* of the same atomic (it reads the value of that RMW, which belongs
//! to the release sequences of every earlier release), not a fence: it is
//! equally cheap on the rare path and ThreadSanitizer understands it (as in
//! `std::sync::Arc` under TSan).

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use super::prim::{spin_wait, AtomicU64, AtomicUsize, CollectorCell, DeadFlag, MemoryTrack};
use crate::trace::Tracer;

/// One strong reference.
pub(crate) const ONE: u64 = 1;
/// Mask of the strong count.
pub(crate) const COUNT_MASK: u64 = (1 << 32) - 1;
/// A buffer entry exists for the object.
pub(crate) const BUFFERED: u64 = 1 << 32;
/// The buffer entry may take a hold.
pub(crate) const ARMED: u64 = 1 << 33;
/// A collector is validating the object.
pub(crate) const CLAIMED: u64 = 1 << 34;
/// The collector has judged the object garbage.
pub(crate) const DOOMED: u64 = 1 << 35;
/// The value has been dropped or moved out.
pub(crate) const GONE: u64 = 1 << 36;
/// A clone or drop found the object claimed (see the module docs).
pub(crate) const TOUCHED: u64 = 1 << 37;
/// One step of the modification counter.
pub(crate) const CTR: u64 = 1 << 38;
/// Clone / upgrade / hold.
const INC: u64 = CTR + ONE;
/// Drop / hold release.
const DEC: u64 = CTR - ONE;
/// Every increment of the strong count (clone, upgrade, a collector's hold)
/// aborts the process when the count is already this high (as `Arc` does near
/// `isize::MAX`), so the 32 count bits never carry into the flags: a
/// `fetch_add` may overshoot by one per thread racing past the check before
/// aborting, far below `2^32`. A CAS path checks before incrementing.
pub(crate) const MAX_COUNT: u64 = 1 << 31;
/// The weak count aborts the process at this value (as `Arc`'s).
pub(crate) const MAX_WEAK: usize = usize::MAX / 2;
/// `weak` value while `get_mut` checks uniqueness (Arc's trick).
const WEAK_LOCKED: usize = usize::MAX;

/// The strong count in a header word.
#[inline]
pub(crate) fn count(word: u64) -> u64 {
    word & COUNT_MASK
}

/// `w` after one more strong reference. The modification counter wraps off
/// the top of the word (as the `fetch_add`s do): plain `+` would panic in
/// debug builds after `2^26` operations on one object.
#[inline]
fn inc(w: u64) -> u64 {
    w.wrapping_add(INC)
}

/// `w` after one strong reference less (the count is at least one).
#[inline]
fn dec(w: u64) -> u64 {
    w.wrapping_add(DEC)
}

/// Aborts the process if one more strong reference on top of `word` could
/// overflow the count (see [`MAX_COUNT`]).
#[inline]
fn check_count(word: u64) {
    if count(word) >= MAX_COUNT {
        std::process::abort();
    }
}

/// Per-type operations, reached from the header.
pub(crate) struct VTable {
    /// Traces the value (only called while the value is alive and held).
    pub(crate) trace: unsafe fn(NonNull<Header>, &mut Tracer<'_>),
    /// Drops the value in place.
    pub(crate) drop_value: unsafe fn(NonNull<Header>),
    /// Frees the allocation (the value is already gone).
    pub(crate) dealloc: unsafe fn(NonNull<Header>, Free),
}

/// How [`VTable::dealloc`] gives an allocation back (see *Recycling* in the
/// module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Free {
    /// To the global allocator, now.
    Now,
    /// To this thread's deferred frees, which the next allocations of the
    /// same layout on this thread reuse (the memory of a collected object).
    Recycle,
}

impl Free {
    /// How to free the memory of the object whose last reference `header`'s
    /// releasing thread owns: recycled if a collection freed it (`DOOMED`)
    /// or its buffer entry's drain does (`BUFFERED`, see *Recycling*), now
    /// otherwise. Never recycled under loom, whose models track every
    /// allocation.
    #[inline]
    fn of(header: &Header) -> Free {
        // Relaxed: the caller's acquire of the last weak reference ordered
        // every earlier write of the word before this load, and none can
        // follow (nothing references the object any more).
        if cfg!(not(loom)) && header.word.load(Relaxed) & (DOOMED | BUFFERED) != 0 {
            Free::Recycle
        } else {
            Free::Now
        }
    }

    /// Gives back the allocation at `base`, made by the global allocator
    /// with `layout`: to the deferred frees or to the allocator.
    ///
    /// # Safety
    /// Nothing references the memory any more; it is given back once.
    #[inline]
    pub(crate) unsafe fn release(self, base: NonNull<u8>, layout: Layout) {
        match self {
            // SAFETY: forwarded: freed once, now or by the deferred list
            // (whose reuse needs only the layout).
            Free::Recycle => unsafe { crate::drop_queue::free_later(base, layout) },
            // SAFETY: forwarded.
            Free::Now => unsafe { std::alloc::dealloc(base.as_ptr(), layout) },
        }
    }
}

/// The header in front of every value.
#[repr(C)]
pub(crate) struct Header {
    pub(crate) word: AtomicU64,
    pub(crate) weak: AtomicUsize,
    pub(crate) vtable: &'static VTable,
    /// Collector-private: the object's node in the running collection's
    /// graph and its generation (they fit in what would be padding, so the
    /// header stays 32 bytes).
    pub(crate) slot: GraphSlot,
    pub(crate) dead: DeadFlag,
    pub(crate) generation: Generation,
    /// Zero-sized; loom's stand-in for the memory (see `prim.rs`).
    memory: MemoryTrack,
}

/// Where the running collection keeps an object's node index (or, tagged,
/// its position among the drained roots not in the graph yet), so that
/// looking an object up needs no hash table.
///
/// Only the thread holding the collector lock reads or writes it (the
/// collector mutex orders successive collectors; allocation writes the
/// initial value before the object is published). A stale value from an
/// earlier collection is harmless: the collector only believes it when the
/// node (or root) at that index has this very header (see `collector/mod.rs`),
/// and distinct live objects have distinct addresses.
pub(crate) struct GraphSlot {
    index: UnsafeCell<u32>,
}

impl GraphSlot {
    fn new() -> Self {
        GraphSlot {
            index: UnsafeCell::new(u32::MAX),
        }
    }

    /// The index recorded by a collection (possibly an earlier one).
    ///
    /// # Safety
    /// The caller holds the collector lock and the header is alive.
    #[inline]
    pub(crate) unsafe fn get(&self) -> u32 {
        // SAFETY: only collector-lock holders access the cell (see type docs).
        unsafe { *self.index.get() }
    }

    /// Records the object's node index.
    ///
    /// # Safety
    /// The caller holds the collector lock and the header is alive.
    #[inline]
    pub(crate) unsafe fn set(&self, index: u32) {
        // SAFETY: only collector-lock holders access the cell (see type docs).
        unsafe { *self.index.get() = index }
    }
}

// SAFETY: the cell is accessed only by the thread holding the collector
// lock, whose mutex orders the accesses of successive collectors.
unsafe impl Sync for GraphSlot {}

/// The object's generation: young, young but found live once by a
/// mutator's automatic minor collection (*survived*, see
/// [`Generation::survive`]), or promoted to the old generation
/// (collector-private, like [`GraphSlot`]).
///
/// Only the thread holding the collector lock writes it, and only while it
/// holds the object; allocation writes the initial value before the object
/// is published. Besides collectors, the one reader is the thread that
/// performed the transition of the count to zero (to count old objects freed
/// by counting): no collector can take a hold any more, and the last
/// collector's write came before the release of its hold, which that
/// transition acquires.
pub(crate) struct Generation {
    age: CollectorCell<u8>,
}

/// [`Generation`]'s states.
const YOUNG: u8 = 0;
const SURVIVED: u8 = 1;
const OLD: u8 = 2;

impl Generation {
    fn new() -> Self {
        Generation {
            age: CollectorCell::new(YOUNG),
        }
    }

    /// Whether a collection promoted the object to the old generation.
    ///
    /// # Safety
    /// The header is alive and either the caller holds the collector lock,
    /// or it performed the transition of the count to zero (see type docs).
    #[inline]
    pub(crate) unsafe fn is_old(&self) -> bool {
        // SAFETY: forwarded (no concurrent `promote`, see type docs).
        unsafe { self.age.get() == OLD }
    }

    /// Promotes the object to the old generation.
    ///
    /// # Safety
    /// The caller holds the collector lock and a hold on the object.
    #[inline]
    pub(crate) unsafe fn promote(&self) {
        // SAFETY: forwarded (see type docs).
        unsafe { self.age.set(OLD) }
    }

    /// For a young object found live: whether it was found live before
    /// (then it is due for promotion); if not, marks it so.
    ///
    /// # Safety
    /// The caller holds the collector lock and a hold on the object.
    #[inline]
    pub(crate) unsafe fn survive(&self) -> bool {
        // SAFETY: forwarded (see type docs).
        unsafe {
            debug_assert_ne!(self.age.get(), OLD);
            let survived = self.age.get() == SURVIVED;
            self.age.set(SURVIVED);
            survived
        }
    }
}

// SAFETY: the cell is written only by the thread holding the collector lock,
// whose mutex orders the accesses of successive collectors; the one other
// reader is ordered after the last write (see type docs).
unsafe impl Sync for Generation {}

/// An allocation: header followed by the value. For a slice (`[T]`, or the
/// bytes of a `str`) the allocation also holds the length in the word before
/// the header (see `unsize.rs`); a trait object's header names the concrete
/// type's vtable.
#[repr(C)]
pub(crate) struct Inner<T: ?Sized> {
    pub(crate) header: Header,
    pub(crate) value: UnsafeCell<ManuallyDrop<T>>,
}

impl Header {
    /// The header of a new object with `count` strong references and one
    /// weak.
    pub(crate) fn new(count: u64, vtable: &'static VTable) -> Header {
        Header {
            word: AtomicU64::new(count),
            weak: AtomicUsize::new(1),
            vtable,
            slot: GraphSlot::new(),
            dead: DeadFlag::new(),
            generation: Generation::new(),
            memory: MemoryTrack::default(),
        }
    }
}

impl<T> Inner<T> {
    /// Allocates an object with `count` strong references and one weak.
    ///
    /// Written field by field into the new allocation: `Box::new(Inner {
    /// .. })` assembled the whole object on the stack first and copied it
    /// with 16-byte moves, each reloading fields just stored at another
    /// width (a store-forwarding stall, visible in `perf` on the hub).
    #[inline]
    pub(crate) fn allocate(value: T, count: u64, vtable: &'static VTable) -> NonNull<Inner<T>> {
        #[cfg(not(loom))]
        let inner = crate::drop_queue::allocate_uncounted(Layout::new::<Inner<T>>())
            .cast::<Inner<T>>()
            .as_ptr();
        #[cfg(loom)]
        let inner = Box::into_raw(Box::new(core::mem::MaybeUninit::<Inner<T>>::uninit()))
            .cast::<Inner<T>>();
        // SAFETY: `inner` points to a (non-null) allocation of the global
        // allocator with the layout of an `Inner<T>` (fresh or recycled: no
        // reference to a recycled one remains); both fields are written
        // before it is used as one (and `dealloc` frees it with the same
        // layout, as a `Box<Inner<T>>` would be freed).
        unsafe {
            core::ptr::addr_of_mut!((*inner).header).write(Header::new(count, vtable));
            core::ptr::addr_of_mut!((*inner).value)
                .write(UnsafeCell::new(ManuallyDrop::new(value)));
            NonNull::new_unchecked(inner)
        }
    }

    /// `drop_value` of the vtable.
    ///
    /// # Safety
    /// `header` heads a live `Inner<T>` whose value has not been dropped, and
    /// no other thread can access the value.
    pub(crate) unsafe fn drop_value(header: NonNull<Header>) {
        let inner = header.cast::<Inner<T>>();
        // SAFETY: per the contract, the value is initialised and exclusively ours.
        unsafe { ManuallyDrop::drop(&mut *(*inner.as_ptr()).value.get()) }
    }

    /// `dealloc` of the vtable.
    ///
    /// # Safety
    /// `header` heads an `Inner<T>` allocated by [`Inner::allocate`], its
    /// value is gone and no reference to it remains.
    pub(crate) unsafe fn dealloc(header: NonNull<Header>, free: Free) {
        // SAFETY: allocated by the global allocator with this layout in
        // `allocate`; nothing references it any more (the caller's
        // contract); the value is already gone (`ManuallyDrop`).
        unsafe { free.release(header.cast(), Layout::new::<Inner<T>>()) }
    }
}

/// What a collector's drain of a buffer entry found.
pub(crate) enum Drained {
    /// The object is alive and now held by the collector; the word after
    /// the hold is the snapshot.
    Held(u64),
    /// Nothing to do (dead, doomed or disarmed); the entry is consumed.
    Skip,
}

impl Header {
    /// Clone: one RMW.
    #[inline]
    pub(crate) fn inc_strong(&self) {
        let old = self.word.fetch_add(INC, Relaxed);
        // One test for both rare cases: a count at `MAX_COUNT` (its top
        // bit) and a claimed object.
        if old & (MAX_COUNT | CLAIMED) != 0 {
            self.inc_strong_rare(old);
        }
    }

    /// [`Header::inc_strong`] on a count at the limit, or on a claimed word.
    #[cold]
    #[inline(never)]
    fn inc_strong_rare(&self, old: u64) {
        check_count(old);
        self.touched(old);
    }

    /// After a mutator RMW that returned `old`: marks the word `TOUCHED` if
    /// `old` was claimed (see the module docs).
    #[inline]
    fn touched(&self, old: u64) {
        if old & CLAIMED != 0 {
            self.word.fetch_or(TOUCHED, Relaxed);
        }
    }

    /// `new_cyclic`: the value is in place; count 0 → 1.
    pub(crate) fn init_strong(&self) {
        self.word.fetch_add(INC, Release);
    }

    /// Drop of a strong handle without buffering: one RMW, plus the slow
    /// path when it was the last one.
    ///
    /// # Safety
    /// The caller owns one strong reference, which this consumes.
    #[inline]
    pub(crate) unsafe fn dec_strong(this: NonNull<Header>) {
        // SAFETY: our strong reference keeps the header alive until the
        // decrement; `header` is not used after it (another thread may free
        // the memory as soon as it is done, as in `Arc`).
        let header = unsafe { this.as_ref() };
        header.memory.used();
        let old = header.word.fetch_add(DEC, Release);
        // No `TOUCHED` even if `old` was claimed: the handle was made after
        // the claim (see the module docs), and its clone marked the word.
        if count(old) == 1 {
            // SAFETY: we performed the transition to zero.
            unsafe { Self::last_strong_released(this, old) }
        }
    }

    /// Drop of a strong handle of a type that may own pointers: buffers the
    /// object as a possible cycle root the first time its count drops to a
    /// non-zero value. Returns `true` if a new buffer entry must be pushed
    /// (the caller pushes it; `BUFFERED` keeps the memory alive until then).
    ///
    /// One CAS (retried only under contention): the decision whether to
    /// buffer must be made on the very word the decrement replaces. With a
    /// load followed by a blind `fetch_add`, a collector could drain the entry
    /// in between (clearing `BUFFERED` after snapshotting a count that still
    /// includes this handle) and the object would never be buffered again.
    /// The same CAS takes the last reference (`Arc`'s release decrement and
    /// acquire), so the last drop of an object needs no second load in an
    /// out-of-line path (loom models `drop_to_zero_while_buffered` and
    /// `promotion_against_last_drop` fail, a causality violation, without
    /// the acquire load after it).
    ///
    /// # Safety
    /// The caller owns one strong reference, which this consumes.
    #[inline]
    pub(crate) unsafe fn dec_strong_buffering(this: NonNull<Header>) -> bool {
        // SAFETY: our strong reference keeps the header alive.
        let header = unsafe { this.as_ref() };
        header.memory.used();
        let w = header.word.load(Relaxed);
        let last = count(w) == 1;
        let new = if last {
            dec(w)
        } else {
            Self::after_buffering_drop(w)
        };
        if header
            .word
            .compare_exchange(w, new, Release, Relaxed)
            .is_err()
        {
            // SAFETY: forwarded contract.
            return unsafe { Self::dec_strong_buffering_slow(this) };
        }
        if last {
            // SAFETY: we performed the transition to zero.
            unsafe { Self::last_strong_released(this, w) };
            return false;
        }
        new & BUFFERED != 0 && w & BUFFERED == 0
    }

    /// The word after a drop from `w` (count above one): decremented, and
    /// buffered and armed unless doomed. Or-ing the flags into an already
    /// buffered and armed word changes nothing, so there is no branch on it.
    #[inline]
    fn after_buffering_drop(w: u64) -> u64 {
        let flags = if w & DOOMED == 0 { BUFFERED | ARMED } else { 0 };
        // `TOUCHED` if claimed, in the same RMW.
        const { assert!(CLAIMED << 3 == TOUCHED) };
        dec(w) | flags | (w & CLAIMED) << 3
    }

    /// [`Header::dec_strong_buffering`] under contention (its first CAS
    /// failed).
    ///
    /// # Safety
    /// The caller owns one strong reference, which this consumes.
    #[inline(never)]
    unsafe fn dec_strong_buffering_slow(this: NonNull<Header>) -> bool {
        // SAFETY: our strong reference keeps the header alive.
        let header = unsafe { this.as_ref() };
        let mut w = header.word.load(Relaxed);
        loop {
            let new = if count(w) == 1 {
                dec(w)
            } else {
                Self::after_buffering_drop(w)
            };
            match header.word.compare_exchange_weak(w, new, Release, Relaxed) {
                Ok(_) if count(w) == 1 => {
                    // SAFETY: we performed the transition to zero.
                    unsafe { Self::last_strong_released(this, w) };
                    return false;
                }
                Ok(_) => return new & BUFFERED != 0 && w & BUFFERED == 0,
                Err(actual) => w = actual,
            }
        }
    }

    /// The count reached zero by the (`Release`) RMW that returned `old`.
    ///
    /// Whoever uses the object after that first loads its word with
    /// `Acquire` (the acquiring side of `Arc`'s release sequence), except in
    /// one case, which must not touch the header at all: a collected value
    /// (`GONE`) whose buffer entry is still pending. That entry's drain owns
    /// the memory's release, and it may run, see the zero count and free the
    /// memory as soon as our RMW is done (a resurrected dead handle dropped
    /// while another thread drains; loom model `drain_against_unlocked_drop`
    /// found the collector's own version of it in `release_doomed`).
    ///
    /// # Safety
    /// The caller performed that transition and does not touch the header
    /// after this call.
    pub(crate) unsafe fn last_strong_released(this: NonNull<Header>, old: u64) {
        if old & GONE != 0 {
            // A collected object: its value was dropped by the collector.
            if old & BUFFERED == 0 {
                // SAFETY: our strong reference was the last one and no entry
                // exists (none can appear at a zero count): the shared weak
                // reference is ours, and keeps the header alive.
                let _ = unsafe { this.as_ref() }.word.load(Acquire);
                // SAFETY: the shared weak reference was still held.
                unsafe { Self::release_weak(this) };
            }
            return;
        }
        // SAFETY: the value is still there (not `GONE`), so no drain can
        // free the memory before `finish_value` releases the shared weak
        // reference, which the value's drop ends with.
        let _ = unsafe { this.as_ref() }.word.load(Acquire);
        super::drops::drop_value_later(this, old);
    }

    /// The collector is done with a doomed object whose value it dropped:
    /// sets `GONE` and releases its hold. If that was the last strong
    /// reference, finishes as [`Header::last_strong_released`] does for a
    /// `GONE` object.
    ///
    /// Usually the hold is the last reference and no entry is pending: an
    /// acquire load shows count 1 without `BUFFERED`. That word is final,
    /// so the hold is released with a plain store and no RMW:
    ///
    /// - *No handle exists, and none can be made.* Every handle counts one
    ///   and so does our hold, so the count being 1 means no handle to the
    ///   object exists (a handle that a member's `Drop` cloned and handed to
    ///   another thread included: it counts until its drop). A new one needs
    ///   an existing handle to clone; `Weak::upgrade` and other collectors'
    ///   holds fail on `DOOMED`.
    /// - *Nobody else writes the word.* With no handle, no drop, `get_mut`
    ///   or `try_unwrap` can; a mutator's drop buffers nothing on a `DOOMED`
    ///   word, and only a holder rebuffers, so no entry can appear, and none
    ///   is pending to be drained (`BUFFERED` is clear). Upgrades, holds and
    ///   `Weak` counts only read it.
    /// - *Every other use happens-before the free.* A thread that dropped a
    ///   handle to the object ended its use with that release RMW on the
    ///   word, which our acquire load reads (or a later one).
    ///
    /// Otherwise (another handle, or an entry pending) one RMW sets `GONE`
    /// and releases the hold (adding `GONE` sets the bit: it was clear, since
    /// only this collector drops a doomed value).
    ///
    /// # Safety
    /// The caller holds the object (one strong reference, which this
    /// consumes), it is doomed and its value has been dropped.
    pub(crate) unsafe fn release_doomed(this: NonNull<Header>) {
        // SAFETY: our hold keeps the header alive.
        let header = unsafe { this.as_ref() };
        let w = header.word.load(Acquire);
        debug_assert!(w & DOOMED != 0 && w & GONE == 0);
        if count(w) == 1 && w & BUFFERED == 0 {
            // The word is final (see above); stored for `Weak`'s counts,
            // which read zero strong references from now on.
            header.word.store(dec(w) | GONE, Relaxed);
            // SAFETY: ours was the last strong reference and no entry
            // exists: the shared weak reference is ours.
            unsafe { Self::release_weak(this) };
            return;
        }
        let old = header.word.fetch_add(GONE.wrapping_add(DEC), Release);
        if count(old) == 1 {
            // The word our RMW left has `GONE`: what follows a last release
            // of a collected value (with an entry pending, perhaps another
            // collector's drain right now, the header is not touched again).
            // SAFETY: we performed the transition to zero, and do not touch
            // the header afterwards.
            unsafe { Self::last_strong_released(this, old | GONE) };
        }
    }

    /// Called after the value has been dropped (or moved out) following the
    /// transition to zero recorded in `old`: releases the shared weak
    /// reference unless a buffer entry still needs the memory.
    ///
    /// # Safety
    /// The value of `this` is gone; the caller owns the shared weak reference
    /// by virtue of having performed the transition to zero.
    pub(crate) unsafe fn finish_value(this: NonNull<Header>, old: u64) {
        if old & BUFFERED == 0 {
            // Count is zero: nobody can set BUFFERED any more.
            // SAFETY: see above.
            unsafe { Self::release_weak(this) };
            return;
        }
        // SAFETY: the entry's BUFFERED bit keeps the header alive.
        let prev = unsafe { this.as_ref() }.word.fetch_or(GONE, AcqRel);
        if prev & BUFFERED == 0 {
            // The entry was drained meanwhile and left the release to us.
            // SAFETY: see above.
            unsafe { Self::release_weak(this) };
        }
    }

    /// Drops one weak reference; frees the memory if it was the last.
    ///
    /// When a load already shows `weak == 1`, ours is the last reference and
    /// the memory is freed without a read-modify-write (the common case: an
    /// object that never had a `Weak` frees with one atomic RMW fewer than
    /// `Arc`). That reading cannot be stale or change afterwards:
    ///
    /// - *Nobody can add a reference.* A weak reference is made from a
    ///   strong handle (`downgrade`, `get_mut`'s lock) or from a `Weak`
    ///   (clone, upgrade). A `Weak` counts one, so with `weak == 1` and ours
    ///   being that one, none exists; and the strong handles share one weak
    ///   reference, so either that one is ours (the count is zero, for good)
    ///   or it was released (the count reached zero before). So 1 is final.
    /// - *We read the final 1, not an earlier one.* Every other reference was
    ///   made by an increment that happens-before our ownership of this one
    ///   (it was made from a handle whose drop, or whose hand-over to us,
    ///   we acquired), so coherence forbids reading a value older than that
    ///   increment; the only 1 after it is written by the release of the
    ///   last other reference.
    /// - *Its uses of the memory happen-before the free.* That release is a
    ///   `Release` RMW (heading a release sequence), read by our `Acquire`
    ///   load: the same edge the `Acquire` load after a `fetch_sub` gives.
    ///
    /// Loom model `weak_release_against_last_drop` (planted bug: a
    /// `Relaxed` load, a causality violation on the memory).
    ///
    /// # Safety
    /// The caller owns one weak reference, which this consumes.
    pub(crate) unsafe fn release_weak(this: NonNull<Header>) {
        // SAFETY: our weak reference keeps the header alive.
        let header = unsafe { this.as_ref() };
        header.memory.used();
        let last = header.weak.load(Acquire) == 1 || {
            let last = header.weak.fetch_sub(1, Release) == 1;
            if last {
                let _ = header.weak.load(Acquire);
            }
            last
        };
        if last {
            header.memory.freed();
            let dealloc = header.vtable.dealloc;
            let free = Free::of(header);
            // SAFETY: no strong, weak or entry reference remains.
            unsafe { dealloc(this, free) };
        }
    }

    /// Adds a weak reference (downgrade), waiting out a `get_mut` check.
    pub(crate) fn inc_weak(&self) {
        let mut w = self.weak.load(Relaxed);
        loop {
            if w == WEAK_LOCKED {
                spin_wait();
                w = self.weak.load(Relaxed);
                continue;
            }
            if w >= MAX_WEAK {
                std::process::abort();
            }
            match self.weak.compare_exchange_weak(w, w + 1, Acquire, Relaxed) {
                Ok(_) => return,
                Err(actual) => w = actual,
            }
        }
    }

    /// `Weak::upgrade`: fails once the count is zero or the object is doomed;
    /// waits while a collector is deciding about it.
    pub(crate) fn upgrade(&self) -> bool {
        let mut w = self.word.load(Acquire);
        loop {
            if count(w) == 0 || w & DOOMED != 0 {
                return false;
            }
            if w & CLAIMED != 0 {
                spin_wait();
                w = self.word.load(Acquire);
                continue;
            }
            check_count(w);
            match self.word.compare_exchange_weak(w, inc(w), Acquire, Acquire) {
                Ok(_) => return true,
                Err(actual) => w = actual,
            }
        }
    }

    /// A collector's hold on an object it reached through an edge. Fails on a
    /// doomed object (a dead handle stored somewhere live).
    pub(crate) fn hold(&self) -> Option<u64> {
        let mut w = self.word.load(Acquire);
        loop {
            if count(w) == 0 || w & (DOOMED | CLAIMED) != 0 {
                return None;
            }
            check_count(w);
            match self.word.compare_exchange_weak(w, inc(w), AcqRel, Acquire) {
                Ok(_) => return Some(inc(w)),
                Err(actual) => w = actual,
            }
        }
    }

    /// A collector consumes the object's buffer entry.
    ///
    /// # Safety
    /// The caller owns the entry (so `BUFFERED` is set and keeps the header
    /// alive); the entry is consumed.
    pub(crate) unsafe fn drain(this: NonNull<Header>) -> Drained {
        // SAFETY: BUFFERED keeps the header alive.
        let header = unsafe { this.as_ref() };
        let mut w = header.word.load(Acquire);
        if count(w) == 0 && w & GONE != 0 {
            // The object died by counting while buffered (the usual dead
            // entry), and its last release, seeing `BUFFERED`, left the
            // shared weak reference to the entry. The word is final: no
            // handle is left to clone or drop, upgrades and holds fail on a
            // zero count, and only a holder rebuffers. So there is no need
            // to clear `BUFFERED` (an RMW per dead entry): nothing reads it
            // again. The acquire load read the release of the value (its
            // `fetch_or(GONE)`, or `release_doomed`), which the free must
            // follow.
            // SAFETY: the reference is ours, as above.
            unsafe { Self::release_weak(this) };
            return Drained::Skip;
        }
        loop {
            debug_assert!(w & BUFFERED != 0);
            let live = count(w) > 0 && w & (DOOMED | CLAIMED) == 0;
            let new = if live && w & ARMED != 0 {
                check_count(w);
                inc(w) & !(BUFFERED | ARMED)
            } else {
                w & !(BUFFERED | ARMED)
            };
            match header.word.compare_exchange_weak(w, new, AcqRel, Acquire) {
                Ok(_) if live && w & ARMED != 0 => return Drained::Held(new),
                Ok(_) => {
                    if count(w) == 0 && w & GONE != 0 {
                        // The last strong release already dropped the value
                        // and left the shared weak reference to the entry.
                        // SAFETY: see above.
                        unsafe { Self::release_weak(this) };
                    }
                    return Drained::Skip;
                }
                Err(actual) => w = actual,
            }
        }
    }

    /// A collector (holding the object) buffers it again after an aborted
    /// validation. Returns `true` if a new entry must be pushed.
    pub(crate) fn rebuffer(&self) -> bool {
        let old = self.word.fetch_or(BUFFERED | ARMED, AcqRel);
        old & BUFFERED == 0
    }

    /// `get_mut`'s uniqueness test; on success, disarms the buffer entry so
    /// no collector can take a hold while the caller has `&mut`.
    pub(crate) fn claim_unique(&self) -> bool {
        if self
            .weak
            .compare_exchange(1, WEAK_LOCKED, Acquire, Relaxed)
            .is_err()
        {
            return false;
        }
        let mut w = self.word.load(Acquire);
        let unique = loop {
            if count(w) != 1 || w & (DOOMED | CLAIMED | GONE) != 0 {
                break false;
            }
            if w & ARMED == 0 {
                break true;
            }
            match self
                .word
                .compare_exchange_weak(w, w & !ARMED, Acquire, Acquire)
            {
                Ok(_) => break true,
                Err(actual) => w = actual,
            }
        };
        self.weak.store(1, Release);
        unique
    }

    /// `try_unwrap`'s transition from one strong reference to none. Returns
    /// the old word on success.
    pub(crate) fn take_unique(&self) -> Option<u64> {
        let mut w = self.word.load(Acquire);
        loop {
            if count(w) != 1 || w & (DOOMED | CLAIMED | GONE) != 0 {
                return None;
            }
            match self.word.compare_exchange_weak(w, dec(w), Acquire, Acquire) {
                Ok(_) => return Some(w),
                Err(actual) => w = actual,
            }
        }
    }

    /// Strong count, for `strong_count` (may include a running collection's
    /// transient hold).
    pub(crate) fn strong(&self) -> usize {
        count(self.word.load(Acquire)) as usize
    }

    /// Strong count for `Weak::strong_count`: 0 once doomed.
    pub(crate) fn live_strong(&self) -> usize {
        let w = self.word.load(Acquire);
        if w & DOOMED != 0 {
            0
        } else {
            count(w) as usize
        }
    }

    /// Weak handles for `Weak::weak_count`: 0 once no strong handle is
    /// live, as [`Header::live_strong`] says (dropped, or collected: a
    /// handle that a destructor kept is dead and counts for neither).
    pub(crate) fn live_weak_handles(&self) -> usize {
        self.weak_handles_unless(DOOMED)
    }

    /// Weak handles, for `weak_count` (0 once the count is zero).
    pub(crate) fn weak_handles(&self) -> usize {
        self.weak_handles_unless(0)
    }

    /// Weak handles, or 0 if the count is zero or the word has any of
    /// `flags`.
    fn weak_handles_unless(&self, flags: u64) -> usize {
        let w = self.word.load(Acquire);
        if count(w) == 0 || w & flags != 0 {
            return 0;
        }
        match self.weak.load(Acquire) {
            WEAK_LOCKED => 0,
            n => n - 1,
        }
    }
}

// The graph slot lives in what was padding: the header stays four words.
#[cfg(all(not(loom), target_pointer_width = "64"))]
const _: () = assert!(core::mem::size_of::<Header>() == 32);
