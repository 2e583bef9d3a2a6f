//! The edge to the kernel: the NETLINK_SOCK_DIAG socket (dumps, exact queries, destroy
//! events), entering a named network namespace, `getsockopt(TCP_INFO)` on our own sockets, and
//! the running kernel's version. This is the only netlink I/O in tcptune; everything it
//! receives is decoded by the sans-IO code in `diag.rs` and `tcp_info.rs`.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::OnceLock;
use std::time::Duration;

use crate::diag::{self, DiagSocket, DumpRequest, SkMemInfo, AF_INET, AF_INET6, AF_UNSPEC};
use crate::filter::Filter;
use crate::tcp_info::{KernelVersion, TailLayout, TcpInfo};

/// Why talking to the kernel failed. Messages are one sentence naming the object and the fix.
///
/// Each message holds its cause, so no variant chains it as a `source` as well (anyhow's `{:#}`
/// would print it twice), and a library printing the error with `{}` still says why.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// socket(2) failed (the kernel lacks sock_diag, or a seccomp filter).
    #[error("cannot open a NETLINK_SOCK_DIAG socket: {0}")]
    Socket(io::Error),
    /// Sending or receiving failed.
    #[error("netlink {what} failed: {cause}")]
    Io {
        /// The step that failed: "send", "recv".
        what: &'static str,
        /// The error from the OS.
        cause: io::Error,
    },
    /// The kernel answered the request with an error (`NLMSG_ERROR`).
    #[error("the kernel refused the sock_diag request: {0}")]
    Refused(io::Error),
    /// The answer could not be decoded.
    #[error("cannot decode the kernel's answer: {0}")]
    Decode(diag::DecodeError),
    /// `--netns NAME` names no namespace under /run/netns.
    #[error("network namespace '{0}' does not exist; `ip netns list` shows the names")]
    NoSuchNetns(String),
    /// Entering a namespace needs CAP_SYS_ADMIN.
    #[error("entering network namespace '{0}' needs root (CAP_SYS_ADMIN); run with sudo")]
    NetnsPermission(String),
    /// setns(2) failed for another reason.
    #[error("cannot enter network namespace '{name}': {cause}")]
    Netns {
        /// The namespace's name.
        name: String,
        /// The error from the OS.
        cause: io::Error,
    },
}

impl From<diag::DecodeError> for KernelError {
    fn from(e: diag::DecodeError) -> KernelError {
        KernelError::Decode(e)
    }
}

type Result<T> = std::result::Result<T, KernelError>;

/// The running kernel's release as `uname -r` prints it (e.g. `6.18.0-1-amd64`), from
/// uname(2); None when it cannot be read. The one source of the running kernel's version:
/// [`kernel_version`] is parsed from it.
pub fn kernel_release() -> Option<String> {
    static R: OnceLock<Option<String>> = OnceLock::new();
    R.get_or_init(|| tcptune_os::uname::uname().ok().map(|u| u.release))
        .clone()
}

/// The running kernel's `major.minor`, from [`kernel_release`].
pub fn kernel_version() -> Option<KernelVersion> {
    kernel_release()?.parse::<KernelVersion>().ok()
}

/// The running kernel's version with its source: `Detected`, or `Assumed` as
/// [`KernelVersion::ASSUMED`] when the release cannot be read or parsed.
pub fn kernel_version_or_assumed() -> (KernelVersion, tcptune_model::kernel::KernelSource) {
    KernelVersion::detected_or_assumed(kernel_version())
}

/// The `tcp_info` tail layout of the running kernel (6.18 when the version is unknown).
pub fn running_tail_layout() -> TailLayout {
    kernel_version()
        .map(TailLayout::for_kernel)
        .unwrap_or(TailLayout::Linux6_18)
}

/// `getsockopt(fd, IPPROTO_TCP, TCP_INFO)` on one of our own sockets, through the same decoder
/// as sock_diag answers.
pub fn tcp_info_of(fd: BorrowedFd<'_>) -> io::Result<TcpInfo> {
    Ok(TcpInfo::decode(&tcp_info_raw(fd)?, running_tail_layout()))
}

/// The raw `tcp_info` bytes of one of our own sockets, as long as the kernel's struct.
pub fn tcp_info_raw(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let mut buf = [0u8; 512];
    let n = tcptune_os::socket::get_bytes(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut buf)?;
    Ok(buf[..n].to_vec())
}

