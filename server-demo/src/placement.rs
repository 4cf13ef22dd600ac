//! How far apart the host has put two CPUs of this machine: the time for a
//! cache line to go from CPU `a` to CPU `b` and back, one thread pinned to
//! each passing a counter through one atomic (`server-demo pingpong`, and
//! `ab` around every pair).
//!
//! On the 2-vCPU KVM guests of the results the host moves the vCPUs: a round
//! trip reads either about 75–135 ns (the two share a last-level cache) or
//! 340–440 ns (they do not), switching every few seconds to minutes. Every
//! cache line the two workers of a server share pays the difference, and a
//! collecting server shares more of them than careful ARC (thirty-first
//! session in `docs/results-history.md`: orc/ws against careful ARC, `ab`'s
//! pairs near 1.107×, apart 1.169×). So `ab` measures the placement around
//! each pair and splits its verdict by it ([`split`]).

use std::io::ErrorKind;
use std::sync::atomic::{
    AtomicU32, AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Release,
};
use std::time::Instant;

use clap::Args;

/// `server-demo pingpong`'s flags.
#[derive(Args, Debug, Clone)]
pub struct PingpongArgs {
    /// Round trips to time.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub trips: u64,
    /// One CPU.
    #[arg(long, default_value_t = 0)]
    pub a: usize,
    /// The other CPU.
    #[arg(long, default_value_t = 1)]
    pub b: usize,
}

/// Round trips `ab` times around each pair (2–8 ms on the guests above).
pub const AB_TRIPS: u64 = 20_000;

/// Two groups of round trips are two placements only if the slower group's
/// geometric mean is at least this many times the faster's (the guests
/// above: 4–5×).
const SEPARATION: f64 = 2.0;

/// The line the two threads pass back and forth, alone in its cache lines
/// (adjacent-line prefetch included).
#[repr(align(128))]
struct Line(AtomicU64);

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) -> std::io::Result<()> {
    // SAFETY: `cpu_set_t` is plain data, for which all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of_val(&set) {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            format!("CPU {cpu} is beyond what a cpu_set_t holds"),
        ));
    }
    // SAFETY: `set` is a valid `cpu_set_t` and `cpu` is within it.
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
/// the waiting core keeps asking for the line, as a contended lock's waiters
/// do).
#[inline]
fn wait_for(line: &Line, value: u64) {
    while line.0.load(Acquire) != value {}
}

/// Nanoseconds per round trip of a cache line between CPUs `a` and `b`,
/// over `trips` round trips, on two new threads pinned to them (the calling
/// thread keeps its own affinity).
pub fn round_trip_ns(trips: u64, a: usize, b: usize) -> std::io::Result<f64> {
    if trips == 0 || a == b {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "need at least one round trip between two different CPUs",
        ));
    }
    let line = Line(AtomicU64::new(0));
    let pinned = AtomicU32::new(0);
    std::thread::scope(|s| {
        let pong = s.spawn(|| {
            pinned_with(&pinned, PONG, b)?;
            for i in 0..trips {
                wait_for(&line, 2 * i + 1);
                line.0.store(2 * i + 2, Release);
            }
            Ok(())
        });
        let ping = s.spawn(|| {
            pinned_with(&pinned, PING, a)?;
            let start = Instant::now();
            for i in 0..trips {
                line.0.store(2 * i + 1, Release);
                wait_for(&line, 2 * i + 2);
            }
            Ok(start.elapsed().as_nanos() as f64 / trips as f64)
        });
        let pong: std::io::Result<()> = pong.join().expect("the pong thread does not panic");
        let ping: std::io::Result<f64> = ping.join().expect("the ping thread does not panic");
        match (pong, ping) {
            (Ok(()), ping) => ping,
            // The thread whose own pinning failed says why.
            (Err(e), Err(other)) if e.kind() == ErrorKind::Interrupted => Err(other),
            (Err(e), _) => Err(e),
        }
    })
}

/// Bits of the rendezvous of [`round_trip_ns`]'s two threads.
const PING: u32 = 1;
const PONG: u32 = 2;
const FAILED: u32 = 4;

