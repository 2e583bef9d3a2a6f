//! The A/B comparison: each arm's mean with its 95% confidence interval, and two tests of B
//! against A, each at half the level: Welch's t test (unequal variances: a change may make the
//! path steadier or noisier) and the rank-sum test. A lossy path's tests under CUBIC are
//! mostly steady with the odd collapse (41, 26, 9, 24, 23 Mbit/s against BBR's 45–46): the
//! one collapse leaves Welch's test four degrees of freedom and no verdict on an 83% gain,
//! where the ranks (every B above every A) are significant. Either test calling a difference
//! calls it; at half the level each, an A/A trial is still called different at most at the
//! level asked (Bonferroni over the two).
//!
//! The search looks at a trial more than once (after the minimum number of pairs, then after
//! each further pair), so each look tests at a stricter level: the overall chance of calling
//! an A/A trial different stays under 5% (Bonferroni over the looks a trial may take).

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_report::stats::{rank_sum_greater, summarize, t_quantile};

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

/// The rank-sum test of `b` against `a` at two-sided level `alpha`, with Welch's margin: B is
/// better only when it ranks above A raised by `margin` (a share of each A value); worse when
/// A ranks above B.
pub fn rank_sum_margin(a: &[f64], b: &[f64], alpha: f64, margin: f64) -> Verdict {
    let raised: Vec<f64> = a.iter().map(|x| x * (1.0 + margin)).collect();
    let one_side = alpha / 2.0;
    if rank_sum_greater(&raised, b).is_some_and(|p| p <= one_side) {
        Verdict::Better
    } else if rank_sum_greater(b, a).is_some_and(|p| p <= one_side) {
        Verdict::Worse
    } else {
        Verdict::NoDifference
    }
}

/// The search's comparison: Welch's test and the rank-sum test, each at `alpha / 2`, so the
/// two together call an A/A trial different at most at `alpha`. Welch's verdict first (the
/// two cannot disagree in direction on the same data but for a pathological spread).
pub fn compare(a: &[f64], b: &[f64], alpha: f64, margin: f64) -> Verdict {
    match welch_margin(a, b, alpha / 2.0, margin) {
        Verdict::NoDifference => rank_sum_margin(a, b, alpha / 2.0, margin),
        v => v,
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
    fn ranks_call_a_gain_that_one_collapse_hides_from_welch() {
        // The lossy path's sender: CUBIC's five tests against BBR's (Mbit/s), at the level of
        // the last of three looks.
        let a = [41.4, 26.3, 9.2, 24.1, 23.4];
        let b = [46.2, 45.3, 46.0, 45.4, 45.1];
        let alpha = 0.05 / 3.0;
        assert_eq!(welch_margin(&a, &b, alpha, 0.02), Verdict::NoDifference);
        assert_eq!(rank_sum_margin(&a, &b, alpha / 2.0, 0.02), Verdict::Better);
        assert_eq!(compare(&a, &b, alpha, 0.02), Verdict::Better);
        // The margin applies to the ranks too: B within 2% of every A is no gain.
        let close = [41.5, 26.5, 9.3, 24.3, 23.6];
        assert_eq!(compare(&a, &close, alpha, 0.02), Verdict::NoDifference);
        // And the other direction.
        assert_eq!(compare(&b, &a, alpha, 0.02), Verdict::Worse);
        // Four pairs cannot reach this level by ranks alone (1/70 > the one-sided share).
        assert_eq!(
            rank_sum_margin(&a[..4], &b[..4], alpha / 2.0, 0.02),
            Verdict::NoDifference
        );
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
