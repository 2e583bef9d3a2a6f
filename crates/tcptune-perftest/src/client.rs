//! `tcptune test HOST`: the client side of one iperf3 test over real sockets, with interval
//! reports while it runs, the final report in iperf3's shape, and the diagnosis.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::peer::{LocalPeer, PeerSampler};
use crate::probe;
use tcptune_diagnose::advice::{HostSettings, KnownSettings};
use tcptune_diagnose::engine::{self, CpuScope, CpuUse};
use tcptune_diagnose::latency::{DelayPlaces, LatencyReport, Probe, ProbeKind};
use tcptune_diagnose::throughput::{
    diagnose_bidir, diagnose_stream, diagnose_test, StreamInput, TestContext,
};
use tcptune_diagnose::Sample;
use tcptune_model::kernel::{CongestionControl, KernelSource, KernelVersion};
use tcptune_model::{Bytes, Dur, Rate};
use tcptune_perf::params::{MAX_UDP_BLOCKSIZE, MIN_UDP_BLOCKSIZE};
use tcptune_perf::session::{ClientEvent, ClientSession, SessionError, Timeouts};
use tcptune_perf::{Direction, Params, Protocol, Results};

use crate::control::{Clock, Control, Got};
use crate::data::{own_results, retrans_of, DataPhase, SendPlan, StreamOutcome, StreamSocket};
use crate::report::*;
use crate::sock::{self, DataOptions};
use crate::{ServerSamples, TestError};

/// What `tcptune test` was asked to do.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub host: String,
    pub port: u16,
    pub params: Params,
    /// Interval reports every this long; none = no interval reports.
    pub interval: Option<Duration>,
    /// tcp_info sampling period (100 ms or less).
    pub sample_every: Duration,
    pub path_rate: Option<Rate>,
    pub connect_timeout: Duration,
    /// Set (by a signal handler) to end the test early: CLIENT_TERMINATE is sent, as iperf3
    /// does on Ctrl-C, so the server ends its side at once.
    pub interrupt: Option<&'static AtomicBool>,
    /// This host's TCP settings (read by the caller), so recommendations are checked against
    /// the values in effect; empty when unknown.
    pub host_settings: HostSettings,
    /// Local address of every connection (`-B`).
    pub bind: Option<std::net::IpAddr>,
    /// Local port of the first data connection, the next ones counting up (`--cport`).
    pub cport: Option<u16>,
    /// Only this address family (`-4`, `-6`).
    pub family: Option<Family>,
    /// Probe latency: round trips before the load and under it (`crate::probe`).
    pub latency: bool,
    /// Socket options of the data connections (`--bind-dev`, `--fq-rate`, `--snd-timeout`).
    pub data_extra: sock::Extra,
    /// Socket options of the control connection (`--bind-dev`, `--cntl-ka`).
    pub control_extra: sock::Extra,
    /// UDP datagrams with the don't-fragment bit (`--dont-fragment`).
    pub dont_fragment: bool,
}

fn kernel() -> (KernelVersion, KernelSource) {
    tcptune_kernel::sys::kernel_version_or_assumed()
}

/// One data connection as iperf3's `start.connected[]` lists it (TCP and UDP alike).
fn connected_entry(fd: i32, l: Option<SocketAddr>, r: Option<SocketAddr>) -> Connected {
    Connected {
        socket: fd,
        local_host: l.map(|a| a.ip().to_string()).unwrap_or_default(),
        local_port: l.map(|a| a.port()).unwrap_or(0),
        remote_host: r.map(|a| a.ip().to_string()).unwrap_or_default(),
        remote_port: r.map(|a| a.port()).unwrap_or(0),
    }
}

/// A SOL_SOCKET option of the first data socket (what iperf3 reports as the buffer sizes).
fn first_socket_option(first: Option<std::os::fd::BorrowedFd<'_>>, opt: i32) -> u32 {
    first
        .and_then(|fd| sock::get_int(fd, libc::SOL_SOCKET, opt).ok())
        .map(|v| v.max(0) as u32)
        .unwrap_or(0)
}

/// The test context the diagnosis needs, from the parameters, for the direction in which the
/// client sends (`client_sends`) or receives. `sender_cc` is the sending socket's congestion
/// control as that end reported it; `settings` this host's values, which are the peer's too
/// when the peer is this host (a loopback test).
pub fn context(
    params: &Params,
    path_rate: Option<Rate>,
    sender_cc: Option<&str>,
    settings: &HostSettings,
    peer_is_local: bool,
    client_sends: bool,
) -> TestContext {
    let (kernel, kernel_source) = kernel();
    let known = (settings != &HostSettings::default()).then(|| settings.clone());
    let peer = known.clone().filter(|_| peer_is_local);
    // The sender's own settings where the sender is this client; the server's are its own.
    let ours_send = client_sends;
    TestContext {
        path_rate,
        window: params.window.map(|w| Bytes::new(w as u64)),
        rate_cap: params.bandwidth_bps.map(|b| Rate::from_bps(b as f64)),
        congestion: sender_cc
            .or(params.congestion.as_deref())
            .and_then(|c| c.parse::<CongestionControl>().ok()),
        kernel,
        kernel_source,
        streams: params.parallel,
        settings: if client_sends {
            KnownSettings {
                sender: known,
                receiver: peer,
            }
        } else {
            KnownSettings {
                sender: peer,
                receiver: known,
            }
        },
        // Both tcptune's sender and iperf3's write as fast as the socket takes unless a rate
        // (-b, --fq-rate) or a byte or block count (-n, -k) sets the pace.
        bulk_sender: params.bandwidth_bps.is_none()
            && params.fqrate_bps.is_none()
            && params.bytes == 0
            && params.blocks == 0,
        write_bytes: Some(u64::from(params.len)).filter(|&l| l > 0),
        zerocopy: params.zerocopy && ours_send,
        cores: (ours_send || peer_is_local).then(|| spare_cores(params, peer_is_local)),
        // Both tcptune's and iperf3's receivers read as fast as the socket gives.
        bulk_receiver: true,
        loopback: peer_is_local,
        ..TestContext::default()
    }
}

/// The cores the sender's streams can have to themselves: this host's, less those the other
/// end takes when it runs here too, halved again when both directions run (--bidir).
fn spare_cores(params: &Params, peer_is_local: bool) -> u32 {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let ends = if peer_is_local { 2 } else { 1 };
    let directions = if params.direction == Direction::Bidirectional {
        2
    } else {
        1
    };
    (ncpu / ends / directions).max(1)
}

fn session_err(e: SessionError) -> TestError {
    TestError::Session(e)
}

/// Feeds whatever arrives on the control connection until `want` says stop.
fn pump(
    ctl: &mut Control,
    s: &mut ClientSession,
    clock: &Clock,
    mut want: impl FnMut(&ClientEvent) -> bool,
) -> Result<Vec<ClientEvent>, TestError> {
    let mut seen = Vec::new();
    loop {
        ctl.write(&s.take_output())
            .map_err(|e| TestError::io("writing to the control connection", e))?;
        match ctl
            .read(clock, s.deadline(), Duration::from_secs(1))
            .map_err(|e| TestError::io("reading the control connection", e))?
        {
            Got::Eof => {
                s.handle_eof().map_err(session_err)?;
                return Err(TestError::Session(SessionError::Closed {
                    phase: "talking to the server",
                }));
            }
            Got::Nothing => s.poll(clock.now()).map_err(session_err)?,
            Got::Data(n) => {
                let ev = s
                    .handle_input(ctl.data(n), clock.now())
                    .map_err(session_err)?;
                let done = ev.iter().any(&mut want);
                seen.extend(ev);
                if done {
                    ctl.write(&s.take_output())
                        .map_err(|e| TestError::io("writing to the control connection", e))?;
                    return Ok(seen);
                }
            }
        }
    }
}

use crate::sock::resolve;
pub use crate::sock::Family;

struct Ticker {
    prev_at: f64,
    prev_bytes: Vec<u64>,
    prev_retrans: Vec<Option<u32>>,
}

