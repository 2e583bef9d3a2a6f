//! "Seed vs measured": a reproduction's published figures (a small `seed.toml` beside its
//! spec) compared with what a results directory holds (`summary.csv`), as one generated
//! table: the seed's figure, ours with its 95% CI, whether the effect goes the same way, and
//! the ratio of ours to the seed's. Examples' READMEs embed the table between markers, and a
//! test checks that the embedded copy is what the committed results give.
//!
//! A claim compares two points (the effect as a ratio, "b ÷ a", with Fieller's 95% interval
//! for a ratio of means), or one point with an absolute figure; a claim whose data the results
//! lack says why instead of a number.

use std::path::Path;

use tcptune_report::stats::{fieller, MeanSd, RatioInterval};
use toml_edit::{ImDocument, Item, Value};

/// Where the README's generated table starts and ends.
pub const BEGIN: &str = "<!-- comparison: generated from seed.toml and results/, do not edit -->";
/// The line after the table.
pub const END: &str = "<!-- end of comparison -->";

/// Within this band around 1 a ratio is "about the same".
const SAME_BAND: f64 = 0.05;

/// Why a comparison could not be made: the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A summary that cannot be read or compared.
    #[error("{path}: {why}")]
    Bad {
        /// The file as given.
        path: String,
        /// What is wrong, and the fix.
        why: String,
    },
}

/// One row of a summary.csv: the swept values and the goodput statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The point's swept values, in the summary's column order.
    pub values: Vec<String>,
    /// Measured trials.
    pub n: usize,
    /// Mean goodput, bits/s.
    pub mean: f64,
    /// The standard deviation of the trials (absent under two, or in a summary without it).
    pub sd: Option<f64>,
    /// The 95% confidence interval of the mean, bits/s (absent under two trials).
    pub ci: Option<(f64, f64)>,
}

impl Row {
    fn mean_sd(&self) -> Option<MeanSd> {
        Some(MeanSd {
            mean: self.mean,
            sd: self.sd?,
            n: self.n,
        })
    }
}

/// Splits one CSV line (quotes as `summary_csv` writes them).
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Reads a `summary.csv`: the columns between `point` and `n` are the swept values.
pub fn read_summary(text: &str) -> Result<Vec<Row>, String> {
    read_summary_columns(text).map(|(_, rows)| rows)
}

/// [`read_summary`], with the swept columns' names.
pub fn read_summary_columns(text: &str) -> Result<(Vec<String>, Vec<Row>), String> {
    let mut lines = text.lines();
    let header = csv_fields(lines.next().ok_or("empty summary")?);
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .ok_or(format!("no column {name}"))
    };
    let (n, mean, lo, hi) = (
        col("n")?,
        col("mean_bps")?,
        col("ci95_low_bps")?,
        col("ci95_high_bps")?,
    );
    let sd = col("sd_bps").ok();
    let rows = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f = csv_fields(l);
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
            let count = num(n).unwrap_or(0.0) as usize;
            Ok(Row {
                values: f.get(1..n).map(<[String]>::to_vec).unwrap_or_default(),
                n: count,
                // A point none of whose trials measured has no mean (n = 0).
                mean: match num(mean) {
                    Some(m) => m,
                    None if count == 0 => 0.0,
                    None => return Err(format!("a row without a mean: {l}")),
                },
                sd: sd.and_then(num),
                ci: num(lo).zip(num(hi)),
            })
        })
        .collect::<Result<_, String>>()?;
    Ok((
        header.get(1..n).map(<[String]>::to_vec).unwrap_or_default(),
        rows,
    ))
}

/// What a seed's claim gives.
#[derive(Debug, Clone, PartialEq)]
enum Figure {
    /// The effect b ÷ a.
    Ratio(f64),
    /// Only the direction of b against a: "lower", "higher" or "same".
    Direction(String),
    /// An absolute goodput of the point, bit/s.
    Value(f64),
}

#[derive(Debug, Clone)]
struct Claim {
    what: String,
    results: String,
    seed: String,
    figure: Option<Figure>,
    base: Vec<String>,
    point: Vec<String>,
    missing: Option<String>,
}

