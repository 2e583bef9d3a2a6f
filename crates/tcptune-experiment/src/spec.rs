//! The experiment spec: one TOML file that names the path, the hosts' settings, the workload,
//! what is swept, how often, and in what order. Parsing checks everything before any trial
//! runs; an error names the line and the reason.
//!
//! ```toml
//! name = "buffers"
//! seed = 1
//! repetitions = 5          # measured trials per sweep point, or "auto":
//!                          # until the 95% CI is within `precision` of the mean
//!                          # (default 0.05), min_repetitions 3 … max_repetitions 20
//! warmup = true            # one discarded trial before each point's first
//! order = "random"         # or "sequential"
//! seeds = "per-trial"      # or "common": repetition r of every point gets the same link seed
//!
//! [link]                   # both directions; [link.up] / [link.down] per direction
//! rate = "100mbit"
//! delay = "10ms"           # one way
//!
//! [server.sysctl]
//! "net.ipv4.tcp_rmem" = "4096 131072 6291456"
//!
//! [workload]
//! kind = "bulk"
//! duration = "10s"
//!
//! [sweep]                  # cross product of every list
//! "server.sysctl.net.ipv4.tcp_rmem" = ["4096 4096 4096", "4096 131072 6291456"]
//!
//! [[paired]]               # lists of equal length whose values go together
//! label = ["1G", "10G"]    # optional: names the rows in labels and plots
//! "link.rate" = ["1gbit", "10gbit"]
//! "link.delay" = ["0.745ms", "0.79ms"]
//! ```

use std::fmt;

use toml_edit::{ImDocument, Item, Table, Value};

use crate::settings::{self, Capabilities, Settings};
use crate::stopping::{self, Auto};

/// Trial order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Shuffled with the spec's seed, so slow drifts (time of day, thermal state) spread over
    /// all points instead of biasing one (seed 001's warning).
    Random,
    /// In spec order: points one after another.
    Sequential,
}

/// How trials get their link seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Seeds {
    /// Every trial its own seed: repetitions sample the impairments independently.
    PerTrial,
    /// Common random numbers: repetition r of every point uses the same seed, so, packet for
    /// packet, the points meet the same losses (as long as their packet sequences agree).
    /// Differences between points within a repetition then come from the points, not from the
    /// luck of the draw, which narrows paired comparisons on lossy paths.
    Common,
}

/// A list of values swept for one setting.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Axis {
    /// The setting's path, e.g. `link.delay`.
    pub key: String,
    /// Its values, as written.
    pub values: Vec<String>,
}

/// Settings whose values go together, row by row.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Paired {
    /// The settings' paths.
    pub keys: Vec<String>,
    /// `rows[i][j]` is the value of `keys[j]` in row i.
    pub rows: Vec<Vec<String>>,
}

/// A parsed, checked spec.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Spec {
    /// The experiment's name (names the results directory and the labs).
    pub name: String,
    /// What it is for, in a sentence or two.
    pub description: String,
    /// Seed of the trial order and of every trial's link seed.
    pub seed: u64,
    /// Measured trials per point; with `auto`, the most a point may take.
    pub repetitions: u32,
    /// `repetitions = "auto"`: the stopping rule ([`crate::stopping`]).
    pub auto: Option<Auto>,
    /// Whether each point gets an unmeasured warm-up trial first.
    pub warmup: bool,
    /// Trial order.
    pub order: Order,
    /// How trials get their link seeds.
    pub seeds: Seeds,
    /// Every fixed setting, by path.
    pub base: Settings,
    /// Settings swept one by one: the points are their product.
    pub sweep: Vec<Axis>,
    /// Settings swept together, row by row.
    pub paired: Vec<Paired>,
    /// `[hosts]`: real hosts over ssh instead of the lab ([`crate::hosts`]).
    pub hosts: Option<crate::hosts::HostsSpec>,
    /// The spec's text, kept so results carry exactly what was run.
    #[serde(skip)]
    pub text: String,
}

/// Why a spec was refused: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong, and the fix.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for SpecError {}

fn line_of(text: &str, offset: Option<usize>) -> Option<usize> {
    offset.map(|o| {
        text[..o.min(text.len())]
            .bytes()
            .filter(|b| *b == b'\n')
            .count()
            + 1
    })
}

