//! The A/B comparison: each arm's mean with its 95% confidence interval, and two tests of B
//! against A, each at half the level: Yuen's trimmed t test (unequal variances: a change may
//! make the path steadier or noisier) and the rank-sum test. Yuen's test is Welch's on the
//! 20%-trimmed means: below five tests an arm trims nothing and it is Welch's; at five it
//! leaves out each arm's highest and lowest. A path's tests under CUBIC are mostly steady
//! with the odd collapse: on the lossy path 41, 26, 9, 24, 23 Mbit/s against BBR's 45–46; on
//! the long fat path one of five tests with a 25 MB send buffer at 135 against the others'
//! 263–285, the old 4 MiB's tests slower still. One collapse leaves Welch's test four degrees of freedom and a spread that
//! hides an 83% gain, and the rank-sum test, which needs every B above every A at five pairs,
//! nothing once one B falls below; the trimmed means see past it. Either test calling a
//! difference calls it; at half the level each, an A/A trial is still called different at most
//! at the level asked (Bonferroni over the two).
//!
//! The search looks at a trial more than once (after the minimum number of pairs, then after
//! each further pair), so each look tests at a stricter level: the overall chance of calling
//! an A/A trial different stays under 5% (Bonferroni over the looks a trial may take, the
//! rank-sum test's share spent only at the looks where a ranking can reach it, and what its
//! steps leave unspent at a promising trial's second chance: `compare_at`).

use std::ops::RangeInclusive;

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_report::stats::{
    rank_sum_attainable, rank_sum_greater, summarize, t_quantile, trimmed_location, Location,
};

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
    /// B is better than A by more than the margin, at the level (the gain's lower bound
    /// clears it).
    Better,
    /// B is better than A at the level, and the gain's estimate (on the means: what a
    /// transfer gets) is at least the margin.
    BetterByEstimate,
    /// B is worse than A.
    Worse,
    /// No difference shown.
    NoDifference,
}

/// How much of each end of an arm Yuen's test leaves out.
pub const TRIM: f64 = 0.2;

/// Yuen's test: Welch's on the [`TRIM`]-trimmed means with their winsorized errors, with the
/// same margin.
pub fn yuen_margin(a: &[f64], b: &[f64], alpha: f64, margin: f64) -> Verdict {
    located(a, b, TRIM, alpha, margin)
}

/// The t test of the `trim`-trimmed locations of `b` against `a` (Welch's when `trim` is 0).
fn located(a: &[f64], b: &[f64], trim: f64, alpha: f64, margin: f64) -> Verdict {
    match (trimmed_location(a, trim), trimmed_location(b, trim)) {
        (Some(la), Some(lb)) => t_margin(la, lb, alpha, margin),
        _ => Verdict::NoDifference,
    }
}