/// `getsockopt(fd, SOL_SOCKET, SO_MEMINFO)` (4.12+): the same socket memory figures as
/// `INET_DIAG_SKMEMINFO`, for one of our own sockets.
pub fn skmem_of(fd: BorrowedFd<'_>) -> io::Result<SkMemInfo> {
    // SO_MEMINFO is 55 on the generic socket ABI (x86, arm, riscv …); not in every libc yet.
    const SO_MEMINFO: libc::c_int = 55;
    let mut buf = [0u8; 64];
    let n = tcptune_os::socket::get_bytes(fd, libc::SOL_SOCKET, SO_MEMINFO, &mut buf)?;
    SkMemInfo::decode(&buf[..n])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "SO_MEMINFO answer too short"))
}

fn netlink_socket() -> io::Result<OwnedFd> {
    let fd = tcptune_os::netlink::socket(libc::NETLINK_SOCK_DIAG)?;
    // A large receive buffer keeps destroy events from overflowing (ENOBUFS) in bursts.
    setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20)?;
    Ok(fd)
}

fn setsockopt_int(fd: &OwnedFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    tcptune_os::socket::set_int(fd.as_fd(), level, name, v)
}

/// The receive buffer: the kernel sizes dump datagrams up to 32 KiB (more with 64 KiB pages),
/// and a too-small buffer truncates them.
const RECV_BUF: usize = 256 * 1024;

/// Receives one datagram into `buf`, retrying on EINTR.
fn recv_into(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize> {
    loop {
        match tcptune_os::socket::recv(fd, buf, false) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(KernelError::Io {
                    what: "receive",
                    cause: e,
                })
            }
            Ok(n) => return Ok(n),
        }
    }
}

/// Sends one request to the kernel.
fn send_on(fd: BorrowedFd<'_>, msg: &[u8]) -> Result<()> {
    tcptune_os::netlink::send_to_kernel(fd, msg)
        .map(|_| ())
        .map_err(|cause| KernelError::Io {
            what: "send",
            cause,
        })
}

/// The error of a live operation on a stand-in that has no socket (a replay answers before).
fn no_socket(what: &'static str) -> KernelError {
    KernelError::Io {
        what,
        cause: io::Error::from_raw_os_error(libc::EBADF),
    }
}

/// Visits the messages of one datagram of the dump numbered `seq`: each socket's payload
/// goes to `each`, the counters to `stats`. True when the dump ended in this datagram.
fn visit_datagram(
    buf: &[u8],
    seq: u32,
    stats: &mut DumpStats,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<bool> {
    for m in diag::messages(buf) {
        let m = m?;
        if m.seq != seq {
            continue; // a stale answer to an earlier, abandoned request
        }
        if m.flags & diag::NLM_F_DUMP_INTR != 0 {
            stats.interrupted = true;
        }
        match m.kind {
            // The older request's answers carry its type.
            diag::SOCK_DIAG_BY_FAMILY | diag::TCPDIAG_GETSOCK => {
                stats.sockets += 1;
                each(m.payload)?;
            }
            diag::NLMSG_DONE => return Ok(true),
            diag::NLMSG_ERROR => {
                let code = diag::error_code(m.payload);
                if code != 0 {
                    return Err(KernelError::Refused(io::Error::from_raw_os_error(code)));
                }
                return Ok(true);
            }
            _ => {}
        }
    }
    Ok(false)
}

/// Datagrams in flight between the receiving and the decoding thread of a parallel dump.
const PIPELINE_DEPTH: usize = 4;

/// A NETLINK_SOCK_DIAG socket, bound to the network namespace it was created in.
pub struct Diag {
    fd: Option<OwnedFd>,
    seq: u32,
    buf: Vec<u8>,
    tail: TailLayout,
    /// Recorded kernel answers to serve instead of the kernel (tests without root).
    replay: Option<Vec<u8>>,
}

/// What one dump did, for callers that want to know (and the benchmark).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DumpStats {
    /// Netlink datagrams received.
    pub datagrams: usize,
    /// Socket answers received (the kernel applied the filter before sending them).
    pub sockets: usize,
    /// Bytes received from the kernel.
    pub bytes: usize,
    /// The socket tables changed during the dump (NLM_F_DUMP_INTR): some sockets may be
    /// missing or repeated.
    pub interrupted: bool,
}

