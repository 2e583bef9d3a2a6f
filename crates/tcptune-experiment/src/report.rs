//! Statistics per sweep point, `summary.csv`, and the self-contained HTML report with its SVG
//! plots: goodput against the swept setting with 95% CI bars and the theory beside it (path
//! rate, window/RTT for the configured receive buffer, Mathis for the configured loss), the
//! time series of each point, the statistics table, the diagnosis of each point, the spec and
//! the environment. Everything is read back from the results directory, so `tcptune report
//! DIR` can redraw a report at any time.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_model::goodput::goodput_ceiling;
use tcptune_model::mathis::{mathis_bps, MathisConstant};
use tcptune_model::{Bytes, Dur, Probability, Rate};
use tcptune_report::html::{Block, Page};
use tcptune_report::stats::{summarize as stats, Summary};
use tcptune_report::svg::{
    spans_decades, Cell as HeatCell, Chart, Heatmap, Point as P, Series, Style, PALETTE,
};

use crate::plan::Point;
use crate::run::{load_plan, load_records, RunError, SeriesSample, StoredPlan, TrialRecord};
use crate::settings::Settings;

/// What the models expect for a point's settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct Theory {
    /// Rate of the link in the data's direction.
    pub path_rate_bps: Option<f64>,
    /// Round trip of the link (both one-way delays).
    pub rtt_s: Option<f64>,
    /// Receive window / RTT, for a configured receive buffer.
    pub window_bound_bps: Option<f64>,
    /// Mathis et al. (C = √(3/2)) for the configured loss.
    pub mathis_bps: Option<f64>,
    /// The smallest of the payload share of the path rate, the window bound and Mathis: what
    /// the point should reach.
    pub expected_bps: Option<f64>,
}

/// The statistics of one sweep point.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PointSummary {
    pub index: usize,
    pub label: String,
    pub varied: Vec<(String, String)>,
    /// Goodput over the measured (not warm-up) trials, bits per second.
    pub goodput_bps: Option<Summary>,
    pub retransmits_mean: Option<f64>,
    pub rtt_min_s_mean: Option<f64>,
    /// Mean over trials of the sender's largest send buffer and the receiver's largest
    /// receive buffer (the memory the connection was granted), bytes.
    pub sndbuf_peak_mean: Option<f64>,
    pub rcvbuf_peak_mean: Option<f64>,
    pub limits_mean: Option<crate::run::LimitShares>,
    /// The limit class of most of the point's trials, from the diagnosis engine (see [`point_verdict`]).
    pub verdict: Option<String>,
    /// The engine's diagnosis of one trial of that class, evidence included (the sentence a
    /// reader checks the verdict against: a send-buffer limit shows as a full send buffer,
    /// not as the kernel's sndbuf-limited time, which counts only a blocked writer).
    pub evidence: Option<String>,
    pub failures: usize,
    /// Why the point's trials failed: each distinct error once, with how many times.
    pub failure_causes: Vec<String>,
    pub theory: Theory,
}

fn get<'a>(s: &'a Settings, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| s.get(*k).map(String::as_str))
}

/// Which way the data flows: "upload" (client sends) unless the workload says otherwise; an
/// HTTP workload downloads.
fn direction(s: &Settings) -> &str {
    match (
        s.get("workload.direction").map(String::as_str),
        s.get("workload.kind").map(String::as_str),
    ) {
        (Some(d), _) => d,
        (None, Some("http")) => "download",
        _ => "upload",
    }
}

/// The models' expectations for one point.
pub fn theory(s: &Settings) -> Theory {
    let down = direction(s) == "download";
    let (dir, receiver) = if down {
        ("down", "client")
    } else {
        ("up", "server")
    };
    let link = |k: &str| get(s, &[&format!("link.{dir}.{k}"), &format!("link.{k}")]);
    let rate = link("rate")
        .and_then(|v| v.parse::<Rate>().ok())
        .map(Rate::bps);
    // Each direction's one-way delay; a link `rtt` counts half in each direction.
    let delay = |d: &str| {
        get(s, &[&format!("link.{d}.delay"), "link.delay"])
            .and_then(|v| v.parse::<Dur>().ok())
            .or_else(|| {
                get(s, &[&format!("link.{d}.rtt"), "link.rtt"])
                    .and_then(|v| v.parse::<Dur>().ok())
                    .map(|r| Dur::from_nanos(r.nanos() / 2))
            })
            .unwrap_or(Dur::ZERO)
    };
    let rtt = delay("up").secs() + delay("down").secs();
    let rtt_s = (rtt > 0.0).then_some(rtt);
    // The window a receiver can advertise: an explicit SO_RCVBUF v gives 2v × ratio; autotuning
    // grows to tcp_rmem[2] × ratio. The ratio is taken as ½ (6.6+ kernels' floor).
    let window = match s.get("workload.window") {
        Some(v) => v.parse::<Bytes>().ok().map(|b| b.get() as f64),
        None => s
            .get(&format!("{receiver}.sysctl.net.ipv4.tcp_rmem"))
            .and_then(|v| v.split_whitespace().nth(2)?.parse::<f64>().ok())
            .map(|max| max / 2.0),
    };
    let window_bound_bps = window.zip(rtt_s).map(|(w, r)| w * 8.0 / r);
    // The path MTU: the smaller of the hosts' MTUs when set, else Ethernet's 1500.
    let mtu = ["client.mtu", "server.mtu"]
        .iter()
        .filter_map(|k| s.get(*k)?.parse::<f64>().ok())
        .reduce(f64::min)
        .unwrap_or(1500.0);
    let timestamps_off = ["client", "server"].iter().any(|h| {
        s.get(&format!("{h}.sysctl.net.ipv4.tcp_timestamps"))
            .map(String::as_str)
            == Some("0")
    });
    let mss = mtu - if timestamps_off { 40.0 } else { 52.0 };
    let loss = link("loss")
        .and_then(|v| v.parse::<Probability>().ok())
        .map(Probability::get)
        .filter(|p| *p > 0.0);
    let mathis_bps = loss.zip(rtt_s).map(|(p, r)| {
        mathis_bps(
            Bytes::new(mss as u64),
            Dur::from_secs_f64(r),
            p,
            MathisConstant::Periodic.value(),
        )
    });
    // TCP payload's share of the wire rate: MSS of every MTU plus the link's per-packet
    // overhead (the emulator counts 14 bytes, an Ethernet header, unless told otherwise).
    let overhead = link("overhead")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(14.0);
    let payload_rate = rate.map(|r| {
        goodput_ceiling(
            Rate::from_bps(r),
            mss as u32,
            (mtu - mss) as u32,
            overhead.max(0.0) as u32,
        )
        .bps()
    });
    let expected_bps = [payload_rate, window_bound_bps, mathis_bps]
        .into_iter()
        .flatten()
        .reduce(f64::min);
    Theory {
        path_rate_bps: rate,
        rtt_s,
        window_bound_bps,
        mathis_bps,
        expected_bps,
    }
}

