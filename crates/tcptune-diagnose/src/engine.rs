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
use tcptune_model::sizing::{self, Sizing, SizingQuery, FIT};
use tcptune_model::{Bytes, Dur, Probability, Rate};

pub use crate::advice::End;
pub use crate::advice::InEffect;
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
/// The median data in flight, as a share of cwnd, below which cwnd had room (see [`SNDBUF_SOME`]).
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
/// The loss rate from which BBR (v1, Linux's `bbr`) lets loss set its rate: its long-term
/// sampling mode, entered when a round loses `lt_loss_thresh` = 50/256 of what it delivered
/// (net/ipv4/tcp_bbr.c). Below it BBR paces at its bandwidth estimate whatever it loses.
pub const BBR_LOSS_HOLDS: f64 = 0.2;
/// A process using this fraction of the cores it can use (or a host this busy) is CPU-bound.
pub const CPU_BOUND: f64 = 0.9;
/// Shorter intervals give coarse chronograph shares (they tick in jiffies).
pub const COARSE_INTERVAL: Dur = Dur::from_millis(50);

/// A receiver whose advertised window is under this share of the window its buffer could give
/// (half the buffer) had data sitting unread: it reads slowly, and a larger buffer would not help.
pub const UNREAD_BACKLOG: f64 = 0.25;

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
    /// The observations point to a class whose own numbers rule it out (a window that allows
    /// less than the flow carried, say): the verdict says which and `missing` what would decide.
    ConflictingEvidence,
}

impl Limit {
    /// The class as the verdicts name it ("receiver-window limited", …).
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
            Limit::ConflictingEvidence => "conflicting evidence",
        }
    }

    /// Every class, in the order reports list them.
    pub const ALL: [Limit; 10] = [
        Limit::ReceiverWindow,
        Limit::SendBuffer,
        Limit::Loss,
        Limit::PathCapacity,
        Limit::Network,
        Limit::Application,
        Limit::Cpu,
        Limit::Idle,
        Limit::NotEnoughEvidence,
        Limit::ConflictingEvidence,
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
    /// Which end the figures are of.
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
    /// Time the process's threads were runnable but waited for a CPU (the scheduler's run
    /// delay, /proc/PID/task/*/schedstat), percent of one core: a busy neighbour turns running
    /// time into waiting time, and the two together say the process wanted the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_percent: Option<f64>,
}

/// What was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CpuScope {
    /// User and system time of the process.
    Process,
    /// Every CPU's non-idle time from /proc/stat, softirq included.
    Host,
}

