//! Summary statistics of repeated trials, as seed 001's tables report them: n, mean, standard
//! deviation, the 95% confidence interval of the mean (Student t with n−1 degrees of freedom),
//! median, min and max; Fieller's interval for the ratio of two such means; and the
//! Wilcoxon–Mann–Whitney rank-sum test, which needs no normal noise (a path whose tests are
//! mostly steady with the odd collapse is not normal); and the trimmed mean with the standard
//! error Yuen's test gives it, a t statistic that one collapse does not swamp.

use schemars::JsonSchema;
use serde::Serialize;

/// Statistics of one sample. `sd` and the interval are absent for n < 2.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Arithmetic mean, in the values' unit.
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator).
    pub sd: Option<f64>,
    /// 95% confidence interval of the mean, low end.
    pub ci95_low: Option<f64>,
    /// 95% confidence interval of the mean, high end.
    pub ci95_high: Option<f64>,
    /// Median (the mean of the middle two for an even n).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

/// Summarizes `values`, ignoring NaNs; `None` when nothing is left.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let (sd, lo, hi) = if n >= 2 {
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let sd = var.sqrt();
        let half = t_quantile(0.975, (n - 1) as f64) * sd / (n as f64).sqrt();
        (Some(sd), Some(mean - half), Some(mean + half))
    } else {
        (None, None, None)
    };
    Some(Summary {
        n,
        mean,
        sd,
        ci95_low: lo,
        ci95_high: hi,
        median,
        min: v[0],
        max: v[n - 1],
    })
}

/// Where a sample lies for a t test: an estimate of its centre, that estimate's squared
/// standard error and the degrees of freedom of the error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Location {
    /// The centre: the mean, or the trimmed mean.
    pub estimate: f64,
    /// Squared standard error of `estimate`.
    pub se2: f64,
    /// Degrees of freedom of `se2`.
    pub df: f64,
}

/// The `share`-trimmed mean of `values` (the smallest and the largest `floor(share·n)` left
/// out) with Yuen's (1974) standard error: the winsorized variance (the left-out values set to
/// the nearest kept one) times (n − 1) / (h (h − 1)), h the values kept, on h − 1 degrees of
/// freedom. Where nothing is trimmed (n < 1/share) this is the mean with s²/n on n − 1: Welch's.
/// One test of five that collapsed moves the plain mean and its error a long way, the trimmed
/// ones hardly. `None` with fewer than two values kept or a NaN.
pub fn trimmed_location(values: &[f64], share: f64) -> Option<Location> {
    if values.iter().any(|x| x.is_nan()) || !(0.0..0.5).contains(&share) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let g = (share * n as f64).floor() as usize;
    let h = n.saturating_sub(2 * g);
    if h < 2 {
        return None;
    }
    let estimate = v[g..n - g].iter().sum::<f64>() / h as f64;
    let winsorized = |i: usize| v[i.clamp(g, n - g - 1)];
    let wmean = (0..n).map(winsorized).sum::<f64>() / n as f64;
    let wvar = (0..n).map(|i| (winsorized(i) - wmean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some(Location {
        estimate,
        se2: (n - 1) as f64 * wvar / (h * (h - 1)) as f64,
        df: (h - 1) as f64,
    })
}

/// A sample's mean, standard deviation and size: what a ratio of means needs of each side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanSd {
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator).
    pub sd: f64,
    /// Number of values.
    pub n: usize,
}

/// A 95% confidence interval for a ratio of two means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RatioInterval {
    /// The ratio lies in [low, high] with 95% confidence.
    Bounded {
        /// Lower end of the interval.
        low: f64,
        /// Upper end of the interval.
        high: f64,
    },
    /// The denominator's mean is not clear of zero at this confidence (its interval reaches 0),
    /// so the ratio's confidence set is unbounded: the data cannot bound the ratio.
    Unbounded,
}

