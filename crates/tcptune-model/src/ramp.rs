//! How a flow's congestion window grows from its initial window through slow start and
//! congestion avoidance (Reno or CUBIC) on a loss-free path, and how long it takes to reach a
//! share of the path rate: the effect of seed 003, where an initial ssthresh of 65535 bytes
//! left a 10 Gbit/s flow growing linearly for a minute while an "infinite" one reached the peak
//! almost at once.
//!
//! A round-by-round model on a virtual clock (one step per RTT), deterministic and without I/O:
//! slow start doubles cwnd per round until ssthresh; Reno then adds one segment per round;
//! CUBIC follows W(t) = C·(t − K)³ + W_max from the slow-start exit (W_max = cwnd, K = 0, as
//! Linux does when slow start ends without loss), never below its Reno-friendly estimate and
//! never more than 1.5× per round (RFC 9438 §4).

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::Serialize;

use crate::cubic::{CUBIC_BETA, CUBIC_C};
use crate::kernel::CongestionControl;
use crate::units::{fmt_sig, Bytes, Dur, Probability, Rate, UnitError};
use crate::ModelError;

/// The simulation gives up after this many round trips (the target is then "not reached").
pub const MAX_ROUNDS: u64 = 10_000_000;

/// An initial slow-start threshold: a size, or infinite (Linux's default, 0x7fffffff segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ssthresh {
    /// A size, bytes.
    Bytes(Bytes),
    /// Infinite: slow start runs until the path or a loss stops it.
    Infinite,
}

/// Why an ssthresh value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{input}' is neither a size nor inf; write 65535, 64KiB or inf")]
pub struct SsthreshError {
    input: String,
}

impl FromStr for Ssthresh {
    type Err = SsthreshError;
    fn from_str(s: &str) -> Result<Self, SsthreshError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "inf" | "infinite" | "infinity" | "∞" => Ok(Ssthresh::Infinite),
            _ => s
                .parse()
                .map(Ssthresh::Bytes)
                .map_err(|_: UnitError| SsthreshError {
                    input: s.trim().into(),
                }),
        }
    }
}

impl fmt::Display for Ssthresh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ssthresh::Bytes(b) => write!(f, "{} B", b.get()),
            Ssthresh::Infinite => f.write_str("infinite"),
        }
    }
}

/// The inputs of one ramp.
#[derive(Debug, Clone, Copy)]
pub struct RampQuery {
    /// The path's bottleneck rate.
    pub rate: Rate,
    /// The path's round-trip time.
    pub rtt: Dur,
    /// Maximum segment size (payload per packet).
    pub mss: Bytes,
    /// Initial congestion window, segments.
    pub initcwnd: u32,
    /// The initial slow-start threshold.
    pub ssthresh: Ssthresh,
    /// Reno or CUBIC (BBR's startup is not modelled).
    pub cc: CongestionControl,
    /// Share of the path rate to reach.
    pub target: Probability,
    /// Receive window cap, if any.
    pub window: Option<Bytes>,
}

/// Slow start or congestion avoidance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// cwnd grows by one MSS per ACK (doubling each round trip).
    SlowStart,
    /// cwnd grows by about one MSS per round trip (Reno) or along the cubic curve.
    CongestionAvoidance,
}

/// One round trip of the ramp.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RampRow {
    /// Round-trip number, from 0 (the first flight of data).
    pub round: u64,
    /// Start of the round, seconds from the first data segment.
    pub time_s: Dur,
    /// The phase this round is in.
    pub phase: Phase,
    /// Congestion window, segments.
    pub cwnd_segments: f64,
    /// Rate this round delivers: min(cwnd · MSS / RTT, path rate, window / RTT), bits per second.
    pub rate_bps: Rate,
    /// rate / path rate.
    pub share: f64,
}

/// The ramp for one initial ssthresh.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RampRun {
    /// Initial ssthresh, bytes; null when infinite.
    pub ssthresh_bytes: Option<Bytes>,
    /// Whether the target rate was reached within the simulation's rounds.
    pub reached: bool,
    /// Time from the first data segment to the first round at the target rate, seconds.
    pub time_to_target_s: Option<Dur>,
    /// Round trips to the first round at the target rate.
    pub rounds_to_target: Option<u64>,
    /// Data sent before the target was reached, bytes.
    pub bytes_before_target: Option<Bytes>,
    /// The round congestion avoidance began, if it did before the target.
    pub slow_start_exit_round: Option<u64>,
    /// Why the target was not reached, when it was not.
    pub not_reached_because: Option<String>,
    /// A compact selection of rounds (slow start, evenly spaced avoidance rounds, the target).
    pub rows: Vec<RampRow>,
}

