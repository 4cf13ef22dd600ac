//! How far apart the host has put two CPUs of this machine: the time for a
//! cache line to go from CPU `a` to CPU `b` and back, with one thread pinned
//! to each, passing a counter through one atomic.
//!
//! On the 2-vCPU KVM guests of the results, the host moves the vCPUs: a
//! round trip reads either about 80–130 ns (the two vCPUs share a
//! last-level cache) or 340–440 ns (they do not), switching every few
//! seconds to minutes. Every shared cache line of a multi-threaded server
//! pays that difference (the work-stealing server's *slow phases*, see
//! `docs/results-history.md`, thirty-first session); run this before and
//! after a measurement to know which placement it had.
//!
//! `cargo run --release -p benches --bin pingpong [round trips] [cpu a]
//! [cpu b]` (defaults 200,000, 0 and 1); prints the nanoseconds per round
//! trip.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Release};
use std::time::Instant;

/// The line the two threads pass back and forth, alone in its cache line.
#[repr(align(128))]
struct Line(AtomicU64);

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) -> std::io::Result<()> {
    // SAFETY: `cpu_set_t` is plain data, for which all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid `cpu_set_t`; `CPU_SET` checks `cpu` against its size.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is initialised and its size is passed with it; pid 0 is
    // the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Waits until `line` holds `value`, loading it back to back (no `pause`:
/// the waiting core keeps asking for the line, as a contended lock's
/// waiters do).
#[inline]
fn wait_for(line: &Line, value: u64) {
    while line.0.load(Acquire) != value {}
}

/// Nanoseconds per round trip of `trips` round trips between `a` and `b`.
fn measure(trips: u64, a: usize, b: usize) -> std::io::Result<f64> {
    let line = Line(AtomicU64::new(0));
    std::thread::scope(|s| {
        let pong = s.spawn(|| {
            pin(b)?;
            for i in 0..trips {
                wait_for(&line, 2 * i + 1);
                line.0.store(2 * i + 2, Release);
            }
            Ok::<(), std::io::Error>(())
        });
        pin(a)?;
        let start = Instant::now();
        for i in 0..trips {
            line.0.store(2 * i + 1, Release);
            wait_for(&line, 2 * i + 2);
        }
        let elapsed = start.elapsed();
        pong.join().expect("the pong thread does not panic")?;
        Ok(elapsed.as_nanos() as f64 / trips as f64)
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed: Result<Vec<usize>, _> = args.iter().map(|a| a.parse::<usize>()).collect();
    let (trips, a, b) = match parsed.as_deref() {
        Ok([]) => (200_000, 0, 1),
        Ok([t]) => (*t, 0, 1),
        Ok([t, a, b]) => (*t, *a, *b),
        _ => {
            eprintln!("usage: pingpong [round trips] [cpu a] [cpu b]");
            return ExitCode::from(2);
        }
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if trips == 0 || a == b || a >= cpus || b >= cpus {
        eprintln!(
            "pingpong: need at least one round trip and two different CPUs below {cpus} \
             (usage: pingpong [round trips] [cpu a] [cpu b])"
        );
        return ExitCode::from(2);
    }
    match measure(trips as u64, a, b) {
        Ok(ns) => {
            println!("{ns:.1} ns per round trip between CPU {a} and CPU {b}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pingpong: cannot pin a thread: {e}");
            ExitCode::FAILURE
        }
    }
}
