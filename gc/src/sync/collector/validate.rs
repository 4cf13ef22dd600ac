//! Step 4 of a collection: validation of the candidate garbage, the Σ-test
//! (its members' in-degrees at one instant account for every strong
//! reference) and the Δ-test (no member's word changed since its
//! snapshot), before anything is freed (see the
//! [collector's documentation](super), step 4).

use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use super::trace::trace_into;
use super::{rebuffer, Node, Work, NONE};
use crate::sync::age::Stamp;
use crate::sync::header::{count, Header, CLAIMED, DOOMED, TOUCHED};

/// The fast path of validation: if no edge between candidate garbage nodes
/// crosses from one pin window to another, every weakly connected component
/// of the candidate garbage was traced within one window, with all of its
/// cells locked from each member's trace to the window's close, t*: the
/// trace is a snapshot of its edges at t*, so the trial count of zero of
/// every member *is* the Σ-test of its component at t* (an edge into it
/// from a live node would make it live; from another candidate, that
/// candidate would be in the component; so every counted edge is a member's
/// edge at t*). Then the Δ-test: CAS every member's word from its snapshot
/// to `CLAIMED`; if all succeed, the counts held from each snapshot through
/// t* to the claim, and everything is doomed. Returns `false`, having
/// claimed nothing, if an edge crosses windows, a Δ-test failed or the
/// snapshots (taken after `since`) were too old for it (`age.rs`): the
/// caller then validates component by component.
#[inline]
pub(super) fn claim_pinned(w: &mut Work, since: Stamp) -> bool {
    debug_assert!(w.doomed.is_empty());
    // With one window (the usual case) no edge can cross.
    if !w.windows.is_empty() && edge_crosses_windows(w) {
        return false;
    }
    let mut claimed = true;
    for (i, node) in w.nodes.iter().enumerate() {
        if node.live {
            continue;
        }
        if !claim(node) {
            claimed = false;
            break;
        }
        w.doomed.push(i as u32);
    }
    if !claimed {
        unclaim(w, &w.doomed);
        w.doomed.clear();
        return false;
    }
    // After the last claim: every equal word proved an unchanged one.
    if !since.fresh() {
        unclaim(w, &w.doomed);
        w.doomed.clear();
        return false;
    }
    // Backwards: the claims just walked the members forwards, and step 5
    // frees them forwards, so each pass starts on the headers the previous
    // one touched last, still in the first-level cache (a collection's
    // members usually outgrow it).
    for &m in w.doomed.iter().rev() {
        doom(&w.nodes[m as usize]);
    }
    true
}

/// The Δ-test of one member: its word is still its snapshot, and no
/// `Weak::upgrade` can reach it from now on. Returns `false` if the word
/// changed.
///
/// Usually a CAS from the snapshot `W` to `W | CLAIMED`: an upgrade before
/// it changed the word (the CAS fails), one after it waits while `CLAIMED`
/// is set. For a member with no `Weak` (an acquire load shows `weak == 1`:
/// only the reference the strong side shares) a load of the word equal to
/// `W` suffices, without an RMW:
///
/// - no upgrade can come later: a `Weak` is made from a strong handle or a
///   `Weak`, and by the Σ-test no strong handle outside the members existed
///   at t*, nor since (any clone, drop or upgrade changes the word, and the
///   word is `W`); so no `Weak` can appear, and there is none now;
/// - none came earlier unseen: a `Weak` dropped before our weak load
///   released it (a `Release` RMW our `Acquire` load reads from), so its
///   upgrades happen-before our word load, which would see their counter;
/// - the value's last uses by mutators happen-before our hold's RMW (it
///   acquired every release of the word), which wrote `W`: the CAS added no
///   ordering the load lacks.
///
/// From then on no other thread writes the word, as after a successful CAS
/// (`doom` stores into it). If another member fails, `fetch_and(!CLAIMED)`
/// on this one changes nothing. Loom models `upgrade_against_doom`,
/// `weak_release_against_collection` (planted bug found: the load path
/// without the weak test, an upgrade between the load and the doom).
fn claim(node: &Node) -> bool {
    // SAFETY: held.
    let header = unsafe { node.header.as_ref() };
    if header.weak.load(Acquire) == 1 && header.word.load(Acquire) == node.word {
        return true;
    }
    header
        .word
        .compare_exchange(node.word, node.word | CLAIMED, AcqRel, Acquire)
        .is_ok()
}

