//! One listening socket per worker thread, all on the same port
//! (`SO_REUSEPORT`): the kernel spreads incoming connections over them, the
//! shape of Nim's "N `AsyncHttpServer` instances on N threads".

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};

use anyhow::{bail, Context as _};
use socket2::{Domain, Protocol, Socket, Type};

/// Backlog of each listener.
const BACKLOG: i32 = 1024;

fn socket(addr: SocketAddr, reuse_port: bool) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.set_nodelay(true)?;
    socket.bind(&addr.into())?;
    Ok(socket)
}

/// Binds `count` listeners to `host:port` (`port` 0 picks a free port for
/// all of them). A port that something else listens on is an error, even if
/// that other socket also uses `SO_REUSEPORT` (which would otherwise let us
/// silently share its connections).
pub fn bind(host: IpAddr, port: u16, count: usize) -> anyhow::Result<Vec<TcpListener>> {
    if count == 0 {
        bail!("--threads must be at least 1");
    }
    let in_use = |e: io::Error, addr: SocketAddr| {
        if e.kind() == io::ErrorKind::AddrInUse {
            anyhow::anyhow!("cannot listen on {addr}: the address is already in use (is another server running on that port?)")
        } else {
            anyhow::Error::new(e).context(format!("cannot listen on {addr}"))
        }
    };
    let mut addr = SocketAddr::new(host, port);
    if port != 0 {
        // A probe without SO_REUSEPORT fails if anything listens there.
        let probe = socket(addr, false).map_err(|e| in_use(e, addr))?;
        probe.listen(1).map_err(|e| in_use(e, addr))?;
        drop(probe);
    }
    let mut listeners = Vec::with_capacity(count);
    for _ in 0..count {
        let s = socket(addr, true).map_err(|e| in_use(e, addr))?;
        s.listen(BACKLOG).map_err(|e| in_use(e, addr))?;
        if addr.port() == 0 {
            let local = s
                .local_addr()?
                .as_socket()
                .context("listener has no IP address")?;
            addr.set_port(local.port());
        }
        listeners.push(TcpListener::from(s));
    }
    Ok(listeners)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_share_one_port_and_a_busy_port_is_refused() {
        let host: IpAddr = "127.0.0.1".parse().unwrap();
        let ls = bind(host, 0, 3).unwrap();
        let port = ls[0].local_addr().unwrap().port();
        assert!(ls.iter().all(|l| l.local_addr().unwrap().port() == port));
        let err = bind(host, port, 1).unwrap_err().to_string();
        assert!(err.contains("already in use"), "{err}");
        assert!(bind(host, 0, 0).is_err());
    }
}