/// Ramps from the same start, one per initial ssthresh.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Ramp {
    /// Path rate, bits per second.
    pub rate_bps: Rate,
    /// Round-trip time, seconds.
    pub rtt_s: Dur,
    /// Maximum segment size, bytes.
    pub mss_bytes: Bytes,
    /// Initial congestion window, segments.
    pub initcwnd_segments: u32,
    /// Reno or CUBIC.
    pub congestion_control: CongestionControl,
    /// Share of the path rate to reach.
    pub target_share: Probability,
    /// target share × rate, bits per second.
    pub target_rate_bps: Rate,
    /// The path's BDP in segments: the cwnd that fills it.
    pub bdp_segments: f64,
    /// Receive window cap, bytes.
    pub window_bytes: Option<Bytes>,
    /// One ramp per initial ssthresh.
    pub runs: Vec<RampRun>,
    /// The formula, in words.
    pub formula: String,
    /// When the model does not apply.
    pub caveats: Vec<String>,
}

/// The state of the round-by-round model.
struct Sim {
    q: RampQuery,
    ssthresh_segs: f64,
    cwnd: f64,
    phase: Phase,
    round: u64,
    /// CUBIC: (round the epoch began, W_max) and the Reno-friendly estimate W_est.
    cubic_epoch: Option<(u64, f64)>,
    w_est: f64,
}

impl Sim {
    fn new(q: RampQuery) -> Sim {
        let ssthresh_segs = match q.ssthresh {
            Ssthresh::Bytes(b) => b.get() as f64 / q.mss.get() as f64,
            Ssthresh::Infinite => f64::INFINITY,
        };
        let cwnd = q.initcwnd as f64;
        Sim {
            q,
            ssthresh_segs,
            cwnd,
            phase: if cwnd < ssthresh_segs {
                Phase::SlowStart
            } else {
                Phase::CongestionAvoidance
            },
            round: 0,
            cubic_epoch: None,
            w_est: cwnd,
        }
    }

    fn rate(&self) -> f64 {
        let seg_bits = self.q.mss.get() as f64 * 8.0;
        let rtt = self.q.rtt.secs();
        let mut r = (self.cwnd * seg_bits / rtt).min(self.q.rate.bps());
        if let Some(w) = self.q.window {
            r = r.min(w.get() as f64 * 8.0 / rtt);
        }
        r
    }

    fn row(&self) -> RampRow {
        let rate = self.rate();
        RampRow {
            round: self.round,
            time_s: Dur::from_nanos(self.q.rtt.nanos().saturating_mul(self.round)),
            phase: self.phase,
            cwnd_segments: self.cwnd,
            rate_bps: Rate::from_bps(rate),
            share: rate / self.q.rate.bps(),
        }
    }

    /// Whether cwnd can still grow: Linux grows cwnd only while the flow is cwnd-limited, so a
    /// receive window below cwnd freezes it.
    fn window_stalled(&self) -> bool {
        self.q
            .window
            .is_some_and(|w| self.cwnd * self.q.mss.get() as f64 >= w.get() as f64)
    }

    /// Advances one round trip.
    fn step(&mut self) {
        match self.phase {
            Phase::SlowStart => {
                let next = self.cwnd * 2.0;
                if next >= self.ssthresh_segs {
                    self.cwnd = self.ssthresh_segs.max(self.cwnd);
                    self.phase = Phase::CongestionAvoidance;
                } else {
                    self.cwnd = next;
                }
            }
            Phase::CongestionAvoidance => match self.q.cc {
                CongestionControl::Cubic => {
                    let (start, w_max) = *self.cubic_epoch.get_or_insert((self.round, self.cwnd));
                    let rtt = self.q.rtt.secs();
                    // The target one RTT ahead, as RFC 9438 §4.2 prescribes.
                    let t = (self.round + 1 - start) as f64 * rtt;
                    let target = CUBIC_C * t.powi(3) + w_max;
                    let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
                    self.w_est += alpha;
                    let cubic = target.clamp(self.cwnd, 1.5 * self.cwnd);
                    self.cwnd = cubic.max(self.w_est);
                }
                _ => self.cwnd += 1.0,
            },
        }
        self.round += 1;
    }
}

fn validate(q: &RampQuery) -> Result<(), ModelError> {
    crate::check_mss_rtt(q.mss, q.rtt)?;
    if q.initcwnd == 0 {
        return Err(ModelError::Invalid(
            "the initial window must be at least 1 segment; give --initcwnd 10".into(),
        ));
    }
    if q.target.get() <= 0.0 {
        return Err(ModelError::Invalid(
            "the target share must be above zero; give --target 90%".into(),
        ));
    }
    if q.cc == CongestionControl::Bbr {
        return Err(ModelError::Invalid(
            "the ramp models reno and cubic (BBR's startup paces by its bandwidth estimate, not \
             by cwnd); give --cc reno or --cc cubic"
                .into(),
        ));
    }
    Ok(())
}