/// Takes back the claims on `members` (their validation failed).
fn unclaim(w: &Work, members: &[u32]) {
    for &m in members {
        // SAFETY: held.
        unsafe { w.nodes[m as usize].header.as_ref() }
            .word
            .fetch_and(!CLAIMED, AcqRel);
    }
}

/// Whether an edge between candidate garbage nodes crosses from one pin
/// window to another (then some component spans windows, and its trace is
/// no snapshot of one instant). Test
/// `a_move_between_windows_is_caught_by_the_retrace`, loom model
/// `move_between_cells_across_windows` (planted `false`: a component freed
/// under an outside handle).
fn edge_crosses_windows(w: &Work) -> bool {
    (0..w.nodes.len()).filter(|&i| !w.nodes[i].live).any(|i| {
        let window = w.window_of(i as u32);
        w.edges_of(i).any(|k| {
            let j = w.edges[k];
            !w.nodes[j as usize].live && w.window_of(j) != window
        })
    })
}

/// Dooms a node whose Δ-test succeeded as part of a validated set: marks
/// it dead, then sets `DOOMED` with a plain store.
///
/// A store suffices: from its successful CAS until its value is dropped, no
/// other thread writes the word (there is no handle to clone or drop
/// outside the validated set, `Weak::upgrade` only loads while `CLAIMED` is
/// set, and only the collector-lock holder drains or holds), and no user
/// code runs in between on this thread. Dead first: once the values drop,
/// their destructors may reach each other's handles.
fn doom(node: &Node) {
    // SAFETY: held; validation proved that no other thread can reach the
    // object (module docs), so nobody reads the flag concurrently.
    let header = unsafe { node.header.as_ref() };
    // SAFETY: as above.
    unsafe { header.dead.set() };
    header.word.store(node.word | CLAIMED | DOOMED, Release);
}

/// The slow path of validation: the weakly connected components of the
/// candidate garbage (union-find, grouped without hashing), each validated
/// on its own with a re-trace ([`validate`]); the members of the components
/// that pass go to `w.doomed`, the others are buffered again.
#[inline]
pub(super) fn validate_components(w: &mut Work, since: Stamp) {
    let n = w.nodes.len();
    w.parent.extend(0..n as u32);

    fn find(parent: &mut [u32], mut i: u32) -> u32 {
        while parent[i as usize] != i {
            parent[i as usize] = parent[parent[i as usize] as usize];
            i = parent[i as usize];
        }
        i
    }
    for i in 0..n {
        if w.nodes[i].live {
            continue;
        }
        for k in w.edges_of(i) {
            let j = w.edges[k];
            if !w.nodes[j as usize].live {
                let ri = find(&mut w.parent, i as u32);
                let rj = find(&mut w.parent, j);
                w.parent[ri as usize] = rj;
            }
        }
    }
    // Number the components (by root), count their members, then lay the
    // members out grouped: `members[bounds[c]..bounds[c + 1]]`.
    w.member_of.resize(n, NONE);
    let mut components = 0u32;
    for i in 0..n {
        if w.nodes[i].live {
            continue;
        }
        let root = find(&mut w.parent, i as u32) as usize;
        if w.member_of[root] == NONE {
            w.member_of[root] = components;
            components += 1;
        }
        w.member_of[i] = w.member_of[root];
    }
    w.bounds.resize(components as usize + 1, 0);
    for i in 0..n {
        if !w.nodes[i].live {
            w.bounds[w.member_of[i] as usize + 1] += 1;
        }
    }
    for c in 0..components as usize {
        w.bounds[c + 1] += w.bounds[c];
    }
    let garbage = w.bounds[components as usize] as usize;
    w.members.resize(garbage, 0);
    // `stack` is empty: reuse it as the fill cursor of each component.
    w.stack.extend_from_slice(&w.bounds[..components as usize]);
    for i in 0..n {
        if !w.nodes[i].live {
            let c = w.member_of[i] as usize;
            w.members[w.stack[c] as usize] = i as u32;
            w.stack[c] += 1;
        }
    }
    w.stack.clear();
    for c in 0..components {
        let (a, b) = (
            w.bounds[c as usize] as usize,
            w.bounds[c as usize + 1] as usize,
        );
        if validate(w, a, b, c, since) {
            w.doomed.extend_from_slice(&w.members[a..b]);
        } else {
            for &m in &w.members[a..b] {
                rebuffer(w.nodes[m as usize].header);
            }
        }
    }
}

