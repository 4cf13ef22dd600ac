//! `serve` under hostile clients, on both runtimes: slow and idle
//! connections are closed by their timeouts, connections over the cap are
//! refused while the others are served, running out of descriptors does not
//! make the accept loop spin, a closed stderr does not turn a clean shutdown
//! into a panic, SIGHUP shuts down gracefully, a request body the handler
//! does not read is treated the same way by both runtimes, bad bodies and
//! heads get the 4xx that says what was wrong, and a client that half-closes
//! after its request still gets the response.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::time::{Duration, Instant};

use common::{get, stats, Conn, Server};

const RUNTIMES: [&str; 2] = ["per-thread", "work-stealing"];

/// Sends a request head one byte at a time, a byte every 100 ms, until the
/// server closes the connection (or 20 s pass); returns how long that took.
fn slowloris(addr: std::net::SocketAddr) -> Option<Duration> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let head = b"GET / HTTP/1.1\r\nHost: test\r\nX-Padding: "
        .iter()
        .chain(std::iter::repeat(&b'a'));
    let start = Instant::now();
    let mut buf = [0; 256];
    for &byte in head {
        if start.elapsed() > Duration::from_secs(20) {
            return None;
        }
        if stream.write_all(&[byte]).is_err() {
            return Some(start.elapsed());
        }
        match stream.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(n) => panic!(
                "slow head answered: {:?}",
                String::from_utf8_lossy(&buf[..n])
            ),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
    unreachable!()
}

#[test]
fn slow_and_silent_heads_are_closed_after_the_header_timeout() {
    for runtime in RUNTIMES {
        let server = Server::start_with(
            runtime,
            &[
                "--mm",
                "orc",
                "--header-timeout",
                "1s",
                "--idle-timeout",
                "30s",
            ],
            |_| {},
        );
        // A client that connects and sends nothing.
        let mut silent = Conn::open(server.addr);
        let start = Instant::now();
        assert!(silent.closed_by_server(), "{runtime}: silent connection");
        assert!(
            start.elapsed() >= Duration::from_millis(900),
            "{runtime}: closed early"
        );

        let took = slowloris(server.addr).expect("the slow head was never closed");
        assert!(
            took >= Duration::from_millis(900),
            "{runtime}: closed after {took:?}"
        );

        let s = stats(server.addr);
        assert_eq!(s["connections"]["header_timeouts"], 2, "{runtime}: {s}");
        assert_eq!(s["connections"]["idle_timeouts"], 0, "{runtime}: {s}");
        assert_eq!(s["connections"]["header_timeout_s"], 1.0);
        assert!(server.terminate().success());
    }
}

#[test]
fn idle_keep_alive_connections_are_closed_and_busy_ones_are_not() {
    for runtime in RUNTIMES {
        let server = Server::start_with(
            runtime,
            &[
                "--mm",
                "arc",
                "--header-timeout",
                "30s",
                "--idle-timeout",
                "1s",
            ],
            |_| {},
        );
        // Requests every 300 ms for 2.4 s: longer than the idle timeout in
        // total, never idle for that long.
        let mut busy = Conn::open(server.addr);
        for _ in 0..8 {
            assert_eq!(busy.get("/").status, 200, "{runtime}");
            std::thread::sleep(Duration::from_millis(300));
        }
        assert_eq!(
            busy.get("/").status,
            200,
            "{runtime}: busy connection closed"
        );

        // Then nothing: closed by the idle timeout.
        let start = Instant::now();
        assert!(busy.closed_by_server(), "{runtime}: idle connection kept");
        assert!(
            start.elapsed() >= Duration::from_millis(900),
            "{runtime}: closed early"
        );

        let s = stats(server.addr);
        assert_eq!(s["connections"]["idle_timeouts"], 1, "{runtime}: {s}");
        assert_eq!(s["connections"]["header_timeouts"], 0, "{runtime}: {s}");
        assert!(server.terminate().success());
    }
}

