//! What a join of two captures reports: the one-way delay distribution, the per-direction and
//! total counts (matched, lost between the points or before the first, duplicated, reordered,
//! retransmissions needed or not), the clock estimate, and its text.

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_model::Dur;

/// One-way delay distribution of one direction.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DelayStats {
    /// True when the delays are relative to the smallest (the clock offset is unknown).
    pub relative: bool,
    /// Delays measured (matched packets).
    pub samples: u64,
    /// Smallest delay, seconds.
    pub min_s: Dur,
    /// Mean delay, seconds.
    pub mean_s: Dur,
    /// Median delay, seconds.
    pub p50_s: Dur,
    /// 90th percentile, seconds.
    pub p90_s: Dur,
    /// 99th percentile, seconds.
    pub p99_s: Dur,
    /// Largest delay, seconds.
    pub max_s: Dur,
    /// Standard deviation, seconds.
    pub stdev_s: Dur,
}

impl DelayStats {
    pub(super) fn of(v: &mut [i64], relative: bool) -> Option<DelayStats> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let n = v.len();
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let q = |p: f64| {
            let i = ((n - 1) as f64 * p).round() as usize;
            ns(v[i])
        };
        Some(DelayStats {
            relative,
            samples: n as u64,
            min_s: ns(v[0]),
            mean_s: Dur::from_secs_f64(mean.max(0.0) / 1e9),
            p50_s: q(0.5),
            p90_s: q(0.9),
            p99_s: q(0.99),
            max_s: ns(v[n - 1]),
            stdev_s: Dur::from_secs_f64(var.sqrt() / 1e9),
        })
    }
}

fn ns(x: i64) -> Dur {
    Dur::from_nanos(x.max(0) as u64)
}

/// One direction of one flow, between the two capture points.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct JoinDirection {
    /// Sending endpoint, "address:port".
    pub from: String,
    /// Receiving endpoint, "address:port".
    pub to: String,
    /// The capture nearer the sender (as named on the command line).
    pub upstream: String,
    /// True when that could not be told from the packets (one direction only, separate
    /// clocks): the first capture given is taken as upstream.
    pub upstream_assumed: bool,
    /// Packets of this direction at the upstream and the downstream point.
    pub upstream_packets: u64,
    /// Packets of this direction at the downstream point.
    pub downstream_packets: u64,
    /// Packets seen at both points.
    pub matched: u64,
    /// Packets seen upstream and never downstream: lost on the path between the points (or
    /// dropped by the downstream capture).
    pub lost_between: u64,
    /// Of those, packets carrying data.
    pub lost_between_data: u64,
    /// Holes in the sequence space at the upstream point: data lost before the first point
    /// (or missed by that capture); events and bytes.
    pub lost_before_first: u64,
    /// Payload bytes of those holes.
    pub lost_before_first_bytes: u64,
    /// Extra copies downstream of a packet seen once upstream: duplicated on the path.
    pub duplicated: u64,
    /// Packets downstream with no match upstream at all (missed by the upstream capture, or
    /// changed on the way).
    pub not_seen_upstream: u64,
    /// Upstream packets that arrived merged into a larger downstream packet (GRO or LRO at
    /// the downstream capture point), and upstream packets that arrived split into several
    /// (TSO at the upstream capture point): matched by their byte ranges.
    pub coalesced: u64,
    /// Upstream packets that arrived split into several downstream.
    pub segmented: u64,
    /// Upstream packets whose bytes arrived regrouped across different packet boundaries
    /// (offloads grouping differently at the two points), matched by their bytes.
    pub regrouped: u64,

    /// Packets that arrived downstream before one that passed the upstream point earlier:
    /// reordering made by the path (each packet moved ahead counts once), not by the sender.
    pub reordered: u64,
    /// Data segments repeating bytes already sent, at the upstream point.
    pub retransmissions: u64,
    /// Retransmissions of bytes that no earlier transmission delivered downstream (needed), and
    /// of bytes that had already got through (not needed: spurious).
    pub retransmissions_needed: u64,
    /// Retransmissions of bytes that had already got through (spurious).
    pub retransmissions_unneeded: u64,
    /// One-way delay between the points (matched packets).
    pub delay: Option<DelayStats>,
}

/// Both directions of one TCP conversation.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct JoinFlow {
    /// Endpoint that sent the first packet seen, "address:port".
    pub a: String,
    /// The other endpoint, "address:port".
    pub b: String,
    /// Each direction that carried packets, a→b first.
    pub directions: Vec<JoinDirection>,
}

/// How the two capture clocks were reconciled.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ClockReport {
    /// "min-delay-both-directions", "relative-to-minimum" or "same-clock".
    pub method: String,
    /// Second capture's clock minus the first's, seconds (signed); None when unknown.
    pub offset_s: Option<f64>,
    /// The same in a sentence, with its assumption.
    pub note: String,
}

