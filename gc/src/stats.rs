//! Collector statistics, in the spirit of Nim's `GC_orcStats`.

use core::time::Duration;

/// A snapshot of one collector's counters.
///
/// The single-threaded collector keeps one set per thread
/// ([`crate::stats()`]); counts cover the `Gc` and `Rc` objects allocated on that
/// thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Stats {
    /// Objects allocated and not yet freed (`Gc` and `Rc`, leaked ones included).
    pub live: u64,
    /// Objects freed because their strong count reached zero.
    pub freed_by_rc: u64,
    /// Objects freed by the cycle collector.
    pub freed_by_collector: u64,
    /// Minor (young-generation) collections run.
    pub minor_collections: u64,
    /// Full collections run (explicit `collect()` calls included).
    pub full_collections: u64,
    /// Possible cycle roots waiting in the buffer now.
    pub roots_buffered: u64,
    /// Objects traced by all collections so far (each visit counts).
    pub nodes_traced: u64,
    /// Objects promoted to the old generation.
    pub promoted: u64,
    /// Old objects alive now.
    pub old_objects: u64,
    /// Wall-clock time spent in collections (destructors of collected
    /// objects included). On a busy machine it also counts the time the
    /// collecting thread waited for a core: see `total_pause_cpu`.
    pub total_pause: Duration,
    /// Longest single collection, wall-clock time.
    pub max_pause: Duration,
    /// CPU time the collecting threads spent in collections: each
    /// collection's thread CPU time (`CLOCK_THREAD_CPUTIME_ID`) from its
    /// start to its end, summed. Unlike `total_pause` it does not grow while
    /// the thread is preempted, so it is the collector's share of the
    /// process's CPU. Where no thread CPU clock is available (non-unix
    /// targets, Miri), it counts the wall-clock time. Reading that clock is
    /// a system call (about a microsecond on a virtual machine), so both
    /// collectors read it only once a collection has run for 10 µs (the
    /// single-threaded one checks every 64 objects it traces or frees; the
    /// thread-safe one after each group of roots it judges and before its
    /// frees) and count the time before that read at its wall-clock length:
    /// a preemption there (within the first 10 µs, or the work up to the
    /// next check) is counted.
    pub total_pause_cpu: Duration,
}

impl Stats {
    /// Minor plus full collections.
    pub fn collections(&self) -> u64 {
        self.minor_collections + self.full_collections
    }
}

/// How long a collection runs before it reads the thread CPU clock (see
/// [`LazyPauseTimer`]).
const CPU_CLOCK_AFTER: Duration = Duration::from_micros(10);

/// Measures one collection (of either collector): wall-clock time, and
/// thread CPU time from the first [`checkpoint`](Self::checkpoint) that
/// finds the collection running for at least [`CPU_CLOCK_AFTER`].
///
/// The single-threaded collector's collections are frequent and most take
/// a microsecond or two (32 roots of short garbage cycles), about what one
/// read of the thread CPU clock costs (a system call): reading it at the
/// start of each doubled their cost. The thread-safe collector read it at
/// the start and the end of each collection too, two system calls that a
/// collection of a few hundred roots notices. The time before the first read
/// (at most `CPU_CLOCK_AFTER` plus the work between two checkpoints), and
/// all of a collection that ends sooner, count as CPU time at their
/// wall-clock length.
#[derive(Clone, Copy)]
pub(crate) struct LazyPauseTimer {
    wall: std::time::Instant,
    cpu: CpuStart,
}

/// When [`LazyPauseTimer`] read the thread CPU clock.
#[derive(Clone, Copy)]
enum CpuStart {
    NotYet,
    /// At `wall` into the collection, the thread's CPU time was `cpu`.
    At {
        wall: Duration,
        cpu: Duration,
    },
    /// No thread CPU clock here: wall-clock time only.
    Unavailable,
}

impl LazyPauseTimer {
    /// Starts measuring on the calling thread (a wall-clock read only).
    pub(crate) fn start() -> Self {
        LazyPauseTimer {
            wall: std::time::Instant::now(),
            cpu: CpuStart::NotYet,
        }
    }

    /// Reads the thread CPU clock if the collection has run for
    /// [`CPU_CLOCK_AFTER`] and it was not read yet (a wall-clock read
    /// otherwise). Called every few dozen objects traced or freed.
    #[inline]
    pub(crate) fn checkpoint(&mut self) {
        if let CpuStart::NotYet = self.cpu {
            self.read_cpu();
        }
    }

    #[cold]
    #[inline(never)]
    fn read_cpu(&mut self) {
        let wall = self.wall.elapsed();
        if wall >= CPU_CLOCK_AFTER {
            self.cpu = match thread_cpu_time() {
                Some(cpu) => CpuStart::At { wall, cpu },
                None => CpuStart::Unavailable,
            };
        }
    }

    /// Wall-clock and CPU time since `start` (on the same thread). The CPU
    /// time is the wall-clock time up to the checkpoint that read the CPU
    /// clock plus the CPU time since, and never exceeds the wall-clock time.
    pub(crate) fn stop(&self) -> (Duration, Duration) {
        let wall = self.wall.elapsed();
        let cpu = match self.cpu {
            CpuStart::At {
                wall: before,
                cpu: start,
            } => match thread_cpu_time() {
                Some(end) => (before + end.saturating_sub(start)).min(wall),
                None => wall,
            },
            CpuStart::NotYet | CpuStart::Unavailable => wall,
        };
        (wall, cpu)
    }
}

/// The calling thread's CPU time, where the platform has a thread clock.
#[cfg(all(unix, not(miri)))]
fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec`; `clock_gettime` writes
    // only to it and reports failure through its return value.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// No thread CPU clock here: callers fall back to wall-clock time.
#[cfg(not(all(unix, not(miri))))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::{LazyPauseTimer, CPU_CLOCK_AFTER};
    use core::time::Duration;

    /// A collection that ends before a checkpoint reads the CPU clock counts
    /// its wall-clock time; one that reads it and then waits (here, sleeps)
    /// does not count the wait, and never counts more than its wall time.
    #[test]
    fn lazy_timer_counts_wall_time_until_it_reads_the_cpu_clock() {
        let short = LazyPauseTimer::start();
        let (wall, cpu) = short.stop();
        assert_eq!(cpu, wall);

        let mut long = LazyPauseTimer::start();
        long.checkpoint(); // too early: no read
        while long.wall.elapsed() < CPU_CLOCK_AFTER {}
        long.checkpoint();
        std::thread::sleep(Duration::from_millis(50));
        let (wall, cpu) = long.stop();
        assert!(cpu <= wall, "cpu {cpu:?} > wall {wall:?}");
        assert!(cpu >= CPU_CLOCK_AFTER, "cpu {cpu:?}");
        if cfg!(all(unix, not(miri))) {
            assert!(
                cpu < wall / 2,
                "the sleep counted: cpu {cpu:?}, wall {wall:?}"
            );
        } else {
            assert_eq!(cpu, wall);
        }
    }
}
