//! Socket options and system calls the standard library does not offer: buffer sizes, congestion
//! control, MSS before connect, socket memory, CPU time, random cookies and `sendfile` from a
//! memory file (the zero-copy send). Every `unsafe` block is a single libc call on a descriptor
//! we own, with the sizes passed.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use tcptune_kernel::SkMemInfo;
use tcptune_perf::{Cookie, COOKIE_LEN};

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn set_int(fd: RawFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: v lives across the call and its size is passed.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    })
}

pub fn get_int(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut v: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: v is valid for len bytes; the kernel writes at most len.
    check(unsafe { libc::getsockopt(fd, level, name, (&mut v as *mut i32).cast(), &mut len) })?;
    Ok(v)
}

/// SO_SNDBUF and SO_RCVBUF both, as iperf3's `-w` does.
pub fn set_window(fd: RawFd, bytes: u32) -> io::Result<()> {
    let v = bytes.min(i32::MAX as u32) as i32;
    set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, v)?;
    set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, v)
}

pub fn set_congestion(fd: RawFd, name: &str) -> io::Result<()> {
    // SAFETY: the pointer and length describe `name`'s bytes, which outlive the call.
    check(unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    })
}

pub fn congestion(fd: RawFd) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is valid for len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let b = &buf[..(len as usize).min(buf.len())];
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    Some(String::from_utf8_lossy(&b[..end]).into_owned())
}

/// `SO_MEMINFO`: the socket's memory (the send buffer and what is queued in it).
pub fn meminfo(fd: RawFd) -> Option<SkMemInfo> {
    const SO_MEMINFO: i32 = 55;
    let mut v = [0u32; 9];
    let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
    // SAFETY: v is valid for len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MEMINFO,
            v.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let bytes: Vec<u8> = v.iter().flat_map(|w| w.to_ne_bytes()).collect();
    SkMemInfo::decode(&bytes[..(len as usize).min(bytes.len())])
}

/// Options a data socket gets before it connects (the MSS must be set before the handshake).
#[derive(Debug, Clone, Default)]
pub struct DataOptions {
    pub window: Option<u32>,
    pub congestion: Option<String>,
    pub mss: Option<u32>,
    /// TCP_NODELAY (`-N`).
    pub nodelay: bool,
    /// IP_TOS / IPV6_TCLASS (`-S`).
    pub tos: Option<u8>,
    /// Local address and port to bind before connecting (`-B`, `--cport`).
    pub bind: Option<SocketAddr>,
}

impl DataOptions {
    /// Applies what can be applied to a connected (accepted) socket.
    pub fn apply_connected(&self, fd: RawFd) -> io::Result<()> {
        if let Some(w) = self.window {
            set_window(fd, w)?;
        }
        if let Some(c) = &self.congestion {
            set_congestion(fd, c)?;
        }
        self.apply_common(fd)
    }

    /// What both ends set alike whenever: TCP_NODELAY and the TOS byte.
    fn apply_common(&self, fd: RawFd) -> io::Result<()> {
        if self.nodelay {
            set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
        }
        if let Some(t) = self.tos {
            // Both, as iperf3 does for a dual-stack socket; one of them may not apply.
            let v4 = set_int(fd, libc::IPPROTO_IP, libc::IP_TOS, t as i32);
            let v6 = set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, t as i32);
            v4.or(v6)?;
        }
        Ok(())
    }
}

/// The host as `uname -a` names it, the way iperf3 fills `start.system_info`.
pub fn system_info() -> String {
    // SAFETY: utsname is plain bytes; uname fills it and NUL-terminates each field.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid out-pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let field = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    [
        field(&u.sysname),
        field(&u.nodename),
        field(&u.release),
        field(&u.version),
        field(&u.machine),
    ]
    .join(" ")
}

fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
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
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
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
            // SAFETY: sockaddr_storage is larger than sockaddr_in6 and suitably aligned.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// Connects a TCP socket with `opts` set before the handshake, waiting at most `timeout`.
