//! Latency under load (sans-IO): round-trip probes taken before and during a transfer become
//! the responsiveness figures of the IETF draft (draft-ietf-ippm-responsiveness-09, RPM), a
//! bufferbloat grade on the DSLReports scale, where the added delay sits by the kernel's own
//! counters, and — when loaded latency rises well beyond idle — a bufferbloat finding with the
//! fixes that apply and are not already in effect.
//!
//! Probes are of two kinds, reported apart as the draft's issue #130 asks: *foreign* (a new
//! TCP connection's handshake to the server's port: one round trip through every queue on the
//! path, against any iperf3 server) and *self* (the load connections' own smoothed RTT, which
//! the draft allows where no request can be multiplexed on a load connection). What of the
//! draft is not implemented is listed in [`DRAFT_COVERAGE`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_model::{Dur, Rate};

use crate::advice::{InEffect, Knob, Need, Value};
use crate::engine::End;
use crate::figures::size;

/// What one probe measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// A new TCP connection's handshake (SYN to SYN-ACK, or to the RST of a closed port).
    ForeignHandshake,
    /// A load connection's smoothed RTT (tcp_info), sampled.
    SelfStack,
}

/// Before the load, while it ramps up, or under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Before the load.
    Idle,
    /// The load's first part ([`RAMP_SHARE`] of it, at least [`RAMP_MIN`]), while queues
    /// fill: kept, not counted as loaded (the draft measures under working conditions).
    Ramp,
    /// Under the load, after its ramp.
    Loaded,
}

/// The share of the load, and the least time, counted as its ramp.
pub const RAMP_SHARE: f64 = 0.25;
/// The least time counted as a load's ramp.
pub const RAMP_MIN: Dur = Dur::from_millis(1000);

/// Marks the loaded probes of a load that ran from `start` for `length` that fall in its ramp.
pub fn mark_ramp(probes: &mut [Probe], start: Dur, length: Dur) {
    let ramp = Dur::from_secs_f64((length.secs() * RAMP_SHARE).max(RAMP_MIN.secs()));
    let end = Dur::from_nanos(start.nanos() + ramp.nanos());
    for p in probes.iter_mut() {
        if p.phase == Phase::Loaded && p.at_s >= start && p.at_s < end {
            p.phase = Phase::Ramp;
        }
    }
}

/// One probe: when (on the test's clock), what, and the round trip (`None`: no answer within
/// the probe's timeout).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Probe {
    /// When it was sent, on the test's clock.
    pub at_s: Dur,
    /// What it measured.
    pub kind: ProbeKind,
    /// When in the test it was sent.
    pub phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The round trip (absent: no answer within the probe's timeout).
    pub rtt_s: Option<Dur>,
}

/// Percentiles of a set of round trips.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Percentiles {
    /// How many round trips.
    pub n: usize,
    /// The median.
    pub p50_s: Dur,
    /// The 90th percentile.
    pub p90_s: Dur,
    /// The 99th percentile.
    pub p99_s: Dur,
    /// The draft's single-sided trimmed mean: the highest 5% dropped.
    pub trimmed_mean_s: Dur,
}

impl Percentiles {
    /// The percentiles of `v` (seconds); `None` when empty.
    pub fn of(v: &[Dur]) -> Option<Percentiles> {
        if v.is_empty() {
            return None;
        }
        let mut s: Vec<u64> = v.iter().map(|d| d.nanos()).collect();
        s.sort_unstable();
        let at = |q: f64| {
            let i = ((s.len() as f64 * q).ceil() as usize).clamp(1, s.len()) - 1;
            Dur::from_nanos(s[i])
        };
        Some(Percentiles {
            n: s.len(),
            p50_s: at(0.5),
            p90_s: at(0.9),
            p99_s: at(0.99),
            trimmed_mean_s: trimmed_mean(&s),
        })
    }
}

