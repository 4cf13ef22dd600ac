//! A thread's root buffer: a ring that only its owner thread fills, with
//! no read-modify-write, and that any thread may drain under a lock.
//!
//! Buffering a possible cycle root is the one collector cost every mutator
//! pays on its own path, once per object per collection. It was a push on a
//! `Vec` behind the owner's mutex: two atomic RMWs (lock and unlock), 11 %
//! of the hub benchmark's time with three quarters of it on those two
//! instructions (perf, Intel Xeon; the ring made the hub 16 % faster there,
//! see *Why no crossbeam-epoch* in the module docs of `sync`). A
//! single-producer ring needs none:
//!
//! - positions `head ≤ tail` count entries since the buffer was made (they
//!   wrap around `usize`); entry `p` lives in cell `p mod capacity`;
//! - the **owner** writes the cell at `tail`, then publishes it with a
//!   release store of `tail + 1`. It reads `head` with acquire first: a
//!   cell is reused only after the drain that read it published a later
//!   `head`, so that read happened before the overwrite;
//! - a **drain** (a collection, or the owner at its exit) holds
//!   `drain_lock`, reads `tail` with acquire (every cell below it is
//!   written and published), reads those cells and publishes `head = tail`
//!   with a release store;
//! - a **full** ring is grown by the owner under `drain_lock` (no drain
//!   reads the cells meanwhile): it first re-reads `head` (a drain may have
//!   emptied it), else moves the entries to a ring twice as large at the
//!   same positions. The ring's storage is replaced only there, by the
//!   owner under the lock, and read only by the owner or under the lock.
//!
//! Positions are never rewound: rewinding a drained ring to cell 0 (as a
//! `Vec` drained and refilled), so that the cells in use stay the first
//! few, was tried and not kept: the same first-level cache misses under
//! cachegrind (hub, cycle churn) for a little more work.
//!
//! Exactly one drain takes each entry, and none is lost: a drain takes
//! `[head, tail)` and moves `head` to the `tail` it read, under the lock.
//! An entry pushed before a `collect()` (in happens-before order) is below
//! the `tail` its drain reads. Loom model: `tests/buffer.rs` of
//! `loom-tests`.

use core::ptr::NonNull;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use super::header::Header;
use super::prim::{AtomicUsize, CollectorCell, Mutex};
use super::state::Entry;

/// A cell of the ring (a buffered header; unused cells are dangling).
type Cell = CollectorCell<NonNull<Header>>;

/// Cells of a new ring (a power of two): 2 KiB. Under loom and Miri, two,
/// so that their models and tests grow it.
#[cfg(not(any(loom, miri)))]
const FIRST_CAPACITY: usize = 256;
#[cfg(any(loom, miri))]
const FIRST_CAPACITY: usize = 2;

/// One thread's buffered roots (see the module docs).
pub(crate) struct RootBuffer {
    /// Held by every drain, and by the owner while it grows the ring.
    drain_lock: Mutex<()>,
    /// The ring: a boxed slice of `Cell`s, a power of two long. Replaced
    /// only by the owner under `drain_lock`; read by the owner, or under
    /// `drain_lock`.
    ring: CollectorCell<NonNull<[Cell]>>,
    /// Position of the first entry not drained yet; written only under
    /// `drain_lock`.
    head: AtomicUsize,
    /// Position after the last entry pushed; written only by the owner.
    tail: AtomicUsize,
}

// SAFETY: the cells are written by the owner thread alone and read by the
// drains after the release/acquire hand-over described in the module docs;
// the ring's storage is replaced only under `drain_lock` by the owner. An
// entry is a token any thread may drain (`Entry: Send`).
unsafe impl Send for RootBuffer {}
// SAFETY: as above: every access to shared state goes through the atomics
// or `drain_lock`.
unsafe impl Sync for RootBuffer {}

/// The cell of position `p` in `cells` (a power of two long).
#[inline]
fn cell(cells: &[Cell], p: usize) -> &Cell {
    &cells[p & (cells.len() - 1)]
}

/// A new ring of `capacity` unused cells.
fn new_ring(capacity: usize) -> NonNull<[Cell]> {
    let cells: Box<[Cell]> = (0..capacity)
        .map(|_| Cell::new(NonNull::dangling()))
        .collect();
    NonNull::from(Box::leak(cells))
}

impl RootBuffer {
    pub(crate) fn new() -> Self {
        RootBuffer {
            drain_lock: Mutex::new(()),
            ring: CollectorCell::new(new_ring(FIRST_CAPACITY)),
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
        }
    }

    /// Buffers `entry`; returns the number of entries buffered now.
    ///
    /// # Safety
    /// Only one thread, the buffer's owner, ever calls `push`.
    #[inline]
    pub(crate) unsafe fn push(&self, entry: Entry) -> usize {
        let tail = self.tail.load(Relaxed);
        // Acquire: the drain that moved `head` past a cell read it before.
        let mut head = self.head.load(Acquire);
        // SAFETY: only the owner (this thread) replaces the ring.
        let mut ring = unsafe { self.ring.get() };
        if tail.wrapping_sub(head) == ring.len() {
            (ring, head) = self.grow(tail);
        }
        // SAFETY: the ring is alive (only this thread frees a ring, when it
        // replaces it); positions `head..tail` are within its capacity, so
        // cell `tail` holds no entry a drain may still read (see the acquire
        // load of `head` above), and no drain reads it before the release
        // store below publishes it.
        unsafe { cell(ring.as_ref(), tail).set(entry.0) };
        self.tail.store(tail.wrapping_add(1), Release);
        tail.wrapping_add(1).wrapping_sub(head)
    }

