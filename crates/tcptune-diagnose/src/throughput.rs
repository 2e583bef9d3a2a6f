//! The end-of-test diagnosis of a throughput test (`tcptune test`, the lab's runner): for each
//! stream and for the whole test, what limited throughput, the evidence, the bounds the models
//! give for the measured RTT and loss, how far the result is from them, and the concrete change
//! that would help, with values computed from the bandwidth-delay product (sans-IO: samples and
//! figures in, a [`TestDiagnosis`] out).
//!
//! The limit follows the sender's chronograph shares over the whole test (see the crate
//! documentation): the receiver's window, the send buffer, the application, or the network; a
//! network-limited stream is then split into loss-limited (retransmissions at a rate whose
//! Mathis bound is near the result), path-capacity (at the given `--path-rate`) and plain
//! cwnd-limited. Options missing from the handshake (SACK, timestamps, window scaling) are
//! problems of their own, as in seed 001.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_model::buffers::{buffers, BufferQuery, FlowSharing};
use tcptune_model::kernel::{CongestionControl, KernelSource, KernelVersion};
use tcptune_model::mathis::{mathis_bps, MathisConstant};
use tcptune_model::pftk::{pftk, PftkQuery};
use tcptune_model::{Bytes, Dur, Probability, Rate};

use crate::{interval, size, Negotiated, Sample, Shares};

/// The default `tcp_rmem`/`tcp_wmem` initial sizes, kept in recommended commands.
const RMEM_DEFAULT: u64 = 131_072;
const WMEM_DEFAULT: u64 = 16_384;
/// A loss rate (retransmitted / sent segments) above which a network-limited stream counts as
/// loss-limited even when the Mathis bound is far above the result (timeouts dominate there,
/// and Mathis is optimistic).
const LOSS_SIGNIFICANT: f64 = 0.01;
/// A network-limited stream with loss is loss-limited when it reaches this fraction of the
/// Mathis bound: loss explains the rate. Far below it, something else (the path) sets it.
const NEAR_MATHIS: f64 = 0.3;
/// cwnd / receiver's window at or above this, with the result at [`AT_WINDOW_BOUND`] of
/// window/RTT, means the receiver's window limited the flow.
const WINDOW_EVIDENCE: f64 = 1.5;
const AT_WINDOW_BOUND: f64 = 0.8;
/// The same seen from the receiver alone: the window it advertises is sampled just after reads
/// reopen it, so its median overstates the window in flight (a 64 KiB buffer on a 20 ms path
/// delivers about 0.8 of it); far below this, the receiver's window was not what limited.
const AT_WINDOW_BOUND_RECEIVER: f64 = 0.6;
/// In flight below this fraction of cwnd and of the receiver's window: something before the
/// network (the send buffer, with the evidence) held the data back.
const IN_FLIGHT_SHORT: f64 = 0.7;
/// Reaching this fraction of the path rate means the path itself is the limit.
const AT_PATH_RATE: f64 = 0.9;

/// What the caller knows about the test and the hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct TestContext {
    /// The bottleneck rate (`--path-rate`), when known.
    pub path_rate: Option<Rate>,
    /// The socket buffer the test asked for (`-w`); it turns autotuning off.
    pub window: Option<Bytes>,
    /// The sender's rate cap (`-b`), per stream.
    pub rate_cap: Option<Rate>,
    pub congestion: Option<CongestionControl>,
    /// The kernel whose buffer arithmetic the recommendations use.
    pub kernel: KernelVersion,
    pub kernel_source: KernelSource,
    /// Parallel streams in one direction: they share the path (and the BDP).
    pub streams: u32,
}

impl Default for TestContext {
    fn default() -> Self {
        TestContext {
            path_rate: None,
            window: None,
            rate_cap: None,
            congestion: None,
            kernel: KernelVersion::new(6, 6),
            kernel_source: KernelSource::Assumed,
            streams: 1,
        }
    }
}

/// One stream's measurements.
#[derive(Debug, Clone, Copy)]
pub struct StreamInput<'a> {
    pub id: u32,
    /// tcp_info of the sending end, in time order (empty when that end is not ours).
    pub sender: &'a [Sample],
    /// tcp_info of the receiving end, in time order (may be empty).
    pub receiver: &'a [Sample],
    /// Bytes the receiver got.
    pub received_bytes: u64,
    /// How long the test ran.
    pub seconds: Dur,
}

/// What limited a test or stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TestLimit {
    /// The receiver's advertised window (its receive buffer).
    ReceiverWindow,
    /// The sender's send buffer.
    SendBuffer,
    /// Loss: retransmissions held cwnd down.
    Loss,
    /// The path's capacity (the result is at the given path rate).
    PathCapacity,
    /// cwnd or pacing without significant loss (slow start, congestion control, the path).
    Network,
    /// The sending application (or the `-b` cap) wrote less than the connection could carry.
    Application,
    /// The sender's side was not measured (a reverse test against a stock iperf3 server).
    Unknown,
}

impl TestLimit {
    pub fn label(self) -> &'static str {
        match self {
            TestLimit::ReceiverWindow => "receiver-window limited",
            TestLimit::SendBuffer => "send-buffer limited",
            TestLimit::Loss => "loss limited",
            TestLimit::PathCapacity => "at the path's capacity",
            TestLimit::Network => "network/cwnd limited",
            TestLimit::Application => "application limited",
            TestLimit::Unknown => "limit unknown",
        }
    }
}

