//! Accepting and serving connections under hostile clients, shared by both
//! runtimes ([`crate::server`]'s per-thread workers and
//! [`crate::worksteal`]): a connection cap, an accept loop that backs off
//! when the process runs out of descriptors, a header-read timeout, an idle
//! keep-alive timeout, and a bounded drain of request bodies the handler
//! does not read. The runtimes differ only in how they spawn a connection's
//! future (`spawn_local` or `spawn`) and in the handler.
//!
//! **Cap.** One [`Semaphore`] per server holds `--max-connections` permits
//! (by default the descriptor limit minus a reserve). An accepted connection
//! takes a permit for its whole life; when none is left the connection is
//! answered with a canned `503` and `Connection: close`, written without
//! blocking (best effort), and closed at once, so the attacker's excess costs
//! one `accept` and one `close`, and connections already open are served.
//!
//! **Accept errors.** `EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM` and any other
//! error that is not about the one connection being accepted make the loop
//! sleep before the next `accept` (5 ms, doubling up to 500 ms, reset by the
//! next success), instead of retrying at once: the pending connections wait
//! in the listen backlog, and the loop costs a few system calls per second
//! until descriptors are free again. Errors are counted and logged at most
//! once a second per server, with the count of errors since the last line.
//!
//! **Timeouts.** Each connection's reads and writes go through [`Watched`],
//! which stamps a per-connection [`Clock`]; the service marks where a request
//! starts (hyper has parsed its head) and ends (the response is ready). A
//! watchdog next to the connection closes it when
//! - a request head is not complete `--header-timeout` after its first byte,
//!   or after the connection opened (the first request);
//! - between requests, nothing was read or written for `--idle-timeout`;
//! - during a request, nothing was read or written for `--idle-timeout`.
//!
//! hyper 1.x has no idle timeout for HTTP/1; its `header_read_timeout` (with
//! a [`TokioTimer`]) starts when it begins waiting for a request head, at the
//! start and after every response, so it covers the idle wait and the head
//! together and cannot tell a quiet keep-alive client (fine for 60 s) from a
//! slowloris (not fine for 10 s). It is set to the sum of the two timeouts
//! (an idle wait followed by a slow head), as a backstop that the watchdog
//! normally beats: bytes read while a request is being handled may be the
//! start of a pipelined head, and the watchdog, which cannot see inside
//! hyper's buffer, then starts that head's clock when the request ends.
//!
//! **Unread bodies.** hyper closes a keep-alive connection when the body of
//! a request is dropped unread (it cannot find the next request's start);
//! when that happened used to depend on whether the runtime dropped the
//! request before or after answering. Now every request body is read and
//! discarded before the handler runs, up to [`DRAIN_LIMIT`] bytes within
//! `--header-timeout`. A body that is larger gets 413, slower 408, malformed
//! (a broken chunked encoding) 400, each with `Connection: close`, and the
//! connection closes after it, on both runtimes alike; the handler does not
//! run.
//!
//! **Requests the handler never sees.** An HTTP/1.1 request without exactly
//! one `Host` header (RFC 9112, section 3.2), or an HTTP/1.0 one with
//! several, gets 400. A client that half-closes its side after its request
//! (`shutdown(SHUT_WR)`) still gets the response: hyper's `half_close`.
//!
//! **Memory after bursts.** glibc keeps the heap a burst of connections used
//! (hyper's buffers, tasks) in its arenas; after 10,000 connections the
//! process stays at about 200 MiB. When a burst is over (see
//! [`Guard`]'s `closed`) the guard calls `malloc_trim(0)`, at most once a
//! second, and RSS falls back to tens of MiB (measurements in
//! `server-demo/README-section.md`, "Hostile clients").

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body as _, Incoming};
use hyper::header::{HeaderValue, CONNECTION, HOST};
use hyper::{Method, Request, Response, Version};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::server::{http_response, GRACE};
use crate::stats::ConnStats;