fn interval_report(
    t: &mut Ticker,
    now_s: f64,
    bytes: &[u64],
    latest: &[Option<Sample>],
    roles: &[(u32, bool)],
    fds: &[i32],
    client_sends_main: bool,
) -> IntervalReport {
    let secs = (now_s - t.prev_at).max(1e-9);
    let mut streams = Vec::new();
    for i in 0..bytes.len() {
        let b = bytes[i].saturating_sub(t.prev_bytes[i]);
        let info = latest[i].as_ref().map(|s| &s.info);
        let sender = roles[i].1;
        let retr_now = info.and_then(|i| i.total_retrans);
        let retransmits = if sender {
            match (t.prev_retrans[i], retr_now) {
                (Some(a), Some(b)) => Some(b.wrapping_sub(a) as u64),
                (None, Some(b)) => Some(b as u64),
                _ => None,
            }
        } else {
            None
        };
        t.prev_retrans[i] = retr_now.or(t.prev_retrans[i]);
        streams.push(IntervalStream {
            socket: fds[i],
            start: t.prev_at,
            end: now_s,
            seconds: secs,
            bytes: b,
            bits_per_second: b as f64 * 8.0 / secs,
            retransmits,
            snd_cwnd: info.and_then(|i| i.cwnd_bytes()).filter(|_| sender),
            snd_wnd: info.and_then(|i| i.snd_wnd).filter(|_| sender),
            rtt: info.and_then(|i| i.srtt_us()),
            rttvar: info.and_then(|i| i.rttvar_us),
            pmtu: info.and_then(|i| i.pmtu),
            rcv_wnd: info.and_then(|i| i.rcv_wnd).filter(|_| !sender),
            udp: None,
            omitted: false,
            sender,
        });
    }
    let sum_of = |main: bool| {
        let sel: Vec<&IntervalStream> = streams
            .iter()
            .filter(|s| s.sender == (client_sends_main == main))
            .collect();
        if sel.is_empty() {
            return None;
        }
        let bytes: u64 = sel.iter().map(|s| s.bytes).sum();
        let retr: Option<u64> = sel.iter().map(|s| s.retransmits).sum();
        Some(IntervalSum {
            start: t.prev_at,
            end: now_s,
            seconds: secs,
            bytes,
            bits_per_second: bytes as f64 * 8.0 / secs,
            retransmits: retr,
            udp: None,
            omitted: false,
            sender: client_sends_main == main,
        })
    };
    let sum = sum_of(true).unwrap_or(IntervalSum {
        start: t.prev_at,
        end: now_s,
        seconds: secs,
        bytes: 0,
        bits_per_second: 0.0,
        retransmits: None,
        udp: None,
        omitted: false,
        sender: client_sends_main,
    });
    let rev = sum_of(false);
    t.prev_at = now_s;
    t.prev_bytes = bytes.to_vec();
    IntervalReport {
        streams,
        sum,
        sum_bidir_reverse: rev,
    }
}

fn rtt_stats(samples: &[Sample]) -> (Option<u32>, Option<u32>, Option<u32>) {
    let r: Vec<u32> = samples.iter().filter_map(|s| s.info.srtt_us()).collect();
    if r.is_empty() {
        return (None, None, None);
    }
    let mean = (r.iter().map(|&x| x as u64).sum::<u64>() / r.len() as u64) as u32;
    (r.iter().max().copied(), r.iter().min().copied(), Some(mean))
}

fn end_side(
    fd: i32,
    bytes: u64,
    secs: f64,
    sender: bool,
    samples: &[Sample],
    retransmits: Option<i64>,
) -> EndSide {
    let (max_rtt, min_rtt, mean_rtt) = if sender {
        rtt_stats(samples)
    } else {
        (None, None, None)
    };
    EndSide {
        socket: fd,
        start: 0.0,
        end: secs,
        seconds: secs,
        bytes,
        bits_per_second: if secs > 0.0 {
            bytes as f64 * 8.0 / secs
        } else {
            0.0
        },
        retransmits: if sender { retransmits } else { None },
        max_snd_cwnd: if sender {
            samples.iter().filter_map(|s| s.info.cwnd_bytes()).max()
        } else {
            None
        },
        max_snd_wnd: if sender {
            samples.iter().filter_map(|s| s.info.snd_wnd).max()
        } else {
            None
        },
        max_rtt,
        min_rtt,
        mean_rtt,
        sender,
    }
}

fn sum(sides: &[&EndSide], secs: f64, sender: bool) -> EndSum {
    let bytes = sides.iter().map(|s| s.bytes).sum();
    EndSum {
        start: 0.0,
        end: secs,
        seconds: secs,
        bytes,
        bits_per_second: if secs > 0.0 {
            bytes as f64 * 8.0 / secs
        } else {
            0.0
        },
        retransmits: if sender {
            sides.iter().map(|s| s.retransmits).sum()
        } else {
            None
        },
        udp: None,
        sender,
    }
}

/// Runs one test against `cfg.host`. `on_interval` gets each interval report as it happens
/// (with the stream ids, in order).
pub fn run(
    cfg: &ClientConfig,
    on_interval: &mut dyn FnMut(&IntervalReport, &[u32]),
) -> Result<TestOutput, TestError> {
    run_with(cfg, &mut |_| {}, on_interval)
}

