//! Thread-safe counterparts of the single-threaded pointers: [`Gc`] (cycle
//! collected), [`Weak`], [`Rc`] (plain counting, never collects) and the
//! process-wide collector ([`collect`], [`stats`], [`set_policy`]).
//!
//! ```
//! use recycler::sync::{collect, Gc};
//! use std::sync::Mutex;
//!
//! #[derive(recycler::Trace)]
//! struct Task {
//!     name: String,
//!     waker: Mutex<Option<Gc<Task>>>,
//! }
//!
//! let task = Gc::new(Task { name: "t".into(), waker: Mutex::new(None) });
//! *task.waker.lock().unwrap() = Some(task.clone()); // a self-cycle
//! let worker = {
//!     let task = task.clone();
//!     std::thread::spawn(move || task.name.len())
//! };
//! assert_eq!(worker.join().unwrap(), 1);
//! let weak = Gc::downgrade(&task);
//! drop(task);
//! collect();
//! assert!(weak.upgrade().is_none());
//! ```
//!
//! # Costs
//!
//! A handle is one word. Clone is one `fetch_add` on the header word; drop
//! of a type that cannot own pointers is one `fetch_add`, as in `Arc`. Drop
//! of a type that may own pointers is one compare-and-swap on the same word
//! (retried only under contention), because the decision to buffer the
//! object as a possible cycle root must be taken on the exact word the
//! decrement replaces (a load followed by a blind `fetch_add` loses roots
//! when a collector drains the entry in between — loom found that); the first
//! time the count drops to a non-zero value the same CAS marks the object
//! buffered and the entry goes onto this thread's own buffer. The last
//! release of an object that never had a `Weak` frees its memory after an
//! acquire load of the weak count, without `Arc`'s second RMW. Deref reads a
//! plain `bool` and touches no atomic. Types with
//! [`Trace::MAY_CONTAIN_GC`](crate::Trace::MAY_CONTAIN_GC) `== false` are
//! never buffered or traced. No mutator operation touches a lock or counter
//! shared with other threads: buffers are per thread; the registry and the
//! collector lock are only used by collections and thread start/exit.
//!
//! # The algorithm
//!
//! Each object has a 64-bit header word: strong count, `BUFFERED`, `ARMED`,
//! `CLAIMED`, `DOOMED`, `GONE` and a modification counter that every mutator
//! RMW bumps (see `header.rs`). A collection (one at a time, `try_lock`ed,
//! waited for only boundedly by a thread whose garbage outruns it; see
//! *Policies*) drains the buffers (every thread's, or for a mutator's
//! automatic minor collection its own, see *Where collections run*), takes
//! a *hold* (a strong reference) on each live root, traces breadth-first —
//! each object's cells locked with `try_lock` while it is traced, and a
//! hold taken on every new target *before* those locks are released — and
//! runs trial deletion on private counts derived from the word snapshots
//! `W` taken by the holds.
//! Each weakly connected component of the candidate garbage is then
//! validated: (Σ) lock every cell of the component at once, re-trace it and
//! check that every member's snapshot count is exactly its in-degree inside
//! the component plus the hold; (Δ) release the locks and CAS each member's
//! word from `W` to `W | CLAIMED` (for a member that has no `Weak`, an
//! acquire load of the weak count showing 1 and of the word showing `W`
//! suffice: nothing can upgrade it, see `collector::claim`); if every CAS
//! succeeds, set `DOOMED`.
//! Any failure unclaims and re-buffers the component: it waits for a later
//! collection (it may leak for a while; it is never freed early).
//! Usually no re-trace is needed: the trace (root by root, each root's
//! tree at once) keeps every cell it locked locked until its *pin window*
//! closes (at the end of a root's tree past half a budget of guards, within
//! one past the budget, and at the end of the trace), so the first trace is
//! already a
//! snapshot of one window's objects' edges at one instant, the window's
//! close; a component traced within one window has zero trial counts that
//! are its Σ-test at that instant, and only the Δ-test CASes run
//! (`collector/mod.rs`, step 4). The soundness argument below applies unchanged
//! with `t*` that close. Only a component spanning windows is re-traced.
//! The price: a mutator that locks a cell of an object being traced waits
//! until its window closes (at most `PIN_BUDGET` = 8192 guards' worth of
//! tracing; the collector itself only `try_lock`s, so it never waits for a
//! mutator). Doomed
//! members are marked dead (`Deref` panics, `try_deref` returns `None`);
//! then the collector lock is released (so another thread's collection can
//! start) and every value is dropped (a panicking `Drop` does not stop the
//! others and is re-raised afterwards), then the holds are released and
//! memory follows `Arc`'s weak protocol. A collection runs as a drop batch
//! (`drops.rs`): values whose count reaches zero during it are dropped after
//! it, outside the collector lock, each under `catch_unwind`. A panicking `Trace` counts
//! as a cell that could not be locked (the object is kept and buffered
//! again) and is re-raised when the collection ends. Drops and collections use explicit work lists,
//! never recursion proportional to the graph: a drop nested in another runs
//! in place (as `Arc`'s) only within a 4 KiB stack budget of the outermost
//! one, and is queued beyond it (`drops.rs`).
//!
//! # Unsized values
//!
//! `Gc<str>`, `Gc<[T]>` and `Gc<dyn Trait + Send + Sync>`, and the same for
//! [`Rc`] and both weak handles, with the design of the single-threaded
//! pointers ([`crate::unsize`]): `From<&str>`, `From<String>`,
//! `From<Box<str>>`, `From<Vec<T>>`, `From<&[T]>`, `From<Box<[T]>>`,
//! `FromIterator`, and trait objects declared with
//! [`dyn_trace!`](crate::dyn_trace) (which declares both `dyn Trait` and
//! `dyn Trait + Send + Sync`), reached from a handle to a sized value with
//! [`coerce!`](crate::coerce) on stable or implicitly (`CoerceUnsized`) with
//! the `nightly` feature, which also turns `Gc<[T; N]>` into `Gc<[T]>`.
//! The header names the object's own vtable (its concrete type, or for a
//! slice its element type, with the length in a word in front of the
//! header: `unsize.rs`), so the collector traces, drops and frees them
//! exactly as sized values. A handle whose type is a trait object is
//! buffered as a possible cycle root whatever the concrete type (a leaf
//! behind `dyn Trait` costs a little collector work, never correctness).
//!
//! ```
//! use std::sync::Mutex;
//! use recycler::sync::{collect, Gc};
//! use recycler::{coerce, dyn_trace, unsize::DynTrace, Trace};
//!
//! trait Job: DynTrace {
//!     fn run(&self) -> usize;
//!     /// Replaces the sub-jobs (of a batch).
//!     fn set(&self, _jobs: Gc<[AnyJob]>) {}
//! }
//! dyn_trace!(Job);
//! type AnyJob = Gc<dyn Job + Send + Sync>;
//!
//! #[derive(Trace)]
//! struct Print(Gc<str>);
//! impl Job for Print {
//!     fn run(&self) -> usize { self.0.len() }
//! }
//!
//! // A job that points to other jobs (and so may be on a cycle).
//! #[derive(Trace)]
//! struct Batch(Mutex<Gc<[AnyJob]>>);
//! impl Job for Batch {
//!     fn run(&self) -> usize { self.0.lock().unwrap().len() }
//!     fn set(&self, jobs: Gc<[AnyJob]>) { *self.0.lock().unwrap() = jobs; }
//! }
//!
//! let print: AnyJob = coerce!(Gc::new(Print(Gc::from("hello"))) => dyn Job + Send + Sync);
//! let batch = Gc::new(Batch(Mutex::new(Gc::from(vec![print.clone()]))));
//! let batch: AnyJob = coerce!(batch => dyn Job + Send + Sync);
//! let worker = {
//!     let batch = batch.clone();
//!     std::thread::spawn(move || batch.run() + print.run())
//! };
//! assert_eq!(worker.join().unwrap(), 6);
//!
//! // The batch runs itself: a cycle through a trait object and a slice.
//! batch.set([batch.clone()].into_iter().collect());
//! let weak = Gc::downgrade(&batch);
//! drop(batch);
//! collect();
//! assert!(weak.upgrade().is_none());
//! ```
//!
//! A handle to `dyn Trait` without `+ Send + Sync` is allowed (the value
//! itself was `Send + Sync` when it was allocated, so the collector may
//! still drop it on any thread), but it stays on its thread:
//!
//! ```compile_fail,E0277
//! use recycler::sync::Gc;
//! use recycler::{coerce, dyn_trace, unsize::DynTrace, Trace};
//!
//! trait Job: DynTrace {}
//! dyn_trace!(Job);
//! #[derive(Trace)]
//! struct Nop;
//! impl Job for Nop {}
//!
//! let job: Gc<dyn Job> = coerce!(Gc::new(Nop) => dyn Job);
//! std::thread::spawn(move || drop(job));
//! ```
//!
//! # Soundness
//!
//! *Closure at one instant.* Let `t*` be the moment, during the Σ-test of a
//! component `C`, when every cell of `C` is locked and every member has been
//! re-traced. Every member is held (the collector owns a strong reference),
//! so no thread can have `&mut` to its value (`get_mut` needs the caller's
//! handle to be the only one, and disarms the buffer entry first so that no
//! hold can be taken through it; holds through edges are taken while the
//! edge's cell is locked, so never on a handle someone has `&mut` to); hence
//! the non-cell parts of the values are frozen, and the locked cells are
//! frozen: the re-traced edges are the handles inside `C` at `t*`. A
//! member's CAS from `W` succeeds only if its word did not change since the
//! snapshot; every clone, drop, upgrade and buffering changes the word (the
//! counter defeats ABA), and the snapshot precedes `t*` which precedes the
//! CAS, so each member's count at `t*` is its snapshot count. The Σ-test
//! therefore establishes, at the single instant `t*`, that every handle to a
//! member lies inside a member's value (R1: no counts from different times
//! are mixed; R2: a handle moved through a `Mutex` is either seen in its
//! locked cell at `t*` or changes the in-degree; R5: real counts are never
//! modified by trial deletion). No thread then has any reference into `C`:
//! a borrow of a member is derived from a handle, which would lie inside
//! another member, and so on — an ownership chain with no root, impossible
//! for the finite chain of borrows a thread holds.
//!
//! *Nothing can enter after `t*`.* The only way to reach a member without an
//! existing reference is `Weak::upgrade`. An upgrade of a member before its
//! CAS changes the word, so the CAS fails and the component is spared (R3);
//! after its CAS, the upgrade waits while `CLAIMED` is set (a bounded
//! section with no user code) and then fails on `DOOMED`, or succeeds after
//! an abort unclaims. So when every CAS succeeds, no mutator has touched a
//! member since `t*`: the collector alone reaches the values, and marking
//! them dead and dropping them cannot race (the dead flag is written while
//! nobody else can read it; handles cloned by destructors inherit that
//! ordering). A hold is only ever taken by a CAS that requires a non-zero
//! count, so the collector never resurrects an object whose last handle is
//! being dropped (R4); while it holds an object, a mutator's last drop
//! leaves the value to the collector's release. Memory is freed only when
//! the weak count reaches zero, and the shared weak reference is released
//! by the last of "value gone" and "buffer entry drained", so no buffer
//! entry, `Weak` or collector ever reads a freed header. The one assumption
//! is the `Trace` contract: the `sync::Gc` handles inside a value change only
//! through `&mut` or inside a lock traced with [`Tracer::trace_lock`](crate::Tracer::trace_lock)
//! (a [`TraceLock`]: `std` and `parking_lot` `Mutex`/`RwLock`, or a lock
//! type of your own), which hands its guard to the collector so that a cell
//! stays locked until the hold on its targets is taken and, during
//! validation, until `t*`. Any other cell type must not hold `sync::Gc`
//! handles that change through `&self`. `sync::Gc` requires `T: Send + Sync`, which rules out
//! `RefCell`/`Cell` interiors. The modification counter has 26 bits: the
//! Δ-test could be fooled by a multiple of 2^26 mutator operations on one
//! member between its snapshot and its CAS that also restore its exact
//! count (a collector stalled long enough by a slow `Trace` did free a
//! borrowed value: `gc/tests/sync_counter_wrap.rs`). So snapshots back a
//! Δ-test only while they are younger than 20 ms (`age.rs`: 2^26 RMWs of
//! one word take over 0.17 s); a collection whose snapshots are older
//! validates each component without them (`collector::sigma_claim`): a
//! re-trace locks all of its cells and counts the in-degrees; each member
//! is claimed by a CAS that clears its `TOUCHED` bit, its count then equal
//! to its in-degree plus the hold; then every member's word must be the
//! one its claim wrote. Clones of a claimed object set `TOUCHED`
//! (`header.rs`), and a handle dropped after a claim was cloned after it,
//! so an unchanged word means no clone or drop since the claim, whatever
//! the counter: at any instant between the last claim and
//! the first check the Σ-test holds with every cell locked, and no handle
//! can be made after it. Loom models `stale_*` force that path.
//!
//! *Generations do not weaken this.* A generation only decides which
//! objects enter the graph; it never enters the tests. A minor collection
//! does not drain old objects' entries (it moves them to the old roots) and
//! does not follow edges to old objects, so no old object is a node and an
//! old object's handle to a young node stays in that node's count as an
//! outside reference: the node's trial count is positive, it is live. A
//! component is still freed only if, at its `t*`, every handle to each
//! member lies in a member (Σ) and no member's word changed since its
//! snapshot (Δ) — for old members in a full collection exactly as for
//! young ones. So a generation can only make a cycle live longer, never free
//! a reachable object. The generation itself is collector-private state
//! (a flag beside the graph slot, not in the header word), written only by
//! the collector-lock holder while it holds the object; mutators never
//! write it, and the one mutator read (the thread whose drop takes the count
//! to zero counts old objects freed) comes after the collector's last hold
//! was released, which that drop acquires (loom model
//! `promotion_against_last_drop`). Liveness needs one more rule: a minor
//! collection cannot tell a reference from a live old object from one from
//! an old member of the node's own garbage cycle, whose count did not move
//! and which may not be buffered. Each node it keeps for an outside
//! reference is therefore buffered again as an *old root*, for the next
//! full collection (`old_root_rebuffering`; the differential test
//! `sync_differential` finds the leak when the rule is removed).
//!
//! *Why both tests.* Without the Σ-test, a thread holding its own handle to
//! `b` can move the `a → b` handle into `b`'s cell between the traces of `a`
//! and `b`: the trial counts that handle twice and misses the stack handle,
//! and no count or word changes. Without the Δ-test, a thread can trade a
//! handle on one member for one on another while their counts are read at
//! different times. The loom models `move_between_cells` and `count_tear`
//! fail when either test is removed. A component traced across pin windows
//! is no snapshot of one instant, so it is re-traced under all its locks:
//! the loom model `move_between_cells_across_windows` and the test
//! `a_move_between_windows_is_caught_by_the_retrace` fail when it is not.
//!
//! # Policies
//!
//! Collections are triggered per thread, by the thread that buffers a root,
//! according to its [`Policy`]: `Adaptive` collects when the roots this thread
//! buffered since a collection last took its buffer reach the number of
//! objects the last collection traced, found *live* and promoted (or aged,
//! see *Generations*) — the work
//! it wasted, as the single-threaded collector's young threshold, up to
//! 4096 (a minor collection never traces an old object again, so a large
//! one-off promotion, a hub built at start, is not wasted twice) — and at
//! least the *interval*, which follows the yield of the collections (Nim's
//! rule, process-wide): after a collection that freed less than half of
//! what it traced the interval grows by half, up to 4096 roots; after one
//! that freed at least half it halves, down to 128. A longer interval lets
//! more buffered objects die by counting before they are judged (they cost
//! no tracing) and traces an object decremented many times once: dumpster's
//! random operations (whose minor collections find nearly everything live)
//! trace 7.4k objects instead of 21.5k (2.5 % fewer instructions in all:
//! the objects that died by counting while buffered are freed when their
//! entries are drained, and larger batches of frees cost the allocator
//! part of the gain), while churn, hubs and request cycles (mostly
//! garbage) keep the floor.
//! Garbage a collection frees does not raise the threshold, so each thread
//! leaves at most 4096 roots between collections. A mutator's automatic
//! collection leaves the newest 64 of its roots in its buffer for the next
//! one (*ripening*, as the single-threaded collector does): an object
//! decremented a moment ago is most often still in use (a request being
//! built), and judged now it would be traced, promoted and, once dead, left
//! to a full collection. The boundary between the roots it judges and
//! those it leaves still cuts through some piece of work, whose judged part
//! the other part's edges keep alive; so such a collection, while the
//! recent collections found mostly garbage, promotes a young object only
//! the second time it finds it live (*aging*, see *Generations*).
//! Because one thread collecting can be slower than another that only
//! allocates, a thread that has buffered four times its threshold while
//! another thread collects waits for that collection (at most 10 ms per
//! buffering, so a destructor of that collection needing a lock the thread
//! holds delays it, never deadlocks it; never from inside a collection), then
//! collects: the garbage stays bounded under steady churn. `Nim16` ports Nim
//! 1.6.12's rule on this thread's buffer length (threshold from 128; after a
//! collection, `max(t / 3 * 2, 16)` if `freed * 2 >= traced`, else
//! `t * 3 / 2`); `Manual` only collects on [`collect`]. No policy
//! collects on a thread that is unwinding from a panic: the collection
//! would run destructors of unrelated garbage there, and re-raising a
//! panic of one of those would abort the process; the roots wait for the
//! next collection. A thread-local's destructor at thread exit is the one
//! place this cannot be told apart (no Rust API says that thread-locals are
//! being destroyed): a handle dropped there may still trigger a collection,
//! and a panicking `Drop` of the garbage it finds then aborts the process,
//! as any panic out of a thread-local's destructor does. A thread that
//! keeps handles in thread-locals and has destructors that may panic
//! should empty them (or call [`collect`]) before it ends.
//!
//! # Generations
//!
//! As in the single-threaded collector, objects that a collection finds
//! live are *promoted* to the old generation (except by collections that a
//! `Nim16` thread triggers: Nim 1.6.12 had no generations). Adaptive
//! triggers *minor* collections: they start from the young roots only and
//! never enter an old object (an edge to one is an outside reference of its
//! target), so long-lived hubs stop costing anything; an old object's
//! buffer entry waits in the *old roots*, which only a full collection
//! drains, and so does every young object a minor collection kept for an
//! outside reference (the cross-generation rule, see *Soundness*). A full
//! collection starts from every root and enters everything; Adaptive runs
//! one instead of a minor one when the objects promoted since the last full
//! collection, or the old roots waiting, exceed a quarter of the old
//! objects counted at the end of it (CPython's rule), and at least 1024: its
//! cost is amortised over that growth. [`collect`] is always full;
//! [`collect_minor`] runs one minor collection. `Adaptive`'s threshold for
//! the next collection counts the objects the last one promoted or aged
//! (its wasted work), no longer the old objects it re-traced.
//!
//! *Aging.* A mutator's automatic minor collection (the Adaptive trigger's)
//! promotes a young object the second time it finds it live, not the
//! first (while the collections find mostly garbage, see below); the
//! first time it only marks it, and buffers it again if a
//! reference from outside the graph kept it (a positive trial count), so
//! that the next such collection judges it again, with the roots that
//! ripening held back. Ripening cuts every collection's roots at some
//! point of the work in progress: in the work-stealing server, a request's
//! context drained while the entry of a finished line future that points
//! to it (and is pointed to by nothing the trace enters) ripens. Promoted,
//! that context was old garbage a moment later, and its edges kept the rest
//! of its request alive in every minor collection, all of it left to a full
//! collection. Measured there (2-vCPU AMD EPYC, 256 connections, `wrk`):
//! full collections 121 → 13 and promotions 217k → 35k in 10 s, 11 % fewer
//! objects traced per request, collector CPU −14 %; and `server-demo ab --a orc --b orc` (the
//! build before against this one) **0.972×** CPU per request (0.964–0.978,
//! 120 pairs in 12 rounds of fresh servers), collector share 12.2 → 11.0 %,
//! p99 0.96×. The price is a second trace of what is really live before it
//! is promoted: dumpster's random operations, whose minor collections find
//! most of what they trace live, take 1.02× on one thread (1.012–1.030) and
//! 1.015× on two (not significant); 2-thread cycle churn 1.01–1.03×; the
//! hub 0.99× (not significant). Explicit collections and the collector
//! thread's promote at once (they take every root: nothing ripens).
//!
//! So aging applies only while the recent collections found mostly
//! garbage (the Adaptive interval at its floor: the last ones freed at
//! least half of what they traced), where an object found live is likely
//! cut off from work that is about to die, as in the server. Where the
//! collections find mostly live objects (the random operations' long-lived
//! graphs), what they find live is live, and they promote it at once
//! (adaptive tenuring; thirtieth session, 2-vCPU AMD EPYC: the random
//! operations 0.979× on two threads and 0.982× on one, 20 pairs each; the
//! server `ab --a orc --b orc` 0.996×, 0.992–1.002, 100 pairs in 10 rounds;
//! the hub 1.001× and the churn 0.986×, 12 pairs each, not significant).
//!
//! The policy is not what separates dumpster's random operations on one
//! thread from `Arc` (1.32× its instructions, callgrind, 250,000 operations,
//! four runs in one process as criterion's iterations). All collections
//! together are 10.6 % of the instructions (a third of that is freeing the
//! objects that died by counting while buffered); without them, but for
//! those frees and the cycles' drops, the ratio would still be about 1.23×:
//! the rest is the mutators' buffering and drops. Measured there, and not
//! kept: interval bounds from 512 to 16,384 roots, a full trigger from
//! 4096, no full collections, or only full ones, all change the
//! instructions by −1 to +1 % and simulated first-level cache misses by
//! under 4 % (a fixed interval of 1024: +3 % and +10 %). Exempting from the
//! cross-generation rule the nodes that reach no old object (sound: a cycle
//! through the old generation runs from the node to an old member) halves
//! the old roots but costs 1.0 to 1.6 % more instructions: a node queued as
//! an old root is already `BUFFERED`, so the mutators' later decrements of
//! it push nothing, and the exemption hands those pushes back to them.
//!
//! # Where collections run
//!
//! By default ([`CollectorMode::Mutators`]) a collection that the Adaptive
//! trigger asks for runs on the thread whose buffering made it due, and the
//! destructors of the cycles it frees run there. So dropping any handle (or
//! a buffering `Nim16` trigger) may run destructors of *unrelated* garbage on
//! the dropping thread: a thread must not drop a `sync::Gc` while it holds a
//! lock that a destructor of collected garbage may take (a registry the
//! objects deregister from, say), or it waits for itself
//! (`gc/tests/sync_unrelated_destructor_lock.rs`). A panic of such a
//! destructor is re-raised there too, out of the `drop` of an unrelated
//! handle (on a tokio runtime: the task that dropped it fails). With
//! [`CollectorMode::Thread`] most of those destructors run on the collector
//! thread, which waits for the lock instead, but not all: a thread whose
//! buffering outruns the collector thread collects itself (the pacing
//! below), and then runs them under its own locks
//! (`gc/tests/sync_thread_mode_destructor_lock.rs`, a probe; on a tokio
//! runtime churning cycles most destructors ran on the workers). Only
//! [`Policy::Manual`](crate::Policy) on the thread that holds the lock keeps
//! them off it: then they run there only in [`collect`] (on tokio, set it
//! on every worker: see *On tokio*). A minor one starts from
//! that thread's own roots (and those of exited threads), not every
//! thread's: each thread traces and frees the garbage it dropped, whose
//! objects its own core touched last, into its own allocator cache, instead
//! of pulling other threads' objects across cores (a cycle that spans
//! threads is still found from any of its roots: the trace follows edges
//! wherever they lead). A live thread's buffer that no collection took in
//! the last 8 collections is taken by the next one, so the garbage of a
//! thread that stops buffering waits a bounded time as long as any thread
//! collects (`tests/sync_local.rs`); full collections, the collector
//! thread's, [`collect`] and [`collect_minor`] take every buffer. Measured
//! on the 2-vCPU EPYC (`sync_profile churn recycler-sync-gc 2 100000 7`,
//! alternating with the binary that drained every buffer): 2-thread cycle
//! churn faster in 20 of 22 pairs, median of the last ten 295 → 252 ns
//! per cycle (leaking `Arc` ~130); 2-thread random operations and the
//! work-stealing server (6 alternating pairs at 256 connections) moved
//! within their noise. With
//! [`CollectorMode::Thread`] ([`set_collector_mode`]) mutators only buffer
//! roots and wake a collector thread (started lazily by the first request,
//! named `recycler-sync-collector`, stopped by [`stop_collector_thread`]),
//! which runs the collections and the destructors of the cycles they free;
//! a thread whose garbage outruns it still waits for it boundedly and then
//! collects itself (the pacing above), so garbage stays bounded. Nim16
//! triggers always collect on the mutator (the port's semantics), and
//! [`collect`] always collects on its caller, after waiting for a
//! collection that is running elsewhere: destructors of the cycles it frees
//! run on the caller. The
//! default is the one measured faster on 2 cores (see the README's results
//! and the benchmarks' `recycler-sync-gc-thread` column).
//!
//! # On tokio
//!
//! Handles move between worker threads like `Arc`s, and each worker
//! buffers and (by default) collects on its own. What differs from `Arc`:
//!
//! - Only `std` and `parking_lot` `Mutex`/`RwLock` are traced. An async
//!   lock (`tokio::sync::Mutex`, `RwLock`) has no `Trace` impl: a derived
//!   type with such a field does not compile, and `#[trace(skip)]` on it
//!   makes every cycle through it leak. To hold handles in one, wrap it in
//!   a type of your own that implements [`TraceLock`] with its `try_lock`
//!   (`try_read`) and `Trace` with [`Tracer::trace_lock`](crate::Tracer::trace_lock),
//!   as in the `TraceLock` example. A task that holds the guard across an
//!   `.await` keeps the owner alive for every collection meanwhile (the
//!   collector only `try_lock`s); the cycle is collected after it unlocks.
//! - [`collect`], [`stop_collector_thread`] and a switch to
//!   [`CollectorMode::Mutators`] block the calling thread (run them with
//!   `spawn_blocking`), and so can an automatic collection, for at most
//!   10 ms per buffering while its garbage outruns another thread's
//!   collection (see *Policies*).
//! - [`set_policy`] sets the calling thread's policy, not the task's: set
//!   it on every worker (`Builder::on_thread_start`).
//! - An automatic collection runs the destructors of unrelated garbage in
//!   whichever task dropped a handle, and re-raises a panic of one of them
//!   there (see *Where collections run*). With [`CollectorMode::Thread`],
//!   the destructors that run on the collector thread run outside the
//!   runtime: `tokio::spawn` and `Handle::current` panic there.
//!
//! # The allocator
//!
//! A collection frees its garbage in one burst, and its drain the objects
//! that died by counting while buffered. The objects' own memory goes to
//! the freeing thread's deferred frees and the next allocations of the
//! same layout reuse it (`header.rs`, *Recycling*), but the buffers the
//! values own (vectors, strings, boxes) go back to the global allocator
//! hundreds at a time. glibc's per-thread cache holds 7 chunks of each
//! size: the rest goes to its slower bins, the next allocations take the
//! slow path to get them back, and the next large allocation consolidates
//! them. On the demo server (work-stealing runtime, 256 connections, 2
//! vCPUs) glibc's malloc and free are about a third of what `sync::Gc`
//! costs per request over careful `Arc` (the README's results). What helps,
//! measured there and on 2-thread cycle churn: another allocator (the
//! server's CPU per request against careful `Arc` went from 1.32× to 1.23×
//! on mimalloc in one session, 1.35× to 1.27× in another), or glibc with a
//! larger per-thread cache (`GLIBC_TUNABLES=glibc.malloc.tcache_count=4000`:
//! churn 12–15 % faster). Spreading the frees over later allocations and
//! collecting twice as often did not help.
//!
//! The single-threaded collector on the per-thread server does not have
//! this problem: with its default `min_roots` of 32 and ripening it
//! collects every three requests or so, about 33 objects at a time, and
//! glibc's share of that server's CPU is *below* careful ARC's (perf under
//! `wrk -t1 -c256`: 10.9 against 13.2 %), while `sync::Gc`'s interval of
//! 1024 roots a thread freed about 1,100 objects a time (16.7 against
//! `arc-weak/ws`'s 11.4 %). Hence a small floor for the interval, with
//! ripening (see *Policies*): 256 roots from the fifteenth session (545
//! objects per collection in 2-thread churn instead of 2,200), 128 with
//! ripening 64 since the seventeenth (below). What it took: collections four times as
//! frequent cost 2-thread cycle churn 19 % (142.4 → 169.1 ns per cycle, 6
//! of 6 pairs) while the collector's buffers were shared behind the
//! collector lock — each collection first fetched from the other core the
//! lines of the nodes, edges and guards it had written — and nothing once
//! each thread keeps its own (`collector/mod.rs`, `Work`; 176 → 143 ns per
//! cycle, 4 of 4; against the interval of 1024: 6 of 13 pairs faster, the
//! same time). A collection no longer reads the thread CPU clock (a system
//! call) unless it runs for 10 µs (`stats.rs`, `LazyPauseTimer`). On the
//! work-stealing server (`compare --runtimes work-stealing --modes
//! arc-weak,orc --connections 256`, alternating pairs against the interval
//! of 1024, four pairs of 2 × 20-s rounds, the first two with a version
//! that capped the interval at 1024): RSS growth 3.3, 2.3, 3.7, 2.3
//! → 1.4, 0.9, 1.5, 0.6 MiB/min (in 10-s rounds a median of 7.2 → 3.6, 5 of
//! 5 pairs; a 20-s slope mostly measures the heap settling, and a later run
//! of the final build read 3.4 and 4.1), the CPU per request of orc/ws
//! against arc-weak/ws 1.41, 1.40, 1.27, 1.33 → 1.24, 1.32, 1.36, 1.33
//! (the same within the host's noise;
//! the baseline's own CPU per request moved by up to 12 % between the runs
//! of a pair), the collector's share of the server's CPU 10.7 → 11.4 %
//! (about four times the collections). Instructions (callgrind): hub
//! +0.2 %, dumpster's random operations −0.4 %. An interval of 64 made 14
//! times as many collections and cost the server CPU; ripening alone at
//! 1024 changed nothing.
//!
//! The floor of 128 (ripening 64; the ceiling stays 4096) was measured with
//! `server-demo ab`, which keeps two servers up and loads them in
//! alternating half-second slices, so that a pair's two slices see the
//! same host (seventeenth session, 2-vCPU AMD EPYC; `ab --a orc --b orc
//! --a-exe OLD --b-exe NEW --pairs 160 --slice 500ms`, 256 connections):
//! orc/ws's CPU per request 0.950× the floor of 256's (95 % interval
//! 0.926–0.973, cheaper in 107 of 160 pairs; a first build, whose ceiling
//! was 2048, 0.936×, 0.911–0.958), the collector's share of the server's
//! CPU 9.8 → 8.8 %: a collection meets its objects about ten requests
//! after their death instead of twenty, before the network stack's work has
//! evicted them (the sixteenth session's cachegrind of the server: −23 %
//! first-level and −90 % last-level misses). A floor of 64 (ripening 32)
//! gained nothing more (0.990× the floor of 128, 0.967–1.027; again in the
//! twentieth session with the ceiling kept at 4096 roots: 1.028×,
//! 0.978–1.050, 120 pairs) and took a larger share (10.4 %). `sync_profile`, 40 alternating pairs of
//! 2-thread cycle churn: 1.005× (cheaper in 17), 64: 0.961× (28); hub and
//! 1-thread random operations within ±0.5 % (10 pairs). On the Intel Xeon
//! of the sixteenth session, whose noise `compare`'s rounds could not see
//! through, the same change had read 1.29× → 1.20× against careful `Arc`
//! in 12 pairs, with 2-thread churn 2 % slower. Ripening 128 with the floor
//! of 128 (eighteenth session, the same `ab`): 0.985× (0.965–1.008, cheaper
//! in 87 of 160), within the noise; kept at 64.
//!
//! # Why no crossbeam-epoch
//!
//! Epoch-based reclamation lets a thread read memory it holds no reference
//! to, deferring the free until every pinned thread has moved on. Nothing
//! here reads a header without owning a reference to it: a buffer entry
//! owns the `BUFFERED` bit (which keeps the memory, see `header.rs`), a
//! collector reads a value only through a hold or a handle pinned in a
//! locked cell, a `Weak` owns a weak count, and the collector thread is an
//! ordinary collector. So there is no deferred free to make (the memory of
//! collected objects does wait on a per-thread list, *Recycling* in
//! `header.rs`, but for reuse by the next allocations, not for readers:
//! nothing references it any more). The one lock-free structure it has is
//! the hand-over of root buffers, and it needs no deferred free either: a
//! thread's buffer is a single-producer ring (`buffer.rs`) that its owner
//! fills with a plain store and a `Release` store of the tail, no RMW, and
//! that a collection drains under a lock (an idle thread's partly filled
//! buffer must be drained by the collector, which needs that exclusion
//! anyway); the owner grows a full ring under the same lock, so no drain
//! can be reading the storage it frees. The ring replaced a `parking_lot`
//! mutex around a `Vec`, whose lock and unlock are two RMWs per buffering.
//! On the 2-vCPU AMD EPYC of sessions 4–10 the ring was tried twice and not
//! merged (as many instructions per request; 2-thread cycle churn at equal
//! medians over ten quiet alternating pairs, 204.0 against 203.6 ns): RMWs
//! were cheap there. On the 2-vCPU Intel Xeon of the eleventh and twelfth
//! sessions an uncontended RMW costs about 10 ns, and perf put 11 % of the
//! hub benchmark's time in `push_root`, three quarters of it on the lock's
//! two RMW instructions. With the ring (`sync_profile`, 8 alternating
//! pairs against the mutex): hub at H = 10k 411 → 346 ns per request and at
//! 1M 370 → 340 (medians; faster in 8 of 8 pairs each), 2-thread cycle
//! churn 208 → 190 ns per cycle (6 of 8); the work-stealing server at 256
//! connections moved within its noise (4 pairs). For comparison, measured
//! on the AMD machine (busy with other builds; 20M entries, drained every
//! 1024, three rounds): lock + push + unlock 86–99 ns, a Treiber stack with
//! `crossbeam_epoch`-deferred node frees (pin + allocate + CAS) 259–291 ns,
//! a plain `Vec` push 5–6 ns.
//!
//! # Graph bookkeeping
//!
//! The collector numbers the objects it holds; an object's number is stored
//! in a collector-only slot of its header (in what would be padding), so
//! resolving an edge needs no hash table: the slot is believed only when the
//! node it names has that very header (a stale number from an earlier
//! collection names another node or none). A node keeps its trial count
//! (reused for the Σ-test of the slow path) and liveness; edges and
//! components live in vectors indexed by node number (components are only
//! computed when the fast path of validation does not apply), and every
//! buffer is kept by the collecting thread for its next collection (the
//! slots, like the buffers, are only used under the collector lock). An edge to a
//! `sync::Gc<T>` whose `T` cannot own pointers is not reported (the leaf is
//! not in the graph; its count keeps that edge as an external reference).