/// Request-body bytes read and discarded before the connection is closed
/// instead (see the module docs).
pub const DRAIN_LIMIT: usize = 64 * 1024;

/// hyper's read buffer, hence the largest request head (see `serve_http1`).
pub const MAX_HEAD: usize = 16 * 1024;

/// Descriptors kept back from the default connection cap: stdio, the
/// signal and control runtime, `/proc` reads.
const RESERVED_FDS: u64 = 64;

/// And per server thread: its listener, its runtime's epoll and wake-up
/// descriptors (a per-thread worker holds about five, a work-stealing one
/// about one). A fixed reserve of 64 let servers of a dozen or more
/// per-thread workers run out of descriptors below the cap, so that a flood
/// of idle connections made new clients wait in the backlog instead of
/// getting the cap's 503 (an internal review found it).
const RESERVED_FDS_PER_THREAD: u64 = 8;

/// First and longest pause after a failed `accept`.
const MIN_BACKOFF: Duration = Duration::from_millis(5);
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// At most one line about failed `accept`s per this interval.
const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// At most one `malloc_trim` per this interval.
const TRIM_INTERVAL: Duration = Duration::from_secs(1);

/// A drop in open connections that counts as the end of a burst.
const TRIM_BURST: usize = 256;

/// The answer to a connection over the cap.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\ncontent-length: 32\r\nconnection: close\r\nretry-after: 1\r\n\r\n\
{\"error\":\"too many connections\"}";

/// The limits `serve` was started with.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Time for a request head, from its first byte (or from the
    /// connection's start for the first request).
    pub header_timeout: Duration,
    /// Time without a byte read or written before the connection is closed.
    pub idle_timeout: Duration,
    /// Connections open at once; `None` derives it from `RLIMIT_NOFILE`.
    pub max_connections: Option<usize>,
    /// Call `malloc_trim` after a burst of connections (see [`Guard`]).
    pub malloc_trim: bool,
}

/// One server's admission control and counters, shared by all its workers.
pub struct Guard {
    limits: Limits,
    max_connections: usize,
    nofile: (u64, u64),
    permits: Arc<Semaphore>,
    started: Instant,
    refused: AtomicU64,
    accept_errors: AtomicU64,
    header_timeouts: AtomicU64,
    idle_timeouts: AtomicU64,
    closed_after_body: AtomicU64,
    trims: AtomicU64,
    trim_ns: AtomicU64,
    /// Most connections open at once since the last `malloc_trim`.
    peak: AtomicUsize,
    /// Milliseconds since `started` of the last `malloc_trim`, plus one.
    last_trim: AtomicU64,
    /// When the last accept-error line was written, and errors since.
    accept_log: Mutex<(Option<Instant>, u64)>,
}

