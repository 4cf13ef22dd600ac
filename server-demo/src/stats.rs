//! The `/stats` document: each worker thread's collector statistics
//! (`recycler::stats()` is per thread, so every worker answers for itself
//! over a channel) or, on the work-stealing runtime, the process-wide
//! `recycler::sync::stats()`, plus the process's RSS and CPU time and the
//! connection counters of [`crate::conn::Guard`].

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::mode::{Mode, Runtime};

/// One worker thread's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadStats {
    /// Worker index.
    pub thread: usize,
    /// Requests answered by this thread.
    pub requests: u64,
    /// Request futures registered with this thread's dispatcher right now.
    pub in_flight: u64,
    /// Objects allocated and not freed (leaked ones included).
    pub live: u64,
    /// Objects freed because their count reached zero.
    pub freed_by_rc: u64,
    /// Objects freed by the cycle collector.
    pub freed_by_collector: u64,
    /// Minor collections.
    pub minor_collections: u64,
    /// Full collections.
    pub full_collections: u64,
    /// Possible roots waiting in the buffer.
    pub roots_buffered: u64,
    /// Objects traced by all collections.
    pub nodes_traced: u64,
    /// Objects promoted to the old generation.
    pub promoted: u64,
    /// Old objects alive.
    pub old_objects: u64,
    /// Wall-clock time in collections, in seconds (grows while the
    /// collecting thread is preempted).
    pub total_pause_s: f64,
    /// Longest collection, wall-clock, in seconds.
    pub max_pause_s: f64,
    /// CPU time the collecting threads spent in collections, in seconds
    /// (`recycler::Stats::total_pause_cpu`).
    #[serde(default)]
    pub total_pause_cpu_s: f64,
    /// The `Policy::Nim16` threshold in force on this thread
    /// (`recycler::nim16_threshold()`: its own, or the one shared by every
    /// thread under `orc-nim16-faithful`'s `shared-threshold`); meaningful
    /// for the `orc-nim16` modes only, 0 on the work-stealing runtime. In
    /// `total`, the largest.
    #[serde(default)]
    pub nim16_threshold: u64,
}

impl ThreadStats {
    /// The calling thread's statistics (single-threaded pointers).
    pub fn current(thread: usize, requests: u64, in_flight: u64) -> Self {
        ThreadStats {
            nim16_threshold: recycler::nim16_threshold() as u64,
            ..Self::from_stats(thread, requests, in_flight, recycler::stats())
        }
    }

    /// The process-wide statistics of the thread-safe pointers
    /// (`recycler::sync::stats()`), reported as thread 0.
    pub fn process_wide(requests: u64, in_flight: u64) -> Self {
        Self::from_stats(0, requests, in_flight, recycler::sync::stats())
    }

    fn from_stats(thread: usize, requests: u64, in_flight: u64, s: recycler::Stats) -> Self {
        ThreadStats {
            thread,
            requests,
            in_flight,
            live: s.live,
            freed_by_rc: s.freed_by_rc,
            freed_by_collector: s.freed_by_collector,
            minor_collections: s.minor_collections,
            full_collections: s.full_collections,
            roots_buffered: s.roots_buffered,
            nodes_traced: s.nodes_traced,
            promoted: s.promoted,
            old_objects: s.old_objects,
            total_pause_s: s.total_pause.as_secs_f64(),
            max_pause_s: s.max_pause.as_secs_f64(),
            total_pause_cpu_s: s.total_pause_cpu.as_secs_f64(),
            nim16_threshold: 0,
        }
    }

    /// Minor plus full collections.
    pub fn collections(&self) -> u64 {
        self.minor_collections + self.full_collections
    }

    /// Sums counters over threads (maximum for `max_pause_s`).
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a ThreadStats>) -> ThreadStats {
        let mut t = ThreadStats::default();
        for s in all {
            t.requests += s.requests;
            t.in_flight += s.in_flight;
            t.live += s.live;
            t.freed_by_rc += s.freed_by_rc;
            t.freed_by_collector += s.freed_by_collector;
            t.minor_collections += s.minor_collections;
            t.full_collections += s.full_collections;
            t.roots_buffered += s.roots_buffered;
            t.nodes_traced += s.nodes_traced;
            t.promoted += s.promoted;
            t.old_objects += s.old_objects;
            t.total_pause_s += s.total_pause_s;
            t.max_pause_s = t.max_pause_s.max(s.max_pause_s);
            t.total_pause_cpu_s += s.total_pause_cpu_s;
            t.nim16_threshold = t.nim16_threshold.max(s.nim16_threshold);
        }
        t
    }
}