impl DumpStats {
    fn add(&mut self, o: &DumpStats) {
        self.datagrams += o.datagrams;
        self.sockets += o.sockets;
        self.bytes += o.bytes;
        self.interrupted |= o.interrupted;
    }
}

impl Diag {
    /// A sock_diag socket in the current network namespace.
    pub fn open() -> Result<Diag> {
        Ok(Diag {
            fd: Some(netlink_socket().map_err(KernelError::Socket)?),
            seq: 0,
            buf: vec![0u8; RECV_BUF],
            tail: running_tail_layout(),
            replay: None,
        })
    }

    /// A stand-in that answers every dump and query from recorded kernel messages (netlink
    /// messages one after another, as under `fixtures/kernel/`), decoded with the given
    /// `tcp_info` layout. Filters are then applied in user space. For tests without root.
    pub fn replay(recording: Vec<u8>, tail: TailLayout) -> Diag {
        Diag {
            fd: None,
            seq: 0,
            buf: Vec::new(),
            tail,
            replay: Some(recording),
        }
    }

    /// True when answers come from a recording rather than the kernel.
    pub fn is_replay(&self) -> bool {
        self.replay.is_some()
    }

    /// Destroy events where this socket looks: a subscription in `netns` (the namespace this
    /// socket was opened for), or, for a replay, its recording's sockets as the events.
    pub fn destroy_events(&self, netns: Option<&str>) -> Result<DestroyEvents> {
        match &self.replay {
            Some(rec) => Ok(DestroyEvents::replay(rec.clone(), self.tail)),
            None => DestroyEvents::subscribe(netns),
        }
    }

    /// A sock_diag socket in the named network namespace (`/run/netns/NAME`, as `ip netns`
    /// creates them). Only a short-lived helper thread enters the namespace; a netlink socket
    /// stays bound to the namespace it was created in, so the rest of the process stays put.
    pub fn open_in_netns(name: &str) -> Result<Diag> {
        let fd = in_netns(name, netlink_socket)?.map_err(KernelError::Socket)?;
        Ok(Diag {
            fd: Some(fd),
            seq: 0,
            buf: vec![0u8; RECV_BUF],
            tail: running_tail_layout(),
            replay: None,
        })
    }

    /// Opens in `netns` when given, else here.
    pub fn open_maybe_in(netns: Option<&str>) -> Result<Diag> {
        match netns {
            Some(n) => Diag::open_in_netns(n),
            None => Diag::open(),
        }
    }

    fn send(&mut self, msg: &[u8]) -> Result<()> {
        let fd = self.fd.as_ref().ok_or_else(|| no_socket("send"))?;
        send_on(fd.as_fd(), msg)
    }

    fn recv(&mut self) -> Result<usize> {
        let fd = self.fd.as_ref().ok_or_else(|| no_socket("receive"))?;
        recv_into(fd.as_fd(), &mut self.buf)
    }

    /// The dump requests a filter needs: one for both families when it wants both (the
    /// kernel then walks its socket tables once), else one for the family it wants.
    fn requests(filter: &Filter, ext: u8) -> Vec<DumpRequest> {
        let families: &[u8] = match (filter.ipv4, filter.ipv6) {
            (true, true) => &[AF_UNSPEC],
            (true, false) => &[AF_INET],
            (false, true) => &[AF_INET6],
            (false, false) => &[],
        };
        let bytecode = filter.bytecode();
        families
            .iter()
            .map(|&family| DumpRequest {
                family,
                states: filter.states,
                ext,
                bytecode: bytecode.clone(),
            })
            .collect()
    }