impl Guard {
    /// A guard for a server of `threads` threads started with `limits`, with
    /// the descriptor limit `nofile = (soft, hard)` (after raising it).
    pub fn new(limits: Limits, nofile: (u64, u64), threads: u16) -> Guard {
        let reserved = RESERVED_FDS + RESERVED_FDS_PER_THREAD * u64::from(threads);
        let derived = nofile.0.saturating_sub(reserved).max(1);
        let max_connections = limits
            .max_connections
            .unwrap_or(usize::try_from(derived).unwrap_or(usize::MAX))
            .min(Semaphore::MAX_PERMITS);
        Guard {
            limits,
            max_connections,
            nofile,
            permits: Arc::new(Semaphore::new(max_connections)),
            started: Instant::now(),
            refused: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            header_timeouts: AtomicU64::new(0),
            idle_timeouts: AtomicU64::new(0),
            closed_after_body: AtomicU64::new(0),
            trims: AtomicU64::new(0),
            trim_ns: AtomicU64::new(0),
            peak: AtomicUsize::new(0),
            last_trim: AtomicU64::new(0),
            accept_log: Mutex::new((None, 0)),
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max_connections - self.permits.available_permits()
    }

    /// The counters, for `/stats`.
    pub fn stats(&self) -> ConnStats {
        ConnStats {
            nofile_soft: self.nofile.0,
            nofile_hard: self.nofile.1,
            max_connections: self.max_connections as u64,
            open: self.open() as u64,
            refused_over_cap: self.refused.load(Relaxed),
            accept_errors: self.accept_errors.load(Relaxed),
            header_timeouts: self.header_timeouts.load(Relaxed),
            idle_timeouts: self.idle_timeouts.load(Relaxed),
            closed_after_body: self.closed_after_body.load(Relaxed),
            malloc_trims: self.trims.load(Relaxed),
            malloc_trim_s: self.trim_ns.load(Relaxed) as f64 * 1e-9,
            log_write_errors: crate::log::write_errors(),
            header_timeout_s: self.limits.header_timeout.as_secs_f64(),
            idle_timeout_s: self.limits.idle_timeout.as_secs_f64(),
        }
    }

    /// Answers a connection over the cap and closes it.
    fn refuse(&self, stream: TcpStream) {
        self.refused.fetch_add(1, Relaxed);
        // Best effort: a fresh socket's send buffer takes these few bytes.
        let _ = stream.try_write(REFUSED);
    }

    /// Counts and (rate-limited) logs a failed `accept`; returns how long
    /// to pause before the next one, if at all.
    fn accept_failed(&self, e: &io::Error, backoff: &mut Duration) -> Option<Duration> {
        self.accept_errors.fetch_add(1, Relaxed);
        // Errors about the one connection being accepted: the next may be fine.
        let transient = matches!(
            e.raw_os_error(),
            Some(libc::ECONNABORTED | libc::ECONNRESET | libc::EPROTO | libc::EPERM | libc::EINTR)
        );
        let pause = (!transient).then(|| {
            let pause = *backoff;
            *backoff = (*backoff * 2).min(MAX_BACKOFF);
            pause
        });
        let mut log = self.accept_log.lock();
        log.1 += 1;
        let now = Instant::now();
        let due = match log.0 {
            None => true,
            Some(at) => now.duration_since(at) >= LOG_INTERVAL,
        };
        if due {
            let errors = std::mem::take(&mut log.1);
            log.0 = Some(now);
            drop(log);
            match pause {
                Some(p) => crate::log!(
                    "accept failed ({errors} since the last line): {e}; pausing accepts for {} ms",
                    p.as_millis()
                ),
                None => crate::log!("accept failed ({errors} since the last line): {e}"),
            }
        }
        pause
    }

    fn timed_out(&self, kind: Timeout) {
        match kind {
            Timeout::Header => &self.header_timeouts,
            Timeout::Idle => &self.idle_timeouts,
        }
        .fetch_add(1, Relaxed);
    }

    /// After a connection was admitted: track the peak.
    fn admitted(&self) {
        if self.limits.malloc_trim {
            self.peak.fetch_max(self.open(), Relaxed);
        }
    }

    /// After a connection closed: when a burst is over (the open
    /// connections fell to a quarter of the peak since the last trim, and
    /// by at least [`TRIM_BURST`]), or the last connection closed, give the
    /// freed heap back to the kernel with `malloc_trim`, at most once per
    /// [`TRIM_INTERVAL`]. glibc keeps freed memory in its per-thread arenas
    /// otherwise: a burst of 10,000 connections leaves about 200 MiB behind.
    /// The trim walks the whole heap (tens of ms after such a burst), so it
    /// runs on the runtime's blocking pool, not on a worker.
    fn closed(self: &Arc<Self>) {
        if !self.limits.malloc_trim {
            return;
        }
        let open = self.open();
        let peak = self.peak.load(Relaxed);
        let burst_over = open <= peak / 4 && peak - open >= TRIM_BURST;
        if !(burst_over || open == 0) {
            return;
        }
        let now = self.started.elapsed().as_millis() as u64 + 1;
        let last = self.last_trim.load(Relaxed);
        let due = last == 0 || now - last >= TRIM_INTERVAL.as_millis() as u64;
        if due
            && self
                .last_trim
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            self.peak.store(open, Relaxed);
            let guard = self.clone();
            tokio::task::spawn_blocking(move || {
                let start = Instant::now();
                crate::sys::malloc_trim();
                guard
                    .trim_ns
                    .fetch_add(start.elapsed().as_nanos() as u64, Relaxed);
                guard.trims.fetch_add(1, Relaxed);
            });
        }
    }
}