fn strings(item: Option<&Item>) -> Vec<String> {
    item.and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn claims(text: &str, path: &str) -> Result<(String, Vec<Claim>), CompareError> {
    let bad = |why: String| CompareError::Bad {
        path: path.to_string(),
        why,
    };
    let doc = ImDocument::parse(text).map_err(|e| bad(e.to_string()))?;
    let source = doc
        .get("source")
        .and_then(Item::as_str)
        .unwrap_or_default()
        .to_string();
    let list = doc
        .get("claim")
        .and_then(Item::as_array_of_tables)
        .ok_or_else(|| bad("no [[claim]] tables".into()))?;
    let mut out = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let s = |k: &str| t.get(k).and_then(Item::as_str).map(str::to_string);
        let num = |k: &str| {
            t.get(k).and_then(|v| match v.as_value()? {
                Value::Float(f) => Some(*f.value()),
                Value::Integer(n) => Some(*n.value() as f64),
                _ => None,
            })
        };
        let figure = match (num("ratio"), s("direction"), num("value_bps")) {
            (Some(r), _, _) => Some(Figure::Ratio(r)),
            (_, Some(d), _) => Some(Figure::Direction(d)),
            (_, _, Some(v)) => Some(Figure::Value(v)),
            _ => None,
        };
        let claim = Claim {
            what: s("what").ok_or_else(|| bad(format!("claim {} has no `what`", i + 1)))?,
            results: s("results").unwrap_or_else(|| "results".into()),
            seed: s("seed").unwrap_or_default(),
            figure,
            base: strings(t.get("base")),
            point: strings(t.get("point")),
            missing: s("missing"),
        };
        if claim.figure.is_none() && claim.missing.is_none() {
            return Err(bad(format!(
                "claim {} needs ratio, direction or value_bps (or missing)",
                i + 1
            )));
        }
        out.push(claim);
    }
    Ok((source, out))
}

fn direction(r: f64) -> &'static str {
    if r > 1.0 + SAME_BAND {
        "higher"
    } else if r < 1.0 - SAME_BAND {
        "lower"
    } else {
        "same"
    }
}

/// Our direction from the ratio's interval: clear only when the interval says so (never
/// when it is unbounded).
fn our_direction(r: f64, ci: Option<RatioInterval>) -> &'static str {
    match ci {
        Some(RatioInterval::Bounded { low, .. }) if low > 1.0 + SAME_BAND => "higher",
        Some(RatioInterval::Bounded { high, .. }) if high < 1.0 - SAME_BAND => "lower",
        Some(RatioInterval::Bounded { low, high })
            if low >= 1.0 - SAME_BAND && high <= 1.0 + SAME_BAND =>
        {
            "same"
        }
        Some(_) => "unclear",
        None => direction(r),
    }
}

fn num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The measured row of a point (one with at least one trial measured).
fn find<'a>(rows: &'a [Row], values: &[String]) -> Option<&'a Row> {
    rows.iter().find(|r| r.values == values && r.n > 0)
}

/// One table row for a claim against the rows of its results.
fn row(c: &Claim, rows: Option<&[Row]>) -> [String; 6] {
    let lacking = |why: &str| {
        [
            c.what.clone(),
            c.seed.clone(),
            format!("not in these results: {why}"),
            "—".into(),
            "—".into(),
            c.results.clone(),
        ]
    };
    if let Some(why) = &c.missing {
        return lacking(why);
    }
    let Some(rows) = rows else {
        return lacking("no summary.csv");
    };
    let Some(b) = find(rows, &c.point) else {
        return lacking(&format!("no measured point {}", c.point.join(", ")));
    };
    match (&c.figure, c.base.is_empty()) {
        (Some(Figure::Value(v)), _) => {
            let ours = format!(
                "{} Mbit/s{}",
                num(b.mean / 1e6),
                b.ci.map(|(lo, hi)| format!(" ({} – {})", num(lo.max(0.0) / 1e6), num(hi / 1e6)))
                    .unwrap_or_default()
            );
            [
                c.what.clone(),
                c.seed.clone(),
                ours,
                "—".into(),
                format!("{:.2}", b.mean / v),
                c.results.clone(),
            ]
        }
        (Some(_), false) => {
            let Some(a) = find(rows, &c.base) else {
                return lacking(&format!("no measured point {}", c.base.join(", ")));
            };
            let r = b.mean / a.mean;
            let ci = b
                .mean_sd()
                .zip(a.mean_sd())
                .and_then(|(b, a)| fieller(b, a));
            let ours = format!(
                "{}{}",
                num(r),
                match ci {
                    // Goodput is not negative: a bound below 0 is shown as 0.
                    Some(RatioInterval::Bounded { low, high }) =>
                        format!(" ({} – {})", num(low.max(0.0)), num(high)),
                    Some(RatioInterval::Unbounded) =>
                        " (unbounded: the base's CI reaches 0)".into(),
                    None => String::new(),
                }
            );
            let (seed_dir, ratio) = match &c.figure {
                Some(Figure::Ratio(s)) => (direction(*s), format!("{:.2}", r / s)),
                Some(Figure::Direction(d)) => (d.as_str(), "—".into()),
                _ => ("same", "—".into()),
            };
            let mine = our_direction(r, ci);
            let same = match mine {
                "unclear" if ci == Some(RatioInterval::Unbounded) => {
                    "unclear (interval unbounded)".to_string()
                }
                "unclear" => "unclear (CI spans both)".to_string(),
                d if d == seed_dir => "yes".into(),
                d => format!("no (ours {d})"),
            };
            [
                c.what.clone(),
                c.seed.clone(),
                ours,
                same,
                ratio,
                c.results.clone(),
            ]
        }
        _ => lacking("the claim names no base point"),
    }
}