/// Validates component `id` (members `w.members[a..b]`, their snapshots
/// taken after `since`) and, on success, dooms it.
///
/// Snapshots too old to back the Δ-test (`age.rs`) are not used: the
/// component is re-traced with all of its cells locked and each member
/// claimed at once, its count checked at its claim ([`sigma_claim`]).
fn validate(w: &mut Work, a: usize, b: usize, id: u32, since: Stamp) -> bool {
    if since.fresh() {
        // A component traced within one pin window needs no re-trace: its
        // trace is its Σ-test at that window's close (see `claim_pinned`).
        let window = w.window_of(w.members[a]);
        let one_window = w.members[a..b].iter().all(|&m| w.window_of(m) == window);
        if !one_window && !sigma_test(w, a, b, id) {
            return false;
        }
        if !claim_all(w, a, b) {
            return false;
        }
        if since.fresh() {
            doom_all(w, a, b);
            return true;
        }
        unclaim(w, &w.members[a..b]);
    }
    if !sigma_claim(w, a, b, id) {
        return false;
    }
    doom_all(w, a, b);
    // Only now are the cells unlocked: dropping a guard runs the lock's own
    // code (a `TraceLock` is user code), which may clone a handle out of its
    // cell or upgrade a `Weak` to a member. Before the doom, a clone's count
    // was erased by `doom`'s plain store (a use after free once the
    // component was freed), and an upgrade waited for ever on a claim only
    // this thread could take back; after it, a clone is a dead handle that
    // counts (as one a destructor keeps) and an upgrade fails. A panic of a
    // guard's drop is kept and re-raised when the collection ends: unwinding
    // from here would leave the doomed members undropped for ever. Tests
    // `gc/tests/sync_guard_drop_during_claim.rs`, `sync_guard_drop_upgrade.rs`.
    w.unlock();
    true
}