mod age;
#[cfg(not(loom))]
mod background;
mod buffer;
mod cells;
mod collector;
mod drops;
mod forward;
mod gc;
mod header;
mod prim;
pub mod rc;
mod shared;
mod state;
mod unsize;

#[cfg(loom)]
#[doc(hidden)]
pub use age::force_stale as force_stale_snapshots;
#[cfg(not(loom))]
pub use background::{collector_mode, set_collector_mode, stop_collector_thread, CollectorMode};
pub use cells::TraceLock;
pub use gc::{Gc, Weak};
pub use rc::Rc;

use crate::{Policy, Stats};

/// Collects the cycles buffered by every thread, now, on the calling thread
/// (full collections, run until one frees nothing, but at most 8 in a row:
/// a cycle whose last outside handle only a destructor run by the eighth
/// drops, the ninth of a chain of cycles that each keep the next one alive
/// from a `#[trace(skip)]` field or a registry that their `Drop` leaves,
/// waits for the next collection; `gc/tests/sync_collect_rounds.rs`).
///
/// If another thread (the collector thread, say) is collecting, waits for
/// it to finish first, and returns only when the values of the cycles that
/// the collections begun before it took, and the values those released by
/// counting, are dropped (they drop on the threads that run those
/// collections); if it waited for such frees, it collects once more, for
/// the cycles whose last outside handle they dropped. A blocking call, like
/// joining a thread: the caller must not hold a lock that a destructor of
/// such a value waits for, and such a destructor must not wait for a thread
/// that calls `collect()` meanwhile (join it, say): each would wait for the
/// other. Collections that begin after this one are not waited for: a
/// destructor of a cycle this call collects may wait for another thread's
/// `collect()`. (Automatic collections never block like this: they wait
/// boundedly, see *Policies*.) Returns at once when called from a
/// destructor running inside a collection.
///
/// The first panic of a `Trace` or a `Drop` it ran is re-raised when it
/// returns, unless the thread is unwinding (a `collect()` from a destructor
/// that an unwind runs): a second panic would abort the process, so it is
/// only reported (by the panic hook).
pub fn collect() {
    collector::collect_explicit(collector::Kind::full_for_this_thread(), 8);
    // As the per-thread `collect`: the memory this thread's collections
    // recycled goes back to the allocator (see *Recycling* in `header.rs`).
    #[cfg(not(loom))]
    crate::drop_queue::free_all_deferred();
}

