//! Helpers for the crate's unit tests.

/// Set in the child process that [`assert_aborts`] starts.
const CHILD: &str = "RECYCLER_ABORT_CHILD";
/// Printed by a case right before the operation that must abort.
pub(crate) const REACHED: &str = "<<reached the overflowing operation>>";
/// Printed by the child if the case returned.
const RETURNED: &str = "<<the case returned>>";

/// Asserts that `case` aborts the process: runs this test binary again with
/// only the test `test` (its path without the crate name), in which `case`
/// runs; the child must print [`REACHED`] and then be killed by `SIGABRT`
/// without returning from `case`. Not under Miri (no processes).
pub(crate) fn assert_aborts(test: &str, case: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        case();
        println!("{RETURNED}");
        std::process::exit(0);
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(REACHED),
        "the child did not reach the operation: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains(RETURNED), "the operation did not abort");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        const SIGABRT: i32 = 6;
        assert_eq!(out.status.signal(), Some(SIGABRT), "{:?}", out.status);
    }
    assert!(!out.status.success());
}

/// Prints [`REACHED`] (flushed: the next operation aborts).
pub(crate) fn reached() {
    use std::io::Write;
    println!("{REACHED}");
    std::io::stdout().flush().unwrap();
}
