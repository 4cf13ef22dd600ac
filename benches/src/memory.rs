//! Keeping freed memory in the process, so that a leaking baseline does not
//! page-fault.
//!
//! A leaking pointer (`rc-leak`, `arc-leak`, the leaking `arc` of the cycle
//! churn) keeps every object of a sample until the benchmark breaks the
//! cycles after its timing. glibc then gives the freed top of its heap back
//! to the system (whatever exceeds `M_TRIM_THRESHOLD`, 128 KiB by default,
//! and every `mmap`ped block), and the next sample's leak faults each page
//! in again. The leak measured its page faults, not its pointer: `arc-leak`
//! took 420–470 ns per hub request (`sync_profile hub`, warm repeats) where
//! it takes about 100 ns with the memory kept, and every collector looked
//! cheap against it. [`keep_freed_memory`] turns both off for the whole
//! process, so every adapter of a run (collectors included) reuses what it
//! or an earlier benchmark freed, as a long-running program's allocator
//! would.

/// Tells glibc's allocator never to return freed memory to the system:
/// no trimming of the heap's top, and no `mmap` below 32 MiB (whose blocks
/// are unmapped at their free). Does nothing on other allocators.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        /// glibc's largest `M_MMAP_THRESHOLD` on 64-bit targets.
        const MMAP_THRESHOLD_MAX: libc::c_int = 32 << 20;
        // SAFETY: `mallopt` only sets allocator parameters (it takes the
        // arena lock itself); any value is valid, and -1 disables trimming.
        let kept = unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, -1) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) == 1
        };
        if !kept {
            eprintln!(
                "warning: mallopt refused to keep freed memory; leaking baselines may page-fault"
            );
        }
    }
}
