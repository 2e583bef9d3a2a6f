//! The data phase of a test, shared by client and server: one thread per data stream (sending
//! blocks, optionally paced or from a memory file with `sendfile`, or reading and counting), and
//! a sampler thread that reads `tcp_info` and socket memory of every stream at a fixed period.
//!
//! Threads rather than one poll loop: each stream blocks in the kernel on its own socket, which
//! costs no CPU while waiting, and the two cores of a small host both move data. Every blocking
//! call has a 100 ms timeout so a stop request (or a hostile peer that stops reading) ends a
//! thread within that time.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tcptune_diagnose::Sample;
use tcptune_iperf3::{Results, StreamResult};
use tcptune_model::Dur;

pub use crate::send::SendPlan;
use crate::send::{self, Sender};
use crate::sock::{self, ZeroCopySource};
use crate::stream::{is_timeout, now, Marker, POLL};

/// Samples kept across all streams of a test (each is about 1.5 KiB in memory).
pub const MAX_SAMPLES: usize = 65_536;

/// Halves a sample series, keeping the first and every other one after it.
pub fn thin_half(v: &mut Vec<Sample>) {
    let mut k = 0usize;
    v.retain(|_| {
        k += 1;
        (k - 1) % 2 == 0
    });
}

/// One data connection and its role.
pub struct StreamSocket {
    /// iperf3's stream id.
    pub id: u32,
    /// True if this end sends on it.
    pub sends: bool,
    /// The connected socket.
    pub sock: TcpStream,
}

struct Slot {
    id: u32,
    sends: bool,
    sock: Arc<TcpStream>,
    bytes: Arc<AtomicU64>,
    /// `bytes` when the stream's thread first saw the clock pass the mark (`u64::MAX`: not yet).
    at_mark: Arc<AtomicU64>,
    local: Option<SocketAddr>,
    remote: Option<SocketAddr>,
}

/// What one stream did.
#[derive(Debug, Clone)]
pub struct StreamOutcome {
    /// iperf3's stream id.
    pub id: u32,
    /// Whether this end sends on it.
    pub sends: bool,
    /// Bytes written (sender) or read (receiver).
    pub bytes: u64,
    /// tcp_info samples, oldest first.
    pub samples: Vec<Sample>,
    /// The local address, when known.
    pub local: Option<SocketAddr>,
    /// The peer's address, when known.
    pub remote: Option<SocketAddr>,
    /// The congestion control in use.
    pub congestion: Option<String>,
    /// The socket's descriptor number (iperf3 reports it as the stream's `socket`).
    pub fd: i32,
}

/// Running data streams.
pub struct DataPhase {
    slots: Vec<Slot>,
    clock: Instant,
    started: Dur,
    stop_send: Arc<AtomicBool>,
    stop_all: Arc<AtomicBool>,
    sent_total: Arc<AtomicU64>,
    /// A sending stream reached the end of `-F`'s file (iperf3 then ends the test).
    file_ended: Arc<AtomicBool>,
    /// The mark, nanoseconds on the test clock (`u64::MAX`: none); see `mark_at`.
    mark: Arc<AtomicU64>,
    workers: Vec<JoinHandle<()>>,
    samples: Arc<Mutex<Vec<Vec<Sample>>>>,
    sampler_stop: Option<mpsc::Sender<()>>,
    sampler: Option<JoinHandle<()>>,
}

fn sample(clock: Instant, sock: &TcpStream) -> Option<Sample> {
    let info = tcptune_kernel::sys::tcp_info_of(sock.as_fd()).ok()?;
    Some(Sample {
        at_s: now(clock),
        info,
        skmem: sock::meminfo(sock.as_fd()),
    })
}

/// Fills a send buffer: "0123456789" repeated (`repeating`, iperf3's `--repeating-payload`),
/// else bytes that are not all zeros, so no link or tunnel compresses them.
pub fn fill_payload(buf: &mut [u8], repeating: bool) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = if repeating {
            b'0' + (i % 10) as u8
        } else {
            (i.wrapping_mul(2_654_435_761) >> 13) as u8
        };
    }
}