/// Accepts connections on `listener` until `shutdown` changes, then lets the
/// open ones finish (bounded by [`GRACE`]). Each admitted connection is
/// handed to `spawn` with its permit and the graceful-shutdown watcher.
pub async fn accept_loop<S>(
    listener: TcpListener,
    guard: &Guard,
    mut shutdown: watch::Receiver<bool>,
    mut spawn: S,
) where
    S: FnMut(TcpStream, OwnedSemaphorePermit, &GracefulShutdown),
{
    let graceful = GracefulShutdown::new();
    let mut backoff = MIN_BACKOFF;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff = MIN_BACKOFF;
                    match guard.permits.clone().try_acquire_owned() {
                        Ok(permit) => {
                            guard.admitted();
                            let _ = stream.set_nodelay(true);
                            spawn(stream, permit, &graceful);
                        }
                        Err(_) => guard.refuse(stream),
                    }
                }
                Err(e) => {
                    if let Some(pause) = guard.accept_failed(&e, &mut backoff) {
                        tokio::select! {
                            _ = tokio::time::sleep(pause) => {}
                            _ = shutdown.changed() => break,
                        }
                    }
                }
            },
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(GRACE, graceful.shutdown()).await;
}

/// Serves one connection: hyper HTTP/1.1 with keep-alive, the watchdog, and
/// the body drain; `handler` answers each request (whose body is gone). The
/// returned future owns everything it needs; it is `Send` when `handler` and
/// its futures are.
pub fn serve<H, Fut>(
    guard: Arc<Guard>,
    stream: TcpStream,
    permit: OwnedSemaphorePermit,
    graceful: &GracefulShutdown,
    handler: H,
) -> impl Future<Output = ()>
where
    H: Fn(Request<()>) -> Fut + Clone + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + 'static,
{
    let clock = Arc::new(Clock::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        clock: clock.clone(),
    });
    let service = {
        let guard = guard.clone();
        let clock = clock.clone();
        hyper::service::service_fn(move |req| {
            respond(guard.clone(), clock.clone(), handler.clone(), req)
        })
    };
    let limits = &guard.limits;
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout + limits.idle_timeout)
        // A request head is copied into the request's object graph, which
        // the collectors free by the object, not by the byte: hyper's
        // default (~400 KiB a head) let four clients sending large heads
        // make a worker keep ~1 GiB of garbage. 16 KiB, as nginx's largest
        // header buffers; a larger head gets 431.
        .max_buf_size(MAX_HEAD)
        .keep_alive(true)
        .half_close(true)
        .serve_connection(io, service);
    let conn = graceful.watch(conn);
    async move {
        tokio::select! {
            result = conn => {
                // Other errors are the client's (reset, malformed request
                // already answered with 400): nothing to do but close.
                if result.is_err_and(|e| e.is_timeout()) {
                    guard.timed_out(Timeout::Header);
                }
            }
            kind = clock.expired(&guard.limits) => guard.timed_out(kind),
        }
        drop(permit);
        guard.closed();
    }
}

