//! Socket options and system calls the standard library does not offer: buffer sizes, congestion
//! control, MSS before connect, socket memory, CPU time, random cookies and `sendfile` from a
//! memory file (the zero-copy send). The system calls themselves are `tcptune-os`'s.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use tcptune_iperf3::{Cookie, COOKIE_LEN};
use tcptune_kernel::SkMemInfo;
use tcptune_os::socket::{self as os_socket, Kind};

/// Sets an integer socket option.
pub fn set_int(fd: BorrowedFd<'_>, level: i32, name: i32, v: i32) -> io::Result<()> {
    os_socket::set_int(fd, level, name, v)
}

/// Reads an integer socket option.
pub fn get_int(fd: BorrowedFd<'_>, level: i32, name: i32) -> io::Result<i32> {
    os_socket::get_int(fd, level, name)
}

/// SO_SNDBUF and SO_RCVBUF both, as iperf3's `-w` does.
pub fn set_window(fd: BorrowedFd<'_>, bytes: u32) -> io::Result<()> {
    let v = bytes.min(i32::MAX as u32) as i32;
    set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, v)?;
    set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, v)
}

/// Sets TCP_CONGESTION (`-C`).
pub fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    os_socket::set_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes())
}

/// The socket's TCP_CONGESTION, when it can be read.
pub fn congestion(fd: BorrowedFd<'_>) -> Option<String> {
    let mut buf = [0u8; 32];
    let n = os_socket::get_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, &mut buf).ok()?;
    let b = &buf[..n];
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    Some(String::from_utf8_lossy(&b[..end]).into_owned())
}

/// The socket's memory figures (SO_MEMINFO), as sock_diag reports them.
pub fn meminfo(fd: BorrowedFd<'_>) -> Option<SkMemInfo> {
    tcptune_kernel::sys::skmem_of(fd).ok()
}

/// Options a data socket gets before it connects (the MSS must be set before the handshake).
#[derive(Debug, Clone, Default)]
pub struct DataOptions {
    /// SO_SNDBUF and SO_RCVBUF to set (`-w`), bytes.
    pub window: Option<u32>,
    /// The congestion control in use.
    pub congestion: Option<String>,
    /// TCP_MAXSEG to set (`-M`), bytes.
    pub mss: Option<u32>,
    /// TCP_NODELAY (`-N`).
    pub nodelay: bool,
    /// IP_TOS / IPV6_TCLASS (`-S`).
    pub tos: Option<u8>,
    /// Local address and port to bind before connecting (`-B`, `--cport`).
    pub bind: Option<SocketAddr>,
    /// iperf3's options of the client's own sockets (none on the server).
    pub extra: Extra,
}

/// iperf3's client options that are socket options of its own sockets: set by the client
/// only (iperf3's server does not receive them either, except the fq rate for `-R`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extra {
    /// SO_BINDTODEVICE on every connection (`--bind-dev`).
    pub bind_dev: Option<String>,
    /// SO_MAX_PACING_RATE of the data connections, bytes/s (`--fq-rate`).
    pub max_pacing_rate: Option<u64>,
    /// TCP_USER_TIMEOUT of the data connections, ms (`--snd-timeout`).
    pub user_timeout_ms: Option<u32>,
    /// SO_KEEPALIVE with idle/interval/count (`--cntl-ka`; 0: the system's value).
    pub keepalive: Option<(u32, u32, u32)>,
}

impl Extra {
    /// Sets these options on `fd` (a TCP socket, before it connects).
    pub fn apply(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        if let Some(dev) = &self.bind_dev {
            os_socket::set_bytes(fd, libc::SOL_SOCKET, libc::SO_BINDTODEVICE, dev.as_bytes())?;
        }
        if let Some(r) = self.max_pacing_rate {
            // The 64-bit form (Linux 4.20+) keeps rates above 34 Gbit/s.
            os_socket::set_bytes(
                fd,
                libc::SOL_SOCKET,
                libc::SO_MAX_PACING_RATE,
                &r.to_ne_bytes(),
            )?;
        }
        if let Some(ms) = self.user_timeout_ms {
            let ms = ms.min(i32::MAX as u32) as i32;
            set_int(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, ms)?;
        }
        if let Some((idle, intvl, cnt)) = self.keepalive {
            set_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
            for (name, v) in [
                (libc::TCP_KEEPIDLE, idle),
                (libc::TCP_KEEPINTVL, intvl),
                (libc::TCP_KEEPCNT, cnt),
            ] {
                if v > 0 {
                    set_int(fd, libc::IPPROTO_TCP, name, v.min(i32::MAX as u32) as i32)?;
                }
            }
        }
        Ok(())
    }
}