    /// Sends one dump request and hands each socket's raw `inet_diag_msg` payload to `each`.
    /// The building block of [`Diag::dump`]; the benchmark uses it to time the kernel alone.
    pub fn dump_raw(
        &mut self,
        req: &DumpRequest,
        mut each: impl FnMut(&[u8], TailLayout) -> Result<()>,
    ) -> Result<DumpStats> {
        if let Some(rec) = &self.replay {
            let mut stats = DumpStats::default();
            for m in diag::messages(rec) {
                let m = m?;
                let family = m.payload.first().copied();
                if m.kind == diag::SOCK_DIAG_BY_FAMILY
                    && (req.family == AF_UNSPEC || family == Some(req.family))
                {
                    stats.sockets += 1;
                    each(m.payload, self.tail)?;
                }
            }
            return Ok(stats);
        }
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        self.send(&req.encode(seq))?;
        let mut stats = DumpStats::default();
        let tail = self.tail;
        loop {
            let n = self.recv()?;
            stats.datagrams += 1;
            stats.bytes += n;
            // The buffer is swapped out while its messages are visited, so `each` may borrow
            // it while `self` stays usable.
            let buf = std::mem::take(&mut self.buf);
            let done = visit_datagram(&buf[..n], seq, &mut stats, |p| each(p, tail));
            self.buf = buf;
            if done? {
                return Ok(stats);
            }
        }
    }

    /// Dumps the TCP sockets that pass `filter` (states and conditions applied by the kernel),
    /// both families as the filter asks, with the extensions in `ext` (`diag::ext::*`).
    pub fn dump(&mut self, filter: &Filter, ext: u8) -> Result<Vec<DiagSocket>> {
        let mut out = Vec::new();
        self.dump_each(filter, ext, |s| out.push(s))?;
        Ok(out)
    }

    /// Like [`Diag::dump`], handing each socket to `each` instead of collecting them.
    pub fn dump_each(
        &mut self,
        filter: &Filter,
        ext: u8,
        mut each: impl FnMut(DiagSocket),
    ) -> Result<DumpStats> {
        let mut total = DumpStats::default();
        for req in Diag::requests(filter, ext) {
            // A recording was not filtered by a kernel: apply the filter here instead.
            let replay = self.replay.is_some();
            let st = self.dump_raw(&req, |p, tail| {
                let s = DiagSocket::decode(p, tail)?;
                if !replay || filter.matches(&s) {
                    each(s);
                }
                Ok(())
            })?;
            total.add(&st);
        }
        Ok(total)
    }

    /// Like [`Diag::dump_each`], with decoding and `each` on a second thread while this one
    /// waits for the kernel, which fills the next datagram only when asked for it. On a
    /// multi-core machine the decoding then costs no wall time; `conns` uses it for one-shot
    /// dumps of many sockets.
    pub fn dump_each_parallel<F>(&mut self, filter: &Filter, ext: u8, each: F) -> Result<DumpStats>
    where
        F: FnMut(DiagSocket) + Send,
    {
        if self.replay.is_some() {
            return self.dump_each(filter, ext, each);
        }
        let fd = self.fd.as_ref().ok_or_else(|| no_socket("send"))?.as_fd();
        let tail = self.tail;
        // Full datagrams go one way, emptied buffers come back: no allocation per datagram.
        let (full_tx, full_rx) =
            std::sync::mpsc::sync_channel::<(Vec<u8>, usize, u32)>(PIPELINE_DEPTH);
        let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        for _ in 0..PIPELINE_DEPTH {
            let _ = empty_tx.send(vec![0u8; RECV_BUF]);
        }
        std::thread::scope(|scope| {
            let decoder = scope.spawn(move || -> Result<()> {
                let mut each = each;
                let mut result = Ok(());
                let mut ignored = DumpStats::default();
                for (buf, n, seq) in full_rx {
                    if result.is_ok() {
                        result = visit_datagram(&buf[..n], seq, &mut ignored, |p| {
                            each(DiagSocket::decode(p, tail)?);
                            Ok(())
                        })
                        .map(|_| ());
                    }
                    // The receiver may have stopped already; then the buffer is just freed.
                    let _ = empty_tx.send(buf);
                }
                result
            });
            let received = (|| -> Result<DumpStats> {
                let mut total = DumpStats::default();
                for req in Diag::requests(filter, ext) {
                    self.seq = self.seq.wrapping_add(1);
                    let seq = self.seq;
                    send_on(fd, &req.encode(seq))?;
                    loop {
                        // Only fails when the decoder has gone (it panicked): stop receiving.
                        let Ok(mut buf) = empty_rx.recv() else {
                            return Ok(total);
                        };
                        let n = recv_into(fd, &mut buf)?;
                        total.datagrams += 1;
                        total.bytes += n;
                        // Only the messages' headers here: counts, the end, errors.
                        let done = visit_datagram(&buf[..n], seq, &mut total, |_| Ok(()))?;
                        if full_tx.send((buf, n, seq)).is_err() {
                            return Ok(total);
                        }
                        if done {
                            break;
                        }
                    }
                }
                Ok(total)
            })();
            drop(full_tx);
            let decoded = match decoder.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            let total = received?;
            decoded?;
            Ok(total)
        })
    }

