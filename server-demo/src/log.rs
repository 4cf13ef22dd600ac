//! Logging that cannot kill the server.
//!
//! `println!` and `eprintln!` panic when the write fails, which is what a
//! closed pipe does (`serve 2>&1 | head -1`, a log collector that died): the
//! write returns `EPIPE` (Rust ignores `SIGPIPE`), the macro panics, and a
//! server that logs on every failed `accept` goes down with it. Everything the
//! server path writes goes through [`log!`](crate::log!) (stderr) and
//! [`stdout_line`] instead: one `write_all` of the whole line, errors counted
//! in [`write_errors`] (shown in `/stats`) and otherwise ignored.
//!
//! Rate limiting is the caller's business (see [`crate::conn::Guard`] for the
//! accept loop's); these functions never block on anything but the write.

use std::fmt;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Lines that could not be written.
static WRITE_ERRORS: AtomicU64 = AtomicU64::new(0);

/// Writes one line, `server-demo: ` and the message, to stderr; never panics.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::log::stderr_line(format_args!($($arg)*))
    };
}

/// The body of [`log!`](crate::log!).
pub fn stderr_line(args: fmt::Arguments<'_>) {
    let line = format!("server-demo: {args}\n");
    if std::io::stderr().lock().write_all(line.as_bytes()).is_err() {
        WRITE_ERRORS.fetch_add(1, Relaxed);
    }
}

/// Writes one line to stdout and flushes it; never panics. Returns whether
/// the line was written.
pub fn stdout_line(args: fmt::Arguments<'_>) -> bool {
    let line = format!("{args}\n");
    let mut out = std::io::stdout().lock();
    let ok = out.write_all(line.as_bytes()).is_ok() && out.flush().is_ok();
    if !ok {
        WRITE_ERRORS.fetch_add(1, Relaxed);
    }
    ok
}

/// Log lines lost to write errors so far.
pub fn write_errors() -> u64 {
    WRITE_ERRORS.load(Relaxed)
}
