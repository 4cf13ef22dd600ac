//! The few operating-system calls the demo needs that std does not offer:
//! process CPU time (user and system), the file-descriptor limit, giving freed heap back to the
//! kernel, a parent-death signal for `compare`'s children, and sending a
//! signal to a child. Linux only, through `libc`.

use std::io;
use std::time::Duration;

/// CPU time this process has consumed so far, split as the kernel counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Time in user space: the server's own code, its libraries, the allocator.
    pub user: Duration,
    /// Time in the kernel on the process's behalf: sockets, epoll, wake-ups
    /// of other threads, page faults.
    pub system: Duration,
}

impl CpuTimes {
    /// User plus system time.
    pub fn total(self) -> Duration {
        self.user + self.system
    }
}

/// Puts the calling thread under `SCHED_BATCH` (`sched(7)`): it keeps its
/// share of the CPU but never preempts a running thread when it wakes up.
/// Lowering the policy needs no privilege.
pub fn set_thread_batch_scheduling() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` that outlives the call (which
    // only reads it); pid 0 names the calling thread, and `SCHED_BATCH`
    // takes priority 0.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the calling thread runs under `SCHED_BATCH`.
#[cfg(test)]
pub fn thread_is_batch_scheduled() -> bool {
    // SAFETY: pid 0 names the calling thread; the call only reads.
    unsafe { libc::sched_getscheduler(0) == libc::SCHED_BATCH }
}

/// User and system CPU time consumed by this process so far.
pub fn process_cpu_times() -> io::Result<CpuTimes> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` writes a `rusage` into the pointer we pass, which
    // points to writable memory of exactly that type; `RUSAGE_SELF` is valid.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `getrusage` returned 0, so it initialised the struct (and it
    // was zeroed before, so every field is initialised either way).
    let usage = unsafe { usage.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Ok(CpuTimes {
        user: tv(usage.ru_utime),
        system: tv(usage.ru_stime),
    })
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit (capped by
/// `/proc/sys/fs/nr_open` when the hard limit is unlimited, which the kernel
/// would refuse as a soft limit) and returns `(soft, hard)` as they are after
/// the attempt. A server needs one descriptor per connection; the usual soft
/// default of 1024 is far below what the hard limit allows.
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes one `rlimit` into the pointer, which points
    // to a valid, writable `rlimit`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut target = lim.rlim_max;
    if target == libc::RLIM_INFINITY {
        target = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(lim.rlim_cur.max(1 << 20));
    }
    if target > lim.rlim_cur {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `setrlimit` only reads the `rlimit` we pass by reference.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = target;
        }
    }
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Returns the free memory at the top of the heap and in every glibc arena
/// to the kernel (`malloc_trim(0)`); true if some memory was released.
pub fn malloc_trim() -> bool {
    // SAFETY: `malloc_trim` has no preconditions; it takes the allocator's
    // own locks, so it is safe to call while other threads allocate.
    unsafe { libc::malloc_trim(0) != 0 }
}

/// glibc's heap statistics (`mallinfo2`), bytes; all zero with mimalloc,
/// which glibc does not see.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HeapStats {
    /// Memory `malloc` took from the kernel with `brk` or arenas' `mmap`
    /// (`arena`): in use plus free chunks.
    pub arena: u64,
    /// Of it, in chunks handed out (`uordblks`).
    pub in_use: u64,
    /// Of it, in free chunks (`fordblks`): fragmentation plus the top chunk.
    pub free: u64,
    /// Of the free memory, the top chunk that `malloc_trim` could return
    /// (`keepcost`).
    pub releasable_top: u64,
    /// Large blocks mapped on their own (`hblkhd`).
    pub mmapped: u64,
}

/// glibc's heap statistics now. Walks every arena's bins under its lock:
/// for `/stats`, not for a hot path.
pub fn heap_stats() -> HeapStats {
    if crate::locked_alloc::active() != crate::locked_alloc::Allocator::System {
        return HeapStats::default();
    }
    // SAFETY: `mallinfo2` has no preconditions; it takes each arena's lock
    // while it reads it.
    let m = unsafe { libc::mallinfo2() };
    HeapStats {
        arena: m.arena as u64,
        in_use: m.uordblks as u64,
        free: m.fordblks as u64,
        releasable_top: m.keepcost as u64,
        mmapped: m.hblkhd as u64,
    }
}

/// Asks the kernel to send SIGTERM to the calling process when its parent
/// exits (`prctl(PR_SET_PDEATHSIG)`), then checks that the parent has not
/// already gone. Called in a `compare` child between fork and exec, so it must
/// only make async-signal-safe calls and must not allocate (it calls `prctl`
/// and `getppid`, and its errors are plain OS error codes).
pub fn die_with_parent(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: `prctl(PR_SET_PDEATHSIG, sig)` only sets a flag on the calling
    // process; the extra arguments are ignored and passed as zero.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `getppid` has no preconditions.
    if unsafe { libc::getppid() } != parent {
        // The parent is gone already: fail the exec. (An OS error code, so
        // nothing is allocated between fork and exec.)
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// Sends SIGTERM to `pid`.
pub fn terminate(pid: u32) -> io::Result<()> {
    signal(pid, libc::SIGTERM)
}

/// Sends SIGKILL to `pid`.
pub fn kill(pid: u32) -> io::Result<()> {
    signal(pid, libc::SIGKILL)
}

fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    // SAFETY: `kill` has no memory-safety preconditions. Callers pass a child
    // they spawned and have not reaped, so the pid cannot name another process.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits until the child `pid` has exited and reaps it.
pub fn reap(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    let mut status = 0;
    // SAFETY: `waitpid` writes the exit status into `status`, a valid `c_int`.
    if unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// This process's id.
pub fn pid() -> libc::pid_t {
    // SAFETY: `getpid` has no preconditions.
    unsafe { libc::getpid() }
}

#[cfg(test)]
mod tests {
    /// The policy is the calling thread's: a load thread that lowers its
    /// own leaves the rest of the process (the test's thread here) alone.
    #[test]
    fn batch_scheduling_applies_to_the_calling_thread_only() {
        let before = super::thread_is_batch_scheduled();
        let batch = std::thread::spawn(|| {
            super::set_thread_batch_scheduling().unwrap();
            super::thread_is_batch_scheduled()
        })
        .join()
        .unwrap();
        assert!(batch);
        assert_eq!(super::thread_is_batch_scheduled(), before);
    }
}