/// The value of a TOML scalar as setting text; arrays and tables are not settings.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.value().clone()),
        Value::Integer(i) => Some(i.value().to_string()),
        Value::Float(f) => Some(f.value().to_string()),
        Value::Boolean(b) => Some(b.value().to_string()),
        _ => None,
    }
}

struct Parser<'a> {
    text: &'a str,
    caps: &'a dyn Capabilities,
}

impl Parser<'_> {
    /// The `[[paired]]` groups: lists of equal length whose i-th values go together.
    fn paired(&self, root: &Table) -> Result<Vec<Paired>, SpecError> {
        let mut paired = Vec::new();
        match root.get("paired") {
            None => {}
            Some(Item::ArrayOfTables(a)) => {
                for t in a.iter() {
                    let axes = self.lists(t, "paired")?;
                    let n = axes.first().map(|a| a.values.len()).unwrap_or(0);
                    if let Some(bad) = axes.iter().find(|a| a.values.len() != n) {
                        return Err(self.err(
                            t.span(),
                            format!(
                            "paired lists must have equal lengths: '{}' has {} values, '{}' has {n}",
                            bad.key, bad.values.len(), axes[0].key
                        ),
                        ));
                    }
                    let rows = (0..n)
                        .map(|i| axes.iter().map(|a| a.values[i].clone()).collect())
                        .collect();
                    paired.push(Paired {
                        keys: axes.into_iter().map(|a| a.key).collect(),
                        rows,
                    });
                }
            }
            Some(i) => {
                return Err(self.err(i.span(), "'paired' must be a list of tables: [[paired]]"))
            }
        }
        Ok(paired)
    }

    /// A setting may vary in one place only: one `[sweep]` list or one `[[paired]]` group.
    fn swept_once(&self, sweep: &[Axis], paired: &[Paired]) -> Result<(), SpecError> {
        let mut seen = std::collections::BTreeSet::new();
        for k in sweep
            .iter()
            .map(|a| &a.key)
            .chain(paired.iter().flat_map(|g| g.keys.iter()))
        {
            // Each group may name its rows; labels are not settings.
            if k != LABEL && !seen.insert(k.clone()) {
                return Err(self.err(
                    None,
                    format!("'{k}' is swept twice; list it in one [sweep] or [[paired]] only"),
                ));
            }
        }
        Ok(())
    }

    /// The points and trials a spec makes, counted before anything is expanded, against the
    /// limits.
    fn check_size(
        &self,
        root: &Table,
        sweep: &[Axis],
        paired: &[Paired],
        repetitions: u32,
        warmup: bool,
    ) -> Result<(), SpecError> {
        // Counted before anything is expanded: a few short lists multiply into more points than
        // memory holds.
        let points = sweep
            .iter()
            .map(|a| a.values.len() as u128)
            .chain(paired.iter().map(|g| g.rows.len() as u128))
            .fold(1u128, |n, k| n.saturating_mul(k));
        if points > MAX_POINTS as u128 {
            return Err(self.err(
                root.get("sweep").and_then(|i| i.span()),
                format!(
                    "the sweep makes {points} points, more than the {MAX_POINTS} a spec may have; sweep fewer values or split the spec"
                ),
            ));
        }
        let trials = points * (u128::from(repetitions) + u128::from(warmup));
        if trials > MAX_TRIALS as u128 {
            return Err(self.err(
                root.get("repetitions").and_then(|i| i.span()),
                format!(
                    "{points} points × {repetitions} repetitions{} make {trials} trials, more than the {MAX_TRIALS} a spec may have; lower repetitions or sweep fewer values",
                    if warmup { " + 1 warm-up" } else { "" }
                ),
            ));
        }
        Ok(())
    }

    /// `repetitions`: a count (3 by default), or "auto" with its precision and bounds; the
    /// count returned is then the most a point may take.
    fn repetitions(&self, root: &Table) -> Result<(u32, Option<Auto>), SpecError> {
        let count = |k: &str, min: u32, max: u32| -> Result<Option<u32>, SpecError> {
            match root.get(k) {
                None => Ok(None),
                Some(i) => match i.as_integer() {
                    Some(v) if (i64::from(min)..=i64::from(max)).contains(&v) => Ok(Some(v as u32)),
                    _ => Err(self.err(
                        i.span(),
                        format!("'{k}' must be a whole number from {min} to {max}"),
                    )),
                },
            }
        };
        match root.get("repetitions").and_then(Item::as_str) {
            Some("auto") => {}
            Some(other) => {
                return Err(self.err(
                    root.get("repetitions").and_then(|i| i.span()),
                    format!("repetitions '{other}' is unknown; give a whole number from 1 to 100000, or \"auto\" (trials until the 95% CI is within the precision)"),
                ))
            }
            None => {
                if let Some((k, i)) = stopping::SPEC_KEYS
                    .iter()
                    .find_map(|k| Some((k, root.get(k)?)))
                {
                    return Err(self.err(
                        i.span(),
                        format!("'{k}' goes with repetitions = \"auto\"; set that, or remove '{k}'"),
                    ));
                }
                return Ok((count("repetitions", 1, 100_000)?.unwrap_or(3), None));
            }
        }
        let precision = match root.get("precision") {
            None => stopping::DEFAULT_PRECISION,
            Some(i) => {
                let text = i.as_value().and_then(scalar).unwrap_or_default();
                stopping::parse_precision(&text).map_err(|m| self.err(i.span(), m))?
            }
        };
        let most = stopping::MAX_REPETITIONS;
        let min = count("min_repetitions", 2, most)?.unwrap_or(stopping::DEFAULT_MIN);
        let max = count("max_repetitions", 2, most)?.unwrap_or(stopping::DEFAULT_MAX.max(min));
        if max < min {
            return Err(self.err(
                root.get("max_repetitions")
                    .or(root.get("min_repetitions"))
                    .and_then(|i| i.span()),
                format!("max_repetitions ({max}) is below min_repetitions ({min}); raise it or lower the minimum"),
            ));
        }
        Ok((
            max,
            Some(Auto {
                precision,
                min,
                max,
            }),
        ))
    }

    fn err(&self, span: Option<std::ops::Range<usize>>, message: impl Into<String>) -> SpecError {
        SpecError {
            line: line_of(self.text, span.map(|s| s.start)),
            message: message.into(),
        }
    }

    /// Flattens a settings table into `prefix.key` paths, checking each.
    fn flatten(&self, prefix: &str, table: &Table, out: &mut Settings) -> Result<(), SpecError> {
        for (key, item) in table.iter() {
            let path = format!("{prefix}.{key}");
            let span = table
                .key(key)
                .and_then(|k| k.span())
                .or_else(|| item.span());
            match item {
                Item::Table(t) => self.flatten(&path, t, out)?,
                Item::Value(Value::InlineTable(t)) => {
                    let t = t.clone().into_table();
                    self.flatten(&path, &t, out)?
                }
                Item::Value(v) => {
                    let Some(s) = scalar(v) else {
                        return Err(self.err(
                            span,
                            format!("'{path}' must be a single value; lists go under [sweep]"),
                        ));
                    };
                    settings::check(&path, &s, self.caps).map_err(|m| self.err(span, m))?;
                    out.insert(path, s);
                }
                _ => return Err(self.err(span, format!("'{path}' must be a value"))),
            }
        }
        Ok(())
    }

    /// A `[sweep]` or `[[paired]]` table: quoted setting paths → lists of values.
    fn lists(&self, table: &Table, what: &str) -> Result<Vec<Axis>, SpecError> {
        let mut axes = Vec::new();
        for (key, item) in table.iter() {
            let span = table
                .key(key)
                .and_then(|k| k.span())
                .or_else(|| item.span());
            let Some(Value::Array(arr)) = item.as_value() else {
                return Err(self.err(
                    span,
                    format!("{what} '{key}' must be a list of values, e.g. [\"10ms\", \"50ms\"]"),
                ));
            };
            let mut values = Vec::new();
            for v in arr.iter() {
                let s = scalar(v).ok_or_else(|| {
                    self.err(
                        v.span().or(span.clone()),
                        format!("{what} '{key}': every value must be a string, number or boolean"),
                    )
                })?;
                // "label" names the rows (untuned, tuned); it is not a setting.
                if key != LABEL {
                    settings::check(key, &s, self.caps)
                        .map_err(|m| self.err(v.span().or(span.clone()), m))?;
                }
                values.push(s);
            }
            if values.is_empty() {
                return Err(self.err(span, format!("{what} '{key}' has no values")));
            }
            axes.push(Axis {
                key: key.to_string(),
                values,
            });
        }
        Ok(axes)
    }
}