/// The ramp for one initial ssthresh.
pub fn ramp_run(q: RampQuery) -> Result<RampRun, ModelError> {
    validate(&q)?;
    let target = q.target.get() * q.rate.bps() * (1.0 - 1e-12);
    let window_rate = q.window.map(|w| w.get() as f64 * 8.0 / q.rtt.secs());

    // First pass: find the target round (or why there is none) and the slow-start exit.
    let mut sim = Sim::new(q);
    let mut sent = 0.0f64;
    let mut ss_exit = (sim.phase == Phase::CongestionAvoidance).then_some(0);
    let mut not_reached = None;
    loop {
        if sim.rate() >= target {
            break;
        }
        if sim.window_stalled() {
            not_reached = Some(format!(
                "the receive window ({} B) allows at most {}",
                q.window.map_or(0, Bytes::get),
                Rate::from_bps(window_rate.unwrap_or(0.0))
            ));
            break;
        }
        if sim.round >= MAX_ROUNDS {
            not_reached = Some(format!("not within {MAX_ROUNDS} round trips"));
            break;
        }
        sent += sim.rate() / 8.0 * q.rtt.secs();
        sim.step();
        if ss_exit.is_none() && sim.phase == Phase::CongestionAvoidance {
            ss_exit = Some(sim.round);
        }
    }
    let last = sim.round;

    // Second pass: record a compact selection of rounds. The model is deterministic, so
    // replaying it is exact and keeps memory constant however many rounds the ramp takes.
    let mut wanted = vec![0, last];
    let ss_end = ss_exit.unwrap_or(last);
    wanted.extend(evenly(0, ss_end, 6));
    if ss_exit.is_some() {
        wanted.extend(evenly(ss_end, last, 7));
    }
    wanted.sort_unstable();
    wanted.dedup();
    let mut sim = Sim::new(q);
    let mut rows = Vec::with_capacity(wanted.len());
    for &k in &wanted {
        while sim.round < k {
            sim.step();
        }
        rows.push(sim.row());
    }

    let reached = not_reached.is_none();
    Ok(RampRun {
        ssthresh_bytes: match q.ssthresh {
            Ssthresh::Bytes(b) => Some(b),
            Ssthresh::Infinite => None,
        },
        reached,
        time_to_target_s: reached.then(|| Dur::from_nanos(q.rtt.nanos().saturating_mul(last))),
        rounds_to_target: reached.then_some(last),
        bytes_before_target: reached.then(|| Bytes::new(sent.round() as u64)),
        slow_start_exit_round: ss_exit,
        not_reached_because: not_reached,
        rows,
    })
}

/// `n` rounds spread evenly over [from, to], both ends included.
fn evenly(from: u64, to: u64, n: u64) -> Vec<u64> {
    if to <= from {
        return vec![from];
    }
    let span = to - from;
    (0..n)
        .map(|i| from + (span as u128 * i as u128 / (n - 1) as u128) as u64)
        .collect()
}

