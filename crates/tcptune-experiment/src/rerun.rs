//! A rerun against an earlier run of the same spec: each sweep point's mean goodput and 95%
//! confidence interval beside the earlier run's, and whether the two intervals overlap. This
//! is how a committed result is checked ("does this machine, this binary, today, give what the
//! repository says?") and how a change is checked for a regression, without reading two
//! reports side by side.
//!
//! Agreement is the overlap of the two 95% intervals: conservative (two means can differ
//! significantly while their intervals still overlap a little), but it needs nothing beyond
//! what `summary.csv` holds, and a non-overlap is a difference no rerun noise explains. Points
//! whose trials hardly vary (a path at its capacity: intervals a few kbit/s wide) can fail to
//! overlap by a fraction of a percent; a tolerance (1% by default) on the ratio of the means
//! keeps those apart from real differences, and they are listed as such, not as agreeing. A
//! point measured by fewer than two trials in either run has no interval: it is listed as one
//! that cannot be told, not counted as agreeing.

use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_model::units::fmt_sig;

use crate::compare::{read_summary_columns, Row};

/// One run's goodput at a point.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PointGoodput {
    /// Trials measured.
    pub n: usize,
    /// Mean goodput, bits/s.
    pub mean_bps: f64,
    /// The 95% confidence interval of the mean (absent with fewer than two trials).
    pub ci95_bps: Option<(f64, f64)>,
}

/// How a point of the rerun compares with the earlier run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Agreement {
    /// The two 95% intervals overlap.
    Agree,
    /// They do not, but the means are within the tolerance of each other.
    WithinTolerance,
    /// They do not, and the means differ by more than the tolerance: the rerun measured
    /// something else.
    Differ,
    /// One run has fewer than two trials of the point: no interval to compare.
    NoInterval,
    /// The point was measured in this run only (or the earlier run's trials of it all failed).
    OnlyHere,
    /// The point was measured in the earlier run only.
    OnlyEarlier,
}

impl Agreement {
    fn text(self) -> &'static str {
        match self {
            Agreement::Agree => "agree",
            Agreement::WithinTolerance => "within tolerance (intervals apart)",
            Agreement::Differ => "DIFFER",
            Agreement::NoInterval => "cannot tell (under 2 trials)",
            Agreement::OnlyHere => "only in this run",
            Agreement::OnlyEarlier => "only in the earlier run",
        }
    }
}

/// One sweep point in both runs.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RerunPoint {
    /// The point's swept values, in the order of [`Rerun::columns`].
    pub values: Vec<String>,
    /// The point in this run; `None` when it was not measured here.
    pub this_run: Option<PointGoodput>,
    /// The point in the earlier run; `None` when it was not measured there.
    pub earlier: Option<PointGoodput>,
    /// This run's mean ÷ the earlier run's.
    pub ratio: Option<f64>,
    /// How the two compare.
    pub agreement: Agreement,
}

// What `tcptune report DIR --against EARLIER` prints; its doc line is its JSON Schema's
// description (schema/report-against.json).
/// A rerun's sweep points against an earlier run's, by the overlap of their 95% intervals.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Rerun {
    /// The two summaries compared.
    pub this_run: String,
    /// The earlier run's summary.
    pub earlier: String,
    /// The swept settings, as summary.csv names them.
    pub columns: Vec<String>,
    /// The relative difference of two means that still counts as the same when their
    /// intervals do not overlap.
    pub tolerance: f64,
    /// Each point of either run.
    pub points: Vec<RerunPoint>,
    /// Points whose intervals overlap.
    pub agree: usize,
    /// Points whose intervals are apart but whose means are within the tolerance.
    pub within_tolerance: usize,
    /// Points that differ by more than the tolerance.
    pub differ: usize,
    /// Points without an interval in one run, or measured in one run only.
    pub cannot_tell: usize,
}

impl Rerun {
    /// Whether the rerun found a difference or a point the other run lacks: what a script
    /// checking a committed result should fail on.
    pub fn found_difference(&self) -> bool {
        self.points.iter().any(|p| {
            matches!(
                p.agreement,
                Agreement::Differ | Agreement::OnlyHere | Agreement::OnlyEarlier
            )
        })
    }
}

fn goodput(r: &Row) -> PointGoodput {
    PointGoodput {
        n: r.n,
        mean_bps: r.mean,
        ci95_bps: r.ci.filter(|_| r.n >= 2),
    }
}