pub fn connect(addr: &SocketAddr, opts: &DataOptions, timeout: Duration) -> io::Result<TcpStream> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain syscall; the descriptor is owned by the OwnedFd right after.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is fresh and nobody else owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    if let Some(w) = opts.window {
        set_window(fd, w)?;
    }
    if let Some(c) = &opts.congestion {
        set_congestion(fd, c)?;
    }
    if let Some(m) = opts.mss {
        set_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, m as i32)?;
    }
    opts.apply_common(fd)?;
    if let Some(local) = opts.bind {
        if local.port() != 0 {
            // A --cport a test used a moment ago may still be in TIME_WAIT.
            set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        }
        let (ss, len) = sockaddr(&local);
        // SAFETY: ss holds a valid address of len bytes.
        check(unsafe { libc::bind(fd, (&ss as *const libc::sockaddr_storage).cast(), len) })?;
    }
    // Connect with a deadline: the send timeout bounds a blocking connect on Linux.
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: tv lives across the call and its size is passed.
    check(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    })?;
    let (ss, len) = sockaddr(addr);
    // SAFETY: ss holds a valid address of len bytes.
    let rc = unsafe { libc::connect(fd, (&ss as *const libc::sockaddr_storage).cast(), len) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::EINPROGRESS) {
            io::Error::new(io::ErrorKind::TimedOut, "connect timed out")
        } else {
            e
        });
    }
    let s = TcpStream::from(owned);
    s.set_write_timeout(None)?;
    Ok(s)
}

/// A UDP socket bound to `addr` with SO_REUSEADDR, as iperf3's UDP "listener": each stream
/// connects the current one to its client and a new one is bound to the same port.
pub fn bind_udp(addr: &SocketAddr) -> io::Result<std::net::UdpSocket> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain syscall; the descriptor is owned by the OwnedFd right after.
    let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is fresh and nobody else owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    let (ss, len) = sockaddr(addr);
    // SAFETY: ss holds a valid address of len bytes.
    check(unsafe { libc::bind(fd, (&ss as *const libc::sockaddr_storage).cast(), len) })?;
    Ok(std::net::UdpSocket::from(owned))
}

/// A fresh random cookie (from the kernel's random pool).
pub fn random_cookie() -> io::Result<Cookie> {
    let mut r = [0u8; COOKIE_LEN - 1];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut r)?;
    Ok(Cookie::from_random(r))
}

/// User and system CPU time of this process, seconds.
pub fn cpu_times() -> (f64, f64) {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

/// A memory file holding one block of payload, for `sendfile` (iperf3's `-Z`): the kernel
/// sends from the page cache without copying from user space.
pub struct ZeroCopySource {
    fd: OwnedFd,
    len: usize,
}

impl ZeroCopySource {
    pub fn new(block: &[u8]) -> io::Result<ZeroCopySource> {
        // SAFETY: the name is a NUL-terminated literal.
        let fd = unsafe { libc::memfd_create(c"tcptune-payload".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is fresh and nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut f = std::fs::File::from(fd);
        std::io::Write::write_all(&mut f, block)?;
        Ok(ZeroCopySource {
            fd: f.into(),
            len: block.len(),
        })
    }

    /// Sends up to one block on `sock`; returns the bytes sent.
    pub fn send(&self, sock: &TcpStream) -> io::Result<usize> {
        let mut off: libc::off_t = 0;
        // SAFETY: both descriptors are open; off is a valid in/out pointer.
        let n =
            unsafe { libc::sendfile(sock.as_raw_fd(), self.fd.as_raw_fd(), &mut off, self.len) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

/// Waits until `fd` is readable or `timeout` passes; true if readable.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: p is one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn options_reach_the_socket_and_zero_copy_sends() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let cport = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let opts = DataOptions {
            window: Some(65536),
            congestion: Some("reno".into()),
            mss: Some(1000),
            nodelay: true,
            tos: Some(0x10),
            bind: Some(cport),
        };
        let c = connect(&l.local_addr().unwrap(), &opts, Duration::from_secs(5)).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let fd = c.as_raw_fd();
        // -N, -S and -B/--cport.
        assert_eq!(
            get_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY).unwrap(),
            1
        );
        assert_eq!(get_int(fd, libc::IPPROTO_IP, libc::IP_TOS).unwrap(), 0x10);
        assert_eq!(c.local_addr().unwrap(), cport);
        // The kernel doubles SO_SNDBUF.
        assert_eq!(
            get_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF).unwrap(),
            131072
        );
        assert_eq!(congestion(fd).as_deref(), Some("reno"));
        assert!(get_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG).unwrap() <= 1000);
        assert_eq!(meminfo(fd).unwrap().sndbuf, 131072);
        let z = ZeroCopySource::new(&[7u8; 4096]).unwrap();
        let n = z.send(&c).unwrap();
        let mut got = vec![0u8; n];
        s.read_exact(&mut got).unwrap();
        assert!(got.iter().all(|&b| b == 7));
        assert!(wait_readable(s.as_raw_fd(), Duration::ZERO).is_ok());
        let a = random_cookie().unwrap();
        let b = random_cookie().unwrap();
        assert_ne!(a.as_bytes(), b.as_bytes());
    }
}