#[test]
fn connections_over_the_cap_are_refused_and_the_others_served() {
    for runtime in RUNTIMES {
        let server =
            Server::start_with(runtime, &["--mm", "orc", "--max-connections", "3"], |_| {});
        let mut held: Vec<Conn> = (0..3).map(|_| Conn::open(server.addr)).collect();
        for conn in &mut held {
            assert_eq!(conn.get("/").status, 200, "{runtime}");
        }
        // The fourth gets a 503 without asking, and is closed.
        let mut extra = Conn::open(server.addr);
        let refused = extra.read_response();
        assert_eq!(refused.status, 503, "{runtime}");
        assert_eq!(refused.header("connection"), Some("close"));
        assert!(extra.closed_by_server(), "{runtime}");

        // The connections already open are served.
        let r = held[1].get("/stats");
        assert_eq!(r.status, 200);
        let s: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(s["connections"]["max_connections"], 3, "{s}");
        assert_eq!(s["connections"]["open"], 3, "{s}");
        assert_eq!(s["connections"]["refused_over_cap"], 1, "{s}");

        // A slot freed is a slot for the next client.
        drop(held.pop());
        let mut served = false;
        for _ in 0..100 {
            let mut conn = Conn::open(server.addr);
            if conn.get("/").status == 200 {
                served = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(served, "{runtime}: no slot after a connection closed");
        assert!(server.terminate().success());
    }
}

/// User plus system CPU time of process `pid`, from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) in parentheses:
    // state is field 3, utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: `sysconf` has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

#[test]
fn out_of_descriptors_the_accept_loop_backs_off_and_service_resumes() {
    const NOFILE: libc::rlim_t = 64;
    for runtime in RUNTIMES {
        let mut server = Server::start_with(
            runtime,
            &[
                "--mm",
                "arc",
                "--max-connections",
                "10000",
                "--header-timeout",
                "60s",
            ],
            |command| {
                // SAFETY: runs in the child between fork and exec; `setrlimit`
                // is async-signal-safe and the closure allocates nothing.
                unsafe {
                    command.pre_exec(|| {
                        let lim = libc::rlimit {
                            rlim_cur: NOFILE,
                            rlim_max: NOFILE,
                        };
                        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
            },
        );
        let s = stats(server.addr);
        assert_eq!(s["connections"]["nofile_soft"], NOFILE, "{s}");
        // Keep stderr drained so the log cannot block on a full pipe.
        let mut log = server.take_stderr().unwrap();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = log.read_to_string(&mut text);
            text
        });

        // More connections than descriptors: the server hits EMFILE.
        let flood: Vec<TcpStream> = (0..3 * NOFILE)
            .map(|_| TcpStream::connect(server.addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let before = cpu_time(server.pid());
        std::thread::sleep(Duration::from_secs(3));
        let spent = cpu_time(server.pid()) - before;
        // A spinning accept loop burns a core (3 s here); backing off costs
        // a few system calls a second.
        assert!(
            spent < Duration::from_millis(500),
            "{runtime}: {spent:?} of CPU in 3 s"
        );

        drop(flood);
        let mut answer = None;
        for _ in 0..200 {
            if let Ok(stream) = TcpStream::connect(server.addr) {
                stream
                    .set_read_timeout(Some(Duration::from_secs(2)))
                    .unwrap();
                let mut conn = Conn::from_stream(stream);
                conn.send_raw(b"GET /stats HTTP/1.1\r\nHost: test\r\n\r\n");
                let mut line = [0; 12];
                // The flood's backlog is still being accepted and closed.
                if conn.stream().peek(&mut line).is_ok_and(|n| n == 12) && &line == b"HTTP/1.1 200"
                {
                    answer = Some(conn.read_response());
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let answer = answer.unwrap_or_else(|| panic!("{runtime}: service did not resume"));
        let s: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
        assert!(
            s["connections"]["accept_errors"].as_u64().unwrap() > 0,
            "{s}"
        );
        assert!(server.terminate().success());
        let log = reader.join().unwrap();
        let lines = log.lines().filter(|l| l.contains("accept failed")).count();
        // Rate-limited: at most about one line a second per server.
        assert!(
            (1..=10).contains(&lines),
            "{runtime}: {lines} lines:\n{log}"
        );
    }
}

#[test]
fn a_closed_stderr_does_not_kill_the_server() {
    for runtime in RUNTIMES {
        let mut server = Server::start_with(runtime, &["--mm", "orc"], |_| {});
        // Nobody reads stderr any more: every write to it fails with EPIPE.
        drop(server.take_stderr());
        assert_eq!(get(server.addr, "/").status, 200);
        let status = server.terminate();
        assert!(
            status.success(),
            "{runtime}: SIGTERM with stderr closed: {status:?}"
        );
    }
}

#[test]
fn sighup_shuts_down_gracefully() {
    for runtime in RUNTIMES {
        let mut server = Server::start_with(runtime, &["--mm", "orc"], |_| {});
        let mut stderr = server.take_stderr().unwrap();
        assert_eq!(get(server.addr, "/").status, 200);
        let status = server.signal(libc::SIGHUP);
        assert!(status.success(), "{runtime}: SIGHUP: {status:?}");
        let mut log = String::new();
        stderr.read_to_string(&mut log).unwrap();
        assert!(log.contains("SIGHUP: shutting down"), "{runtime}: {log}");
    }
}

#[test]
fn unread_request_bodies_are_handled_alike_on_both_runtimes() {
    for runtime in RUNTIMES {
        let server = Server::start_with(runtime, &["--mm", "orc"], |_| {});
        // A chunked GET whose body the handler never looks at, then a plain
        // GET on the same connection: both answered.
        let mut conn = Conn::open(server.addr);
        conn.send_raw(
            b"GET / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        );
        let first = conn.read_response();
        assert_eq!(first.status, 200, "{runtime}");
        assert_eq!(first.header("connection"), None, "{runtime}");
        for _ in 0..3 {
            assert_eq!(conn.get("/").status, 200, "{runtime}: second request");
        }

        // A body larger than the drain limit: 413, then closed.
        let mut big = Conn::open(server.addr);
        let body = vec![b'x'; 100_000];
        big.send_raw(
            format!(
                "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        let _ = big.stream().write_all(&body);
        let r = big.read_response();
        assert_eq!(r.status, 413, "{runtime}: {r:?}");
        assert_eq!(r.header("connection"), Some("close"), "{runtime}: {r:?}");
        assert!(big.closed_by_server(), "{runtime}");

        let s = stats(server.addr);
        assert_eq!(s["connections"]["closed_after_body"], 1, "{runtime}: {s}");
        assert!(server.terminate().success());
    }
}

/// Connections that half-close after [`PIPELINED`] requests.
const HALF_CLOSES: usize = 20;
const PIPELINED: usize = 5;

#[test]
fn bad_requests_get_4xx_and_half_closing_clients_their_responses() {
    for runtime in RUNTIMES {
        let server =
            Server::start_with(runtime, &["--mm", "orc", "--header-timeout", "1s"], |_| {});
        // A body that stops halfway: 408 after the header timeout, closed.
        let mut slow = Conn::open(server.addr);
        slow.send_raw(b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\nab");
        let start = Instant::now();
        let r = slow.read_response();
        assert_eq!(r.status, 408, "{runtime}: {r:?}");
        assert!(start.elapsed() >= Duration::from_millis(900), "{runtime}");
        assert_eq!(r.header("connection"), Some("close"), "{runtime}");
        assert!(slow.closed_by_server(), "{runtime}");

        // A broken chunked encoding: 400, closed.
        let mut broken = Conn::open(server.addr);
        broken.send_raw(
            b"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n",
        );
        let r = broken.read_response();
        assert_eq!(r.status, 400, "{runtime}: {r:?}");
        assert_eq!(r.body, r#"{"error":"malformed request body"}"#, "{runtime}");
        assert!(broken.closed_by_server(), "{runtime}");

        // Host: HTTP/1.1 needs exactly one; HTTP/1.0 may have none. A bad
        // head does not close a keep-alive connection.
        let mut conn = Conn::open(server.addr);
        conn.send_raw(b"GET / HTTP/1.1\r\n\r\n");
        let r = conn.read_response();
        assert_eq!(r.status, 400, "{runtime}: {r:?}");
        assert_eq!(r.body, r#"{"error":"missing Host header"}"#, "{runtime}");
        conn.send_raw(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
        assert_eq!(conn.read_response().status, 400, "{runtime}");
        assert_eq!(conn.get("/").status, 200, "{runtime}");
        let mut old = Conn::open(server.addr);
        old.send_raw(b"GET / HTTP/1.0\r\n\r\n");
        assert_eq!(old.read_response().status, 200, "{runtime}");
        // Its value is a host and an optional port (RFC 9112, 3.2).
        for bad in [&b"a b/c@d"[..], b"\xff\xfe", b"test:8o", b"[::1", b"a%zz"] {
            let mut head = b"GET / HTTP/1.1\r\nHost: ".to_vec();
            head.extend_from_slice(bad);
            head.extend_from_slice(b"\r\n\r\n");
            conn.send_raw(&head);
            let r = conn.read_response();
            assert_eq!(r.status, 400, "{runtime}: Host {bad:?}: {r:?}");
            assert_eq!(r.body, r#"{"error":"invalid Host header"}"#, "{runtime}");
        }
        for good in [
            "test:8080",
            "[::1]:80",
            "127.0.0.1",
            "xn--bcher-kva.example",
            "",
        ] {
            conn.send_raw(format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n").as_bytes());
            assert_eq!(conn.read_response().status, 200, "{runtime}: Host {good:?}");
        }

        // The target is origin-form or absolute-form (or `*` for OPTIONS,
        // which the routes refuse).
        conn.send_raw(b"GET abc HTTP/1.1\r\nHost: test\r\n\r\n");
        let r = conn.read_response();
        assert_eq!(r.status, 400, "{runtime}: {r:?}");
        assert_eq!(r.body, r#"{"error":"invalid request target"}"#, "{runtime}");
        conn.send_raw(b"GET http://test/ HTTP/1.1\r\nHost: test\r\n\r\n");
        assert_eq!(conn.read_response().status, 200, "{runtime}");
        conn.send_raw(b"OPTIONS * HTTP/1.1\r\nHost: test\r\n\r\n");
        assert_eq!(conn.read_response().status, 405, "{runtime}");

        // A declared body over the drain limit is refused before it is read:
        // no `100 Continue` for a client that waits for one.
        let mut expecting = Conn::open(server.addr);
        expecting.send_raw(
            b"POST / HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 1000000000\r\n\r\n",
        );
        let r = expecting.read_response();
        assert_eq!(r.status, 413, "{runtime}: {r:?}");
        assert!(expecting.closed_by_server(), "{runtime}");

        // A head larger than 16 KiB: 431, and the server keeps answering
        // (hyper's default let a head of ~400 KiB into the request graph).
        let mut big = Conn::open(server.addr);
        let value = "x".repeat(20 * 1024);
        big.send_raw(format!("GET / HTTP/1.1\r\nHost: test\r\nX-Big: {value}\r\n\r\n").as_bytes());
        assert_eq!(big.read_response().status, 431, "{runtime}");
        let mut fits = Conn::open(server.addr);
        let value = "x".repeat(12 * 1024);
        fits.send_raw(format!("GET / HTTP/1.1\r\nHost: test\r\nX-Big: {value}\r\n\r\n").as_bytes());
        assert_eq!(fits.read_response().status, 200, "{runtime}");

        // 405 names the methods that are allowed.
        let mut conn = Conn::open(server.addr);
        conn.send_raw(b"DELETE / HTTP/1.1\r\nHost: test\r\n\r\n");
        let r = conn.read_response();
        assert_eq!(r.status, 405, "{runtime}: {r:?}");
        assert_eq!(r.header("allow"), Some("GET, HEAD"), "{runtime}");

        // A client that half-closes after its (pipelined) requests gets
        // every response (without hyper's `half_close`, the end of file
        // closed the connection after the first, or before it).
        for _ in 0..HALF_CLOSES {
            let mut half = Conn::open(server.addr);
            half.send_raw(&b"GET / HTTP/1.1\r\nHost: test\r\n\r\n".repeat(PIPELINED));
            half.stream().shutdown(std::net::Shutdown::Write).unwrap();
            for _ in 0..PIPELINED {
                let r = half.read_response();
                assert_eq!(r.status, 200, "{runtime}: {r:?}");
                assert_eq!(r.body, r#"{"message":"Hello, World!"}"#, "{runtime}");
            }
        }

        let s = stats(server.addr);
        assert_eq!(s["connections"]["closed_after_body"], 3, "{runtime}: {s}");
        // The handler saw the two `/` over HTTP/1.1 and 1.0, the five good
        // `Host`s, the absolute-form target, the 12 KiB head, the 405, the
        // half-closed ones and this `/stats`; not the rejected heads and
        // bodies, nor `OPTIONS *`.
        assert_eq!(
            s["total"]["requests"],
            11 + HALF_CLOSES * PIPELINED,
            "{runtime}: {s}"
        );
        assert!(server.terminate().success());
    }
}
