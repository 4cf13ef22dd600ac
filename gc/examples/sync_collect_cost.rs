//! Cost of one `recycler::sync` collection per freed object.
//!
//! Builds `--cycles` garbage 2-cycles (each pair of nodes points at the other
//! through a `Mutex`), optionally each also pointing at the head of a live
//! chain of `--chain` nodes, then times one `sync::collect()` and prints
//! nanoseconds per freed and per traced object. Run in release mode:
//! `cargo run --release -p recycler --example sync_collect_cost -- 400000 10000`.

use recycler::sync::{collect, set_policy, stats, Gc};
use recycler::Policy;
use std::sync::Mutex;
use std::time::Instant;

#[derive(recycler::Trace)]
struct Node {
    next: Mutex<Option<Gc<Node>>>,
    live: Option<Gc<Node>>,
}

fn node(live: Option<Gc<Node>>) -> Gc<Node> {
    Gc::new(Node {
        next: Mutex::new(None),
        live,
    })
}

fn parse(arg: Option<String>, default: usize, name: &str) -> usize {
    match arg {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!(
                "usage: sync_collect_cost [CYCLES] [CHAIN]  ({name} must be a number, got {s:?})"
            );
            std::process::exit(2)
        }),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let cycles = parse(args.next(), 400_000, "CYCLES");
    let chain_len = parse(args.next(), 0, "CHAIN");
    set_policy(Policy::Manual);

    let mut head: Option<Gc<Node>> = None;
    for _ in 0..chain_len {
        let n = node(None);
        *n.next.lock().unwrap() = head.take();
        head = Some(n);
    }
    for _ in 0..cycles {
        let a = node(head.clone());
        let b = node(head.clone());
        *a.next.lock().unwrap() = Some(b.clone());
        *b.next.lock().unwrap() = Some(a);
    }
    let before = stats();
    let start = Instant::now();
    collect();
    let elapsed = start.elapsed();
    let after = stats();
    let freed = after.freed_by_collector - before.freed_by_collector;
    let traced = after.nodes_traced - before.nodes_traced;
    println!(
        "cycles {cycles} chain {chain_len}: collect {:.1} ms, freed {freed}, traced {traced}, \
         {:.3} us/freed, {:.3} us/traced, collections {}",
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_secs_f64() * 1e6 / freed.max(1) as f64,
        elapsed.as_secs_f64() * 1e6 / traced.max(1) as f64,
        after.full_collections - before.full_collections,
    );
    assert_eq!(freed as usize, 2 * cycles, "every cycle must be freed");
    drop(head);
}