impl DataPhase {
    /// Starts a thread per stream and the sampler (`every`: the sampling period). `clock` is
    /// the test's time origin, shared with the samples' `at_s`.
    pub fn start(
        streams: Vec<StreamSocket>,
        plan: &SendPlan,
        every: Duration,
        clock: Instant,
    ) -> io::Result<DataPhase> {
        let stop_send = Arc::new(AtomicBool::new(false));
        let stop_all = Arc::new(AtomicBool::new(false));
        let sent_total = Arc::new(AtomicU64::new(0));
        let file_ended = Arc::new(AtomicBool::new(false));
        let mut block = Aligned::zeroed(plan.block.max(1) as usize);
        fill_payload(block.as_mut(), plan.repeating);
        let zc = if plan.zerocopy {
            Some(Arc::new(ZeroCopySource::new(block.as_ref())?))
        } else {
            None
        };
        let block = Arc::new(block);
        let mark = Arc::new(AtomicU64::new(u64::MAX));
        let mut slots = Vec::new();
        let mut workers = Vec::new();
        // Memory (or `-Z`) senders go to `send`'s groups; `-F`'s senders and every receiver
        // have a thread each.
        let mut senders: Vec<Sender> = Vec::new();
        for s in streams {
            s.sock.set_read_timeout(Some(POLL))?;
            s.sock.set_write_timeout(Some(POLL))?;
            let slot = Slot {
                id: s.id,
                sends: s.sends,
                local: s.sock.local_addr().ok(),
                remote: s.sock.peer_addr().ok(),
                sock: Arc::new(s.sock),
                bytes: Arc::new(AtomicU64::new(0)),
                at_mark: Arc::new(AtomicU64::new(u64::MAX)),
            };
            let sock = slot.sock.clone();
            let bytes = slot.bytes.clone();
            let marker = Marker {
                clock,
                mark: mark.clone(),
                at_mark: slot.at_mark.clone(),
            };
            let file = match &plan.file {
                Some(p) => Some(open_file(p, slot.sends)?),
                None => None,
            };
            let handle = match (file, slot.sends) {
                (None, true) => {
                    senders.push(Sender {
                        sock,
                        bytes,
                        marker,
                    });
                    slots.push(slot);
                    continue;
                }
                (Some(file), true) => {
                    let (stop, ended) = (stop_send.clone(), file_ended.clone());
                    let (total, plan) = (sent_total.clone(), plan.clone());
                    std::thread::Builder::new()
                        .name(format!("send-{}", slot.id))
                        .spawn(move || {
                            let c = Counters {
                                bytes: &bytes,
                                total: &total,
                                marker: &marker,
                            };
                            send_file(&sock, file, &plan, &stop, &c, &ended)
                        })?
                }
                (file, false) => {
                    // No SO_RCVLOWAT and no SO_RCVBUF (unless -w): the reader wakes for every byte
                    // and drains until the socket is empty, as iperf3 does. Bytes left unread
                    // shrink the window the sender sees, and the kernel sizes the buffer by what
                    // the reader copied per RTT (rcv_space): a receiver that waited for a quarter
                    // of a 64 KiB buffer (as this one once did) got 0.74x iperf3's rate on a
                    // window-limited path (tests/serve_fidelity.rs).
                    let stop = stop_all.clone();
                    let len = plan.block.clamp(4096, 1 << 20) as usize;
                    std::thread::Builder::new()
                        .name(format!("recv-{}", slot.id))
                        .spawn(move || recv_loop(&sock, len, &stop, &bytes, &marker, file))?
                }
            };
            workers.push(handle);
            slots.push(slot);
        }
        let threads = send::threads_for(senders.len());
        for (k, group) in send::groups(senders, threads).into_iter().enumerate() {
            let stop = stop_send.clone();
            let total = sent_total.clone();
            let block = block.clone();
            let zc = zc.clone();
            let plan = plan.clone();
            workers.push(
                std::thread::Builder::new()
                    .name(format!("send-{k}"))
                    .spawn(move || {
                        let block = (*block).as_ref();
                        send::send_group(&group, block, zc.as_deref(), &plan, &stop, &total)
                    })?,
            );
        }
        let samples = Arc::new(Mutex::new(vec![Vec::new(); slots.len()]));
        let (tx, rx) = mpsc::channel::<()>();
        let socks: Vec<Arc<TcpStream>> = slots.iter().map(|s| s.sock.clone()).collect();
        let store = samples.clone();
        // Memory stays bounded however long a test runs (a server cannot be made to hold a
        // day of 20 Hz samples of 256 streams): past the cap, every other sample goes.
        let per_stream_cap = (MAX_SAMPLES / slots.len().max(1)).max(64);
        let sampler = std::thread::Builder::new()
            .name("sampler".into())
            .spawn(move || loop {
                let taken: Vec<Option<Sample>> = socks.iter().map(|s| sample(clock, s)).collect();
                if let Ok(mut st) = store.lock() {
                    for (v, s) in st.iter_mut().zip(taken) {
                        v.extend(s);
                        if v.len() >= per_stream_cap {
                            thin_half(v);
                        }
                    }
                }
                // The period doubles as the wait for the stop message.
                match rx.recv_timeout(every) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => break,
                }
            })?;
        Ok(DataPhase {
            slots,
            clock,
            started: now(clock),
            stop_send,
            stop_all,
            sent_total,
            file_ended,
            mark,
            workers,
            samples,
            sampler_stop: Some(tx),
            sampler: Some(sampler),
        })
    }

    /// When the data phase started, on the test clock.
    pub fn started(&self) -> Dur {
        self.started
    }

    /// Bytes moved so far by each stream (in stream order).
    pub fn bytes(&self) -> Vec<u64> {
        self.slots
            .iter()
            .map(|s| s.bytes.load(Ordering::Relaxed))
            .collect()
    }

    /// Whether a sending stream reached the end of `-F`'s file.
    pub fn file_ended(&self) -> bool {
        self.file_ended.load(Ordering::Relaxed)
    }

    /// Bytes all sending streams have written together.
    pub fn sent_total(&self) -> u64 {
        self.sent_total.load(Ordering::Relaxed)
    }

    /// The latest sample of each stream; one the sampler has not reached yet (a test over
    /// within its first period, `-F` of a small file) is read now, so an interval always has
    /// the figures iperf3 reads at its end.
    pub fn latest(&self) -> Vec<Option<Sample>> {
        let stored: Vec<Option<Sample>> = match self.samples.lock() {
            Ok(s) => s.iter().map(|v| v.last().cloned()).collect(),
            Err(_) => vec![None; self.slots.len()],
        };
        stored
            .into_iter()
            .zip(&self.slots)
            .map(|(s, slot)| s.or_else(|| sample(self.clock, &slot.sock)))
            .collect()
    }

    /// Each stream's id and whether this end sends on it.
    pub fn ids(&self) -> Vec<(u32, bool)> {
        self.slots.iter().map(|s| (s.id, s.sends)).collect()
    }

    /// Asks every stream to note its byte count when the test clock passes `at` (an interval's
    /// end, the end of `-O`'s omitted seconds), replacing the previous mark. The stream threads
    /// note it themselves, at their first read or write after `at`, so a caller woken late by
    /// a busy host does not move the boundary.
    pub fn mark_at(&self, at: Dur) {
        // Unset first: no stream may note the new mark into the old one's slot.
        self.mark.store(u64::MAX, Ordering::SeqCst);
        for s in &self.slots {
            s.at_mark.store(u64::MAX, Ordering::SeqCst);
        }
        self.mark.store(at.nanos(), Ordering::SeqCst);
    }

    /// Each stream's bytes at the mark (its current bytes if it has not passed it: an idle
    /// stream).
    pub fn bytes_at_mark(&self) -> Vec<u64> {
        self.slots
            .iter()
            .map(|s| match s.at_mark.load(Ordering::Relaxed) {
                u64::MAX => s.bytes.load(Ordering::Relaxed),
                b => b,
            })
            .collect()
    }

    /// Stops writing (the test's end); receivers keep draining.
    pub fn stop_senders(&self) {
        self.stop_send.store(true, Ordering::Relaxed);
    }

    /// Stops every thread, takes a last sample of each stream and returns what each did. The
    /// sockets stay open until the returned outcome's owner drops the phase's sockets (here:
    /// when this returns, as the slots are consumed).
    pub fn finish(mut self) -> Vec<StreamOutcome> {
        self.stop_send.store(true, Ordering::Relaxed);
        self.stop_all.store(true, Ordering::Relaxed);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        drop(self.sampler_stop.take());
        if let Some(s) = self.sampler.take() {
            let _ = s.join();
        }
        let mut all = match self.samples.lock() {
            Ok(mut s) => std::mem::take(&mut *s),
            Err(_) => vec![Vec::new(); self.slots.len()],
        };
        all.resize_with(self.slots.len(), Vec::new);
        self.slots
            .iter()
            .zip(all)
            .map(|(s, mut samples)| {
                samples.extend(sample(self.clock, &s.sock));
                StreamOutcome {
                    id: s.id,
                    sends: s.sends,
                    bytes: s.bytes.load(Ordering::Relaxed),
                    samples,
                    local: s.local,
                    remote: s.remote,
                    congestion: sock::congestion(s.sock.as_fd()),
                    fd: s.sock.as_raw_fd(),
                }
            })
            .collect()
    }
}