/// `run`, also handing over the `start` object once the data streams are connected (what
/// iperf3's `--json-stream` prints as its "start" event).
pub fn run_with(
    cfg: &ClientConfig,
    on_start: &mut dyn FnMut(&Start),
    on_interval: &mut dyn FnMut(&IntervalReport, &[u32]),
) -> Result<TestOutput, TestError> {
    let addr = resolve(&cfg.host, cfg.port, cfg.family)?;
    let clock = Clock::start();
    // The idle round trip: the handshakes of the test's own connections, before any data
    // (a probe connection of its own would be taken by a one-shot `iperf3 -s -1` for its test).
    let mut probes = Vec::new();
    let started_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let local = |port: u16| cfg.bind.map(|ip| SocketAddr::new(ip, port));
    let ctl_opts = DataOptions {
        bind: local(0),
        extra: cfg.control_extra.clone(),
        ..DataOptions::default()
    };
    let handshake = std::time::Instant::now();
    let ctl_sock = sock::connect(&addr, &ctl_opts, cfg.connect_timeout)
        .map_err(|e| TestError::Connect { addr, error: e })?;
    if cfg.latency {
        probes.push(probe::idle_handshake(clock.0, handshake.elapsed()));
    }
    let tcp_mss_default = sock::get_int(
        std::os::fd::AsFd::as_fd(&ctl_sock),
        libc::IPPROTO_TCP,
        libc::TCP_MAXSEG,
    )
    .map(|v| v.max(0) as u32)
    .unwrap_or(0);
    let mut ctl = Control::new(ctl_sock)
        .map_err(|e| TestError::io("setting up the control connection", e))?;
    // A UDP test without -l sends datagrams of the control connection's MSS (iperf3 3.12's
    // choice: no IP fragmentation on the path to the server).
    let mut params = cfg.params.clone();
    if params.protocol == Protocol::Udp && params.len == 0 {
        params.len = if tcp_mss_default > 0 {
            (tcp_mss_default as u64).clamp(MIN_UDP_BLOCKSIZE, MAX_UDP_BLOCKSIZE) as u32
        } else {
            1460
        };
    }
    let p = &params;
    let cookie = sock::random_cookie().map_err(|e| TestError::io("reading /dev/urandom", e))?;
    let mut s = ClientSession::new(cookie, p.clone(), clock.now(), Timeouts::default());
    let ev = pump(&mut ctl, &mut s, &clock, |e| {
        matches!(e, ClientEvent::CreateStreams { .. })
    })?;
    let (count, client_sends) = ev
        .iter()
        .find_map(|e| match e {
            ClientEvent::CreateStreams {
                count,
                client_sends,
            } => Some((*count, *client_sends)),
            _ => None,
        })
        .ok_or(TestError::Session(SessionError::Ended))?;
    if p.protocol == Protocol::Udp {
        let ctx = UdpCtx {
            addr,
            clock,
            started_at,
            tcp_mss_default,
            count,
            client_sends,
        };
        return run_udp(cfg, p, ctx, ctl, s, on_start, on_interval);
    }
    let mut socks = Vec::new();
    let mut initial = sock::Buffers::default();
    for i in 0..count {
        // --cport: the streams take consecutive ports from it.
        let port = cfg
            .cport
            .map(|c| c.saturating_add(i.min(u16::MAX as u32) as u16))
            .unwrap_or(0);
        let opts = DataOptions {
            window: p.window,
            congestion: p.congestion.clone(),
            mss: p.mss,
            nodelay: p.nodelay,
            tos: p.tos,
            bind: local(port).or_else(|| {
                (port != 0).then(|| {
                    let any: std::net::IpAddr = if addr.is_ipv4() {
                        std::net::Ipv4Addr::UNSPECIFIED.into()
                    } else {
                        std::net::Ipv6Addr::UNSPECIFIED.into()
                    };
                    SocketAddr::new(any, port)
                })
            }),
            extra: cfg.data_extra.clone(),
        };
        let handshake = std::time::Instant::now();
        let d = match sock::connect_reporting(&addr, &opts, cfg.connect_timeout) {
            Ok((d, b)) => {
                if cfg.latency {
                    probes.push(probe::idle_handshake(clock.0, handshake.elapsed()));
                }
                if i == 0 {
                    initial = b;
                }
                d
            }
            Err(e) => {
                // Tell the server at once (iperf3 does), so it does not wait for the streams.
                s.terminate();
                let _ = ctl.write(&s.take_output());
                return Err(TestError::io(
                    "opening a data connection (is -C a congestion control this kernel has, \
                     and --cport/-B free here?)",
                    e,
                ));
            }
        };
        let mut d = d;
        std::io::Write::write_all(&mut d, cookie.as_bytes())
            .map_err(|e| TestError::io("sending the cookie on a data connection", e))?;
        socks.push(StreamSocket {
            id: if i == 0 { 1 } else { i + 2 },
            sends: i < client_sends,
            sock: d,
        });
    }
    let connected: Vec<Connected> = socks
        .iter()
        .map(|st| {
            connected_entry(
                std::os::fd::AsRawFd::as_raw_fd(&st.sock),
                st.sock.local_addr().ok(),
                st.sock.peer_addr().ok(),
            )
        })
        .collect();
    let fds: Vec<i32> = connected.iter().map(|c| c.socket).collect();
    let start = Start {
        connected,
        version: format!("tcptune {}", env!("CARGO_PKG_VERSION")),
        system_info: sock::system_info(),
        timestamp: Timestamp::at(started_at),
        connecting_to: ConnectingTo {
            host: cfg.host.clone(),
            port: addr.port(),
        },
        cookie: cookie.as_str().to_string(),
        tcp_mss: p.mss,
        tcp_mss_default: p.mss.is_none().then_some(tcp_mss_default),
        target_bitrate: p.bandwidth_bps.unwrap_or(0),
        sock_bufsize: p.window.unwrap_or(0),
        // As iperf3: the buffers before the connection (the send buffer grows after it).
        sndbuf_actual: initial.sndbuf,
        rcvbuf_actual: initial.rcvbuf,
        test_start: TestStart {
            protocol: "TCP".into(),
            num_streams: p.parallel,
            blksize: p.len,
            omit: p.omit_s,
            duration: p.time_s,
            bytes: p.bytes,
            blocks: p.blocks,
            reverse: (p.direction == Direction::Reverse) as u32,
            tos: p.tos.unwrap_or(0) as u32,
            target_bitrate: p.bandwidth_bps.unwrap_or(0),
            bidir: (p.direction == Direction::Bidirectional) as u32,
        },
    };
    on_start(&start);
    pump(&mut ctl, &mut s, &clock, |e| {
        matches!(e, ClientEvent::TestRunning)
    })?;
    let plan = SendPlan {
        block: p.len,
        rate_bps: p.bandwidth_bps,
        bytes_total: p.byte_limit(),
        zerocopy: p.zerocopy,
    };
    let (u0, s0) = sock::cpu_times();
    let host_cpu_at_start = tcptune_kernel::cpustat::CpuTicks::now();
    let waits_at_start = tcptune_kernel::cpustat::RunDelays::now();
    // The other end's sockets, when it runs here too and sends no samples of its own.
    let peer = LocalPeer::new(&socks, cfg.sample_every);
    let data = DataPhase::start(socks, &plan, cfg.sample_every, clock.0)
        .map_err(|e| TestError::io("starting the data streams", e))?;
    let peer = peer.and_then(|p| PeerSampler::start(p, clock.0));
    // Round trips under the load, on their own thread (a failure to start one is no reason to
    // fail the test: the latency figures are then absent).
    let loaded = if cfg.latency {
        probe::Loaded::start(addr, probe::LOADED_RATE_HZ, clock.0).ok()
    } else {
        None
    };
    let t0 = data.started();
    let roles = data.ids();
    let ids: Vec<u32> = roles.iter().map(|r| r.0).collect();
    let client_sends_main = p.direction != Direction::Reverse;
    let mut ticker = Ticker {
        prev_at: 0.0,
        prev_bytes: vec![0; roles.len()],
        prev_retrans: vec![None; roles.len()],
    };
    let mut intervals = Vec::new();
    let since = |now: Dur| (now.nanos().saturating_sub(t0.nanos())) as f64 / 1e9;
    let period = cfg.interval.map(|i| i.as_secs_f64());
    // -O: the first seconds are reported as omitted, then counting starts again from zero
    // (iperf3 resets its streams' start times and byte counts when omitting ends).
    let omit = p.omit_s as f64;
    let mut omitting = p.omit_s > 0;
    // Where the current count started: 0, or the end of the omitted seconds.
    let mut origin = 0.0f64;
    let mut at_omit_end = vec![0u64; roles.len()];
    // -t 0 (and no byte limit): no end; the test runs until interrupted, as iperf3's.
    let forever = p.byte_limit().is_none() && p.time_s == 0;
    let end_at = (p.byte_limit().is_none() && !forever).then_some(omit + p.time_s as f64);
    // The next interval's end, from `origin`.
    let mut next_tick = period;
    // Interval ends, the omit end and the test's end are boundaries: the stream threads note
    // their bytes when they pass one (`DataPhase::mark_at`), so a report this thread makes
    // late, on a busy host, still covers exactly the period.
    let boundary = |omitting: bool, origin: f64, next_tick: Option<f64>| {
        [
            omitting.then_some(omit),
            next_tick.map(|t| origin + t),
            end_at,
        ]
        .into_iter()
        .flatten()
        .reduce(f64::min)
    };
    let arm = |b: Option<f64>| {
        if let Some(b) = b {
            data.mark_at(Dur::from_nanos(t0.nanos() + (b * 1e9).round() as u64));
        }
    };
    let mut next = boundary(omitting, origin, next_tick);
    arm(next);
    loop {
        let now = since(clock.now());
        let mut done = false;
        if let Some(b) = next.filter(|&b| now >= b) {
            let bytes = data.bytes_at_mark();
            let latest = data.latest();
            let mut report = |ticker: &mut Ticker, end: f64, omitted: bool| {
                let mut r = interval_report(
                    ticker,
                    end,
                    &bytes,
                    &latest,
                    &roles,
                    &fds,
                    client_sends_main,
                );
                if omitted {
                    r.mark_omitted();
                }
                on_interval(&r, &ids);
                intervals.push(r);
            };
            let at_tick = next_tick.is_some_and(|t| (origin + t - b).abs() < 1e-9);
            if omitting && b >= omit {
                // What moved since the last report is still omitted.
                if period.is_some() && b - origin - ticker.prev_at > 1e-3 {
                    report(&mut ticker, b - origin, true);
                }
                omitting = false;
                origin = omit;
                at_omit_end = bytes.clone();
                ticker.prev_at = 0.0;
                ticker.prev_bytes = bytes.clone();
                next_tick = period;
            } else if at_tick {
                report(&mut ticker, b - origin, omitting);
                next_tick = next_tick.zip(period).map(|(t, i)| t + i);
            }
            if end_at.is_some_and(|e| b >= e) {
                // A last, partial interval (the time is not a multiple of -i).
                if period.is_some() && b - origin - ticker.prev_at > 1e-3 {
                    report(&mut ticker, b - origin, false);
                }
                done = true;
            }
            next = boundary(omitting, origin, next_tick);
            arm(next);
        }
        if end_at.is_none() && !omitting && !forever {
            let moved = if client_sends > 0 {
                data.sent_total()
            } else {
                data.bytes().iter().sum()
            };
            if moved >= p.byte_limit().unwrap_or(0) {
                // Bytes-limited: the last interval ends when the bytes are done.
                let rel = now - origin;
                let short = period.is_some_and(|i| rel - ticker.prev_at < 0.1 * i);
                let r = interval_report(
                    &mut ticker,
                    rel,
                    &data.bytes(),
                    &data.latest(),
                    &roles,
                    &fds,
                    client_sends_main,
                );
                // iperf3 drops a last interval shorter than a tenth of the period that
                // moved nothing.
                if period.is_some() && !(short && r.sum.bytes == 0) {
                    on_interval(&r, &ids);
                    intervals.push(r);
                }
                done = true;
            }
        }
        if done {
            break;
        }
        if cfg.interrupt.is_some_and(|i| i.load(Ordering::Relaxed)) {
            s.terminate();
            let _ = ctl.write(&s.take_output());
            drop(data.finish());
            return Err(TestError::Interrupted);
        }
        let wake = next.map(|b| b - now).unwrap_or(0.1).clamp(0.0, 0.1);
        // Anything on the control connection now is the server ending the test early.
        let ready = tcptune_os::poll::wait_readable(
            std::os::fd::AsFd::as_fd(&ctl.sock),
            Duration::from_secs_f64(wake).max(Duration::from_millis(1)),
        )
        .map_err(|e| TestError::io("waiting on the control connection", e))?;
        if ready {
            match ctl
                .read(&clock, None, Duration::from_millis(1))
                .map_err(|e| TestError::io("reading the control connection", e))?
            {
                Got::Eof => {
                    s.handle_eof().map_err(session_err)?;
                }
                Got::Data(n) => {
                    s.handle_input(ctl.data(n), clock.now())
                        .map_err(session_err)?;
                }
                Got::Nothing => {}
            }
        }
    }
    // The time the bytes took: until the senders stop (as iperf3 reports it).
    let secs = since(clock.now()) - origin;
    let load_end = Dur::from_secs_f64(since(clock.now()).max(0.0));
    if let Some(l) = &loaded {
        l.stop();
    }
    data.stop_senders();
    s.end_test(clock.now()).map_err(session_err)?;
    pump(&mut ctl, &mut s, &clock, |e| {
        matches!(e, ClientEvent::ExchangeResults)
    })?;
    // The probes still under way are waited for only now, once the server has been told the
    // test ended: waiting before kept the senders sending for up to a probe's timeout longer
    // than the test (a stock iperf3 server counted those bytes).
    if let Some(loaded) = loaded {
        let mut under_load = loaded.finish();
        tcptune_diagnose::latency::mark_ramp(&mut under_load, t0, load_end);
        probes.extend(under_load);
    }
    let peer = peer.and_then(PeerSampler::finish);
    // Read while the stream threads still run: an ended thread's wait is lost.
    let waited = waits_at_start
        .zip(tcptune_kernel::cpustat::RunDelays::now())
        .map(|(a, b)| a.waited_until(&b));
    let mut outcomes = data.finish();
    // Omitted bytes count for nothing (iperf3 reports and exchanges what followed -O), nor
    // do the omitted seconds' retransmissions: the samples start from the last one taken by
    // the omit's end, the baseline of the counters that follow.
    let omit_end = Dur::from_nanos(t0.nanos() + (omit * 1e9).round() as u64);
    for (o, &b) in outcomes.iter_mut().zip(&at_omit_end) {
        o.bytes = o.bytes.saturating_sub(b);
        if p.omit_s > 0 {
            let after = o.samples.partition_point(|s| s.at_s <= omit_end);
            o.samples.drain(..after.saturating_sub(1));
        }
    }
    let own = own_results(&outcomes, secs, (u0, s0));
    // Both ends on this host (loopback): how busy all its CPUs were, softirq included.
    let host_cpu = host_cpu_at_start
        .zip(tcptune_kernel::cpustat::CpuTicks::now())
        .and_then(|(a, b)| a.shares_until(&b))
        .filter(|_| addr.ip().is_loopback());
    s.send_results(&own, clock.now()).map_err(session_err)?;
    let ev = pump(&mut ctl, &mut s, &clock, |e| matches!(e, ClientEvent::Done))?;
    let server = ev
        .into_iter()
        .find_map(|e| match e {
            ClientEvent::ServerResults(r) => Some(*r),
            _ => None,
        })
        .ok_or(TestError::Session(SessionError::Ended))?;
    drop(ctl);
    let server_samples: Option<ServerSamples> = server
        .extension
        .as_ref()
        .and_then(|v| serde_json::from_value(v.clone()).ok());
    let server_is_tcptune = server_samples.is_some();
    let server_samples = server_samples.or_else(|| peer.map(LocalPeer::into_samples));
    Ok(assemble(
        cfg,
        start,
        intervals,
        outcomes,
        &server,
        server_samples,
        server_is_tcptune,
        (cfg.latency).then_some(probes),
        secs,
        OwnCpu {
            user: own.cpu_util_user,
            system: own.cpu_util_system,
            wait: waited.map(|w| w.as_secs_f64() / secs.max(1e-9) * 100.0),
        },
        host_cpu,
    ))
}

