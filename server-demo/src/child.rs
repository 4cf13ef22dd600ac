//! `serve` as a child process of `compare` or `ab`, which never outlives it.
//!
//! Three layers make sure of that: [`ServerChild`]'s `Drop` terminates and
//! reaps the child on every normal or error path; [`install_interrupt_handler`]
//! terminates the running children on Ctrl-C / SIGTERM before the parent exits;
//! and the child asks the kernel for SIGTERM when its parent dies in any other
//! way (`PR_SET_PDEATHSIG`, set between fork and exec).

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context as _};

use crate::locked_alloc::Allocator;
use crate::mode::Variant;

/// The pids of the children running (`ab` runs two), for the interrupt
/// handler.
static CURRENT: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// How long a child gets to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// A running `serve` child.
pub struct ServerChild {
    child: Option<Child>,
    /// Where it listens.
    pub addr: SocketAddr,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl ServerChild {
    /// Starts `serve --mm MODE --nim16-defects DEFECTS --runtime RUNTIME
    /// --threads threads --port 0` for `variant`, on `allocator`, and waits
    /// until it listens; `exe` is the `server-demo` executable to run (by
    /// default this one; `ab` may run another build's).
    pub fn start(
        variant: Variant,
        threads: u16,
        allocator: Allocator,
        exe: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let Variant {
            runtime,
            mode,
            defects,
        } = variant;
        let exe = match exe {
            Some(exe) => exe.to_owned(),
            None => std::env::current_exe().context("cannot find the server-demo executable")?,
        };
        let parent = crate::sys::pid();
        let mut cmd = Command::new(&exe);
        cmd.args([
            "serve",
            "--mm",
            mode.name(),
            "--port",
            "0",
            "--host",
            "127.0.0.1",
        ])
        .args(["--threads", &threads.to_string()])
        .args(["--runtime", runtime.name()])
        .args(["--nim16-defects", &defects.to_string()])
        .env(crate::locked_alloc::ENV, allocator.name())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe calls are allowed: `die_with_parent` calls `prctl`
        // and `getppid` and builds its errors from OS codes, allocating nothing.
        unsafe {
            cmd.pre_exec(move || crate::sys::die_with_parent(parent));
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start the server child {}", exe.display()))?;
        CURRENT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id());
        let stderr = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = err.read_to_string(&mut text);
                text
            })
        });
        let stdout = child.stdout.take().context("child has no stdout")?;
        let mut me = ServerChild {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stderr,
        };
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .context("reading the child's first line")?;
        match parse_listening(&line) {
            Some(addr) => me.addr = addr,
            None => {
                let status = me.stop();
                bail!(
                    "the server child did not start (status {status:?}): {}",
                    me.take_stderr().trim()
                );
            }
        }
        Ok(me)
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Terminates the child (SIGTERM, then SIGKILL after [`STOP_TIMEOUT`])
    /// and reaps it. Returns its exit status, if it was still ours.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let _ = crate::sys::terminate(child.id());
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let status = child.wait();
            let _ = tx.send(());
            status
        });
        if rx.recv_timeout(STOP_TIMEOUT).is_err() {
            // Still unreaped (the waiter holds it), so the pid is still ours.
            let _ = crate::sys::kill(pid);
        }
        let status = waiter.join().ok().and_then(Result::ok);
        CURRENT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&p| p != pid);
        status
    }

    /// What the child wrote to stderr (after it exited).
    pub fn take_stderr(&mut self) -> String {
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Parses `listening on http://ADDR ...`.
fn parse_listening(line: &str) -> Option<SocketAddr> {
    line.strip_prefix("listening on http://")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// On Ctrl-C or SIGTERM: terminate the running children, then exit with 130.
pub fn install_interrupt_handler() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Register the handlers now, so a signal that arrives before the thread
    // runs is not lost.
    let mut sigterm = runtime.block_on(async {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    })?;
    std::thread::Builder::new()
        .name("interrupt".into())
        .spawn(move || {
            runtime.block_on(async {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = sigterm.recv() => {}
                }
            });
            let pids = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if pids.is_empty() {
                eprintln!("\ninterrupted");
            }
            let reapers: Vec<_> = pids
                .into_iter()
                .map(|pid| {
                    eprintln!("\ninterrupted: stopping the server child {pid}");
                    let _ = crate::sys::terminate(pid);
                    let (tx, rx) = mpsc::channel();
                    std::thread::spawn(move || {
                        let _ = crate::sys::reap(pid);
                        let _ = tx.send(());
                    });
                    (pid, rx)
                })
                .collect();
            for (pid, rx) in reapers {
                if rx.recv_timeout(STOP_TIMEOUT).is_err() {
                    let _ = crate::sys::kill(pid);
                }
            }
            std::process::exit(130);
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_listening_line() {
        assert_eq!(
            parse_listening("listening on http://127.0.0.1:4321 (mm arc, 2 threads)\n"),
            Some("127.0.0.1:4321".parse().unwrap())
        );
        assert_eq!(parse_listening("error: something\n"), None);
    }
}