    /// The owner's full ring: returns a ring with room for one more entry
    /// (the same, if a drain emptied it meanwhile, or one twice as large)
    /// and the `head` it was checked against.
    #[cold]
    fn grow(&self, tail: usize) -> (NonNull<[Cell]>, usize) {
        let _drains = self.drain_lock.lock();
        // Relaxed: `head` is written only under the lock we hold.
        let head = self.head.load(Relaxed);
        // SAFETY: only the owner (our caller) replaces the ring.
        let old = unsafe { self.ring.get() };
        if tail.wrapping_sub(head) < old.len() {
            return (old, head);
        }
        let new = new_ring(old.len() * 2);
        // SAFETY: under `drain_lock` no drain reads the cells, and the
        // owner (this thread) is the only writer: the copy and the free
        // race with nothing. `old` came from `new_ring` (a leaked box) and
        // is unreachable once `self.ring` names `new`.
        unsafe {
            let (from, to) = (old.as_ref(), new.as_ref());
            for p in (0..tail.wrapping_sub(head)).map(|k| head.wrapping_add(k)) {
                cell(to, p).set(cell(from, p).get());
            }
            self.ring.set(new);
            drop(Box::from_raw(old.as_ptr()));
        }
        (new, head)
    }

    /// Moves every buffered entry to `into` ([`drain_oldest_into`] keeping
    /// none).
    ///
    /// [`drain_oldest_into`]: Self::drain_oldest_into
    pub(crate) fn drain_into(&self, into: &mut Vec<Entry>) {
        self.drain_oldest_into(into, 0);
    }

    /// Moves the buffered entries to `into` but the newest `keep`, which
    /// stay in the ring as if they had been pushed after this drain (the
    /// module docs' drain with a smaller `tail`: the owner reuses no cell
    /// below the `head` we store).
    pub(crate) fn drain_oldest_into(&self, into: &mut Vec<Entry>, keep: usize) {
        let _drains = self.drain_lock.lock();
        // Relaxed: written only under the lock we hold.
        let head = self.head.load(Relaxed);
        // Acquire: the cells below `tail` are written.
        let tail = self.tail.load(Acquire);
        let tail = if tail.wrapping_sub(head) > keep {
            tail.wrapping_sub(keep)
        } else {
            head
        };
        // SAFETY: the ring is replaced only under `drain_lock`, which we
        // hold; cells `head..tail` were published by the owner's release
        // store of `tail`, and it writes none of them again before it sees
        // our release store of `head` below.
        let cells = unsafe { self.ring.get().as_ref() };
        let positions = (0..tail.wrapping_sub(head)).map(|k| head.wrapping_add(k));
        // SAFETY: as above, for each cell read.
        into.extend(positions.map(|p| Entry(unsafe { cell(cells, p).get() })));
        self.head.store(tail, Release);
    }

    /// The number of entries buffered now (a snapshot).
    pub(crate) fn len(&self) -> usize {
        // `head` first: it only grows and never passes `tail`.
        let head = self.head.load(Acquire);
        self.tail.load(Acquire).wrapping_sub(head)
    }
}

impl Drop for RootBuffer {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: nothing else uses the ring; it came from
        // `new_ring`. Entries still in it (none: the owner drains its
        // buffer at exit) would leak their objects, never free them.
        unsafe { drop(Box::from_raw(self.ring.get().as_ptr())) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Entry `i`: a distinct address in `base` (never dereferenced).
    fn fake(base: &[u8], i: usize) -> NonNull<Header> {
        NonNull::from(&base[i]).cast()
    }

    /// One thread pushes `0..N` (growing the ring several times) while
    /// another drains concurrently, every other drain leaving the newest
    /// three (ripening): every entry is drained exactly once, in order, and
    /// `len` counts what is left.
    #[test]
    fn a_concurrent_drain_takes_every_entry_once_in_order() {
        const N: usize = if cfg!(miri) { 300 } else { 100_000 };
        let base: Arc<[u8]> = vec![0u8; N].into();
        let buffer = Arc::new(RootBuffer::new());
        let producer = {
            let (buffer, base) = (buffer.clone(), base.clone());
            std::thread::spawn(move || {
                for i in 0..N {
                    // SAFETY: this thread is the buffer's only pusher.
                    let len = unsafe { buffer.push(Entry(fake(&base, i))) };
                    assert!(len >= 1);
                }
            })
        };
        let mut drained = Vec::new();
        // Every other drain leaves the newest few entries (ripening).
        let mut keep = 0;
        while !producer.is_finished() {
            let before = buffer.len();
            buffer.drain_oldest_into(&mut drained, keep);
            // The owner only adds entries: at least `keep` of what we saw
            // are left, if there were that many.
            assert!(buffer.len() >= keep.min(before));
            keep = if keep == 0 { 3 } else { 0 };
            std::thread::yield_now();
        }
        producer.join().unwrap();
        assert_eq!(buffer.len(), N - drained.len());
        buffer.drain_into(&mut drained);
        assert_eq!(buffer.len(), 0);
        let start = base.as_ptr() as usize;
        let got: Vec<usize> = drained
            .iter()
            .map(|e| e.0.as_ptr() as usize - start)
            .collect();
        assert_eq!(got, (0..N).collect::<Vec<_>>());
    }
}