/// The latency report: the probes taken, the load connections' smoothed RTT as self probes,
/// and where the added delay sits by the senders' own counters (medians over their samples).
fn latency_report(
    mut probes: Vec<Probe>,
    senders: &[&[Sample]],
    rate: Rate,
    notsent_lowat: Option<u64>,
) -> LatencyReport {
    let mut queue_us = Vec::new();
    let mut unsent = Vec::new();
    let mut ce = 0u64;
    for samples in senders {
        for s in samples
            .iter()
            .filter(|s| s.info.bytes_acked.unwrap_or(0) > 0)
        {
            let i = &s.info;
            if let Some(rtt) = i.srtt_us() {
                probes.push(Probe {
                    at_s: s.at_s,
                    kind: ProbeKind::SelfStack,
                    phase: tcptune_diagnose::latency::Phase::Loaded,
                    rtt_s: Some(Dur::from_micros(rtt as u64)),
                });
                if let Some(m) = i.min_rtt() {
                    queue_us.push((rtt as u64).saturating_sub(m as u64));
                }
            }
            unsent.extend(i.notsent_bytes.map(u64::from));
        }
        if let (Some(a), Some(b)) = (samples.first(), samples.last()) {
            let d = |x: &Sample| x.info.delivered_ce.map(u64::from);
            ce += d(b).unwrap_or(0).saturating_sub(d(a).unwrap_or(0));
        }
    }
    // The self probes' ramp, as the foreign ones' (the samples span the data phase).
    let span = senders
        .iter()
        .flat_map(|v| v.iter().map(|s| s.at_s.nanos()));
    if let (Some(a), Some(b)) = (span.clone().min(), span.max()) {
        let mut own: Vec<Probe> = probes
            .iter()
            .filter(|p| p.kind == ProbeKind::SelfStack)
            .copied()
            .collect();
        tcptune_diagnose::latency::mark_ramp(&mut own, Dur::from_nanos(a), Dur::from_nanos(b - a));
        probes.retain(|p| p.kind != ProbeKind::SelfStack);
        probes.extend(own);
    }
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    };
    let sender_unsent_bytes = median(unsent);
    let places = DelayPlaces {
        network_queue_s: median(queue_us).map(Dur::from_micros),
        sender_unsent_bytes,
        sender_queue_s: sender_unsent_bytes
            .filter(|_| rate.bps() > 0.0)
            .map(|b| Dur::from_secs_f64(b as f64 / rate.bytes_per_sec())),
        notsent_lowat,
        ecn_marks: (ce > 0).then_some(ce),
    };
    LatencyReport::of(probes, places)
}