impl Drop for DataPhase {
    fn drop(&mut self) {
        self.stop_send.store(true, Ordering::Relaxed);
        self.stop_all.store(true, Ordering::Relaxed);
        drop(self.sampler_stop.take());
    }
}

/// Segments a stream retransmitted over the test, from its first and last `tcp_info`.
pub fn retrans_of(samples: &[Sample]) -> Option<i64> {
    let first = samples.first()?.info.total_retrans?;
    let last = samples.last()?.info.total_retrans?;
    Some(last.wrapping_sub(first) as i64)
}

/// This process's user and system CPU since `cpu_at_start` (`sock::cpu_times`), percent of
/// one core over `secs`, as iperf3 reports them.
pub fn cpu_percent(cpu_at_start: (f64, f64), secs: f64) -> (f64, f64) {
    let (u1, s1) = sock::cpu_times();
    let wall = secs.max(1e-9);
    (
        (u1 - cpu_at_start.0) / wall * 100.0,
        (s1 - cpu_at_start.1) / wall * 100.0,
    )
}

/// This side's iperf3 results (the part both client and server send): CPU use over `secs`
/// as percentages from the `cpu_times` taken at the start, and per stream its bytes and, for
/// senders, retransmits. The caller adds its extension.
pub fn own_results(outcomes: &[StreamOutcome], secs: f64, cpu_at_start: (f64, f64)) -> Results {
    let (cu, cs) = cpu_percent(cpu_at_start, secs);
    Results {
        cpu_util_total: cu + cs,
        cpu_util_user: cu,
        cpu_util_system: cs,
        sender_has_retransmits: if outcomes.iter().any(|o| o.sends) {
            1
        } else {
            -1
        },
        congestion_used: outcomes.iter().find_map(|o| o.congestion.clone()),
        streams: outcomes
            .iter()
            .map(|o| StreamResult {
                id: o.id as i64,
                bytes: o.bytes,
                retransmits: if o.sends {
                    retrans_of(&o.samples).unwrap_or(0)
                } else {
                    -1
                },
                jitter: 0.0,
                errors: 0,
                omitted_errors: Some(0),
                packets: 0,
                omitted_packets: Some(0),
                start_time: Some(0.0),
                end_time: Some(secs),
            })
            .collect(),
        server_output_json: None,
        server_output_text: None,
        extension: None,
    }
}

