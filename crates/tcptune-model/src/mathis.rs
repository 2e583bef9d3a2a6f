//! The Mathis et al. (1997) bound on Reno-style congestion-avoidance throughput,
//! `rate ≤ MSS/RTT · C/√p`, and its inverse: the largest loss rate that still allows a target
//! rate, `p ≤ (MSS · C / (RTT · rate))²` (the form seed 001 uses, with C = 1).

use schemars::JsonSchema;
use serde::Serialize;

use crate::units::{fmt_sig, Bytes, Dur, Probability, Rate};
use crate::ModelError;

/// The constant C of the Mathis model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MathisConstant {
    /// √(3/2) ≈ 1.22: periodic loss, an ACK per packet (the paper's derivation).
    Periodic,
    /// √(3/4) ≈ 0.87: delayed ACKs (one ACK per two packets).
    DelayedAck,
    /// Any other value (the Web100 paper, seed 001, uses C = 1).
    Given(f64),
}

impl MathisConstant {
    /// The constant C.
    pub fn value(self) -> f64 {
        match self {
            MathisConstant::Periodic => (1.5f64).sqrt(),
            MathisConstant::DelayedAck => (0.75f64).sqrt(),
            MathisConstant::Given(c) => c,
        }
    }
    /// C and where it comes from, in words.
    pub fn describe(self) -> String {
        match self {
            MathisConstant::Periodic => "√(3/2) ≈ 1.225 (periodic loss, ACK every packet)".into(),
            MathisConstant::DelayedAck => "√(3/4) ≈ 0.866 (delayed ACKs)".into(),
            MathisConstant::Given(c) => format!("{} (given)", fmt_sig(c, 6)),
        }
    }
    /// The constant for `b` packets acknowledged per ACK: √(3/(2b)).
    pub fn for_packets_per_ack(b: u32) -> f64 {
        (1.5 / b.max(1) as f64).sqrt()
    }
}

/// The Mathis bound in bits per second for an MSS, RTT, loss rate (> 0) and constant.
pub fn mathis_bps(mss: Bytes, rtt: Dur, loss: f64, c: f64) -> f64 {
    mss.get() as f64 * 8.0 / rtt.secs() * c / loss.sqrt()
}

/// The largest loss rate at which the Mathis bound still reaches `rate` (may exceed 1).
pub fn mathis_max_loss(mss: Bytes, rtt: Dur, rate: Rate, c: f64) -> f64 {
    let x = mss.get() as f64 * 8.0 * c / (rtt.secs() * rate.bps());
    x * x
}

/// Which way the model was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MathisDirection {
    /// Given a loss rate, the throughput bound.
    RateForLoss,
    /// Given a target rate, the largest loss rate that allows it.
    LossForRate,
}

/// A Mathis bound or its inverse.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Mathis {
    /// Whether the rate was computed from the loss, or the loss from the rate.
    pub direction: MathisDirection,
    /// Maximum segment size (payload per packet), bytes.
    pub mss_bytes: Bytes,
    /// Round-trip time, seconds.
    pub rtt_s: Dur,
    /// Loss event probability (given, or the largest that allows the target rate).
    pub loss: Probability,
    /// Throughput bound (given as the target, or the bound for the loss), bits per second.
    pub rate_bps: Rate,
    /// The constant C.
    pub constant: f64,
    /// What C stands for.
    pub constant_meaning: String,
    /// The path's rate, when known: the bound matters only below it.
    pub path_rate_bps: Option<Rate>,
    /// The formula, in words.
    pub formula: String,
    /// When the model does not apply.
    pub caveats: Vec<String>,
}

fn check(mss: Bytes, rtt: Dur, c: f64) -> Result<(), ModelError> {
    crate::check_mss_rtt(mss, rtt)?;
    if !(c.is_finite() && c > 0.0) {
        return Err(ModelError::Invalid(
            "the Mathis constant must be a positive number; give --constant 1.22".into(),
        ));
    }
    Ok(())
}