/// Statistics per point from the recorded trials (warm-ups and failures excluded).
pub fn summarize(plan: &StoredPlan, records: &[TrialRecord]) -> Vec<PointSummary> {
    plan.points
        .iter()
        .map(|p| {
            let ok: Vec<&crate::run::Measurement> = records
                .iter()
                .filter(|r| r.point == p.index && !r.warmup)
                .filter_map(|r| r.result.as_ref())
                .collect();
            let failures = records
                .iter()
                .filter(|r| r.point == p.index && !r.warmup && r.error.is_some())
                .count();
            let mean =
                |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
            let limits: Vec<_> = ok.iter().filter_map(|m| m.limits.as_ref()).collect();
            let limits_mean = (!limits.is_empty()).then(|| {
                let n = limits.len() as f64;
                crate::run::LimitShares {
                    rwnd: limits.iter().map(|l| l.rwnd).sum::<f64>() / n,
                    sndbuf: limits.iter().map(|l| l.sndbuf).sum::<f64>() / n,
                    cwnd: limits.iter().map(|l| l.cwnd).sum::<f64>() / n,
                    app: limits.iter().map(|l| l.app).sum::<f64>() / n,
                }
            });
            PointSummary {
                index: p.index,
                label: p.label(),
                // What names the point: a row label stands for the settings of its group.
                varied: p
                    .varied
                    .iter()
                    .filter(|(k, _)| !p.labelled(k))
                    .cloned()
                    .collect(),
                goodput_bps: stats(&ok.iter().map(|m| m.goodput_bps).collect::<Vec<_>>()),
                retransmits_mean: mean(
                    ok.iter()
                        .filter_map(|m| m.retransmits.map(|r| r as f64))
                        .collect(),
                ),
                rtt_min_s_mean: mean(ok.iter().filter_map(|m| m.rtt_min_s).collect()),
                sndbuf_peak_mean: mean(
                    ok.iter()
                        .filter_map(|m| m.sndbuf_peak_bytes.map(|b| b as f64))
                        .collect(),
                ),
                rcvbuf_peak_mean: mean(
                    ok.iter()
                        .filter_map(|m| m.rcvbuf_peak_bytes.map(|b| b as f64))
                        .collect(),
                ),
                limits_mean,
                verdict: point_verdict(&ok),
                evidence: point_evidence(&ok),
                failures,
                failure_causes: failure_causes(
                    records.iter().filter(|r| r.point == p.index && !r.warmup),
                )
                .into_iter()
                .map(|(c, n)| format!("{n}× {c}"))
                .collect(),
                theory: theory(&p.settings),
            }
        })
        .collect()
}

/// The point's verdict: the limit class of most of its trials (ties go to the class with the
/// larger summed share of time), with how many trials and their mean share. Trials recorded
/// before classes were kept count by their verdict's leading label.
pub fn point_verdict(trials: &[&crate::run::Measurement]) -> Option<String> {
    let (l, n, share) = dominant(trials)?;
    let share = share
        .map(|s| format!(", mean share {:.0}%", s * 100.0))
        .unwrap_or_default();
    Some(format!(
        "{} ({n} of {} trials{share})",
        l.label(),
        trials.len()
    ))
}

/// The engine's sentence for the first trial of the point's dominant class (see
/// [`point_verdict`]), evidence included; None when no trial has one.
pub fn point_evidence(trials: &[&crate::run::Measurement]) -> Option<String> {
    let (l, _, _) = dominant(trials)?;
    trials
        .iter()
        .find(|m| trial_class(m) == Some(l))
        .and_then(|m| m.verdict.clone())
}

/// A trial's limit class; trials recorded before classes were kept count by their verdict's
/// leading label.
fn trial_class(m: &crate::run::Measurement) -> Option<tcptune_diagnose::Limit> {
    m.limit.or_else(|| {
        let v = m.verdict.as_deref()?;
        tcptune_diagnose::Limit::ALL
            .into_iter()
            .find(|l| v.starts_with(l.label()))
    })
}

/// The class of most trials (ties to the larger summed share of time), how many trials have
/// it and their mean share where the engine gave one.
fn dominant(
    trials: &[&crate::run::Measurement],
) -> Option<(tcptune_diagnose::Limit, usize, Option<f64>)> {
    let mut by: Vec<(tcptune_diagnose::Limit, usize, f64, usize)> = Vec::new();
    for m in trials {
        let Some(l) = trial_class(m) else { continue };
        let share = m.limit_share;
        match by.iter_mut().find(|x| x.0 == l) {
            Some(x) => {
                x.1 += 1;
                if let Some(s) = share {
                    x.2 += s;
                    x.3 += 1;
                }
            }
            None => by.push((l, 1, share.unwrap_or(0.0), share.is_some() as usize)),
        }
    }
    let (l, n, sum, with_share) = by
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(a.2.total_cmp(&b.2)))?;
    Some((l, n, (with_share > 0).then(|| sum / with_share as f64)))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `summary.csv`: one row per point, one column per swept setting, then the statistics.
pub fn summary_csv(points: &[PointSummary]) -> String {
    let keys: Vec<&str> = points
        .first()
        .map(|p| p.varied.iter().map(|(k, _)| k.as_str()).collect())
        .unwrap_or_default();
    let mut out = String::from("point");
    for k in &keys {
        out.push(',');
        out.push_str(&csv_field(k));
    }
    out.push_str(",n,mean_bps,sd_bps,ci95_low_bps,ci95_high_bps,median_bps,min_bps,max_bps,retransmits_mean,rtt_min_s_mean,sndbuf_peak_bytes_mean,rcvbuf_peak_bytes_mean,expected_bps,failures,verdict,failure_causes\n");
    let f = |v: Option<f64>| v.map(|x| format!("{x:.6}")).unwrap_or_default();
    for p in points {
        out.push_str(&p.index.to_string());
        for (_, v) in &p.varied {
            out.push(',');
            out.push_str(&csv_field(v));
        }
        let g = p.goodput_bps.as_ref();
        out.push_str(&format!(
            ",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            g.map(|g| g.n).unwrap_or(0),
            f(g.map(|g| g.mean)),
            f(g.and_then(|g| g.sd)),
            f(g.and_then(|g| g.ci95_low)),
            f(g.and_then(|g| g.ci95_high)),
            f(g.map(|g| g.median)),
            f(g.map(|g| g.min)),
            f(g.map(|g| g.max)),
            f(p.retransmits_mean),
            f(p.rtt_min_s_mean),
            f(p.sndbuf_peak_mean),
            f(p.rcvbuf_peak_mean),
            f(p.theory.expected_bps),
            p.failures,
            csv_field(p.verdict.as_deref().unwrap_or("")),
            csv_field(&p.failure_causes.join("; ")),
        ));
    }
    out
}