impl DataOptions {
    /// Applies what can be applied to a connected (accepted) socket.
    pub fn apply_connected(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        if let Some(w) = self.window {
            set_window(fd, w)?;
        }
        if let Some(c) = &self.congestion {
            set_congestion(fd, c)?;
        }
        self.apply_common(fd)
    }

    /// What both ends set alike whenever: TCP_NODELAY and the TOS byte.
    fn apply_common(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
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
    let Ok(u) = tcptune_os::uname::uname() else {
        return String::new();
    };
    [u.sysname, u.nodename, u.release, u.version, u.machine].join(" ")
}

/// Connects a TCP socket with `opts` set before the handshake, waiting at most `timeout`.
pub fn connect(addr: &SocketAddr, opts: &DataOptions, timeout: Duration) -> io::Result<TcpStream> {
    connect_reporting(addr, opts, timeout).map(|(s, _)| s)
}

/// A socket's buffer sizes (SO_SNDBUF, SO_RCVBUF), bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Buffers {
    /// SO_SNDBUF, bytes.
    pub sndbuf: u32,
    /// SO_RCVBUF, bytes.
    pub rcvbuf: u32,
}

/// [`connect`], also returning the buffers the socket had with its options set, before the
/// connection: iperf3 reports those as `sndbuf_actual`/`rcvbuf_actual` (the kernel grows the
/// send buffer when the handshake completes).
pub fn connect_reporting(
    addr: &SocketAddr,
    opts: &DataOptions,
    timeout: Duration,
) -> io::Result<(TcpStream, Buffers)> {
    let owned = os_socket::socket_for(addr, Kind::Stream)?;
    let fd = owned.as_fd();
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
    opts.extra.apply(fd)?;
    if let Some(local) = opts.bind {
        if local.port() != 0 {
            // A --cport a test used a moment ago may still be in TIME_WAIT.
            set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        }
        os_socket::bind(fd, &local)?;
    }
    let size = |opt| get_int(fd, libc::SOL_SOCKET, opt).map(|v| v.max(0) as u32);
    let buffers = Buffers {
        sndbuf: size(libc::SO_SNDBUF)?,
        rcvbuf: size(libc::SO_RCVBUF)?,
    };
    // Connect with a deadline: the send timeout bounds a blocking connect on Linux.
    os_socket::set_timeval(fd, libc::SOL_SOCKET, libc::SO_SNDTIMEO, timeout)?;
    if let Err(e) = os_socket::connect(fd, addr) {
        return Err(if e.raw_os_error() == Some(libc::EINPROGRESS) {
            io::Error::new(io::ErrorKind::TimedOut, "connect timed out")
        } else {
            e
        });
    }
    let s = TcpStream::from(owned);
    s.set_write_timeout(None)?;
    Ok((s, buffers))
}