/// The most sweep points a spec may make (the cross product of its lists).
pub const MAX_POINTS: usize = 10_000;
/// The most trials a spec may make (points × (repetitions + warm-up)); at a few seconds each,
/// already days of running.
pub const MAX_TRIALS: usize = 100_000;

/// The largest spec file read (specs are a few kilobytes).
pub const SPEC_FILE_LIMIT: u64 = 1 << 20;

/// A `[sweep]` or `[[paired]]` list that names points instead of setting anything.
pub const LABEL: &str = "label";

const TOP_KEYS: [&str; 15] = [
    "name",
    "description",
    "seed",
    "repetitions",
    "warmup",
    "order",
    "seeds",
    "link",
    "client",
    "server",
    "workload",
    "capture",
    "sweep",
    "paired",
    "hosts",
];

/// The text of a spec with `repetitions = "auto"` at `precision` (what `lab run --precision`
/// runs): the spec's own `repetitions` and `precision` values replaced, or set at its top when
/// it has none, everything else as written; `min_repetitions`/`max_repetitions` stay.
pub fn with_precision(text: &str, precision: f64) -> Result<String, SpecError> {
    let doc = ImDocument::parse(text).map_err(|e| SpecError {
        line: line_of(text, e.span().map(|s| s.start)),
        message: format!("not valid TOML: {}", e.message()),
    })?;
    let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    let mut prefix = String::new();
    for (key, value) in [
        ("repetitions", "\"auto\"".to_string()),
        ("precision", format!("{precision}")),
    ] {
        match doc.get(key).and_then(|i| i.span()) {
            Some(span) => edits.push((span, value)),
            None => prefix.push_str(&format!("{key} = {value}\n")),
        }
    }
    // From the end, so each span still points at its value.
    edits.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
    let mut out = text.to_string();
    for (span, value) in edits {
        out.replace_range(span, &value);
    }
    Ok(prefix + &out)
}