/// The body of `GET /stats`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    /// The `--mm` mode.
    pub mode: Mode,
    /// The `--runtime`.
    #[serde(default)]
    pub runtime: Runtime,
    /// The pointer type of the request path.
    pub pointer: String,
    /// The collector policy of the workers (`null` for `arc`).
    pub policy: Option<String>,
    /// Nodes in each thread's application document.
    pub document_nodes: usize,
    /// The process's allocator (`SERVER_DEMO_ALLOCATOR`).
    #[serde(default)]
    pub allocator: crate::locked_alloc::Allocator,
    /// Per worker thread (per-thread runtime); empty for the work-stealing
    /// runtime, whose thread-safe collector keeps process-wide statistics
    /// only.
    pub threads: Vec<ThreadStats>,
    /// Sums over threads (per-thread runtime), or the process-wide
    /// `recycler::sync::stats()` (work-stealing runtime).
    pub total: ThreadStats,
    /// Resident set size of the process, bytes.
    pub rss_bytes: u64,
    /// CPU time of the process (user + system), seconds.
    pub cpu_s: f64,
    /// The user-space part of `cpu_s`, seconds (the rest is the kernel's:
    /// sockets, epoll, waking other threads).
    #[serde(default)]
    pub user_cpu_s: f64,
    /// Time since the server started, seconds.
    pub uptime_s: f64,
    /// Connection limits and what hostile clients ran into.
    #[serde(default)]
    pub connections: ConnStats,
    /// The global allocation lock of `orc-nim16-faithful`'s `locked-alloc`
    /// defect: acquisitions and contended acquisitions since the start
    /// (zero in every other mode).
    #[serde(default)]
    pub heap_lock: crate::locked_alloc::LockCounts,
    /// glibc's heap (zero with mimalloc).
    #[serde(default)]
    pub heap: crate::sys::HeapStats,
}

/// `cpu_s` seconds of server CPU, of which `user_cpu_s` in user space, per
/// request of `requests`, in µs: (user space, kernel). The user part is
/// kept within the total (both come from one `getrusage`, but a results
/// file may have been edited); zero if nothing was answered.
pub fn split_per_request(cpu_s: f64, user_cpu_s: f64, requests: u64) -> (f64, f64) {
    if requests == 0 {
        return (0.0, 0.0);
    }
    let cpu = cpu_s.max(0.0);
    let user = user_cpu_s.max(0.0).min(cpu);
    let per = |s: f64| s * 1e6 / requests as f64;
    (per(user), per(cpu - user))
}

/// The connection side of `/stats` (see [`crate::conn`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnStats {
    /// `RLIMIT_NOFILE` soft limit after raising it to the hard limit.
    pub nofile_soft: u64,
    /// `RLIMIT_NOFILE` hard limit.
    pub nofile_hard: u64,
    /// The connection cap (`--max-connections`).
    pub max_connections: u64,
    /// Connections open now.
    pub open: u64,
    /// Connections refused (503 and close) because the cap was reached.
    pub refused_over_cap: u64,
    /// Failed `accept` calls (out of descriptors, aborted connections).
    pub accept_errors: u64,
    /// Connections closed because a request head took too long.
    pub header_timeouts: u64,
    /// Connections closed after `--idle-timeout` without traffic.
    pub idle_timeouts: u64,
    /// Responses sent with `Connection: close` because the request body
    /// was too large or too slow to drain.
    pub closed_after_body: u64,
    /// `malloc_trim` calls after bursts of connections.
    pub malloc_trims: u64,
    /// Time spent in them, seconds.
    pub malloc_trim_s: f64,
    /// Log lines lost: stderr or stdout could not be written, or the log
    /// queue was full (a stderr nobody reads).
    pub log_write_errors: u64,
    /// `--header-timeout`, seconds.
    pub header_timeout_s: f64,
    /// `--idle-timeout`, seconds.
    pub idle_timeout_s: f64,
}

/// A question to one worker: "send me your statistics".
pub type StatsQuery = oneshot::Sender<ThreadStats>;

/// Asks every worker for its statistics; a worker that does not answer
/// within `timeout` (it is shutting down) is left out.
pub async fn gather(
    peers: &[mpsc::UnboundedSender<StatsQuery>],
    timeout: Duration,
) -> Vec<ThreadStats> {
    let mut answers = Vec::with_capacity(peers.len());
    for peer in peers {
        let (tx, rx) = oneshot::channel();
        if peer.send(tx).is_ok() {
            answers.push(rx);
        }
    }
    let mut threads = Vec::with_capacity(answers.len());
    for rx in answers {
        if let Ok(Ok(s)) = tokio::time::timeout(timeout, rx).await {
            threads.push(s);
        }
    }
    threads.sort_by_key(|s| s.thread);
    threads
}