    /// Asks for exactly one socket by its local and remote address (no dump; cheap enough to
    /// poll one connection at kHz rates). `None` when no such socket exists.
    pub fn query(
        &mut self,
        src: SocketAddr,
        dst: SocketAddr,
        ext: u8,
    ) -> Result<Option<DiagSocket>> {
        if let Some(rec) = &self.replay {
            for m in diag::messages(rec) {
                let m = m?;
                if m.kind == diag::SOCK_DIAG_BY_FAMILY {
                    let s = DiagSocket::decode(m.payload, self.tail)?;
                    if s.src == src && s.dst == dst {
                        return Ok(Some(s));
                    }
                }
            }
            return Ok(None);
        }
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        self.send(&diag::exact_request(src, dst, ext, seq))?;
        loop {
            let n = self.recv()?;
            for m in diag::messages(&self.buf[..n]) {
                let m = m?;
                if m.seq != seq {
                    continue;
                }
                match m.kind {
                    diag::SOCK_DIAG_BY_FAMILY => {
                        return Ok(Some(DiagSocket::decode(m.payload, self.tail)?))
                    }
                    diag::NLMSG_ERROR | diag::NLMSG_DONE => {
                        let code = diag::error_code(m.payload);
                        if code == libc::ENOENT || code == 0 {
                            return Ok(None);
                        }
                        return Err(KernelError::Refused(io::Error::from_raw_os_error(code)));
                    }
                    _ => {}
                }
            }
        }
    }
}

/// Runs `f` on a helper thread that has entered the network namespace `/run/netns/NAME`.
pub fn in_netns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> Result<T> {
    if name.is_empty() || name.contains('/') || name.contains('\0') || name == "." || name == ".." {
        return Err(KernelError::NoSuchNetns(name.into()));
    }
    let path = std::path::PathBuf::from(format!("/run/netns/{name}"));
    tcptune_os::netns::in_netns(&path, f).map_err(|e| {
        let (e, missing) = match e {
            tcptune_os::netns::EnterError::Open(e) => (e, libc::ENOENT),
            tcptune_os::netns::EnterError::Setns(e) => (e, libc::EINVAL),
        };
        match e.raw_os_error() {
            Some(c) if c == missing => KernelError::NoSuchNetns(name.into()),
            Some(libc::EACCES) | Some(libc::EPERM) => KernelError::NetnsPermission(name.into()),
            _ => KernelError::Netns {
                name: name.into(),
                cause: e,
            },
        }
    })
}

/// The sysctls of a named network namespace (`None`: the calling thread's own), as a
/// [`tcptune_os::sysctl::Access`]: the one namespace-aware sysctl wrapper (the lab's settings
/// and snapshots, `tune`'s `LiveHost`). Each call checks the key first (a bad key is named
/// before any namespace is entered), then reads or writes on a helper thread inside the
/// namespace (setns(2) moves only that thread).
#[derive(Debug, Clone, Copy)]
pub struct NetnsSysctls<'a>(pub Option<&'a str>);

impl NetnsSysctls<'_> {
    /// Runs `f` inside the namespace (or here), its error and the namespace's as `io::Error`.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
        match self.0 {
            Some(ns) => in_netns(ns, f).map_err(io::Error::other)?,
            None => f(),
        }
    }

    /// Where `key` lives as seen from inside the namespace: its own, a read-only global, or
    /// missing.
    pub fn scope(&self, key: &str) -> io::Result<tcptune_os::sysctl::Scope> {
        self.run(|| Ok(tcptune_os::sysctl::scope(key)))
    }
}

impl tcptune_os::sysctl::Access for NetnsSysctls<'_> {
    fn read(&mut self, key: &str) -> io::Result<String> {
        tcptune_os::sysctl::check_key(key)?;
        self.run(|| tcptune_os::sysctl::read(key))
    }
    fn write(&mut self, key: &str, value: &str) -> io::Result<()> {
        tcptune_os::sysctl::check_key(key)?;
        self.run(|| tcptune_os::sysctl::write(key, value))
    }
}

