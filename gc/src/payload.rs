//! Panic payloads that the collectors and the drop queues catch, keep and
//! re-raise.
//!
//! A loop that drops many values under `catch_unwind` keeps the first panic
//! and drops the others. A payload is a user value (`panic_any`), and its
//! own `Drop` may panic: dropped in plain code, that panic would unwind
//! out of the loop, which would then drop the payload it had kept while
//! unwinding, a panic during a panic: an abort. So every payload that is
//! not kept is dropped here, under `catch_unwind` (and so is the payload of
//! a panic of its drop, a few times over, then forgotten: a leak, never an
//! abort).

use core::cell::Cell;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A caught panic.
pub(crate) type Payload = Box<dyn Any + Send>;

/// Re-raises a kept panic, unless the thread is unwinding already (the
/// collection or drop that kept it runs in a destructor that an unwind
/// runs): a second panic there would abort the process, so the payload is
/// dropped instead ([`discard`]); the panic hook has reported it.
pub(crate) fn resume(payload: Payload) {
    if std::thread::panicking() {
        discard(Some(payload));
    } else {
        std::panic::resume_unwind(payload);
    }
}

/// Keeps `payload` in `first` unless a panic is kept there already; then
/// drops it ([`discard`]).
pub(crate) fn keep_first(first: &mut Option<Payload>, payload: Payload) {
    *first = first_of(first.take(), Some(payload));
}

/// [`keep_first`] for a panic kept in a cell that the drop of the other
/// payload may reach again (a drop queue's): that drop may free a value
/// whose own panic is kept there meanwhile, and it is dropped here, under
/// `catch_unwind`, not by the cell's `set`.
pub(crate) fn keep_first_in(cell: &Cell<Option<Payload>>, payload: Payload) {
    let kept = first_of(cell.take(), Some(payload));
    discard(cell.replace(kept));
}

/// `first`, or else `second`; the one not returned is dropped
/// ([`discard`]). Inlined: every top-level drop of a `sync` value calls it,
/// nearly always with two `None`s.
#[inline]
pub(crate) fn first_of(first: Option<Payload>, second: Option<Payload>) -> Option<Payload> {
    match (first, second) {
        (Some(first), second) => {
            discard(second);
            Some(first)
        }
        (None, second) => second,
    }
}

/// Runs `drain` until it returns without panicking, keeping the first panic
/// in `first` and dropping the others ([`keep_first`]). `drain` must pick
/// up where a panic left it (pop a queue until it is empty, say): each
/// panic ends one call, and the next call goes on with the rest.
pub(crate) fn drain_catching(first: &mut Option<Payload>, mut drain: impl FnMut()) {
    while let Err(payload) = catch_unwind(AssertUnwindSafe(&mut drain)) {
        keep_first(first, payload);
    }
}

/// Drops a payload that is not re-raised, if any. A panic of its own drop
/// is caught and its payload dropped the same way (usually a message that
/// drops quietly); a payload whose drop keeps panicking is forgotten after
/// a few rounds.
pub(crate) fn discard(payload: Option<Payload>) {
    let Some(mut payload) = payload else {
        return;
    };
    for _ in 0..4 {
        match catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            Ok(()) => return,
            Err(inner) => payload = inner,
        }
    }
    std::mem::forget(payload);
}