/// This process's CPU over the data phase, percent of one core: user, system, and the time its
/// threads waited for a CPU (None where the kernel keeps no schedstats).
#[derive(Debug, Clone, Copy)]
struct OwnCpu {
    user: f64,
    system: f64,
    wait: Option<f64>,
}

/// CPU use of both ends' processes over the test (iperf3's figures), for the direction in which
/// the client sends (`client_sends`). A tcptune end runs a thread per stream, so it can use up
/// to that many cores; a stock iperf3 (3.12) one. The host's figure (both ends on this host) is
/// shown but does not decide: other processes' load is in it.
fn cpu_figures(
    client_sends: bool,
    own: OwnCpu,
    server: &Results,
    server_is_tcptune: bool,
    host_cpu: Option<(f64, f64, f64)>,
    parallel: u32,
) -> Vec<CpuUse> {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let nstreams = parallel.max(1) as f64;
    let (ours_end, theirs_end) = if client_sends {
        (engine::End::Sender, engine::End::Receiver)
    } else {
        (engine::End::Receiver, engine::End::Sender)
    };
    let mut cpu = vec![
        CpuUse {
            end: ours_end,
            scope: CpuScope::Process,
            percent: own.user + own.system,
            cores: nstreams.min(ncpu),
            softirq_percent: None,
            wait_percent: own.wait,
        },
        CpuUse {
            end: theirs_end,
            scope: CpuScope::Process,
            percent: server.cpu_util_total,
            cores: if server_is_tcptune {
                nstreams.min(ncpu)
            } else {
                1.0
            },
            softirq_percent: None,
            wait_percent: None,
        },
    ];
    if let Some((busy, softirq, _steal)) = host_cpu {
        cpu.push(CpuUse {
            end: engine::End::BothEnds,
            scope: CpuScope::Host,
            percent: busy * 100.0,
            cores: 1.0,
            softirq_percent: Some(softirq * 100.0),
            wait_percent: None,
        });
    }
    cpu
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    cfg: &ClientConfig,
    start: Start,
    intervals: Vec<IntervalReport>,
    outcomes: Vec<StreamOutcome>,
    server: &Results,
    server_samples: Option<ServerSamples>,
    server_is_tcptune: bool,
    probes: Option<Vec<Probe>>,
    secs: f64,
    own_cpu: OwnCpu,
    host_cpu: Option<(f64, f64, f64)>,
) -> TestOutput {
    let (cu, cs) = (own_cpu.user, own_cpu.system);
    let p = &cfg.params;
    let client_sends_main = p.direction != Direction::Reverse;
    let empty: Vec<Sample> = Vec::new();
    let theirs = |id: u32| server.streams.iter().find(|s| s.id == id as i64);
    let their_samples = |id: u32| {
        server_samples
            .as_ref()
            .and_then(|x| x.streams.iter().find(|s| s.id == id))
            .map(|s| &s.samples)
            .unwrap_or(&empty)
    };
    let mut streams = Vec::new();
    let mut diag_main = Vec::new();
    let mut diag_rev = Vec::new();
    let peer_is_local = start
        .connected
        .first()
        .and_then(|c| c.remote_host.parse::<std::net::IpAddr>().ok())
        .is_some_and(|ip| ip.is_loopback());
    // Each direction's sender: our streams' congestion control, or the server's.
    let ours_cc = outcomes.iter().find_map(|o| o.congestion.clone());
    let (main_cc, rev_cc) = if client_sends_main {
        (ours_cc, server.congestion_used.clone())
    } else {
        (server.congestion_used.clone(), ours_cc)
    };
    let ctx = context(
        p,
        cfg.path_rate,
        main_cc.as_deref(),
        &cfg.host_settings,
        peer_is_local,
        client_sends_main,
    );
    let rev_ctx = context(
        p,
        cfg.path_rate,
        rev_cc.as_deref(),
        &cfg.host_settings,
        peer_is_local,
        !client_sends_main,
    );
    let cpu = cpu_figures(
        client_sends_main,
        own_cpu,
        server,
        server_is_tcptune,
        host_cpu,
        p.parallel,
    );
    // The other direction of a bidirectional test: the same processes, the ends swapped.
    let rev_cpu: Vec<CpuUse> = cpu
        .iter()
        .map(|c| CpuUse {
            end: match c.end {
                engine::End::Sender => engine::End::Receiver,
                engine::End::Receiver => engine::End::Sender,
                e => e,
            },
            ..*c
        })
        .collect();
    for o in &outcomes {
        let peer = theirs(o.id);
        let peer_bytes = peer.map(|x| x.bytes).unwrap_or(0);
        let peer_retr = peer.map(|x| x.retransmits).filter(|&r| r >= 0);
        let ts = their_samples(o.id);
        let (snd, rcv) = if o.sends {
            (
                end_side(
                    o.fd,
                    o.bytes,
                    secs,
                    true,
                    &o.samples,
                    retrans_of(&o.samples),
                ),
                end_side(o.fd, peer_bytes, secs, false, ts, None),
            )
        } else {
            // Without the server's samples (a stock iperf3 server), the sender row's cwnd and
            // RTT figures are our own socket's, as iperf3's client reports them in -R.
            let sender_view = if ts.is_empty() { &o.samples } else { ts };
            (
                end_side(o.fd, peer_bytes, secs, true, sender_view, peer_retr),
                end_side(o.fd, o.bytes, secs, false, &o.samples, None),
            )
        };
        let (sender_samples, receiver_samples) = if o.sends {
            (&o.samples, ts)
        } else {
            (ts, &o.samples)
        };
        let d = diagnose_stream(
            &StreamInput {
                id: o.id,
                sender: sender_samples,
                receiver: receiver_samples,
                received_bytes: rcv.bytes,
                seconds: Dur::from_secs_f64(secs),
                cpu: if o.sends == client_sends_main {
                    &cpu
                } else {
                    &rev_cpu
                },
            },
            if o.sends == client_sends_main {
                &ctx
            } else {
                &rev_ctx
            },
        );
        if o.sends == client_sends_main {
            diag_main.push(d);
        } else {
            diag_rev.push(d);
        }
        streams.push((snd, rcv));
    }
    let main: Vec<usize> = outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| o.sends == client_sends_main)
        .map(|(i, _)| i)
        .collect();
    let rev: Vec<usize> = outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| o.sends != client_sends_main)
        .map(|(i, _)| i)
        .collect();
    let side = |idx: &[usize], sender: bool| {
        let v: Vec<&EndSide> = idx
            .iter()
            .map(|&i| if sender { &streams[i].0 } else { &streams[i].1 })
            .collect();
        sum(&v, secs, sender)
    };
    let bidir = p.direction == Direction::Bidirectional;
    let end = End {
        sum_sent: side(&main, true),
        sum_received: side(&main, false),
        sum_sent_bidir_reverse: bidir.then(|| side(&rev, true)),
        sum_received_bidir_reverse: bidir.then(|| side(&rev, false)),
        sum: None,
        sum_bidir_reverse: None,
        cpu_utilization_percent: CpuUtilization {
            host_total: cu + cs,
            host_user: cu,
            host_system: cs,
            remote_total: server.cpu_util_total,
            remote_user: server.cpu_util_user,
            remote_system: server.cpu_util_system,
        },
        sender_tcp_congestion: if client_sends_main {
            outcomes.iter().find_map(|o| o.congestion.clone())
        } else {
            server.congestion_used.clone()
        },
        receiver_tcp_congestion: if client_sends_main {
            server.congestion_used.clone()
        } else {
            outcomes.iter().find_map(|o| o.congestion.clone())
        },
        streams: streams
            .into_iter()
            .map(|(snd, rcv)| EndStream {
                sender: Some(snd),
                receiver: Some(rcv),
                udp: None,
            })
            .collect(),
    };
    // The main direction's senders: where the self probes and the delay's places come from.
    let main_senders: Vec<&[Sample]> = outcomes
        .iter()
        .filter(|o| o.sends == client_sends_main)
        .map(|o| {
            if o.sends {
                o.samples.as_slice()
            } else {
                their_samples(o.id).as_slice()
            }
        })
        .collect();
    // Each direction of a bidirectional test judged and summed on its own.
    let mut diagnosis = if bidir {
        diagnose_bidir(diag_main, diag_rev, &ctx, &rev_ctx)
    } else {
        diag_main.extend(diag_rev);
        diagnose_test(diag_main, &ctx)
    };
    let latency = probes.map(|p| {
        latency_report(
            p,
            &main_senders,
            diagnosis.achieved_bps,
            cfg.host_settings
                .notsent_lowat
                .filter(|_| client_sends_main),
        )
    });
    if let Some(l) = &latency {
        let in_effect = tcptune_diagnose::engine::InEffect::of(&ctx);
        let bloat = tcptune_diagnose::latency::bloat(
            &l.summary,
            &l.places,
            diagnosis.achieved_bps,
            &in_effect,
        );
        if let Some(b) = bloat {
            tcptune_diagnose::throughput::add_bloat(&mut diagnosis, b, &ctx);
        }
    }
    let mut samples: Vec<StreamSamples> = outcomes
        .iter()
        .map(|o| StreamSamples {
            id: o.id,
            at: SampledAt::Client,
            sender: o.sends,
            samples: o.samples.clone(),
        })
        .collect();
    let have_server = server_is_tcptune;
    if let Some(ss) = server_samples {
        samples.extend(ss.streams.into_iter().map(|s| StreamSamples {
            id: s.id,
            at: SampledAt::Server,
            sender: s.sender,
            samples: s.samples,
        }));
    }
    TestOutput {
        start,
        intervals,
        end,
        tcptune: Extension {
            sample_period_s: cfg.sample_every.as_secs_f64(),
            server_samples: have_server,
            streams: samples,
            diagnosis,
            latency,
        },
        title: p.title.clone(),
        extra_data: p.extra_data.clone(),
        // Only when asked: iperf3 3.12's server keeps --get-server-output for the tests after
        // one that asked, and iperf3's client shows it only when it asked.
        server_output_json: server
            .server_output_json
            .clone()
            .filter(|_| p.get_server_output),
        server_output_text: server
            .server_output_text
            .clone()
            .filter(|_| p.get_server_output),
        units: RateUnits::Auto,
    }
}