/// The mean of the lowest 95% (draft -09 §4.3: TM, single-sided, at 95%).
fn trimmed_mean(sorted_ns: &[u64]) -> Dur {
    let keep = ((sorted_ns.len() as f64 * 0.95).ceil() as usize).clamp(1, sorted_ns.len());
    let sum: u128 = sorted_ns[..keep].iter().map(|&x| x as u128).sum();
    Dur::from_nanos((sum / keep as u128) as u64)
}

/// Round trips per minute for a round trip.
pub fn rpm(rtt: Dur) -> f64 {
    if rtt.nanos() == 0 {
        return 0.0;
    }
    60.0 / rtt.secs()
}

/// The DSLReports bufferbloat grade for the latency a load added (A+ under 5 ms … F from
/// 400 ms).
pub fn grade(added: Dur) -> &'static str {
    let ms = added.secs() * 1000.0;
    match ms {
        x if x < 5.0 => "A+",
        x if x < 30.0 => "A",
        x if x < 60.0 => "B",
        x if x < 200.0 => "C",
        x if x < 400.0 => "D",
        _ => "F",
    }
}

/// The draft's words for an RPM figure.
pub fn rpm_words(rpm: f64) -> &'static str {
    match rpm {
        x if x < 300.0 => "poor",
        x if x < 1000.0 => "fair",
        x if x <= 6000.0 => "good",
        _ => "excellent",
    }
}

/// What the probes show, summed up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencySummary {
    /// Handshakes before the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<Percentiles>,
    /// Handshakes during the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_foreign: Option<Percentiles>,
    /// The load connections' smoothed RTT during the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_self: Option<Percentiles>,
    /// Probes that got no answer within their timeout, under load.
    pub lost_probes: usize,
    /// Median loaded foreign round trip less the median idle one (the queueing the load
    /// added), where both were measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_s: Option<Dur>,
    /// Responsiveness from the foreign probes alone (60 / their trimmed mean) and from the self
    /// probes alone, as draft issue #130 asks, and the draft's RPM (their mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_foreign: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Responsiveness from the self probes alone.
    pub rpm_self: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The draft's RPM: the mean of the two.
    pub rpm: Option<f64>,
    /// DSLReports grade of `added_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grade: Option<String>,
}

/// Sums up the probes.
pub fn summarize(probes: &[Probe]) -> LatencySummary {
    let pick = |kind: ProbeKind, phase: Phase| -> Vec<Dur> {
        probes
            .iter()
            .filter(|p| p.kind == kind && p.phase == phase)
            .filter_map(|p| p.rtt_s)
            .collect()
    };
    let idle = Percentiles::of(&pick(ProbeKind::ForeignHandshake, Phase::Idle));
    let loaded_foreign = Percentiles::of(&pick(ProbeKind::ForeignHandshake, Phase::Loaded));
    let loaded_self = Percentiles::of(&pick(ProbeKind::SelfStack, Phase::Loaded));
    let lost_probes = probes
        .iter()
        .filter(|p| p.phase == Phase::Loaded && p.rtt_s.is_none())
        .count();
    let added_s = match (idle, loaded_foreign) {
        (Some(i), Some(l)) => Some(Dur::from_nanos(
            l.p50_s.nanos().saturating_sub(i.p50_s.nanos()),
        )),
        _ => None,
    };
    let rpm_foreign = loaded_foreign.map(|p| rpm(p.trimmed_mean_s));
    let rpm_self = loaded_self.map(|p| rpm(p.trimmed_mean_s));
    let rpm_all = match (rpm_foreign, rpm_self) {
        (Some(f), Some(s)) => Some((f + s) / 2.0),
        (f, s) => f.or(s),
    };
    LatencySummary {
        idle,
        loaded_foreign,
        loaded_self,
        lost_probes,
        added_s,
        rpm_foreign,
        rpm_self,
        rpm: rpm_all,
        grade: added_s.map(|a| grade(a).to_string()),
    }
}

