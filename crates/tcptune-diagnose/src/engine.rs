//! The one judgement of what limits a TCP flow (sans-IO). Every command that reports a limit
//! (`conns`, `watch`, `test`, experiment trials, `analyze`) calls [`classify`] or [`diagnose`]
//! here; none has thresholds of its own.
//!
//! Inputs are typed observations: the sending socket's `tcp_info` samples, the receiving
//! socket's, CPU use of either end, and what a capture shows ([`CaptureEvidence`]). Output is
//! one [`Limit`] class with its share of the time, the evidence behind it, the models' bounds
//! and the changes that would help ([`crate::advice`]). When the evidence cannot separate the
//! classes, the answer is [`Limit::NotEnoughEvidence`] with what is missing.
//!
//! The order of the decision (each step only when the earlier ones did not decide):
//! 1. nothing moved: idle;
//! 2. the flow carries [`AT_CAPACITY`] of the payload the path can carry (after IP/TCP headers
//!    and link framing, [`tcptune_model::goodput`]): the path's capacity, whatever the
//!    chronographs say (a full link keeps the receiver's window full too);
//! 3. the sender's rate cap (`-b`) reached: the application;
//! 4. the sender's chronographs (`busy_time`, `rwnd_limited`, `sndbuf_limited`: Web100's triage
//!    in the kernel since 4.9/4.10) give the dominant share, corrected by direct evidence the
//!    clocks miss: cwnd far above a window kept full (the receiver's window), a full send buffer
//!    with room in cwnd (the send buffer), delivery-rate samples marked app-limited (the
//!    application); a network share is then split into loss (Mathis), CPU, and cwnd/pacing;
//! 5. only the receiver seen: its advertised window over its RTT estimate against what
//!    arrived; otherwise not enough evidence, saying what would decide it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_kernel::TcpInfo;
use tcptune_model::buffers::{buffers, BufferQuery, FlowSharing};
use tcptune_model::goodput::{goodput_ceiling, tcp_ip_header_bytes, ETHERNET_WIRE_FRAMING};
use tcptune_model::kernel::{CongestionControl, KernelSource, KernelVersion};
use tcptune_model::mathis::{mathis_bps, MathisConstant};
use tcptune_model::pftk::{pftk, PftkQuery};
use tcptune_model::{Bytes, Dur, Probability, Rate};

pub use crate::advice::End;
use crate::advice::{self, Knob, KnownSettings, Need, Recommendation, Value};
use crate::figures::{interval, size, Negotiated, Sample, Shares};

// ---- Thresholds: every number the judgement uses, in one place. ----

/// A flow at this fraction of the payload the path carries is at the path's capacity (the
/// rest is what a sawtooth or a probe cycle costs).
pub const AT_CAPACITY: f64 = 0.9;
/// A flow at this fraction of its `-b` cap is held by the cap.
pub const AT_RATE_CAP: f64 = 0.9;
/// The share of delivery-rate samples marked app-limited above which the sender had nothing
/// to send (the kernel's `delivery_rate_app_limited`).
pub const APP_LIMITED_SAMPLES: f64 = 0.5;
/// cwnd at least this multiple of the receiver's window, with the window kept full: the window
/// limits (seed 001's criterion).
pub const CWND_OVER_WINDOW: f64 = 1.5;
/// ... and the result at this fraction of window/RTT.
pub const AT_WINDOW_BOUND: f64 = 0.8;
/// The same seen from the receiver alone: the advertised window is sampled just after reads
/// reopen it, so its median overstates the window in flight (a 64 KiB buffer on a 20 ms path
/// delivers about 0.8 of it).
pub const AT_WINDOW_BOUND_RECEIVER: f64 = 0.6;
/// The share of samples with a full send buffer and room in cwnd above which the send buffer
/// held the data back.
pub const SNDBUF_FULL_SAMPLES: f64 = 0.5;
/// Weaker send-buffer evidence (this share of the time sndbuf-limited by the kernel's clock, or
/// of samples with the buffer full) counts when cwnd had room: the median data in flight below
/// [`IN_FLIGHT_SHORT`] of cwnd. Either alone is not enough: BBR keeps in flight near half of
/// cwnd on any path.
pub const SNDBUF_SOME: f64 = 0.25;
pub const IN_FLIGHT_SHORT: f64 = 0.7;
/// A loss rate (retransmitted / sent segments) at which a network-limited flow is loss-limited
/// even far below the Mathis bound (timeouts dominate there, and Mathis is optimistic).
pub const LOSS_SIGNIFICANT: f64 = 0.01;
/// A network-limited flow with loss at this fraction of its Mathis bound: loss explains it.
pub const NEAR_MATHIS: f64 = 0.3;
/// ...unless it carried more than this multiple of what a loss-based congestion control
/// carries at that loss rate (the larger of Reno's Mathis bound and CUBIC's response function, RFC 9438
/// §5): then the losses were too few, or too bunched (one slow-start overshoot, one queue
/// overflow), to be the steady loss those models describe, and they did not set its rate.
pub const BEYOND_LOSS_BOUND: f64 = 2.0;
/// A process using this fraction of the cores it can use (or a host this busy) is CPU-bound.
pub const CPU_BOUND: f64 = 0.9;
/// Shorter intervals give coarse chronograph shares (they tick in jiffies).
pub const COARSE_INTERVAL: Dur = Dur::from_millis(50);

/// No buffer maximum is recommended below this (Linux's smallest default `tcp_rmem[2]`).
const MIN_MAXIMUM: u64 = 65_536;

/// What limits a flow. One vocabulary for text and JSON across every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The receiver's advertised window (its buffer, or its application reading slowly).
    ReceiverWindow,
    /// The sender's send buffer (SO_SNDBUF or tcp_wmem).
    SendBuffer,
    /// Loss: retransmissions held cwnd down.
    Loss,
    /// The path's capacity: the flow carries what the link can after headers and framing.
    PathCapacity,
    /// cwnd or pacing without significant loss (slow start, congestion control, a queue).
    Network,
    /// The sending application (or a `-b` cap) wrote less than the connection could carry.
    Application,
    /// A CPU at either end (process or softirq time) could not keep up.
    Cpu,
    /// Nothing moved.
    Idle,
    /// The observations cannot separate the classes; `missing` says what would.
    NotEnoughEvidence,
}

impl Limit {
    pub fn label(self) -> &'static str {
        match self {
            Limit::ReceiverWindow => "receiver-window limited",
            Limit::SendBuffer => "send-buffer limited",
            Limit::Loss => "loss limited",
            Limit::PathCapacity => "at the path's capacity",
            Limit::Network => "network/cwnd limited",
            Limit::Application => "application limited",
            Limit::Cpu => "CPU limited",
            Limit::Idle => "idle",
            Limit::NotEnoughEvidence => "not enough evidence",
        }
    }

    /// Every class, in the order reports list them.
    pub const ALL: [Limit; 9] = [
        Limit::ReceiverWindow,
        Limit::SendBuffer,
        Limit::Loss,
        Limit::PathCapacity,
        Limit::Network,
        Limit::Application,
        Limit::Cpu,
        Limit::Idle,
        Limit::NotEnoughEvidence,
    ];
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// CPU use of one end over the observation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuUse {
    pub end: End,
    /// What was measured: "process" (user + system of the process) or "host" (every CPU's
    /// non-idle time from /proc/stat, softirq included).
    pub scope: CpuScope,
    /// Percent of one core (a process) or of all cores (the host).
    pub percent: f64,
    /// How many cores the process could use (its threads doing the work, at most the
    /// host's CPUs); 1 for a host figure, which is already a fraction of all cores.
    pub cores: f64,
    /// Of which softirq, percent (host figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirq_percent: Option<f64>,
}