fn caveats(loss: f64, rate: Rate, path_rate: Option<Rate>) -> Vec<String> {
    let mut c = vec![
        "Models Reno-style AIMD in congestion avoidance on a long flow: not slow start, not \
         CUBIC far from its Reno-friendly region (see `model cubic`), not BBR, whose rate does \
         not follow loss."
            .into(),
        "p is the rate of loss events (one per window at most), not of lost packets; bursts of \
         losses count once."
            .into(),
        "It ignores timeouts and the receive window; when either limits the flow the bound is \
         too high (see `model pftk`, `model window`)."
            .into(),
        "Mathis and Mahdavi call the model obsolete for modern TCP (\"Deprecating The TCP \
         Macroscopic Model\", CCR 2019); use it as the Reno reference."
            .into(),
    ];
    if loss > 0.01 {
        c.push(
            "Above about 1% loss timeouts dominate and the bound is optimistic; use `model \
             pftk`."
                .into(),
        );
    }
    if let Some(p) = path_rate {
        if p.bps() <= rate.bps() {
            c.push(format!(
                "The path rate {p} is below this bound, so loss does not limit the flow there."
            ));
        }
    }
    c
}

/// The throughput bound for a loss rate: rate ≤ MSS/RTT · C/√p.
pub fn rate_for_loss(
    mss: Bytes,
    rtt: Dur,
    loss: Probability,
    constant: MathisConstant,
    path_rate: Option<Rate>,
) -> Result<Mathis, ModelError> {
    let c = constant.value();
    check(mss, rtt, c)?;
    if loss.get() <= 0.0 {
        return Err(ModelError::Invalid(
            "the Mathis bound needs a loss rate above zero (without loss it is unbounded); \
             give --loss 0.01%"
                .into(),
        ));
    }
    let rate = Rate::from_bps(mathis_bps(mss, rtt, loss.get(), c));
    Ok(Mathis {
        direction: MathisDirection::RateForLoss,
        mss_bytes: mss,
        rtt_s: rtt,
        loss,
        rate_bps: rate,
        constant: c,
        constant_meaning: constant.describe(),
        path_rate_bps: path_rate,
        formula: "rate ≤ (MSS / RTT) · C / √p".into(),
        caveats: caveats(loss.get(), rate, path_rate),
    })
}

/// The largest loss rate that still allows `target`: p ≤ (MSS · C / (RTT · rate))².
pub fn loss_for_rate(
    mss: Bytes,
    rtt: Dur,
    target: Rate,
    constant: MathisConstant,
) -> Result<Mathis, ModelError> {
    let c = constant.value();
    check(mss, rtt, c)?;
    let p = mathis_max_loss(mss, rtt, target, c);
    let mut cav = caveats(p, target, None);
    if p >= 1.0 {
        cav.push(
            "The model allows any loss rate for this target: the target is below one MSS per \
             RTT times C."
                .into(),
        );
    }
    // Values above 1 are reported as 1 with the caveat above.
    let loss = Probability::new(p.min(1.0)).ok_or_else(|| {
        ModelError::Invalid(
            "the target rate must be a positive number; give --target-rate 100mbit".into(),
        )
    })?;
    Ok(Mathis {
        direction: MathisDirection::LossForRate,
        mss_bytes: mss,
        rtt_s: rtt,
        loss,
        rate_bps: target,
        constant: c,
        constant_meaning: constant.describe(),
        path_rate_bps: None,
        formula: "p ≤ (MSS · C / (RTT · rate))²".into(),
        caveats: cav,
    })
}