/// The header of the comparison table.
pub const HEADER: [&str; 6] = [
    "claim",
    "the seed",
    "ours (95% CI)",
    "same direction",
    "ours ÷ seed",
    "results",
];

/// What the table's numbers mean.
pub const NOTE: &str = "Ratios are of mean goodput (b ÷ a) with Fieller's 95% interval for a ratio of two independent means (Welch–Satterthwaite degrees of freedom; unbounded when the base's mean is within its CI of 0). \"Same direction\": both higher, both lower, or both within 5% of no change; \"unclear\" when our interval spans more than one of those, or is unbounded.";

/// The seed's source and one row per claim of the seed file at `seed_path` (its `results`
/// paths are relative to it).
pub fn rows(seed_path: &Path) -> Result<(String, Vec<[String; 6]>), CompareError> {
    let path = seed_path.display().to_string();
    let text = std::fs::read_to_string(seed_path).map_err(|e| CompareError::Bad {
        path: path.clone(),
        why: e.to_string(),
    })?;
    let (source, claims) = claims(&text, &path)?;
    let base = seed_path.parent().unwrap_or(Path::new("."));
    let rows = claims
        .iter()
        .map(|c| {
            let summary = std::fs::read_to_string(base.join(&c.results).join("summary.csv"))
                .ok()
                .and_then(|t| read_summary(&t).ok());
            row(c, summary.as_deref())
        })
        .collect();
    Ok((source, rows))
}

