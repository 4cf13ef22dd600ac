//! Injected panics for the model checkers (`model.rs`, `sync_model.rs`): a
//! payload type that marks them, a panic hook that keeps them quiet, and a
//! `catch_unwind` that accepts only them.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};

/// The payload of every injected panic (anything else is a real failure).
#[derive(Debug)]
pub struct Injected;

thread_local! {
    static COLLECTING: Cell<bool> = const { Cell::new(false) };
}

/// Panics with [`Injected`], unless the thread is already unwinding outside
/// [`collecting`] (a second panic aborts, as in any Rust program: a test
/// that drops two armed handles in one scope would abort by its own fault).
pub fn inject() {
    if !std::thread::panicking() || COLLECTING.get() {
        panic::panic_any(Injected);
    }
}

/// Runs an explicit collection. Inside it every value is dropped by the
/// collector, which must catch each panic and never drop a value while a
/// panic unwinds through it: there an armed node panics even during
/// unwinding, and the abort that follows is the collector's failure.
pub fn collecting<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            COLLECTING.set(self.0);
        }
    }
    let _restore = Restore(COLLECTING.replace(true));
    f()
}

/// Runs `f`; returns whether it panicked with [`Injected`] and re-raises
/// any other panic.
pub fn caught(f: impl FnOnce()) -> bool {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => false,
        Err(payload) if payload.is::<Injected>() => true,
        Err(payload) => panic::resume_unwind(payload),
    }
}

/// Silences the panic hook for [`Injected`] panics (anything else goes to
/// the hook that was installed before), once per process.
pub fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Injected>() {
                previous(info);
            }
        }));
    });
}
