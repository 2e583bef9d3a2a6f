//! The CUBIC response function (RFC 9438 §5): the average window of CUBIC under periodic loss,
//! and its Reno-friendly region, where CUBIC's AIMD estimate (α = 3(1−β)/(1+β)) is larger
//! than the cubic curve and CUBIC behaves like Reno. CUBIC takes the larger of the two, so it
//! outruns Reno only on long-RTT, low-loss paths.

use schemars::JsonSchema;
use serde::Serialize;

use crate::mathis::{mathis_bps, MathisConstant};
use crate::units::{fmt_sig, Bytes, Dur, Probability, Rate};
use crate::ModelError;

/// RFC 9438's C (segments / s³).
pub const CUBIC_C: f64 = 0.4;
/// RFC 9438's multiplicative decrease factor β.
pub const CUBIC_BETA: f64 = 0.7;

/// CUBIC's average window under periodic loss, segments:
/// (C(3+β)/(4(1−β)))^¼ · RTT^¾ / p^¾.
pub fn cubic_avg_window(rtt: Dur, loss: f64, c: f64, beta: f64) -> f64 {
    (c * (3.0 + beta) / (4.0 * (1.0 - beta))).powf(0.25) * rtt.secs().powf(0.75) / loss.powf(0.75)
}

/// The average window of CUBIC's Reno-friendly AIMD estimate, segments: an AIMD(α, β) flow
/// averages √(α(1+β)/(2(1−β)p)); with α = 3(1−β)/(1+β) that is √(3/(2p)), Reno's window.
pub fn reno_friendly_avg_window(loss: f64, beta: f64) -> f64 {
    let alpha = 3.0 * (1.0 - beta) / (1.0 + beta);
    (alpha * (1.0 + beta) / (2.0 * (1.0 - beta) * loss)).sqrt()
}

/// Which of CUBIC's two regimes sets the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CubicRegion {
    /// The cubic curve: CUBIC is faster than Reno here.
    Cubic,
    /// The Reno-friendly (AIMD) estimate is larger: CUBIC behaves like Reno.
    RenoFriendly,
}

/// The CUBIC response function at one operating point.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Cubic {
    /// Maximum segment size, bytes.
    pub mss_bytes: Bytes,
    /// Round-trip time, seconds.
    pub rtt_s: Dur,
    /// Loss event probability.
    pub loss: Probability,
    /// C, segments/s³.
    pub c: f64,
    /// β, the multiplicative decrease (0.7 in Linux).
    pub beta: f64,
    /// Average window of the cubic curve, segments.
    pub cubic_window_segments: f64,
    /// Average window of the Reno-friendly estimate, segments.
    pub reno_friendly_window_segments: f64,
    /// Which estimate gives the window: the cubic curve or the Reno-friendly one.
    pub region: CubicRegion,
    /// The larger of the two, segments.
    pub avg_window_segments: f64,
    /// Average throughput: window · MSS / RTT, bits per second.
    pub rate_bps: Rate,
    /// Reno (Mathis, C = √(3/2)) at the same point, bits per second.
    pub reno_rate_bps: Rate,
    /// The formula, in words.
    pub formula: String,
    /// When the model does not apply.
    pub caveats: Vec<String>,
}

/// CUBIC's average throughput for an MSS, RTT and loss rate, with RFC 9438's C = 0.4, β = 0.7.
pub fn cubic(mss: Bytes, rtt: Dur, loss: Probability) -> Result<Cubic, ModelError> {
    crate::check_mss_rtt(mss, rtt)?;
    let p = loss.get();
    if p <= 0.0 {
        return Err(ModelError::Invalid(
            "the CUBIC response function needs a loss rate above zero (without loss the window \
             grows without bound); give --loss 0.01%"
                .into(),
        ));
    }
    let w_cubic = cubic_avg_window(rtt, p, CUBIC_C, CUBIC_BETA);
    let w_reno = reno_friendly_avg_window(p, CUBIC_BETA);
    let (region, w) = if w_cubic > w_reno {
        (CubicRegion::Cubic, w_cubic)
    } else {
        (CubicRegion::RenoFriendly, w_reno)
    };
    let segment_bits = mss.get() as f64 * 8.0;
    let mut caveats = vec![
        "A deterministic model: one loss event every 1/p packets, no timeouts, a long flow that \
         is never window- or application-limited."
            .into(),
        "Fast convergence, HyStart and slow start are left out; real CUBIC flows sharing a \
         bottleneck lose more often than this single-flow model assumes."
            .into(),
        "C = 0.4 and β = 0.7 are RFC 9438's (and Linux's) constants.".into(),
    ];
    if p > 0.01 {
        caveats.push(
            "Above about 1% loss timeouts dominate and every loss-based model is optimistic; \
             see `model pftk`."
                .into(),
        );
    }
    Ok(Cubic {
        mss_bytes: mss,
        rtt_s: rtt,
        loss,
        c: CUBIC_C,
        beta: CUBIC_BETA,
        cubic_window_segments: w_cubic,
        reno_friendly_window_segments: w_reno,
        region,
        avg_window_segments: w,
        rate_bps: Rate::from_bps(w * segment_bits / rtt.secs()),
        reno_rate_bps: Rate::from_bps(mathis_bps(mss, rtt, p, MathisConstant::Periodic.value())),
        formula: "W = max((C(3+β)/(4(1−β)))^¼ · RTT^¾ / p^¾, √(3/(2p))) segments; rate = W · \
                  MSS / RTT"
            .into(),
        caveats,
    })
}