/// What a UDP test carries over from the control connection's setup.
struct UdpCtx {
    addr: SocketAddr,
    clock: Clock,
    started_at: u64,
    tcp_mss_default: u32,
    count: u32,
    client_sends: u32,
}

/// Opens a UDP stream as iperf3 does: connect, send the connect datagram, wait for the reply.
fn udp_stream(
    cfg: &ClientConfig,
    addr: SocketAddr,
    port: u16,
) -> std::io::Result<std::net::UdpSocket> {
    let local = match cfg.bind {
        Some(ip) => SocketAddr::new(ip, port),
        None if addr.is_ipv4() => SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, port)),
        None => SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)),
    };
    let u = sock::bind_udp(&local)?;
    let fd = std::os::fd::AsFd::as_fd(&u);
    if let Some(w) = cfg.params.window {
        sock::set_window(fd, w)?;
    }
    if let Some(dev) = &cfg.data_extra.bind_dev {
        tcptune_os::socket::set_bytes(fd, libc::SOL_SOCKET, libc::SO_BINDTODEVICE, dev.as_bytes())?;
    }
    if cfg.dont_fragment {
        // IPv4's DF bit (IPv6 never fragments on the way); the path MTU is then an error.
        let v4 = sock::set_int(
            fd,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        );
        let v6 = sock::set_int(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        );
        v4.or(v6)?;
    }
    u.connect(addr)?;
    u.set_read_timeout(Some(cfg.connect_timeout))?;
    u.send(&tcptune_perf::udp::CONNECT_MSG.to_ne_bytes())?;
    let mut b = [0u8; 16];
    let n = u.recv(&mut b)?;
    let reply = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
    // Any iperf3 server's answer: the legacy value, or 3.13's text "9876".
    if n < 4 || (reply != tcptune_perf::udp::CONNECT_REPLY && reply != 0x3938_3736) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the server did not answer the UDP stream's connect datagram",
        ));
    }
    Ok(u)
}

/// iperf3's UDP figures of one stream side: a sender's datagrams, a receiver's count, loss and
/// jitter.
fn udp_figures(c: &tcptune_perf::udp::UdpReceiver, sender: bool) -> UdpFigures {
    if sender {
        UdpFigures {
            packets: c.packet_count,
            ..UdpFigures::default()
        }
    } else {
        UdpFigures {
            jitter_ms: Some(c.jitter * 1000.0),
            lost_packets: Some(c.cnt_error),
            packets: c.packet_count,
            lost_percent: Some(percent(c.cnt_error, c.packet_count)),
        }
    }
}

fn percent(lost: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * lost as f64 / of as f64
    }
}