impl CpuUse {
    /// The share of the CPU it could use that it used or waited for.
    fn load(&self) -> f64 {
        (self.percent + self.wait_percent.unwrap_or(0.0)) / 100.0 / self.cores.max(1e-9)
    }
    fn bound(&self) -> bool {
        self.load() >= CPU_BOUND
    }
    /// The figure in words: "the sender's process used 97% of a core".
    pub fn describe(&self) -> String {
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
            CpuScope::Process => match self.wait_percent.filter(|w| *w >= 1.0) {
                Some(w) => format!(
                    "{who}'s process used {:.0}% of a core and waited {w:.0}% of the time for \
                     one",
                    self.percent
                ),
                None => format!("{who}'s process used {:.0}% of a core", self.percent),
            },
            CpuScope::Host => {
                let soft = self
                    .softirq_percent
                    .map(|s| format!(", softirq {s:.0}%"))
                    .unwrap_or_default();
                format!("the CPUs of {who} were {:.0}% busy{soft}", self.percent)
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
    /// Fast retransmissions (after duplicate ACKs or SACKs).
    pub fast_retransmissions: u64,
    /// Retransmissions after a timeout (or tail loss).
    pub timeout_retransmissions: u64,
    /// Retransmissions of data the receiver already had.
    pub spurious_retransmissions: u64,
    /// Payload bytes delivered and over how long.
    pub payload_bytes: u64,
    /// How long the payload took.
    pub duration: Dur,
    /// Smallest and mean RTT samples (Karn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Mean RTT sample (Karn).
    pub mean_rtt: Option<Dur>,
    /// The largest window the receiver advertised, scaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_window_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The largest segment seen, bytes.
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
    /// Where [`Context::kernel`] came from (the running kernel, or assumed).
    pub kernel_source: KernelSource,
    /// Parallel streams in one direction: they share the path (and the BDP).
    pub streams: u32,
    /// The settings in effect where they are known.
    pub settings: KnownSettings,
    /// The user asked for buffers fitted to the path (`--fit`/`--memory`): recommendations may
    /// then lower a maximum.
    pub fit: bool,
    /// The sender is a bulk writer that always has more to send (tcptune's own test sender,
    /// unpaced: no `-b`, `-n`/`-k` or file): it is never application-limited.
    pub bulk_sender: bool,
    /// The sender's write size (`-l`), when known.
    pub write_bytes: Option<u64>,
    /// The sender already sends with zero copy (`-Z`).
    pub zerocopy: bool,
    /// CPUs of the host running the sender, when known (more streams than this share cores).
    pub cores: Option<u32>,
    /// The receiver reads as fast as it can (a throughput test's server or client): when its
    /// window shows it read slowly, it fell behind.
    pub bulk_receiver: bool,
    /// Both ends on one host over loopback: there is no network, only CPUs.
    pub loopback: bool,
}

impl Default for Context {
    fn default() -> Self {
        Context {
            path_rate: None,
            framing_bytes: ETHERNET_WIRE_FRAMING,
            window: None,
            rate_cap: None,
            congestion: None,
            kernel: KernelVersion::ASSUMED,
            kernel_source: KernelSource::Assumed,
            streams: 1,
            settings: KnownSettings::default(),
            fit: false,
            bulk_sender: false,
            write_bytes: None,
            zerocopy: false,
            cores: None,
            bulk_receiver: false,
            loopback: false,
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
    /// No sample.
    None,
    /// One sample: figures over the connection's life so far.
    One(&'a Sample),
    /// Two samples: figures over the interval between them.
    Two(&'a Sample, &'a Sample),
    /// Any number (a test's samples): figures over their span, medians of more than two.
    Many(&'a [Sample]),
}

impl<'a> Series<'a> {
    /// The series of `s`'s samples, in time order.
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
    /// The samples, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &'a Sample> {
        let (a, s, b) = self.parts();
        a.into_iter().chain(s.iter()).chain(b)
    }
    /// The oldest sample.
    pub fn first(&self) -> Option<&'a Sample> {
        self.iter().next()
    }
    /// The newest sample.
    pub fn last(&self) -> Option<&'a Sample> {
        let (_, s, b) = self.parts();
        b.or(s.last())
    }
    /// How many samples.
    pub fn len(&self) -> usize {
        match self {
            Series::None => 0,
            Series::One(_) => 1,
            Series::Two(..) => 2,
            Series::Many(s) => s.len(),
        }
    }
    /// Whether there is no sample.
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
    /// CPU use of the ends, when measured.
    pub cpu: &'a [CpuUse],
    /// What a packet capture of the flow shows, when there is one.
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
    /// Retransmissions the receiver reported as duplicates (DSACK).
    pub dsack_dups: Option<u64>,
    /// Share of the sender's samples with cwnd ≥ 2× a receiver's window kept full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_full_samples: Option<f64>,
    /// Median congestion window.
    pub cwnd_bytes: Option<u64>,
    /// Median window the receiver advertised (the sender's `snd_wnd`, or the receiver's own
    /// `rcv_wnd` when only it was seen).
    pub peer_window_bytes: Option<u64>,
    /// The largest of those windows: a window-limited flow carries at most this over the
    /// minimum RTT (a window that grew or shrank during the flow has a median below it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_window_max_bytes: Option<u64>,
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
    /// Smallest RTT seen.
    pub min_rtt_s: Option<Dur>,
    /// rtt / min_rtt.
    pub rtt_inflation: Option<f64>,
    /// Retransmitted segments.
    pub retransmits: Option<u64>,
    /// Retransmitted / sent segments: the loss estimate the models use.
    pub loss_ratio: Option<f64>,
    /// Retransmitted / sent bytes.
    pub retrans_ratio: Option<f64>,
    /// The sender's MSS.
    pub mss_bytes: Option<u32>,
    /// Options agreed in the handshake.
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
    /// The rate the model allows.
    pub rate_bps: Rate,
    /// The inputs, in words: "64 KiB / 20.3 ms".
    pub inputs: String,
    /// Achieved / bound.
    pub achieved_fraction: f64,
}

/// A model the engine did not show as a bound, and why (its assumptions do not hold here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NotShown {
    /// The model's name, as in [`Bound::model`].
    pub model: String,
    /// Why it is not shown: the assumption that does not hold.
    pub why: String,
}

/// The class, its share and the one-line reason: what conns and watch print per row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// What limits the flow.
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
    /// What limits the flow.
    pub limit: Limit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Share of the time under that limit, where the chronographs or samples say it.
    pub share: Option<f64>,
    /// One line with the numbers.
    pub verdict: String,
    /// What would decide it, when the limit is not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The figures the decision was made on.
    pub evidence: Evidence,
    /// The models' bounds for the measured conditions.
    pub bounds: Vec<Bound>,
    /// Models left out of `bounds` because their assumptions do not hold for this flow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bounds_not_shown: Vec<NotShown>,
    /// What would help, before merging with other flows (see [`advice::advise`]).
    #[serde(skip)]
    pub needs: Vec<Need>,
    /// What to change, one per knob, checked against the settings in effect.
    pub recommendations: Vec<Recommendation>,
    /// What the flow had in effect, against which the recommendations were checked.
    pub in_effect: InEffect,
    /// True when something should change (exit code 1).
    pub problem: bool,
}

mod bounds;
mod decision;
mod evidence;
pub mod flows;
pub mod invariants;
mod needs;

use self::decision::*;
pub use bounds::bounds;
pub use decision::classify;
pub use evidence::evidence;
pub(crate) use evidence::pct;
pub use needs::needs;
#[cfg(test)]
pub(crate) use needs::query;

impl InEffect {
    /// What the context says the flow had in effect.
    pub fn of(ctx: &Context) -> InEffect {
        InEffect {
            congestion: ctx.congestion.map(|c| c.to_string()),
            socket_buffer_bytes: ctx.window.map(|w| w.get()),
            write_bytes: ctx.write_bytes,
            zerocopy: ctx.zerocopy,
            streams: ctx.streams.max(1),
            cores: ctx.cores,
            bulk_sender: ctx.bulk_sender,
            rate_cap_bps: ctx.rate_cap.map(|r| r.bps()),
            settings: ctx.settings.clone(),
            fit: ctx.fit,
        }
    }
}

/// Whether a flow under `limit` is a problem worth exit code 1.
fn is_problem(limit: Limit, e: &Evidence, ctx: &Context) -> bool {
    let below_path = match (e.achieved_bps, e.path_goodput_bps) {
        (Some(a), Some(g)) => a.bps() < AT_CAPACITY * g.bps(),
        _ => true,
    };
    !e.missing_options.is_empty()
        || match limit {
            Limit::ReceiverWindow | Limit::SendBuffer | Limit::Loss | Limit::Cpu => below_path,
            Limit::Network => ctx.path_rate.is_some() && below_path,
            Limit::Application => {
                ctx.rate_cap.is_none()
                    && e.max_pacing_rate_bps.is_none()
                    && ctx.path_rate.is_some()
                    && below_path
            }
            Limit::PathCapacity
            | Limit::Idle
            | Limit::NotEnoughEvidence
            | Limit::ConflictingEvidence => false,
        }
}

/// The full judgement: class, evidence, bounds and the changes that would help, checked
/// against the engine's invariants ([`invariants`]) before it is returned.
pub fn diagnose(obs: &Observations<'_>, ctx: &Context, over: &str) -> Diagnosis {
    let e = evidence(obs, ctx);
    let d = decide(obs, &e, ctx);
    let rto = obs
        .sender
        .last()
        .and_then(|s| s.info.rto_us)
        .map(|r| Dur::from_micros(r as u64));
    let (bounds, bounds_not_shown) = bounds(&e, ctx, rto);
    let needs = needs(d.limit, &e, ctx);
    let in_effect = InEffect::of(ctx);
    let recommendations = advice::advise(&needs, &in_effect);
    let problem = is_problem(d.limit, &e, ctx);
    let verdict = verdict_text(&d, &e, over);
    let mut out = Diagnosis {
        limit: d.limit,
        share: d.share,
        verdict,
        missing: d.missing,
        evidence: e,
        bounds,
        bounds_not_shown,
        needs,
        recommendations,
        in_effect,
        problem,
    };
    invariants::enforce(&mut out);
    debug_assert_eq!(invariants::check(&out), Vec::new(), "{}", out.verdict);
    out
}

#[cfg(test)]
mod tests;