/// A swept value as a number for the x axis, with the axis' unit.
fn numeric(key: &str, value: &str) -> Option<(f64, &'static str)> {
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
fn goodput_chart(points: &[PointSummary], title: &str) -> Chart {
    // The x axis is the first swept setting that is a number at every point and takes at least
    // three values (a buffer size rather than a congestion control's name); the other settings
    // make one series per combination.
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
    let reordered: Vec<PointSummary>;
    let points: &[PointSummary] = match axis {
        Some(i) if i > 0 => {
            reordered = points
                .iter()
                .map(|p| {
                    let mut q = p.clone();
                    let x = q.varied.remove(i);
                    q.varied.insert(0, x);
                    q
                })
                .collect();
            &reordered
        }
        _ => points,
    };
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
    let mut groups: Vec<(String, Vec<(f64, &PointSummary)>)> = Vec::new();
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

/// For a sweep of exactly two settings that are both categories (an impairment × a buffer
/// limit), a table-heatmap: every combination as a cell with its mean and 95% CI, coloured by
/// the mean. Grouped bars of such a sweep read only through a legend's colours. The setting
/// with more values goes across.
fn goodput_heatmap(points: &[PointSummary], title: &str) -> Option<Heatmap> {
    let first = points.first()?;
    if first.varied.len() != 2 || points.iter().any(|p| p.varied.len() != 2) {
        return None;
    }
    let values = |i: usize| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in points {
            if !out.contains(&p.varied[i].1) {
                out.push(p.varied[i].1.clone());
            }
        }
        out
    };
    let categorical = |i: usize| {
        points
            .iter()
            .any(|p| numeric(&p.varied[i].0, &p.varied[i].1).is_none())
    };
    if !categorical(0) || !categorical(1) {
        return None;
    }
    let (r, c) = if values(0).len() > values(1).len() {
        (1, 0)
    } else {
        (0, 1)
    };
    let (rows, cols) = (values(r), values(c));
    let name = |i: usize| {
        let k = &first.varied[i].0;
        if k == crate::spec::LABEL {
            String::new()
        } else {
            k.clone()
        }
    };
    let cells = rows
        .iter()
        .map(|rv| {
            cols.iter()
                .map(|cv| {
                    let p = points
                        .iter()
                        .find(|p| &p.varied[r].1 == rv && &p.varied[c].1 == cv)?;
                    let g = p.goodput_bps.as_ref()?;
                    let mut text = vec![format!("{} Mbit/s", mbit(g.mean))];
                    if let (Some(l), Some(h)) = (g.ci95_low, g.ci95_high) {
                        text.push(format!("{} – {}", mbit(l.max(0.0)), mbit(h)));
                    }
                    if p.failures > 0 {
                        text.push(format!("n = {}, {} failed", g.n, p.failures));
                    }
                    Some(HeatCell {
                        value: g.mean,
                        text,
                    })
                })
                .collect()
        })
        .collect();
    Some(Heatmap {
        title: title.to_string(),
        row_label: name(r),
        col_label: name(c),
        value_label: "mean goodput (bit/s)".into(),
        rows,
        cols,
        cells,
    })
}

/// What the link did to a trial's data direction, from the emulator's counters
/// (`Measurement.link`): shares of the packets that entered the link.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Realised {
    pub packets: f64,
    pub lost: f64,
    pub duplicated: f64,
    pub corrupted: f64,
    pub reordered: f64,
    /// Drops at the queue (its packet or byte limit, or netem's `limit`), packets.
    pub queue_drops: f64,
    /// Bytes that left the link over the transfer's duration, bit/s.
    pub rate_bps: f64,
}

/// The data direction's counters of one trial; `None` where the backend keeps none (netem's
/// qdiscs count differently) or nothing crossed.
pub fn realised(m: &crate::run::Measurement, download: bool) -> Option<Realised> {
    let d = m.link.as_ref()?.get(if download { "down" } else { "up" })?;
    let n = |k: &str| d.get(k).and_then(serde_json::Value::as_f64);
    let packets = n("packets_in").filter(|p| *p > 0.0)?;
    Some(Realised {
        packets,
        lost: n("dropped_loss")? / packets,
        duplicated: n("duplicated")? / packets,
        corrupted: n("corrupted")? / packets,
        reordered: n("reordered")? / packets,
        queue_drops: n("dropped_queue")? + n("dropped_limit").unwrap_or(0.0),
        rate_bps: n("bytes_out")? * 8.0 / m.duration_s.max(1e-9),
    })
}