/// The UDP test after CREATE_STREAMS: streams, data, intervals, results, the report.
fn run_udp(
    cfg: &ClientConfig,
    p: &Params,
    x: UdpCtx,
    mut ctl: Control,
    mut s: ClientSession,
    on_start: &mut dyn FnMut(&Start),
    on_interval: &mut dyn FnMut(&IntervalReport, &[u32]),
) -> Result<TestOutput, TestError> {
    let clock = x.clock;
    let mut streams = Vec::new();
    for i in 0..x.count {
        let port = cfg
            .cport
            .map(|c| c.saturating_add(i.min(u16::MAX as u32) as u16))
            .unwrap_or(0);
        let u = match udp_stream(cfg, x.addr, port) {
            Ok(u) => u,
            Err(e) => {
                s.terminate();
                let _ = ctl.write(&s.take_output());
                return Err(TestError::io("opening a UDP stream", e));
            }
        };
        streams.push(crate::udp::UdpStream {
            id: if i == 0 { 1 } else { i + 2 },
            sends: i < x.client_sends,
            sock: u,
        });
    }
    let connected: Vec<Connected> = streams
        .iter()
        .map(|st| {
            connected_entry(
                std::os::fd::AsRawFd::as_raw_fd(&st.sock),
                st.sock.local_addr().ok(),
                st.sock.peer_addr().ok(),
            )
        })
        .collect();
    let fds: Vec<i32> = connected.iter().map(|c| c.socket).collect();
    let buf = |opt: i32| {
        first_socket_option(
            streams.first().map(|s| std::os::fd::AsFd::as_fd(&s.sock)),
            opt,
        )
    };
    // The caller's -b (tcptune test defaults UDP to iperf3's 1 Mbit/s); 0 or none: unpaced.
    let rate = p.bandwidth_bps.unwrap_or(0);
    let start = Start {
        connected,
        version: format!("tcptune {}", env!("CARGO_PKG_VERSION")),
        system_info: sock::system_info(),
        timestamp: Timestamp::at(x.started_at),
        connecting_to: ConnectingTo {
            host: cfg.host.clone(),
            port: x.addr.port(),
        },
        cookie: s.cookie().as_str().to_string(),
        tcp_mss: p.mss,
        tcp_mss_default: p.mss.is_none().then_some(x.tcp_mss_default),
        target_bitrate: rate,
        sock_bufsize: p.window.unwrap_or(0),
        sndbuf_actual: buf(libc::SO_SNDBUF),
        rcvbuf_actual: buf(libc::SO_RCVBUF),
        test_start: TestStart {
            protocol: "UDP".into(),
            num_streams: p.parallel,
            blksize: p.len,
            omit: p.omit_s,
            duration: p.time_s,
            bytes: p.bytes,
            blocks: p.blocks,
            reverse: (p.direction == Direction::Reverse) as u32,
            tos: p.tos.unwrap_or(0) as u32,
            target_bitrate: rate,
            bidir: (p.direction == Direction::Bidirectional) as u32,
        },
    };
    on_start(&start);
    pump(&mut ctl, &mut s, &clock, |e| {
        matches!(e, ClientEvent::TestRunning)
    })?;
    let (u0, s0) = sock::cpu_times();
    let data = crate::udp::UdpPhase::start(streams, p.len, rate, p.udp_counters_64bit)
        .map_err(|e| TestError::io("starting the UDP streams", e))?;
    let t0 = clock.now();
    let roles = data.ids();
    let ids: Vec<u32> = roles.iter().map(|r| r.0).collect();
    let client_sends_main = p.direction != Direction::Reverse;
    let since = |now: Dur| (now.nanos().saturating_sub(t0.nanos())) as f64 / 1e9;
    let period = cfg.interval.map(|i| i.as_secs_f64());
    // -O: the first seconds are reported as omitted, then counting starts from zero again.
    let omit = p.omit_s as f64;
    let mut omitting = p.omit_s > 0;
    let mut origin = 0.0f64;
    let mut at_omit_end: Option<Vec<tcptune_perf::udp::UdpReceiver>> = None;
    // -t 0 (and no byte limit): no end; the test runs until interrupted, as iperf3's.
    let forever = p.byte_limit().is_none() && p.time_s == 0;
    let end_at = (p.byte_limit().is_none() && !forever).then_some(omit + p.time_s as f64);
    let mut next_tick = period;
    let mut prev_at = 0.0;
    let mut prev: Vec<tcptune_perf::udp::UdpReceiver> = vec![Default::default(); roles.len()];
    // One interval report from `prev_at` to `now` (seconds from the count's origin), from the
    // counts then and at its start.
    let make = |prev_at: f64,
                now: f64,
                counts: &[tcptune_perf::udp::UdpReceiver],
                prev: &[tcptune_perf::udp::UdpReceiver],
                omitted: bool|
     -> Option<IntervalReport> {
        let secs = (now - prev_at).max(1e-9);
        let mut st = Vec::new();
        for (k, c) in counts.iter().enumerate() {
            let sender = roles[k].1;
            let b = c.bytes - prev[k].bytes;
            let d = tcptune_perf::udp::UdpReceiver::totals(
                b,
                c.packet_count - prev[k].packet_count,
                c.cnt_error.saturating_sub(prev[k].cnt_error),
                c.jitter,
            );
            st.push(IntervalStream {
                socket: fds[k],
                start: prev_at,
                end: now,
                seconds: secs,
                bytes: b,
                bits_per_second: b as f64 * 8.0 / secs,
                retransmits: None,
                snd_cwnd: None,
                snd_wnd: None,
                rtt: None,
                rttvar: None,
                pmtu: None,
                rcv_wnd: None,
                udp: Some(udp_figures(&d, sender)),
                omitted: false,
                sender,
            });
        }
        let sum_of = |main: bool| {
            let sel: Vec<&IntervalStream> = st
                .iter()
                .filter(|x| x.sender == (client_sends_main == main))
                .collect();
            if sel.is_empty() {
                return None;
            }
            let bytes: u64 = sel.iter().map(|x| x.bytes).sum();
            let f: Vec<&UdpFigures> = sel.iter().filter_map(|x| x.udp.as_ref()).collect();
            let packets = f.iter().map(|u| u.packets).sum();
            let sender = client_sends_main == main;
            let lost: u64 = f.iter().filter_map(|u| u.lost_packets).sum();
            let jitters: Vec<f64> = f.iter().filter_map(|u| u.jitter_ms).collect();
            Some(IntervalSum {
                start: prev_at,
                end: now,
                seconds: secs,
                bytes,
                bits_per_second: bytes as f64 * 8.0 / secs,
                retransmits: None,
                udp: Some(if sender {
                    UdpFigures {
                        packets,
                        ..UdpFigures::default()
                    }
                } else {
                    UdpFigures {
                        jitter_ms: Some(jitters.iter().sum::<f64>() / jitters.len().max(1) as f64),
                        lost_packets: Some(lost),
                        packets,
                        lost_percent: Some(percent(lost, packets)),
                    }
                }),
                omitted: false,
                sender,
            })
        };
        let main = sum_of(true)?;
        let rev = sum_of(false);
        let mut r = IntervalReport {
            sum_bidir_reverse: rev,
            sum: main,
            streams: st,
        };
        if omitted {
            r.mark_omitted();
        }
        Some(r)
    };
    let mut intervals = Vec::new();
    loop {
        let now = since(clock.now());
        let counts = data.counts();
        let done = match end_at {
            Some(t) => now >= t,
            None => {
                let moved: u64 = counts
                    .iter()
                    .zip(&roles)
                    .filter(|(_, r)| r.1 || x.client_sends == 0)
                    .map(|(c, _)| c.bytes)
                    .sum();
                !forever && moved >= p.byte_limit().unwrap_or(0)
            }
        };
        if omitting && now >= omit {
            // What moved since the last report is still omitted.
            if period.is_some() && now - prev_at > 1e-3 {
                if let Some(r) = make(prev_at, now, &counts, &prev, true) {
                    on_interval(&r, &ids);
                    intervals.push(r);
                }
            }
            omitting = false;
            origin = omit;
            at_omit_end = Some(counts.clone());
            prev_at = 0.0;
            prev = counts.clone();
            next_tick = period;
        }
        let rel = now - origin;
        if next_tick.is_some_and(|t| rel >= t) || (done && period.is_some() && rel - prev_at > 1e-3)
        {
            if let Some(r) = make(prev_at, rel, &counts, &prev, omitting) {
                on_interval(&r, &ids);
                intervals.push(r);
            }
            prev_at = rel;
            prev = counts;
            next_tick = next_tick.zip(period).map(|(t, i)| t + i);
        }
        if done {
            break;
        }
        if cfg.interrupt.is_some_and(|i| i.load(Ordering::Relaxed)) {
            s.terminate();
            let _ = ctl.write(&s.take_output());
            drop(data.finish());
            return Err(TestError::Interrupted);
        }
        let mut wake = 0.1f64;
        if let Some(t) = end_at {
            wake = wake.min(t - now);
        }
        if let Some(t) = next_tick {
            wake = wake.min(t - now);
        }
        let ready = tcptune_os::poll::wait_readable(
            std::os::fd::AsFd::as_fd(&ctl.sock),
            Duration::from_secs_f64(wake.max(0.0)).max(Duration::from_millis(1)),
        )
        .map_err(|e| TestError::io("waiting on the control connection", e))?;
        if ready {
            match ctl
                .read(&clock, None, Duration::from_millis(1))
                .map_err(|e| TestError::io("reading the control connection", e))?
            {
                Got::Eof => s.handle_eof().map_err(session_err)?,
                Got::Data(n) => {
                    s.handle_input(ctl.data(n), clock.now())
                        .map_err(session_err)?;
                }
                Got::Nothing => {}
            }
        }
    }
    let secs = since(clock.now()) - origin;
    let outcomes = data.finish();
    let omitted = |k: usize| at_omit_end.as_ref().and_then(|v| v.get(k));
    s.end_test(clock.now()).map_err(session_err)?;
    pump(&mut ctl, &mut s, &clock, |e| {
        matches!(e, ClientEvent::ExchangeResults)
    })?;
    let (u1, s1) = sock::cpu_times();
    let wall = secs.max(1e-9);
    let (cu, cs) = ((u1 - u0) / wall * 100.0, (s1 - s0) / wall * 100.0);
    let own = Results {
        cpu_util_total: cu + cs,
        cpu_util_user: cu,
        cpu_util_system: cs,
        sender_has_retransmits: -1,
        congestion_used: None,
        streams: outcomes
            .iter()
            .enumerate()
            .map(|(k, o)| o.result(secs, omitted(k)))
            .collect(),
        server_output_json: None,
        server_output_text: None,
        extension: None,
    };
    s.send_results(&own, clock.now()).map_err(session_err)?;
    let ev = pump(&mut ctl, &mut s, &clock, |e| matches!(e, ClientEvent::Done))?;
    let server = ev
        .into_iter()
        .find_map(|e| match e {
            ClientEvent::ServerResults(r) => Some(*r),
            _ => None,
        })
        .ok_or(TestError::Session(SessionError::Ended))?;
    drop(ctl);
    // Each stream's sending and receiving ends: ours, and the server's results.
    let mut rows = Vec::new();
    for (k, o) in outcomes.iter().enumerate() {
        let peer = server.streams.iter().find(|x| x.id == o.id as i64);
        let peer_end = peer.and_then(|x| x.end_time).unwrap_or(secs);
        // After -O: the peer's bytes already, its datagrams and losses less the omitted ones
        // it reports, or (iperf3 before 3.13 does not report them) less ours, as iperf3 3.12
        // subtracts its own.
        let o0 = omitted(k).cloned().unwrap_or_default();
        let after = |n: Option<i64>, omitted: Option<i64>, own: u64| {
            let o = omitted.map(|v| v.max(0) as u64).unwrap_or(own);
            (n.unwrap_or(0).max(0) as u64).saturating_sub(o)
        };
        let theirs = tcptune_perf::udp::UdpReceiver::totals(
            peer.map(|x| x.bytes).unwrap_or(0),
            after(
                peer.map(|x| x.packets),
                peer.and_then(|x| x.omitted_packets),
                o0.packet_count,
            ),
            after(
                peer.map(|x| x.errors),
                peer.and_then(|x| x.omitted_errors),
                o0.cnt_error,
            ),
            peer.map(|x| x.jitter).unwrap_or(0.0),
        );
        let mut ours = tcptune_perf::udp::UdpReceiver::totals(
            o.counts.bytes - o0.bytes,
            o.counts.packet_count - o0.packet_count,
            o.counts.cnt_error.saturating_sub(o0.cnt_error),
            o.counts.jitter,
        );
        ours.outoforder = o.counts.outoforder.saturating_sub(o0.outoforder);
        let (snd, rcv, rcv_secs) = if o.sends {
            (ours, theirs, peer_end)
        } else {
            (theirs, ours, secs)
        };
        rows.push((fds[k], o.sends, snd, rcv, rcv_secs));
    }
    let udp_end = |&(fd, sends, ref snd, ref rcv, rcv_secs): &(
        i32,
        bool,
        tcptune_perf::udp::UdpReceiver,
        tcptune_perf::udp::UdpReceiver,
        f64,
    )| {
        // iperf3's row: this end's bytes; the receiver's loss and jitter; the sender's
        // datagrams (or, at a receiver, the highest count seen).
        let (bytes, packets, t) = if sends {
            (snd.bytes, snd.packet_count, secs)
        } else {
            (rcv.bytes, rcv.packet_count, rcv_secs)
        };
        UdpEnd {
            socket: fd,
            start: 0.0,
            end: t,
            seconds: t,
            bytes,
            bits_per_second: bytes as f64 * 8.0 / t.max(1e-9),
            jitter_ms: rcv.jitter * 1000.0,
            lost_packets: rcv.cnt_error,
            packets,
            lost_percent: percent(rcv.cnt_error, packets),
            out_of_order: rcv.outoforder,
            sender: sends,
        }
    };
    let sums = |main: bool| {
        let sel: Vec<_> = rows
            .iter()
            .filter(|r| r.1 == (client_sends_main == main))
            .collect();
        if sel.is_empty() {
            return None;
        }
        let rcv_secs = sel.iter().map(|r| r.4).fold(0.0, f64::max);
        let sent: u64 = sel.iter().map(|r| r.2.bytes).sum();
        let sent_pk: u64 = sel.iter().map(|r| r.2.packet_count).sum();
        let recv: u64 = sel.iter().map(|r| r.3.bytes).sum();
        let recv_pk: u64 = sel.iter().map(|r| r.3.packet_count).sum();
        let lost: u64 = sel.iter().map(|r| r.3.cnt_error).sum();
        let jitter = sel.iter().map(|r| r.3.jitter).sum::<f64>() * 1000.0 / sel.len() as f64;
        let sender_row = EndSum {
            start: 0.0,
            end: secs,
            seconds: secs,
            bytes: sent,
            bits_per_second: sent as f64 * 8.0 / secs.max(1e-9),
            retransmits: None,
            udp: Some(UdpFigures {
                jitter_ms: Some(0.0),
                lost_packets: Some(0),
                packets: sent_pk,
                lost_percent: Some(0.0),
            }),
            sender: true,
        };
        let receiver_row = EndSum {
            start: 0.0,
            end: rcv_secs,
            seconds: rcv_secs,
            bytes: recv,
            bits_per_second: recv as f64 * 8.0 / rcv_secs.max(1e-9),
            retransmits: None,
            udp: Some(UdpFigures {
                jitter_ms: Some(jitter),
                lost_packets: Some(lost),
                packets: recv_pk.max(sent_pk),
                lost_percent: Some(percent(lost, recv_pk.max(sent_pk))),
            }),
            sender: false,
        };
        // iperf3's `end.sum`: this end's bytes, with the receiver's loss and jitter.
        let own_bytes = if client_sends_main == main {
            sent
        } else {
            recv
        };
        let sum = EndSum {
            start: 0.0,
            end: rcv_secs,
            seconds: rcv_secs,
            bytes: own_bytes,
            bits_per_second: own_bytes as f64 * 8.0 / secs.max(1e-9),
            retransmits: None,
            udp: receiver_row.udp.clone(),
            sender: client_sends_main == main,
        };
        Some((sender_row, receiver_row, sum))
    };
    let (sum_sent, sum_received, sum) =
        sums(true).ok_or(TestError::Session(SessionError::Ended))?;
    let rev = sums(false);
    let bidir = p.direction == Direction::Bidirectional;
    let ctx = context(
        p,
        cfg.path_rate,
        None,
        &cfg.host_settings,
        false,
        p.direction != Direction::Reverse,
    );
    let end = End {
        streams: rows
            .iter()
            .map(|r| EndStream {
                sender: None,
                receiver: None,
                udp: Some(udp_end(r)),
            })
            .collect(),
        sum: Some(sum),
        sum_bidir_reverse: rev.as_ref().filter(|_| bidir).map(|r| r.2.clone()),
        sum_sent,
        sum_received,
        sum_sent_bidir_reverse: rev.as_ref().filter(|_| bidir).map(|r| r.0.clone()),
        sum_received_bidir_reverse: rev.as_ref().filter(|_| bidir).map(|r| r.1.clone()),
        cpu_utilization_percent: CpuUtilization {
            host_total: cu + cs,
            host_user: cu,
            host_system: cs,
            remote_total: server.cpu_util_total,
            remote_user: server.cpu_util_user,
            remote_system: server.cpu_util_system,
        },
        sender_tcp_congestion: None,
        receiver_tcp_congestion: None,
    };
    Ok(TestOutput {
        start,
        intervals,
        end,
        title: p.title.clone(),
        extra_data: p.extra_data.clone(),
        // Only when asked: iperf3 3.12's server keeps --get-server-output for the tests after
        // one that asked, and iperf3's client shows it only when it asked.
        server_output_json: server
            .server_output_json
            .clone()
            .filter(|_| p.get_server_output),
        server_output_text: server
            .server_output_text
            .clone()
            .filter(|_| p.get_server_output),
        tcptune: Extension {
            sample_period_s: cfg.sample_every.as_secs_f64(),
            server_samples: false,
            streams: Vec::new(),
            // UDP has no tcp_info: the diagnosis has nothing to judge.
            diagnosis: diagnose_test(Vec::new(), &ctx),
            latency: None,
        },
        units: RateUnits::Auto,
    })
}