/// A UDP socket bound to `addr` with SO_REUSEADDR, as iperf3's UDP "listener": each stream
/// connects the current one to its client and a new one is bound to the same port.
pub fn bind_udp(addr: &SocketAddr) -> io::Result<std::net::UdpSocket> {
    let owned = os_socket::socket_for(addr, Kind::Datagram)?;
    set_int(owned.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    os_socket::bind(owned.as_fd(), addr)?;
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
    let (user, system) = tcptune_os::process::cpu_times();
    (user.as_secs_f64(), system.as_secs_f64())
}

/// A file holding one block of payload, for `sendfile` (iperf3's `-Z`): the kernel sends from
/// the page cache without copying from user space.
pub struct ZeroCopySource {
    fd: OwnedFd,
    len: usize,
}

impl ZeroCopySource {
    /// A file holding `block`, to sendfile from: an unlinked file in the temporary directory,
    /// as iperf3's `-Z` uses (on a 6.18 kernel sendfile from a memfd's shmem pages ran about
    /// 0.83× the rate from an ext4 file's page cache over loopback), or a memfd where no
    /// temporary file can be made.
    pub fn new(block: &[u8]) -> io::Result<ZeroCopySource> {
        let mut f = match unlinked_temp_file() {
            Ok(f) => f,
            Err(_) => std::fs::File::from(tcptune_os::fs::memfd(c"tcptune-payload")?),
        };
        std::io::Write::write_all(&mut f, block)?;
        Ok(ZeroCopySource {
            fd: f.into(),
            len: block.len(),
        })
    }

    /// Sends up to one block on `sock`; returns the bytes sent.
    pub fn send(&self, sock: &TcpStream) -> io::Result<usize> {
        tcptune_os::fs::sendfile_from_start(sock.as_fd(), self.fd.as_fd(), self.len)
    }
}

/// A new file in the temporary directory, removed from it at once (it lives while open).
fn unlinked_temp_file() -> io::Result<std::fs::File> {
    let dir = std::env::temp_dir();
    for i in 0..64 {
        let p = dir.join(format!("tcptune-payload-{}-{i}", std::process::id()));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => {
                std::fs::remove_file(&p)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from(io::ErrorKind::AlreadyExists))
}

/// The address family `-4`/`-6` ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4 only (`-4`).
    V4,
    /// IPv6 only (`-6`).
    V6,
}

/// The address of `host:port` (a name or an address), of `family` when one is asked for.
pub fn resolve(
    host: &str,
    port: u16,
    family: Option<Family>,
) -> Result<SocketAddr, crate::TestError> {
    let Ok(addrs) = (host, port).to_socket_addrs() else {
        return Err(crate::TestError::Resolve(host.to_string()));
    };
    let addrs: Vec<SocketAddr> = addrs.collect();
    let wanted = |a: &&SocketAddr| match family {
        None => true,
        Some(Family::V4) => a.is_ipv4(),
        Some(Family::V6) => a.is_ipv6(),
    };
    match (addrs.iter().find(wanted), family) {
        (Some(a), _) => Ok(*a),
        // The name (or address) is fine; it has no address of the family -4/-6 asks for.
        (None, Some(f)) if !addrs.is_empty() => Err(crate::TestError::Family {
            host: host.to_string(),
            asked: if f == Family::V4 { "IPv4" } else { "IPv6" },
            flag: if f == Family::V4 { "-4" } else { "-6" },
        }),
        _ => Err(crate::TestError::Resolve(host.to_string())),
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (a UDP socket of that family).
pub fn unmapped(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::from((v4, v6.port())),
            None => a,
        },
        v4 => v4,
    }
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
            extra: Extra {
                bind_dev: Some("lo".into()),
                max_pacing_rate: Some(12_500_000),
                user_timeout_ms: Some(5000),
                keepalive: Some((60, 10, 0)),
            },
        };
        let (c, initial) =
            connect_reporting(&l.local_addr().unwrap(), &opts, Duration::from_secs(5)).unwrap();
        // The buffers before the handshake: -w's, doubled by the kernel.
        assert_eq!(
            initial,
            Buffers {
                sndbuf: 131072,
                rcvbuf: 131072
            }
        );
        let (mut s, _) = l.accept().unwrap();
        let fd = c.as_fd();
        // -N, -S and -B/--cport.
        assert_eq!(
            get_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY).unwrap(),
            1
        );
        assert_eq!(get_int(fd, libc::IPPROTO_IP, libc::IP_TOS).unwrap(), 0x10);
        assert_eq!(c.local_addr().unwrap(), cport);
        // --fq-rate, --snd-timeout, --cntl-ka (a 0 field keeps the system's count).
        let mut rate = [0u8; 8];
        tcptune_os::socket::get_bytes(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &mut rate)
            .unwrap();
        assert_eq!(u64::from_ne_bytes(rate), 12_500_000);
        assert_eq!(
            get_int(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT).unwrap(),
            5000
        );
        assert_eq!(
            get_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE).unwrap(),
            1
        );
        assert_eq!(
            get_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE).unwrap(),
            60
        );
        assert_eq!(
            get_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL).unwrap(),
            10
        );
        // --bind-dev.
        let mut dev = [0u8; 16];
        let n =
            tcptune_os::socket::get_bytes(fd, libc::SOL_SOCKET, libc::SO_BINDTODEVICE, &mut dev)
                .unwrap();
        assert_eq!(&dev[..n].split(|&b| b == 0).next().unwrap(), b"lo");
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
        assert!(tcptune_os::poll::wait_readable(s.as_fd(), Duration::ZERO).is_ok());
        let a = random_cookie().unwrap();
        let b = random_cookie().unwrap();
        assert_ne!(a.as_bytes(), b.as_bytes());
    }
}