/// What was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CpuScope {
    Process,
    Host,
}

impl CpuUse {
    fn load(&self) -> f64 {
        self.percent / 100.0 / self.cores.max(1e-9)
    }
    fn bound(&self) -> bool {
        self.load() >= CPU_BOUND
    }
    fn describe(&self) -> String {
        let who = match self.end {
            End::Sender => "the sender",
            End::Receiver => "the receiver",
            End::BothEnds => "the host running both ends",
        };
        match self.scope {
            CpuScope::Process if self.cores > 1.0 => format!(
                "{who}'s process used {:.0}% CPU ({:.0}% of the {:.0} cores it could use)",
                self.percent,
                self.load() * 100.0,
                self.cores
            ),
            CpuScope::Process => format!("{who}'s process used {:.0}% of a core", self.percent),
            CpuScope::Host => {
                let soft = self
                    .softirq_percent
                    .map(|s| format!(", softirq {s:.0}%"))
                    .unwrap_or_default();
                format!("{who}'s CPUs were {:.0}% busy{soft}", self.percent)
            }
        }
    }
}

/// What a packet capture shows of one direction of a flow (from `tcptune analyze`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CaptureEvidence {
    /// Data segments seen.
    pub data_packets: u64,
    /// Segments that filled the receiver's advertised window (Wireshark's "window full").
    pub window_full: u64,
    /// Zero windows advertised by the receiver.
    pub zero_window: u64,
    /// Retransmissions: all, fast, and after a timeout (or tail loss).
    pub retransmissions: u64,
    pub fast_retransmissions: u64,
    pub timeout_retransmissions: u64,
    pub spurious_retransmissions: u64,
    /// Payload bytes delivered and over how long.
    pub payload_bytes: u64,
    pub duration: Dur,
    /// Smallest and mean RTT samples (Karn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_rtt: Option<Dur>,
    /// The largest window the receiver advertised, scaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_window_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
}

/// What the caller knows about the path, the test and the hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    /// The bottleneck's line rate (`--path-rate`, the lab link's rate), when known.
    pub path_rate: Option<Rate>,
    /// Link framing per packet charged against the line rate: 38 bytes for Ethernet on a wire
    /// (the default, which gives the lower ceiling), 14 for netem and the lab's emulator.
    pub framing_bytes: u32,
    /// The socket buffer the test asked for (`-w`); it turns autotuning off.
    pub window: Option<Bytes>,
    /// The sender's rate cap (`-b`), per stream.
    pub rate_cap: Option<Rate>,
    /// The sender's congestion control, when known (its socket's, not the host default).
    pub congestion: Option<CongestionControl>,
    /// The kernel whose buffer arithmetic the recommendations use.
    pub kernel: KernelVersion,
    pub kernel_source: KernelSource,
    /// Parallel streams in one direction: they share the path (and the BDP).
    pub streams: u32,
    /// The settings in effect where they are known.
    pub settings: KnownSettings,
    /// The user asked for buffers fitted to the path (`--fit`/`--memory`): recommendations may
    /// then lower a maximum.
    pub fit: bool,
}

impl Default for Context {
    fn default() -> Self {
        Context {
            path_rate: None,
            framing_bytes: ETHERNET_WIRE_FRAMING,
            window: None,
            rate_cap: None,
            congestion: None,
            kernel: KernelVersion::new(6, 6),
            kernel_source: KernelSource::Assumed,
            streams: 1,
            settings: KnownSettings::default(),
            fit: false,
        }
    }
}

impl Context {
    /// A context that knows only the path's rate (conns, watch).
    pub fn with_path_rate(path_rate: Option<Rate>) -> Context {
        Context {
            path_rate,
            ..Context::default()
        }
    }
}