/// Fieller's 95% confidence interval for `num.mean / den.mean`, the two samples independent
/// with variances of their own: the θ for which `num.mean − θ·den.mean` is within t standard
/// errors of 0, t at the Welch–Satterthwaite degrees of freedom of that difference at the
/// estimate (as Tamhane & Logan 2004 and the R package mratios' `ttestratio` do). Unlike the
/// extremes of the two means' intervals, this covers the ratio 95% of the time. `None` when a
/// side has fewer than two values (no standard deviation) or the estimate is not finite.
pub fn fieller(num: MeanSd, den: MeanSd) -> Option<RatioInterval> {
    if num.n < 2 || den.n < 2 || den.mean == 0.0 {
        return None;
    }
    let (a, b) = (den.mean, num.mean);
    let (va, vb) = (den.sd.powi(2) / den.n as f64, num.sd.powi(2) / num.n as f64);
    let ratio = b / a;
    // Welch–Satterthwaite for the variance of b − θa at θ = the estimate.
    let v = vb + ratio.powi(2) * va;
    let denom = vb.powi(2) / (num.n - 1) as f64 + ratio.powi(4) * va.powi(2) / (den.n - 1) as f64;
    let df = if denom > 0.0 {
        v.powi(2) / denom
    } else {
        (num.n + den.n - 2) as f64
    };
    let t = t_quantile(0.975, df);
    let g = t * t * va / (a * a);
    if !ratio.is_finite() || !g.is_finite() {
        return None;
    }
    if g >= 1.0 {
        return Some(RatioInterval::Unbounded);
    }
    let half = t / a.abs() * (vb * (1.0 - g) + ratio.powi(2) * va).sqrt();
    let (lo, hi) = ((ratio - half) / (1.0 - g), (ratio + half) / (1.0 - g));
    Some(RatioInterval::Bounded {
        low: lo.min(hi),
        high: lo.max(hi),
    })
}

/// One-sided p-value of the rank-sum test that `b`'s values tend to be larger than `a`'s: the
/// chance, with no difference, of a Mann–Whitney U (pairs with b above a, ties counting a half)
/// at least as large as the one seen. Exact (counted over every ranking) up to 30 values per
/// sample, the normal approximation with continuity correction beyond; a tie is rounded
/// towards the larger p. `None` when either sample is empty.
pub fn rank_sum_greater(a: &[f64], b: &[f64]) -> Option<f64> {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return None;
    }
    let mut twice_u = 0u64;
    for x in a {
        for y in b {
            twice_u += match y.partial_cmp(x) {
                Some(std::cmp::Ordering::Greater) => 2,
                Some(std::cmp::Ordering::Equal) => 1,
                _ => 0,
            };
        }
    }
    let u = twice_u / 2; // a half from ties rounds down: P(U ≥ u) only grows
    if m > EXACT_MAX || n > EXACT_MAX {
        let (mf, nf) = (m as f64, n as f64);
        let mean = mf * nf / 2.0;
        let sd = (mf * nf * (mf + nf + 1.0) / 12.0).sqrt();
        let z = (u as f64 - 0.5 - mean) / sd;
        return Some(1.0 - normal_cdf(z));
    }
    let counts = u_counts(m, n);
    let total: f64 = counts.iter().sum();
    let tail: f64 = counts.iter().skip(u as usize).sum();
    Some(tail / total)
}

/// Largest sample the rank-sum test counts exactly.
const EXACT_MAX: usize = 30;

/// The largest p-value at most `level` that [`rank_sum_greater`] can give for samples of `m`
/// and `n` distinct values (0 when none can): what a test at `level` spends of it. The exact
/// test's p-values are steps (with 5 against 5: 1/252, 2/252, 4/252, …), so a test at 1.25%
/// rejects at 2/252 = 0.79% and leaves the rest of its level unspent, for a later look.
/// Beyond the exact counts, `level` itself.
pub fn rank_sum_attainable(m: usize, n: usize, level: f64) -> f64 {
    if m == 0 || n == 0 || level <= 0.0 {
        return 0.0;
    }
    if m > EXACT_MAX || n > EXACT_MAX {
        return level;
    }
    let counts = u_counts(m, n);
    let total: f64 = counts.iter().sum();
    let mut tail = 0.0;
    let mut attained = 0.0;
    for c in counts.iter().rev() {
        tail += c;
        if tail / total > level {
            break;
        }
        attained = tail / total;
    }
    attained
}