/// A page-aligned buffer, as iperf3's (it maps its blocks). A large `Vec` starts 16 bytes into
/// a page; on veth here a minimal receiver reading 128 KiB into such a buffer was slower than
/// into an aligned one in 6 of 7 alternating pairs (the kernel's copy to user space).
struct Aligned {
    v: Vec<u8>,
    off: usize,
    len: usize,
}

impl Aligned {
    const PAGE: usize = 4096;

    fn zeroed(len: usize) -> Aligned {
        let v = vec![0u8; len + Self::PAGE];
        let off = v.as_ptr().align_offset(Self::PAGE).min(Self::PAGE);
        Aligned { v, off, len }
    }
}

impl AsRef<[u8]> for Aligned {
    fn as_ref(&self) -> &[u8] {
        &self.v[self.off..self.off + self.len]
    }
}

impl AsMut<[u8]> for Aligned {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.v[self.off..self.off + self.len]
    }
}

/// `-b`'s pacing: waits (at most 100 ms) when the rate does not yet allow the bytes sent so
/// far; true when it waited.
fn pace(plan: &SendPlan, mine: u64, start: Instant) -> bool {
    match send::pacing_wait(plan, mine, start) {
        Some(wait) => {
            std::thread::sleep(wait.min(POLL));
            true
        }
        None => false,
    }
}

/// iperf3's `-F` file, opened as iperf3 opens it: to read (a sending stream), or to write,
/// created or emptied, readable by its owner only (a receiving one).
fn open_file(path: &std::path::Path, sends: bool) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = if sends {
        std::fs::File::open(path)
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
    };
    f.map_err(|e| io::Error::new(e.kind(), format!("-F {}: {e}", path.display())))
}