/// The numbers behind a verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// Shares of the test time under each limit, at the sender.
    pub shares: Option<Shares>,
    /// Median congestion window over the test.
    pub cwnd_bytes: Option<u64>,
    /// Median window the receiver advertised (the sender's `snd_wnd`).
    pub peer_window_bytes: Option<u64>,
    /// cwnd / receiver's window: far above 1 means the receiver, not the network, held it back.
    pub cwnd_over_window: Option<f64>,
    /// The receiver's socket receive buffer (when its side was sampled).
    pub receiver_buffer_bytes: Option<u64>,
    /// The sender's send buffer.
    pub send_buffer_bytes: Option<u64>,
    /// Median data in flight (unacknowledged segments × MSS).
    pub in_flight_bytes: Option<u64>,
    /// True when only the receiving end was sampled: the window is the one it advertised and
    /// the RTT its own estimate (`rcv_rtt`).
    #[serde(default)]
    pub from_receiver: bool,
    /// Mean smoothed RTT over the test.
    pub rtt_s: Option<Dur>,
    pub min_rtt_s: Option<Dur>,
    /// rtt / min_rtt.
    pub rtt_inflation: Option<f64>,
    /// Retransmitted segments.
    pub retransmits: Option<u64>,
    /// Retransmitted / sent segments: the loss estimate the models use.
    pub loss_ratio: Option<f64>,
    /// Retransmitted / sent bytes.
    pub retrans_ratio: Option<f64>,
    pub mss_bytes: Option<u32>,
    pub negotiated: Negotiated,
    /// Handshake options that are off, each with what it costs.
    pub missing_options: Vec<String>,
}

/// One model's bound for the measured conditions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bound {
    /// "window/RTT", "Mathis", "PFTK", "path rate".
    pub model: String,
    pub rate_bps: Rate,
    /// The inputs, in words: "64 KiB / 20.3 ms".
    pub inputs: String,
    /// Achieved / bound.
    pub achieved_fraction: f64,
}

/// A change that would help.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Recommendation {
    /// Where to make it: "the receiver", "the sender", "both ends", "the path".
    pub on: String,
    /// What to do, with the numbers behind it.
    pub change: String,
    /// The command, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// The diagnosis of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamDiagnosis {
    pub id: u32,
    pub achieved_bps: Rate,
    pub limit: TestLimit,
    /// Share of the test time under that limit, where the shares say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// One line with the numbers.
    pub verdict: String,
    pub evidence: Evidence,
    pub bounds: Vec<Bound>,
    pub recommendations: Vec<Recommendation>,
    /// True when something should change (exit code 1).
    pub problem: bool,
}

/// The diagnosis of the whole test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TestDiagnosis {
    pub achieved_bps: Rate,
    /// The limit of most of the bytes.
    pub limit: TestLimit,
    pub verdict: String,
    /// Bounds for the whole test (the sums of the streams' bounds, and the path rate).
    pub bounds: Vec<Bound>,
    /// The streams' recommendations without repeats.
    pub recommendations: Vec<Recommendation>,
    pub streams: Vec<StreamDiagnosis>,
    pub problem: bool,
}

fn median(mut v: Vec<u64>) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

fn pct(x: f64) -> String {
    if x < 0.01 && x > 0.0 {
        format!("{:.2}%", x * 100.0)
    } else {
        format!("{:.0}%", x * 100.0)
    }
}

/// Samples that carry data (skips the handshake-time zeros).
fn active(samples: &[Sample]) -> Vec<&Sample> {
    samples
        .iter()
        .filter(|s| s.info.bytes_sent.unwrap_or(0) > 0 || s.info.bytes_received.unwrap_or(0) > 0)
        .collect()
}

fn missing_options(n: &Negotiated) -> Vec<String> {
    let mut m = Vec::new();
    if n.sack == Some(false) {
        m.push("SACK is off: each loss costs a round trip per lost segment to repair".to_string());
    }
    if n.timestamps == Some(false) {
        m.push("timestamps are off: RTT is sampled once per window, and PAWS is lost".into());
    }
    if n.window_scaling == Some(false) {
        m.push("window scaling is off: the receive window cannot exceed 64 KiB".into());
    }
    m
}

fn evidence(input: &StreamInput<'_>) -> Evidence {
    let snd = active(input.sender);
    let rcv = active(input.receiver);
    let last = snd.last().or(rcv.last()).copied();
    let mut e = Evidence::default();
    if let (Some(a), Some(b)) = (input.sender.first(), snd.last()) {
        let iv = interval(a, b);
        e.shares = iv.shares;
        e.loss_ratio = iv.loss_ratio;
        e.retrans_ratio = iv.retrans_ratio;
        e.retransmits = match (a.info.total_retrans, b.info.total_retrans) {
            (Some(x), Some(y)) => Some(y.wrapping_sub(x) as u64),
            _ => None,
        };
    }
    e.cwnd_bytes = median(snd.iter().filter_map(|s| s.info.cwnd_bytes()).collect());
    e.peer_window_bytes = median(
        snd.iter()
            .filter_map(|s| s.info.snd_wnd.map(u64::from))
            .collect(),
    );
    e.cwnd_over_window = match (e.cwnd_bytes, e.peer_window_bytes) {
        (Some(c), Some(w)) if w > 0 => Some(c as f64 / w as f64),
        _ => None,
    };
    e.receiver_buffer_bytes = rcv
        .iter()
        .rev()
        .find_map(|s| s.skmem.map(|m| m.rcvbuf as u64));
    e.send_buffer_bytes = snd
        .iter()
        .rev()
        .find_map(|s| s.skmem.map(|m| m.sndbuf as u64));
    e.in_flight_bytes = median(
        snd.iter()
            .filter_map(|s| Some(s.info.unacked? as u64 * s.info.snd_mss? as u64))
            .filter(|&b| b > 0)
            .collect(),
    );
    let rtts: Vec<u32> = snd.iter().filter_map(|s| s.info.srtt_us()).collect();
    if !rtts.is_empty() {
        let mean = rtts.iter().map(|&r| r as f64).sum::<f64>() / rtts.len() as f64;
        e.rtt_s = Some(Dur::from_micros(mean.round() as u64));
    }
    e.min_rtt_s = snd
        .iter()
        .rev()
        .find_map(|s| s.info.min_rtt())
        .map(|r| Dur::from_micros(r as u64));
    e.rtt_inflation = match (e.rtt_s, e.min_rtt_s) {
        (Some(r), Some(m)) if m > Dur::ZERO => Some(r.secs() / m.secs()),
        _ => None,
    };
    if snd.is_empty() && !rcv.is_empty() {
        // Only the receiving end was sampled (a stock iperf3 server sent): the window it
        // advertised and its own RTT estimate (rcv_rtt) still give the window/RTT bound.
        e.peer_window_bytes = median(
            rcv.iter()
                .filter_map(|s| s.info.rcv_wnd.map(u64::from))
                .filter(|&w| w > 0)
                .collect(),
        );
        let rtts: Vec<u32> = rcv
            .iter()
            .filter_map(|s| s.info.rcv_rtt_us)
            .filter(|&r| r > 0)
            .collect();
        if !rtts.is_empty() {
            let mean = rtts.iter().map(|&r| r as f64).sum::<f64>() / rtts.len() as f64;
            e.rtt_s = Some(Dur::from_micros(mean.round() as u64));
        }
        e.from_receiver = true;
    }
    if let Some(l) = last {
        e.mss_bytes = l.info.snd_mss;
        e.negotiated = Negotiated::of(&l.info);
        e.missing_options = missing_options(&e.negotiated);
    }
    e
}

