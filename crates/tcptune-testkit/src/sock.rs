//! TCP sockets for tests whose options must be set before listen or connect (a receive buffer
//! chooses the window scale at the handshake; a congestion control must not pace).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;

use tcptune_os::socket::{self, Kind};

/// A listener on `addr` (backlog 16) whose accepted sockets inherit `SO_RCVBUF` = `rcvbuf`,
/// set before listen so the window scale is chosen for it.
pub fn listen(addr: &str, rcvbuf: Option<i32>) -> TcpListener {
    let addr: SocketAddr = addr.parse().unwrap();
    let fd = socket::socket_for(&addr, Kind::Stream).unwrap();
    if let Some(b) = rcvbuf {
        socket::set_int(fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, b).unwrap();
    }
    socket::bind(fd.as_fd(), &addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    socket::listen(fd.as_fd(), 16).unwrap();
    TcpListener::from(fd)
}

/// What [`connect`] sets before the handshake.
#[derive(Debug, Clone, Copy, Default)]
pub struct Before<'a> {
    /// `SO_SNDBUF` in bytes as given to setsockopt (the kernel doubles it); `None` leaves autotuning.
    pub sndbuf: Option<i32>,
    /// `SO_RCVBUF` in bytes as given to setsockopt (the kernel doubles it); `None` leaves autotuning.
    pub rcvbuf: Option<i32>,
    /// `TCP_CONGESTION` algorithm name (e.g. `"reno"`); `None` keeps the system default.
    pub congestion: Option<&'a str>,
}

/// A connection to `addr` with `before` set before the handshake.
pub fn connect(addr: SocketAddr, before: Before<'_>) -> TcpStream {
    let fd = socket::socket_for(&addr, Kind::Stream).unwrap();
    for (opt, v) in [
        (libc::SO_SNDBUF, before.sndbuf),
        (libc::SO_RCVBUF, before.rcvbuf),
    ] {
        if let Some(v) = v {
            socket::set_int(fd.as_fd(), libc::SOL_SOCKET, opt, v).unwrap();
        }
    }
    if let Some(cc) = before.congestion {
        socket::set_bytes(
            fd.as_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_bytes(),
        )
        .unwrap_or_else(|e| panic!("TCP_CONGESTION {cc}: {e}"));
    }
    socket::connect(fd.as_fd(), &addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    TcpStream::from(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_set_before_the_handshake_hold() {
        let l = listen("127.0.0.1:0", Some(8192));
        let c = connect(
            l.local_addr().unwrap(),
            Before {
                sndbuf: Some(8192),
                congestion: Some("reno"),
                ..Before::default()
            },
        );
        // The kernel doubles what is asked.
        let snd = socket::get_int(c.as_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF).unwrap();
        assert_eq!(snd, 16384);
        let (s, _) = l.accept().unwrap();
        let rcv = socket::get_int(s.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap();
        assert_eq!(rcv, 16384);
    }
}
