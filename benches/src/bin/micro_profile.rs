//! The micro-operations of the core issue's goals, timed interleaved: each
//! round times every operation on every pointer once, and the figure kept
//! is the minimum over the rounds (noise on a shared machine only ever adds
//! time), with the median beside it. Criterion times one pointer after
//! another, so on a noisy host a sub-nanosecond operation's ratio moves by
//! more than the difference it is meant to show.
//!
//! `cargo run --release -p benches --bin micro_profile [rounds] [ops per
//! measurement]` (defaults 30 and 10,000,000). Pointers: `std::rc::Rc`,
//! `recycler::Gc`, `recycler::Rc`; the same loops as criterion's `micro`
//! group (`benches::workloads::micro`).

use std::time::Instant;

use benches::heap::Heap;
use benches::ptr::recycler_gc::RecyclerGc;
use benches::ptr::recycler_rc::RecyclerRc;
use benches::ptr::std_rc::StdRc;
use benches::workloads::micro;

const OPS: [&str; 4] = [
    "clone+drop u64",
    "clone+drop String",
    "clone+drop candidate",
    "new+drop u64",
];

/// Nanoseconds per operation of one measurement of operation `op` on `H`.
fn measure<H: Heap>(op: usize, n: u64) -> f64 {
    let start;
    match op {
        0 => {
            let x = H::leaf(7);
            start = Instant::now();
            micro::clone_drop(&x, n);
        }
        1 => {
            let x = H::text("a small string".to_string());
            start = Instant::now();
            micro::clone_drop(&x, n);
        }
        2 => {
            let x = H::pair(None, None);
            start = Instant::now();
            micro::clone_drop(&x, n);
        }
        _ => {
            start = Instant::now();
            micro::new_drop::<H>(n);
        }
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

fn arg(i: usize, default: u64) -> u64 {
    match std::env::args().nth(i) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("usage: micro_profile [rounds] [ops per measurement]");
            std::process::exit(2)
        }),
    }
}

fn main() {
    let rounds = arg(1, 30).max(1) as usize;
    let n = arg(2, 10_000_000).max(1);
    RecyclerGc::<false>::prepare();
    let names = ["std-rc", "recycler-gc", "recycler-rc"];
    // times[op][pointer] = one figure per round.
    let mut times = vec![vec![Vec::with_capacity(rounds); names.len()]; OPS.len()];
    for _ in 0..rounds {
        for (op, row) in times.iter_mut().enumerate() {
            row[0].push(measure::<StdRc>(op, n));
            row[1].push(measure::<RecyclerGc<false>>(op, n));
            row[2].push(measure::<RecyclerRc>(op, n));
        }
    }
    println!("{rounds} interleaved rounds of {n} operations; ns per operation: min (median), ratio of the minima to std-rc");
    for (op, row) in times.iter_mut().enumerate() {
        let mins: Vec<f64> = row
            .iter_mut()
            .map(|t| {
                t.sort_by(f64::total_cmp);
                t[0]
            })
            .collect();
        let cells: Vec<String> = row
            .iter()
            .zip(&mins)
            .zip(names)
            .map(|((t, min), name)| {
                format!(
                    "{name} {min:.3} ({:.3}) {:.2}x",
                    t[t.len() / 2],
                    min / mins[0]
                )
            })
            .collect();
        println!("{:<22} {}", OPS[op], cells.join(" | "));
    }
}