fn bound(model: &str, rate: Rate, inputs: String, achieved: Rate) -> Bound {
    Bound {
        model: model.into(),
        rate_bps: rate,
        inputs,
        achieved_fraction: if rate.bps() > 0.0 {
            achieved.bps() / rate.bps()
        } else {
            0.0
        },
    }
}

fn bounds(e: &Evidence, achieved: Rate, ctx: &TestContext, rto: Option<Dur>) -> Vec<Bound> {
    let mut out = Vec::new();
    if let (Some(w), Some(rtt)) = (e.peer_window_bytes, e.rtt_s) {
        if rtt > Dur::ZERO {
            let r = Rate::from_bytes_per(Bytes::new(w), rtt);
            out.push(bound(
                "window/RTT",
                r,
                format!("receiver's window {} / RTT {rtt}", size(w)),
                achieved,
            ));
        }
    }
    if let (Some(p), Some(mss), Some(rtt)) = (e.loss_ratio, e.mss_bytes, e.rtt_s) {
        if p > 0.0 && rtt > Dur::ZERO && mss > 0 {
            let c = MathisConstant::Periodic;
            let m = Rate::from_bps(mathis_bps(Bytes::new(mss as u64), rtt, p, c.value()));
            out.push(bound(
                "Mathis",
                m,
                format!("MSS {mss} B, RTT {rtt}, loss {}", pct(p)),
                achieved,
            ));
            if let Some(prob) = Probability::new(p.min(1.0)) {
                let q = PftkQuery {
                    mss: Bytes::new(mss as u64),
                    rtt,
                    loss: prob,
                    rto: rto.unwrap_or(Dur::from_millis(200)),
                    packets_per_ack: 1,
                    window: e.peer_window_bytes.map(Bytes::new),
                };
                if let Ok(pf) = pftk(&q) {
                    out.push(bound(
                        "PFTK",
                        pf.rate_bps,
                        format!("as Mathis, RTO {}, receiver's window", q.rto),
                        achieved,
                    ));
                }
            }
        }
    }
    if let Some(p) = ctx.path_rate {
        let share = Rate::from_bps(p.bps() / ctx.streams.max(1) as f64);
        let inputs = if ctx.streams > 1 {
            format!("{p} shared by {} streams", ctx.streams)
        } else {
            format!("{p}")
        };
        out.push(bound("path rate", share, inputs, achieved));
    }
    out
}

/// The rate the buffers should be sized for: the path rate when given; otherwise 4× what the
/// window allowed (a guess, said so).
fn target_rate(achieved: Rate, ctx: &TestContext) -> (Rate, bool) {
    match ctx.path_rate {
        Some(p) => (p, false),
        None => (
            Rate::from_bps(achieved.bps() * 4.0 * ctx.streams.max(1) as f64),
            true,
        ),
    }
}

fn query(rate: Rate, rtt: Dur, ctx: &TestContext) -> BufferQuery {
    BufferQuery {
        rate,
        rtt,
        flows: ctx.streams.max(1),
        sharing: FlowSharing::Shared,
        memory_budget: None,
        kernel: ctx.kernel,
        kernel_source: ctx.kernel_source,
        scaling_ratio: None,
        adv_win_scale: None,
        cc: ctx.congestion.unwrap_or(CongestionControl::Cubic),
    }
}

fn sizing_note(rate: Rate, rtt: Dur, guessed: bool, window: Bytes) -> String {
    let why = if guessed {
        " (no --path-rate given: sized for 4× this result; give --path-rate RATE to size it for the path)"
    } else {
        ""
    };
    format!("BDP {rate} × {rtt} = {} per flow{why}", size(window.get()))
}

fn buffer_recommendations(
    limit: TestLimit,
    e: &Evidence,
    achieved: Rate,
    ctx: &TestContext,
) -> Vec<Recommendation> {
    // The RTT the test measured (a window-limited flow builds no queue, so this is the path's
    // RTT plus the hosts' own delay, which the window must cover too).
    let Some(rtt) = e.rtt_s.or(e.min_rtt_s).filter(|r| *r > Dur::ZERO) else {
        return Vec::new();
    };
    let (rate, guessed) = target_rate(achieved, ctx);
    let Ok(b) = buffers(&query(rate, rtt, ctx)) else {
        return Vec::new();
    };
    let note = sizing_note(b.flow_rate_bps, rtt, guessed, b.window_bytes);
    // The buffer limited this test, so a maximum no larger than it cannot help: at least
    // twice the buffer measured, and never below the kernel's own default maximum for
    // small paths (64 KiB).
    let floor = |measured: Option<u64>| measured.map(|m| 2 * m).unwrap_or(0).max(65_536);
    let mut out = Vec::new();
    match limit {
        TestLimit::ReceiverWindow => {
            let n = b
                .tcp_rmem_max_bytes
                .get()
                .max(floor(e.receiver_buffer_bytes));
            out.push(Recommendation {
                on: "the receiver".into(),
                change: format!(
                    "let the receive buffer grow to {} so the window covers the BDP: {note}",
                    size(n)
                ),
                command: Some(format!(
                    "sysctl -w net.ipv4.tcp_rmem=\"4096 {} {n}\"",
                    RMEM_DEFAULT.min(n)
                )),
            });
            if ctx.window.is_some() {
                out.push(Recommendation {
                    on: "the receiver".into(),
                    change: format!(
                        "-w fixes the buffer and turns autotuning off: drop it, or ask for {} \
                         (and allow it with net.core.rmem_max)",
                        size(b.so_rcvbuf_bytes.get())
                    ),
                    command: Some(format!(
                        "sysctl -w net.core.rmem_max={}; -w {}",
                        b.rmem_max_bytes.get(),
                        b.so_rcvbuf_bytes.get()
                    )),
                });
            }
        }
        TestLimit::SendBuffer => {
            let n = b.tcp_wmem_max_bytes.get().max(floor(e.send_buffer_bytes));
            out.push(Recommendation {
                on: "the sender".into(),
                change: format!(
                    "let the send buffer grow to {} ({}× the window): {note}",
                    size(n),
                    b.sndbuf_factor
                ),
                command: Some(format!(
                    "sysctl -w net.ipv4.tcp_wmem=\"4096 {} {n}\"",
                    WMEM_DEFAULT.min(n)
                )),
            });
            if ctx.window.is_some() {
                out.push(Recommendation {
                    on: "the sender".into(),
                    change: format!(
                        "-w fixes the send buffer: drop it, or ask for {} (and allow it with \
                         net.core.wmem_max)",
                        size(b.so_sndbuf_bytes.get())
                    ),
                    command: Some(format!(
                        "sysctl -w net.core.wmem_max={}; -w {}",
                        b.wmem_max_bytes.get(),
                        b.so_sndbuf_bytes.get()
                    )),
                });
            }
        }
        _ => {}
    }
    out
}

