//! The Padhye–Firoiu–Towsley–Kurose (PFTK, SIGCOMM 1998) throughput model: Reno's
//! congestion-avoidance rate with the retransmission-timeout term and the receive-window cap,
//! which Mathis leaves out. It matters at higher loss rates (≳ 1e-3) where timeouts dominate.
//!
//! `rate ≈ min(Wmax/RTT, 1 / (RTT·√(2bp/3) + T0·min(1, 3·√(3bp/8))·p·(1 + 32p²)))` packets/s.

use schemars::JsonSchema;
use serde::Serialize;

use crate::mathis::{mathis_bps, MathisConstant};
use crate::units::{fmt_sig, Bytes, Dur, Probability, Rate};
use crate::ModelError;

/// The inputs of the PFTK model.
#[derive(Debug, Clone, Copy)]
pub struct PftkQuery {
    /// Maximum segment size (payload per packet).
    pub mss: Bytes,
    /// Round-trip time.
    pub rtt: Dur,
    /// Loss event probability.
    pub loss: Probability,
    /// Retransmission timeout T0 (Linux: at least `rto_min`, 200 ms).
    pub rto: Dur,
    /// Packets acknowledged per ACK, b (2 with delayed ACKs).
    pub packets_per_ack: u32,
    /// Receive window cap, Wmax (bytes); none = unlimited.
    pub window: Option<Bytes>,
}

/// What held the modelled rate down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PftkLimit {
    /// Loss (the fast-retransmit and timeout terms).
    Loss,
    /// The receive window: Wmax / RTT is below the loss-limited rate.
    Window,
}

/// The PFTK throughput estimate.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Pftk {
    /// Maximum segment size, bytes.
    pub mss_bytes: Bytes,
    /// Round-trip time, seconds.
    pub rtt_s: Dur,
    /// Loss event probability.
    pub loss: Probability,
    /// Retransmission timeout T0, seconds.
    pub rto_s: Dur,
    /// Packets per ACK, b.
    pub packets_per_ack: u32,
    /// Receive window cap, bytes.
    pub window_bytes: Option<Bytes>,
    /// Throughput estimate, bits per second.
    pub rate_bps: Rate,
    /// The same in packets per second.
    pub packets_per_s: f64,
    /// The loss-limited rate without the window cap, bits per second.
    pub loss_rate_bps: Rate,
    /// Wmax / RTT, bits per second.
    pub window_rate_bps: Option<Rate>,
    /// Whether the loss or the window bound the rate.
    pub limited_by: PftkLimit,
    /// Share of the time per packet the timeout term accounts for (0..1).
    pub timeout_share: f64,
    /// Mathis with the same b (C = √(3/(2b))), for comparison, bits per second.
    pub mathis_rate_bps: Option<Rate>,
    /// The formula, in words.
    pub formula: String,
    /// When the model does not apply.
    pub caveats: Vec<String>,
}

/// The PFTK estimate for `q`.
pub fn pftk(q: &PftkQuery) -> Result<Pftk, ModelError> {
    crate::check_mss_rtt(q.mss, q.rtt)?;
    if q.packets_per_ack == 0 {
        return Err(ModelError::Invalid(
            "packets per ACK (--b) must be at least 1; give --b 2 for delayed ACKs".into(),
        ));
    }
    if let Some(w) = q.window {
        if w.get() < q.mss.get() {
            return Err(ModelError::Invalid(format!(
                "the window ({} B) is smaller than one MSS ({} B); give --window of at least \
                 one segment",
                w.get(),
                q.mss.get()
            )));
        }
    }
    let p = q.loss.get();
    let b = q.packets_per_ack as f64;
    let rtt = q.rtt.secs();
    let bits_per_packet = q.mss.get() as f64 * 8.0;
    let window_pps = q.window.map(|w| w.get() as f64 / q.mss.get() as f64 / rtt);

    let fast = rtt * (2.0 * b * p / 3.0).sqrt();
    let timeout =
        q.rto.secs() * (3.0 * (3.0 * b * p / 8.0).sqrt()).min(1.0) * p * (1.0 + 32.0 * p * p);
    let loss_pps = if p > 0.0 {
        1.0 / (fast + timeout)
    } else if window_pps.is_some() {
        f64::INFINITY
    } else {
        return Err(ModelError::Invalid(
            "PFTK needs a loss rate above zero, or a --window to bound a loss-free flow; give \
             --loss 0.1%"
                .into(),
        ));
    };
    let (pps, limited_by) = match window_pps {
        Some(w) if w < loss_pps => (w, PftkLimit::Window),
        _ => (loss_pps, PftkLimit::Loss),
    };
    let timeout_share = if p > 0.0 {
        timeout / (fast + timeout)
    } else {
        0.0
    };
    let mathis = (p > 0.0).then(|| {
        Rate::from_bps(mathis_bps(
            q.mss,
            q.rtt,
            p,
            MathisConstant::for_packets_per_ack(q.packets_per_ack),
        ))
    });

    let mut caveats = vec![
        "Models Reno (NewReno) with loss detected by triple duplicate ACKs or timeouts; SACK, \
         RACK/TLP and CUBIC or BBR change the numbers."
            .into(),
        "p is the loss-event rate; the model assumes losses within a round are correlated (one \
         event per window) and independent across rounds."
            .into(),
        "A long bulk flow that is never application-limited; slow start is not modelled.".into(),
    ];
    if p > 0.0 && p < 1e-3 {
        caveats.push(format!(
            "At this loss rate the timeout term is small ({}% of the time), so Mathis gives \
             nearly the same answer.",
            fmt_sig(timeout_share * 100.0, 2)
        ));
    }
    if q.rto < Dur::from_millis(200) {
        caveats.push(
            "Linux never uses an RTO below rto_min (200 ms by default, tcp_rto_min_us).".into(),
        );
    }
    if p > 0.3 {
        caveats.push(
            "Beyond about 30% loss the model leaves its validated range; expect worse.".into(),
        );
    }

    Ok(Pftk {
        mss_bytes: q.mss,
        rtt_s: q.rtt,
        loss: q.loss,
        rto_s: q.rto,
        packets_per_ack: q.packets_per_ack,
        window_bytes: q.window,
        rate_bps: Rate::from_bps(pps * bits_per_packet),
        packets_per_s: pps,
        loss_rate_bps: Rate::from_bps(loss_pps * bits_per_packet),
        window_rate_bps: window_pps.map(|w| Rate::from_bps(w * bits_per_packet)),
        limited_by,
        timeout_share,
        mathis_rate_bps: mathis,
        formula: "packets/s = min(Wmax/RTT, 1 / (RTT·√(2bp/3) + T0·min(1, 3·√(3bp/8))·p·(1+32p²)))"
            .into(),
        caveats,
    })
}