/// One request: check its head, drain the body, run the handler; answer a
/// bad head or body with an error, and close after a body that could not be
/// drained.
async fn respond<H, Fut>(
    guard: Arc<Guard>,
    clock: Arc<Clock>,
    handler: H,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible>
where
    H: Fn(Request<()>) -> Fut,
    Fut: Future<Output = Response<Full<Bytes>>>,
{
    clock.begin_request();
    let (parts, body) = req.into_parts();
    let drained = if body.is_end_stream() {
        Drained::Whole
    } else if body.size_hint().lower() > DRAIN_LIMIT as u64 {
        // A `Content-Length` over the limit (hyper's exact size hint),
        // answered before reading any of it: with `Expect: 100-continue`,
        // the client then sends none (hyper sends `100 Continue` only once
        // the body is read).
        Drained::TooLarge
    } else {
        drain(body, guard.limits.header_timeout).await
    };
    let response = match (drained, head_error(&parts)) {
        (Drained::Whole, None) => handler(Request::from_parts(parts, ())).await,
        (Drained::Whole, Some((status, error))) => http_response(status, error_body(error)),
        (unread, _) => {
            guard.closed_after_body.fetch_add(1, Relaxed);
            let (status, error) = match unread {
                Drained::TooLarge => (413, "request body too large"),
                Drained::TooSlow => (408, "request body too slow"),
                _ => (400, "malformed request body"),
            };
            let mut response = http_response(status, error_body(error));
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            response
        }
    };
    clock.end_request();
    Ok(response)
}

/// What is wrong with a request's head that hyper lets through, if
/// anything, as a status and an error: its `Host` headers (HTTP/1.1 needs
/// exactly one, no request may have several, and its value must be a host
/// and an optional port: RFC 9112, 3.2) and its target (origin-form `/…` or
/// absolute-form `http://…`; `*` for `OPTIONS` and authority-form for
/// `CONNECT` are well formed, and refused with 405: RFC 9112, 3.2; anything
/// else is a 400).
fn head_error(parts: &hyper::http::request::Parts) -> Option<(u16, &'static str)> {
    let mut hosts = parts.headers.get_all(HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Some((400, "more than one Host header"));
    }
    match host {
        None if parts.version >= Version::HTTP_11 => return Some((400, "missing Host header")),
        Some(host) if !valid_host(host.as_bytes()) => return Some((400, "invalid Host header")),
        _ => {}
    }
    let uri = &parts.uri;
    let origin_form = uri.scheme().is_none() && uri.path().starts_with('/');
    let absolute_form = uri.scheme().is_some() && uri.authority().is_some();
    let server_wide = (parts.method == Method::OPTIONS && uri == "*")
        || (parts.method == Method::CONNECT && uri.scheme().is_none() && uri.authority().is_some());
    if origin_form || absolute_form {
        None
    } else if server_wide {
        Some((405, "method not allowed"))
    } else {
        Some((400, "invalid request target"))
    }
}

/// Whether `value` is a `Host` field value: `uri-host [ ":" port ]` (RFC 9110,
/// 7.2; RFC 3986, 3.2.2), or empty (a target without an authority).
fn valid_host(value: &[u8]) -> bool {
    let (host, port) = match value.strip_prefix(b"[") {
        // IP-literal: an IPv6 address or IPvFuture, in brackets.
        Some(rest) => match rest.iter().position(|&b| b == b']') {
            Some(end) => {
                let literal = &rest[..end];
                let ok = !literal.is_empty()
                    && literal.iter().all(|&b| {
                        b.is_ascii_hexdigit()
                            || b":.vV".contains(&b)
                            || unreserved(b)
                            || sub_delim(b)
                    });
                if !ok {
                    return false;
                }
                (&[][..], &rest[end + 1..])
            }
            None => return false,
        },
        None => match value.iter().position(|&b| b == b':') {
            Some(colon) => (&value[..colon], &value[colon..]),
            None => (value, &[][..]),
        },
    };
    let port_ok = match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    };
    // reg-name (an IPv4 address is one too): unreserved, pct-encoded,
    // sub-delims.
    let mut rest = host;
    while let Some((&b, tail)) = rest.split_first() {
        rest = if b == b'%' {
            match tail {
                [h, l, more @ ..] if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => more,
                _ => return false,
            }
        } else if unreserved(b) || sub_delim(b) {
            tail
        } else {
            return false;
        };
    }
    port_ok
}

