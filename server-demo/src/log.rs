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
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Lines that could not be written, or were dropped with the queue full.
static WRITE_ERRORS: AtomicU64 = AtomicU64::new(0);
/// Lines queued, and lines the logger thread is done with.
static QUEUED: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicU64 = AtomicU64::new(0);

/// Lines waiting for the logger thread at most.
const QUEUE: usize = 1024;

/// Queues one line, `server-demo: ` and the message, for stderr; never
/// panics, never blocks.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::log::queue_line(format_args!($($arg)*))
    };
}

/// The body of [`log!`](crate::log!).
pub fn queue_line(args: fmt::Arguments<'_>) {
    static LOGGER: OnceLock<Option<SyncSender<String>>> = OnceLock::new();
    let logger = LOGGER.get_or_init(|| {
        let (tx, rx) = sync_channel::<String>(QUEUE);
        let spawned = std::thread::Builder::new()
            .name("logger".into())
            .spawn(move || {
                for line in rx {
                    write_stderr(&line);
                    DONE.fetch_add(1, Relaxed);
                }
            });
        spawned.ok().map(|_| tx)
    });
    let line = format!("server-demo: {args}\n");
    let Some(tx) = logger else {
        // No thread (out of resources at the first line): write here.
        return write_stderr(&line);
    };
    QUEUED.fetch_add(1, Relaxed);
    if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = tx.try_send(line) {
        WRITE_ERRORS.fetch_add(1, Relaxed);
        DONE.fetch_add(1, Relaxed);
    }
}

/// Waits up to `timeout` for the queued lines to be written.
pub fn flush(timeout: Duration) {
    let start = Instant::now();
    while DONE.load(Relaxed) < QUEUED.load(Relaxed) && start.elapsed() < timeout {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes one line, `server-demo: ` and the message, to stderr in the
/// calling thread (for `main`'s last word); never panics.
pub fn stderr_line(args: fmt::Arguments<'_>) {
    write_stderr(&format!("server-demo: {args}\n"));
}

#[cfg(not(test))]
fn write_stderr(line: &str) {
    if std::io::stderr().lock().write_all(line.as_bytes()).is_err() {
        WRITE_ERRORS.fetch_add(1, Relaxed);
    }
}

/// In unit tests, through the harness's output capture instead: tests feed
/// the server path made-up errors (`conn`'s back-off test, an `EMFILE`),
/// whose lines would otherwise reach the terminal of a passing
/// `cargo test` ("accept failed … Too many open files"). The logger thread
/// is spawned by the first test that logs and inherits its capture; a
/// failing test still shows its lines.
#[cfg(test)]
fn write_stderr(line: &str) {
    eprint!("{line}");
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