/// Pins the calling thread to `cpu`, says so in `pinned` (its `me` bit, or
/// [`FAILED`]) and waits for the other thread: both start passing the line
/// only when both are pinned, and neither waits for a thread that failed.
fn pinned_with(pinned: &AtomicU32, me: u32, cpu: usize) -> std::io::Result<()> {
    if let Err(e) = pin(cpu) {
        pinned.fetch_or(FAILED, AcqRel);
        return Err(e);
    }
    pinned.fetch_or(me, AcqRel);
    loop {
        let p = pinned.load(Acquire);
        if p & FAILED != 0 {
            return Err(std::io::Error::new(
                ErrorKind::Interrupted,
                "the other thread could not pin",
            ));
        }
        if p & (PING | PONG) == PING | PONG {
            return Ok(());
        }
        std::hint::spin_loop();
    }
}

/// The round trip that separates two placements among `round_trips`, if
/// they fall into two groups: the split of the sorted values (in logarithm)
/// with the least sum of squared distances to the two groups' means (Otsu's
/// method), taken only if the slower group's geometric mean is at least
/// [`SEPARATION`] times the faster's; the threshold is the geometric middle
/// of the two values beside the split. `None` for one placement throughout.
/// A round trip measured while the host moved the vCPUs falls anywhere
/// between the groups: it moves the split, not the groups.
pub fn split(round_trips: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = round_trips
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x > 0.0)
        .map(f64::ln)
        .collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let total: f64 = v.iter().sum();
    let total_sq: f64 = v.iter().map(|x| x * x).sum();
    // Within-group sum of squares of the split before index `i`.
    let wss = |i: usize, sum: f64, sq: f64| {
        let (lo, hi) = (i as f64, (n - i) as f64);
        (sq - sum * sum / lo) + ((total_sq - sq) - (total - sum).powi(2) / hi)
    };
    let mut best: Option<(f64, usize, f64)> = None; // (wss, i, sum below)
    let (mut sum, mut sq) = (0.0, 0.0);
    for i in 1..n {
        sum += v[i - 1];
        sq += v[i - 1] * v[i - 1];
        let w = wss(i, sum, sq);
        if best.map_or(true, |(b, _, _)| w < b) {
            best = Some((w, i, sum));
        }
    }
    let (_, i, sum) = best?;
    let (lo_mean, hi_mean) = (sum / i as f64, (total - sum) / (n - i) as f64);
    (hi_mean - lo_mean >= SEPARATION.ln()).then(|| ((v[i - 1] + v[i]) / 2.0).exp())
}

/// `server-demo pingpong`.
pub fn run(args: &PingpongArgs) -> anyhow::Result<()> {
    let ns = round_trip_ns(args.trips, args.a, args.b).map_err(|e| {
        anyhow::anyhow!(
            "cannot pass a cache line between CPU {} and CPU {}: {e}",
            args.a,
            args.b
        )
    })?;
    println!(
        "{ns:.1} ns per round trip between CPU {} and CPU {}",
        args.a, args.b
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_finds_two_placements_and_only_two_that_differ() {
        let two = [84.0, 92.0, 350.0, 101.0, 412.0, 388.0, 79.0];
        let t = split(&two).expect("two groups");
        assert!(101.0 < t && t < 350.0, "{t}");
        // One placement, spread: no group is twice the other.
        assert_eq!(split(&[80.0, 95.0, 110.0, 101.0, 130.0, 72.0]), None);
        // Round trips measured while the host moved the vCPUs fall in
        // between; the groups stay apart.
        let moving = [
            70.0, 80.0, 90.0, 85.0, 75.0, 123.0, 171.0, 292.0, 360.0, 400.0, 450.0, 420.0, 380.0,
        ];
        let t = split(&moving).expect("two groups");
        assert!(123.0 < t && t < 360.0, "{t}");
        // Too few values, or none usable.
        assert_eq!(split(&[90.0]), None);
        assert_eq!(split(&[f64::NAN, 0.0]), None);
    }

    #[test]
    fn a_round_trip_takes_time_and_bad_cpus_are_an_error() {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
            let ns = round_trip_ns(1000, 0, 1).expect("two CPUs");
            assert!(ns > 1.0 && ns < 1e6, "{ns}");
        }
        assert!(round_trip_ns(10, 0, 0).is_err());
        assert!(round_trip_ns(0, 0, 1).is_err());
        // A CPU that does not exist: the pinning fails, nothing hangs.
        assert!(round_trip_ns(10, 0, 100_000).is_err());
    }
}