/// Ramps for each initial ssthresh in `ssthresh` (the other inputs from `q`).
pub fn ramp(q: RampQuery, ssthresh: &[Ssthresh]) -> Result<Ramp, ModelError> {
    validate(&q)?;
    let runs = ssthresh
        .iter()
        .map(|&s| ramp_run(RampQuery { ssthresh: s, ..q }))
        .collect::<Result<Vec<_>, _>>()?;
    let mut caveats = vec![
        "A loss-free path with no queue: once cwnd passes the BDP the extra builds a queue (the \
         RTT grows) and in reality ends in loss; the ramp stops at the target."
            .into(),
        "Ignored: HyStart (Linux CUBIC may leave slow start early when delay rises), pacing, \
         delayed ACKs (which slow classic slow start), loss, and the handshake's RTT."
            .into(),
        "Slow start doubles cwnd per round, as Linux's ACK counting does; Reno then adds one \
         segment per round trip."
            .into(),
    ];
    if q.cc == CongestionControl::Cubic {
        caveats.push(
            "CUBIC's curve starts at the slow-start exit with W_max = cwnd and K = 0; its growth \
             depends on time, not on RTT, so on short RTTs its Reno-friendly estimate leads."
                .into(),
        );
    }
    if ssthresh.iter().any(|s| matches!(s, Ssthresh::Bytes(_))) {
        caveats.push(
            "Linux starts with an infinite ssthresh; a route's `ssthresh` metric (in segments) \
             is ignored while tcp_no_ssthresh_metrics_save=1 (the default) on kernels without \
             the 2025 tcp_metrics fixes; check `ss -ti`'s ssthresh."
                .into(),
        );
    }
    let bdp_segments = q.rate.times(q.rtt).get() / 8.0 / q.mss.get() as f64;
    Ok(Ramp {
        rate_bps: q.rate,
        rtt_s: q.rtt,
        mss_bytes: q.mss,
        initcwnd_segments: q.initcwnd,
        congestion_control: q.cc,
        target_share: q.target,
        target_rate_bps: Rate::from_bps(q.target.get() * q.rate.bps()),
        bdp_segments,
        window_bytes: q.window,
        runs,
        formula: match q.cc {
            CongestionControl::Cubic => "slow start: cwnd × 2 per RTT up to ssthresh; then \
                cwnd = max(min(C·t³ + W_max, 1.5·cwnd), W_est + 0.53 per RTT); rate = \
                min(cwnd · MSS / RTT, path rate)"
                .into(),
            _ => "slow start: cwnd × 2 per RTT up to ssthresh; then cwnd + 1 segment per RTT; \
                  rate = min(cwnd · MSS / RTT, path rate)"
                .into(),
        },
        caveats,
    })
}