impl std::fmt::Display for Mathis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let common = [
            ("mss", self.mss_bytes.to_string()),
            ("rtt", self.rtt_s.to_string()),
            ("C", self.constant_meaning.clone()),
        ];
        let (title, result) = match self.direction {
            MathisDirection::RateForLoss => (
                format!("Mathis bound at {} loss over {}", self.loss, self.rtt_s),
                [
                    ("loss", self.loss.to_string()),
                    ("max rate", self.rate_bps.to_string()),
                ],
            ),
            MathisDirection::LossForRate => (
                format!(
                    "Largest loss rate for {} over {} (Mathis)",
                    self.rate_bps, self.rtt_s
                ),
                [
                    ("rate", self.rate_bps.to_string()),
                    (
                        "max loss",
                        format!(
                            "{} (one loss event per {} packets)",
                            self.loss,
                            fmt_sig(1.0 / self.loss.get(), 3)
                        ),
                    ),
                ],
            ),
        };
        let rows: Vec<_> = common.into_iter().chain(result).collect();
        crate::render::write_model(f, &title, &rows, &self.formula, &self.caveats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn b(s: &str) -> Bytes {
        s.parse().unwrap()
    }
    fn d(s: &str) -> Dur {
        s.parse().unwrap()
    }

    #[test]
    fn reference_example_mss_1448_rtt_100ms_loss_1e4() {
        // Mathis et al. 1997 worked by hand: 1448 B × 8 / 100 ms × √(3/2) / √1e-4 = 14.2 Mb/s.
        let m = rate_for_loss(
            b("1448"),
            d("100ms"),
            "1e-4".parse().unwrap(),
            MathisConstant::Periodic,
            None,
        )
        .unwrap();
        assert!(
            (m.rate_bps.bps() / 1e6 - 14.19).abs() < 0.01,
            "{}",
            m.rate_bps
        );
        assert_eq!(m.rate_bps.to_string(), "14.19 Mbit/s");
        let delayed = rate_for_loss(
            b("1448"),
            d("100ms"),
            "1e-4".parse().unwrap(),
            MathisConstant::DelayedAck,
            None,
        )
        .unwrap();
        assert!((delayed.rate_bps.bps() / m.rate_bps.bps() - 0.5f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn seed_001_max_loss_for_411_mbps() {
        // Seed 001: OC-12, 20 ms RTT, target 411 Mbps, MSS 1460, C = 1 → "approximately
        // 0.00018%". With 411 × 10^6 bit/s it is 0.0002%; the paper's figure comes from
        // reading Mbps as 2^20 bit/s.
        let c = MathisConstant::Given(1.0);
        let decimal = loss_for_rate(b("1460"), d("20ms"), "411mbit".parse().unwrap(), c).unwrap();
        assert!(
            (decimal.loss.get() - 2.019e-6).abs() < 1e-9,
            "{}",
            decimal.loss
        );
        assert_eq!(decimal.loss.to_string(), "0.000202%");
        let binary = loss_for_rate(b("1460"), d("20ms"), "411Mibit".parse().unwrap(), c).unwrap();
        assert_eq!(binary.loss.to_string(), "0.000184%");
        assert!(
            binary.to_string().contains("one loss event per 5445"),
            "{binary}"
        );
    }

    #[test]
    fn bad_inputs_are_refused() {
        let p = "1%".parse().unwrap();
        let c = MathisConstant::Periodic;
        assert!(rate_for_loss(b("0"), d("1ms"), p, c, None).is_err());
        assert!(rate_for_loss(b("1448"), d("0s"), p, c, None).is_err());
        assert!(rate_for_loss(b("1448"), d("1ms"), "0".parse().unwrap(), c, None).is_err());
        assert!(rate_for_loss(b("1448"), d("1ms"), p, MathisConstant::Given(-1.0), None).is_err());
        // A target below MSS·C/RTT allows any loss: reported as 100% with a caveat.
        let any = loss_for_rate(b("1448"), d("1s"), "1kbit".parse().unwrap(), c).unwrap();
        assert_eq!(any.loss.get(), 1.0);
        assert!(any.caveats.iter().any(|c| c.contains("any loss rate")));
    }

    #[test]
    fn a_slower_path_is_named() {
        let m = rate_for_loss(
            b("1448"),
            d("10ms"),
            "1e-4".parse().unwrap(),
            MathisConstant::Periodic,
            Some("10mbit".parse().unwrap()),
        )
        .unwrap();
        assert!(m.caveats.iter().any(|c| c.contains("below this bound")));
    }

    proptest! {
        #[test]
        fn max_loss_inverts_the_bound(
            mss in 500u64..9000, rtt_us in 50u64..2_000_000, p in 1e-9f64..0.2, c in 0.5f64..2.0,
        ) {
            let (mss, rtt) = (Bytes::new(mss), Dur::from_micros(rtt_us));
            let loss = Probability::new(p).unwrap();
            let bound = rate_for_loss(mss, rtt, loss, MathisConstant::Given(c), None).unwrap();
            let back = loss_for_rate(mss, rtt, bound.rate_bps, MathisConstant::Given(c)).unwrap();
            prop_assert!((back.loss.get() - p).abs() <= p * 1e-9);
        }
    }
}