/// Where the delay a load added sits, from the sending socket's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DelayPlaces {
    /// In the network's queues: the sender's smoothed RTT above its minimum (median).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_queue_s: Option<Dur>,
    /// In the sender's socket: bytes written and not yet sent (median), and the time they
    /// take to leave at the achieved rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_unsent_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The time the unsent bytes take to leave at the achieved rate.
    pub sender_queue_s: Option<Dur>,
    /// `net.ipv4.tcp_notsent_lowat` on the sender, when read (4294967295: unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notsent_lowat: Option<u64>,
    /// ECN: congestion marks the sender saw echoed, where negotiated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_marks: Option<u64>,
}

/// A load raised latency far beyond idle: how much, the buffer that implies, and what would
/// help.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BloatFinding {
    /// The queueing delay the load added (p50 under load less p50 idle).
    pub queue_delay_s: Dur,
    /// The same with the queue at its fullest (p99 under load less p50 idle): the
    /// bottleneck buffer's drain time.
    pub full_queue_delay_s: Dur,
    /// Rate × the full queue's delay: the bottleneck's buffer.
    pub implied_buffer_bytes: u64,
    /// The rate the load achieved.
    pub rate_bps: Rate,
    /// One line with the numbers.
    pub text: String,
    #[serde(skip)]
    /// What would help, before merging with the streams' needs.
    pub needs: Vec<Need>,
}

/// Added latency at or above which a finding is made: the DSLReports "C" grade, where
/// interactive traffic suffers.
pub const BLOAT_ADDED: Dur = Dur::from_millis(60);

/// The bufferbloat finding, when the load added at least [`BLOAT_ADDED`] over idle and at least
/// as much again as idle (a long path's idle RTT is not bloat). `rate` is what the load carried.
pub fn bloat(
    s: &LatencySummary,
    places: &DelayPlaces,
    rate: Rate,
    in_effect: &InEffect,
) -> Option<BloatFinding> {
    let added = s.added_s?;
    let idle = s.idle?.p50_s;
    if added < BLOAT_ADDED || added.nanos() < idle.nanos() {
        return None;
    }
    // A loss-based sender's sawtooth fills the queue and drains part of it after each loss
    // (more after a loss all its streams see at once): the typical round trip (p50), even the
    // p90, sits below the full queue's, which it reaches at every overflow (the p99). The
    // buffer is what the full queue holds: its drain time at the rate.
    let full = s
        .loaded_foreign
        .map(|l| Dur::from_nanos(l.p99_s.nanos().saturating_sub(idle.nanos())))
        .unwrap_or(added)
        .max(added);
    let implied = (rate.bytes_per_sec() * full.secs()).round() as u64;
    let mut needs = Vec::new();
    // The foreign probes crossed the network's queues only: the delay they gained is there.
    let mut text = format!(
        "bufferbloat: the load added {added} to the idle round trip {idle} (p50), {full} with \
         the queue at its fullest (p99); at {rate} that is a {} buffer at the path's \
         bottleneck",
        size(implied)
    );
    needs.push(Need {
        knob: Knob::Aqm,
        on: End::BothEnds,
        value: Value::Advice,
        why: format!(
            "an AQM at the bottleneck, where you control it (fq_codel or CAKE on the router or \
             host that sends into it: `tc qdisc replace dev DEV root cake bandwidth RATE`), \
             keeps that queue to a few ms; or a shorter queue there ({} now)",
            size(implied)
        ),
    });
    let runs_bbr = in_effect
        .congestion
        .as_deref()
        .is_some_and(|c| c.starts_with("bbr"));
    if !runs_bbr {
        needs.push(Need {
            knob: Knob::CongestionControl,
            on: End::Sender,
            value: Value::Name("bbr".into()),
            why: "a sender that paces at the bottleneck's rate (BBR) keeps the queue short \
                  where the bottleneck itself cannot be changed"
                .into(),
        });
    }
    // The application's own data waits in the sender's socket too, behind what it wrote.
    if let Some(q) = places.sender_queue_s.filter(|q| *q >= BLOAT_ADDED) {
        text += &format!(
            "; the application's own data also waited {q} in the sender's socket (unsent)"
        );
        let lowat_unset = places
            .notsent_lowat
            .is_none_or(|l| l >= u64::from(u32::MAX));
        if lowat_unset {
            // The draft's rule: the unsent queue bounded to 5 ms at the rate. A bound, not a
            // maximum to raise: stated as advice with its command.
            let want = ((rate.bytes_per_sec() * 0.005).round() as u64).max(16 * 1024);
            needs.push(Need {
                knob: Knob::NotsentLowat,
                on: End::Sender,
                value: Value::Advice,
                why: format!(
                    "for the application's own latency, bound the unsent data its writes \
                     queue in the socket to 5 ms at {rate} (the responsiveness draft's rule): \
                     `sysctl -w net.ipv4.tcp_notsent_lowat={want}` ({}), or \
                     TCP_NOTSENT_LOWAT on the socket",
                    size(want)
                ),
            });
        }
    }
    Some(BloatFinding {
        queue_delay_s: added,
        full_queue_delay_s: full,
        implied_buffer_bytes: implied,
        rate_bps: rate,
        text,
        needs,
    })
}