/// B's location against A's: better when the difference less `margin` of A's estimate is
/// beyond the t quantile at the Welch–Satterthwaite degrees of freedom, worse when the
/// difference is below minus that.
fn t_margin(la: Location, lb: Location, alpha: f64, margin: f64) -> Verdict {
    let (ma, mb) = (la.estimate, lb.estimate);
    let (va, vb) = (la.se2, lb.se2);
    let se = (va + vb).sqrt();
    let diff = mb - ma;
    let gain = diff - margin * ma.abs();
    let beyond = |d: f64| {
        if se <= f64::EPSILON * ma.abs().max(mb.abs()).max(1.0) {
            d > f64::EPSILON * ma.abs().max(1.0)
        } else {
            let df = (va + vb).powi(2) / (va.powi(2) / la.df + vb.powi(2) / lb.df);
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
/// better when it ranks above A raised by `margin` (a share of each A value), or better by
/// the estimate when it ranks above A and its mean is at least `margin` above A's
/// ([`mean_gain`]); worse when A ranks above B. Raising A asks the ranks for the gain's lower
/// bound, which a loss-based sender's bimodal tests rarely give: on 1 Gbit/s × 16 ms CUBIC's
/// 882, 868, 878, 756, 879 Mbit/s against BBR's 897–909 (+5.7%, every B above every A) left
/// two B below the highest A raised by 2%. The estimate is the means', not a location's:
/// CUBIC's good tests there sit within 2% of BBR's (a median of 874 against 890 Mbit/s) while
/// a third of them lose 10–20%, so the medians' shift (the Hodges–Lehmann estimate) stays
/// under 2% where the means are 6% apart, and the means are what a transfer gets. Either way
/// rejects only where the test without a margin rejects (raising A only adds inversions, the
/// estimate only narrows it), so the level holds: of 2,000 A/A trials resampled from the
/// measured CUBIC tests at most 5% are called different over all the looks.
pub fn rank_sum_margin(a: &[f64], b: &[f64], alpha: f64, margin: f64) -> Verdict {
    let raised: Vec<f64> = a.iter().map(|x| x * (1.0 + margin)).collect();
    let one_side = alpha / 2.0;
    if rank_sum_greater(&raised, b).is_some_and(|p| p <= one_side) {
        Verdict::Better
    } else if rank_sum_greater(a, b).is_some_and(|p| p <= one_side) && mean_gain(a, b) >= margin {
        Verdict::BetterByEstimate
    } else if rank_sum_greater(b, a).is_some_and(|p| p <= one_side) {
        Verdict::Worse
    } else {
        Verdict::NoDifference
    }
}

/// B's mean over A's, less one (NaN when either is empty).
pub fn mean_gain(a: &[f64], b: &[f64]) -> f64 {
    mean(b) / mean(a) - 1.0
}

/// The Hodges–Lehmann shift of `b` over `a`, as a share of A: the median of `b_j / a_i - 1`
/// over every pair (NaN when either is empty).
pub fn shift(a: &[f64], b: &[f64]) -> f64 {
    let mut ratios: Vec<f64> = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| y / x - 1.0))
        .collect();
    if ratios.is_empty() {
        return f64::NAN;
    }
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    if n % 2 == 1 {
        ratios[n / 2]
    } else {
        (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0
    }
}

/// The looks a trial may take: after `first` pairs and after each pair up to `last`, and one
/// more at `extended` pairs for a trial still promising at `last` (a second chance, when the
/// budget has room for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Looks {
    /// The first look, pairs.
    pub first: usize,
    /// The last regular look, pairs.
    pub last: usize,
    /// The second chance's look, pairs (after `last`).
    pub extended: Option<usize>,
}

impl Looks {
    /// Looks after each pair from `first` to `last`, no second chance.
    pub fn regular(first: usize, last: usize) -> Looks {
        Looks {
            first,
            last,
            extended: None,
        }
    }
}

/// The search's comparison at one of the looks a trial may take, at `alpha` over all of them.
/// Yuen's test spends its half of `alpha` evenly over the regular looks; the rank-sum test
/// spends its half only over the regular looks at which it can call a difference at all. With 3
/// or 4 tests an arm no ranking is rare enough (1 in 20 and 1 in 70 on one side) at a sixth of
/// 5%, so spread over three looks its whole share went unspent and at five pairs it needed
/// every B above every raised A (1 in 252); spent at five pairs alone it calls a gain with one
/// B below one raised A (2 in 252): on 200 Mbit/s × 80 ms at 0.01% loss BBR's 148–159 Mbit/s
/// against CUBIC's 54–149 was +35% and undecided. Bonferroni over the looks either way: a look
/// at which a test cannot call a difference spends none of the level.
///
/// The exact test's p-values are steps, so the rank-sum test at five pairs spends 2/252 of its
/// 1.25% on a side; the extended look gets what is left (7 against 7: U ≥ 45 of 49, four pairs
/// inverted). On 1 Gbit/s × 16 ms CUBIC's tests with a 4 MiB send buffer (880, 885, 880, 760,
/// 731 Mbit/s) against 8 MiB (910, 912, 879, 908, 906) were +9.2% and undecided at five pairs:
/// the one low B sat below three raised A.
pub fn compare_at(a: &[f64], b: &[f64], alpha: f64, looks: Looks, margin: f64) -> Verdict {
    let n = a.len().min(b.len());
    let regular = looks.first..=looks.last;
    if regular.contains(&n) {
        let k = regular.clone().count().max(1) as f64;
        let v = yuen_margin(a, b, alpha / 2.0 / k, margin);
        if v != Verdict::NoDifference {
            return v;
        }
    }
    let ranked = rank_sum_looks(regular, alpha / 2.0);
    let each = alpha / 2.0 / ranked.len().max(1) as f64;
    if ranked.contains(&n) {
        return rank_sum_margin(a, b, each, margin);
    }
    if looks.extended == Some(n) {
        let spent: f64 = ranked
            .iter()
            .map(|&r| rank_sum_attainable(r, r, each / 2.0))
            .sum();
        let left = rank_sum_attainable(n, n, alpha / 4.0 - spent);
        if left > 0.0 {
            return rank_sum_margin(a, b, 2.0 * left, margin);
        }
    }
    Verdict::NoDifference
}

/// The looks (tests an arm) at which the rank-sum test, at two-sided `alpha` spread evenly over
/// them, can reach its level: the smallest one-sided p of n against n is 1 / C(2n, n).
fn rank_sum_looks(looks: RangeInclusive<usize>, alpha: f64) -> Vec<usize> {
    let smallest_p = |n: usize| (1..=n).fold(1.0, |p, i| p * i as f64 / (n + i) as f64);
    let mut at: Vec<usize> = looks.collect();
    loop {
        let one_side = alpha / at.len().max(1) as f64 / 2.0;
        let reach: Vec<usize> = at
            .iter()
            .copied()
            .filter(|&n| smallest_p(n) <= one_side)
            .collect();
        if reach.len() == at.len() || reach.is_empty() {
            return reach;
        }
        at = reach;
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
    use crate::tests::measured::{BBR_6M, CUBIC_4M, CUBIC_8M};

    /// One look at `alpha`: Yuen's test and the rank-sum test, each at `alpha / 2`, so the
    /// two together call an A/A trial different at most at `alpha`. Yuen's verdict first (the
    /// two cannot disagree in direction on the same data but for a pathological spread).
    fn compare(a: &[f64], b: &[f64], alpha: f64, margin: f64) -> Verdict {
        match yuen_margin(a, b, alpha / 2.0, margin) {
            Verdict::NoDifference => rank_sum_margin(a, b, alpha / 2.0, margin),
            v => v,
        }
    }

    /// Welch's t test of `b` against `a` at two-sided level `alpha` (Yuen's with nothing
    /// trimmed; the search itself calls Yuen's through `compare_at`). With no spread in either
    /// arm (a deterministic path) any difference of the means counts.
    fn welch(a: &[f64], b: &[f64], alpha: f64) -> Verdict {
        welch_margin(a, b, alpha, 0.0)
    }

    /// Welch's t test where B is better only when it beats A by more than `margin` (a share of A's
    /// mean) with confidence, not merely by more than nothing: the lower end of the difference's
    /// confidence interval must clear the smallest gain worth keeping. A change that does nothing
    /// then needs both a fluke past the CI and one past the margin to be kept. Worse stays
    /// "significantly below A" (a rollback needs no margin).
    fn welch_margin(a: &[f64], b: &[f64], alpha: f64, margin: f64) -> Verdict {
        located(a, b, 0.0, alpha, margin)
    }

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
    fn trimmed_means_call_a_gain_that_one_collapse_in_b_hides_from_welch_and_the_ranks() {
        // Shaped as the long fat path's sender (Mbit/s): a 25 MB send buffer's tests at 263–285
        // with one in CUBIC's slow-start collapse at 135, against steadier, slower tests of the
        // old 4 MiB (values made up within those ranges), at the last of three looks.
        let a = [188.0, 192.0, 181.0, 196.0, 185.0];
        let b = [263.0, 285.0, 135.0, 278.0, 270.0];
        let alpha = 0.05 / 3.0;
        assert_eq!(
            welch_margin(&a, &b, alpha / 2.0, 0.02),
            Verdict::NoDifference
        );
        assert_eq!(
            rank_sum_margin(&a, &b, alpha / 2.0, 0.02),
            Verdict::NoDifference
        );
        assert_eq!(yuen_margin(&a, &b, alpha / 2.0, 0.02), Verdict::Better);
        assert_eq!(compare(&a, &b, alpha, 0.02), Verdict::Better);
        // Two collapses of five are not an outlier: the trimmed means keep one and the gain
        // is not shown.
        let b2 = [263.0, 285.0, 135.0, 278.0, 140.0];
        assert_eq!(compare(&a, &b2, alpha, 0.02), Verdict::NoDifference);
        // Below five tests an arm trims nothing: Yuen's test is Welch's.
        for n in 2..5 {
            assert_eq!(
                yuen_margin(&a[..n], &b[..n], alpha, 0.02),
                welch_margin(&a[..n], &b[..n], alpha, 0.02)
            );
        }
    }

    /// Draws `n` tests of an arm with no difference between arms: normal noise of `sd` around
    /// 100, each test collapsing to 30–70 with chance `collapse`.
    fn draws(rng: &mut tcptune_emu::Rng, n: usize, sd: f64, collapse: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                if rng.chance(collapse) {
                    30.0 + 40.0 * rng.uniform()
                } else {
                    100.0 * (1.0 + sd * rng.normal())
                }
            })
            .collect()
    }

    #[test]
    fn an_aa_trial_is_called_different_at_most_at_the_level_asked() {
        // 4,000 A/A trials of each noise (steady, noisy, and with the odd collapse in either
        // arm), judged as the search does (after 3, 4 and 5 pairs, each look at 5% over
        // three, and at the second chance's 7) and in one look at five pairs at 5%, where both
        // arms are trimmed.
        let mut rng = tcptune_emu::Rng::new(2026);
        let looks_of = Looks {
            first: 3,
            last: 5,
            extended: Some(7),
        };
        for (sd, collapse) in [(0.02, 0.0), (0.15, 0.0), (0.03, 0.15), (0.10, 0.3)] {
            let trials = 4_000;
            let (mut looks, mut once) = (0, 0);
            for _ in 0..trials {
                let (a, b) = (
                    draws(&mut rng, 7, sd, collapse),
                    draws(&mut rng, 7, sd, collapse),
                );
                let differs = |n: usize| {
                    compare_at(&a[..n], &b[..n], 0.05, looks_of, 0.02) != Verdict::NoDifference
                };
                looks += usize::from([3, 4, 5, 7].into_iter().any(differs));
                once += usize::from(compare(&a[..5], &b[..5], 0.05, 0.02) != Verdict::NoDifference);
            }
            let share = |c: usize| c as f64 / trials as f64;
            eprintln!(
                "sd {sd}, collapse {collapse}: {:.2}% called over the looks, {:.2}% in one",
                share(looks) * 100.0,
                share(once) * 100.0
            );
            assert!(
                share(looks) <= 0.05,
                "sd {sd}, collapse {collapse}: over the looks"
            );
            // 5% and the sampling error of 4,000 trials (0.35 points).
            assert!(
                share(once) <= 0.057,
                "sd {sd}, collapse {collapse}: in one look"
            );
        }
    }

    #[test]
    fn the_rank_sum_spends_its_level_only_at_the_looks_where_it_can_call_a_gain() {
        // 200 Mbit/s × 80 ms at 0.01% loss: CUBIC's five tests (A) against BBR's (B), one B
        // below one A raised by the 2% margin.
        let a = [125.0, 149.0, 54.0, 107.0, 132.0];
        let b = [152.0, 154.0, 159.0, 156.0, 148.0];
        assert_eq!(
            compare_at(&a, &b, 0.05, Looks::regular(3, 5), 0.02),
            Verdict::Better
        );
        // Spread evenly over the three looks it was undecided.
        assert_eq!(compare(&a, &b, 0.05 / 3.0, 0.02), Verdict::NoDifference);
        // At three and four pairs no ranking reaches the level, so those looks spend none.
        assert_eq!(rank_sum_looks(3..=5, 0.025), vec![5]);
        assert_eq!(
            compare_at(&a[..4], &b[..4], 0.05, Looks::regular(3, 5), 0.02),
            Verdict::NoDifference
        );
        // Two B below raised As does not put the gain's bound above 2% (4 in 252 on one
        // side, over 1 in 80); one below an A itself is still better, and the estimate of the
        // gain (+17%) clears 2%.
        let b2 = [152.0, 154.0, 159.0, 150.0, 148.0];
        assert_eq!(
            compare_at(&a, &b2, 0.05, Looks::regular(3, 5), 0.02),
            Verdict::BetterByEstimate
        );
        // Three below As is neither.
        let b3 = [152.0, 154.0, 159.0, 130.0, 148.0];
        assert_eq!(
            compare_at(&a, &b3, 0.05, Looks::regular(3, 5), 0.02),
            Verdict::NoDifference
        );
    }

    #[test]
    fn a_promising_trial_undecided_at_five_pairs_is_called_at_its_second_chance() {
        // 1 Gbit/s × 16 ms, CUBIC with a 4 MiB send buffer (A) against 8 MiB (B), as measured:
        // +9.2%, the one low B below three raised A; two more pairs from the same tests.
        let a = [879.8, 885.0, 879.6, 759.7, 731.2, 795.8, 870.2];
        let b = [910.4, 912.4, 878.8, 907.8, 905.6, 909.1, 904.0];
        let looks = Looks {
            first: 3,
            last: 5,
            extended: Some(7),
        };
        for n in 3..=5 {
            assert_eq!(
                compare_at(&a[..n], &b[..n], 0.05, looks, 0.02),
                Verdict::NoDifference,
                "{n} pairs"
            );
        }
        assert_eq!(compare_at(&a, &b, 0.05, looks, 0.02), Verdict::Better);
        // No look at six pairs, and none at seven without the second chance.
        assert_eq!(
            compare_at(&a[..6], &b[..6], 0.05, looks, 0.02),
            Verdict::NoDifference
        );
        assert_eq!(
            compare_at(&a, &b, 0.05, Looks::regular(3, 5), 0.02),
            Verdict::NoDifference
        );
        // A second low B (seven pairs inverted) is not enough.
        let mut b2 = b;
        b2[6] = 850.0;
        assert_eq!(
            compare_at(&a, &b2, 0.05, looks, 0.02),
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

    #[test]
    fn the_ranks_decide_better_and_the_means_decide_worth_keeping() {
        // 1 Gbit/s × 16 ms: CUBIC's bimodal tests (A) against BBR's (B), every B above every
        // A, +5.7% on the means; the highest A raised by 2% sits above two B.
        let raised: Vec<f64> = [882.0, 868.0, 878.0, 756.0, 879.0]
            .iter()
            .map(|x| x * 1.02)
            .collect();
        assert_eq!(
            rank_sum_greater(&raised, &[902.0, 898.0, 897.0, 901.0, 909.0]),
            Some(4.0 / 252.0)
        );
        let a = [882.0, 868.0, 878.0, 756.0, 879.0];
        let b = [902.0, 898.0, 897.0, 901.0, 909.0];
        assert!((shift(&a, &b) - 0.0306).abs() < 0.001, "{}", shift(&a, &b));
        assert_eq!(
            compare_at(&a, &b, 0.05, Looks::regular(3, 5), 0.02),
            Verdict::BetterByEstimate
        );
        // One B below one A is still better at 95% (2 in 252), and the means' gain clears 2%.
        let one_below = [902.0, 898.0, 880.0, 901.0, 909.0];
        assert!(mean_gain(&a, &one_below) >= 0.02);
        assert_eq!(
            compare_at(&a, &one_below, 0.05, Looks::regular(3, 5), 0.02),
            Verdict::BetterByEstimate
        );
        // BBR with a 6 MB send buffer against CUBIC with 4 MiB on that path, as measured
        // (+11.0% over seven pairs, undecided before this rule): kept at the fifth pair.
        let cubic = [776.9, 879.0, 805.0, 767.9, 739.2];
        let bbr = [885.7, 901.6, 890.7, 886.7, 872.1];
        assert_eq!(
            compare_at(&cubic, &bbr, 0.05, Looks::regular(3, 5), 0.02),
            Verdict::BetterByEstimate
        );
        // Two below As: not better at 95% (4 in 252).
        let two_below = [902.0, 898.0, 880.0, 870.0, 909.0];
        assert_eq!(
            compare_at(&a, &two_below, 0.05, Looks::regular(3, 5), 0.02),
            Verdict::NoDifference
        );
        // A steady B just above CUBIC's good tests: the medians' shift is +0.9%, but A's
        // collapse costs a transfer 3.9% on the means, and B ranks above every A: kept.
        let steady = [886.0, 885.0, 884.0, 887.0, 888.0];
        assert!(shift(&a, &steady) < 0.02 && mean_gain(&a, &steady) > 0.03);
        assert_eq!(
            compare_at(&a, &steady, 0.05, Looks::regular(3, 5), 0.02),
            Verdict::BetterByEstimate
        );
        // The same ranks without the collapse: +1.2% on the means, under the 2% worth keeping.
        let no_collapse = [882.0, 868.0, 878.0, 870.0, 879.0];
        assert!(mean_gain(&no_collapse, &steady) < 0.02);
        assert_eq!(
            compare_at(&no_collapse, &steady, 0.05, Looks::regular(3, 5), 0.02),
            Verdict::NoDifference
        );
        // The median of an even count of ratios is the middle two's mean.
        assert!((shift(&[100.0, 200.0], &[110.0]) - (0.1 + -0.45) / 2.0).abs() < 1e-12);
    }

    #[test]
    fn the_measured_tests_call_bbr_s_gain_mostly_and_no_difference_rarely() {
        // Trials resampled from the measured tests, judged at every look the search may take
        // (3, 4, 5 pairs, and 7 for a promising one): BBR with its buffer against CUBIC with
        // 4 MiB (+6% on the means, +2% on the medians), CUBIC with 8 MiB against 4 MiB (+5%,
        // both bimodal), and each CUBIC against itself.
        let mut rng = tcptune_emu::Rng::new(7);
        let looks = Looks {
            first: 3,
            last: 5,
            extended: Some(7),
        };
        let mut draw = |from: &[f64]| -> Vec<f64> {
            (0..7)
                .map(|_| from[rng.below(from.len() as u64) as usize])
                .collect()
        };
        let trials = 2_000;
        let called = |a: &[f64], b: &[f64], at: &[usize], what: fn(Verdict) -> bool| {
            at.iter()
                .any(|&n| what(compare_at(&a[..n], &b[..n], 0.05, looks, 0.02)))
        };
        let better = |v| matches!(v, Verdict::Better | Verdict::BetterByEstimate);
        let different = |v| v != Verdict::NoDifference;
        let all = [3, 4, 5, 7];
        let (mut bbr, mut bbr_by_five, mut buffer, mut aa) = (0, 0, 0, 0);
        for _ in 0..trials {
            let (a, a2) = (draw(&CUBIC_4M), draw(&CUBIC_4M));
            let (b, b8, b8_2) = (draw(&BBR_6M), draw(&CUBIC_8M), draw(&CUBIC_8M));
            bbr += usize::from(called(&a, &b, &all, better));
            bbr_by_five += usize::from(called(&a, &b, &[3, 4, 5], better));
            buffer += usize::from(called(&a, &b8, &all, better));
            aa += usize::from(called(&a, &a2, &all, different));
            aa += usize::from(called(&b8, &b8_2, &all, different));
        }
        let share = |c: usize| c as f64 / trials as f64;
        eprintln!(
            "BBR's gain called: {:.1}% by five pairs, {:.1}% by seven; 8 MiB's: {:.1}%; A/A \
             called different: {:.1}%",
            share(bbr_by_five) * 100.0,
            share(bbr) * 100.0,
            share(buffer) * 100.0,
            share(aa) / 2.0 * 100.0
        );
        assert!(share(bbr) >= 0.6, "{}", share(bbr));
        assert!(share(bbr) > share(bbr_by_five) + 0.05);
        assert!(share(aa) / 2.0 <= 0.05, "{}", share(aa) / 2.0);
    }
}