impl fmt::Display for Ramp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rows: Vec<(String, String)> = vec![
            ("path".into(), format!("{} × {}", self.rate_bps, self.rtt_s)),
            (
                "bdp".into(),
                format!(
                    "{} segments of {} B",
                    fmt_sig(self.bdp_segments, 4),
                    self.mss_bytes.get()
                ),
            ),
            (
                "start".into(),
                format!(
                    "initcwnd {} segments, {}",
                    self.initcwnd_segments, self.congestion_control
                ),
            ),
            (
                "target".into(),
                format!(
                    "{} of the path = {}",
                    self.target_share, self.target_rate_bps
                ),
            ),
        ];
        if let Some(w) = self.window_bytes {
            rows.push(("window".into(), w.to_string()));
        }
        for run in &self.runs {
            let name = match run.ssthresh_bytes {
                Some(b) => format!("ssthresh {} B", b.get()),
                None => "ssthresh inf".to_string(),
            };
            let value = match (&run.time_to_target_s, &run.not_reached_because) {
                (Some(t), _) => format!(
                    "{t} ({} round trips{})",
                    run.rounds_to_target.unwrap_or(0),
                    match run.slow_start_exit_round {
                        Some(k) => format!(", slow start ends at round {k}"),
                        None => String::new(),
                    }
                ),
                (None, Some(why)) => format!("target not reached: {why}"),
                (None, None) => "target not reached".into(),
            };
            rows.push((name, value));
        }
        crate::render::write_model(
            f,
            &format!(
                "cwnd ramp to {} of {} over {} ({})",
                self.target_share, self.rate_bps, self.rtt_s, self.congestion_control
            ),
            &rows
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect::<Vec<_>>(),
            &self.formula,
            &self.caveats,
        )?;
        for run in &self.runs {
            writeln!(
                f,
                "  ramp with ssthresh {}:",
                run.ssthresh_bytes
                    .map_or("inf".to_string(), |b| format!("{} B", b.get()))
            )?;
            writeln!(
                f,
                "    {:>8}  {:>10}  {:<5}  {:>12}  {:>14}  {:>6}",
                "round", "time", "phase", "cwnd (seg)", "rate", "share"
            )?;
            for r in &run.rows {
                writeln!(
                    f,
                    "    {:>8}  {:>10}  {:<5}  {:>12}  {:>14}  {:>5}%",
                    r.round,
                    r.time_s.to_string(),
                    match r.phase {
                        Phase::SlowStart => "ss",
                        Phase::CongestionAvoidance => "ca",
                    },
                    fmt_sig(r.cwnd_segments.floor(), 10),
                    r.rate_bps.to_string(),
                    fmt_sig(r.share * 100.0, 3)
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(rate: &str, rtt: &str, cc: CongestionControl) -> RampQuery {
        RampQuery {
            rate: rate.parse().unwrap(),
            rtt: rtt.parse().unwrap(),
            mss: Bytes::new(1460),
            initcwnd: 10,
            ssthresh: Ssthresh::Infinite,
            cc,
            target: "90%".parse().unwrap(),
            window: None,
        }
    }

    #[test]
    fn seed_003_low_ssthresh_ramps_linearly_for_a_minute() {
        // Seed 003: 10 Gbit/s LAN, ssthresh 65535 vs infinite. With RTT 10 ms the BDP is
        // 8562 segments of 1460 B; 90 % is 7705.5 segments. Reno from 65535 B (44.9 segments)
        // adds one per round: ~7661 rounds = 76.6 s. Infinite: 10·2^k ≥ 7705.5 → k = 10.
        let base = q("10gbit", "10ms", CongestionControl::Reno);
        let r = ramp(base, &["65535".parse().unwrap(), Ssthresh::Infinite]).unwrap();
        let low = &r.runs[0];
        let inf = &r.runs[1];
        assert_eq!(low.slow_start_exit_round, Some(3)); // 10 → 20 → 40 → 44.9
        let want = 3 + (7705.5f64 - 65535.0 / 1460.0).ceil() as u64;
        assert_eq!(low.rounds_to_target, Some(want));
        let t = low.time_to_target_s.unwrap().secs();
        assert!((76.0..77.0).contains(&t), "{t}");
        assert_eq!(inf.rounds_to_target, Some(10));
        assert_eq!(inf.slow_start_exit_round, None);
        assert_eq!(inf.time_to_target_s.unwrap(), Dur::from_millis(100));
        // The compact table stays compact.
        assert!(low.rows.len() <= 14, "{}", low.rows.len());
        assert_eq!(low.rows.last().unwrap().round, want);
        let text = r.to_string();
        assert!(
            text.contains("ssthresh 65535 B") && text.contains("ssthresh inf"),
            "{text}"
        );
    }

    #[test]
    fn cubic_grows_with_time_not_rounds() {
        // After leaving slow start at 44.9 segments, CUBIC needs C·t³ ≈ 7660 segments:
        // t ≈ (7660 / 0.4)^(1/3) ≈ 26.8 s at 10 ms, far sooner than Reno's 76 s.
        let mut base = q("10gbit", "10ms", CongestionControl::Cubic);
        base.ssthresh = "65535".parse().unwrap();
        let run = ramp_run(base).unwrap();
        let t = run.time_to_target_s.unwrap().secs();
        assert!((26.0..28.0).contains(&t), "{t}");
        // On a 100 µs RTT the Reno-friendly estimate (+0.53 per round) leads instead.
        let mut fast = q("1gbit", "100us", CongestionControl::Cubic);
        fast.ssthresh = "14600".parse().unwrap();
        let run = ramp_run(fast).unwrap();
        let k = run.rounds_to_target.unwrap();
        let alpha = 3.0 * 0.3 / 1.7;
        let reno_friendly_rounds = ((1e9f64 * 1e-4 * 0.9 / 11680.0 - 10.0) / alpha).ceil() as u64;
        assert!(
            k <= reno_friendly_rounds + 2,
            "{k} vs {reno_friendly_rounds}"
        );
    }

    #[test]
    fn a_small_receive_window_means_never() {
        let mut base = q("1gbit", "20ms", CongestionControl::Reno);
        base.window = Some(Bytes::new(65535));
        let run = ramp_run(base).unwrap();
        assert!(!run.reached);
        assert!(run.not_reached_because.unwrap().contains("receive window"));
    }

    #[test]
    fn bad_inputs() {
        let mut base = q("1gbit", "20ms", CongestionControl::Bbr);
        assert!(ramp_run(base).is_err());
        base.cc = CongestionControl::Reno;
        base.initcwnd = 0;
        assert!(ramp_run(base).is_err());
        assert!("inf".parse::<Ssthresh>() == Ok(Ssthresh::Infinite));
        assert!("64KiB".parse::<Ssthresh>() == Ok(Ssthresh::Bytes(Bytes::new(65536))));
        assert!("lots".parse::<Ssthresh>().is_err());
    }

    proptest! {
        #[test]
        fn an_infinite_ssthresh_is_never_slower(
            mbps in 1u64..20_000, rtt_us in 100u64..200_000, ss in 2u64..2000, cubic: bool,
        ) {
            let cc = if cubic { CongestionControl::Cubic } else { CongestionControl::Reno };
            let mut base = q("1gbit", "1ms", cc);
            base.rate = Rate::from_bps(mbps as f64 * 1e6);
            base.rtt = Dur::from_micros(rtt_us);
            let finite = ramp_run(RampQuery { ssthresh: Ssthresh::Bytes(Bytes::new(ss * 1460)), ..base }).unwrap();
            let inf = ramp_run(base).unwrap();
            prop_assert!(inf.reached);
            if let Some(k) = finite.rounds_to_target {
                prop_assert!(inf.rounds_to_target.unwrap() <= k);
            }
        }
    }
}