fn option_recommendations(e: &Evidence) -> Vec<Recommendation> {
    let n = &e.negotiated;
    [
        (n.sack, "SACK", "net.ipv4.tcp_sack"),
        (n.timestamps, "timestamps", "net.ipv4.tcp_timestamps"),
        (
            n.window_scaling,
            "window scaling",
            "net.ipv4.tcp_window_scaling",
        ),
    ]
    .into_iter()
    .filter(|(on, _, _)| *on == Some(false))
    .map(|(_, name, key)| Recommendation {
        on: "both ends".into(),
        change: format!("turn {name} back on where it is off (both ends must offer it)"),
        command: Some(format!("sysctl -w {key}=1")),
    })
    .collect()
}

fn dominant(s: &Shares) -> (TestLimit, f64) {
    let mut best = (TestLimit::ReceiverWindow, s.rwnd);
    for c in [
        (TestLimit::SendBuffer, s.sndbuf),
        (TestLimit::Network, s.network),
        (TestLimit::Application, s.application.unwrap_or(0.0)),
    ] {
        if c.1 > best.1 {
            best = c;
        }
    }
    best
}

fn evidence_text(limit: TestLimit, e: &Evidence, ctx: &TestContext) -> String {
    let mut parts = Vec::new();
    match limit {
        TestLimit::ReceiverWindow if e.from_receiver => {
            if let (Some(w), Some(r)) = (e.peer_window_bytes, e.rtt_s) {
                parts.push(format!(
                    "the window this receiver advertised, {} per RTT {r}, allows what it got \
                     (seen from the receiver only)",
                    size(w)
                ));
            }
            if let Some(b) = e.receiver_buffer_bytes {
                parts.push(format!("receive buffer {}", size(b)));
            }
        }
        TestLimit::ReceiverWindow => {
            if let (Some(c), Some(w)) = (e.cwnd_bytes, e.peer_window_bytes) {
                parts.push(format!(
                    "cwnd {} vs the receiver's window {} ({:.1}×)",
                    size(c),
                    size(w),
                    c as f64 / w.max(1) as f64
                ));
            }
            if let Some(b) = e.receiver_buffer_bytes {
                parts.push(format!("receive buffer {}", size(b)));
            }
        }
        TestLimit::SendBuffer => {
            if let Some(b) = e.send_buffer_bytes {
                parts.push(format!("send buffer {}", size(b)));
            }
            if let Some(f) = e.in_flight_bytes {
                parts.push(format!("{} in flight", size(f)));
            }
            if let Some(c) = e.cwnd_bytes {
                parts.push(format!("cwnd {}", size(c)));
            }
        }
        _ => {
            if let Some(c) = e.cwnd_bytes {
                parts.push(format!("cwnd {}", size(c)));
            }
        }
    }
    if let Some(p) = e.loss_ratio {
        let n = e.retransmits.unwrap_or(0);
        parts.push(format!("{n} retransmits, loss {}", pct(p)));
    }
    if let (Some(r), Some(m)) = (e.rtt_s, e.min_rtt_s) {
        parts.push(format!("RTT {r} (min {m})"));
    }
    if ctx.rate_cap.is_some() && limit == TestLimit::Application {
        parts.push("the -b rate cap".into());
    }
    parts.join(", ")
}

