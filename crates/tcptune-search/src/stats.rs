//! The A/B comparison: each arm's mean with its 95% confidence interval, and Welch's t test
//! of B against A (unequal variances: a change may make the path steadier or noisier).
//!
//! The search looks at a trial more than once (after the minimum number of pairs, then after
//! each further pair), so each look tests at a stricter level: the overall chance of calling
//! an A/A trial different stays under 5% (Bonferroni over the looks a trial may take).

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_report::stats::{summarize, t_quantile};

/// One arm's results: mean and 95% CI, bits per second.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Arm {
    /// Tests in the arm.
    pub n: usize,
    /// Mean throughput, bits per second.
    pub mean_bps: f64,
    /// 95% confidence interval of the mean (absent with one test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95_low_bps: Option<f64>,
    /// Upper end of the 95% confidence interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95_high_bps: Option<f64>,
}

impl Arm {
    /// The arm of these results (`None` when there are none).
    pub fn of(values: &[f64]) -> Option<Arm> {
        let s = summarize(values)?;
        Some(Arm {
            n: s.n,
            mean_bps: s.mean,
            ci95_low_bps: s.ci95_low,
            ci95_high_bps: s.ci95_high,
        })
    }
}

/// What a comparison of B with A shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// B is better than A.
    Better,
    /// B is worse than A.
    Worse,
    /// No difference shown.
    NoDifference,
}

/// Welch's t test of `b` against `a` at two-sided level `alpha`. With no spread in either arm
/// (a deterministic path) any difference of the means counts.
pub fn welch(a: &[f64], b: &[f64], alpha: f64) -> Verdict {
    welch_margin(a, b, alpha, 0.0)
}

/// Welch's t test where B is better only when it beats A by more than `margin` (a share of A's
/// mean) with confidence, not merely by more than nothing: the lower end of the difference's
/// confidence interval must clear the smallest gain worth keeping. A change that does nothing
/// then needs both a fluke past the CI and one past the margin to be kept. Worse stays
/// "significantly below A" (a rollback needs no margin).
pub fn welch_margin(a: &[f64], b: &[f64], alpha: f64, margin: f64) -> Verdict {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    if a.len() < 2 || b.len() < 2 {
        return Verdict::NoDifference;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let var =
        |v: &[f64], m: f64| v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    let (ma, mb) = (mean(a), mean(b));
    let (va, vb) = (var(a, ma) / na, var(b, mb) / nb);
    let se = (va + vb).sqrt();
    let diff = mb - ma;
    let gain = diff - margin * ma.abs();
    let beyond = |d: f64| {
        if se <= f64::EPSILON * ma.abs().max(mb.abs()).max(1.0) {
            d > f64::EPSILON * ma.abs().max(1.0)
        } else {
            // Welch–Satterthwaite degrees of freedom.
            let df = (va + vb).powi(2) / (va.powi(2) / (na - 1.0) + vb.powi(2) / (nb - 1.0));
            d / se > t_quantile(1.0 - alpha / 2.0, df.max(1.0))
        }
    };
    if diff > 0.0 && beyond(gain) {
        Verdict::Better
    } else if diff < 0.0 && beyond(-diff) {
        Verdict::Worse
    } else {
        Verdict::NoDifference
    }
}

/// The mean of `v` (NaN when empty).
pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welch_separates_clear_differences_and_not_overlapping_noise() {
        let a = [100.0, 102.0, 98.0, 101.0];
        assert_eq!(
            welch(&a, &[150.0, 149.0, 152.0, 151.0], 0.05),
            Verdict::Better
        );
        assert_eq!(welch(&a, &[60.0, 61.0, 59.0, 62.0], 0.05), Verdict::Worse);
        assert_eq!(
            welch(&a, &[99.0, 103.0, 97.0, 101.0], 0.05),
            Verdict::NoDifference
        );
        // One test per arm says nothing.
        assert_eq!(welch(&[1.0], &[2.0], 0.05), Verdict::NoDifference);
        // No spread: the means decide.
        assert_eq!(welch(&[5.0, 5.0], &[6.0, 6.0], 0.05), Verdict::Better);
        assert_eq!(welch(&[5.0, 5.0], &[5.0, 5.0], 0.05), Verdict::NoDifference);
    }

    #[test]
    fn a_margin_needs_the_whole_interval_above_the_smallest_gain() {
        let a = [100.0, 101.0, 99.0, 100.0];
        // +4% with little spread: significant, and clear of a 2% margin.
        let b3 = [104.0, 104.5, 103.5, 104.0];
        assert_eq!(welch_margin(&a, &b3, 0.05, 0.02), Verdict::Better);
        // +2.5% with spread: significant against 0, not clear of 2%.
        let b25 = [101.5, 103.5, 102.0, 103.0];
        assert_eq!(welch(&a, &b25, 0.05), Verdict::Better);
        assert_eq!(welch_margin(&a, &b25, 0.05, 0.02), Verdict::NoDifference);
        // Worse needs no margin.
        assert_eq!(
            welch_margin(&a, &[97.0, 97.5, 96.5, 97.0], 0.05, 0.02),
            Verdict::Worse
        );
    }
}