/// Runs one minor collection now: from the young roots only, never entering
/// old objects (see *Generations* in the module docs); it takes every root
/// and promotes every young object it finds live (no ripening, no aging).
/// Returns at once if another thread is collecting. Cycles that involve old objects wait for a
/// full collection ([`collect`], or the Adaptive trigger).
pub fn collect_minor() {
    collector::try_collect(collector::Kind::Minor);
}

/// Process-wide statistics of the thread-safe pointers.
///
/// `live`, `freed_by_rc`, `roots_buffered` (old roots included) and
/// `old_objects` sum over all threads (past and present).
pub fn stats() -> Stats {
    state::stats()
}

/// Sets the calling thread's trigger policy (see the module docs).
pub fn set_policy(policy: Policy) {
    state::set_policy(policy);
}

/// Makes the calling thread's [`Policy::Nim16`] trigger read and update one
/// threshold shared by every thread that does the same, as Nim ≤ 1.6.12's
/// unsynchronised global `rootsThreshold` (fixed by Nim PR 21818); see
/// [`crate::set_nim16_shared_threshold`]. For experiments that reproduce that
/// defect; the shared value starts at 128 and is never reset.
pub fn set_nim16_shared_threshold(shared: bool) {
    state::set_nim16_shared_threshold(shared);
}

#[cfg(test)]
mod regressions;
#[cfg(test)]
mod tests;