/// Compares two `summary.csv` texts (this run's, then the earlier one's), named for the output,
/// with a tolerance on the ratio of means (0.01: 1%).
pub fn compare(
    this_run: (&str, &str),
    earlier: (&str, &str),
    tolerance: f64,
) -> Result<Rerun, RerunError> {
    let read = |(name, text): (&str, &str)| {
        read_summary_columns(text).map_err(|why| RerunError::Summary {
            path: name.to_string(),
            why,
        })
    };
    let (columns, ours) = read(this_run)?;
    let (their_columns, theirs) = read(earlier)?;
    if columns != their_columns {
        return Err(RerunError::Columns {
            this_run: columns.join(", "),
            earlier: their_columns.join(", "),
        });
    }
    let measured = |rows: &[Row], values: &[String]| {
        rows.iter()
            .find(|r| r.values == values && r.n > 0)
            .map(goodput)
    };
    let mut points = Vec::new();
    let mut seen = Vec::new();
    for r in ours.iter().chain(&theirs) {
        if seen.contains(&&r.values) {
            continue;
        }
        seen.push(&r.values);
        let (a, b) = (measured(&ours, &r.values), measured(&theirs, &r.values));
        let agreement = match (&a, &b) {
            (Some(a), Some(b)) => match (a.ci95_bps, b.ci95_bps) {
                (Some((alo, ahi)), Some((blo, bhi))) => {
                    if alo <= bhi && blo <= ahi {
                        Agreement::Agree
                    } else if (a.mean_bps - b.mean_bps).abs() <= tolerance * b.mean_bps {
                        Agreement::WithinTolerance
                    } else {
                        Agreement::Differ
                    }
                }
                _ => Agreement::NoInterval,
            },
            (Some(_), None) => Agreement::OnlyHere,
            (None, Some(_)) => Agreement::OnlyEarlier,
            // Neither run measured the point (every trial failed in both): nothing to say
            // here; each run's report gives the failures' causes.
            (None, None) => continue,
        };
        let ratio = a
            .as_ref()
            .zip(b.as_ref())
            .filter(|(_, b)| b.mean_bps > 0.0)
            .map(|(a, b)| a.mean_bps / b.mean_bps);
        points.push(RerunPoint {
            values: r.values.clone(),
            this_run: a,
            earlier: b,
            ratio,
            agreement,
        });
    }
    let count = |f: &dyn Fn(Agreement) -> bool| points.iter().filter(|p| f(p.agreement)).count();
    Ok(Rerun {
        this_run: this_run.0.to_string(),
        earlier: earlier.0.to_string(),
        columns,
        tolerance,
        agree: count(&|a| a == Agreement::Agree),
        within_tolerance: count(&|a| a == Agreement::WithinTolerance),
        differ: count(&|a| a == Agreement::Differ),
        cannot_tell: count(&|a| {
            matches!(
                a,
                Agreement::NoInterval | Agreement::OnlyHere | Agreement::OnlyEarlier
            )
        }),
        points,
    })
}

/// Why two runs could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum RerunError {
    /// A summary that cannot be read.
    #[error("{path}: {why}")]
    Summary {
        /// The file as given.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// The runs sweep different settings.
    #[error(
        "the two runs sweep different settings (this run: {this_run}; the earlier one: \
         {earlier}): compare runs of the same spec"
    )]
    Columns {
        /// This run's swept settings.
        this_run: String,
        /// The earlier run's swept settings.
        earlier: String,
    },
}

/// Mbit/s to four significant digits: a 1.3 Mbit/s path's difference of 0.5% shows.
fn mbps(g: &Option<PointGoodput>) -> String {
    let m = |bps: f64| fmt_sig(bps / 1e6, 4);
    match g {
        None => "—".into(),
        Some(g) => {
            let ci = g
                .ci95_bps
                .map(|(lo, hi)| format!(" ({} – {})", m(lo.max(0.0)), m(hi)))
                .unwrap_or_default();
            format!("{}{ci} n={}", m(g.mean_bps), g.n)
        }
    }
}

