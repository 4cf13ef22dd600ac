//! The managed part of a request alone, without HTTP: two threads (the
//! per-thread runtime's two workers) each build and drop request graphs with
//! `graph::handle` on their own hubs, for each `--mm` mode but the leaking
//! `arc` (whose memory would grow by gigabytes here) and for
//! `orc-nim16` with each Nim 1.6.12 defect. In the server, hyper, tokio and
//! the kernel's sockets take most of a request's CPU and dilute what the
//! memory manager costs; here nothing else runs, so the defects' costs show
//! undiluted. Reported: CPU time per request (both threads' CPU time, summed,
//! over the requests they answered), the counterpart of compare's server
//! CPU per request, and less sensitive than wall time to other jobs.
//! `SERVER_DEMO_ALLOCATOR=mimalloc cargo bench -p server-demo --bench
//! request_graph` runs it on mimalloc instead of glibc's malloc (the
//! collecting modes free in batches, which glibc's small caches absorb badly).

// The server's own modules, unchanged; their unit tests are stripped from
// this harness-less target.
#[path = "../src/family.rs"]
#[allow(dead_code, unused_imports)]
mod family;
#[path = "../src/graph.rs"]
#[allow(dead_code, unused_imports)]
mod graph;
#[path = "../src/hubs.rs"]
#[allow(dead_code, unused_imports)]
mod hubs;
#[path = "../src/jsondoc.rs"]
#[allow(dead_code, unused_imports)]
mod jsondoc;
#[path = "../src/locked_alloc.rs"]
#[allow(dead_code, unused_imports)]
mod locked_alloc;

use std::sync::mpsc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use family::{Family, GcAllCyclicFamily, GcFamily, WeakRcFamily};
use hubs::Hubs;
use recycler::Policy;

/// The allocator of the server binary, so that `locked-alloc` can be
/// switched on.
#[global_allocator]
static GLOBAL: locked_alloc::LockedAlloc = locked_alloc::LockedAlloc;

const HEADERS: [(&str, &str); 1] = [("host", "127.0.0.1:8070")];

/// CPU time of the calling thread.
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes a `timespec` into the pointer, which
    // points to one; the clock id is valid on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Two worker threads with their own hubs, waiting for batches.
struct Pair {
    batches: Vec<mpsc::Sender<u64>>,
    done: mpsc::Receiver<Duration>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Pair {
    fn start<F: Family>(policy: Option<Policy>, shared_threshold: bool) -> Pair {
        let (done_tx, done) = mpsc::channel();
        let mut batches = Vec::new();
        let mut threads = Vec::new();
        for _ in 0..2 {
            let (tx, rx) = mpsc::channel::<u64>();
            let done_tx = done_tx.clone();
            batches.push(tx);
            threads.push(std::thread::spawn(move || {
                if let Some(p) = policy {
                    recycler::set_policy(p);
                }
                recycler::set_nim16_shared_threshold(shared_threshold);
                let hubs = Hubs::<F>::new();
                while let Ok(n) = rx.recv() {
                    let start = thread_cpu_time();
                    for _ in 0..n {
                        let r = graph::handle(&hubs, "GET", "/", HEADERS);
                        assert_eq!(r.status, 200);
                    }
                    done_tx.send(thread_cpu_time() - start).unwrap();
                }
                drop(hubs);
                recycler::collect();
            }));
        }
        Pair {
            batches,
            done,
            threads,
        }
    }

    /// Runs `requests` requests, half on each thread; returns the CPU time
    /// both threads spent on them.
    fn run(&self, requests: u64) -> Duration {
        for b in &self.batches {
            b.send(requests.div_ceil(2)).unwrap();
        }
        (0..2).map(|_| self.done.recv().unwrap()).sum()
    }

    fn stop(self) {
        drop(self.batches);
        for t in self.threads {
            t.join().unwrap();
        }
    }
}

fn bench(c: &mut Criterion, name: &str, pair: Pair, locked: bool) {
    locked_alloc::set_locked(locked);
    pair.run(20_000); // past the first thresholds
    c.bench_function(name, |b| b.iter_custom(|iters| pair.run(iters)));
    locked_alloc::set_locked(false);
    pair.stop();
}

/// A benchmark: its name, how to start its workers, whether the allocator
/// lock is on.
type Variant = (&'static str, fn() -> Pair, bool);

fn request_graph(c: &mut Criterion) {
    const NIM: Option<Policy> = Some(Policy::Nim16);
    let variants: [Variant; 7] = [
        (
            "arc-weak",
            || Pair::start::<WeakRcFamily>(None, false),
            false,
        ),
        (
            "orc",
            || Pair::start::<GcFamily>(Some(Policy::Adaptive), false),
            false,
        ),
        ("orc-nim16", || Pair::start::<GcFamily>(NIM, false), false),
        (
            "orc-nim16+all-cyclic",
            || Pair::start::<GcAllCyclicFamily>(NIM, false),
            false,
        ),
        (
            "orc-nim16+shared-threshold",
            || Pair::start::<GcFamily>(NIM, true),
            false,
        ),
        (
            "orc-nim16+locked-alloc",
            || Pair::start::<GcFamily>(NIM, false),
            true,
        ),
        (
            "orc-nim16-faithful",
            || Pair::start::<GcAllCyclicFamily>(NIM, true),
            true,
        ),
    ];
    for (name, start, locked) in variants {
        bench(c, &format!("request_graph/{name}"), start(), locked);
    }
}

criterion_group!(benches, request_graph);
criterion_main!(benches);