/// Everything the latency probes gave, as the test reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencyReport {
    /// Every probe, in time order.
    pub probes: Vec<Probe>,
    /// Percentiles idle and under load, and the grade.
    pub summary: LatencySummary,
    /// Where the added delay sits.
    pub places: DelayPlaces,
    /// Which parts of draft-ietf-ippm-responsiveness-09 this implements.
    pub draft_coverage: Vec<DraftPart>,
}

/// One part of the draft and whether it is implemented.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DraftPart {
    /// The draft's part, by its section's name.
    pub part: String,
    /// Whether tcptune implements it.
    pub implemented: bool,
}

impl LatencyReport {
    /// The report of `probes`, with where the delay sits.
    pub fn of(probes: Vec<Probe>, places: DelayPlaces) -> LatencyReport {
        LatencyReport {
            summary: summarize(&probes),
            probes,
            places,
            draft_coverage: DRAFT_COVERAGE
                .iter()
                .map(|(p, i)| DraftPart {
                    part: (*p).to_string(),
                    implemented: *i,
                })
                .collect(),
        }
    }
}

fn pct_line(name: &str, p: &Percentiles) -> String {
    format!(
        "{name} {} (p50; p90 {}, p99 {}; {} probes)",
        p.p50_s, p.p90_s, p.p99_s, p.n
    )
}

impl std::fmt::Display for LatencyReport {
    /// One line each: the round trips, responsiveness and grade, where the delay sits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.summary;
        let mut parts = Vec::new();
        if let Some(i) = &s.idle {
            parts.push(pct_line("idle", i));
        }
        if let Some(l) = &s.loaded_foreign {
            parts.push(pct_line("loaded", l));
        }
        if let Some(l) = &s.loaded_self {
            parts.push(format!("load connections' srtt {} (p50)", l.p50_s));
        }
        if s.lost_probes > 0 {
            parts.push(format!("{} probes unanswered", s.lost_probes));
        }
        writeln!(f, "Latency: {}", parts.join(", "))?;
        let mut r = Vec::new();
        if let Some(a) = s.added_s {
            r.push(format!("+{a} under load"));
        }
        if let Some(x) = s.rpm_foreign {
            r.push(format!("RPM {x:.0} foreign ({})", rpm_words(x)));
        }
        if let Some(x) = s.rpm_self {
            r.push(format!("{x:.0} self"));
        }
        if let Some(g) = &s.grade {
            r.push(format!("bufferbloat grade {g}"));
        }
        if !r.is_empty() {
            writeln!(f, "Responsiveness: {}", r.join(", "))?;
        }
        let p = &self.places;
        let mut w = Vec::new();
        if let Some(q) = p.network_queue_s {
            w.push(format!("network queue {q} (srtt above min RTT)"));
        }
        if let (Some(b), Some(q)) = (p.sender_unsent_bytes, p.sender_queue_s) {
            let lowat = match p.notsent_lowat {
                Some(l) if l < u64::from(u32::MAX) => format!("tcp_notsent_lowat {}", size(l)),
                Some(_) => "tcp_notsent_lowat unset".into(),
                None => "tcp_notsent_lowat not read".into(),
            };
            w.push(format!(
                "sender's socket {} unsent = {q} at this rate ({lowat})",
                size(b)
            ));
        }
        if let Some(m) = p.ecn_marks {
            w.push(format!("{m} ECN congestion marks"));
        }
        if !w.is_empty() {
            writeln!(f, "Where the delay sits: {}", w.join("; "))?;
        }
        Ok(())
    }
}

