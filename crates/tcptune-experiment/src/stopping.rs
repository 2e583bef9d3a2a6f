//! `repetitions = "auto"`: as many trials per point as its answer needs. A point takes trials
//! until the 95% confidence interval of its mean goodput (Student t, as the report computes
//! it) is within a precision of the mean — after a minimum number of trials, and at most a
//! maximum. The plan runs in rounds over the points still open ([`crate::plan`]); the rule
//! itself ([`decide`]) is a function of a point's recorded values only, so a resumed run
//! re-derives which points are still open from `trials.jsonl` ([`crate::schedule`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_report::stats::summarize;

/// The precision when a spec asks for "auto" without one: ±5% of the mean.
pub const DEFAULT_PRECISION: f64 = 0.05;
/// Trials every point takes at least, by default (the fewest whose t interval is not absurdly
/// wide: with 2, t is 12.7).
pub const DEFAULT_MIN: u32 = 3;
/// Trials a point takes at most, by default.
pub const DEFAULT_MAX: u32 = 20;
/// The most trials per point a spec may ask for.
pub const MAX_REPETITIONS: u32 = 1000;

/// The spec's keys that go with `repetitions = "auto"`.
pub const SPEC_KEYS: [&str; 3] = ["precision", "min_repetitions", "max_repetitions"];

/// The stopping rule of `repetitions = "auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Auto {
    /// The widest 95% CI half-width accepted, as a fraction of the mean (0.05: ±5%).
    pub precision: f64,
    /// Measured trials every point takes at least.
    pub min: u32,
    /// Measured trials a point takes at most, precise or not.
    pub max: u32,
}

impl Auto {
    /// The rule in a sentence, as the report names it.
    pub fn describe(&self) -> String {
        format!(
            "repetitions \"auto\": trials per point until the 95% CI half-width of its mean goodput (Student t) is within {} of the mean, at least {} and at most {} measured trials, in rounds over the points still open (each round in a seeded random order)",
            percent(self.precision),
            self.min,
            self.max
        )
    }
}

/// 0.05 as "5%", 0.025 as "2.5%".
pub fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}%")
    } else {
        format!("{}%", (p * 1000.0).round() / 1000.0)
    }
}

/// A precision as a spec or `--precision` gives it: a fraction ("0.05") or a percentage
/// ("5%"), above 0 and below 1.
pub fn parse_precision(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let value = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => t.parse::<f64>(),
    };
    match value {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err(format!(
            "precision '{t}' must be a fraction of the mean above 0 and below 1, e.g. 0.05 or \"5%\""
        )),
    }
}

/// What the rule says after a point's measured values so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Another trial: under the minimum, or the interval still too wide.
    Continue,
    /// The interval is within the precision (and the minimum is reached).
    Precise,
    /// The maximum is reached without the precision.
    Maximum,
}

/// The stopping rule on a point's measured goodputs (failed trials add none).
pub fn decide(values: &[f64], rule: &Auto) -> Decision {
    let n = values.len();
    if n >= rule.min.max(2) as usize {
        if let Some(s) = summarize(values) {
            if let (Some(lo), Some(hi)) = (s.ci95_low, s.ci95_high) {
                if (hi - lo) / 2.0 <= rule.precision * s.mean.abs() {
                    return Decision::Precise;
                }
            }
        }
    }
    if n >= rule.max as usize {
        Decision::Maximum
    } else {
        Decision::Continue
    }
}

/// Why a point's trials stopped, as the report and summary say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Its interval reached the precision.
    Precise,
    /// It took the maximum without (or its rounds ran out, trials having failed).
    Maximum,
    /// The run has not finished it (interrupted; rerun the same command to resume).
    Unfinished,
}

impl Stop {
    /// As JSON and `summary.csv` name it.
    pub fn key(self) -> &'static str {
        match self {
            Stop::Precise => "precise",
            Stop::Maximum => "maximum",
            Stop::Unfinished => "unfinished",
        }
    }

    /// As the report's tables say it.
    pub fn text(self) -> &'static str {
        match self {
            Stop::Precise => "precise",
            Stop::Maximum => "at the maximum",
            Stop::Unfinished => "unfinished",
        }
    }
}