/// The diagnosis of one stream.
pub fn diagnose_stream(input: &StreamInput<'_>, ctx: &TestContext) -> StreamDiagnosis {
    let secs = input.seconds.secs();
    let achieved = Rate::from_bps(if secs > 0.0 {
        input.received_bytes as f64 * 8.0 / secs
    } else {
        0.0
    });
    let e = evidence(input);
    let rto = input
        .sender
        .last()
        .and_then(|s| s.info.rto_us)
        .map(|r| Dur::from_micros(r as u64));
    let bounds = bounds(&e, achieved, ctx, rto);
    let mathis = bounds.iter().find(|b| b.model == "Mathis");
    // Seed 001's evidence: cwnd well above the receiver's window, and the result at the
    // window/RTT bound. The kernel's rwnd_limited clock misses much of this time when TSO
    // defers a send the window would not allow (it counts it as busy), so the window evidence
    // decides even when the clock's shares point at the network.
    // The window is also the limit when its bound is the tightest the models give (below the
    // loss models'): a small, jumpy window (seed 001's 536-byte MSS) can keep the result under
    // 80% of its bound while a few losses would otherwise make the verdict "loss".
    let window_rtt = bounds.iter().find(|b| b.model == "window/RTT");
    let tightest = window_rtt.is_some_and(|w| {
        bounds
            .iter()
            .filter(|b| b.model == "Mathis" || b.model == "PFTK")
            .all(|b| w.rate_bps.bps() <= b.rate_bps.bps())
    });
    let window_bound = e.cwnd_over_window.is_some_and(|r| r >= WINDOW_EVIDENCE)
        && window_rtt.is_some_and(|b| b.achieved_fraction >= AT_WINDOW_BOUND || tightest);
    // The send buffer's evidence: less in flight than cwnd and the receiver's window allow, and
    // a buffer too small to hold cwnd (the autotuner sizes it factor × cwnd). The clock misses
    // this too when the kernel's one-skb allowance lets sends through.
    let factor = ctx
        .congestion
        .unwrap_or(CongestionControl::Cubic)
        .sndbuf_expand_factor() as f64;
    let sndbuf_bound = ctx.rate_cap.is_none()
        && match (e.in_flight_bytes, e.cwnd_bytes, e.send_buffer_bytes) {
            (Some(f), Some(c), Some(b)) => {
                (f as f64) < IN_FLIGHT_SHORT * c as f64
                    && e.peer_window_bytes
                        .is_none_or(|w| (f as f64) < IN_FLIGHT_SHORT * w as f64)
                    && (b as f64) < factor * c as f64
            }
            _ => false,
        };
    let (limit, share) = match e.shares {
        // Without the sender's clock, the receiver's own figures can still show its window as
        // the limit: the result at its advertised window over the RTT.
        None if e.from_receiver
            && bounds
                .iter()
                .find(|b| b.model == "window/RTT")
                .is_some_and(|b| b.achieved_fraction >= AT_WINDOW_BOUND_RECEIVER) =>
        {
            (TestLimit::ReceiverWindow, None)
        }
        None => (TestLimit::Unknown, None),
        Some(s) => {
            let (l, share) = dominant(&s);
            let l = match l {
                TestLimit::Network | TestLimit::Application if window_bound => {
                    return finish(
                        input,
                        achieved,
                        e,
                        bounds,
                        ctx,
                        TestLimit::ReceiverWindow,
                        None, // the clock would understate it; the evidence says why
                    );
                }
                TestLimit::Network | TestLimit::Application if sndbuf_bound => {
                    return finish(
                        input,
                        achieved,
                        e,
                        bounds,
                        ctx,
                        TestLimit::SendBuffer,
                        None, // the clock would understate it; the evidence says why
                    );
                }
                TestLimit::Network => {
                    let at_path = ctx
                        .path_rate
                        .is_some_and(|p| achieved.bps() >= AT_PATH_RATE * p.bps());
                    let loss = e.loss_ratio.unwrap_or(0.0);
                    let near_mathis = mathis.is_some_and(|m| m.achieved_fraction >= NEAR_MATHIS);
                    if at_path {
                        TestLimit::PathCapacity
                    } else if loss >= LOSS_SIGNIFICANT || (loss > 0.0 && near_mathis) {
                        TestLimit::Loss
                    } else {
                        TestLimit::Network
                    }
                }
                l => l,
            };
            (l, Some(share))
        }
    };
    finish(input, achieved, e, bounds, ctx, limit, share)
}

fn finish(
    input: &StreamInput<'_>,
    achieved: Rate,
    e: Evidence,
    bounds: Vec<Bound>,
    ctx: &TestContext,
    limit: TestLimit,
    share: Option<f64>,
) -> StreamDiagnosis {
    let mathis = bounds.iter().find(|b| b.model == "Mathis");
    let mut recommendations = buffer_recommendations(limit, &e, achieved, ctx);
    if limit == TestLimit::Loss {
        let m = mathis
            .map(|m| format!(" (Mathis bound {} at this loss)", m.rate_bps))
            .unwrap_or_default();
        recommendations.push(Recommendation {
            on: "the path".into(),
            change: format!(
                "find where packets are lost{m}: `tc -s qdisc` drops, `ethtool -S` errors, \
                 `nstat` TcpExtTCPLostRetransmit on both ends"
            ),
            command: None,
        });
        if ctx.congestion != Some(CongestionControl::Bbr) {
            recommendations.push(Recommendation {
                on: "the sender".into(),
                change: "BBR does not back off on random loss; try it (-C bbr) where the \
                         loss is not congestion"
                    .into(),
                command: Some("sysctl -w net.ipv4.tcp_congestion_control=bbr".into()),
            });
        }
    }
    recommendations.extend(option_recommendations(&e));
    let below_path = ctx
        .path_rate
        .is_some_and(|p| achieved.bps() < AT_PATH_RATE * p.bps() / ctx.streams.max(1) as f64);
    let problem = !e.missing_options.is_empty()
        || match limit {
            TestLimit::ReceiverWindow | TestLimit::SendBuffer | TestLimit::Loss => {
                ctx.path_rate.is_none() || below_path
            }
            TestLimit::Network => below_path,
            TestLimit::Application => ctx.rate_cap.is_none() && below_path,
            TestLimit::PathCapacity | TestLimit::Unknown => false,
        };
    let mut verdict = format!("{} at {achieved}", limit.label());
    if let Some(s) = share {
        if limit != TestLimit::Unknown {
            verdict += &format!(" ({} of the time)", pct(s));
        }
    }
    let ev = evidence_text(limit, &e, ctx);
    if !ev.is_empty() {
        verdict += &format!(": {ev}");
    }
    if limit == TestLimit::Unknown {
        verdict += if input.sender.is_empty() {
            "; the sending end was not sampled (a stock iperf3 server sent)"
        } else {
            "; this kernel does not report busy/rwnd/sndbuf time"
        };
    }
    for m in &e.missing_options {
        verdict += &format!("; {m}");
    }
    StreamDiagnosis {
        id: input.id,
        achieved_bps: achieved,
        limit,
        share,
        verdict,
        evidence: e,
        bounds,
        recommendations,
        problem,
    }
}

