//! The goodput chart: goodput against the first numeric swept setting (or bars over the
//! categories with the most values), one series per combination of the other settings, with
//! 95% CI whiskers, the expectation dashed beside each series and the path rate as a reference.

use std::borrow::Cow;

use tcptune_model::{Bytes, Dur, Probability, Rate};
use tcptune_report::svg::{spans_decades, Chart, Point as P, Series, Style, PALETTE};

use super::summary::PointSummary;

/// A swept value as a number for the x axis, with the axis' unit.
pub(super) fn numeric(key: &str, value: &str) -> Option<(f64, &'static str)> {
    let last = key.rsplit('.').next().unwrap_or(key);
    match last {
        "tcp_rmem" | "tcp_wmem" => {
            Some((value.split_whitespace().nth(2)?.parse().ok()?, "bytes, max"))
        }
        "rate" => Some((value.parse::<Rate>().ok()?.bps(), "bit/s")),
        "delay" | "jitter" | "duration" => Some((value.parse::<Dur>().ok()?.secs() * 1e3, "ms")),
        "loss" | "duplicate" | "corrupt" | "reorder" => {
            Some((value.parse::<Probability>().ok()?.percent(), "%"))
        }
        "rcvbuf" | "sndbuf" | "queue_bytes" | "bytes" => {
            Some((value.parse::<Bytes>().ok()?.get() as f64, "bytes"))
        }
        _ => value.trim().parse::<f64>().ok().map(|v| (v, "")),
    }
}

/// The goodput chart: x from the first swept setting, one series per combination of the others.
pub(super) fn goodput_chart(points: &[PointSummary], title: &str) -> Chart {
    let points = &*x_axis_first(points);
    let x_key = points
        .first()
        .and_then(|p| p.varied.first())
        .map(|(k, _)| k.clone());
    let numeric_x = x_key
        .as_ref()
        .is_some_and(|k| points.iter().all(|p| numeric(k, &p.varied[0].1).is_some()));
    let unit = x_key
        .as_ref()
        .and_then(|k| numeric(k, &points[0].varied[0].1))
        .map(|(_, u)| u)
        .unwrap_or("");
    let x_label = match &x_key {
        Some(k) if unit.is_empty() => k.clone(),
        Some(k) => format!("{k} ({unit})"),
        None => "point".into(),
    };
    let mut categories: Vec<String> = Vec::new();
    let x_of = |p: &PointSummary, cats: &mut Vec<String>| -> f64 {
        match (&x_key, numeric_x) {
            (Some(k), true) => numeric(k, &p.varied[0].1).map(|(v, _)| v).unwrap_or(0.0),
            (Some(_), false) => {
                let v = &p.varied[0].1;
                match cats.iter().position(|c| c == v) {
                    Some(i) => i as f64,
                    None => {
                        cats.push(v.clone());
                        (cats.len() - 1) as f64
                    }
                }
            }
            (None, _) => 0.0,
        }
    };
    // Group by the other swept values.
    // Groups in order of first appearance (a BTreeMap would sort "client rmem" before "no limit").
    let mut groups: Vec<Group> = Vec::new();
    for p in points {
        let rest: Vec<String> = p
            .varied
            .iter()
            .skip(1)
            .map(|(k, v)| {
                if k == crate::spec::LABEL {
                    v.clone()
                } else {
                    format!("{k}={v}")
                }
            })
            .collect();
        let x = x_of(p, &mut categories);
        let name = rest.join(", ");
        match groups.iter_mut().find(|(g, _)| *g == name) {
            Some((_, v)) => v.push((x, p)),
            None => groups.push((name, vec![(x, p)])),
        }
    }
    let xs: Vec<f64> = groups
        .iter()
        .flat_map(|(_, v)| v.iter().map(|(x, _)| *x))
        .collect();
    // A numeric sweep over a decade or more (txqueuelen 1000 … 16000, buffers 64 KiB … 16 MiB)
    // goes on a log axis, by the same rule as goodput, or its small values crowd one corner.
    let log = numeric_x && xs.iter().all(|x| *x > 0.0) && spans_decades(xs.iter().copied());
    // Goodput spanning decades (a 4 KiB buffer beside a free path) goes on a log axis, or the
    // small values sit on the zero line.
    let y_log = spans_decades(
        points
            .iter()
            .filter_map(|p| p.goodput_bps.as_ref().map(|g| g.mean)),
    );
    let x_label = if numeric_x || x_key.as_deref() != Some(crate::spec::LABEL) {
        x_label
    } else {
        "point".to_string()
    };
    let mut chart = Chart::new(title, x_label, "goodput (bit/s)")
        .x_log(log)
        .y_log(y_log);
    let measured_max = points
        .iter()
        .filter_map(|p| p.goodput_bps.as_ref().map(|g| g.ci95_high.unwrap_or(g.max)))
        .fold(0.0, f64::max);
    if measured_max > 0.0 {
        chart = chart.y_max(measured_max * if y_log { 3.0 } else { 1.6 });
    }
    if !numeric_x {
        // Categories: bars grouped by the other settings, wide enough to read.
        let bars = categories.len() * groups.len().max(1);
        chart = chart.size((bars as u32 * 22 + 160).clamp(720, 960), 400);
    }
    chart = with_series(chart, groups, numeric_x);
    if !numeric_x && x_key.is_some() {
        chart = chart.x_ticks(
            categories
                .iter()
                .enumerate()
                .map(|(i, c)| (i as f64, c.clone()))
                .collect(),
        );
    }
    let rates: Vec<f64> = points
        .iter()
        .filter_map(|p| p.theory.path_rate_bps)
        .collect();
    if let Some(r) = rates.first().filter(|r| rates.iter().all(|x| x == *r)) {
        chart = chart.reference("path rate", *r);
    }
    chart
}