/// The realised-impairment table: per point, the configured value of each impairment in the
/// data's direction beside the mean of what the link did in the point's trials.
fn realised_table(plan: &StoredPlan, records: &[TrialRecord]) -> Option<Block> {
    let mut rows = Vec::new();
    for p in &plan.points {
        let s = &p.settings;
        let down = direction(s) == "download";
        let dir = if down { "down" } else { "up" };
        let set =
            |k: &str| get(s, &[&format!("link.{dir}.{k}"), &format!("link.{k}")]).unwrap_or("0");
        let r: Vec<Realised> = records
            .iter()
            .filter(|r| r.point == p.index && !r.warmup)
            .filter_map(|r| realised(r.result.as_ref()?, down))
            .collect();
        if r.is_empty() {
            continue;
        }
        let mean = |f: fn(&Realised) -> f64| r.iter().map(f).sum::<f64>() / r.len() as f64;
        let pct =
            |f: fn(&Realised) -> f64, k: &str| format!("{:.2}% (set {})", mean(f) * 100.0, set(k));
        rows.push(vec![
            p.label(),
            r.len().to_string(),
            format!("{:.0}", mean(|r| r.packets)),
            pct(|r| r.lost, "loss"),
            pct(|r| r.duplicated, "duplicate"),
            pct(|r| r.corrupted, "corrupt"),
            pct(|r| r.reordered, "reorder"),
            format!("{:.0}", mean(|r| r.queue_drops)),
            format!("{} (set {})", mbit(mean(|r| r.rate_bps)), set("rate")),
        ]);
    }
    (!rows.is_empty()).then(|| Block::Table {
        header: [
            "point",
            "trials",
            "packets",
            "lost",
            "duplicated",
            "corrupted",
            "reordered",
            "queue drops",
            "Mbit/s out",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

/// The two-point join's table (trials captured at both ends): the data direction's
/// impairments as configured, as the emulator counted them and as the join found them.
fn join_table(plan: &StoredPlan, records: &[TrialRecord]) -> Option<Block> {
    crate::join::table(plan, records, |p| {
        let s = &p.settings;
        let down = direction(s) == "download";
        let dir = if down { "down" } else { "up" };
        let set = |k: &str| get(s, &[&format!("link.{dir}.{k}"), &format!("link.{k}")]);
        let delay = match (set("delay"), set("jitter")) {
            (Some(d), Some(j)) => format!(
                "{d} ± {j} ({}, {})",
                set("distribution").unwrap_or("uniform"),
                set("jitter_order").unwrap_or("reorder")
            ),
            (Some(d), None) => d.to_string(),
            (None, _) => set("rtt").map_or("0".into(), |r| format!("rtt {r} / 2")),
        };
        (
            down,
            [
                set("loss").unwrap_or("0").to_string(),
                set("duplicate").unwrap_or("0").to_string(),
                set("reorder").unwrap_or("0").to_string(),
                delay,
            ],
        )
    })
}

/// One row per failed trial: which, where, after how long, and why.
fn failures_table(plan: &StoredPlan, records: &[TrialRecord]) -> Option<Block> {
    let rows: Vec<Vec<String>> = records
        .iter()
        .filter_map(|r| {
            let e = r.error.as_ref()?;
            let label = plan
                .points
                .get(r.point)
                .map(Point::label)
                .unwrap_or_default();
            let retried = records.iter().any(|o| o.id == r.id && o.result.is_some());
            Some(vec![
                r.id.clone(),
                label,
                format!("{:.1}", r.wall_s),
                if retried { "yes" } else { "no" }.into(),
                e.chars().take(400).collect(),
            ])
        })
        .collect();
    (!rows.is_empty()).then(|| Block::Table {
        header: ["trial", "point", "after s", "a retry succeeded", "error"]
            .map(String::from)
            .to_vec(),
        rows,
    })
}

/// Distinct failure causes with their counts, for the one-line summary.
fn failure_causes<'a>(records: impl IntoIterator<Item = &'a TrialRecord>) -> Vec<(String, usize)> {
    let mut causes: Vec<(String, usize)> = Vec::new();
    for e in records.into_iter().filter_map(|r| r.error.as_deref()) {
        // The cause without the command line that precedes it (quoted arguments).
        let short = e
            .rsplit_once("\" failed")
            .map(|(_, why)| format!("failed{why}"))
            .unwrap_or_else(|| e.to_string());
        let short: String = short.chars().take(160).collect();
        match causes.iter_mut().find(|(c, _)| *c == short) {
            Some(c) => c.1 += 1,
            None => causes.push((short, 1)),
        }
    }
    causes
}

fn read_series(dir: &Path, rel: &str) -> Vec<SeriesSample> {
    std::fs::read_to_string(dir.join(rel))
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A chart with its file stem and caption.
type NamedChart = (String, String, Chart);

/// Time series of every point: per point three small charts (goodput, congestion and
/// receive window, RTT) with every measured trial of the point as its own line, named by its
/// repetition. Returns (file stem, caption, chart) per chart.
fn time_charts(dir: &Path, plan: &StoredPlan, records: &[TrialRecord]) -> Vec<NamedChart> {
    let mut out = Vec::new();
    for p in &plan.points {
        let mut trials: Vec<(&TrialRecord, Vec<SeriesSample>)> = records
            .iter()
            .filter(|r| r.point == p.index && !r.warmup)
            .filter_map(|r| {
                let rel = r.result.as_ref()?.series.as_deref()?;
                let samples = read_series(dir, rel);
                (!samples.is_empty()).then_some((r, samples))
            })
            .collect();
        // In repetition order, so a repetition has the same colour at every point.
        trials.sort_by_key(|(r, _)| r.rep);
        if trials.is_empty() {
            continue;
        }
        let small = |title: &str, y: &str| {
            Chart::new(title, "time (s)", y)
                .size(330, 230)
                .y_from_zero(true)
        };
        let mut goodput = small("goodput", "bit/s");
        let mut windows = small("cwnd (solid), rwnd (dashed)", "bytes");
        let mut rtt = small("smoothed RTT", "ms");
        for (i, (r, samples)) in trials.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let name = r
                .rep
                .map(|n| format!("r{n:02}"))
                .unwrap_or_else(|| r.id.clone());
            let pts = |f: &dyn Fn(&SeriesSample) -> Option<f64>| {
                samples
                    .iter()
                    .filter_map(|s| Some(P::new(s.t_s, f(s)?)))
                    .collect::<Vec<_>>()
            };
            goodput = goodput.series(
                Series::new(name.clone(), Style::Line, pts(&|s| s.goodput_bps)).color(color),
            );
            windows = windows
                .series(
                    Series::new(
                        name.clone(),
                        Style::Step,
                        pts(&|s| s.snd_cwnd_bytes.map(|v| v as f64)),
                    )
                    .color(color),
                )
                .series(
                    // Unnamed: the trial's colour and the title ("rwnd dashed") say whose it is,
                    // and a legend of two entries per trial would dwarf the chart.
                    Series::new(
                        String::new(),
                        Style::Dashed,
                        pts(&|s| s.rwnd_bytes.map(|v| v as f64)),
                    )
                    .color(color),
                );
            rtt = rtt.series(
                Series::new(name, Style::Line, pts(&|s| s.rtt_s.map(|v| v * 1e3))).color(color),
            );
        }
        let label = p.label();
        for (kind, chart) in [("goodput", goodput), ("windows", windows), ("rtt", rtt)] {
            out.push((
                format!("p{:03}-{kind}-time", p.index),
                format!("p{:03} {label}: {kind}", p.index),
                chart,
            ));
        }
    }
    out
}

/// What the captures show, per point: the Wireshark flags the seed 004 notebook looked at
/// (mean per captured trial), and the time-sequence, window and RTT graphs of the point's
/// first captured trial, from the `analyze` library. Returns the table and the graphs as
/// (file stem, caption, chart); nothing when no trial kept a capture.
fn capture_analysis(
    dir: &Path,
    plan: &StoredPlan,
    records: &[TrialRecord],
) -> Option<(Block, Vec<NamedChart>)> {
    use tcptune_analyze::{analyze_reader, Options};
    let mut rows = Vec::new();
    let mut charts = Vec::new();
    for p in &plan.points {
        let mut captured: Vec<(&TrialRecord, &str)> = records
            .iter()
            .filter(|r| r.point == p.index && !r.warmup)
            .filter_map(|r| Some((r, r.result.as_ref()?.capture.as_deref()?)))
            .collect();
        captured.sort_by_key(|(r, _)| r.rep);
        let mut sums = [0u64; 8];
        let mut n = 0u64;
        let mut problems = Vec::new();
        for (k, (r, rel)) in captured.iter().enumerate() {
            let path = dir.join(rel);
            let file = match std::fs::File::open(&path) {
                Ok(f) => std::io::BufReader::new(f),
                Err(e) => {
                    problems.push(format!("{rel}: {e}"));
                    continue;
                }
            };
            let opts = Options {
                packets: false,
                series: k == 0,
            };
            let done = match analyze_reader(file, rel, opts) {
                Ok(d) => d,
                Err(e) => {
                    problems.push(format!("{rel}: {e}"));
                    continue;
                }
            };
            let f = &done.report.flags;
            for (sum, v) in sums.iter_mut().zip([
                f.duplicate_ack,
                f.retransmission,
                f.fast_retransmission,
                f.plain_retransmission,
                f.spurious_retransmission,
                f.out_of_order,
                f.zero_window,
                f.window_full,
            ]) {
                *sum += v;
            }
            n += 1;
            if k == 0 {
                for (_, suffix, mut chart) in tcptune_analyze::svg::flow_charts(&done, 1) {
                    if suffix == "throughput" {
                        continue; // the sampled goodput over time is beside it already
                    }
                    chart.width = 330;
                    chart.height = 250;
                    // The caption names the point and trial; the small chart names the graph.
                    chart.title = match suffix {
                        "tseq" => "time-sequence",
                        "rtt" => "RTT samples",
                        _ => "receive window, bytes in flight",
                    }
                    .into();
                    charts.push((
                        format!("p{:03}-capture-{suffix}", p.index),
                        format!("p{:03} {}: {suffix} of {}", p.index, p.label(), r.id),
                        chart,
                    ));
                }
            }
        }
        if captured.is_empty() {
            continue;
        }
        let mean = |v: u64| {
            if n == 0 {
                String::new()
            } else {
                format!("{:.1}", v as f64 / n as f64)
            }
        };
        let mut row = vec![p.label(), n.to_string()];
        row.extend(sums.iter().map(|v| mean(*v)));
        row.push(problems.join("; "));
        rows.push(row);
    }
    (!rows.is_empty()).then(|| {
        (
            Block::Table {
                header: [
                    "point",
                    "captures",
                    "dup ACKs",
                    "retransmissions",
                    "fast",
                    "other (timeouts)",
                    "spurious",
                    "out-of-order",
                    "zero window",
                    "window full",
                    "unreadable",
                ]
                .map(String::from)
                .to_vec(),
                rows,
            },
            charts,
        )
    })
}

/// Files the report wrote.
#[derive(Debug, Clone)]
pub struct ReportFiles {
    pub html: PathBuf,
    pub summary_csv: PathBuf,
    pub plots: Vec<PathBuf>,
    pub points: Vec<PointSummary>,
}

// What `tcptune report` (and the end of `lab run`) prints; its doc line is its JSON Schema's
// description (schema/report.json).
/// The files written and the statistics of each sweep point.
#[derive(Serialize, JsonSchema)]
pub struct ReportResult {
    pub html: String,
    pub summary_csv: String,
    pub plots: Vec<String>,
    pub points: Vec<PointSummary>,
}

impl std::fmt::Display for ReportResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<48} {:>4} {:>10} {:>21} {:>10}  verdict",
            "point", "n", "mean Mb/s", "95% CI", "expected"
        )?;
        for p in &self.points {
            let g = p.goodput_bps.as_ref();
            let ci = g
                .and_then(|g| {
                    Some(format!(
                        "{:.2} – {:.2}",
                        g.ci95_low?.max(0.0) / 1e6,
                        g.ci95_high? / 1e6
                    ))
                })
                .unwrap_or_default();
            writeln!(
                f,
                "{:<48} {:>4} {:>10} {:>21} {:>10}  {}",
                p.label,
                g.map(|g| g.n).unwrap_or(0),
                g.map(|g| format!("{:.2}", g.mean / 1e6))
                    .unwrap_or_default(),
                ci,
                p.theory
                    .expected_bps
                    .map(|e| format!("{:.2}", e / 1e6))
                    .unwrap_or_default(),
                p.verdict.as_deref().unwrap_or("—")
            )?;
        }
        for p in self.points.iter().filter(|p| p.failures > 0) {
            writeln!(
                f,
                "{}: {} trial(s) failed: {}",
                p.label,
                p.failures,
                p.failure_causes.join("; ")
            )?;
        }
        writeln!(f, "\nreport: {}\nsummary: {}", self.html, self.summary_csv)
    }
}

