//! Resident set size from `/proc/PID/status`.

use std::io;

/// The `VmRSS` of `pid` (or of this process), in bytes.
pub fn rss_bytes(pid: Option<u32>) -> io::Result<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_owned(),
    };
    parse_rss(&std::fs::read_to_string(path)?)
}

/// Extracts `VmRSS` (in kB in the file) from the text of a status file.
fn parse_rss(status: &str) -> io::Result<u64> {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .ok_or_else(|| io::Error::other("no VmRSS line (is the process a zombie?)"))?;
    let kb = line
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .map_err(|e| io::Error::other(format!("bad VmRSS line {line:?}: {e}")))?;
    Ok(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vmrss() {
        let text = "Name:\tx\nVmPeak:\t  100 kB\nVmRSS:\t    2048 kB\nThreads:\t1\n";
        assert_eq!(parse_rss(text).unwrap(), 2048 * 1024);
        assert!(parse_rss("Name:\tx\n").is_err());
        assert!(parse_rss("VmRSS:\tlots kB\n").is_err());
    }

    #[test]
    fn own_rss_is_positive() {
        assert!(rss_bytes(None).unwrap() > 0);
    }
}
