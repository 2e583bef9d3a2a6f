//! The emulator's I/O edge (Linux): two TUN devices, one in each host's namespace, joined
//! through the two pipeline directions by a single-threaded event loop, plus the control
//! socket protocol that `lab status` and `lab set` speak.
//!
//! The loop: read what each host's TUN offers (at most at the host's line rate, so the host's
//! own device queue of `txqueuelen` packets fills the way a NIC queue does), feed it to the
//! direction with the current monotonic time, write what is due to the other TUN, and sleep in
//! `ppoll` until the next packet is due, a TUN becomes readable, a control client connects or
//! writes ([`control`]), or a stop signal arrives (signalfd). Timer slack is set to 1 ns so wakeups are precise.
//!
//! TUN offloads are on, so senders hand over TSO super-packets. While a direction needs
//! per-packet decisions ([`crate::config::LinkConfig::needs_per_packet`]) its super-packets are segmented in
//! software; what leaves together is coalesced again before it is written ([`gro`]), so the
//! receiving stack sees GRO-sized packets as from a real NIC. `lab set` switches live.

pub mod control;
pub mod gro;
pub mod tun;

use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_model::{Dur, Rate};
use tcptune_os::poll::PollFd;

use crate::config::{ConfigError, LinkSpec};
use crate::pipeline::{Counters, Direction, Nanos, Packet};
use tun::{Frame, Tun, MAX_FRAME, VNET_HDR_LEN};

/// Frames read from one TUN before the loop delivers what is due (small: each offloaded
/// frame costs ~10 µs, and packets waiting for delivery must not wait for a long batch).
const BATCH: usize = 8;
/// Bytes charged per wire packet at a host's line rate (the Ethernet header, as on a veth).
const NIC_OVERHEAD: u64 = 14;
/// Spare frame buffers kept for reuse (64 KiB each).
const POOL_MAX: usize = 256;

/// Monotonic time in ns.
pub fn now_ns() -> Nanos {
    tcptune_os::process::monotonic_ns()
}

/// Which host a TUN belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The client host's device.
    Client,
    /// The server host's device.
    Server,
}

/// What the loop did at one host's device.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct PortStats {
    /// Frames read from the host (it sent them).
    pub frames_read: u64,
    /// Bytes read from the host (virtio header excluded).
    pub bytes_read: u64,
    /// Frames written to the host (it received them).
    pub frames_written: u64,
    /// Writes the kernel refused (counted, never retried).
    pub write_errors: u64,
}

/// How late packets were picked up for writing compared with their scheduled time (1 µs
/// buckets up to 20 ms).
pub struct Lateness {
    buckets: Vec<u64>,
    max_ns: u64,
}

const LATE_BUCKETS: usize = 20_000;

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            buckets: vec![0; LATE_BUCKETS + 1],
            max_ns: 0,
        }
    }
}

impl Lateness {
    fn add(&mut self, late_ns: u64) {
        let i = ((late_ns / 1000) as usize).min(LATE_BUCKETS);
        self.buckets[i] += 1;
        self.max_ns = self.max_ns.max(late_ns);
    }
    /// The `q` quantile in µs (the upper edge of its bucket), None before any packet.
    fn quantile_us(&self, q: f64) -> Option<u64> {
        let n: u64 = self.buckets.iter().sum();
        if n == 0 {
            return None;
        }
        let rank = ((n as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(i as u64 + 1);
            }
        }
        Some(LATE_BUCKETS as u64)
    }
    fn summary(&self) -> LatenessSummary {
        LatenessSummary {
            p50_us: self.quantile_us(0.5),
            p99_us: self.quantile_us(0.99),
            max_us: (self.max_ns > 0).then(|| self.max_ns.div_ceil(1000)),
        }
    }
}

/// How late the emulator wrote packets compared with their scheduled departure: its own
/// contribution to delay error (wakeup latency, CPU contention).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct LatenessSummary {
    /// Median lateness, µs; `None` before the first write.
    pub p50_us: Option<u64>,
    /// 99th percentile lateness, µs.
    pub p99_us: Option<u64>,
    /// The largest lateness, µs.
    pub max_us: Option<u64>,
}

