//! How many `recycler::sync` collector threads this process runs, from
//! `/proc/self/task` (Linux; not under Miri's isolation).

/// The threads named `recycler-sync-collector` (a thread name is truncated
/// to 15 bytes in `comm`).
pub fn collector_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter(|task| {
            let comm = task.as_ref().unwrap().path().join("comm");
            std::fs::read_to_string(comm)
                .unwrap_or_default()
                .starts_with("recycler-sync-c")
        })
        .count()
}