impl fmt::Display for Rerun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "this run: {}\nearlier:  {}", self.this_run, self.earlier)?;
        let rows: Vec<[String; 5]> = self
            .points
            .iter()
            .map(|p| {
                [
                    p.values.join(", "),
                    mbps(&p.this_run),
                    mbps(&p.earlier),
                    p.ratio.map(|r| format!("{r:.2}")).unwrap_or("—".into()),
                    p.agreement.text().to_string(),
                ]
            })
            .collect();
        let head = [
            self.columns.join(", "),
            "this run, Mbit/s (95% CI)".into(),
            "earlier, Mbit/s (95% CI)".into(),
            "ratio".into(),
            String::new(),
        ];
        let mut width = [0usize; 5];
        for r in rows.iter().chain(std::iter::once(&head)) {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        for r in std::iter::once(&head).chain(&rows) {
            let mut line = String::new();
            for (i, (c, w)) in r.iter().zip(width).enumerate() {
                let pad = w - c.chars().count();
                // Figures right-aligned, names and verdicts left.
                if (1..4).contains(&i) {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(c);
                } else {
                    line.push_str(c);
                    line.push_str(&" ".repeat(pad));
                }
                line.push_str("  ");
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        writeln!(
            f,
            "{} of {} points agree (their 95% intervals overlap), {} within {}% (intervals \
             apart), {} differ, {} cannot be told",
            self.agree,
            self.points.len(),
            self.within_tolerance,
            self.tolerance * 100.0,
            self.differ,
            self.cannot_tell
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "point,link.rate,link.loss,n,mean_bps,sd_bps,ci95_low_bps,ci95_high_bps,\
                        median_bps,min_bps,max_bps,failures,verdict\n";

    fn csv(rows: &[&str]) -> String {
        format!("{HEAD}{}\n", rows.join("\n"))
    }

    #[test]
    fn overlapping_intervals_agree_and_separate_ones_differ() {
        let earlier = csv(&[
            "0,10mbit,0%,3,9000000,1,8800000,9200000,,,,0,",
            "1,10mbit,1%,3,5000000,1,4000000,6000000,,,,0,",
            "2,1gbit,0%,3,900000000,1,850000000,950000000,,,,0,",
            "3,1gbit,1%,1,100000000,,,,,,,0,",
            "4,1gbit,2%,0,,,,,,,,3,",
            "6,10mbit,5%,3,9400000,1,9399000,9401000,,,,0,",
        ]);
        let this = csv(&[
            "0,10mbit,0%,3,9100000,1,9150000,9300000,,,,0,",
            "1,10mbit,1%,3,7000000,1,6500000,7500000,,,,0,",
            "2,1gbit,0%,3,910000000,1,900000000,920000000,,,,0,",
            "3,1gbit,1%,3,110000000,1,100000000,120000000,,,,0,",
            "4,1gbit,2%,3,50000000,1,40000000,60000000,,,,0,",
            "5,1gbit,5%,3,20000000,1,10000000,30000000,,,,0,",
            "6,10mbit,5%,3,9450000,1,9449000,9451000,,,,0,",
        ]);
        let r = compare(("new", &this), ("old", &earlier), 0.01).unwrap();
        assert_eq!(r.columns, ["link.rate", "link.loss"]);
        let got: Vec<Agreement> = r.points.iter().map(|p| p.agreement).collect();
        use Agreement::*;
        // Touching intervals (9.15–9.3 against 8.8–9.2) overlap; 6.5–7.5 against 4–6 do not;
        // one trial has no interval; a point every earlier trial of which failed, and one the
        // earlier run lacks, are measured here only; a path at its capacity, whose trials hardly
        // vary, 0.5% apart, is within the tolerance.
        assert_eq!(
            got,
            [
                Agree,
                Differ,
                Agree,
                NoInterval,
                OnlyHere,
                OnlyHere,
                WithinTolerance
            ]
        );
        assert_eq!(
            (r.agree, r.within_tolerance, r.differ, r.cannot_tell),
            (2, 1, 1, 3)
        );
        assert!(r.found_difference());
        assert_eq!(r.points[1].ratio, Some(1.4));
        let text = r.to_string();
        assert!(text.contains("2 of 7 points agree"), "{text}");
        assert!(text.contains("DIFFER"), "{text}");
        // The same run against itself agrees at every point with an interval.
        let same = compare(("a", &this), ("b", &this), 0.0).unwrap();
        assert!(!same.found_difference());
        assert_eq!(same.agree, 7);
        // Without a tolerance the capacity point differs.
        let strict = compare(("new", &this), ("old", &earlier), 0.0).unwrap();
        assert_eq!(strict.points[6].agreement, Differ);
    }

    #[test]
    fn runs_of_different_specs_are_refused() {
        let other =
            "point,link.delay,n,mean_bps,sd_bps,ci95_low_bps,ci95_high_bps\n0,5ms,3,1,0,1,1\n";
        let err = compare(("a", &csv(&[])), ("b", other), 0.01).unwrap_err();
        assert!(err.to_string().contains("different settings"), "{err}");
    }
}