/// The named network namespaces (`ip netns list`), sorted.
pub fn named_netns() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A subscription to the kernel's multicast of every TCP socket destruction
/// (`SKNLGRP_INET_TCP_DESTROY` / `SKNLGRP_INET6_TCP_DESTROY`), each carrying the socket's
/// final `tcp_info` — also for connections too short for any poll to see.
pub struct DestroyEvents {
    /// None when replaying.
    fd: Option<OwnedFd>,
    buf: Vec<u8>,
    tail: TailLayout,
    /// Recorded events not yet delivered (replay), or delivered already (`Some(empty)`).
    replay: Option<Vec<u8>>,
}

const SKNLGRP_INET_TCP_DESTROY: i32 = 1;
const SKNLGRP_INET6_TCP_DESTROY: i32 = 3;

impl DestroyEvents {
    /// Subscribes in the current namespace, or in `netns` when given.
    pub fn subscribe(netns: Option<&str>) -> Result<DestroyEvents> {
        let make = || -> io::Result<OwnedFd> {
            let fd = netlink_socket()?;
            // Bind first (port id chosen by the kernel): multicast is delivered to bound
            // sockets only.
            tcptune_os::netlink::bind_any(fd.as_fd())?;
            for g in [SKNLGRP_INET_TCP_DESTROY, SKNLGRP_INET6_TCP_DESTROY] {
                setsockopt_int(&fd, libc::SOL_NETLINK, libc::NETLINK_ADD_MEMBERSHIP, g)?;
            }
            // Overflow is reported by a counter below rather than an error that ends the watch.
            let _ = setsockopt_int(&fd, libc::SOL_NETLINK, libc::NETLINK_NO_ENOBUFS, 1);
            Ok(fd)
        };
        let fd = match netns {
            Some(n) => in_netns(n, make)?,
            None => make(),
        }
        .map_err(KernelError::Socket)?;
        Ok(DestroyEvents {
            fd: Some(fd),
            buf: vec![0u8; RECV_BUF],
            tail: running_tail_layout(),
            replay: None,
        })
    }

    /// Events from a recording (netlink messages one after another, as under
    /// `fixtures/kernel/`): every socket in it is delivered as destroyed by the first
    /// [`next`](Self::next), then [`finished`](Self::finished) says so.
    pub fn replay(recording: Vec<u8>, tail: TailLayout) -> DestroyEvents {
        DestroyEvents {
            fd: None,
            buf: Vec::new(),
            tail,
            replay: Some(recording),
        }
    }

    /// A replay whose events were all delivered (a live subscription never finishes).
    pub fn finished(&self) -> bool {
        self.replay.as_ref().is_some_and(Vec::is_empty)
    }

    /// Waits up to `timeout` for events and returns the sockets destroyed (possibly none).
    pub fn next(&mut self, timeout: Duration) -> Result<Vec<DiagSocket>> {
        let mut out = Vec::new();
        for d in self.next_raw(timeout)? {
            for m in diag::messages(&d) {
                let m = m?;
                if m.kind == diag::SOCK_DIAG_BY_FAMILY {
                    out.push(DiagSocket::decode(m.payload, self.tail)?);
                }
            }
        }
        Ok(out)
    }

    /// Waits up to `timeout` and returns the raw datagrams queued (for fixtures).
    pub fn next_raw(&mut self, timeout: Duration) -> Result<Vec<Vec<u8>>> {
        if let Some(rec) = &mut self.replay {
            let rec = std::mem::take(rec);
            return Ok(if rec.is_empty() {
                Vec::new()
            } else {
                vec![rec]
            });
        }
        let Some(fd) = &self.fd else {
            return Ok(Vec::new());
        };
        let fd = fd.as_fd();
        let ready =
            tcptune_os::poll::wait_readable(fd, timeout).map_err(|cause| KernelError::Io {
                what: "poll",
                cause,
            })?;
        let mut out = Vec::new();
        if !ready {
            return Ok(out);
        }
        loop {
            // Non-blocking, so this drains what is queued.
            match tcptune_os::socket::recv(fd, &mut self.buf, true) {
                Ok(n) => out.push(self.buf[..n].to_vec()),
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(out),
                    io::ErrorKind::Interrupted => continue,
                    _ => {
                        return Err(KernelError::Io {
                            what: "receive",
                            cause: e,
                        })
                    }
                },
            }
        }
    }
}
