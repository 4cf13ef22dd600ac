//! Injected panics for the model checkers (`model.rs`, `sync_model.rs`): a
//! payload type that marks them, a panic hook that keeps them quiet, and a
//! `catch_unwind` that accepts only them.

use std::panic::{self, AssertUnwindSafe};

/// The payload of every injected panic (anything else is a real failure).
#[derive(Debug)]
pub struct Injected;

/// Panics with [`Injected`], unless the thread is already unwinding (a
/// second panic would abort, as in any Rust program).
pub fn inject() {
    if !std::thread::panicking() {
        panic::panic_any(Injected);
    }
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