impl std::fmt::Display for Pftk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut rows = vec![
            ("mss", self.mss_bytes.to_string()),
            ("rtt", self.rtt_s.to_string()),
            ("loss", self.loss.to_string()),
            ("rto (T0)", self.rto_s.to_string()),
            ("b", format!("{} packets per ACK", self.packets_per_ack)),
        ];
        if let Some(w) = self.window_bytes {
            rows.push(("window", w.to_string()));
        }
        rows.push((
            "rate",
            format!(
                "{} ({} packets/s), limited by {}",
                self.rate_bps,
                fmt_sig(self.packets_per_s, 4),
                match self.limited_by {
                    PftkLimit::Loss => "loss",
                    PftkLimit::Window => "the window",
                }
            ),
        ));
        rows.push((
            "timeouts",
            format!(
                "{}% of the time per packet",
                fmt_sig(self.timeout_share * 100.0, 3)
            ),
        ));
        if let Some(m) = self.mathis_rate_bps {
            rows.push(("mathis", format!("{m} (same b, no timeouts)")));
        }
        crate::render::write_model(
            f,
            &format!("PFTK throughput at {} loss over {}", self.loss, self.rtt_s),
            &rows,
            &self.formula,
            &self.caveats,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(p: &str) -> PftkQuery {
        PftkQuery {
            mss: Bytes::new(1448),
            rtt: "50ms".parse().unwrap(),
            loss: p.parse().unwrap(),
            rto: "200ms".parse().unwrap(),
            packets_per_ack: 2,
            window: None,
        }
    }

    #[test]
    fn reference_examples_rtt_50ms_b2_t0_200ms() {
        // PFTK's full model (Padhye et al., SIGCOMM 1998) worked by hand: p = 1e-3 → 6.3,
        // 1e-2 → 1.8 (Mathis 2.0), 5e-2 → 0.6 Mb/s (Mathis 0.9).
        for (p, want, mathis) in [
            ("1e-3", 6.3, None),
            ("1e-2", 1.8, Some(2.0)),
            ("5e-2", 0.6, Some(0.9)),
        ] {
            let r = pftk(&q(p)).unwrap();
            let got = r.rate_bps.bps() / 1e6;
            assert!((got - want).abs() < 0.05, "p={p}: {got}");
            if let Some(m) = mathis {
                let got = r.mathis_rate_bps.unwrap().bps() / 1e6;
                assert!((got - m).abs() < 0.06, "p={p} mathis: {got}");
            }
            assert_eq!(r.limited_by, PftkLimit::Loss);
        }
        assert!(pftk(&q("5e-2")).unwrap().timeout_share > 0.3);
    }

    #[test]
    fn the_window_caps_the_rate() {
        let mut query = q("1e-4");
        query.window = Some(Bytes::new(65535));
        let r = pftk(&query).unwrap();
        assert_eq!(r.limited_by, PftkLimit::Window);
        // 65535 B / 50 ms = 10.49 Mbit/s.
        assert!((r.rate_bps.bps() - 65535.0 * 8.0 / 0.05).abs() < 1e-6);
        query.loss = "0".parse().unwrap();
        assert_eq!(pftk(&query).unwrap().limited_by, PftkLimit::Window);
        query.window = None;
        assert!(pftk(&query).is_err());
        query.loss = "1%".parse().unwrap();
        query.window = Some(Bytes::new(100));
        assert!(pftk(&query).is_err());
        query.window = None;
        query.packets_per_ack = 0;
        assert!(pftk(&query).is_err());
    }

    proptest! {
        #[test]
        fn never_above_mathis_with_the_same_b(
            p in 1e-7f64..0.5, rtt_us in 100u64..1_000_000, b in 1u32..4, rto_ms in 200u64..3000,
        ) {
            let r = pftk(&PftkQuery {
                mss: Bytes::new(1448),
                rtt: Dur::from_micros(rtt_us),
                loss: Probability::new(p).unwrap(),
                rto: Dur::from_millis(rto_ms),
                packets_per_ack: b,
                window: None,
            }).unwrap();
            prop_assert!(r.rate_bps.bps() <= r.mathis_rate_bps.unwrap().bps() * (1.0 + 1e-12));
        }
    }
}