impl std::fmt::Display for Cubic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rows = [
            ("mss", self.mss_bytes.to_string()),
            ("rtt", self.rtt_s.to_string()),
            ("loss", self.loss.to_string()),
            (
                "cubic window",
                format!("{} segments", fmt_sig(self.cubic_window_segments, 4)),
            ),
            (
                "reno-friendly",
                format!(
                    "{} segments",
                    fmt_sig(self.reno_friendly_window_segments, 4)
                ),
            ),
            (
                "region",
                match self.region {
                    CubicRegion::Cubic => "cubic (faster than Reno here)".into(),
                    CubicRegion::RenoFriendly => {
                        "Reno-friendly (CUBIC behaves like Reno here)".to_string()
                    }
                },
            ),
            ("rate", self.rate_bps.to_string()),
            (
                "reno",
                format!(
                    "{} (CUBIC/Reno = {})",
                    self.reno_rate_bps,
                    fmt_sig(self.rate_bps.bps() / self.reno_rate_bps.bps(), 3)
                ),
            ),
        ];
        crate::render::write_model(
            f,
            &format!(
                "CUBIC response function at {} loss over {}",
                self.loss, self.rtt_s
            ),
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

    fn at(rtt: &str, p: &str) -> Cubic {
        cubic(Bytes::new(1448), rtt.parse().unwrap(), p.parse().unwrap()).unwrap()
    }

    #[test]
    fn reference_example_rtt_100ms_loss_1e6() {
        // RFC 9438 §5's average window worked by hand (C 0.4, β 0.7, MSS 1448): RTT 100 ms,
        // p = 1e-6: CUBIC 687 Mb/s vs Reno 142 Mb/s.
        let c = at("100ms", "1e-6");
        assert_eq!(c.region, CubicRegion::Cubic);
        assert!(
            (c.rate_bps.bps() / 1e6 - 687.0).abs() < 1.0,
            "{}",
            c.rate_bps
        );
        assert!(
            (c.reno_rate_bps.bps() / 1e6 - 142.0).abs() < 0.5,
            "{}",
            c.reno_rate_bps
        );
    }

    #[test]
    fn rfc_table_points() {
        // RFC 9438 §5: RTT 0.1 s, p = 1e-4: CUBIC 187 segments vs Reno ~120;
        // RTT 0.01 s, p = 1e-4: the Reno-friendly region.
        let c = at("100ms", "1e-4");
        assert!((c.cubic_window_segments - 187.4).abs() < 0.5);
        assert!((c.reno_friendly_window_segments - 122.5).abs() < 0.1);
        let c = at("10ms", "1e-4");
        assert_eq!(c.region, CubicRegion::RenoFriendly);
        assert!((c.rate_bps.bps() - c.reno_rate_bps.bps()).abs() < 1e-6 * c.rate_bps.bps());
        assert!(c.to_string().contains("Reno-friendly"));
    }

    #[test]
    fn no_loss_is_refused() {
        assert!(cubic(Bytes::new(1448), Dur::from_millis(10), "0".parse().unwrap()).is_err());
    }

    proptest! {
        #[test]
        fn cubic_is_never_slower_than_reno(p in 1e-9f64..0.3, rtt_us in 10u64..2_000_000) {
            let c = cubic(Bytes::new(1448), Dur::from_micros(rtt_us), Probability::new(p).unwrap())
                .unwrap();
            prop_assert!(c.rate_bps.bps() >= c.reno_rate_bps.bps() * (1.0 - 1e-12));
        }
    }
}
