//! One data connection of a served test as the server's text and `-J` document report it: its
//! descriptor (iperf3's stream id), role, addresses and socket buffers.

use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};

use crate::data::StreamSocket;
use crate::sock::unmapped;
use crate::udp::UdpStream;

/// One data connection of a test as the server sees it.
#[derive(Debug, Clone, Copy)]
pub struct Conn {
    /// The stream's socket descriptor (iperf3's id).
    pub fd: i32,
    /// Whether this end sends on it.
    pub sends: bool,
    /// The local address, when known.
    pub local: Option<SocketAddr>,
    /// The peer's address, when known.
    pub remote: Option<SocketAddr>,
    /// SO_SNDBUF as the data phase starts, bytes (0: unknown).
    pub sndbuf: u32,
    /// SO_RCVBUF as the data phase starts, bytes (0: unknown).
    pub rcvbuf: u32,
}

/// A socket's SO_SNDBUF and SO_RCVBUF (0 where unreadable).
fn buffers(fd: std::os::fd::BorrowedFd<'_>) -> (u32, u32) {
    let get = |name| {
        crate::sock::get_int(fd, libc::SOL_SOCKET, name)
            .map(|v| v.max(0) as u32)
            .unwrap_or(0)
    };
    (get(libc::SO_SNDBUF), get(libc::SO_RCVBUF))
}

impl Conn {
    fn of(
        fd: std::os::fd::BorrowedFd<'_>,
        sends: bool,
        local: std::io::Result<SocketAddr>,
        remote: std::io::Result<SocketAddr>,
    ) -> Conn {
        let (sndbuf, rcvbuf) = buffers(fd);
        Conn {
            fd: fd.as_raw_fd(),
            sends,
            local: local.ok().map(unmapped),
            remote: remote.ok().map(unmapped),
            sndbuf,
            rcvbuf,
        }
    }

    /// A TCP data connection's descriptor, role and addresses.
    pub fn of_tcp(s: &StreamSocket) -> Conn {
        let k = &s.sock;
        Conn::of(k.as_fd(), s.sends, k.local_addr(), k.peer_addr())
    }

    /// A UDP stream's descriptor, role and addresses.
    pub fn of_udp(s: &UdpStream) -> Conn {
        let k = &s.sock;
        Conn::of(k.as_fd(), s.sends, k.local_addr(), k.peer_addr())
    }
}
