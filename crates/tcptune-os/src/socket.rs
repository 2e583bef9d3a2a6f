//! Sockets below what `std::net` offers: options by level and name, sockets opened, bound and
//! connected by hand (so options can be set before the handshake), receiving with flags, and
//! kernel receive time stamps.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use crate::{check, len, owned};

/// setsockopt(2) of an `int` option.
pub fn set_int(fd: BorrowedFd<'_>, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: `v` lives across the call and its size is passed; the kernel only reads it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    })
}

/// setsockopt(2) of an option given as bytes (e.g. a congestion control's name).
pub fn set_bytes(fd: BorrowedFd<'_>, level: i32, name: i32, v: &[u8]) -> io::Result<()> {
    let n = libc::socklen_t::try_from(v.len())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `v` is valid for n bytes of reads across the call.
    check(unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, v.as_ptr().cast(), n) })
}

/// setsockopt(2) of a `struct timeval` option (SO_SNDTIMEO, SO_RCVTIMEO).
pub fn set_timeval(fd: BorrowedFd<'_>, level: i32, name: i32, d: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: d.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: `tv` lives across the call and its size is passed.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    })
}

/// getsockopt(2) of an `int` option.
pub fn get_int(fd: BorrowedFd<'_>, level: i32, name: i32) -> io::Result<i32> {
    let mut v: i32 = 0;
    let mut n = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `v` is valid for n bytes of writes; the kernel writes at most n and updates it.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut i32).cast(),
            &mut n,
        )
    })?;
    Ok(v)
}

/// getsockopt(2) of an option read as bytes into `buf`; how many the kernel wrote (at most
/// buf.len()).
pub fn get_bytes(fd: BorrowedFd<'_>, level: i32, name: i32, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = libc::socklen_t::try_from(buf.len()).unwrap_or(libc::socklen_t::MAX);
    // SAFETY: `buf` is valid for n (<= buf.len()) bytes of writes; the kernel writes at most n
    // and updates n.
    check(unsafe {
        libc::getsockopt(fd.as_raw_fd(), level, name, buf.as_mut_ptr().cast(), &mut n)
    })?;
    Ok((n as usize).min(buf.len()))
}

/// The kinds of socket opened by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `SOCK_STREAM`: TCP.
    Stream,
    /// `SOCK_DGRAM`: UDP.
    Datagram,
}

/// socket(2) of the family of `addr` (IPv4 or IPv6), close-on-exec.
pub fn socket_for(addr: &SocketAddr, kind: Kind) -> io::Result<OwnedFd> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let ty = match kind {
        Kind::Stream => libc::SOCK_STREAM,
        Kind::Datagram => libc::SOCK_DGRAM,
    };
    // SAFETY: socket takes plain integers and returns a new descriptor or -1.
    owned(unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, 0) })
}

/// `addr` as the kernel reads it: a sockaddr_storage holding a sockaddr_in or sockaddr_in6,
/// and the length of that.
fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain integers; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and aligned for any sockaddr.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in6 and aligned for any sockaddr.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// bind(2) to `addr`.
pub fn bind(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    let (ss, n) = sockaddr(addr);
    // SAFETY: `ss` holds a valid address of n bytes, alive across the call.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&ss as *const libc::sockaddr_storage).cast(),
            n,
        )
    })
}

/// connect(2) to `addr` (blocking unless the socket is not).
pub fn connect(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    let (ss, n) = sockaddr(addr);
    // SAFETY: `ss` holds a valid address of n bytes, alive across the call.
    check(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&ss as *const libc::sockaddr_storage).cast(),
            n,
        )
    })
}

/// listen(2) with `backlog` (again on a listening socket: changes its backlog).
pub fn listen(fd: BorrowedFd<'_>, backlog: i32) -> io::Result<()> {
    // SAFETY: listen takes a descriptor (borrowed, so open) and an integer.
    check(unsafe { libc::listen(fd.as_raw_fd(), backlog) })
}

/// recv(2) into `buf` with MSG_DONTWAIT when `nonblocking`; the bytes received.
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8], nonblocking: bool) -> io::Result<usize> {
    let flags = if nonblocking { libc::MSG_DONTWAIT } else { 0 };
    // SAFETY: `buf` is valid for buf.len() bytes of writes.
    len(unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) })
}

/// recvmsg(2) of one datagram into `buf`, with its SO_TIMESTAMPNS receive time stamp
/// (nanoseconds on CLOCK_REALTIME) when the socket has that option on and the kernel sent one.
pub fn recv_timestamped(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // u64s, so the control buffer is aligned for cmsghdr.
    let mut cbuf = [0u64; 16];
    // SAFETY: msghdr is plain data; all-zero is a valid (empty) value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: every pointer in `msg` points to a live local buffer of the length given.
    let n = len(unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) })?;
    // SAFETY: the CMSG_* macros walk the control messages the kernel wrote into `cbuf`,
    // within msg_controllen; the time stamp is read unaligned from inside one of them.
    let stamp = unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        let mut stamp = None;
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                break;
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        stamp
    };
    Ok((n, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn options_set_before_connect_hold_and_a_stamp_comes_with_each_datagram() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let s = socket_for(&addr, Kind::Stream).unwrap();
        set_int(s.as_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1).unwrap();
        set_bytes(s.as_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, b"reno").unwrap();
        connect(s.as_fd(), &addr).unwrap();
        assert_eq!(
            get_int(s.as_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY).unwrap(),
            1
        );
        let mut name = [0u8; 16];
        let n = get_bytes(
            s.as_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            &mut name,
        )
        .unwrap();
        assert!(name[..n].starts_with(b"reno"));

        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        set_int(rx.as_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"abc", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 8];
        let (n, stamp) = recv_timestamped(rx.as_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"abc");
        let now = crate::process::realtime_ns();
        assert!(stamp.is_some_and(|t| t <= now && now - t < 60_000_000_000));
    }
}