/// Sums over every direction of every flow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize, JsonSchema)]
pub struct JoinTotals {
    /// Packets seen at both points.
    pub matched: u64,
    /// Packets lost on the path between the points.
    pub lost_between: u64,
    /// Holes in the sequence space already at the upstream point.
    pub lost_before_first: u64,
    /// Extra copies made on the path.
    pub duplicated: u64,
    /// Packets reordered by the path.
    pub reordered: u64,
    /// Downstream packets with no upstream match.
    pub not_seen_upstream: u64,
    /// Data segments repeating bytes already sent.
    pub retransmissions: u64,
    /// Retransmissions no earlier transmission had delivered.
    pub retransmissions_needed: u64,
    /// Retransmissions of bytes that had already got through (spurious).
    pub retransmissions_unneeded: u64,
}

impl JoinTotals {
    /// Adds one direction's counts.
    pub fn add(&mut self, d: &JoinDirection) {
        self.matched += d.matched;
        self.lost_between += d.lost_between;
        self.lost_before_first += d.lost_before_first;
        self.duplicated += d.duplicated;
        self.reordered += d.reordered;
        self.not_seen_upstream += d.not_seen_upstream;
        self.retransmissions += d.retransmissions;
        self.retransmissions_needed += d.retransmissions_needed;
        self.retransmissions_unneeded += d.retransmissions_unneeded;
    }
}

/// The join of two captures of one path (`tcptune analyze A B`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct JoinReport {
    /// The two inputs as given.
    pub inputs: [String; 2],
    /// TCP packets read from each.
    pub packets: [u64; 2],
    /// How the two capture clocks were reconciled.
    pub clock: ClockReport,
    /// Sums over every direction of every flow.
    pub totals: JoinTotals,
    /// Each conversation seen in either capture.
    pub flows: Vec<JoinFlow>,
    /// What stopped the reading of either file early, if anything.
    pub capture_problems: Vec<String>,
}

impl JoinReport {
    /// True when the path lost, duplicated or reordered packets (the binary exits 1 then).
    pub fn found_problem(&self) -> bool {
        let t = &self.totals;
        t.lost_between + t.lost_before_first + t.duplicated + t.reordered > 0
    }
}

impl std::fmt::Display for JoinReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "joined {} ({} TCP packets) and {} ({} TCP packets): {} flows, {} packets matched",
            self.inputs[0],
            self.packets[0],
            self.inputs[1],
            self.packets[1],
            self.flows.len(),
            self.totals.matched
        )?;
        for p in &self.capture_problems {
            writeln!(f, "  warning: {p}")?;
        }
        writeln!(f, "  clock: {}", self.clock.note)?;
        for fl in &self.flows {
            writeln!(f)?;
            writeln!(f, "{} <-> {}", fl.a, fl.b)?;
            for d in &fl.directions {
                writeln!(
                    f,
                    "  {} -> {}  upstream {}{}: {} packets there, {} downstream, {} matched",
                    d.from,
                    d.to,
                    d.upstream,
                    if d.upstream_assumed {
                        " (assumed: one direction only)"
                    } else {
                        ""
                    },
                    d.upstream_packets,
                    d.downstream_packets,
                    d.matched
                )?;
                writeln!(
                    f,
                    "    lost between the points {} ({} with data), before the first {} ({} bytes); \
                     duplicated {}, reordered {}, not seen upstream {}",
                    d.lost_between,
                    d.lost_between_data,
                    d.lost_before_first,
                    d.lost_before_first_bytes,
                    d.duplicated,
                    d.reordered,
                    d.not_seen_upstream
                )?;
                if d.coalesced + d.segmented + d.regrouped > 0 {
                    writeln!(
                        f,
                        "    matched by bytes: {} packets arrived merged (receive offload), {} split \
                         (segmentation offload), {} regrouped",
                        d.coalesced, d.segmented, d.regrouped
                    )?;
                }
                if d.retransmissions > 0 {
                    writeln!(
                        f,
                        "    retransmissions {}: {} needed, {} not needed (the data had got through)",
                        d.retransmissions, d.retransmissions_needed, d.retransmissions_unneeded
                    )?;
                }
                if let Some(s) = &d.delay {
                    writeln!(
                        f,
                        "    one-way delay{}: min {} mean {} p50 {} p90 {} p99 {} max {} stdev {} ({} samples)",
                        if s.relative { " above the minimum" } else { "" },
                        s.min_s,
                        s.mean_s,
                        s.p50_s,
                        s.p90_s,
                        s.p99_s,
                        s.max_s,
                        s.stdev_s,
                        s.samples
                    )?;
                }
            }
        }
        Ok(())
    }
}