/// What of draft-ietf-ippm-responsiveness-09 is implemented, and what is not.
pub const DRAFT_COVERAGE: &[(&str, bool)] = &[
    (
        "foreign probes: a new TCP connection's handshake (tcp_f)",
        true,
    ),
    (
        "self probes: the load connections' stack RTT (allowed without HTTP/2)",
        true,
    ),
    (
        "foreign and self RPM reported apart (draft issue #130)",
        true,
    ),
    ("single-sided 95% trimmed mean (TM)", true),
    (
        "foreign TLS handshake and HTTP GET (tls_f, http_f): no TLS or HTTP here",
        false,
    ),
    (
        "self probes as HTTP/2 requests on load connections (http_l)",
        false,
    ),
    (
        "load ramp to saturation with stability detection (MAD, SDT, up to 16 connections)",
        false,
    ),
    (
        "the 5 ms replenish rule on the load connections (TCP_NOTSENT_LOWAT)",
        false,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn p(at_ms: u64, kind: ProbeKind, phase: Phase, rtt_ms: Option<u64>) -> Probe {
        Probe {
            at_s: Dur::from_millis(at_ms),
            kind,
            phase,
            rtt_s: rtt_ms.map(Dur::from_millis),
        }
    }

    #[test]
    fn the_ramp_is_kept_apart_from_the_load() {
        let mut v: Vec<Probe> = (0..10)
            .map(|k| {
                p(
                    k * 1000,
                    ProbeKind::ForeignHandshake,
                    Phase::Loaded,
                    Some(10),
                )
            })
            .collect();
        // A 10 s load from t = 0: its first 2.5 s are the ramp.
        mark_ramp(&mut v, Dur::ZERO, Dur::from_millis(10_000));
        let ramp = v.iter().filter(|x| x.phase == Phase::Ramp).count();
        assert_eq!(ramp, 3, "0, 1 and 2 s");
        // A 2 s load: the ramp is at least 1 s.
        mark_ramp(&mut v, Dur::from_millis(5000), Dur::from_millis(2000));
        assert_eq!(v.iter().filter(|x| x.phase == Phase::Ramp).count(), 4);
    }

    #[test]
    fn rpm_grades_and_the_trimmed_mean() {
        assert!((rpm(Dur::from_millis(100)) - 600.0).abs() < 1e-9);
        assert_eq!(grade(Dur::from_millis(4)), "A+");
        assert_eq!(grade(Dur::from_millis(59)), "B");
        assert_eq!(grade(Dur::from_millis(400)), "F");
        assert_eq!(rpm_words(250.0), "poor");
        assert_eq!(rpm_words(6001.0), "excellent");
        // 20 values 1..=20 ms: the top 5% (one value) dropped, mean of 1..=19 = 10 ms.
        let v: Vec<Dur> = (1..=20).map(Dur::from_millis).collect();
        let q = Percentiles::of(&v).unwrap();
        assert_eq!(q.trimmed_mean_s, Dur::from_millis(10));
        assert_eq!(q.p50_s, Dur::from_millis(10));
        assert_eq!(q.p99_s, Dur::from_millis(20));
    }

    #[test]
    fn a_deep_queue_is_bloat_at_the_bottleneck_and_a_short_one_is_not() {
        use ProbeKind::*;
        let mut probes: Vec<Probe> = (0..10)
            .map(|k| p(k, ForeignHandshake, Phase::Idle, Some(20)))
            .collect();
        probes.extend((0..50).map(|k| p(100 + k, ForeignHandshake, Phase::Loaded, Some(626))));
        probes.extend((0..50).map(|k| p(100 + k, SelfStack, Phase::Loaded, Some(630))));
        probes.push(p(200, ForeignHandshake, Phase::Loaded, None));
        let s = summarize(&probes);
        assert_eq!(s.added_s, Some(Dur::from_millis(606)));
        assert_eq!(s.grade.as_deref(), Some("F"));
        assert_eq!(s.lost_probes, 1);
        assert!((s.rpm_foreign.unwrap() - 60.0 / 0.626).abs() < 0.01);
        let rate: Rate = "19mbit".parse().unwrap();
        let cubic = InEffect {
            congestion: Some("cubic".into()),
            ..InEffect::default()
        };
        let f = bloat(&s, &DelayPlaces::default(), rate, &cubic).unwrap();
        // 19 Mbit/s × 606 ms = 1.44 MB.
        assert_eq!(f.implied_buffer_bytes, 1_439_250);
        let knobs: Vec<Knob> = f.needs.iter().map(|n| n.knob).collect();
        assert_eq!(knobs, vec![Knob::Aqm, Knob::CongestionControl]);
        // BBR already in effect: not advised again.
        let bbr = InEffect {
            congestion: Some("bbr".into()),
            ..InEffect::default()
        };
        let f = bloat(&s, &DelayPlaces::default(), rate, &bbr).unwrap();
        assert!(!f.needs.iter().any(|n| n.knob == Knob::CongestionControl));
        // A 20-packet queue adds a few ms: no finding.
        let mut short = probes.clone();
        for x in short.iter_mut().filter(|x| x.phase == Phase::Loaded) {
            x.rtt_s = x.rtt_s.map(|_| Dur::from_millis(32));
        }
        assert!(bloat(&summarize(&short), &DelayPlaces::default(), rate, &cubic).is_none());
    }

    #[test]
    fn delay_in_the_senders_socket_also_gets_notsent_lowat_unless_set() {
        let probes = [
            p(0, ProbeKind::ForeignHandshake, Phase::Idle, Some(10)),
            p(1, ProbeKind::ForeignHandshake, Phase::Loaded, Some(200)),
        ];
        let s = summarize(&probes);
        let mut places = DelayPlaces {
            sender_queue_s: Some(Dur::from_millis(150)),
            ..DelayPlaces::default()
        };
        let rate: Rate = "100mbit".parse().unwrap();
        let f = bloat(&s, &places, rate, &InEffect::default()).unwrap();
        assert!(f.text.contains("in the sender's socket"), "{}", f.text);
        let lowat = f
            .needs
            .iter()
            .find(|n| n.knob == Knob::NotsentLowat)
            .unwrap();
        // 5 ms at 100 Mbit/s = 62,500 bytes (the draft's figure).
        assert!(
            lowat.why.contains("tcp_notsent_lowat=62500"),
            "{}",
            lowat.why
        );
        places.notsent_lowat = Some(131_072);
        let f = bloat(&s, &places, rate, &InEffect::default()).unwrap();
        assert!(!f.needs.iter().any(|n| n.knob == Knob::NotsentLowat));
    }
}