/// One host's end of the link.
pub struct Port {
    tun: Tun,
    /// The host's NIC rate: frames are read no faster than this.
    pub line_rate: Option<Rate>,
    nic_free_at: Nanos,
    stats: PortStats,
}

impl Port {
    /// A port on the TUN device `tun`, reading no faster than `line_rate` (`None`: unpaced).
    pub fn new(tun: Tun, line_rate: Option<Rate>) -> Port {
        Port {
            tun,
            line_rate,
            nic_free_at: 0,
            stats: PortStats::default(),
        }
    }
}

/// Everything `lab status` shows about the link.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EmuStatus {
    /// The link as configured now.
    pub link: LinkSpec,
    /// True while TSO super-packets pass whole; false while they are segmented in software
    /// because a per-packet impairment is on.
    pub offloads: bool,
    /// Client → server.
    pub up: Counters,
    /// Server → client.
    pub down: Counters,
    /// What the loop did at the client's device.
    pub client: PortStats,
    /// What the loop did at the server's device.
    pub server: PortStats,
    /// The client's NIC rate, bits/s (`None`: unpaced).
    pub client_line_rate_bps: Option<Rate>,
    /// The server's NIC rate, bits/s (`None`: unpaced).
    pub server_line_rate_bps: Option<Rate>,
    /// Time since the emulator started, seconds.
    pub uptime_s: Dur,
    /// Lateness of writes against the schedule, both directions, since the start.
    pub lateness: LatenessSummary,
}

/// A request on the control socket: one JSON object per line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// Answer with the status.
    Status,
    /// Replace the link's settings (validated first).
    SetLink {
        /// The new settings for both directions; packets already held keep their schedule.
        link: Box<LinkSpec>,
    },
    /// Pace a host's reads at a new NIC rate.
    SetLineRate {
        /// Which host's NIC.
        side: Side,
        /// The new rate, bits/s; `None` removes the pacing.
        rate_bps: Option<Rate>,
    },
    /// Stop the loop (the process exits after answering).
    Stop,
}

/// The answer: one JSON object per line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reply {
    /// Whether the request was carried out.
    pub ok: bool,
    /// Why not, when `ok` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The status, for [`Request::Status`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EmuStatus>,
}

/// Why the loop returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// SIGINT, SIGTERM or SIGHUP arrived.
    Signal,
    /// A [`Request::Stop`] on the control socket.
    StopRequest,
}

