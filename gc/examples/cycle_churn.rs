//! Creates and drops `N` small cycles (default ten million) under the default
//! policy and reports the peak of live objects and of the process's RSS:
//! memory awaiting collection stays bounded.
//!
//! ```sh
//! cargo run --release -p recycler --example cycle_churn -- 10000000
//! ```
use std::cell::RefCell;

use recycler::{Gc, Trace};

#[derive(Trace, Default)]
struct Node {
    next: RefCell<Option<Gc<Node>>>,
    payload: [u64; 4],
}

/// Resident set size in KiB, from /proc (Linux); 0 elsewhere.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let n: u64 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 10_000_000,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("usage: cycle_churn [NUMBER_OF_CYCLES]");
            std::process::exit(2);
        }
    };
    let start = std::time::Instant::now();
    let (mut max_live, mut max_rss) = (0, 0);
    for i in 0..n {
        let a = Gc::new(Node::default());
        let b = Gc::new(Node::default());
        *a.next.borrow_mut() = Some(b.clone());
        *b.next.borrow_mut() = Some(a.clone());
        // A prime stride, so samples fall at every phase of the trigger.
        if i % 997 == 0 {
            max_live = max_live.max(recycler::stats().live);
        }
        if i % (1 << 20) == 0 {
            max_rss = max_rss.max(rss_kib());
        }
    }
    let stats = recycler::stats();
    println!(
        "{n} cycles in {:.2?}: peak live objects {max_live}, peak RSS {} MiB, final RSS {} MiB",
        start.elapsed(),
        max_rss / 1024,
        rss_kib() / 1024
    );
    println!(
        "freed by the collector {}, minor collections {}, full collections {}, max pause {:?}",
        stats.freed_by_collector, stats.minor_collections, stats.full_collections, stats.max_pause
    );
}
