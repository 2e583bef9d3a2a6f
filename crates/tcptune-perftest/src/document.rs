//! iperf3's `-J` document built from what a test recorded: the `start` object, an interval's
//! streams and sums from two readings of the counters, the `end` object from each stream's
//! outcome and the server's results, for TCP and UDP alike. The document's types are in
//! `report.rs`; the engine's input is built apart (`client::diagnosis`). Pure functions over
//! recorded counters, no sockets and no clocks, so each piece is tested without a network.

use std::net::SocketAddr;
use tcptune_kernel::tcp_info::TcpInfo;

use tcptune_diagnose::Sample;
use tcptune_iperf3::udp::UdpReceiver;
use tcptune_iperf3::{Direction, Params, Results};

use crate::data::{retrans_of, StreamOutcome};
use crate::test_report::*;
use crate::udp::UdpOutcome;

/// The test's streams as the document lists them, in stream order.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Each stream's iperf3 id and whether this end (the client) sends on it.
    pub roles: Vec<(u32, bool)>,
    /// Each stream's socket descriptor (iperf3 reports it as the stream's `socket`).
    pub fds: Vec<i32>,
    /// True when the client sends in the test's main direction (not `-R`).
    pub client_sends_main: bool,
}

impl Layout {
    /// The streams' ids, in order (what the text's interval lines are labelled with).
    pub fn ids(&self) -> Vec<u32> {
        self.roles.iter().map(|r| r.0).collect()
    }
}

/// An interval: its start and end, seconds from where the count started (0, or the end of
/// `-O`'s omitted seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    /// Seconds from the start of the count where this span begins.
    pub start: f64,
    /// Seconds from the start of the count where this span ends.
    pub end: f64,
}

impl Span {
    /// Its length, never zero (a rate divides by it).
    pub fn seconds(&self) -> f64 {
        (self.end - self.start).max(1e-9)
    }
}

/// One data connection as iperf3's `start.connected[]` lists it (TCP and UDP alike).
pub fn connected(fd: i32, l: Option<SocketAddr>, r: Option<SocketAddr>) -> Connected {
    Connected {
        socket: fd,
        local_host: l.map(|a| a.ip().to_string()).unwrap_or_default(),
        local_port: l.map(|a| a.port()).unwrap_or(0),
        remote_host: r.map(|a| a.ip().to_string()).unwrap_or_default(),
        remote_port: r.map(|a| a.port()).unwrap_or(0),
    }
}

/// What the `start` object says besides the test's parameters.
#[derive(Debug, Clone)]
pub struct StartFacts {
    /// The data connections.
    pub connected: Vec<Connected>,
    /// "TCP" or "UDP".
    pub protocol: &'static str,
    /// When the test started, seconds since the Unix epoch.
    pub started_at: u64,
    /// The server's host name or address.
    pub host: String,
    /// The server's TCP port.
    pub port: u16,
    /// The test's cookie.
    pub cookie: String,
    /// TCP_MAXSEG of the control connection.
    pub tcp_mss_default: u32,
    /// SO_SNDBUF and SO_RCVBUF of the first data socket, as iperf3 reports them.
    pub sndbuf: u32,
    /// SO_RCVBUF, bytes.
    pub rcvbuf: u32,
}