/// Parses and checks a spec against this kernel's capabilities.
pub fn parse(text: &str, caps: &dyn Capabilities) -> Result<Spec, SpecError> {
    let doc = ImDocument::parse(text).map_err(|e| SpecError {
        line: line_of(text, e.span().map(|s| s.start)),
        message: format!("not valid TOML: {}", e.message()),
    })?;
    let p = Parser { text, caps };
    let root: &Table = &doc;
    for (key, item) in root.iter() {
        if !TOP_KEYS.contains(&key) && !stopping::SPEC_KEYS.contains(&key) {
            let span = root.key(key).and_then(|k| k.span()).or_else(|| item.span());
            return Err(p.err(
                span,
                format!(
                    "'{key}' is not part of a spec; the parts are: {}, {}",
                    TOP_KEYS.join(", "),
                    stopping::SPEC_KEYS.join(", ")
                ),
            ));
        }
    }
    let str_of = |k: &str| -> Result<Option<String>, SpecError> {
        match root.get(k) {
            None => Ok(None),
            Some(i) => i
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| p.err(i.span(), format!("'{k}' must be a string"))),
        }
    };
    let int_of = |k: &str, min: i64, max: i64| -> Result<Option<i64>, SpecError> {
        match root.get(k) {
            None => Ok(None),
            Some(i) => match i.as_integer() {
                Some(v) if (min..=max).contains(&v) => Ok(Some(v)),
                _ => Err(p.err(
                    i.span(),
                    format!("'{k}' must be a whole number from {min} to {max}"),
                )),
            },
        }
    };
    let name = str_of("name")?.ok_or_else(|| p.err(None, "the spec needs a name = \"…\""))?;
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(p.err(
            root.get("name").and_then(|i| i.span()),
            "name may hold letters, digits, '-', '_' and '.' only",
        ));
    }
    let order = match str_of("order")?.as_deref() {
        None | Some("random") => Order::Random,
        Some("sequential") => Order::Sequential,
        Some(o) => {
            return Err(p.err(
                root.get("order").and_then(|i| i.span()),
                format!("order '{o}' is unknown; use random or sequential"),
            ))
        }
    };
    let seeds = match str_of("seeds")?.as_deref() {
        None | Some("per-trial") => Seeds::PerTrial,
        Some("common") => Seeds::Common,
        Some(o) => {
            return Err(p.err(
                root.get("seeds").and_then(|i| i.span()),
                format!("seeds '{o}' is unknown; use per-trial or common"),
            ))
        }
    };
    let warmup = match root.get("warmup") {
        None => true,
        Some(i) => i
            .as_bool()
            .ok_or_else(|| p.err(i.span(), "'warmup' must be true or false"))?,
    };

    let mut base = Settings::new();
    for section in ["link", "client", "server", "workload", "capture"] {
        match root.get(section) {
            None => {}
            Some(Item::Table(t)) => p.flatten(section, t, &mut base)?,
            Some(i) => {
                return Err(p.err(
                    i.span(),
                    format!("'{section}' must be a table: [{section}]"),
                ))
            }
        }
    }
    let sweep = match root.get("sweep") {
        None => Vec::new(),
        Some(Item::Table(t)) => p.lists(t, "sweep")?,
        Some(i) => return Err(p.err(i.span(), "'sweep' must be a table: [sweep]")),
    };
    let paired = p.paired(root)?;
    let hosts = match root.get("hosts") {
        None => None,
        Some(Item::Table(t)) => Some(crate::hosts::parse(t).map_err(|(key, m)| {
            let span = t.key(&key).and_then(|k| k.span()).or_else(|| t.span());
            p.err(span, m)
        })?),
        Some(i) => return Err(p.err(i.span(), "'hosts' must be a table: [hosts]")),
    };
    p.swept_once(&sweep, &paired)?;
    let (repetitions, auto) = p.repetitions(root)?;
    p.check_size(root, &sweep, &paired, repetitions, warmup)?;
    Ok(Spec {
        name,
        description: str_of("description")?.unwrap_or_default(),
        seed: int_of("seed", 0, i64::MAX)?.unwrap_or(1) as u64,
        repetitions,
        auto,
        warmup,
        order,
        seeds,
        base,
        sweep,
        paired,
        hosts,
        text: text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::tests::FakeCaps;

    const GOOD: &str = r#"
name = "buffers"
seed = 7
repetitions = 4
order = "sequential"

[link]
rate = "100mbit"
delay = "10ms"
[link.down]
loss = "1%"

[server.sysctl]
"net.ipv4.tcp_rmem" = "4096 131072 6291456"

[client]
mtu = 1500
sysctl."net.ipv4.tcp_sack" = 0

[workload]
kind = "bulk"
duration = "5s"

[sweep]
"server.sysctl.net.ipv4.tcp_rmem" = ["4096 4096 4096", "4096 131072 6291456"]
"link.delay" = ["5ms", "50ms"]

[[paired]]
"client.mtu" = [1500, 9000]
"client.txqueuelen" = [1000, 8000]
"#;

    #[test]
    fn a_full_spec_parses() {
        let s = parse(GOOD, &FakeCaps).unwrap();
        assert_eq!(
            (s.name.as_str(), s.seed, s.repetitions, s.order),
            ("buffers", 7, 4, Order::Sequential)
        );
        assert_eq!(s.seeds, Seeds::PerTrial, "the default");
        assert_eq!(s.base["link.rate"], "100mbit");
        assert_eq!(s.base["link.down.loss"], "1%");
        assert_eq!(
            s.base["server.sysctl.net.ipv4.tcp_rmem"],
            "4096 131072 6291456"
        );
        assert_eq!(s.base["client.sysctl.net.ipv4.tcp_sack"], "0");
        assert_eq!(s.base["client.mtu"], "1500");
        assert_eq!(s.sweep.len(), 2);
        assert_eq!(
            s.paired[0].rows,
            vec![vec!["1500", "1000"], vec!["9000", "8000"]]
        );
    }

    fn err(text: &str) -> SpecError {
        parse(text, &FakeCaps).unwrap_err()
    }

    #[test]
    fn errors_name_the_line_and_the_reason() {
        let e = err("name = \"x\"\n[link]\nrate = \"100mbit\"\nlatency = \"10ms\"\n");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(
            e.message.contains("'link.latency' is not a known setting"),
            "{e}"
        );

        let e = err("name = \"x\"\n\n[sweep]\n\"server.congctl\" = [\"cubic\", \"vegas\"]\n");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("not available in this kernel"), "{e}");

        let e = err("name = \"x\"\nseeds = \"same\"\n");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(
            e.message
                .contains("seeds 'same' is unknown; use per-trial or common"),
            "{e}"
        );

        let e = err("name = \"x\"\n[capture]\nsnaplen = 128\nat = \"everywhere\"\n");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(
            e.message.contains("capture at 'everywhere' is unknown"),
            "{e}"
        );

        let e = err("name = \"x\"\n[link\n");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.starts_with("not valid TOML"), "{e}");

        let e = err("name = \"x\"\nrepetitions = 0\n");
        assert_eq!(e.line, Some(2));

        let e = err("name = \"x\"\n[[paired]]\n\"link.rate\" = [\"1gbit\", \"10gbit\"]\n\"link.delay\" = [\"1ms\"]\n");
        assert!(e.message.contains("equal lengths"), "{e}");

        let e = err("name = \"x\"\nbogus = 1\n");
        assert!(e.message.contains("not part of a spec"), "{e}");

        let e = err("name = \"x\"\n[sweep]\n\"link.rate\" = [\"1gbit\"]\n[[paired]]\n\"link.rate\" = [\"2gbit\"]\n");
        assert!(e.message.contains("swept twice"), "{e}");

        assert!(err("seed = 1\n").message.contains("needs a name"));
        assert!(err("name = \"a b\"\n").message.contains("letters, digits"));
    }

    #[test]
    fn sweeps_are_counted_before_they_are_expanded() {
        // Within each key's bounds (jitter at most 2.147 s), so only the count is refused.
        let values = |n: usize, unit: &str| {
            (0..n)
                .map(|i| format!("\"{}{unit}\"", i + 1))
                .collect::<Vec<_>>()
                .join(",")
        };
        // 10^4 × 10^4 = 10^8 points: refused at once, with the count.
        let text = format!(
            "name = \"big\"\n[sweep]\n\"link.delay\" = [{}]\n\"link.up.jitter\" = [{}]\n",
            values(10_000, "ms"),
            values(10_000, "us")
        );
        let t = std::time::Instant::now();
        let e = parse(&text, &FakeCaps).unwrap_err();
        assert!(
            e.message
                .contains("makes 100000000 points, more than the 10000"),
            "{e}"
        );
        assert!(t.elapsed() < std::time::Duration::from_secs(10));
        // Within the point limit but over the trial limit.
        let text = format!(
            "name = \"reps\"\nrepetitions = 20\n[sweep]\n\"link.delay\" = [{}]\n",
            values(10_000, "ms")
        );
        let e = parse(&text, &FakeCaps).unwrap_err();
        assert!(
            e.message
                .contains("10000 points × 20 repetitions + 1 warm-up make 210000 trials"),
            "{e}"
        );
    }

    #[test]
    fn auto_repetitions_with_defaults_bounds_and_errors() {
        let s = parse("name = \"a\"\nrepetitions = \"auto\"\n", &FakeCaps).unwrap();
        let want = Auto {
            precision: 0.05,
            min: 3,
            max: 20,
        };
        assert_eq!((s.repetitions, s.auto), (20, Some(want)));
        let s = parse(
            "name = \"a\"\nrepetitions = \"auto\"\nprecision = \"2%\"\nmin_repetitions = 4\nmax_repetitions = 8\n",
            &FakeCaps,
        )
        .unwrap();
        let want = Auto {
            precision: 0.02,
            min: 4,
            max: 8,
        };
        assert_eq!((s.repetitions, s.auto), (8, Some(want)));
        // A minimum above the default maximum raises the maximum with it.
        let s = parse(
            "name = \"a\"\nrepetitions = \"auto\"\nmin_repetitions = 30\n",
            &FakeCaps,
        )
        .unwrap();
        assert_eq!(s.auto.map(|a| (a.min, a.max)), Some((30, 30)));
        assert_eq!(parse("name = \"a\"\n", &FakeCaps).unwrap().auto, None);

        let e = err("name = \"a\"\nrepetitions = \"many\"\n");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("repetitions 'many' is unknown"), "{e}");
        let e = err("name = \"a\"\nrepetitions = 5\nprecision = 0.05\n");
        assert_eq!(e.line, Some(3), "{e}");
        assert!(
            e.message.contains("goes with repetitions = \"auto\""),
            "{e}"
        );
        let e = err("name = \"a\"\nrepetitions = \"auto\"\nprecision = 1.5\n");
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.message.contains("above 0 and below 1"), "{e}");
        let e = err("name = \"a\"\nrepetitions = \"auto\"\nmin_repetitions = 1\n");
        assert!(e.message.contains("from 2 to 1000"), "{e}");
        let e =
            err("name = \"a\"\nrepetitions = \"auto\"\nmin_repetitions = 5\nmax_repetitions = 4\n");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("below min_repetitions (5)"), "{e}");
        // The maximum counts against the trial limit.
        let values = (0..10_000)
            .map(|i| format!("\"{}ms\"", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let e = err(&format!(
            "name = \"a\"\nrepetitions = \"auto\"\n[sweep]\n\"link.delay\" = [{values}]\n"
        ));
        assert!(e.message.contains("× 20 repetitions"), "{e}");
    }

    #[test]
    fn with_precision_sets_auto_and_keeps_the_rest() {
        let t = with_precision(GOOD, 0.02).unwrap();
        assert!(t.contains("repetitions = \"auto\"\n"), "{t}");
        assert!(t.starts_with("precision = 0.02\n"), "{t}");
        let s = parse(&t, &FakeCaps).unwrap();
        assert_eq!(s.auto.map(|a| a.precision), Some(0.02));
        assert_eq!((s.seed, s.sweep.len()), (7, 2), "the rest as written");
        // A spec that names its own precision gets the new one in its place.
        let own = "name = \"a\"\nrepetitions = \"auto\"\nprecision = \"5%\" # loose\n";
        let t = with_precision(own, 0.01).unwrap();
        assert_eq!(
            t,
            "name = \"a\"\nrepetitions = \"auto\"\nprecision = 0.01 # loose\n"
        );
        // Without repetitions at all: both set at the top, before any table.
        let t = with_precision("name = \"a\"\n[link]\nrate = \"1gbit\"\n", 0.1).unwrap();
        assert_eq!(
            parse(&t, &FakeCaps).unwrap().auto.map(|a| a.precision),
            Some(0.1)
        );
    }

    /// `[hosts]` in a spec (the table's own parsing is tested in `hosts`).
    #[test]
    fn a_spec_takes_hosts_and_a_bad_one_names_its_line() {
        use crate::hosts::Endpoint;
        use crate::settings::tests::FakeCaps;
        let parse = |t: &str| crate::spec::parse(t, &FakeCaps);
        assert!(
            parse("name = \"x\"\n").unwrap().hosts.is_none(),
            "no [hosts]: the lab"
        );
        let s = parse(
            "name = \"x\"\n[hosts]\nclient = \"ssh://root@10.0.0.1\"\nserver = \"local\"\nssh_options = [\"ConnectTimeout=5\"]\ntcptune = \"/opt/tcptune\"\n",
        )
        .unwrap();
        let h = s.hosts.unwrap();
        assert_eq!(h.server, Endpoint::Local);
        assert_eq!(h.client.to_string(), "ssh://root@10.0.0.1");
        assert_eq!(h.ssh_options, ["ConnectTimeout=5"]);
        assert_eq!(h.tcptune, "/opt/tcptune");
        let e =
            parse("name = \"x\"\n[hosts]\nclient = \"root@h\"\nserver = \"local\"\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(
            e.message
                .contains("hosts.client = \"root@h\" is not a host"),
            "{e}"
        );
        for (text, want) in [
            ("[hosts]\nclient = \"local\"\n", "[hosts] needs server"),
            (
                "[hosts]\nclient = \"local\"\nserver = \"local\"\n",
                "both local",
            ),
            (
                "[hosts]\nclient = \"local\"\nserver = \"ssh://h\"\nport = 22\n",
                "'hosts.port' is not a hosts setting",
            ),
            (
                "[hosts]\nclient = \"local\"\nserver = \"ssh://h\"\nssh_options = [\"-v\"]\n",
                "\"Name=value\"",
            ),
            (
                "[hosts]\nclient = \"local\"\nserver = \"ssh://h\"\nserver_address = \"h\"\n",
                "not an IP address",
            ),
            ("hosts = 1\n", "must be a table"),
        ] {
            let e = parse(&format!("name = \"x\"\n{text}")).unwrap_err();
            assert!(e.message.contains(want), "{text}: {e}");
        }
    }
}