/// How many rankings of `m` values against `n` give each U (index), by the recurrence of the
/// largest value: it belongs to the second sample (adding `m` to U) or to the first.
fn u_counts(m: usize, n: usize) -> Vec<f64> {
    // table[i][j]: the counts for samples of i and j values.
    let mut table: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n + 1]; m + 1];
    for i in 0..=m {
        for j in 0..=n {
            table[i][j] = if i == 0 || j == 0 {
                vec![1.0]
            } else {
                let mut c = vec![0.0; i * j + 1];
                for (u, v) in table[i][j - 1].iter().enumerate() {
                    c[u + i] += v;
                }
                for (u, v) in table[i - 1][j].iter().enumerate() {
                    c[u] += v;
                }
                c
            };
        }
    }
    std::mem::take(&mut table[m][n])
}

/// The standard normal CDF (Abramowitz and Stegun 7.1.26 for erf, error below 1.5e-7).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// The `p` quantile of Student's t distribution with `df` degrees of freedom (p in (0.5, 1)),
/// found by bisection on the CDF, which is computed from the regularized incomplete beta.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1e3f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// CDF of Student's t at `t ≥ 0`: 1 − ½·I_{df/(df+t²)}(df/2, ½).
fn t_cdf(t: f64, df: f64) -> f64 {
    1.0 - 0.5 * inc_beta(df / (df + t * t), df / 2.0, 0.5)
}

/// Regularized incomplete beta I_x(a, b) by its continued fraction (Lentz's method).
fn inc_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    // Use the symmetry I_x(a,b) = 1 − I_{1−x}(b,a) where the fraction converges faster.
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - inc_beta(1.0 - x, b, a);
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp() / a;
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    d = if d.abs() < tiny { tiny } else { d };
    d = 1.0 / d;
    let mut f = d;
    for m in 1..300 {
        let m = m as f64;
        for num in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            d = if d.abs() < tiny { tiny } else { d };
            c = 1.0 + num / c;
            c = if c.abs() < tiny { tiny } else { c };
            d = 1.0 / d;
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f
}