/// The comparison table of the seed file at `seed_path`, as Markdown.
pub fn comparison(seed_path: &Path) -> Result<String, CompareError> {
    let (source, rows) = rows(seed_path)?;
    let mut out = String::new();
    if !source.is_empty() {
        out.push_str(&format!("Seed: {source}\n\n"));
    }
    out.push_str(&format!("| {} |\n", HEADER.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(HEADER.len())));
    for cells in &rows {
        out.push_str(&format!(
            "| {} |\n",
            cells
                .iter()
                .map(|c| c.replace('|', "\\|"))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    out.push_str(&format!("\n{NOTE}\n"));
    Ok(out)
}

/// The seed file that claims the results directory `dir` (in it or up to two levels above),
/// with the rows of its claims on `dir`.
pub fn for_results(dir: &Path) -> Option<(String, Vec<[String; 6]>)> {
    let dir = dir.canonicalize().ok()?;
    let seed = dir
        .ancestors()
        .take(3)
        .map(|d| d.join("seed.toml"))
        .find(|p| p.is_file())?;
    let base = seed.parent()?.to_path_buf();
    let (source, rows) = rows(&seed).ok()?;
    let mine: Vec<[String; 6]> = rows
        .into_iter()
        .filter(|r| base.join(&r[5]).canonicalize().ok().as_deref() == Some(dir.as_path()))
        .collect();
    (!mine.is_empty()).then_some((source, mine))
}

/// `readme` with the text between [`BEGIN`] and [`END`] replaced by `table`; `None` when the
/// markers are missing.
pub fn embed(readme: &str, table: &str) -> Option<String> {
    let start = readme.find(BEGIN)? + BEGIN.len();
    let end = start + readme[start..].find(END)?;
    Some(format!("{}\n{table}{}", &readme[..start], &readme[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Row 2: two trials whose CI is 10 ± 15 Mbit/s: SD 15e6 · √2 / t(0.975, 1) = 1669515.
    const CSV: &str = "point,label,label,n,mean_bps,sd_bps,ci95_low_bps,ci95_high_bps,median_bps\n\
0,no limit,clean,4,40000000,1000000,38408777,41591223,40000000\n\
1,\"wmem, 4096\",clean,4,20000000,500000,19204388,20795612,20000000\n\
2,\"wmem, 4096\",loss,2,10000000,1669515.3176,-5000000,25000000,10000000\n";

    fn claim(figure: Figure, base: &[&str], point: &[&str]) -> Claim {
        Claim {
            what: "w".into(),
            results: "results".into(),
            seed: "s".into(),
            figure: Some(figure),
            base: base.iter().map(|s| s.to_string()).collect(),
            point: point.iter().map(|s| s.to_string()).collect(),
            missing: None,
        }
    }

    #[test]
    fn summary_rows_with_quoted_values() {
        let rows = read_summary(CSV).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].values, ["wmem, 4096", "clean"]);
        assert_eq!(rows[1].ci, Some((19_204_388.0, 20_795_612.0)));
        assert_eq!(rows[1].sd, Some(500_000.0));
    }

    #[test]
    fn ratios_directions_and_values() {
        let rows = read_summary(CSV).unwrap();
        // Halved, against a seed that found 0.4: same direction, ours is 1.25× the seed's.
        // Fieller: b 20 ± SD 0.5 (n 4), a 40 ± SD 1 (n 4): Welch df 6, t 2.446912, g 0.000936,
        // bounds 0.478825 and 0.522111 (python3, the formula of tcptune_report::stats).
        let r = row(
            &claim(
                Figure::Ratio(0.4),
                &["no limit", "clean"],
                &["wmem, 4096", "clean"],
            ),
            Some(&rows),
        );
        assert_eq!(r[2], "0.50 (0.48 – 0.52)");
        assert_eq!((r[3].as_str(), r[4].as_str()), ("yes", "1.25"));
        // The seed found no effect; ours is lower.
        let r = row(
            &claim(
                Figure::Ratio(1.0),
                &["no limit", "clean"],
                &["wmem, 4096", "clean"],
            ),
            Some(&rows),
        );
        assert_eq!(r[3], "no (ours lower)");
        // A wide interval (n = 2) leaves the direction unclear, and is cut at zero: Welch df
        // 1.0225, t 12.064, bounds −0.2128 and 1.2361.
        let r = row(
            &claim(
                Figure::Direction("lower".into()),
                &["wmem, 4096", "clean"],
                &["wmem, 4096", "loss"],
            ),
            Some(&rows),
        );
        assert_eq!(r[2], "0.50 (0 – 1.24)");
        assert_eq!(r[3], "unclear (CI spans both)");
        // Over a base whose CI reaches 0 (g = t²·SE²/mean² = 2.03 ≥ 1): unbounded, unclear.
        let r = row(
            &claim(
                Figure::Direction("higher".into()),
                &["wmem, 4096", "loss"],
                &["wmem, 4096", "clean"],
            ),
            Some(&rows),
        );
        assert_eq!(r[2], "2.00 (unbounded: the base's CI reaches 0)");
        assert_eq!(r[3], "unclear (interval unbounded)");
        // An absolute figure: ours over the seed's.
        let r = row(
            &claim(Figure::Value(10e6), &[], &["no limit", "clean"]),
            Some(&rows),
        );
        assert_eq!(
            (r[2].as_str(), r[4].as_str()),
            ("40.00 Mbit/s (38.41 – 41.59)", "4.00")
        );
        // A point the results lack is said, not invented.
        let r = row(
            &claim(Figure::Ratio(1.0), &["no limit", "clean"], &["x", "y"]),
            Some(&rows),
        );
        assert_eq!(r[2], "not in these results: no measured point x, y");
    }

    #[test]
    fn the_table_is_embedded_between_the_markers() {
        let readme = format!("# T\n\n{BEGIN}\nold\n{END}\n\nprose\n");
        let new = embed(&readme, "| a |\n").unwrap();
        assert_eq!(new, format!("# T\n\n{BEGIN}\n| a |\n{END}\n\nprose\n"));
        assert_eq!(embed(&new, "| a |\n").unwrap(), new, "idempotent");
        assert_eq!(embed("no markers", "x"), None);
    }
}
