//! What a run stores, as data: a trial's [`Measurement`] (with the [`JoinSummary`] of its two
//! captures), its line of `trials.jsonl` ([`TrialRecord`]), its time series
//! ([`SeriesSample`]) and the stored plan. The runner ([`crate::run`]) writes them, the
//! workloads and the lab runner fill them in, the join and the report read them; this module
//! uses none of those, so they layer on it without cycles.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_analyze::join::JoinTotals;

use crate::plan::{Point, Trial};

/// Shares of the trial's time the sender was limited by each cause (fractions of 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LimitShares {
    /// Receive-window limited.
    pub rwnd: f64,
    /// Send-buffer limited.
    pub sndbuf: f64,
    /// Congestion-window (network) limited.
    pub cwnd: f64,
    /// Application limited (the sender had nothing to send).
    pub app: f64,
}

/// What a trial measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Measurement {
    /// Application bytes delivered per second, bits per second.
    pub goodput_bps: f64,
    /// Application bytes delivered.
    pub bytes: u64,
    /// Length of the transfer, seconds.
    pub duration_s: f64,
    /// Segments the sender retransmitted (`tcpi_total_retrans`).
    pub retransmits: Option<u64>,
    /// Smallest RTT the sender saw, seconds.
    pub rtt_min_s: Option<f64>,
    /// The sender's mean smoothed RTT under the load, seconds.
    pub rtt_mean_s: Option<f64>,
    /// 99th percentile of the sender's smoothed RTT, seconds.
    pub rtt_p99_s: Option<f64>,
    /// Shares of the trial's time under each limit, from the kernel's chronographs.
    pub limits: Option<LimitShares>,
    /// The diagnosis in one line.
    pub verdict: Option<String>,
    /// The limit class the diagnosis engine found, and its share of the trial's time where
    /// the chronographs give one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<tcptune_diagnose::Limit>,
    /// The share of the trial's time under `limit` (fraction of 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_share: Option<f64>,
    /// Link counters (packets, drops by cause, …) as the backend reports them.
    pub link: Option<serde_json::Value>,
    /// Time series of the sender's connection, relative to the results directory.
    pub series: Option<String>,
    /// Time series of the receiver's connection (its window and receive space).
    #[serde(default)]
    pub receiver_series: Option<String>,
    /// Packet capture file, relative to the results directory.
    pub capture: Option<String>,
    /// With `capture.at = "both"`: the capture at the server's end of the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_server: Option<String>,
    /// With `capture.at = "both"`: what joining the two captures found ([`crate::join`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<JoinSummary>,
    /// The largest send buffer the sender's connection had (`sk_sndbuf` from its socket
    /// memory samples): the memory autotuning granted it, whatever the configured maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_peak_bytes: Option<u64>,
    /// The largest receive buffer the receiver's connection had (`sk_rcvbuf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf_peak_bytes: Option<u64>,
}

/// One line of `trials.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrialRecord {
    /// The trial's id, e.g. "p003-r02".
    pub id: String,
    /// The number of the point it ran.
    pub point: usize,
    /// Repetition number (from 1); `None` for the warm-up.
    pub rep: Option<u32>,
    /// Whether it was the point's unmeasured warm-up.
    pub warmup: bool,
    /// Seed of the trial's random decisions (link impairments).
    pub seed: u64,
    /// When it started, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// Wall-clock time the trial took, set-up included.
    pub wall_s: f64,
    /// The share of all of the machine's CPU time that was busy (anything not idle, steal
    /// apart) while the trial ran, from `/proc/stat`: the trial's own work plus everyone
    /// else's. A lab's paths are emulated on this machine, so a busy one can change what a
    /// CPU-sensitive point measures; the report shows the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_busy: Option<f64>,
    /// The share of CPU time the hypervisor took (steal) while the trial ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_steal: Option<f64>,
    /// What it measured; `None` when it failed.
    pub result: Option<Measurement>,
    /// Why the trial failed, when it did.
    pub error: Option<String>,
}

/// One sample of a trial's time series (`series/<trial>.jsonl`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SeriesSample {
    /// Seconds since the trial's transfer started.
    pub t_s: f64,
    /// Bytes acknowledged per second since the previous sample, bits/s.
    pub goodput_bps: Option<f64>,
    /// The sender's congestion window, bytes.
    pub snd_cwnd_bytes: Option<u64>,
    /// The window the receiver advertised, bytes.
    pub rwnd_bytes: Option<u64>,
    /// Smoothed RTT, seconds.
    pub rtt_s: Option<f64>,
    /// Retransmitted segments so far.
    pub retransmits: Option<u64>,
    /// Receiver side: the buffer space autotuning aims at (`rcv_space`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcv_space_bytes: Option<u64>,
    /// Receiver side: the window limit autotuning has reached (`rcv_ssthresh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcv_ssthresh_bytes: Option<u64>,
}

/// The plan as stored in `plan.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredPlan {
    /// The experiment's name.
    pub name: String,
    /// FNV-1a of the spec text: a resumed run must use the same spec.
    pub spec_hash: String,
    /// Each sweep point.
    pub points: Vec<Point>,
    /// Every trial, in run order.
    pub trials: Vec<Trial>,
    /// With `repetitions = "auto"`: the stopping rule (`trials` then holds every round up to
    /// the maximum, and the run passes over a point's trials once the rule closes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<crate::stopping::Auto>,
}

/// What the join found in one direction of the link, summed over the trial's TCP flows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JoinDirectionSummary {
    /// TCP packets of this direction seen at the upstream end.
    pub packets: u64,
    /// The join's counts (as `tcptune analyze A B --json` names them): packets lost between
    /// the ends, data lost before the first, extra copies, packets that arrived ahead of one
    /// that entered the link before them, retransmissions needed or not.
    #[serde(flatten)]
    pub counts: JoinTotals,
    /// One-way delay through the link of the direction with the most matched packets (the
    /// data connection's), seconds; samples is that direction's matched packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_mean_s: Option<f64>,
    /// Median one-way delay, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_p50_s: Option<f64>,
    /// 99th percentile one-way delay, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_p99_s: Option<f64>,
    /// Matched packets of that direction: the delay samples.
    pub delay_samples: u64,
}

/// The join of a trial's two captures (`Measurement.join`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JoinSummary {
    /// Client → server.
    pub up: JoinDirectionSummary,
    /// Server → client.
    pub down: JoinDirectionSummary,
    /// How the two capture clocks were reconciled, in a sentence.
    pub clock: String,
    /// The emulator's counters (as in `Measurement.link`) just before the workload: packets
    /// that crossed the link earlier (as the hosts' interfaces came up) are in the trial's
    /// counters but in neither capture, so the join is compared with the difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_before: Option<serde_json::Value>,
    /// What makes the counts incomplete, if anything: packets a capture dropped, a file cut
    /// short, a join that failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl JoinSummary {
    /// The direction the data crossed.
    pub fn data(&self, download: bool) -> &JoinDirectionSummary {
        if download {
            &self.down
        } else {
            &self.up
        }
    }
}