/// RFC 3986's `unreserved`.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

/// RFC 3986's `sub-delims`.
fn sub_delim(b: u8) -> bool {
    b"!$&'()*+,;=".contains(&b)
}

fn error_body(error: &str) -> String {
    format!(r#"{{"error":"{error}"}}"#)
}

/// How [`drain`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drained {
    Whole,
    /// Larger than [`DRAIN_LIMIT`].
    TooLarge,
    /// Not read within the timeout.
    TooSlow,
    /// A broken chunked encoding, or the connection failed.
    Failed,
}

/// Reads and discards `body`, up to [`DRAIN_LIMIT`] bytes within `timeout`.
async fn drain(mut body: Incoming, timeout: Duration) -> Drained {
    let read = async {
        let mut len = 0;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Drained::Failed;
            };
            len += frame.data_ref().map_or(0, Bytes::len);
            if len > DRAIN_LIMIT {
                return Drained::TooLarge;
            }
        }
        Drained::Whole
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or(Drained::TooSlow)
}

/// Which timeout closed a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timeout {
    Header,
    Idle,
}

/// What the watchdog of one connection needs to know: times are
/// milliseconds since `base`. Written by [`Watched`] and the service, read by
/// [`Clock::expired`], all within the connection's task (atomics only
/// because the task may move between threads).
struct Clock {
    base: Instant,
    /// Last byte read or written.
    last_activity: AtomicU64,
    /// First byte of the request head being read, plus one; 0 if none.
    head_since: AtomicU64,
    /// A request is being handled.
    busy: AtomicBool,
    /// Bytes were read while a request was being handled.
    read_while_busy: AtomicBool,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            base: Instant::now(),
            last_activity: AtomicU64::new(0),
            // The first request's head is due from the start.
            head_since: AtomicU64::new(1),
            busy: AtomicBool::new(false),
            read_while_busy: AtomicBool::new(false),
        }
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_millis() as u64
    }

    fn on_read(&self) {
        let now = self.now();
        self.last_activity.store(now, Relaxed);
        if self.busy.load(Relaxed) {
            self.read_while_busy.store(true, Relaxed);
        } else if self.head_since.load(Relaxed) == 0 {
            self.head_since.store(now + 1, Relaxed);
        }
    }

    fn on_write(&self) {
        self.last_activity.store(self.now(), Relaxed);
    }

    fn begin_request(&self) {
        self.busy.store(true, Relaxed);
        self.read_while_busy.store(false, Relaxed);
        self.head_since.store(0, Relaxed);
    }

    fn end_request(&self) {
        let now = self.now();
        self.last_activity.store(now, Relaxed);
        self.busy.store(false, Relaxed);
        // What was read meanwhile may be the start of a pipelined head.
        let head = if self.read_while_busy.load(Relaxed) {
            now + 1
        } else {
            0
        };
        self.head_since.store(head, Relaxed);
    }

    /// When the connection times out if nothing changes, and which timeout
    /// that is.
    fn deadline(&self, limits: &Limits) -> (u64, Timeout) {
        let ms = |d: Duration| d.as_millis() as u64;
        let head = self.head_since.load(Relaxed);
        if head != 0 && !self.busy.load(Relaxed) {
            (head - 1 + ms(limits.header_timeout), Timeout::Header)
        } else {
            let last = self.last_activity.load(Relaxed);
            (last + ms(limits.idle_timeout), Timeout::Idle)
        }
    }

    /// Completes when a deadline passes with nothing having moved it.
    ///
    /// One timer per connection, re-armed when it fires, not on every
    /// request: a phase change can only set a deadline at least the
    /// shorter timeout after it happens, so waking at the current deadline
    /// or after the shorter timeout, whichever comes first, never misses
    /// one.
    async fn expired(&self, limits: &Limits) -> Timeout {
        let check = limits.header_timeout.min(limits.idle_timeout).as_millis() as u64;
        loop {
            let (deadline, kind) = self.deadline(limits);
            let now = self.now();
            if deadline <= now {
                return kind;
            }
            let at = deadline.min(now + check);
            tokio::time::sleep_until((self.base + Duration::from_millis(at)).into()).await;
        }
    }
}