/// The diagnosis of a whole test from its streams' diagnoses (in one direction or both).
pub fn diagnose_test(streams: Vec<StreamDiagnosis>, ctx: &TestContext) -> TestDiagnosis {
    let achieved = Rate::from_bps(streams.iter().map(|s| s.achieved_bps.bps()).sum());
    // The limit that holds most of the bytes.
    let mut by_limit: Vec<(TestLimit, f64)> = Vec::new();
    for s in &streams {
        match by_limit.iter_mut().find(|(l, _)| *l == s.limit) {
            Some((_, b)) => *b += s.achieved_bps.bps().max(1.0),
            None => by_limit.push((s.limit, s.achieved_bps.bps().max(1.0))),
        }
    }
    let limit = by_limit
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|x| x.0)
        .unwrap_or(TestLimit::Unknown);
    let mut recommendations: Vec<Recommendation> = Vec::new();
    for s in &streams {
        for r in &s.recommendations {
            if !recommendations
                .iter()
                .any(|x| x.command == r.command && x.change == r.change)
            {
                recommendations.push(r.clone());
            }
        }
    }
    let mut bounds = Vec::new();
    for model in ["window/RTT", "Mathis", "PFTK"] {
        let per: Vec<&Bound> = streams
            .iter()
            .filter_map(|s| s.bounds.iter().find(|b| b.model == model))
            .collect();
        if !per.is_empty() && per.len() == streams.len() {
            let sum = Rate::from_bps(per.iter().map(|b| b.rate_bps.bps()).sum());
            bounds.push(bound(
                model,
                sum,
                format!("sum over {} streams", per.len()),
                achieved,
            ));
        }
    }
    if let Some(p) = ctx.path_rate {
        bounds.push(bound("path rate", p, format!("{p}"), achieved));
    }
    let problem = streams.iter().any(|s| s.problem);
    let verdict = match streams.as_slice() {
        [one] => one.verdict.clone(),
        _ => format!(
            "{} at {achieved} over {} streams ({})",
            limit.label(),
            streams.len(),
            by_limit
                .iter()
                .map(|(l, _)| format!(
                    "{} {}",
                    streams.iter().filter(|s| s.limit == *l).count(),
                    l.label()
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    TestDiagnosis {
        achieved_bps: achieved,
        limit,
        verdict,
        bounds,
        recommendations,
        streams,
        problem,
    }
}

fn write_bounds(f: &mut fmt::Formatter<'_>, bounds: &[Bound], indent: &str) -> fmt::Result {
    for b in bounds {
        writeln!(
            f,
            "{indent}{:<11} {:>14}  ({}); this test reached {}",
            b.model,
            b.rate_bps.to_string(),
            b.inputs,
            pct(b.achieved_fraction)
        )?;
    }
    Ok(())
}

impl fmt::Display for TestDiagnosis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Diagnosis: {}", self.verdict)?;
        if self.streams.len() > 1 {
            for s in &self.streams {
                writeln!(f, "  [{:>3}] {}", s.id, s.verdict)?;
            }
        }
        let bounds: &[Bound] = match self.streams.as_slice() {
            [one] => &one.bounds,
            _ => &self.bounds,
        };
        if !bounds.is_empty() {
            writeln!(f, "Bounds:")?;
            write_bounds(f, bounds, "  ")?;
        }
        if !self.recommendations.is_empty() {
            writeln!(f, "What would help:")?;
            for r in &self.recommendations {
                writeln!(f, "  on {}: {}", r.on, r.change)?;
                if let Some(c) = &r.command {
                    writeln!(f, "    {c}")?;
                }
            }
        }
        if !self.problem {
            writeln!(f, "No problem found.")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcptune_kernel::{SkMemInfo, TcpInfo};

    /// A sender's sample series: `n` samples every 100 ms with per-sample increments.
    struct Series {
        mss: u32,
        cwnd_segs: u32,
        snd_wnd: u32,
        rtt_us: u32,
        bytes_per_tick: u64,
        segs_retrans_per_tick: u32,
        busy_per_tick_us: u64,
        rwnd_per_tick_us: u64,
        sndbuf_per_tick_us: u64,
        options: u8,
        sndbuf: u32,
        unacked: u32,
    }

    impl Series {
        fn samples(&self, n: u64) -> Vec<Sample> {
            (0..=n)
                .map(|k| {
                    let bytes = self.bytes_per_tick * k;
                    let segs = (bytes / self.mss as u64) as u32;
                    Sample {
                        at_s: Dur::from_millis(100 * k),
                        info: TcpInfo {
                            len: 280,
                            options: Some(self.options),
                            snd_wscale: Some(7),
                            rcv_wscale: Some(7),
                            snd_mss: Some(self.mss),
                            snd_cwnd: Some(self.cwnd_segs),
                            rtt_us: Some(self.rtt_us),
                            min_rtt_us: Some(self.rtt_us * 9 / 10),
                            rto_us: Some(220_000),
                            snd_wnd: Some(self.snd_wnd),
                            bytes_sent: Some(bytes + 1),
                            bytes_acked: Some(bytes),
                            bytes_retrans: Some(
                                self.segs_retrans_per_tick as u64 * k * self.mss as u64,
                            ),
                            total_retrans: Some(self.segs_retrans_per_tick * k as u32),
                            data_segs_out: Some(segs),
                            busy_time_us: Some(self.busy_per_tick_us * k),
                            unacked: Some(self.unacked),
                            rwnd_limited_us: Some(self.rwnd_per_tick_us * k),
                            sndbuf_limited_us: Some(self.sndbuf_per_tick_us * k),
                            ..TcpInfo::default()
                        },
                        skmem: Some(SkMemInfo {
                            sndbuf: self.sndbuf,
                            ..SkMemInfo::default()
                        }),
                    }
                })
                .collect()
        }
    }

    fn base() -> Series {
        Series {
            mss: 1448,
            cwnd_segs: 800,
            snd_wnd: 65536,
            rtt_us: 20_000,
            bytes_per_tick: 327_680, // 64 KiB per 20 ms
            segs_retrans_per_tick: 0,
            busy_per_tick_us: 100_000,
            rwnd_per_tick_us: 95_000,
            sndbuf_per_tick_us: 0,
            options: 7, // timestamps, SACK, window scaling
            sndbuf: 4 << 20,
            unacked: 45, // 64 KiB in flight: the window's worth
        }
    }

    fn run(s: &Series, ctx: &TestContext) -> StreamDiagnosis {
        let samples = s.samples(100);
        let received = samples.last().unwrap().info.bytes_acked.unwrap();
        diagnose_stream(
            &StreamInput {
                id: 1,
                sender: &samples,
                receiver: &[],
                received_bytes: received,
                seconds: Dur::from_secs_f64(10.0),
            },
            ctx,
        )
    }

    fn ctx(path: &str) -> TestContext {
        TestContext {
            path_rate: Some(path.parse().unwrap()),
            kernel: KernelVersion::new(6, 18),
            kernel_source: KernelSource::Given,
            ..TestContext::default()
        }
    }

    #[test]
    fn a_64k_window_on_100mbit_20ms_is_receiver_window_limited_with_the_bdp_buffer() {
        let d = run(&base(), &ctx("100mbit"));
        assert_eq!(d.limit, TestLimit::ReceiverWindow);
        assert!(d.problem);
        assert!((d.share.unwrap() - 0.95).abs() < 1e-9);
        // cwnd 800 × 1448 against a 64 KiB window.
        let r = d.evidence.cwnd_over_window.unwrap();
        assert!((r - 800.0 * 1448.0 / 65536.0).abs() < 1e-9, "{r}");
        // window/RTT = 65536 B / 20 ms = 26.2 Mbit/s; the result is that bound.
        let w = &d.bounds[0];
        assert_eq!(w.model, "window/RTT");
        assert!((w.rate_bps.bps() - 65536.0 * 8.0 / 0.02).abs() < 1.0);
        assert!((w.achieved_fraction - 1.0).abs() < 0.01);
        // BDP at the measured RTT 20 ms: 100 Mbit/s × 20 ms = 250 000 B; the 6.6+ rule doubles it.
        let b = buffers(&query(
            ctx("100mbit").path_rate.unwrap(),
            Dur::from_millis(20),
            &ctx("100mbit"),
        ))
        .unwrap();
        assert_eq!(b.window_bytes.get(), 250_000);
        let cmd = d.recommendations[0].command.clone().unwrap();
        assert_eq!(
            cmd,
            format!(
                "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 {}\"",
                b.tcp_rmem_max_bytes.get()
            )
        );
        assert!(b.tcp_rmem_max_bytes.get() >= 2 * 250_000);
        assert_eq!(d.recommendations[0].on, "the receiver");
        assert!(
            d.verdict.starts_with("receiver-window limited at"),
            "{}",
            d.verdict
        );
    }

    #[test]
    fn a_recommendation_never_shrinks_the_buffer_that_limited_the_test() {
        // 1 ms RTT at 10 Mbit/s: the BDP (1250 B) is far below the 256 KiB buffer measured.
        let s = Series {
            rtt_us: 1000,
            ..base()
        };
        let mut samples = s.samples(10);
        let rcv: Vec<Sample> = samples
            .iter()
            .map(|x| Sample {
                skmem: Some(SkMemInfo {
                    rcvbuf: 262_144,
                    ..SkMemInfo::default()
                }),
                ..x.clone()
            })
            .collect();
        samples[0].info.bytes_sent = Some(0);
        let d = diagnose_stream(
            &StreamInput {
                id: 1,
                sender: &samples,
                receiver: &rcv,
                received_bytes: 1_000_000,
                seconds: Dur::from_secs_f64(1.0),
            },
            &ctx("10mbit"),
        );
        assert_eq!(d.limit, TestLimit::ReceiverWindow);
        assert_eq!(d.evidence.receiver_buffer_bytes, Some(262_144));
        assert_eq!(
            d.recommendations[0].command.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem=\"4096 131072 524288\"")
        );
    }

    #[test]
    fn cwnd_far_above_the_window_at_window_over_rtt_is_the_receivers_window() {
        // The clock says network 80%, but cwnd is 17× the window and the result is at the
        // window/RTT bound: the window limits (the kernel's clock misses TSO-deferred time).
        let s = Series {
            rwnd_per_tick_us: 20_000,
            ..base()
        };
        let d = run(&s, &ctx("100mbit"));
        assert_eq!(d.limit, TestLimit::ReceiverWindow, "{}", d.verdict);
        assert_eq!(d.share, None);
        assert!(
            d.verdict
                .contains("vs the receiver's window 64 KiB (17.7×)"),
            "{}",
            d.verdict
        );
        // Without that evidence (cwnd below the window) the same shares mean the network.
        let s = Series {
            rwnd_per_tick_us: 20_000,
            cwnd_segs: 40,
            ..base()
        };
        assert_eq!(run(&s, &ctx("100mbit")).limit, TestLimit::Network);
    }

    #[test]
    fn little_in_flight_with_a_buffer_smaller_than_cwnd_needs_is_the_send_buffer() {
        // The clock says network, but 16 KiB in flight against cwnd 1.1 MiB and a 4 MiB
        // window, with a 32 KiB send buffer: the buffer held the data back.
        let s = Series {
            snd_wnd: 4 << 20,
            rwnd_per_tick_us: 0,
            sndbuf: 32768,
            unacked: 11,
            ..base()
        };
        let d = run(&s, &ctx("1gbit"));
        assert_eq!(d.limit, TestLimit::SendBuffer, "{}", d.verdict);
        assert_eq!(d.evidence.in_flight_bytes, Some(11 * 1448));
        assert!(d.verdict.contains("in flight"), "{}", d.verdict);
        // With a buffer big enough for cwnd, the same figures are not the buffer's doing.
        let s = Series {
            sndbuf: 4 << 20,
            ..s
        };
        assert_ne!(run(&s, &ctx("1gbit")).limit, TestLimit::SendBuffer);
    }

    #[test]
    fn the_receiver_alone_can_show_its_window_as_the_limit() {
        // A download from a stock server: only our receiving socket was sampled. It
        // advertised 64 KiB, its RTT estimate is 20 ms, and it got 64 KiB per 20 ms.
        let rcv: Vec<Sample> = (0..=20u64)
            .map(|k| Sample {
                at_s: Dur::from_millis(100 * k),
                info: TcpInfo {
                    len: 280,
                    options: Some(7),
                    bytes_received: Some(327_680 * k + 1),
                    rcv_wnd: Some(65536),
                    rcv_rtt_us: Some(20_000),
                    ..TcpInfo::default()
                },
                skmem: Some(SkMemInfo {
                    rcvbuf: 131072,
                    ..SkMemInfo::default()
                }),
            })
            .collect();
        let input = StreamInput {
            id: 1,
            sender: &[],
            receiver: &rcv,
            received_bytes: 327_680 * 20,
            seconds: Dur::from_secs_f64(2.0),
        };
        let d = diagnose_stream(&input, &ctx("100mbit"));
        assert_eq!(d.limit, TestLimit::ReceiverWindow, "{}", d.verdict);
        assert!(d.evidence.from_receiver);
        assert!(
            d.verdict.contains("seen from the receiver only"),
            "{}",
            d.verdict
        );
        assert!(d.problem);
        let cmd = d.recommendations[0].command.clone().unwrap();
        assert!(cmd.starts_with("sysctl -w net.ipv4.tcp_rmem="), "{cmd}");
        // Getting far less than its window allows says nothing about the receiver.
        let input = StreamInput {
            received_bytes: 327_680,
            ..input
        };
        assert_eq!(
            diagnose_stream(&input, &ctx("100mbit")).limit,
            TestLimit::Unknown
        );
    }

    #[test]
    fn a_small_send_buffer_is_send_buffer_limited() {
        let s = Series {
            snd_wnd: 4 << 20,
            rwnd_per_tick_us: 0,
            sndbuf_per_tick_us: 90_000,
            sndbuf: 32768,
            ..base()
        };
        let c = TestContext {
            window: Some(Bytes::new(16384)),
            ..ctx("1gbit")
        };
        let d = run(&s, &c);
        assert_eq!(d.limit, TestLimit::SendBuffer);
        assert!(d.problem);
        assert_eq!(d.evidence.send_buffer_bytes, Some(32768));
        let cmds: Vec<String> = d
            .recommendations
            .iter()
            .filter_map(|r| r.command.clone())
            .collect();
        assert!(
            cmds[0].starts_with("sysctl -w net.ipv4.tcp_wmem=\"4096 16384 "),
            "{cmds:?}"
        );
        assert!(
            cmds[1].starts_with("sysctl -w net.core.wmem_max="),
            "{cmds:?}"
        );
        assert!(d.verdict.contains("send buffer 32 KiB"), "{}", d.verdict);
    }

    #[test]
    fn one_percent_loss_is_loss_limited_with_the_mathis_bound() {
        // 1 retransmitted segment per 100 sent; 20 ms RTT; the sender is cwnd-limited.
        let s = Series {
            snd_wnd: 4 << 20,
            rwnd_per_tick_us: 0,
            bytes_per_tick: 144_800 / 2, // 5.8 Mbit/s
            segs_retrans_per_tick: 1,    // ~50 segments per tick → 2 %
            cwnd_segs: 10,
            ..base()
        };
        let d = run(&s, &ctx("100mbit"));
        assert_eq!(d.limit, TestLimit::Loss);
        assert!(d.problem);
        let p = d.evidence.loss_ratio.unwrap();
        assert!((p - 1.0 / 50.0).abs() < 0.001, "{p}");
        let m = d.bounds.iter().find(|b| b.model == "Mathis").unwrap();
        // Mathis: MSS/RTT × √1.5/√p at the mean RTT 20 ms.
        let want = 1448.0 * 8.0 / 0.02 * 1.5f64.sqrt() / p.sqrt();
        assert!(
            (m.rate_bps.bps() - want).abs() < 1.0,
            "{} vs {want}",
            m.rate_bps
        );
        assert!(d.bounds.iter().any(|b| b.model == "PFTK"));
        assert!(d
            .recommendations
            .iter()
            .any(|r| r.change.contains("Mathis bound")));
    }

    #[test]
    fn at_the_path_rate_there_is_no_problem_and_missing_options_are_one() {
        let s = Series {
            snd_wnd: 4 << 20,
            rwnd_per_tick_us: 0,
            bytes_per_tick: 1_200_000, // 96 Mbit/s
            ..base()
        };
        let d = run(&s, &ctx("100mbit"));
        assert_eq!(d.limit, TestLimit::PathCapacity);
        assert!(!d.problem);
        let t = diagnose_test(vec![d], &ctx("100mbit"));
        assert!(!t.problem);
        assert!(t.to_string().contains("No problem found."));

        // Seed 001: SACK, timestamps and window scaling off.
        let s = Series {
            options: 0,
            ..base()
        };
        let d = run(&s, &ctx("100mbit"));
        assert_eq!(d.evidence.missing_options.len(), 3);
        let cmds: Vec<String> = d
            .recommendations
            .iter()
            .filter_map(|r| r.command.clone())
            .collect();
        for key in ["tcp_sack=1", "tcp_timestamps=1", "tcp_window_scaling=1"] {
            assert!(cmds.iter().any(|c| c.ends_with(key)), "{cmds:?}");
        }
        assert!(d.verdict.contains("window scaling is off"));
    }

    #[test]
    fn the_whole_test_sums_streams_and_dedups_recommendations() {
        let c = TestContext {
            streams: 2,
            ..ctx("100mbit")
        };
        let a = run(&base(), &c);
        let mut b = run(&base(), &c);
        b.id = 3;
        let t = diagnose_test(vec![a.clone(), b], &c);
        assert_eq!(t.limit, TestLimit::ReceiverWindow);
        assert!((t.achieved_bps.bps() - 2.0 * a.achieved_bps.bps()).abs() < 1.0);
        assert_eq!(t.recommendations.len(), a.recommendations.len());
        let w = t.bounds.iter().find(|b| b.model == "window/RTT").unwrap();
        assert!((w.rate_bps.bps() - 2.0 * a.bounds[0].rate_bps.bps()).abs() < 1.0);
        assert!(t.verdict.contains("over 2 streams"), "{}", t.verdict);
        // Without the sender's samples the limit is unknown, and that is not a problem.
        let d = diagnose_stream(
            &StreamInput {
                id: 1,
                sender: &[],
                receiver: &[],
                received_bytes: 1000,
                seconds: Dur::from_secs_f64(1.0),
            },
            &TestContext::default(),
        );
        assert_eq!(d.limit, TestLimit::Unknown);
        assert!(!d.problem);
    }
}