/// iperf3's `start` object.
pub fn start(p: &Params, f: StartFacts) -> Start {
    Start {
        connected: f.connected,
        version: format!("tcptune {}", env!("CARGO_PKG_VERSION")),
        system_info: crate::sock::system_info(),
        timestamp: Timestamp::at(f.started_at),
        connecting_to: ConnectingTo {
            host: f.host,
            port: f.port,
        },
        cookie: f.cookie,
        tcp_mss: p.mss,
        tcp_mss_default: p.mss.is_none().then_some(f.tcp_mss_default),
        // The caller's -b (tcptune test defaults UDP to iperf3's 1 Mbit/s); 0: unlimited.
        target_bitrate: p.bandwidth_bps.unwrap_or(0),
        sock_bufsize: p.window.unwrap_or(0),
        sndbuf_actual: f.sndbuf,
        rcvbuf_actual: f.rcvbuf,
        test_start: TestStart {
            protocol: f.protocol.into(),
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
    }
}

/// What an interval reports of a stream's latest tcp_info: a sender's window and congestion
/// window, the RTT, its variation and the path MTU, a receiver's window (iperf3 takes its
/// figures from the sender's; `cjson::iperf3_interval_keys` drops a receiver's from `-J`).
pub struct InfoFigures {
    /// Congestion window, bytes (senders).
    pub snd_cwnd: Option<u64>,
    /// The peer's receive window, bytes (senders).
    pub snd_wnd: Option<u32>,
    /// Smoothed RTT, µs.
    pub rtt: Option<u32>,
    /// RTT variation, µs.
    pub rttvar: Option<u32>,
    /// Path MTU, bytes.
    pub pmtu: Option<u32>,
    /// Our receive window, bytes (receivers).
    pub rcv_wnd: Option<u32>,
}

/// [`InfoFigures`] of `info`, for a stream this end sends on (`sender`) or receives on.
pub fn info_figures(info: Option<&TcpInfo>, sender: bool) -> InfoFigures {
    InfoFigures {
        snd_cwnd: info.and_then(|i| i.cwnd_bytes()).filter(|_| sender),
        snd_wnd: info.and_then(|i| i.snd_wnd).filter(|_| sender),
        rtt: info.and_then(|i| i.srtt_us()),
        rttvar: info.and_then(|i| i.rttvar_us),
        pmtu: info.and_then(|i| i.pmtu),
        rcv_wnd: info.and_then(|i| i.rcv_wnd).filter(|_| !sender),
    }
}

/// A TCP test's counters at one moment: each stream's bytes and its latest tcp_info sample.
#[derive(Debug, Clone, Default)]
pub struct TcpCounters {
    /// Each stream's bytes moved so far.
    pub bytes: Vec<u64>,
    /// Each stream's latest tcp_info sample.
    pub latest: Vec<Option<Sample>>,
}

/// One interval of a TCP test over `span`, from the bytes at its start (`prev`) to `now`.
/// `prev_retrans`: each stream's retransmission count at its last report (tcp_info counts
/// from the connection's start), advanced here.
pub fn tcp_interval(
    l: &Layout,
    span: Span,
    prev: &TcpCounters,
    now: &TcpCounters,
    prev_retrans: &mut [Option<u32>],
) -> IntervalReport {
    let secs = span.seconds();
    let mut streams = Vec::new();
    for (i, retr_prev) in prev_retrans.iter_mut().enumerate().take(now.bytes.len()) {
        let b = now.bytes[i].saturating_sub(prev.bytes.get(i).copied().unwrap_or(0));
        let info = now.latest[i].as_ref().map(|s| &s.info);
        let sender = l.roles[i].1;
        let retr_now = info.and_then(|i| i.total_retrans);
        let retransmits = if sender {
            match (*retr_prev, retr_now) {
                (Some(a), Some(b)) => Some(b.wrapping_sub(a) as u64),
                (None, Some(b)) => Some(b as u64),
                _ => None,
            }
        } else {
            None
        };
        *retr_prev = retr_now.or(*retr_prev);
        let f = info_figures(info, sender);
        streams.push(IntervalStream {
            socket: l.fds[i],
            start: span.start,
            end: span.end,
            seconds: secs,
            bytes: b,
            bits_per_second: b as f64 * 8.0 / secs,
            retransmits,
            snd_cwnd: f.snd_cwnd,
            snd_wnd: f.snd_wnd,
            rtt: f.rtt,
            rttvar: f.rttvar,
            pmtu: f.pmtu,
            rcv_wnd: f.rcv_wnd,
            udp: None,
            omitted: false,
            sender,
        });
    }
    let sum_of = |main: bool| {
        interval_sum(l, span, &streams, main, |sel| {
            (sel.iter().map(|s| s.retransmits).sum(), None)
        })
    };
    let sum = sum_of(true).unwrap_or(IntervalSum {
        start: span.start,
        end: span.end,
        seconds: secs,
        bytes: 0,
        bits_per_second: 0.0,
        retransmits: None,
        udp: None,
        omitted: false,
        sender: l.client_sends_main,
    });
    let rev = sum_of(false);
    IntervalReport {
        streams,
        sum,
        sum_bidir_reverse: rev,
    }
}

/// The `[SUM]` of one direction of an interval (`main`: the client's main direction), from
/// its streams' bytes and what `fold` makes of them (TCP's retransmissions, UDP's figures);
/// none when that direction has no stream.
fn interval_sum(
    l: &Layout,
    span: Span,
    streams: &[IntervalStream],
    main: bool,
    fold: impl Fn(&[&IntervalStream]) -> (Option<u64>, Option<UdpFigures>),
) -> Option<IntervalSum> {
    let sender = l.client_sends_main == main;
    let sel: Vec<&IntervalStream> = streams.iter().filter(|s| s.sender == sender).collect();
    if sel.is_empty() {
        return None;
    }
    let bytes: u64 = sel.iter().map(|s| s.bytes).sum();
    let (retransmits, udp) = fold(&sel);
    let secs = span.seconds();
    Some(IntervalSum {
        start: span.start,
        end: span.end,
        seconds: secs,
        bytes,
        bits_per_second: bytes as f64 * 8.0 / secs,
        retransmits,
        udp,
        omitted: false,
        sender,
    })
}

/// iperf3's UDP figures of one stream side: a sender's datagrams, a receiver's count, loss and
/// jitter.
fn udp_figures(c: &UdpReceiver, sender: bool) -> UdpFigures {
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

pub(crate) fn percent(lost: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * lost as f64 / of as f64
    }
}

/// One interval of a UDP test over `span`, from each stream's counts at its start (`prev`)
/// to `now`; none when the main direction has no stream.
pub fn udp_interval(
    l: &Layout,
    span: Span,
    prev: &[UdpReceiver],
    now: &[UdpReceiver],
) -> Option<IntervalReport> {
    let secs = span.seconds();
    let mut st = Vec::new();
    for (k, c) in now.iter().enumerate() {
        let sender = l.roles[k].1;
        let p = prev.get(k).cloned().unwrap_or_default();
        let b = c.bytes - p.bytes;
        let d = UdpReceiver::totals(
            b,
            c.packet_count - p.packet_count,
            c.cnt_error.saturating_sub(p.cnt_error),
            c.jitter,
        );
        st.push(IntervalStream {
            socket: l.fds[k],
            start: span.start,
            end: span.end,
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
        let sender = l.client_sends_main == main;
        interval_sum(l, span, &st, main, |sel| {
            let f: Vec<&UdpFigures> = sel.iter().filter_map(|x| x.udp.as_ref()).collect();
            let packets = f.iter().map(|u| u.packets).sum();
            let lost: u64 = f.iter().filter_map(|u| u.lost_packets).sum();
            let jitters: Vec<f64> = f.iter().filter_map(|u| u.jitter_ms).collect();
            let udp = if sender {
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
            };
            (None, Some(udp))
        })
    };
    let main = sum_of(true)?;
    let rev = sum_of(false);
    Some(IntervalReport {
        sum_bidir_reverse: rev,
        sum: main,
        streams: st,
    })
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
        sender_row: sender,
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

/// A TCP stream's two sides over the whole test (iperf3's `end.streams[].sender/receiver`):
/// ours from our outcome, the server's from its results and, when it sent them, its samples
/// (`theirs`).
pub fn tcp_sides(
    o: &StreamOutcome,
    server: &Results,
    theirs: &[Sample],
    secs: f64,
) -> (EndSide, EndSide) {
    let peer = server.streams.iter().find(|s| s.id == o.id as i64);
    let peer_bytes = peer.map(|x| x.bytes).unwrap_or(0);
    let peer_retr = peer.map(|x| x.retransmits).filter(|&r| r >= 0);
    // iperf3's `sender` in both rows: whether this end sends the stream.
    let mine = |(mut a, mut b): (EndSide, EndSide)| {
        a.sender = o.sends;
        b.sender = o.sends;
        (a, b)
    };
    mine(if o.sends {
        (
            end_side(
                o.fd,
                o.bytes,
                secs,
                true,
                &o.samples,
                retrans_of(&o.samples),
            ),
            end_side(o.fd, peer_bytes, secs, false, theirs, None),
        )
    } else {
        // Without the server's samples (a stock iperf3 server), the sender row's cwnd and
        // RTT figures are our own socket's, as iperf3's client reports them in -R.
        let sender_view = if theirs.is_empty() {
            &o.samples
        } else {
            theirs
        };
        (
            end_side(o.fd, peer_bytes, secs, true, sender_view, peer_retr),
            end_side(o.fd, o.bytes, secs, false, &o.samples, None),
        )
    })
}

/// Both ends' CPU use over the test (iperf3's `end.cpu_utilization_percent`): ours, percent
/// of one core, and the server's from its results.
pub fn cpu_utilization(user: f64, system: f64, server: &Results) -> CpuUtilization {
    CpuUtilization {
        host_total: user + system,
        host_user: user,
        host_system: system,
        remote_total: server.cpu_util_total,
        remote_user: server.cpu_util_user,
        remote_system: server.cpu_util_system,
    }
}

/// A TCP test's `end` object from each stream's two sides (`sides`, in the order of
/// `outcomes`); `client_sends_main`: whether this end sends the main direction (a client not
/// in `-R`, a server in it).
pub fn tcp_end(
    p: &Params,
    client_sends_main: bool,
    outcomes: &[StreamOutcome],
    sides: Vec<(EndSide, EndSide)>,
    server: &Results,
    cpu: CpuUtilization,
    secs: f64,
) -> End {
    let pick = |main: bool| -> Vec<usize> {
        outcomes
            .iter()
            .enumerate()
            .filter(|(_, o)| (o.sends == client_sends_main) == main)
            .map(|(i, _)| i)
            .collect()
    };
    let (main, rev) = (pick(true), pick(false));
    let side = |idx: &[usize], sender: bool| {
        let v: Vec<&EndSide> = idx
            .iter()
            .map(|&i| if sender { &sides[i].0 } else { &sides[i].1 })
            .collect();
        sum(&v, secs, sender)
    };
    let bidir = p.direction == Direction::Bidirectional;
    let ours_cc = outcomes.iter().find_map(|o| o.congestion.clone());
    let (sender_cc, receiver_cc) = if client_sends_main {
        (ours_cc, server.congestion_used.clone())
    } else {
        (server.congestion_used.clone(), ours_cc)
    };
    // iperf3's `sender` in a sum: whether this end sends that direction.
    let mine = |mut s: EndSum, sends: bool| {
        s.sender = sends;
        s
    };
    End {
        sum_sent: mine(side(&main, true), client_sends_main),
        sum_received: mine(side(&main, false), client_sends_main),
        sum_sent_bidir_reverse: bidir.then(|| mine(side(&rev, true), !client_sends_main)),
        sum_received_bidir_reverse: bidir.then(|| mine(side(&rev, false), !client_sends_main)),
        sum: None,
        sum_bidir_reverse: None,
        cpu_utilization_percent: cpu,
        sender_tcp_congestion: sender_cc,
        receiver_tcp_congestion: receiver_cc,
        streams: sides
            .into_iter()
            .map(|(snd, rcv)| EndStream {
                sender: Some(snd),
                receiver: Some(rcv),
                udp: None,
                diskfile: None,
            })
            .collect(),
    }
}

/// One UDP stream over the whole test: its socket, role, the sending and receiving ends'
/// counts, and the receiver's time.
struct UdpRow {
    fd: i32,
    sends: bool,
    snd: UdpReceiver,
    rcv: UdpReceiver,
    rcv_secs: f64,
}

/// Each UDP stream's sending and receiving ends: ours, and the server's results. `base`: the
/// counts when `-O`'s seconds ended.
fn udp_rows(
    l: &Layout,
    outcomes: &[UdpOutcome],
    base: Option<&[UdpReceiver]>,
    server: &Results,
    secs: f64,
) -> Vec<UdpRow> {
    let mut rows = Vec::new();
    for (k, o) in outcomes.iter().enumerate() {
        let peer = server.streams.iter().find(|x| x.id == o.id as i64);
        let peer_end = peer.and_then(|x| x.end_time).unwrap_or(secs);
        // After -O: the peer's bytes already, its datagrams and losses less the omitted ones
        // it reports, or (iperf3 before 3.13 does not report them) less ours, as iperf3 3.12
        // subtracts its own.
        let o0 = base.and_then(|v| v.get(k)).cloned().unwrap_or_default();
        let after = |n: Option<i64>, omitted: Option<i64>, own: u64| {
            let o = omitted.map(|v| v.max(0) as u64).unwrap_or(own);
            (n.unwrap_or(0).max(0) as u64).saturating_sub(o)
        };
        let theirs = UdpReceiver::totals(
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
        let mut ours = UdpReceiver::totals(
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
        rows.push(UdpRow {
            fd: l.fds[k],
            sends: o.sends,
            snd,
            rcv,
            rcv_secs,
        });
    }
    rows
}

/// iperf3's row of a UDP stream: this end's bytes; the receiver's loss and jitter; the
/// sender's datagrams (or, at a receiver, the highest count seen).
fn udp_end_row(r: &UdpRow, secs: f64) -> UdpEnd {
    let (bytes, packets, t) = if r.sends {
        (r.snd.bytes, r.snd.packet_count, secs)
    } else {
        (r.rcv.bytes, r.rcv.packet_count, r.rcv_secs)
    };
    UdpEnd {
        socket: r.fd,
        start: 0.0,
        end: t,
        seconds: t,
        bytes,
        bits_per_second: bytes as f64 * 8.0 / t.max(1e-9),
        jitter_ms: r.rcv.jitter * 1000.0,
        lost_packets: r.rcv.cnt_error,
        packets,
        lost_percent: percent(r.rcv.cnt_error, packets),
        out_of_order: r.rcv.outoforder,
        sender: r.sends,
    }
}

/// One direction's sums of a UDP test: the sender's row, the receiver's, and iperf3's
/// `end.sum` (this end's bytes, with the receiver's loss and jitter); none without streams.
fn udp_sums(rows: &[UdpRow], this_end_sends: bool, secs: f64) -> Option<(EndSum, EndSum, EndSum)> {
    let sel: Vec<&UdpRow> = rows.iter().filter(|r| r.sends == this_end_sends).collect();
    if sel.is_empty() {
        return None;
    }
    let rcv_secs = sel.iter().map(|r| r.rcv_secs).fold(0.0, f64::max);
    let sent: u64 = sel.iter().map(|r| r.snd.bytes).sum();
    let sent_pk: u64 = sel.iter().map(|r| r.snd.packet_count).sum();
    let recv: u64 = sel.iter().map(|r| r.rcv.bytes).sum();
    let recv_pk: u64 = sel.iter().map(|r| r.rcv.packet_count).sum();
    let lost: u64 = sel.iter().map(|r| r.rcv.cnt_error).sum();
    let jitter = sel.iter().map(|r| r.rcv.jitter).sum::<f64>() * 1000.0 / sel.len() as f64;
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
    let own_bytes = if this_end_sends { sent } else { recv };
    let sum = EndSum {
        start: 0.0,
        end: rcv_secs,
        seconds: rcv_secs,
        bytes: own_bytes,
        bits_per_second: own_bytes as f64 * 8.0 / secs.max(1e-9),
        retransmits: None,
        udp: receiver_row.udp.clone(),
        sender: this_end_sends,
    };
    Some((sender_row, receiver_row, sum))
}

/// A UDP test's `end` object; none when its main direction has no stream.
pub fn udp_end(
    p: &Params,
    l: &Layout,
    outcomes: &[UdpOutcome],
    base: Option<&[UdpReceiver]>,
    server: &Results,
    cpu: CpuUtilization,
    secs: f64,
) -> Option<End> {
    let rows = udp_rows(l, outcomes, base, server, secs);
    let (sum_sent, sum_received, sum) = udp_sums(&rows, l.client_sends_main, secs)?;
    let bidir = p.direction == Direction::Bidirectional;
    let rev = udp_sums(&rows, !l.client_sends_main, secs).filter(|_| bidir);
    Some(End {
        streams: rows
            .iter()
            .map(|r| EndStream {
                sender: None,
                receiver: None,
                udp: Some(udp_end_row(r, secs)),
                diskfile: None,
            })
            .collect(),
        sum: Some(sum),
        sum_bidir_reverse: rev.as_ref().map(|r| r.2.clone()),
        sum_sent,
        sum_received,
        sum_sent_bidir_reverse: rev.as_ref().map(|r| r.0.clone()),
        sum_received_bidir_reverse: rev.as_ref().map(|r| r.1.clone()),
        cpu_utilization_percent: cpu,
        sender_tcp_congestion: None,
        receiver_tcp_congestion: None,
    })
}

/// The whole document: iperf3's objects, the server's output when asked for, and tcptune's
/// extension.
pub fn output(
    p: &Params,
    start: Start,
    intervals: Vec<IntervalReport>,
    end: End,
    server: &Results,
    tcptune: Extension,
) -> TestOutput {
    TestOutput {
        start,
        intervals,
        end,
        tcptune,
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
        interrupted: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcptune_iperf3::StreamResult;
    use tcptune_kernel::tcp_info::TcpInfo;
    use tcptune_model::Dur;

    fn sample(at_ms: u64, retrans: u32, rtt_us: u32) -> Sample {
        Sample {
            at_s: Dur::from_micros(at_ms * 1000),
            info: TcpInfo {
                total_retrans: Some(retrans),
                snd_cwnd: Some(10),
                snd_mss: Some(1000),
                rtt_us: Some(rtt_us),
                snd_wnd: Some(65_536),
                rcv_wnd: Some(131_072),
                ..TcpInfo::default()
            },
            skmem: None,
        }
    }

    fn results(streams: Vec<StreamResult>, cc: Option<&str>) -> Results {
        Results {
            cpu_util_total: 12.0,
            cpu_util_user: 2.0,
            cpu_util_system: 10.0,
            sender_has_retransmits: 1,
            congestion_used: cc.map(String::from),
            streams,
            server_output_json: None,
            server_output_text: Some("server text".into()),
            extension: None,
        }
    }

    fn stream_result(id: i64, bytes: u64, retransmits: i64) -> StreamResult {
        StreamResult {
            id,
            bytes,
            retransmits,
            jitter: 0.0,
            errors: 0,
            omitted_errors: Some(0),
            packets: 0,
            omitted_packets: Some(0),
            start_time: Some(0.0),
            end_time: Some(2.0),
        }
    }

    fn bidir_layout() -> Layout {
        Layout {
            roles: vec![(1, true), (3, false)],
            fds: vec![5, 6],
            client_sends_main: true,
        }
    }

    #[test]
    fn a_tcp_interval_is_the_difference_of_two_readings_per_direction() {
        let l = bidir_layout();
        let prev = TcpCounters {
            bytes: vec![100, 0],
            latest: vec![None, None],
        };
        let now = TcpCounters {
            bytes: vec![1_100, 500],
            latest: vec![Some(sample(1500, 7, 2000)), Some(sample(1500, 0, 900))],
        };
        let mut retrans = vec![Some(4), None];
        let span = Span {
            start: 1.0,
            end: 1.5,
        };
        let r = tcp_interval(&l, span, &prev, &now, &mut retrans);
        let (tx, rx) = (&r.streams[0], &r.streams[1]);
        assert_eq!((tx.socket, tx.bytes, tx.retransmits), (5, 1000, Some(3)));
        assert_eq!(tx.bits_per_second, 16_000.0);
        assert_eq!(
            (tx.snd_cwnd, tx.snd_wnd, tx.rcv_wnd),
            (Some(10_000), Some(65_536), None)
        );
        assert_eq!((tx.start, tx.end, tx.rtt), (1.0, 1.5, Some(2000)));
        // The receiving stream: no sender figures, its own window.
        assert_eq!((rx.bytes, rx.retransmits, rx.snd_cwnd), (500, None, None));
        assert_eq!((rx.rcv_wnd, rx.sender), (Some(131_072), false));
        // Each direction summed apart.
        assert_eq!(
            (r.sum.bytes, r.sum.sender, r.sum.retransmits),
            (1000, true, Some(3))
        );
        let rev = r.sum_bidir_reverse.as_ref().unwrap();
        assert_eq!((rev.bytes, rev.sender, rev.retransmits), (500, false, None));
        // The next interval counts retransmissions from this one's.
        assert_eq!(retrans, [Some(7), Some(0)]);
        // A forward test's interval has no reverse sum.
        let fwd = Layout {
            roles: vec![(1, true)],
            fds: vec![5],
            client_sends_main: true,
        };
        let one = |b: u64| TcpCounters {
            bytes: vec![b],
            latest: vec![None],
        };
        let r = tcp_interval(&fwd, span, &one(0), &one(10), &mut [None]);
        assert!(r.sum_bidir_reverse.is_none());
        assert_eq!(r.sum.retransmits, None);
    }

    #[test]
    fn the_tcp_end_document_from_recorded_outcomes() {
        let p = Params {
            direction: Direction::Bidirectional,
            parallel: 1,
            ..Params::default()
        };
        let outcome = |id: u32, sends: bool, bytes: u64, samples: Vec<Sample>| StreamOutcome {
            id,
            sends,
            bytes,
            samples,
            local: None,
            remote: None,
            congestion: Some("cubic".into()),
            fd: id as i32 + 4,
        };
        let outcomes = vec![
            outcome(
                1,
                true,
                4_000_000,
                vec![sample(0, 2, 1000), sample(2000, 5, 3000)],
            ),
            outcome(3, false, 1_000_000, vec![sample(2000, 0, 800)]),
        ];
        let server = results(
            vec![
                stream_result(1, 3_900_000, -1),
                stream_result(3, 1_000_000, 4),
            ],
            Some("bbr"),
        );
        let secs = 2.0;
        let sides: Vec<_> = outcomes
            .iter()
            .map(|o| tcp_sides(o, &server, &[], secs))
            .collect();
        // Our sending stream: our bytes and retransmissions, RTT from our samples.
        let (snd, rcv) = &sides[0];
        assert_eq!(
            (snd.bytes, snd.retransmits, snd.sender),
            (4_000_000, Some(3), true)
        );
        assert_eq!(
            (snd.max_rtt, snd.min_rtt, snd.mean_rtt),
            (Some(3000), Some(1000), Some(2000))
        );
        assert_eq!(
            (rcv.bytes, rcv.retransmits, rcv.max_rtt),
            (3_900_000, None, None)
        );
        // The server's sending stream: its bytes and retransmissions; without its samples
        // the sender row's RTT is our socket's, as iperf3's client reports it.
        let (snd, rcv) = &sides[1];
        assert_eq!(
            (snd.bytes, snd.retransmits, snd.max_rtt),
            (1_000_000, Some(4), Some(800))
        );
        // iperf3's `sender` in both rows is whether this end sends the stream (3.12's -J).
        assert_eq!(
            (rcv.bytes, rcv.sender, rcv.sender_row),
            (1_000_000, false, false)
        );
        assert!(!snd.sender && snd.sender_row);
        assert!(sides[0].0.sender && sides[0].1.sender && !sides[0].1.sender_row);
        let cpu = cpu_utilization(30.0, 20.0, &server);
        assert_eq!((cpu.host_total, cpu.remote_total), (50.0, 12.0));
        let end = tcp_end(&p, true, &outcomes, sides, &server, cpu, secs);
        assert_eq!(end.sum_sent.bytes, 4_000_000);
        assert_eq!(end.sum_sent.bits_per_second, 16_000_000.0);
        assert_eq!(end.sum_received.bytes, 3_900_000);
        assert_eq!(
            end.sum_sent_bidir_reverse.as_ref().unwrap().bytes,
            1_000_000
        );
        assert_eq!(
            end.sum_sent_bidir_reverse.as_ref().unwrap().retransmits,
            Some(4)
        );
        assert_eq!(
            end.sum_received_bidir_reverse.as_ref().unwrap().bytes,
            1_000_000
        );
        assert_eq!(end.sender_tcp_congestion.as_deref(), Some("cubic"));
        assert_eq!(end.receiver_tcp_congestion.as_deref(), Some("bbr"));
        assert!(end.sum.is_none() && end.streams.len() == 2);
        // The client sends the main direction: both of its sums say so, both reverse ones not.
        assert!(end.sum_sent.sender && end.sum_received.sender);
        assert!(!end.sum_sent_bidir_reverse.as_ref().unwrap().sender);
        assert!(!end.sum_received_bidir_reverse.as_ref().unwrap().sender);
    }

    #[test]
    fn the_udp_end_document_leaves_out_the_omitted_seconds() {
        let l = Layout {
            roles: vec![(1, true)],
            fds: vec![7],
            client_sends_main: true,
        };
        let p = Params::default();
        let outcomes = vec![UdpOutcome {
            id: 1,
            sends: true,
            counts: UdpReceiver::totals(10_000, 10, 0, 0.0),
        }];
        // -O: 2 datagrams were sent while omitting.
        let base = vec![UdpReceiver::totals(2_000, 2, 0, 0.0)];
        let server = results(
            vec![StreamResult {
                bytes: 8_000,
                jitter: 0.002,
                errors: 1,
                omitted_errors: Some(0),
                packets: 10,
                omitted_packets: Some(2),
                ..stream_result(1, 8_000, -1)
            }],
            None,
        );
        let cpu = cpu_utilization(1.0, 1.0, &server);
        let end = udp_end(&p, &l, &outcomes, Some(&base), &server, cpu, 2.0).unwrap();
        let u = end.sum_received.udp.as_ref().unwrap();
        assert_eq!((end.sum_sent.bytes, end.sum_received.bytes), (8_000, 8_000));
        assert_eq!(
            (u.packets, u.lost_packets, u.lost_percent),
            (8, Some(1), Some(12.5))
        );
        assert!((u.jitter_ms.unwrap() - 2.0).abs() < 1e-12);
        let row = end.streams[0].udp.as_ref().unwrap();
        assert_eq!(
            (row.socket, row.bytes, row.packets, row.sender),
            (7, 8_000, 8, true)
        );
        assert_eq!(end.sum.as_ref().unwrap().bytes, 8_000);
        assert!(end.sum_bidir_reverse.is_none() && end.sender_tcp_congestion.is_none());
        // An interval: the receiver's jitter averaged over streams, its loss summed.
        let rx = Layout {
            roles: vec![(1, false), (3, false)],
            fds: vec![7, 8],
            client_sends_main: false,
        };
        let mut a = UdpReceiver::totals(3_000, 3, 1, 0.001);
        a.jitter = 0.001;
        let b = UdpReceiver::totals(1_000, 1, 0, 0.003);
        let zero = vec![UdpReceiver::default(); 2];
        let span = Span {
            start: 0.0,
            end: 0.5,
        };
        let r = udp_interval(&rx, span, &zero, &[a, b]).unwrap();
        let s = r.sum.udp.as_ref().unwrap();
        assert_eq!(
            (r.sum.bytes, s.packets, s.lost_packets),
            (4_000, 4, Some(1))
        );
        assert!((s.jitter_ms.unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(r.sum.bits_per_second, 64_000.0);
        assert!(!r.sum.sender);
    }

    #[test]
    fn the_start_and_the_whole_document_say_what_was_asked() {
        let p = Params {
            mss: Some(1400),
            bandwidth_bps: Some(10_000_000),
            get_server_output: false,
            ..Params::default()
        };
        let facts = StartFacts {
            connected: vec![connected(
                5,
                Some("127.0.0.1:40000".parse().unwrap()),
                Some("127.0.0.1:5201".parse().unwrap()),
            )],
            protocol: "UDP",
            started_at: 1_795_486_734,
            host: "localhost".into(),
            port: 5201,
            cookie: "c".into(),
            tcp_mss_default: 1448,
            sndbuf: 212_992,
            rcvbuf: 131_072,
        };
        let s = start(&p, facts);
        // -M given: iperf3 writes it, not the default.
        assert_eq!((s.tcp_mss, s.tcp_mss_default), (Some(1400), None));
        assert_eq!(
            (s.target_bitrate, s.test_start.target_bitrate),
            (10_000_000, 10_000_000)
        );
        assert_eq!(s.test_start.protocol, "UDP");
        assert_eq!(
            (
                s.connected[0].local_port,
                s.connected[0].remote_host.as_str()
            ),
            (40000, "127.0.0.1")
        );
        assert_eq!(s.timestamp.time, "Tue, 24 Nov 2026 02:18:54 GMT");
        // The server's output only when asked for.
        let server = results(Vec::new(), None);
        let l = Layout::default();
        let end = udp_end(
            &p,
            &l,
            &[],
            None,
            &server,
            cpu_utilization(0.0, 0.0, &server),
            1.0,
        );
        assert!(
            end.is_none(),
            "no stream in the main direction: no end document"
        );
        let end = tcp_end(
            &p,
            true,
            &[],
            Vec::new(),
            &server,
            cpu_utilization(0.0, 0.0, &server),
            1.0,
        );
        let ext = Extension {
            sample_period_s: 0.05,
            server_samples: false,
            streams: Vec::new(),
            diagnosis: tcptune_diagnose::throughput::diagnose_test(Vec::new(), &Default::default()),
            latency: None,
        };
        let out = output(&p, s.clone(), Vec::new(), end.clone(), &server, ext.clone());
        assert!(out.server_output_text.is_none());
        let asked = Params {
            get_server_output: true,
            ..p.clone()
        };
        let out = output(&asked, s, Vec::new(), end, &server, ext);
        assert_eq!(out.server_output_text.as_deref(), Some("server text"));
    }
}