/// A stream that stamps its connection's [`Clock`] on every read and write
/// that moves bytes.
struct Watched<T> {
    inner: T,
    clock: Arc<Clock>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.on_read();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.on_write();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.on_write();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: None,
            malloc_trim: false,
        }
    }

    #[test]
    fn refused_answer_is_well_framed() {
        let text = std::str::from_utf8(REFUSED).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(head.starts_with("HTTP/1.1 503 "));
    }

    #[test]
    fn default_cap_leaves_a_reserve_of_descriptors() {
        assert_eq!(Guard::new(limits(), (1024, 4096), 2).max_connections, 944);
        // Per thread too: 16 per-thread workers hold about 90 descriptors.
        assert_eq!(Guard::new(limits(), (1024, 4096), 16).max_connections, 832);
        assert_eq!(Guard::new(limits(), (10, 10), 2).max_connections, 1);
        assert_eq!(Guard::new(limits(), (1024, 1024), 200).max_connections, 1);
        let mut l = limits();
        l.max_connections = Some(5);
        assert_eq!(Guard::new(l, (1024, 4096), 2).max_connections, 5);
    }

    #[test]
    fn host_values_are_a_host_and_an_optional_port() {
        for good in [
            &b""[..],
            b"test",
            b"test:8080",
            b"test:",
            b"127.0.0.1:80",
            b"[::1]",
            b"[::1]:8080",
            b"[v1.fe80::a+en1]",
            b"a%20b",
            b"sub.example.com",
            b"!$&'()*+,;=",
        ] {
            assert!(valid_host(good), "{:?}", String::from_utf8_lossy(good));
        }
        for bad in [
            &b"a b"[..],
            b"a/b",
            b"user@host",
            b"test:8o",
            b"test:80:81",
            b"[::1",
            b"[]",
            b"[::1]x",
            b"a%2",
            b"a%zz",
            b"\xff\xfe",
        ] {
            assert!(!valid_host(bad), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn clock_phases_pick_the_right_timeout() {
        let l = limits();
        let c = Clock::new();
        // A new connection waits for its first head.
        assert_eq!(c.deadline(&l), (10_000, Timeout::Header));
        c.begin_request();
        assert_eq!(c.deadline(&l).1, Timeout::Idle);
        c.end_request();
        // Between requests: idle until a byte arrives, then a head is due.
        let (at, kind) = c.deadline(&l);
        assert_eq!(kind, Timeout::Idle);
        assert!(at >= 60_000);
        c.on_read();
        assert_eq!(c.deadline(&l).1, Timeout::Header);
        // Bytes read during a request start the next head's clock at its end.
        c.begin_request();
        c.on_read();
        c.end_request();
        assert_eq!(c.deadline(&l).1, Timeout::Header);
    }

    #[test]
    fn accept_errors_back_off_only_when_out_of_resources() {
        let guard = Guard::new(limits(), (1024, 1024), 2);
        let mut backoff = MIN_BACKOFF;
        let emfile = io::Error::from_raw_os_error(libc::EMFILE);
        assert_eq!(
            guard.accept_failed(&emfile, &mut backoff),
            Some(MIN_BACKOFF)
        );
        assert_eq!(
            guard.accept_failed(&emfile, &mut backoff),
            Some(MIN_BACKOFF * 2)
        );
        for _ in 0..20 {
            guard.accept_failed(&emfile, &mut backoff);
        }
        assert_eq!(backoff, MAX_BACKOFF);
        let aborted = io::Error::from_raw_os_error(libc::ECONNABORTED);
        assert_eq!(guard.accept_failed(&aborted, &mut backoff), None);
        assert_eq!(guard.stats().accept_errors, 23);
    }
}