/// Why a point stopped: its values under the rule, and whether the plan still has rounds of
/// it that were never recorded.
pub fn status(values: &[f64], rule: &Auto, rounds_left: bool) -> Stop {
    match decide(values, rule) {
        Decision::Precise => Stop::Precise,
        Decision::Maximum => Stop::Maximum,
        Decision::Continue if rounds_left => Stop::Unfinished,
        Decision::Continue => Stop::Maximum,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Auto = Auto {
        precision: 0.05,
        min: 3,
        max: 6,
    };

    // Recorded goodputs (Mbit/s) of fixtures/experiment/seed000-wmem/trials.jsonl, r01 to r03:
    // p000 (64 KiB send buffer, steady) and p004 (a 16 MiB one on the 10 Gbit/s path, noisy).
    const P000: [f64; 3] = [31.111_459, 31.981_137, 30.703_141];
    const P004: [f64; 3] = [907.072_646, 607.069_292, 417.650_113];

    #[test]
    fn a_steady_point_stops_at_the_minimum() {
        // p000: mean 31.265, SD 0.653, half-width t(0.975, 2) · 0.653 / √3 = 4.3027 · 0.377
        // = 1.621: 5.19% of the mean (python3: statistics.stdev, t from a table).
        assert_eq!(
            decide(&P000[..2], &RULE),
            Decision::Continue,
            "under the minimum"
        );
        assert_eq!(decide(&P000, &RULE), Decision::Continue, "5.19% > 5%");
        let six = Auto {
            precision: 0.06,
            ..RULE
        };
        assert_eq!(decide(&P000, &six), Decision::Precise, "5.19% <= 6%");
        assert_eq!(status(&P000, &six, true), Stop::Precise);
    }

    #[test]
    fn a_noisy_point_goes_on_until_precise_or_the_maximum() {
        // p004: mean 643.93, SD 246.79, half-width 4.3027 · 246.79 / √3 = 613.05: 95% of the
        // mean, far from 5%.
        assert_eq!(decide(&P004, &RULE), Decision::Continue);
        let three = Auto { max: 3, ..RULE };
        assert_eq!(decide(&P004, &three), Decision::Maximum);
        // 10, 12, 11 twice: SD 0.894, half-width t(0.975, 5) · 0.894 / √6 = 2.5706 · 0.365
        // = 0.938, 8.5% of 11: the maximum of 6 is reached without the precision.
        let v = [10.0, 12.0, 11.0, 10.0, 12.0, 11.0];
        assert_eq!(decide(&v[..3], &RULE), Decision::Continue);
        assert_eq!(decide(&v, &RULE), Decision::Maximum);
        let nine = Auto {
            precision: 0.09,
            ..RULE
        };
        assert_eq!(decide(&v, &nine), Decision::Precise, "8.5% <= 9%");
        assert_eq!(status(&v, &RULE, false), Stop::Maximum);
        // One under the maximum, with rounds left: unfinished; without (failed trials): at
        // the maximum, since no round is left to take.
        assert_eq!(status(&v[..5], &RULE, true), Stop::Unfinished);
        assert_eq!(status(&v[..5], &RULE, false), Stop::Maximum);
    }

    #[test]
    fn a_point_that_never_moves_is_precise() {
        // A point that transferred nothing: mean 0, SD 0, half-width 0 ≤ 5% of 0.
        assert_eq!(decide(&[0.0, 0.0, 0.0], &RULE), Decision::Precise);
        // Zero mean with spread never meets a relative precision.
        assert_eq!(
            decide(&[-1.0, 1.0, 0.0, -1.0, 1.0, 0.0], &RULE),
            Decision::Maximum
        );
    }

    #[test]
    fn precisions_as_fractions_or_percentages() {
        assert_eq!(parse_precision("0.05"), Ok(0.05));
        assert_eq!(parse_precision("5%"), Ok(0.05));
        assert_eq!(parse_precision(" 2.5 % "), Ok(0.025));
        for bad in ["0", "1", "150%", "-0.1", "five", "", "NaN", "inf"] {
            let e = parse_precision(bad).unwrap_err();
            assert!(e.contains("above 0 and below 1"), "{bad}: {e}");
        }
        assert_eq!(percent(0.05), "5%");
        assert_eq!(percent(0.025), "2.5%");
        assert!(RULE.describe().contains("within 5% of the mean"));
    }
}