/// ln Γ(x) for x > 0 (Lanczos approximation, g = 7).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimmed_location_is_welchs_without_trimming_and_yuens_with_it() {
        // Four values at 20%: nothing trimmed, the mean with s²/n on 3 degrees of freedom.
        let plain = trimmed_location(&[1.0, 2.0, 3.0, 6.0], 0.2).unwrap();
        assert_eq!(plain.estimate, 3.0);
        assert!((plain.se2 - (14.0 / 3.0) / 4.0).abs() < 1e-12);
        assert_eq!(plain.df, 3.0);
        // Five: one trimmed at each end. Kept 263, 270, 278; winsorized 263, 263, 270, 278,
        // 278 (mean 270.4, squares summing to 225.2), so se² = 4 · 56.3 / 6.
        let yuen = trimmed_location(&[278.0, 135.0, 270.0, 285.0, 263.0], 0.2).unwrap();
        assert!((yuen.estimate - 811.0 / 3.0).abs() < 1e-9);
        assert!(
            (yuen.se2 - 4.0 * (225.2 / 4.0) / 6.0).abs() < 1e-9,
            "{}",
            yuen.se2
        );
        assert_eq!(yuen.df, 2.0);
        // Too few kept, a NaN, a share that trims everything.
        assert_eq!(trimmed_location(&[1.0], 0.2), None);
        assert_eq!(trimmed_location(&[1.0, f64::NAN, 2.0], 0.2), None);
        assert_eq!(trimmed_location(&[1.0, 2.0, 3.0], 0.5), None);
    }

    #[test]
    fn rank_sum_p_values_match_the_exact_tables() {
        // Five against five, completely separated: 1 of C(10,5) = 252 rankings.
        let a = [41.0, 26.0, 9.0, 24.0, 23.0];
        let b = [46.0, 45.0, 46.0, 45.0, 45.5];
        let p = rank_sum_greater(&a, &b).unwrap();
        assert!((p - 1.0 / 252.0).abs() < 1e-12, "{p}");
        // The other way round every ranking is at least as extreme.
        assert!((rank_sum_greater(&b, &a).unwrap() - 1.0).abs() < 1e-12);
        // Three against three with U = 7 of 9: of the 20 rankings, 2 give U = 7, 1 gives 8
        // and 1 gives 9 (the counts by U are 1 1 2 3 3 3 3 2 1 1).
        let p = rank_sum_greater(&[1.0, 3.0, 4.0], &[2.0, 5.0, 6.0]).unwrap();
        assert!((p - 0.2).abs() < 1e-12, "{p}");
        assert_eq!(
            u_counts(3, 3),
            vec![1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 2.0, 1.0, 1.0]
        );
        // Identical samples (every pair a tie): U = m·n/2, p above one half.
        let p = rank_sum_greater(&[5.0; 4], &[5.0; 4]).unwrap();
        assert!(p > 0.5 && p <= 1.0, "{p}");
        assert_eq!(rank_sum_greater(&[], &[1.0]), None);
        // The counts of every size sum to the number of rankings, C(m+n, m).
        let c = u_counts(4, 6);
        assert_eq!(c.iter().sum::<f64>(), 210.0);
        assert_eq!(c.len(), 25);
    }

    #[test]
    fn the_attainable_level_is_the_largest_step_of_the_exact_test_within_it() {
        // 5 against 5 at 1.25%: U of 25 or 24 (2 of 252 rankings); U of 23 adds 2 more.
        let p = rank_sum_attainable(5, 5, 0.0125);
        assert!((p - 2.0 / 252.0).abs() < 1e-12, "{p}");
        // 7 against 7 at what that leaves: U ≥ 45 of 49 (12 of 3432 rankings; 1 1 2 3 5
        // with 0–4 pairs inverted); U ≥ 44 would be 19 of 3432, 0.55%.
        let p = rank_sum_attainable(7, 7, 0.0125 - 2.0 / 252.0);
        assert!((p - 12.0 / 3432.0).abs() < 1e-12, "{p}");
        // Below the smallest step nothing is spent, and the test it bounds can reject
        // exactly there.
        assert_eq!(rank_sum_attainable(3, 3, 0.04), 0.0);
        let b = [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 7.5];
        let a = [1.0, 2.0, 3.0, 4.0, 7.6, 7.7, 7.8];
        let p = rank_sum_greater(&a, &b).unwrap();
        assert!(p <= rank_sum_attainable(7, 7, 0.0046), "3 inverted: {p}");
        assert_eq!(rank_sum_attainable(40, 40, 0.01), 0.01);
    }

    #[test]
    fn rank_sum_normal_approximation_agrees_with_the_exact_count_near_the_switch() {
        // 31 against 31 with b shifted: the approximation is used; compare with 30 against 30
        // counted exactly on the same pattern.
        let shifted = |k: usize| -> (Vec<f64>, Vec<f64>) {
            let a: Vec<f64> = (0..k).map(|i| i as f64).collect();
            let b: Vec<f64> = (0..k).map(|i| i as f64 + k as f64 * 0.3).collect();
            (a, b)
        };
        let (a, b) = shifted(30);
        let exact = rank_sum_greater(&a, &b).unwrap();
        let (a, b) = shifted(31);
        let approx = rank_sum_greater(&a, &b).unwrap();
        assert!(exact > 0.0 && exact < 0.05, "{exact}");
        assert!((approx / exact - 1.0).abs() < 0.5, "{approx} vs {exact}");
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(-1.0) - 0.158_655_25).abs() < 1e-6);
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        // Two-sided 95%: df 1 → 12.706, 9 → 2.262, 30 → 2.042, 599 → 1.964, ∞ → 1.960.
        for (df, want) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (9.0, 2.262),
            (30.0, 2.042),
            (599.0, 1.964),
            (1e6, 1.960),
        ] {
            let got = t_quantile(0.975, df);
            assert!((got - want).abs() < 1e-3, "df {df}: {got} vs {want}");
        }
    }

    #[test]
    fn summary_of_a_known_sample() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.min, s.max),
            (8, 5.0, 4.5, 2.0, 9.0)
        );
        let sd = s.sd.unwrap();
        assert!((sd - 2.138_089_935).abs() < 1e-6, "{sd}");
        // mean ± t(0.975, 7) · sd/√8 with t = 2.364624.
        let half = 2.364_624 * sd / 8f64.sqrt();
        assert!((s.ci95_low.unwrap() - (5.0 - half)).abs() < 1e-4);
        assert!((s.ci95_high.unwrap() - (5.0 + half)).abs() < 1e-4);
    }

    #[test]
    fn fiellers_interval_of_known_cases() {
        // b: mean 20, SD 1, n 4 (SE² 0.25); a: mean 40, SD 2, n 4 (SE² 1). Estimate 0.5;
        // Welch df at it: (0.25 + 0.25)² / (0.25²/3 + 0.5⁴·1/3) = 0.25 / (0.0417) = 6,
        // t(0.975, 6) = 2.446912, g = t²·1/1600 = 0.003742; half = t/40 · √(0.25·(1 − g)
        // + 0.25) = 0.061173 · 0.706446 = 0.043215; bounds (0.5 ∓ 0.043215) / 0.996258:
        // 0.458501 and 0.545256 (python3: these formulas, and the roots of the quadratic
        // θ²(a² − t²SEa²) − 2θab + b² − t²SEb² = 0, agree).
        let b = MeanSd {
            mean: 20.0,
            sd: 1.0,
            n: 4,
        };
        let a = MeanSd {
            mean: 40.0,
            sd: 2.0,
            n: 4,
        };
        let Some(RatioInterval::Bounded { low, high }) = fieller(b, a) else {
            panic!("bounded")
        };
        assert!((low - 0.458_501).abs() < 1e-5, "{low}");
        assert!((high - 0.545_256).abs() < 1e-5, "{high}");
        // Asymmetric about the estimate, wider above: the ratio's skew.
        assert!(high - 0.5 > 0.5 - low);
        // A base whose mean is within t standard errors of 0: unbounded.
        let loose = MeanSd {
            mean: 2.0,
            sd: 2.0,
            n: 3,
        };
        assert_eq!(fieller(b, loose), Some(RatioInterval::Unbounded));
        // No interval from a single value.
        assert_eq!(fieller(b, MeanSd { n: 1, ..a }), None);
        // No spread at all: the interval is the estimate.
        let exact = MeanSd { sd: 0.0, ..a };
        assert_eq!(
            fieller(MeanSd { sd: 0.0, ..b }, exact),
            Some(RatioInterval::Bounded {
                low: 0.5,
                high: 0.5
            })
        );
    }

    #[test]
    fn small_and_empty_samples() {
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::NAN]).is_none());
        let one = summarize(&[3.0]).unwrap();
        assert_eq!((one.n, one.mean, one.sd), (1, 3.0, None));
    }

    proptest::proptest! {
        #[test]
        fn the_interval_contains_the_mean_and_the_median_lies_within_range(
            v in proptest::collection::vec(-1e6f64..1e6, 2..50)
        ) {
            let s = summarize(&v).unwrap();
            proptest::prop_assert!(s.ci95_low.unwrap() <= s.mean && s.mean <= s.ci95_high.unwrap());
            proptest::prop_assert!(s.min <= s.median && s.median <= s.max);
        }
    }
}
