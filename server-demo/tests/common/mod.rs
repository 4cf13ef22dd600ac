//! Helpers shared by the integration tests: start the built binary, talk raw
//! HTTP/1.1 to it.

#![allow(dead_code)] // each test file uses a different subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

pub const EXE: &str = env!("CARGO_BIN_EXE_server-demo");

/// A `serve` child, terminated (SIGTERM) and reaped on drop.
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
}

impl Server {
    pub fn start(mode: &str) -> Server {
        Server::start_on(mode, "per-thread")
    }

    /// `serve --mm mode --runtime runtime` on an ephemeral port, 2 threads.
    pub fn start_on(mode: &str, runtime: &str) -> Server {
        Server::start_with(runtime, &["--mm", mode], |_| {})
    }

    /// `serve --runtime runtime` on an ephemeral port, 2 threads, with
    /// `extra` arguments, after `configure` has had its say on the command.
    /// Stdout and stderr are pipes; stderr is not read.
    pub fn start_with(
        runtime: &str,
        extra: &[&str],
        configure: impl FnOnce(&mut Command),
    ) -> Server {
        let mut command = Command::new(EXE);
        command
            .args(["serve", "--port", "0", "--threads", "2"])
            .args(["--runtime", runtime])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        configure(&mut command);
        let mut child = command.spawn().expect("start serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the listening line");
        let addr = line
            .strip_prefix("listening on http://")
            .and_then(|l| l.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Server {
            child: Some(child),
            addr,
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// The child's stderr pipe (once).
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.as_mut().unwrap().stderr.take()
    }

    /// Sends `sig` and waits for the exit status.
    pub fn signal(mut self, sig: libc::c_int) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let pid = child.id() as libc::pid_t;
        // SAFETY: `kill` has no memory-safety preconditions; the pid is our
        // unreaped child.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        child.wait().expect("wait for serve")
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(self) -> ExitStatus {
        self.signal(libc::SIGTERM)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A parsed response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A keep-alive connection.
pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Conn {
        Conn::from_stream(TcpStream::connect(addr).expect("connect"))
    }

    /// Wraps a connected stream (20 s read timeout).
    pub fn from_stream(stream: TcpStream) -> Conn {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Conn {
            reader: BufReader::new(stream),
        }
    }

    /// The underlying stream.
    pub fn stream(&mut self) -> &mut TcpStream {
        self.reader.get_mut()
    }

    /// True if the server has closed the connection: a read returns end of
    /// file or a reset (waits up to the read timeout, reading and
    /// discarding whatever comes first).
    pub fn closed_by_server(&mut self) -> bool {
        let mut buf = [0; 4096];
        loop {
            match self.reader.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).expect("write");
    }

    pub fn get(&mut self, path: &str) -> Response {
        self.send_raw(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
        self.read_response()
    }

    /// Reads one response (Content-Length framed, as the server sends).
    pub fn read_response(&mut self) -> Response {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status line");
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.reader.read_line(&mut h).expect("header line");
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').expect("header has a colon");
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
        let len: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .map_or(0, |(_, v)| v.parse().expect("numeric content-length"));
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body).expect("body");
        Response {
            status,
            headers,
            body: String::from_utf8(body).expect("utf-8 body"),
        }
    }
}

/// `GET path` on a fresh connection.
pub fn get(addr: SocketAddr, path: &str) -> Response {
    Conn::open(addr).get(path)
}

/// Parses `/stats`.
pub fn stats(addr: SocketAddr) -> serde_json::Value {
    let r = get(addr, "/stats");
    assert_eq!(r.status, 200);
    serde_json::from_str(&r.body).expect("/stats is JSON")
}

/// Runs `compare` briefly (2 s, one round, 32 connections) with `extra`
/// arguments, writing into `out_dir`; asserts it succeeded and returns its
/// table (stdout).
pub fn run_compare(extra: &[&str], out_dir: &std::path::Path) -> String {
    let out = Command::new(EXE)
        .arg("compare")
        .args(extra)
        .args([
            "--duration",
            "2s",
            "--repeat",
            "1",
            "--connections",
            "32",
            "--out",
        ])
        .arg(out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "compare failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