/// The points with the x axis' setting first in `varied`: the first swept setting that is a
/// number at every point and takes at least three values (a buffer size rather than a
/// congestion control's name); the other settings make one series per combination.
fn x_axis_first(points: &[PointSummary]) -> Cow<'_, [PointSummary]> {
    let keys: Vec<String> = points
        .first()
        .map(|p| p.varied.iter().map(|(k, _)| k.clone()).collect())
        .unwrap_or_default();
    let values_of = |i: usize| -> std::collections::BTreeSet<&str> {
        points
            .iter()
            .filter_map(|p| p.varied.get(i).map(|(_, v)| v.as_str()))
            .collect()
    };
    // Without a numeric axis, the categories with the most values go along x (bars grouped by
    // the other settings).
    let axis = (0..keys.len())
        .find(|&i| {
            let values = values_of(i);
            values.len() >= 3 && values.iter().all(|v| numeric(&keys[i], v).is_some())
        })
        .or_else(|| (0..keys.len()).max_by_key(|&i| (values_of(i).len(), std::cmp::Reverse(i))));
    match axis {
        Some(i) if i > 0 => Cow::Owned(
            points
                .iter()
                .map(|p| {
                    let mut q = p.clone();
                    let x = q.varied.remove(i);
                    q.varied.insert(0, x);
                    q
                })
                .collect(),
        ),
        _ => Cow::Borrowed(points),
    }
}

/// One group of points: the other settings' values and each point at its x.
type Group<'a> = (String, Vec<(f64, &'a PointSummary)>);

/// Each group's measured goodput (mean with its 95% CI) and, over a numeric axis, its
/// expectation dashed beside it, in one colour per group.
fn with_series(mut chart: Chart, groups: Vec<Group<'_>>, numeric_x: bool) -> Chart {
    let style = if numeric_x {
        Style::LinePoints
    } else {
        Style::Bars
    };
    for (i, (name, mut pts)) in groups.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = PALETTE[i % PALETTE.len()];
        let measured: Vec<P> = pts
            .iter()
            .filter_map(|(x, p)| {
                let g = p.goodput_bps.as_ref()?;
                Some(match (g.ci95_low, g.ci95_high) {
                    (Some(l), Some(h)) => P::with_err(*x, g.mean, l, h),
                    _ => P::new(*x, g.mean),
                })
            })
            .collect();
        let label = if name.is_empty() {
            "measured (mean, 95% CI)".to_string()
        } else {
            format!("{name} (mean, 95% CI)")
        };
        chart = chart.series(Series::new(label, style, measured).color(color));
        let expected: Vec<P> = pts
            .iter()
            .filter_map(|(x, p)| Some(P::new(*x, p.theory.expected_bps?)))
            .collect();
        // Over categories a dashed line would join unrelated points: the table gives them.
        if !expected.is_empty() && numeric_x {
            let label = if name.is_empty() {
                "expected: min(payload rate, window/RTT, Mathis)".to_string()
            } else {
                format!("{name}: expected")
            };
            chart = chart.series(Series::new(label, Style::Dashed, expected).color(color));
        }
    }
    chart
}