/// The running link: two ports and two directions.
pub struct Emulator {
    client: Port,
    server: Port,
    up: Direction<Frame>,
    down: Direction<Frame>,
    spec: LinkSpec,
    offloads: bool,
    started: Nanos,
    late: Lateness,
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (call before starting other threads so
/// they inherit the mask) and returns a signalfd that becomes readable when one arrives.
pub fn stop_signals() -> io::Result<OwnedFd> {
    tcptune_os::signal::stop_signalfd()
}

impl Emulator {
    /// The link between the two ports; refuses a spec that fails [`LinkSpec::validate`].
    pub fn new(client: Port, server: Port, spec: LinkSpec) -> Result<Emulator, ConfigError> {
        let up = Direction::new(spec.up.clone(), spec.seed, 0)?;
        let down = Direction::new(spec.down.clone(), spec.seed, 1)?;
        let mut e = Emulator {
            client,
            server,
            up,
            down,
            spec,
            offloads: false,
            started: now_ns(),
            late: Lateness::default(),
        };
        e.apply_offloads()
            .map_err(|err| ConfigError::Invalid(format!("cannot set TUN offloads: {err}")))?;
        Ok(e)
    }

    /// TUN offloads stay on (the senders hand over 64 KB at a time); when a direction needs
    /// per-packet decisions its super-packets are segmented in software ([`gro::segment`]).
    fn apply_offloads(&mut self) -> io::Result<()> {
        self.client.tun.set_offloads(true)?;
        self.server.tun.set_offloads(true)?;
        self.offloads = !(self.spec.up.needs_per_packet() || self.spec.down.needs_per_packet());
        Ok(())
    }

    /// Counters, settings and lateness now, as the control socket reports them.
    pub fn status(&self) -> EmuStatus {
        let now = now_ns();
        EmuStatus {
            link: self.spec.clone(),
            offloads: self.offloads,
            up: self.up.counters(now),
            down: self.down.counters(now),
            client: self.client.stats.clone(),
            server: self.server.stats.clone(),
            client_line_rate_bps: self.client.line_rate,
            server_line_rate_bps: self.server.line_rate,
            uptime_s: Dur::from_nanos(now - self.started),
            lateness: self.late.summary(),
        }
    }

    /// Applies a control request; `Err` carries the one-sentence refusal.
    pub fn handle(&mut self, req: Request) -> Result<Option<EmuStatus>, String> {
        match req {
            Request::Status => Ok(Some(self.status())),
            Request::SetLink { link } => {
                link.validate().map_err(|e| e.to_string())?;
                let link = *link;
                self.up
                    .set_config(link.up.clone())
                    .map_err(|e| e.to_string())?;
                self.down
                    .set_config(link.down.clone())
                    .map_err(|e| e.to_string())?;
                self.spec = link;
                self.apply_offloads().map_err(|e| e.to_string())?;
                Ok(None)
            }
            Request::SetLineRate { side, rate_bps } => {
                match side {
                    Side::Client => self.client.line_rate = rate_bps,
                    Side::Server => self.server.line_rate = rate_bps,
                }
                Ok(None)
            }
            Request::Stop => Ok(None),
        }
    }

    /// Reads up to a batch from `port` into `dir`; true if the batch was full (more may wait).
    /// Frames are read straight into buffers from `pool` (no copy).
    fn ingest(
        port: &mut Port,
        dir: &mut Direction<Frame>,
        pool: &mut Vec<Vec<u8>>,
        mut now: Nanos,
    ) -> bool {
        for _ in 0..BATCH {
            if port.nic_free_at > now {
                return false;
            }
            let mut buf = pool.pop().unwrap_or_else(|| Vec::with_capacity(MAX_FRAME));
            match port.tun.read_into(&mut buf) {
                Ok(true) => {}
                // EIO happens while the device is down; nothing to read either way.
                Ok(false) | Err(_) => {
                    pool.push(buf);
                    return false;
                }
            }
            if buf.len() <= VNET_HDR_LEN {
                pool.push(buf);
                continue;
            }
            // The frame's arrival is now, not when the loop's turn began: reading the batch
            // before it (and the other TUN's) takes microseconds, tens when preempted, and a
            // frame stamped before it existed would leave that much early.
            now = now_ns();
            // A small frame gets an exact-size copy, so a long delay line of small packets
            // does not hold 64 KiB per packet; big (offloaded) frames keep their buffer.
            let frame = if buf.len() < MAX_FRAME / 8 {
                let copy = buf.clone();
                pool.push(buf);
                Frame { buf: copy }
            } else {
                Frame { buf }
            };
            let wire = frame.wire_bytes() + NIC_OVERHEAD * u64::from(frame.wire_packets());
            port.stats.frames_read += 1;
            port.stats.bytes_read += frame.wire_bytes();
            if let Some(rate) = port.line_rate {
                let tx = (wire as f64 * 8e9 / rate.bps()) as u64;
                port.nic_free_at = port.nic_free_at.max(now) + tx;
            }
            if dir.config().needs_per_packet() {
                if let Some(segs) = gro::segment(&frame.buf) {
                    if frame.buf.capacity() >= MAX_FRAME && pool.len() < POOL_MAX {
                        pool.push(frame.buf);
                    }
                    for buf in segs {
                        dir.enqueue(now, Frame { buf });
                    }
                    continue;
                }
            }
            dir.enqueue(now, frame);
        }
        true
    }

    fn deliver(
        dir: &mut Direction<Frame>,
        to: &mut Port,
        late: &mut Lateness,
        pool: &mut Vec<Vec<u8>>,
        due: &mut Vec<Vec<u8>>,
    ) {
        let now = now_ns();
        dir.poll_each(now, |t, f| {
            late.add(now.saturating_sub(t));
            due.push(f.buf);
        });
        if due.is_empty() {
            return;
        }
        let stats = &mut to.stats;
        gro::coalesce(due, |frame| match to.tun.write_frame(frame) {
            Ok(()) => stats.frames_written += 1,
            Err(_) => stats.write_errors += 1,
        });
        // Keep full-size buffers for reuse (copies of small frames are exact-size).
        for buf in due.drain(..) {
            if buf.capacity() >= MAX_FRAME && pool.len() < POOL_MAX {
                pool.push(buf);
            }
        }
    }

    /// Answers one request line: the reply, and whether it asks the loop to stop.
    fn answer(&mut self, line: &str) -> (Reply, bool) {
        match serde_json::from_str::<Request>(line) {
            Err(e) => (
                Reply {
                    ok: false,
                    error: Some(format!("bad control request: {e}")),
                    status: None,
                },
                false,
            ),
            Ok(req) => {
                let stop = matches!(req, Request::Stop);
                match self.handle(req) {
                    Ok(status) => (
                        Reply {
                            ok: true,
                            error: None,
                            status,
                        },
                        stop,
                    ),
                    Err(e) => (
                        Reply {
                            ok: false,
                            error: Some(e),
                            status: None,
                        },
                        false,
                    ),
                }
            }
        }
    }

    /// Runs until a stop signal arrives on `signals` or a control client asks to stop.
    pub fn run(
        &mut self,
        control: Option<&UnixListener>,
        signals: BorrowedFd<'_>,
    ) -> io::Result<Exit> {
        set_timer_slack_1ns();
        if let Some(l) = control {
            l.set_nonblocking(true)?;
        }
        let mut pool: Vec<Vec<u8>> = Vec::new();
        let mut due: Vec<Vec<u8>> = Vec::new();
        let mut clients = control::Control::default();
        loop {
            // Due packets first: a batch of reads must not make them late.
            Self::deliver(
                &mut self.up,
                &mut self.server,
                &mut self.late,
                &mut pool,
                &mut due,
            );
            Self::deliver(
                &mut self.down,
                &mut self.client,
                &mut self.late,
                &mut pool,
                &mut due,
            );
            let now = now_ns();
            let more_c = Self::ingest(&mut self.client, &mut self.up, &mut pool, now);
            let more_s = Self::ingest(&mut self.server, &mut self.down, &mut pool, now);
            Self::deliver(
                &mut self.up,
                &mut self.server,
                &mut self.late,
                &mut pool,
                &mut due,
            );
            Self::deliver(
                &mut self.down,
                &mut self.client,
                &mut self.late,
                &mut pool,
                &mut due,
            );
            let now = now_ns();

            let mut next: Option<Nanos> = [self.up.next_wakeup(), self.down.next_wakeup()]
                .into_iter()
                .flatten()
                .min();
            let mut fds = Vec::with_capacity(4);
            for port in [&self.client, &self.server] {
                if port.nic_free_at > now {
                    next = Some(next.map_or(port.nic_free_at, |n| n.min(port.nic_free_at)));
                } else {
                    fds.push(PollFd::readable(port.tun.fd()));
                }
            }
            let sig_idx = fds.len();
            fds.push(PollFd::readable(signals));
            if let Some(l) = control {
                fds.push(PollFd::readable(l.as_fd()));
                fds.extend(clients.fds().map(PollFd::readable));
            }
            let wait = if more_c || more_s {
                Some(0)
            } else {
                next.map(|t| t.saturating_sub(now_ns()))
            };
            match tcptune_os::poll::poll(&mut fds, wait.map(Duration::from_nanos)) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
                Ok(_) => {}
            }
            if fds[sig_idx].ready() {
                return Ok(Exit::Signal);
            }
            if let Some(l) = control {
                // Only when the listener or a client woke the loop, so packets pay nothing
                // for a client that waits; one past its deadline is dropped at the next.
                let woken = fds[sig_idx + 1..].iter().any(PollFd::ready);
                drop(fds);
                if woken && clients.serve(l, std::time::Instant::now(), |line| self.answer(line)) {
                    return Ok(Exit::StopRequest);
                }
            }
        }
    }
}

fn set_timer_slack_1ns() {
    tcptune_os::process::set_timer_slack(1);
}

/// Sends one request to the control socket at `path` and returns the reply.
pub fn request(path: &std::path::Path, req: &Request) -> io::Result<Reply> {
    let stream = std::os::unix::net::UnixStream::connect(path)?;
    stream.set_read_timeout(Some(control::CLIENT_DEADLINE))?;
    let mut text = serde_json::to_string(req).map_err(io::Error::other)?;
    text.push('\n');
    (&stream).write_all(text.as_bytes())?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    serde_json::from_str(&line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests;