/// A sending stream's counters.
struct Counters<'a> {
    bytes: &'a AtomicU64,
    total: &'a AtomicU64,
    marker: &'a Marker,
}

/// A sending stream under `-F`: each block read from the file is written to the socket; the
/// file's end (or a read error) ends the stream and tells the driver (`ended`), as iperf3
/// ends the test there.
fn send_file(
    sock: &TcpStream,
    mut file: std::fs::File,
    plan: &SendPlan,
    stop: &AtomicBool,
    c: &Counters,
    ended: &AtomicBool,
) {
    let mut buf = vec![0u8; plan.block.max(1) as usize];
    // The block read and not yet written: buf[at..end].
    let (mut at, mut end) = (0usize, 0usize);
    let start = Instant::now();
    let mut mine = 0u64;
    let mut w = sock;
    while !stop.load(Ordering::Relaxed) {
        c.marker.check(mine);
        if at == end {
            let mut want = buf.len();
            if let Some(limit) = plan.bytes_total {
                let so_far = c.total.load(Ordering::Relaxed);
                if so_far >= limit {
                    return;
                }
                want = want.min((limit - so_far) as usize);
            }
            match file.read(&mut buf[..want]) {
                Ok(n) if n > 0 => (at, end) = (0, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                _ => {
                    ended.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
        if pace(plan, mine, start) {
            continue;
        }
        match w.write(&buf[at..end]) {
            Ok(0) => return,
            Ok(n) => {
                at += n;
                mine += n as u64;
                c.bytes.fetch_add(n as u64, Ordering::Relaxed);
                c.total.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if is_timeout(&e) => {}
            Err(_) => return,
        }
    }
}

/// A receiving stream: reads and counts, and under `-F` writes what it read to the file (a
/// file that fails to take a write is let go; the count goes on, as iperf3's).
fn recv_loop(
    sock: &TcpStream,
    len: usize,
    stop: &AtomicBool,
    bytes: &AtomicU64,
    marker: &Marker,
    mut file: Option<std::fs::File>,
) {
    let mut buf = Aligned::zeroed(len);
    let buf = buf.as_mut();
    let mut r = sock;
    let mut mine = 0u64;
    let mut keep = |data: &[u8]| {
        if file.as_mut().is_some_and(|f| f.write_all(data).is_err()) {
            file = None;
        }
    };
    while !stop.load(Ordering::Relaxed) {
        marker.check(mine);
        match r.read(buf) {
            Ok(0) => return,
            Ok(n) => {
                mine += n as u64;
                bytes.fetch_add(n as u64, Ordering::Relaxed);
                keep(&buf[..n]);
            }
            Err(e) if is_timeout(&e) => {}
            Err(_) => return,
        }
    }
    // What arrived before the end of the test is received: a short test (`-n 1M` over
    // loopback) can end before this thread first ran. Read what is queued now, without
    // waiting, and at most a bound, so a peer that keeps sending cannot hold the thread.
    if sock.set_nonblocking(true).is_err() {
        return;
    }
    let mut left = DRAIN_AT_STOP_BYTES;
    while left > 0 {
        match r.read(buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                left = left.saturating_sub(n as u64);
                bytes.fetch_add(n as u64, Ordering::Relaxed);
                keep(&buf[..n]);
            }
        }
    }
}

/// The most a receiving stream reads after the test ended (what its socket could hold).
const DRAIN_AT_STOP_BYTES: u64 = 64 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_the_first_sample_and_halves() {
        let mut v: Vec<Sample> = (0..10u64)
            .map(|k| Sample {
                at_s: Dur::from_millis(k),
                info: Default::default(),
                skmem: None,
            })
            .collect();
        thin_half(&mut v);
        let at: Vec<u64> = v.iter().map(|s| s.at_s.nanos() / 1_000_000).collect();
        assert_eq!(at, [0, 2, 4, 6, 8]);
    }

    #[test]
    fn repeating_payload_is_iperf2s_digits() {
        let mut b = [0u8; 23];
        super::fill_payload(&mut b, true);
        assert_eq!(&b, b"01234567890123456789012");
        super::fill_payload(&mut b, false);
        assert!(b.iter().any(|&x| x != 0) && !b.starts_with(b"0123"));
    }
}