impl From<ReportFiles> for ReportResult {
    fn from(files: ReportFiles) -> ReportResult {
        ReportResult {
            html: files.html.display().to_string(),
            summary_csv: files.summary_csv.display().to_string(),
            plots: files
                .plots
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            points: files.points,
        }
    }
}

fn mbit(v: f64) -> String {
    format!("{:.2}", v / 1e6)
}

/// Writes `summary.csv`, `plots/*.svg` and `report.html` for a results directory.
pub fn write_report(dir: &Path) -> Result<ReportFiles, RunError> {
    let plan = load_plan(dir)?;
    let records = load_records(dir)?;
    let points = summarize(&plan, &records);
    let io = |p: &Path| {
        let p = p.display().to_string();
        move |cause| RunError::Io { path: p, cause }
    };
    let csv_path = dir.join("summary.csv");
    std::fs::write(&csv_path, summary_csv(&points)).map_err(io(&csv_path))?;
    let plots_dir = dir.join("plots");
    std::fs::create_dir_all(&plots_dir).map_err(io(&plots_dir))?;

    let title = format!("{}: goodput", plan.name);
    let heatmap = goodput_heatmap(&points, &title);
    let goodput_svg = match &heatmap {
        Some(h) => h.render(),
        None => goodput_chart(&points, &title).render(),
    };
    let mut plots = Vec::new();
    let path = plots_dir.join("goodput.svg");
    std::fs::write(&path, &goodput_svg).map_err(io(&path))?;
    plots.push(path);
    let mut over_time = Vec::new();
    for (stem, caption, chart) in time_charts(dir, &plan, &records) {
        let svg = chart.render();
        let path = plots_dir.join(format!("{stem}.svg"));
        std::fs::write(&path, &svg).map_err(io(&path))?;
        plots.push(path);
        over_time.push((caption, svg));
    }

    let captures = capture_analysis(dir, &plan, &records);
    let mut capture_figs = Vec::new();
    if let Some((_, charts)) = &captures {
        for (stem, caption, chart) in charts {
            let svg = chart.render();
            let path = plots_dir.join(format!("{stem}.svg"));
            std::fs::write(&path, &svg).map_err(io(&path))?;
            plots.push(path);
            capture_figs.push((caption.clone(), svg));
        }
    }
    let measured = records
        .iter()
        .filter(|r| !r.warmup && r.result.is_some())
        .count();
    let failed = records.iter().filter(|r| r.error.is_some()).count();
    let causes = failure_causes(records.iter());
    let why = if causes.is_empty() {
        String::new()
    } else {
        format!(
            " Failures: {}.",
            causes
                .iter()
                .map(|(c, n)| format!("{n}× {c}"))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    let spec_text = std::fs::read_to_string(dir.join("spec.toml")).unwrap_or_default();
    let env_text = std::fs::read_to_string(dir.join("environment.json")).unwrap_or_default();
    let mut page = Page::new(format!("tcptune experiment: {}", plan.name));
    page.summary = format!(
        "{} sweep point(s), {} planned trials ({} recorded: {} measured, {} failed).{why} Goodput is the mean of the measured trials with its 95% confidence interval (Student t); warm-up trials are not counted, and a failed trial counts nowhere but here.",
        plan.points.len(),
        plan.trials.len(),
        records.len(),
        measured,
        failed
    );
    const EXPECTED: &str = "what the models expect for each point's settings, the smallest of the path's payload rate (the link rate × MSS / (MTU + per-packet overhead)), the receive window over the RTT (half the configured receive buffer, the share a 6.6+ kernel advertises at least) and the Mathis bound for the configured loss (C = √(3/2))";
    let caption = if heatmap.is_some() {
        format!("Each cell: one combination of the two swept settings, its mean goodput and the 95% CI of the mean (cut at zero), coloured by the mean. The \"expected\" column below: {EXPECTED}.")
    } else {
        format!("Expected (dashed on a numeric sweep, the \"expected\" column below): {EXPECTED}. Whiskers: the 95% CI of the mean, cut at zero.")
    };
    let figures = vec![Block::Svg(goodput_svg), Block::Text(caption)];
    page.section("Goodput against the swept setting", figures);
    if !over_time.is_empty() {
        page.section(
            "Over time, every point and every measured trial",
            vec![Block::Grid(over_time)],
        );
    }
    let rows = points
        .iter()
        .map(|p| {
            let g = p.goodput_bps.as_ref();
            vec![
                p.label.clone(),
                g.map(|g| g.n.to_string()).unwrap_or_else(|| "0".into()),
                g.map(|g| mbit(g.mean)).unwrap_or_default(),
                g.and_then(|g| g.sd).map(mbit).unwrap_or_default(),
                // Goodput is not negative: a low bound below zero (few trials, a wide spread)
                // is shown as 0, as the charts cut their whiskers.
                g.and_then(|g| {
                    Some(format!(
                        "{} – {}",
                        mbit(g.ci95_low?.max(0.0)),
                        mbit(g.ci95_high?)
                    ))
                })
                .unwrap_or_default(),
                g.map(|g| mbit(g.median)).unwrap_or_default(),
                g.map(|g| format!("{} – {}", mbit(g.min), mbit(g.max)))
                    .unwrap_or_default(),
                p.theory.expected_bps.map(mbit).unwrap_or_default(),
                p.retransmits_mean
                    .map(|r| format!("{r:.1}"))
                    .unwrap_or_default(),
                p.rtt_min_s_mean
                    .map(|r| format!("{:.2}", r * 1e3))
                    .unwrap_or_default(),
                p.failures.to_string(),
            ]
        })
        .collect();
    page.section(
        "Statistics per point (Mbit/s)",
        vec![Block::Table {
            header: [
                "point",
                "n",
                "mean",
                "SD",
                "95% CI (cut at 0)",
                "median",
                "min – max",
                "expected",
                "retrans",
                "min RTT ms",
                "failed",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }],
    );
    let diag = points
        .iter()
        .map(|p| {
            let l = p.limits_mean.as_ref();
            let share = |f: fn(&crate::run::LimitShares) -> f64| {
                l.map(|l| format!("{:.0}%", f(l) * 100.0))
                    .unwrap_or_default()
            };
            vec![
                p.label.clone(),
                p.verdict.clone().unwrap_or_else(|| "—".into()),
                p.evidence.clone().unwrap_or_default(),
                share(|l| l.rwnd),
                share(|l| l.sndbuf),
                share(|l| l.cwnd),
                share(|l| l.app),
            ]
        })
        .collect();
    page.section(
        "Diagnosis per point",
        vec![
            Block::Text("The limit is the class the diagnosis engine gave most of the point's trials; the evidence is its sentence for one of them. The last four columns are the kernel's own time shares (tcp_info's busy, rwnd-limited and sndbuf-limited times, mean over trials): the kernel counts sndbuf-limited time only while the application is blocked writing, so a send buffer that caps the window shows in the evidence (buffer full, bytes in flight against it), not there.".into()),
            Block::Table {
            header: [
                "point",
                "limit (most trials)",
                "evidence (one such trial)",
                "rwnd-limited",
                "sndbuf-limited",
                "cwnd-limited",
                "app-limited",
            ]
            .map(String::from)
            .to_vec(),
            rows: diag,
        },
        ],
    );
    if let Some((source, rows)) = crate::compare::for_results(dir) {
        page.section(
            "Seed vs measured",
            vec![
                Block::Text(format!("{source} Generated from this directory's summary.csv and the seed's figures in seed.toml; the example's README embeds the same table.")),
                Block::Table {
                    header: crate::compare::HEADER.map(String::from).to_vec(),
                    rows: rows.into_iter().map(|r| r.to_vec()).collect(),
                },
                Block::Text(crate::compare::NOTE.into()),
            ],
        );
    }
    if let Some(t) = realised_table(&plan, &records) {
        page.section(
            "What the link did (data direction, mean per trial)",
            vec![
                Block::Text("The emulator's counters beside the configured values: the share of the packets entering the link that it dropped for loss, duplicated, corrupted or reordered, its queue's drops, and the bytes that left it over the transfer's duration.".into()),
                t,
            ],
        );
    }
    if let Some(t) = join_table(&plan, &records) {
        page.section(
            "Both ends captured: the captures joined (data direction, mean per trial)",
            vec![
                Block::Text(format!("Each trial captured at both ends of the link was joined (tcptune analyze A B): packets seen at the client matched with those seen at the server. Beside each impairment as configured: what the emulator counted (packets it dropped for loss, duplicated, reordered; it counts every packet on the link, the captures only the workload's TCP) and what the join found (packets lost between the ends, extra copies, packets that arrived ahead of one sent before them). The one-way delay is the data connection's, the time in the rate's queue included ({}). Below: data lost before the link (holes at the sender's capture), the retransmissions the join found needed, and packets the sender's capture never saw.", records.iter().find_map(|r| Some(r.result.as_ref()?.join.as_ref()?.clock.clone())).unwrap_or_default())),
                t,
            ],
        );
    }
    if let Some((table, _)) = captures {
        let mut blocks = vec![
            Block::Text("Wireshark 4.0's flags in each trial's capture (tcptune analyze), mean per captured trial: duplicate ACKs, retransmissions (fast, other — after a timeout, mostly — and spurious), out-of-order segments, zero windows advertised and windows filled.".into()),
            table,
        ];
        if !capture_figs.is_empty() {
            blocks.push(Block::Text("The first captured trial of each point: its time-sequence graph (segments, ACKs, the receive window's edge, retransmissions), the advertised window with bytes in flight, and its RTT samples.".into()));
            blocks.push(Block::Grid(capture_figs));
        }
        page.section("What the captures show", blocks);
    }
    if let Some(t) = failures_table(&plan, &records) {
        page.section("Failed trials", vec![t]);
    }
    page.section("Spec", vec![Block::Pre(spec_text)]);
    page.section("Environment", vec![Block::Pre(env_text)]);
    let html_path = dir.join("report.html");
    std::fs::write(&html_path, page.render()).map_err(io(&html_path))?;
    Ok(ReportFiles {
        html: html_path,
        summary_csv: csv_path,
        plots,
        points,
    })
}

/// Points of a stored plan, for callers that only have the directory.
pub fn points_of(dir: &Path) -> Result<Vec<Point>, RunError> {
    Ok(load_plan(dir)?.points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::run;
    use crate::run::tests::{tempdir, ModelRunner, SPEC};
    use crate::settings::tests::FakeCaps;
    use crate::spec::parse;

    #[test]
    fn theory_for_a_point() {
        let mut s = Settings::new();
        s.insert("link.rate".into(), "100mbit".into());
        s.insert("link.delay".into(), "10ms".into());
        s.insert(
            "server.sysctl.net.ipv4.tcp_rmem".into(),
            "4096 65536 131072".into(),
        );
        let t = theory(&s);
        assert_eq!(t.rtt_s, Some(0.02));
        // Half of 128 KiB over 20 ms: 26.2 Mbit/s.
        assert!((t.window_bound_bps.unwrap() - 65536.0 * 8.0 / 0.02).abs() < 1e-6);
        assert_eq!(t.expected_bps, t.window_bound_bps);
        s.insert("link.loss".into(), "1%".into());
        s.insert(
            "server.sysctl.net.ipv4.tcp_rmem".into(),
            "4096 65536 67108864".into(),
        );
        let t = theory(&s);
        // Mathis: 1448 B × 8 / 20 ms × 1.2247 / 0.1 = 7.09 Mbit/s.
        assert!((t.mathis_bps.unwrap() - 1448.0 * 8.0 / 0.02 * 1.5f64.sqrt() / 0.1).abs() < 1.0);
        assert_eq!(t.expected_bps, t.mathis_bps);
        // A link rtt splits into both directions; the path's payload rate caps the expectation.
        let mut r = Settings::new();
        r.insert("link.rate".into(), "100mbit".into());
        r.insert("link.rtt".into(), "20ms".into());
        let t = theory(&r);
        assert_eq!(t.rtt_s, Some(0.02));
        assert!((t.expected_bps.unwrap() - 100e6 * 1448.0 / 1514.0).abs() < 1.0);
        // Jumbo frames carry a larger share of payload.
        r.insert("client.mtu".into(), "9000".into());
        r.insert("server.mtu".into(), "9000".into());
        assert!((theory(&r).expected_bps.unwrap() - 100e6 * 8948.0 / 9014.0).abs() < 1.0);
        // An explicit socket buffer (iperf3 -w, both ends) gives a window of about its size.
        s.insert("workload.direction".into(), "download".into());
        s.insert("workload.window".into(), "64KiB".into());
        assert!((theory(&s).window_bound_bps.unwrap() - 65536.0 * 8.0 / 0.02).abs() < 1e-6);
    }

    #[test]
    fn a_report_with_statistics_theory_and_plots() {
        let spec = parse(SPEC, &FakeCaps).unwrap();
        let dir = tempdir("report");
        run(
            &spec,
            &mut ModelRunner {
                fail_seeds: vec![],
                calls: 0,
            },
            &dir,
            &mut |_| {},
        )
        .unwrap();
        let files = write_report(&dir).unwrap();
        assert_eq!(files.points.len(), 5);
        // The model runner's goodput follows window/RTT until the path rate: every point's
        // mean lies within 3% of the expectation (the runner wobbles by ±2%).
        for p in &files.points {
            let g = p.goodput_bps.as_ref().unwrap();
            assert_eq!(g.n, 4, "warm-ups are not counted");
            let want = p.theory.expected_bps.unwrap().min(95e6);
            assert!(
                (g.mean - want).abs() / want < 0.03,
                "{}: {} vs {want}",
                p.label,
                g.mean
            );
        }
        assert_eq!(
            files.points[0].verdict.as_deref(),
            Some("receiver-window limited (4 of 4 trials, mean share 93%)")
        );
        assert_eq!(
            files.points[4].verdict.as_deref(),
            Some("at the path's capacity (4 of 4 trials)")
        );
        let csv = std::fs::read_to_string(&files.summary_csv).unwrap();
        assert_eq!(csv.lines().count(), 6);
        assert!(csv.starts_with("point,server.sysctl.net.ipv4.tcp_rmem,n,mean_bps"));
        // The receive buffer each trial had, averaged per point (the fake runner reports twice
        // the window it was limited by; the first point's buffer is the smallest).
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let col = header
            .iter()
            .position(|h| *h == "rcvbuf_peak_bytes_mean")
            .unwrap();
        let first: f64 = csv
            .lines()
            .nth(1)
            .unwrap()
            .split(',')
            .nth(col)
            .unwrap()
            .parse()
            .unwrap();
        let last: f64 = csv
            .lines()
            .nth(5)
            .unwrap()
            .split(',')
            .nth(col)
            .unwrap()
            .parse()
            .unwrap();
        assert!(first > 0.0 && first < last, "{first} {last}");
        assert_eq!(files.points[0].rcvbuf_peak_mean, Some(first));
        let html = std::fs::read_to_string(&files.html).unwrap();
        assert!(
            html.contains("<svg")
                && html.contains("95% CI")
                && html.contains("receiver-window limited")
        );
        assert_eq!(
            html.matches("<svg").count(),
            1 + 5 * 3,
            "the goodput chart and three time charts for every point"
        );
        // Every measured trial of a point is a line of its goodput-over-time chart.
        let first = std::fs::read_to_string(dir.join("plots/p000-goodput-time.svg")).unwrap();
        assert_eq!(first.matches("data-series=\"r0").count(), 4);
        for p in &files.plots {
            assert!(std::fs::read_to_string(p).unwrap().starts_with("<svg"));
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    fn point(index: usize, varied: &[(&str, &str)], goodput: &[f64]) -> PointSummary {
        PointSummary {
            index,
            label: String::new(),
            varied: varied
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            goodput_bps: stats(goodput),
            retransmits_mean: None,
            rtt_min_s_mean: None,
            sndbuf_peak_mean: None,
            rcvbuf_peak_mean: None,
            limits_mean: None,
            verdict: None,
            evidence: None,
            failures: 0,
            failure_causes: Vec::new(),
            theory: Theory::default(),
        }
    }

    #[test]
    fn two_categorical_settings_make_a_table_heatmap() {
        // Buffer (2 values) × impairment (3 values), both names: the impairment goes across.
        let mut points = Vec::new();
        for (b, scale) in [("no limit", 1.0), ("rmem 4096", 0.2)] {
            for (i, base) in [("clean", 48e6), ("loss 1%", 40e6), ("rtt 100ms", 1e6)] {
                let g = base * scale;
                points.push(point(
                    points.len(),
                    &[(crate::spec::LABEL, b), (crate::spec::LABEL, i)],
                    &[g * 0.98, g * 1.02],
                ));
            }
        }
        let map = goodput_heatmap(&points, "t").expect("two categorical settings");
        assert_eq!(map.rows, ["no limit", "rmem 4096"]);
        assert_eq!(map.cols, ["clean", "loss 1%", "rtt 100ms"]);
        let cell = map.cells[1][2].as_ref().unwrap();
        assert_eq!(cell.value, 0.2e6);
        assert_eq!(cell.text[0], "0.20 Mbit/s");
        assert!(cell.text[1].contains(" – "), "{:?}", cell.text);
        assert!(map.log_scale(), "48 Mbit/s beside 0.2 Mbit/s spans decades");

        // A numeric sweep, or a single setting, keeps the chart.
        let numeric: Vec<PointSummary> =
            ["4096 4096 4096", "4096 131072 65536", "4096 131072 1048576"]
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    point(
                        i,
                        &[
                            ("server.sysctl.net.ipv4.tcp_rmem", v),
                            (crate::spec::LABEL, "x"),
                        ],
                        &[1e6],
                    )
                })
                .collect();
        assert!(goodput_heatmap(&numeric, "t").is_none());
        assert!(goodput_heatmap(
            &points[..1]
                .iter()
                .map(|p| {
                    let mut q = p.clone();
                    q.varied.truncate(1);
                    q
                })
                .collect::<Vec<_>>(),
            "t"
        )
        .is_none());
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("4096 131072 6291456"), "4096 131072 6291456");
    }

    fn m(limit: tcptune_diagnose::Limit, share: Option<f64>) -> crate::run::Measurement {
        crate::run::Measurement {
            limit: Some(limit),
            limit_share: share,
            ..Default::default()
        }
    }

    #[test]
    fn point_verdict_is_the_class_of_most_trials_ties_by_share() {
        use tcptune_diagnose::Limit;
        let trials = [
            m(Limit::Loss, Some(0.9)),
            m(Limit::ReceiverWindow, Some(0.6)),
            m(Limit::ReceiverWindow, Some(0.7)),
            m(Limit::Loss, Some(0.95)),
            m(Limit::ReceiverWindow, Some(0.5)),
        ];
        let refs: Vec<&crate::run::Measurement> = trials.iter().collect();
        assert_eq!(
            point_verdict(&refs).as_deref(),
            Some("receiver-window limited (3 of 5 trials, mean share 60%)")
        );
        // Two against two: the class with the larger summed share of time wins.
        let tie: Vec<&crate::run::Measurement> = trials[..4].iter().collect();
        assert!(point_verdict(&tie)
            .unwrap()
            .starts_with("loss limited (2 of 4"));
        assert_eq!(point_verdict(&[]), None);
    }

    #[test]
    fn point_evidence_is_a_sentence_of_the_dominant_class() {
        use tcptune_diagnose::Limit;
        let said = |l, v: &str| crate::run::Measurement {
            verdict: Some(v.into()),
            ..m(l, None)
        };
        let trials = [
            said(Limit::Loss, "loss limited at 9 Mbit/s: 1.2% retransmitted"),
            said(
                Limit::SendBuffer,
                "send-buffer limited at 31 Mbit/s: send buffer 64 KiB full in 90% of samples",
            ),
            said(
                Limit::SendBuffer,
                "send-buffer limited at 32 Mbit/s: send buffer 64 KiB full in 88% of samples",
            ),
        ];
        let refs: Vec<&crate::run::Measurement> = trials.iter().collect();
        assert_eq!(
            point_evidence(&refs).as_deref(),
            Some("send-buffer limited at 31 Mbit/s: send buffer 64 KiB full in 90% of samples")
        );
        assert_eq!(point_evidence(&refs[..1]), trials[0].verdict);
        assert_eq!(point_evidence(&[]), None);
    }

    #[test]
    fn point_verdicts_match_the_dominant_class_of_the_recorded_trials() {
        let spec = parse(SPEC, &FakeCaps).unwrap();
        let dir = tempdir("verdicts");
        run(
            &spec,
            &mut ModelRunner {
                fail_seeds: vec![],
                calls: 0,
            },
            &dir,
            &mut |_| {},
        )
        .unwrap();
        let files = write_report(&dir).unwrap();
        // Read the classes back from trials.jsonl and count them independently.
        let records = load_records(&dir).unwrap();
        for p in &files.points {
            let mut counts: Vec<(tcptune_diagnose::Limit, usize)> = Vec::new();
            for r in records.iter().filter(|r| r.point == p.index && !r.warmup) {
                let l = r.result.as_ref().and_then(|m| m.limit).unwrap();
                match counts.iter_mut().find(|c| c.0 == l) {
                    Some(c) => c.1 += 1,
                    None => counts.push((l, 1)),
                }
            }
            let (dominant, n) = counts.iter().max_by_key(|c| c.1).copied().unwrap();
            let verdict = p.verdict.as_deref().unwrap();
            assert!(
                verdict.starts_with(&format!("{} ({n} of 4 trials", dominant.label())),
                "{}: {verdict}",
                p.label
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn failures_are_recorded_counted_and_explained() {
        let spec = parse(SPEC, &FakeCaps).unwrap();
        let dir = tempdir("failures");
        let trials = crate::plan::trials(&spec, &crate::plan::points(&spec));
        let bad = trials.iter().find(|t| !t.warmup).unwrap().clone();
        run(
            &spec,
            &mut ModelRunner {
                fail_seeds: vec![bad.seed],
                calls: 0,
            },
            &dir,
            &mut |_| {},
        )
        .unwrap();
        let files = write_report(&dir).unwrap();
        let p = &files.points[bad.point];
        assert_eq!((p.failures, p.goodput_bps.as_ref().unwrap().n), (1, 3));
        assert_eq!(p.failure_causes, ["1× emulator crashed"]);
        let csv = std::fs::read_to_string(&files.summary_csv).unwrap();
        assert!(csv.lines().next().unwrap().ends_with(",failure_causes"));
        assert_eq!(csv.matches("1× emulator crashed").count(), 1);
        let html = std::fs::read_to_string(&files.html).unwrap();
        assert!(html.contains("1 failed)"), "the summary counts it");
        assert!(html.contains("1× emulator crashed"), "and says why");
        assert!(html.contains("<h2>Failed trials</h2>"));
        assert!(html.contains(&format!("<td>{}</td>", bad.id)));
        let _ = std::fs::remove_dir_all(dir);
    }
}