/// The Σ- and Δ-tests of component `id` (members `w.members[a..b]`) without
/// snapshots. A re-trace locks every cell of the component and counts each
/// member's in-degree from the members; then, with every cell still locked,
/// each member is claimed (its `TOUCHED` cleared in the same CAS), and its
/// count at its claim must be that in-degree plus our hold; then every
/// member's word must still be the one its claim wrote. Claims all, or none.
///
/// Once a member is claimed, `Weak::upgrade` waits, and every clone of one
/// of its handles changes its word and marks it `TOUCHED` (in a `fetch_or`
/// right after its `fetch_add`, whose count change shows until then: see
/// `header.rs`). Its count at the claim left no handle outside the
/// component, so a handle dropped after the claim was cloned after it, and
/// that clone marked the word before returning the handle. So a member
/// whose word is unchanged at the second pass had no clone or drop since
/// its claim, whatever the counter did; then at any instant between the last claim
/// and the first check, every member's count was its claim's: its
/// in-degree plus the hold, with every cell locked. That is the Σ-test at
/// one instant, and no handle to a member can be made after it (none
/// outside; upgrades wait; the cells are locked until the claims are
/// checked). One pass would not do: a thread that upgraded a member not
/// yet claimed could clone through its immutable fields a handle to one
/// already claimed, then drop its own before its member's claim (loom
/// model `stale_clone_through_a_field`).
///
/// On success the cells stay locked (`w.guards`): the caller dooms the
/// members, then releases them (a guard's `Drop` is user code, which must
/// not find a member claimed). On failure they are unclaimed and released.
fn sigma_claim(w: &mut Work, a: usize, b: usize, id: u32) -> bool {
    // `trial` becomes minus each member's in-degree from the members.
    for k in a..b {
        let m = w.members[k] as usize;
        w.nodes[m].trial = 0;
    }
    if !retrace(w, a, b, id) {
        w.unlock();
        return false;
    }
    let mut closed = true;
    for k in a..b {
        let node = &mut w.nodes[w.members[k] as usize];
        // SAFETY: held.
        let word = &unsafe { node.header.as_ref() }.word;
        let mut old = word.load(Relaxed);
        node.word = loop {
            let new = (old | CLAIMED) & !TOUCHED;
            match word.compare_exchange_weak(old, new, AcqRel, Relaxed) {
                Ok(_) => break new,
                Err(actual) => old = actual,
            }
        };
        if count(old) as i64 != 1 - node.trial {
            unclaim(w, &w.members[a..=k]);
            closed = false;
            break;
        }
    }
    if closed {
        let changed = w.members[a..b].iter().any(|&m| {
            let node = &w.nodes[m as usize];
            // SAFETY: held.
            unsafe { node.header.as_ref() }.word.load(Acquire) != node.word
        });
        if changed {
            unclaim(w, &w.members[a..b]);
            closed = false;
        }
    }
    // On success the cells stay locked until the caller has doomed the
    // members (see `validate`): no user code between the check and the doom.
    if !closed {
        w.unlock();
    }
    closed
}

/// The Σ-test of component `id` (members `w.members[a..b]`) by a re-trace.
fn sigma_test(w: &mut Work, a: usize, b: usize, id: u32) -> bool {
    // Σ-test: all cells locked at once; every member's snapshot count must be
    // its internal in-degree plus our hold. `trial` holds the remaining
    // counts of this component's members.
    for k in a..b {
        let m = w.members[k] as usize;
        w.nodes[m].trial = count(w.nodes[m].word) as i64 - 1;
    }
    let closed = retrace(w, a, b, id)
        && w.members[a..b]
            .iter()
            .all(|&m| w.nodes[m as usize].trial == 0);
    // t*: every cell of the component is locked right now.
    w.unlock();
    closed
}

/// Re-traces the members `w.members[a..b]` of component `id`, keeping
/// their cells locked (in `w.guards`), and takes one from a member's
/// `trial` for each edge to it from a member. `false` if a cell could not
/// be locked (or a trace panicked).
fn retrace(w: &mut Work, a: usize, b: usize, id: u32) -> bool {
    for k in a..b {
        let m = w.members[k] as usize;
        w.targets.clear();
        let header = w.nodes[m].header;
        // SAFETY: `m` is held until `finish`, after `guards` is emptied.
        if unsafe { trace_into(header, &mut w.targets, &mut w.guards, &mut w.panic) } {
            return false;
        }
        for t in 0..w.targets.len() {
            let target = w.targets[t].cast::<Header>();
            // SAFETY: reported by a handle in a locked cell or held object.
            if let Some(j) = unsafe { w.node_of(target) } {
                if w.member_of[j as usize] == id {
                    w.nodes[j as usize].trial -= 1;
                }
            }
        }
    }
    true
}

/// The Δ-test of the members `w.members[a..b]`: claims them all, or none.
fn claim_all(w: &mut Work, a: usize, b: usize) -> bool {
    // Δ-test: no clone, drop, upgrade or buffering happened on any member
    // since its snapshot, which covers t*.
    for k in a..b {
        if !claim(&w.nodes[w.members[k] as usize]) {
            unclaim(w, &w.members[a..k]);
            return false;
        }
    }
    true
}

/// Dooms the claimed members `w.members[a..b]`.
fn doom_all(w: &Work, a: usize, b: usize) {
    for &m in &w.members[a..b] {
        doom(&w.nodes[m as usize]);
    }
}
