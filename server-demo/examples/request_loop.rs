//! A fixed number of requests through `graph::handle` on one thread, without
//! HTTP, for instruction counts (`valgrind --tool=callgrind`) and profiles:
//!
//! ```sh
//! cargo build --release -p server-demo --example request_loop
//! valgrind --tool=callgrind target/release/examples/request_loop orc 20000
//! ```
//!
//! Modes: `arc-weak`, `orc`, `orc-nim16`, and `arc-weak-ws`, `orc-ws` (the
//! `recycler::sync` pointers of the work-stealing runtime), `arc-ws` (every
//! request leaks: `orc-ws`'s operations with no collector, so `orc-ws` minus
//! `arc-ws` is what collecting costs) and `orc-ws-manual` (`sync::Gc` that
//! buffers roots and never collects: the mutator's side of `orc-ws`; both
//! leak, so keep the count small); an optional third argument sets
//! `AdaptiveConfig::min_roots`. Between requests it allocates and
//! frees a few buffers of the sizes hyper uses for a request (the read
//! buffer, the header map, the response), so that the allocator sees the
//! server's interleaving rather than the request graph alone. Prints the
//! collector's statistics at the end.

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

use std::hint::black_box;

use family::{Family, GcFamily, SyncGcFamily, SyncRcFamily, SyncWeakRcFamily, WeakRcFamily};
use hubs::Hubs;
use recycler::Policy;

const HEADERS: [(&str, &str); 1] = [("host", "127.0.0.1:8070")];

fn run<F: Family>(requests: u64) {
    let hubs = Hubs::<F>::new();
    for _ in 0..requests {
        // What hyper allocates around a request (sizes counted in the
        // server): its 8 KiB read buffer, which makes glibc consolidate
        // its fastbins, a header buffer and a header map.
        let head = black_box(Vec::<u8>::with_capacity(8192));
        let buf = black_box(Vec::<u8>::with_capacity(600));
        let map = black_box(Vec::<u64>::with_capacity(12));
        let r = graph::handle(&hubs, "GET", "/", HEADERS);
        assert_eq!(r.status, 200);
        let out = black_box(format!("HTTP/1.1 200 OK\r\n\r\n{}", r.body));
        drop((head, buf, map, out));
    }
    // The family the mode's pointers belong to: the per-thread collector's
    // statistics, or `recycler::sync`'s.
    let (family, s) = if F::SHARED_HUBS {
        ("sync", recycler::sync::stats())
    } else {
        ("per-thread", recycler::stats())
    };
    println!(
        "requests {requests} ({family} collector) live {} freed_by_rc {} freed_by_collector {} minor {} full {} traced {} promoted {} old {} pause_cpu {:?}",
        s.live,
        s.freed_by_rc,
        s.freed_by_collector,
        s.minor_collections,
        s.full_collections,
        s.nodes_traced,
        s.promoted,
        s.old_objects,
        s.total_pause_cpu
    );
    drop(hubs);
    recycler::collect();
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "orc".to_owned());
    let requests: u64 = args.next().map_or(20_000, |n| n.parse().expect("a count"));
    if let Some(n) = args.next() {
        let config = recycler::AdaptiveConfig::default().min_roots(n.parse().expect("min_roots"));
        recycler::set_adaptive_config(config);
    }
    match mode.as_str() {
        "arc-weak" => run::<WeakRcFamily>(requests),
        "orc" => run::<GcFamily>(requests),
        "orc-nim16" => {
            recycler::set_policy(Policy::Nim16);
            run::<GcFamily>(requests)
        }
        // The work-stealing runtime's pointers (`recycler::sync`), on one
        // thread: the mutator's and the collector's instructions without the
        // scheduler's.
        "arc-weak-ws" => run::<SyncWeakRcFamily>(requests),
        // Every request leaks (the same operations as `orc-ws`, no
        // collector): the mutator's share of `orc-ws`, plus page faults.
        "arc-ws" => run::<SyncRcFamily>(requests),
        // `sync::Gc` with the Manual policy: buffers roots, never collects.
        "orc-ws-manual" => {
            recycler::sync::set_policy(Policy::Manual);
            run::<SyncGcFamily>(requests)
        }
        "orc-ws" => {
            run::<SyncGcFamily>(requests);
            recycler::sync::collect();
            let s = recycler::sync::stats();
            println!(
                "sync: freed_by_collector {} collections {} traced {}",
                s.freed_by_collector,
                s.collections(),
                s.nodes_traced
            );
        }
        other => panic!("unknown mode {other}"),
    }
}
