//! Loom models of `recycler::sync`: every race of DESIGN.md §4 as a model of
//! two or three threads and one to three objects, run against the real
//! collector code (under `--cfg loom`, recycler's atomics, locks,
//! thread-locals and globals are loom's; see `gc/src/sync/prim.rs`).
//!
//! Run the suite with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=5 \
//!     cargo test -p loom-tests --release --target-dir target/loom
//! ```
//!
//! (`--target-dir` only keeps the loom build from invalidating the normal
//! one.) Without `--cfg loom` the models are compiled out. The bound of five
//! preemptions per execution is also the default used when
//! `LOOM_MAX_PREEMPTIONS` is unset (see [`support::model`]). Measured on the
//! 2-core development machine (shared with other builds): the 17 models of `models.rs` take
//! about 100 s at 5 (two minutes with the build), 23 s at 4, 6 s at 3.
//! Every seeded bug tried so far was found at 3: no Δ-test (CAS replaced by
//! an unconditional claim), no Σ-test, no re-trace of a component spanning
//! pin windows (`edge_crosses_windows` always `false`), `get_mut` without disarming the
//! buffer entry, `upgrade` ignoring `CLAIMED`, a hold taken on a zero count,
//! and buffering decided on a stale load. Each model asserts, in every
//! explored execution, that no object is used after its value was dropped
//! (every dereference checks the object's drop count) and, after the threads
//! are joined and `collect()` has run, that every object was dropped exactly
//! once.
//!
//! | model (tests/models.rs) | race |
//! |---|---|
//! | `count_tear` | R1: counts read at different times |
//! | `move_through_mutex` | R2: a handle moved through a `Mutex`, no count change |
//! | `move_between_cells` | R2: one handle traced twice, a stack handle missed (Σ-test) |
//! | `move_between_cells_across_windows` | the same across two pin windows (Σ-test re-trace) |
//! | `move_out_and_back` | R2: moved out of a cell and back between traces |
//! | `upgrade_against_doom` | R3: `Weak::upgrade` racing the decision |
//! | `last_drop_against_hold` | R4: tracing an object whose last handle drops |
//! | `concurrent_buffering` | two threads buffer the same object |
//! | `drop_to_zero_while_buffered` | memory protocol of a buffered object |
//! | `cell_locked_across_collection` | a cell locked while the collector runs |
//! | `destructor_stores_dead_handle` | a destructor publishes a dead handle |
//! | `destructor_calls_collect` | re-entrant and concurrent `collect()` |
//! | `try_unwrap_against_collector` | moving the value out vs. draining its entry |
//! | `get_mut_against_collector` | `&mut` access vs. tracing (data race check) |
//! | `abort_then_eventual_collection` | validation fails, a later pass frees |
//! | `two_concurrent_collectors` | R5 and one-collector-at-a-time |
//! | `drain_against_unlocked_drop` | a collection frees its doomed without the collector lock while another drains a doomed member's pending entry (planted: a drain that holds a doomed object, found at bound 4; without the fix it was written for, `release_doomed` loading the word after its release RMW, a use after free at bound 5) |
//!
//! Generations (tests/generations.rs), each checked against a planted bug at
//! the bound above (the bug put in temporarily, the model failing, the bug
//! removed):
//!
//! | model | race | planted bug found |
//! |---|---|---|
//! | `promotion_against_last_drop` | a minor collection promotes an object whose last handle drops | promoting after releasing the hold (causality violation on the generation flag) |
//! | `promotion_against_upgrade` | `Weak::upgrade` of a young garbage cycle during a minor collection | `upgrade` ignoring `CLAIMED` (causality violation on the dead flag) |
//! | `old_cycle_against_upgrade` | validation of an *old* garbage cycle against an upgrade | no Δ-test for old members (causality violation on the dead flag) |
//! | `old_root_rebuffering` | the cross-generation rule while the young member's last outside handle drops | no re-buffering as an old root (the cycle leaks) |

//!
//! The collector's *pinned* trace (tree by tree; its cells stay locked until
//! the current pin window closes, so a component traced within one window
//! needs no re-trace and validation only CASes; see
//! `gc/src/sync/collector/mod.rs`) is exercised by every model above; under loom
//! the pin budget is one guard, so a window closes after every root's
//! tree and within one at its second guard: two-object cycles fit in one
//! window, three-object ones span two and run the fallback (the component
//! re-traced). Planted bugs: releasing each object's guards after its trace
//! while still trusting the trace as a snapshot — `move_between_cells`
//! fails (causality violation: the collector drops a value the mutator is
//! reading); trusting the trace of a component that spans windows —
//! `move_between_cells_across_windows` fails (the same violation). The collector's one-RMW release of a
//! freed member (`Header::release_doomed`, `GONE` set with the release of
//! the hold) is exercised by the models that free cycles; planted bug: the
//! release without `GONE` — the models crash (a value dropped twice, memory
//! freed under a live handle).
//!
//! Thread exit (tests/thread_exit.rs):
//!
//! | model | race | planted bug found |
//! |---|---|---|
//! | `thread_exit_against_collector` | a thread hands its root buffer over at exit while the collector thread reads `stats` and collects | handing the buffer over outside the registry lock (`stats` sees a buffered root nowhere) |
//!
//! Root buffer (tests/buffer.rs): a thread's ring of buffered roots, filled
//! by its owner with a release store of the tail and no read-modify-write,
//! drained by collections under a lock and grown by the owner under it
//! (`gc/src/sync/buffer.rs`; two cells under loom, so the model grows it).
//!
//! | model | race | planted bug found |
//! |---|---|---|
//! | `buffering_against_drain` | a thread buffers three roots (growing its ring) while another reads `stats` and collects | the tail's store `Relaxed`; the head's load in `push` `Relaxed`; growing without the drain lock (each a causality violation on a cell of the ring) |
//!
//! Memory (tests/memory.rs): each release of a weak reference reads, and
//! the free writes, a loom-tracked stand-in for the allocation
//! (`MemoryTrack` in `gc/src/sync/prim.rs`; loom does not track a `Box`'s
//! memory itself), so a free not ordered after another thread's last use is
//! a causality violation; and every model's `Node` writes its cell when it
//! is dropped, so a value dropped before another thread's last access to
//! it is one too.
//!
//! | model | race | planted bug found |
//! |---|---|---|
//! | `weak_release_against_last_drop` | a `Weak` dropped while the last strong handle drops: whichever release sees `weak == 1` frees, without an RMW when an acquire load shows it | the shortcut's load `Relaxed` (causality violation on the memory) |
//! | `weak_release_against_collection` | the same while a collection frees the object's cycle; the upgrader reads the cell; also the Δ-test by loads of a member with no `Weak` (`collector::claim`) | the shortcut's load `Relaxed`; `claim`'s load path without the weak test (both causality violations) |
//! | `dead_handle_drop_against_release` | a collected object's destructor hands a handle to the object to another thread, which clones and drops it while the collector releases its hold, without an RMW when an acquire load shows the hold to be the last reference (`Header::release_doomed`) | that load `Relaxed` (causality violation on the memory); the shortcut taken with an entry pending (`buffering_against_drain` fails: the drain touches the freed header's atomic) |
//!
//! The models' cells are a CAS spin lock (`support::SpinLock`), not
//! `loom::sync::Mutex`, whose `try_lock` loom treats as blocking (see its
//! docs).

#[cfg(loom)]
pub mod support;