/// A connection's samples in time order: borrowed, without copying.
#[derive(Debug, Clone, Copy)]
pub enum Series<'a> {
    None,
    /// One sample: figures over the connection's life so far.
    One(&'a Sample),
    /// Two samples: figures over the interval between them.
    Two(&'a Sample, &'a Sample),
    Many(&'a [Sample]),
}

impl<'a> Series<'a> {
    pub fn of(s: &'a [Sample]) -> Series<'a> {
        match s {
            [] => Series::None,
            [one] => Series::One(one),
            [a, b] => Series::Two(a, b),
            many => Series::Many(many),
        }
    }
    fn parts(&self) -> (Option<&'a Sample>, &'a [Sample], Option<&'a Sample>) {
        match *self {
            Series::None => (None, &[], None),
            Series::One(a) => (None, &[], Some(a)),
            Series::Two(a, b) => (Some(a), &[], Some(b)),
            Series::Many(s) => (None, s, None),
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = &'a Sample> {
        let (a, s, b) = self.parts();
        a.into_iter().chain(s.iter()).chain(b)
    }
    pub fn first(&self) -> Option<&'a Sample> {
        self.iter().next()
    }
    pub fn last(&self) -> Option<&'a Sample> {
        let (_, s, b) = self.parts();
        b.or(s.last())
    }
    pub fn len(&self) -> usize {
        match self {
            Series::None => 0,
            Series::One(_) => 1,
            Series::Two(..) => 2,
            Series::Many(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Everything observed of one flow (one direction of one connection).
#[derive(Debug, Clone, Copy)]
pub struct Observations<'a> {
    /// The sending socket's samples.
    pub sender: Series<'a>,
    /// The receiving socket's samples.
    pub receiver: Series<'a>,
    /// Bytes the receiver got over `seconds`, when the caller counted them (a test); else the
    /// rate comes from the samples.
    pub delivered: Option<(u64, Dur)>,
    pub cpu: &'a [CpuUse],
    pub capture: Option<&'a CaptureEvidence>,
}

impl<'a> Observations<'a> {
    /// A socket seen on its own (conns, watch, experiment trials): whether it is the sender
    /// or the receiver is read from what it moved.
    pub fn socket(series: Series<'a>) -> Observations<'a> {
        let sent = moved(series, |i| i.bytes_sent);
        let received = moved(series, |i| i.bytes_received);
        let (sender, receiver) = if sent == 0 && received > 0 {
            (Series::None, series)
        } else {
            (series, Series::None)
        };
        Observations {
            sender,
            receiver,
            delivered: None,
            cpu: &[],
            capture: None,
        }
    }
}

/// Bytes moved over a series (over the connection's life for one sample).
fn moved(s: Series<'_>, f: impl Fn(&TcpInfo) -> Option<u64>) -> u64 {
    match (s.first(), s.last()) {
        (Some(a), Some(b)) if s.len() > 1 => f(&b.info)
            .unwrap_or(0)
            .saturating_sub(f(&a.info).unwrap_or(0)),
        (_, Some(b)) => f(&b.info).unwrap_or(0),
        _ => 0,
    }
}

/// The numbers behind a verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// The rate the flow achieved (delivered bytes over time, or acknowledged bytes per second
    /// between the samples).
    pub achieved_bps: Option<Rate>,
    /// The payload the path can carry for this flow (its share of the line rate after headers
    /// and framing), when the path rate is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_goodput_bps: Option<Rate>,
    /// Shares of the time under each limit, at the sender.
    pub shares: Option<Shares>,
    /// Share of the sender's samples with nothing queued to send and room in cwnd (the
    /// application had nothing more to give it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_limited_samples: Option<f64>,
    /// Share of the sender's samples with a full send buffer and room in cwnd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_full_samples: Option<f64>,
    /// The socket's own pacing cap (SO_MAX_PACING_RATE, as an application sets it), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pacing_rate_bps: Option<Rate>,
    /// Reordering the sender saw over the observation (`reord_seen`) and retransmissions the
    /// receiver reported as duplicates (`dsack_dups`): loss that was not loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reordering_seen: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsack_dups: Option<u64>,
    /// Share of the sender's samples with cwnd ≥ 2× a receiver's window kept full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_full_samples: Option<f64>,
    /// Median congestion window.
    pub cwnd_bytes: Option<u64>,
    /// Median window the receiver advertised (the sender's `snd_wnd`, or the receiver's own
    /// `rcv_wnd` when only it was seen).
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
    /// True when the figures come from a packet capture.
    #[serde(default)]
    pub from_capture: bool,
    /// Mean smoothed RTT.
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
    /// CPU use of the ends, as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu: Vec<CpuUse>,
}

/// One model's bound for the measured conditions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bound {
    /// "window/RTT", "Mathis", "PFTK", "path payload".
    pub model: String,
    pub rate_bps: Rate,
    /// The inputs, in words: "64 KiB / 20.3 ms".
    pub inputs: String,
    /// Achieved / bound.
    pub achieved_fraction: f64,
}

/// The class, its share and the one-line reason: what conns and watch print per row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    pub limit: Limit,
    /// Share of the time under that limit, where the chronographs or samples say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// One line: "receiver-window limited 93% of the last 5 s: its window 64 KiB …".
    pub text: String,
    /// What would decide it, when the limit is not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// The full judgement of one flow: verdict, evidence, bounds, advice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Diagnosis {
    pub limit: Limit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// One line with the numbers.
    pub verdict: String,
    /// What would decide it, when the limit is not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    pub evidence: Evidence,
    pub bounds: Vec<Bound>,
    /// What would help, before merging with other flows (see [`advice::advise`]).
    #[serde(skip)]
    pub needs: Vec<Need>,
    pub recommendations: Vec<Recommendation>,
    /// True when something should change (exit code 1).
    pub problem: bool,
}

pub(crate) fn pct(x: f64) -> String {
    if x < 0.01 && x > 0.0 {
        format!("{:.2}%", x * 100.0)
    } else {
        format!("{:.0}%", x * 100.0)
    }
}

fn median(mut v: Vec<u64>) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

/// The median of a per-sample figure; for one or two samples, the latest (no allocation: a
/// conns dump judges 20,000 rows).
fn median_of(s: Series<'_>, f: impl Fn(&Sample) -> Option<u64>) -> Option<u64> {
    match s {
        Series::Many(v) if v.len() > 2 => median(active(v).filter_map(f).collect()),
        _ => s.last().and_then(f),
    }
}

/// Samples that carry data (skips the handshake-time zeros).
fn active(v: &[Sample]) -> impl Iterator<Item = &Sample> {
    v.iter()
        .filter(|s| s.info.bytes_sent.unwrap_or(0) > 0 || s.info.bytes_received.unwrap_or(0) > 0)
}

/// The share of samples (of those where `f` can tell) for which `f` holds. Of a long series
/// only samples taken while data moved count (bytes sent since the previous sample, the
/// connection established): a transfer's tail, after the application stopped writing and
/// while the socket closes, says nothing about what limited it.
fn share_of(s: Series<'_>, f: impl Fn(&Sample) -> Option<bool>) -> Option<f64> {
    let (mut yes, mut n) = (0u32, 0u32);
    let mut count = |x: &Sample| {
        if let Some(b) = f(x) {
            n += 1;
            yes += b as u32;
        }
    };
    match s {
        Series::Many(v) if v.len() > 2 => {
            for w in v.windows(2) {
                let sent = |x: &Sample| x.info.bytes_sent.unwrap_or(0);
                let established = w[1].info.state.is_none_or(|st| st == 1);
                if sent(&w[1]) > sent(&w[0]) && established {
                    count(&w[1]);
                }
            }
        }
        _ => s.iter().for_each(count),
    }
    (n > 0).then(|| yes as f64 / n as f64)
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

/// The sender's congestion window is at least twice the receiver's advertised window and the
/// sender has (nearly) that whole window in flight.
fn window_far_below_cwnd(i: &TcpInfo) -> Option<bool> {
    let mss = u64::from(i.snd_mss?.max(1));
    let cwnd = u64::from(i.snd_cwnd?) * mss;
    let wnd = u64::from(i.snd_wnd?);
    let in_flight = u64::from(i.unacked?) * mss;
    Some(wnd > 0 && cwnd >= 2 * wnd && in_flight * 4 >= wnd * 3)
}

/// A sender held back by its send buffer rather than by cwnd: the buffer is (nearly) full,
/// nothing written waits to be sent, and well under a cwnd (and under the peer's window) of
/// data is in flight. Measured on 6.18: a sender blocked on a 4 KiB SO_SNDBUF across 20 ms had
/// 46 segments in flight, cwnd 1051 and sndbuf_limited 0 — the kernel booked it as cwnd.
fn send_buffer_full(s: &Sample) -> Option<bool> {
    let m = s.skmem?;
    let i = &s.info;
    let cwnd = i.snd_cwnd?;
    let mss = i.snd_mss?.max(1);
    let in_flight = (i.unacked? + i.retrans.unwrap_or(0))
        .saturating_sub(i.sacked.unwrap_or(0) + i.lost.unwrap_or(0));
    let full = m.sndbuf > 0 && m.wmem_queued as u64 * 4 >= m.sndbuf as u64 * 3;
    let nothing_waits = i.notsent_bytes? < mss;
    let room_in_cwnd = in_flight > 0 && (in_flight as u64) * 4 < cwnd as u64 * 3;
    let room_in_peer_window = i
        .snd_wnd
        .is_none_or(|w| w as u64 > (in_flight as u64 + 2) * mss as u64);
    Some(full && nothing_waits && room_in_cwnd && room_in_peer_window)
}

fn mean_us(v: impl Iterator<Item = u32>) -> Option<Dur> {
    let (mut sum, mut n) = (0f64, 0u32);
    for r in v.filter(|&r| r > 0) {
        sum += r as f64;
        n += 1;
    }
    (n > 0).then(|| Dur::from_micros((sum / n as f64).round() as u64))
}

/// Gathers the evidence from the observations.
pub fn evidence(obs: &Observations<'_>, ctx: &Context) -> Evidence {
    let snd = obs.sender;
    let rcv = obs.receiver;
    let mut e = Evidence {
        cpu: obs.cpu.to_vec(),
        ..Evidence::default()
    };
    if let (Some(a), Some(b)) = (snd.first(), snd.last()) {
        if snd.len() > 1 {
            let iv = interval(a, b);
            e.shares = iv.shares;
            e.loss_ratio = iv.loss_ratio;
            e.retrans_ratio = iv.retrans_ratio;
            e.retransmits = match (a.info.total_retrans, b.info.total_retrans) {
                (Some(x), Some(y)) => Some(y.wrapping_sub(x) as u64),
                _ => None,
            };
            e.achieved_bps = iv.goodput_bps;
        } else {
            let snap = crate::figures::snapshot(&b.info);
            e.shares = snap.lifetime_shares;
            e.retrans_ratio = snap.retrans_ratio;
            e.retransmits = b.info.total_retrans.map(u64::from);
            e.loss_ratio = match (b.info.total_retrans, b.info.data_segs_out) {
                (Some(r), Some(s)) if s > 0 => Some(r as f64 / s as f64),
                _ => None,
            };
            e.achieved_bps = snap.delivery_rate_bps;
        }
        // The sender had nothing to send at that instant: nothing queued beyond a segment and
        // cwnd with room (the kernel's own test for marking delivery samples app-limited). The
        // kernel's mark alone is not used: it stays set for an RTT after any brief drain, which
        // a bulk sender under loss recovery hits in half its samples.
        e.app_limited_samples = share_of(snd, |s| {
            let i = &s.info;
            let mss = i.snd_mss?.max(1);
            let queued = i.notsent_bytes? >= mss;
            let cwnd = i.snd_cwnd? as f64;
            let in_flight = i.unacked? as f64;
            Some(!queued && in_flight < IN_FLIGHT_SHORT * cwnd)
        });
        e.max_pacing_rate_bps = b
            .info
            .max_pacing_rate_bytes_per_s
            .filter(|&r| r != u64::MAX && r > 0)
            .map(|r| Rate::from_bps(r as f64 * 8.0));
        let grew = |f: fn(&TcpInfo) -> Option<u32>| match (f(&a.info), f(&b.info)) {
            (Some(x), Some(y)) if snd.len() > 1 => Some(y.wrapping_sub(x) as u64),
            (_, Some(y)) => Some(y as u64),
            _ => None,
        };
        e.reordering_seen = grew(|i| i.reord_seen);
        e.dsack_dups = grew(|i| i.dsack_dups);
        e.sndbuf_full_samples = share_of(snd, send_buffer_full);
        e.window_full_samples = share_of(snd, |s| window_far_below_cwnd(&s.info));
    }
    if let (Some(a), Some(b)) = (rcv.first(), rcv.last()) {
        if e.achieved_bps.is_none() && rcv.len() > 1 {
            e.achieved_bps = interval(a, b).receive_rate_bps;
        }
    }
    if let Some((bytes, secs)) = obs.delivered {
        if secs > Dur::ZERO {
            e.achieved_bps = Some(Rate::from_bps(bytes as f64 * 8.0 / secs.secs()));
        }
    }
    e.cwnd_bytes = median_of(snd, |s| s.info.cwnd_bytes());
    e.peer_window_bytes = median_of(snd, |s| s.info.snd_wnd.map(u64::from));
    e.receiver_buffer_bytes = rcv
        .iter()
        .filter_map(|s| s.skmem)
        .map(|m| m.rcvbuf as u64)
        .last();
    e.send_buffer_bytes = snd
        .iter()
        .filter_map(|s| s.skmem)
        .map(|m| m.sndbuf as u64)
        .last();
    e.in_flight_bytes = median_of(snd, |s| {
        Some(s.info.unacked? as u64 * s.info.snd_mss? as u64).filter(|&b| b > 0)
    });
    e.rtt_s = mean_us(snd.iter().filter_map(|s| s.info.srtt_us()));
    e.min_rtt_s = snd
        .last()
        .and_then(|s| s.info.min_rtt())
        .map(|r| Dur::from_micros(r as u64));
    if snd.is_empty() && !rcv.is_empty() {
        // Only the receiving end was sampled: the window it advertised and its own RTT
        // estimate (rcv_rtt) still give the window/RTT bound.
        e.peer_window_bytes = median_of(rcv, |s| s.info.rcv_wnd.map(u64::from).filter(|&w| w > 0));
        e.rtt_s = mean_us(rcv.iter().filter_map(|s| s.info.rcv_rtt_us));
        e.min_rtt_s = rcv
            .last()
            .and_then(|s| s.info.min_rtt())
            .filter(|&r| r > 0)
            .map(|r| Dur::from_micros(r as u64));
        e.from_receiver = true;
    }
    e.cwnd_over_window = match (e.cwnd_bytes, e.peer_window_bytes) {
        (Some(c), Some(w)) if w > 0 && !e.from_receiver => Some(c as f64 / w as f64),
        _ => None,
    };
    e.rtt_inflation = match (e.rtt_s, e.min_rtt_s) {
        (Some(r), Some(m)) if m > Dur::ZERO => Some(r.secs() / m.secs()),
        _ => None,
    };
    if let Some(l) = snd.last().or(rcv.last()) {
        e.mss_bytes = l.info.snd_mss.filter(|&m| m > 0);
        e.negotiated = Negotiated::of(&l.info);
        e.missing_options = missing_options(&e.negotiated);
    }
    if let Some(c) = obs.capture {
        capture_evidence(c, &mut e);
    }
    e.path_goodput_bps = path_goodput(ctx, &e);
    e
}

fn capture_evidence(c: &CaptureEvidence, e: &mut Evidence) {
    e.from_capture = true;
    if c.duration > Dur::ZERO && e.achieved_bps.is_none() {
        e.achieved_bps = Some(Rate::from_bps(
            c.payload_bytes as f64 * 8.0 / c.duration.secs(),
        ));
    }
    if c.data_packets > 0 {
        e.loss_ratio
            .get_or_insert(c.retransmissions as f64 / c.data_packets as f64);
        e.retransmits.get_or_insert(c.retransmissions);
    }
    e.rtt_s = e.rtt_s.or(c.mean_rtt);
    e.min_rtt_s = e.min_rtt_s.or(c.min_rtt);
    e.peer_window_bytes = e.peer_window_bytes.or(c.max_window_bytes);
    e.mss_bytes = e.mss_bytes.or(c.mss);
}

/// This flow's share of the payload the path can carry.
fn path_goodput(ctx: &Context, e: &Evidence) -> Option<Rate> {
    let rate = ctx.path_rate?;
    let mss = e.mss_bytes.unwrap_or(1448);
    let header = tcp_ip_header_bytes(false, e.negotiated.timestamps.unwrap_or(true));
    let all = goodput_ceiling(rate, mss, header, ctx.framing_bytes);
    Some(Rate::from_bps(all.bps() / ctx.streams.max(1) as f64))
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

/// The models' bounds for the evidence: window/RTT, Mathis and PFTK at the measured loss, and
/// the path's payload rate.
pub fn bounds(e: &Evidence, ctx: &Context, rto: Option<Dur>) -> Vec<Bound> {
    let achieved = e.achieved_bps.unwrap_or(Rate::from_bps(0.0));
    let mut out = Vec::new();
    if let (Some(w), Some(rtt)) = (e.peer_window_bytes, e.rtt_s) {
        if rtt > Dur::ZERO {
            let who = if e.from_receiver {
                "window advertised"
            } else {
                "receiver's window"
            };
            out.push(bound(
                "window/RTT",
                Rate::from_bytes_per(Bytes::new(w), rtt),
                format!("{who} {} / RTT {rtt}", size(w)),
                achieved,
            ));
        }
    }
    if let (Some(p), Some(mss), Some(rtt)) = (e.loss_ratio, e.mss_bytes, e.rtt_s) {
        if let Some((m, _)) = loss_bound(e) {
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
    if let (Some(g), Some(p)) = (e.path_goodput_bps, ctx.path_rate) {
        let streams = if ctx.streams > 1 {
            format!(" shared by {} streams", ctx.streams)
        } else {
            String::new()
        };
        out.push(bound(
            "path payload",
            g,
            format!(
                "{p} line rate less IP/TCP headers and {} B framing per packet{streams}",
                ctx.framing_bytes
            ),
            achieved,
        ));
    }
    out
}

/// A decision before the evidence text.
struct Decision {
    limit: Limit,
    share: Option<f64>,
    /// The evidence for this class, in words.
    why: String,
    missing: Vec<String>,
}

impl Decision {
    fn new(limit: Limit, share: Option<f64>, why: String) -> Decision {
        Decision {
            limit,
            share,
            why,
            missing: Vec::new(),
        }
    }
}

fn window_bound(e: &Evidence) -> Option<Rate> {
    let (w, r) = (e.peer_window_bytes?, e.rtt_s?);
    (r > Dur::ZERO).then(|| Rate::from_bytes_per(Bytes::new(w), r))
}

fn cpu_bound<'e>(e: &'e Evidence, ends: &[End]) -> Option<&'e CpuUse> {
    e.cpu
        .iter()
        .filter(|c| ends.contains(&c.end) || c.end == End::BothEnds)
        .filter(|c| c.bound())
        .max_by(|a, b| a.load().total_cmp(&b.load()))
}

fn dominant(s: &Shares) -> (Limit, f64) {
    let mut best = (Limit::ReceiverWindow, s.rwnd);
    for c in [
        (Limit::SendBuffer, s.sndbuf),
        (Limit::Network, s.network),
        (Limit::Application, s.application.unwrap_or(0.0)),
    ] {
        if c.1 > best.1 {
            best = c;
        }
    }
    best
}

fn bdp_bytes(ctx: &Context, e: &Evidence) -> Option<u64> {
    let rate = ctx.path_rate?;
    let rtt = e.min_rtt_s.or(e.rtt_s)?;
    Some((rate.bytes_per_sec() / ctx.streams.max(1) as f64 * rtt.secs()).ceil() as u64)
}

fn decide(obs: &Observations<'_>, e: &Evidence, ctx: &Context) -> Decision {
    let sender_seen = !obs.sender.is_empty();
    let moved_any = moved(obs.sender, |i| i.bytes_sent) > 0
        || moved(obs.receiver, |i| i.bytes_received) > 0
        || obs.capture.is_some_and(|c| c.payload_bytes > 0)
        || obs.delivered.is_some_and(|(b, _)| b > 0);
    if !moved_any {
        return Decision::new(Limit::Idle, None, "no data sent or received".into());
    }
    let achieved = e.achieved_bps;
    // 2. At the path's capacity, whatever else the counters say.
    if let (Some(a), Some(g)) = (achieved, e.path_goodput_bps) {
        if a.bps() >= AT_CAPACITY * g.bps() {
            return Decision::new(
                Limit::PathCapacity,
                None,
                format!(
                    "{a} is {} of the {g} of payload the path carries",
                    pct(a.bps() / g.bps())
                ),
            );
        }
    }
    // 3. The sender's rate cap.
    if let (Some(a), Some(cap)) = (achieved, ctx.rate_cap) {
        if a.bps() >= AT_RATE_CAP * cap.bps() {
            return Decision::new(
                Limit::Application,
                None,
                format!("the -b rate cap {cap} holds it ({a})"),
            );
        }
    }
    if let (Some(a), Some(cap)) = (achieved, e.max_pacing_rate_bps) {
        if a.bps() >= AT_RATE_CAP * cap.bps() {
            return Decision::new(
                Limit::Application,
                None,
                format!("the application capped its pacing rate at {cap} (SO_MAX_PACING_RATE)"),
            );
        }
    }
    if sender_seen {
        let reported = obs
            .sender
            .last()
            .is_some_and(|s| s.info.busy_time_us.is_some());
        return decide_sender(e, ctx, reported);
    }
    if let Some(c) = obs.capture {
        return decide_capture(c, e);
    }
    decide_receiver(obs, e, ctx)
}

fn decide_sender(e: &Evidence, ctx: &Context, chronographs_reported: bool) -> Decision {
    let Some(shares) = e.shares else {
        let mut d = Decision::new(Limit::NotEnoughEvidence, None, String::new());
        d.missing.push(if chronographs_reported {
            // Lifetime figures with no busy time: the chronographs never ran for this socket.
            "busy time: the kernel counted none for this connection (its data never waited \
             in flight long enough); watch it over an interval (conns --over, watch)"
                .into()
        } else {
            "the sender's busy/rwnd/sndbuf-limited times (tcp_info since Linux 4.10; this \
             kernel did not report them)"
                .into()
        });
        return d;
    };
    let (dom, share) = dominant(&shares);
    let window_rate = window_bound(e);
    let at_window = match (e.achieved_bps, window_rate) {
        (Some(a), Some(w)) => a.bps() >= AT_WINDOW_BOUND * w.bps(),
        _ => false,
    };
    // A window that allows less than the flow's loss rate would, with cwnd well above it: the
    // window was the ceiling and the losses took a little more off (seed 001's untuned path:
    // 75% of window/RTT, 3 retransmissions, a loss bound 1.3× the window's).
    let window_under_loss_bound = match (e.achieved_bps, window_rate, loss_bound(e)) {
        (Some(a), Some(w), Some((_, b))) => {
            w.bps() < b.bps() && a.bps() >= AT_WINDOW_BOUND_RECEIVER * w.bps()
        }
        _ => false,
    };
    let window_evidence = e.window_full_samples.is_some_and(|s| s >= 0.5)
        || (e.cwnd_over_window.is_some_and(|r| r >= CWND_OVER_WINDOW)
            && (at_window || window_under_loss_bound));
    let cwnd_had_room = match (e.in_flight_bytes, e.cwnd_bytes) {
        (Some(f), Some(c)) => (f as f64) < IN_FLIGHT_SHORT * c as f64,
        _ => false,
    };
    let full = e.sndbuf_full_samples.unwrap_or(0.0);
    let sndbuf_evidence = full >= SNDBUF_FULL_SAMPLES
        || (cwnd_had_room && (shares.sndbuf >= SNDBUF_SOME || full >= SNDBUF_SOME));
    let app_evidence = e
        .app_limited_samples
        .is_some_and(|s| s >= APP_LIMITED_SAMPLES);
    let mut d = match dom {
        Limit::Network | Limit::Application if window_evidence => {
            // The kernel's rwnd clock misses window-limited time when pacing or TSO defers a
            // send the window would not allow (it books it as busy): cwnd far above a window
            // kept full decides it.
            let (c, w) = (e.cwnd_bytes.unwrap_or(0), e.peer_window_bytes.unwrap_or(0));
            Decision::new(
                Limit::ReceiverWindow,
                None,
                format!(
                    "cwnd {} is {:.1}× the receiver's window {} it keeps full",
                    size(c),
                    c as f64 / w.max(1) as f64,
                    size(w)
                ),
            )
        }
        Limit::Network if sndbuf_evidence => Decision::new(
            Limit::SendBuffer,
            None, // the clock booked this time as network; the samples say why
            format!(
                "send buffer {} full in {} of samples and sndbuf-limited {} of the time, with \
                 {} in flight against cwnd {}",
                size(e.send_buffer_bytes.unwrap_or(0)),
                pct(full),
                pct(shares.sndbuf),
                size(e.in_flight_bytes.unwrap_or(0)),
                size(e.cwnd_bytes.unwrap_or(0)),
            ),
        ),
        Limit::Network if app_evidence => Decision::new(
            Limit::Application,
            None, // the clock booked this time as network; the samples say why
            format!(
                "in {} of samples nothing waited to be sent and cwnd had room: the sender had \
                 nothing more to send",
                pct(e.app_limited_samples.unwrap_or(0.0))
            ),
        ),
        Limit::ReceiverWindow => {
            let w = e.peer_window_bytes.unwrap_or(0);
            let mut why = format!("its window {}", size(w));
            match (bdp_bytes(ctx, e), window_rate) {
                (Some(bdp), _) => {
                    let cmp = if w < bdp { "<" } else { "≥" };
                    why += &format!(" {cmp} BDP {}", size(bdp));
                    if w >= bdp {
                        why += ": the receiving application reads slowly (the window is \
                                often closed)";
                    }
                }
                (None, Some(wr)) => {
                    why += &format!(" allows {wr}");
                    if let Some(a) = e.achieved_bps.filter(|a| a.bps() < wr.bps() / 4.0) {
                        why += &format!(
                            "; {a} is far lower: the receiver reads slowly (window often closed)"
                        );
                    }
                }
                _ => {}
            }
            Decision::new(Limit::ReceiverWindow, Some(share), why)
        }
        Limit::SendBuffer => Decision::new(
            Limit::SendBuffer,
            Some(share),
            format!("send buffer {}", size(e.send_buffer_bytes.unwrap_or(0))),
        ),
        Limit::Application => {
            Decision::new(Limit::Application, Some(share), "nothing to send".into())
        }
        _ => network(e, ctx, share),
    };
    // CPU: a busy sender looks application-limited, a busy receiver keeps its window closed,
    // a busy host shows as cwnd/pacing; the CPU figure decides.
    let cpu_ends: &[End] = match d.limit {
        Limit::Application => &[End::Sender],
        Limit::ReceiverWindow if !window_short(ctx, e) => &[End::Receiver],
        Limit::Network => &[End::Sender, End::Receiver],
        _ => &[],
    };
    if let Some(c) = cpu_bound(e, cpu_ends) {
        d = Decision::new(
            Limit::Cpu,
            None,
            format!("{}; the socket showed {}", c.describe(), d.limit.label()),
        );
    }
    d
}

/// Whether the receiver's window is below the BDP (its buffer, not its reading, limits). The
/// BDP here is at the flow's smoothed RTT: a window-limited flow builds no queue, so that is
/// the path's RTT plus the hosts' own delay, which the window must cover too (over a veth the
/// minimum RTT is a few µs and the hosts' delay is most of it).
fn window_short(ctx: &Context, e: &Evidence) -> bool {
    let bdp = match (ctx.path_rate, e.rtt_s.or(e.min_rtt_s)) {
        (Some(rate), Some(rtt)) => {
            (rate.bytes_per_sec() / ctx.streams.max(1) as f64 * rtt.secs()).ceil() as u64
        }
        _ => return false,
    };
    e.peer_window_bytes.is_some_and(|w| w < bdp)
}

/// The flow's Mathis bound at its loss rate, and what a loss-based congestion control
/// averages there: the larger of Mathis and CUBIC's response function. Not special-cased for
/// BBR: Linux's BBR also cuts cwnd to what is in flight in each recovery, and a path that keeps
/// it recovering (reordering) holds it near this bound too. None without loss.
fn loss_bound(e: &Evidence) -> Option<(Rate, Rate)> {
    let loss = e.loss_ratio.unwrap_or(0.0);
    let (mss, rtt) = (Bytes::new(e.mss_bytes? as u64), e.rtt_s?);
    if loss <= 0.0 || rtt <= Dur::ZERO {
        return None;
    }
    let m = Rate::from_bps(mathis_bps(mss, rtt, loss, MathisConstant::Periodic.value()));
    let bound = Probability::new(loss.min(1.0))
        .and_then(|p| tcptune_model::cubic::cubic(mss, rtt, p).ok())
        .map_or(m, |c| Rate::from_bps(c.rate_bps.bps().max(m.bps())));
    Some((m, bound))
}

fn network(e: &Evidence, ctx: &Context, share: f64) -> Decision {
    let loss = e.loss_ratio.unwrap_or(0.0);
    let bounds = loss_bound(e);
    let (mathis, loss_bound) = (bounds.map(|b| b.0), bounds.map(|b| b.1));
    let near_mathis = match (mathis, e.achieved_bps) {
        (Some(m), Some(a)) => a.bps() >= NEAR_MATHIS * m.bps(),
        _ => false,
    };
    let beyond_bound = match (e.achieved_bps, loss_bound) {
        (Some(a), Some(b)) => a.bps() > BEYOND_LOSS_BOUND * b.bps(),
        _ => false,
    };
    if loss >= LOSS_SIGNIFICANT || (loss > 0.0 && near_mathis && !beyond_bound) {
        let mut m = mathis
            .map(|m| format!(" (Mathis bound {m})"))
            .unwrap_or_default();
        let reord = e.reordering_seen.unwrap_or(0);
        let dsack = e.dsack_dups.unwrap_or(0);
        if reord > 0 || dsack > 0 {
            m += &format!(
                "; the path reordered ({reord} reordering events, {dsack} retransmissions the \
                 receiver had already: D-SACK), so some of this loss was not loss: the sender \
                 slowed down for packets that arrived late"
            );
        }
        return Decision::new(
            Limit::Loss,
            Some(share),
            format!(
                "{} retransmitted, loss {}{m}",
                e.retransmits.unwrap_or(0),
                pct(loss)
            ),
        );
    }
    let mut why = format!("cwnd {}", size(e.cwnd_bytes.unwrap_or(0)));
    if let (Some(r), Some(m)) = (e.rtt_s, e.min_rtt_s) {
        why += &format!(", RTT {r} (min {m})");
    }
    if loss > 0.0 {
        // Losses that did not set the rate are still said, with why they did not.
        let reason = match (beyond_bound, loss_bound, mathis) {
            (true, Some(b), _) => format!(
                ", too few to set this rate: it carried more than {BEYOND_LOSS_BOUND}× the {b} \
                 a loss-based congestion control averages at that loss rate"
            ),
            (false, _, Some(m)) if e.achieved_bps.is_some() => format!(
                ", not what held it: it carried under {NEAR_MATHIS}× the Mathis bound {m} for \
                 that loss"
            ),
            _ => String::new(),
        };
        why += &format!(
            "; {} retransmitted (loss {}){reason}",
            e.retransmits.unwrap_or(0),
            pct(loss)
        );
    }
    let mut d = Decision::new(Limit::Network, Some(share), why);
    if ctx.path_rate.is_none() {
        d.missing.push(
            "the path's rate (--path-rate RATE): without it a full path cannot be told from \
             a congestion-control limit"
                .into(),
        );
    }
    d
}

fn decide_receiver(obs: &Observations<'_>, e: &Evidence, ctx: &Context) -> Decision {
    let sender_missing = "the sending end's tcp_info (its chronographs say what held it back; \
                          run `tcptune serve` or `tcptune conns` on the sending host)";
    if obs.receiver.is_empty() {
        let mut d = Decision::new(Limit::NotEnoughEvidence, None, String::new());
        d.missing.push(sender_missing.into());
        return d;
    }
    let (a, w) = (e.achieved_bps, window_bound(e));
    if let (Some(a), Some(w)) = (a, w) {
        if a.bps() >= AT_WINDOW_BOUND_RECEIVER * w.bps() {
            let mut why = format!(
                "the window it advertised, {} per RTT {}, allows {w}: about what it got, {a} \
                 (seen from the receiver only)",
                size(e.peer_window_bytes.unwrap_or(0)),
                e.rtt_s.unwrap_or(Dur::ZERO)
            );
            if let Some(b) = e.receiver_buffer_bytes {
                why += &format!("; receive buffer {}", size(b));
            }
            if let Some(c) = cpu_bound(e, &[End::Receiver]).filter(|_| !window_short(ctx, e)) {
                return Decision::new(
                    Limit::Cpu,
                    None,
                    format!("{}; the receiver kept its window closed", c.describe()),
                );
            }
            return Decision::new(Limit::ReceiverWindow, None, why);
        }
    }
    if let Some(c) = cpu_bound(e, &[End::Sender, End::Receiver]) {
        return Decision::new(Limit::Cpu, None, c.describe());
    }
    let mut d = Decision::new(Limit::NotEnoughEvidence, None, String::new());
    if let (Some(a), Some(w)) = (a, w) {
        d.why = format!(
            "not the receiver's window: it allowed {w}, {:.1}× the {a} that arrived",
            w.bps() / a.bps().max(1.0)
        );
    }
    d.missing.push(sender_missing.into());
    if ctx.path_rate.is_none() {
        d.missing
            .push("the path's rate (--path-rate RATE), to tell a full path".into());
    }
    d
}

fn decide_capture(c: &CaptureEvidence, e: &Evidence) -> Decision {
    let data = c.data_packets.max(1) as f64;
    let full = c.window_full as f64 / data;
    if c.zero_window > 0 || full >= 0.05 {
        let mut why = format!(
            "the receiver's window was full for {} of data segments",
            pct(full)
        );
        if c.zero_window > 0 {
            why += &format!(
                " and it advertised a zero window {} times: its application did not read fast \
                 enough",
                c.zero_window
            );
        }
        return Decision::new(Limit::ReceiverWindow, Some(full), why);
    }
    let loss = e.loss_ratio.unwrap_or(0.0);
    if loss >= LOSS_SIGNIFICANT {
        return Decision::new(
            Limit::Loss,
            None,
            format!(
                "{} retransmissions ({} of data segments: {} fast, {} after a timeout)",
                c.retransmissions,
                pct(loss),
                c.fast_retransmissions,
                c.timeout_retransmissions
            ),
        );
    }
    let mut d = Decision::new(Limit::NotEnoughEvidence, None, String::new());
    d.missing.push(
        "a capture shows windows and loss but not the sender's cwnd, send buffer or \
         application: sample tcp_info on the sender (tcptune watch/test)"
            .into(),
    );
    d
}

/// The class, share and one-line reason from the observations (cheap: no bounds or advice).
/// `over` names the time the shares cover ("of the last 5 s", "of its busy time").
pub fn classify(obs: &Observations<'_>, ctx: &Context, over: &str) -> (Verdict, Evidence) {
    let e = evidence(obs, ctx);
    let d = decide(obs, &e, ctx);
    let text = verdict_text(&d, &e, over);
    (
        Verdict {
            limit: d.limit,
            share: d.share,
            text,
            missing: d.missing,
        },
        e,
    )
}

fn verdict_text(d: &Decision, e: &Evidence, over: &str) -> String {
    let mut t = d.limit.label().to_string();
    if let Some(s) = d.share {
        t += &format!(" {} {over}", pct(s));
    }
    if let Some(a) = e.achieved_bps.filter(|_| d.limit != Limit::Idle) {
        t += &format!(" at {a}");
    }
    if !d.why.is_empty() {
        t += ": ";
        t += &d.why;
    }
    if !d.missing.is_empty() {
        t += "; missing: ";
        t += &d.missing.join("; ");
    }
    for m in &e.missing_options {
        t += "; ";
        t += m;
    }
    t
}

pub(crate) fn query(rate: Rate, rtt: Dur, ctx: &Context) -> BufferQuery {
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

/// The needs a limit implies, from the evidence that shows it.
pub fn needs(limit: Limit, e: &Evidence, ctx: &Context) -> Vec<Need> {
    let mut out = Vec::new();
    // The RTT the flow measured (a window-limited flow builds no queue, so this is the path's
    // RTT plus the hosts' own delay, which the window must cover too).
    let rtt = e.rtt_s.or(e.min_rtt_s).filter(|r| *r > Dur::ZERO);
    let sized = match (ctx.path_rate, rtt) {
        (Some(rate), Some(rtt)) => buffers(&query(rate, rtt, ctx)).ok().map(|b| (b, rate, rtt)),
        _ => None,
    };
    let note =
        |rate: Rate, rtt: Dur, w: Bytes| format!("BDP {rate} × {rtt} = {} per flow", size(w.get()));
    let buffer_need = |out: &mut Vec<Need>, end: End, measured: Option<u64>, recv: bool| {
        let (sys, core, name) = if recv {
            (Knob::TcpRmemMax, Knob::RmemMax, "receive")
        } else {
            (Knob::TcpWmemMax, Knob::WmemMax, "send")
        };
        // The buffer measured limited this flow: a maximum below twice it cannot be the fix;
        // nor one below 64 KiB, the kernel's own smallest default maximum.
        let floor = measured.map(|m| (2 * m).max(MIN_MAXIMUM)).unwrap_or(0);
        match &sized {
            Some((b, rate, rtt)) => {
                let want = if recv {
                    b.tcp_rmem_max_bytes.get()
                } else {
                    b.tcp_wmem_max_bytes.get()
                };
                let n = want.max(floor);
                let mut why = format!(
                    "let the {name} buffer grow to {} so the window covers the BDP: {}",
                    size(n),
                    note(b.flow_rate_bps, *rtt, b.window_bytes)
                );
                if !recv {
                    why += &format!(", {}× the window for the send buffer", b.sndbuf_factor);
                }
                let _ = rate;
                out.push(Need {
                    knob: sys,
                    on: end,
                    value: Value::AtLeast(n),
                    why,
                });
                if let Some(w) = ctx.window {
                    let (so, max) = if recv {
                        (b.so_rcvbuf_bytes.get(), b.rmem_max_bytes.get())
                    } else {
                        (b.so_sndbuf_bytes.get(), b.wmem_max_bytes.get())
                    };
                    if so > w.get() {
                        out.push(Need {
                            knob: Knob::SocketBuffer,
                            on: end,
                            value: Value::AtLeast(so),
                            why: format!(
                                "-w {} fixes the {name} buffer and turns autotuning off: drop \
                                 it, or ask for {}",
                                size(w.get()),
                                size(so)
                            ),
                        });
                        out.push(Need {
                            knob: core,
                            on: end,
                            value: Value::AtLeast(max),
                            why: format!("so the kernel allows -w {}", size(so)),
                        });
                    }
                }
            }
            None if floor > 0 => out.push(Need {
                knob: sys,
                on: end,
                value: Value::AtLeast(floor),
                why: format!(
                    "the {name} buffer of {} limited this flow; at least twice it (give \
                     --path-rate RATE to size it to the bandwidth-delay product)",
                    size(floor / 2)
                ),
            }),
            None => {}
        }
    };
    match limit {
        Limit::ReceiverWindow => {
            let reads_slowly = matches!(
                (ctx.path_rate, rtt, e.peer_window_bytes),
                (Some(rate), Some(r), Some(w))
                    if w as f64 >= rate.bytes_per_sec() / ctx.streams.max(1) as f64 * r.secs()
            );
            if reads_slowly {
                out.push(Need {
                    knob: Knob::ReceiverReads,
                    on: End::Receiver,
                    value: Value::Advice,
                    why: format!(
                        "its window {} already covers the BDP, yet was often full: the \
                         receiving application reads too slowly (larger reads, a faster \
                         reader); a larger buffer would not help",
                        size(e.peer_window_bytes.unwrap_or(0))
                    ),
                });
            } else {
                buffer_need(&mut out, End::Receiver, e.receiver_buffer_bytes, true);
            }
        }
        Limit::SendBuffer => buffer_need(&mut out, End::Sender, e.send_buffer_bytes, false),
        Limit::Loss => {
            let m = e
                .loss_ratio
                .map(|p| format!(" (loss {})", pct(p)))
                .unwrap_or_default();
            out.push(Need {
                knob: Knob::FindLoss,
                on: End::BothEnds,
                value: Value::Advice,
                why: format!(
                    "find where packets are lost{m}: `tc -s qdisc` drops, `ethtool -S` errors, \
                     `nstat` TcpExtTCPLostRetransmit on both ends"
                ),
            });
            if ctx.congestion != Some(CongestionControl::Bbr) {
                out.push(Need {
                    knob: Knob::CongestionControl,
                    on: End::Sender,
                    value: Value::Name("bbr".into()),
                    why: "BBR does not back off on random loss; try it where the loss is not \
                          congestion"
                        .into(),
                });
            }
        }
        Limit::Cpu => out.push(Need {
            knob: Knob::Cpu,
            on: e
                .cpu
                .iter()
                .find(|c| c.percent / 100.0 / c.cores.max(1e-9) >= CPU_BOUND)
                .map(|c| c.end)
                .unwrap_or(End::BothEnds),
            value: Value::Advice,
            why: "the CPU, not the network, set this rate: zero-copy sends (-Z), larger \
                  writes (-l), streams on more cores (-P), or a host with spare CPU; the path \
                  may carry more"
                .into(),
        }),
        _ => {}
    }
    let n = &e.negotiated;
    for (on, knob, name) in [
        (n.sack, Knob::Sack, "SACK"),
        (n.timestamps, Knob::Timestamps, "timestamps"),
        (n.window_scaling, Knob::WindowScaling, "window scaling"),
    ] {
        if on == Some(false) {
            out.push(Need {
                knob,
                on: End::BothEnds,
                value: Value::On,
                why: format!("turn {name} back on where it is off (both ends must offer it)"),
            });
        }
    }
    out
}

/// The full judgement: class, evidence, bounds and the changes that would help.
pub fn diagnose(obs: &Observations<'_>, ctx: &Context, over: &str) -> Diagnosis {
    let e = evidence(obs, ctx);
    let d = decide(obs, &e, ctx);
    let rto = obs
        .sender
        .last()
        .and_then(|s| s.info.rto_us)
        .map(|r| Dur::from_micros(r as u64));
    let bounds = bounds(&e, ctx, rto);
    let needs = needs(d.limit, &e, ctx);
    let recommendations = advice::advise(&needs, &ctx.settings, ctx.fit);
    let below_path = match (e.achieved_bps, e.path_goodput_bps) {
        (Some(a), Some(g)) => a.bps() < AT_CAPACITY * g.bps(),
        _ => true,
    };
    let problem = !e.missing_options.is_empty()
        || match d.limit {
            Limit::ReceiverWindow | Limit::SendBuffer | Limit::Loss | Limit::Cpu => below_path,
            Limit::Network => ctx.path_rate.is_some() && below_path,
            Limit::Application => {
                ctx.rate_cap.is_none()
                    && e.max_pacing_rate_bps.is_none()
                    && ctx.path_rate.is_some()
                    && below_path
            }
            Limit::PathCapacity | Limit::Idle | Limit::NotEnoughEvidence => false,
        };
    let verdict = verdict_text(&d, &e, over);
    Diagnosis {
        limit: d.limit,
        share: d.share,
        verdict,
        missing: d.missing,
        evidence: e,
        bounds,
        needs,
        recommendations,
        problem,
    }
}

#[cfg(test)]
mod tests;
