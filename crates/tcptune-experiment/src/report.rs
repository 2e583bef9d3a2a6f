//! Statistics per sweep point, `summary.csv`, and the self-contained HTML report with its SVG
//! plots: goodput against the swept setting with 95% CI bars and the theory beside it (path
//! rate, window/RTT for the configured receive buffer, Mathis for the configured loss), the
//! time series of each point, the statistics table, the diagnosis of each point, the spec and
//! the environment. Everything is read back from the results directory, so `tcptune report
//! DIR` can redraw a report at any time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_model::goodput::goodput_ceiling;
use tcptune_model::mathis::{mathis_bps, MathisConstant};
use tcptune_model::{Bytes, Dur, Probability, Rate};
use tcptune_report::html::{Block, Page};
use tcptune_report::stats::{summarize as stats, Summary};
use tcptune_report::svg::{Chart, Point as P, Series, Style, PALETTE};

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
    pub failures: usize,
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
                failures,
                theory: theory(&p.settings),
            }
        })
        .collect()
}

/// The point's verdict: the limit class of most of its trials (ties go to the class with the
/// larger summed share of time), with how many trials and their mean share. Trials recorded
/// before classes were kept count by their verdict's leading label.
pub fn point_verdict(trials: &[&crate::run::Measurement]) -> Option<String> {
    use tcptune_diagnose::Limit;
    let class = |m: &crate::run::Measurement| {
        m.limit.or_else(|| {
            let v = m.verdict.as_deref()?;
            Limit::ALL.into_iter().find(|l| v.starts_with(l.label()))
        })
    };
    let mut by: Vec<(Limit, usize, f64, usize)> = Vec::new();
    for m in trials {
        let Some(l) = class(m) else { continue };
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
    let share = if with_share > 0 {
        format!(", mean share {:.0}%", sum / with_share as f64 * 100.0)
    } else {
        String::new()
    };
    Some(format!(
        "{} ({n} of {} trials{share})",
        l.label(),
        trials.len()
    ))
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
    out.push_str(",n,mean_bps,sd_bps,ci95_low_bps,ci95_high_bps,median_bps,min_bps,max_bps,retransmits_mean,rtt_min_s_mean,sndbuf_peak_bytes_mean,rcvbuf_peak_bytes_mean,expected_bps,failures,verdict\n");
    let f = |v: Option<f64>| v.map(|x| format!("{x:.6}")).unwrap_or_default();
    for p in points {
        out.push_str(&p.index.to_string());
        for (_, v) in &p.varied {
            out.push(',');
            out.push_str(&csv_field(v));
        }
        let g = p.goodput_bps.as_ref();
        out.push_str(&format!(
            ",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
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
    let axis = keys.iter().position(|k| {
        let values: std::collections::BTreeSet<&str> = points
            .iter()
            .filter_map(|p| {
                p.varied
                    .iter()
                    .find(|(pk, _)| pk == k)
                    .map(|(_, v)| v.as_str())
            })
            .collect();
        values.len() >= 3 && values.iter().all(|v| numeric(k, v).is_some())
    });
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
    let mut groups: BTreeMap<String, Vec<(f64, &PointSummary)>> = BTreeMap::new();
    for p in points {
        let rest: Vec<String> = p
            .varied
            .iter()
            .skip(1)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let x = x_of(p, &mut categories);
        groups.entry(rest.join(", ")).or_default().push((x, p));
    }
    let xs: Vec<f64> = groups.values().flatten().map(|(x, _)| *x).collect();
    let (lo, hi) = xs
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
    let log = numeric_x && lo > 0.0 && hi / lo >= 50.0;
    let mut chart = Chart::new(title, x_label, "goodput (bit/s)").x_log(log);
    let measured_max = points
        .iter()
        .filter_map(|p| p.goodput_bps.as_ref().map(|g| g.ci95_high.unwrap_or(g.max)))
        .fold(0.0, f64::max);
    if measured_max > 0.0 {
        chart = chart.y_max(measured_max * 1.6);
    }
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
        chart = chart.series(Series::new(label, Style::LinePoints, measured).color(color));
        let expected: Vec<P> = pts
            .iter()
            .filter_map(|(x, p)| Some(P::new(*x, p.theory.expected_bps?)))
            .collect();
        if !expected.is_empty() {
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

fn read_series(dir: &Path, rel: &str) -> Vec<SeriesSample> {
    std::fs::read_to_string(dir.join(rel))
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Time series charts of the first measured trial of each point (up to eight points).
fn time_charts(dir: &Path, plan: &StoredPlan, records: &[TrialRecord]) -> Vec<(String, Chart)> {
    let mut goodput = Chart::new(
        "Goodput over time (first trial of each point)",
        "time (s)",
        "goodput (bit/s)",
    );
    let mut windows = Chart::new(
        "Congestion window and receive window over time",
        "time (s)",
        "bytes",
    )
    .y_from_zero(true);
    let mut rtt = Chart::new("Smoothed RTT over time", "time (s)", "RTT (ms)");
    let mut any = false;
    for (i, p) in plan.points.iter().take(8).enumerate() {
        let Some(rec) = records.iter().find(|r| {
            r.point == p.index && !r.warmup && r.result.as_ref().is_some_and(|m| m.series.is_some())
        }) else {
            continue;
        };
        let samples = read_series(
            dir,
            rec.result
                .as_ref()
                .and_then(|m| m.series.as_deref())
                .unwrap_or(""),
        );
        if samples.is_empty() {
            continue;
        }
        any = true;
        let color = PALETTE[i % PALETTE.len()];
        let name = p.label();
        let pts = |f: &dyn Fn(&SeriesSample) -> Option<f64>| {
            samples
                .iter()
                .filter_map(|s| Some(P::new(s.t_s, f(s)?)))
                .collect::<Vec<_>>()
        };
        goodput = goodput
            .series(Series::new(name.clone(), Style::Line, pts(&|s| s.goodput_bps)).color(color));
        windows = windows.series(
            Series::new(
                format!("{name}: cwnd"),
                Style::Step,
                pts(&|s| s.snd_cwnd_bytes.map(|v| v as f64)),
            )
            .color(color),
        );
        windows = windows.series(
            Series::new(
                format!("{name}: rwnd"),
                Style::Dashed,
                pts(&|s| s.rwnd_bytes.map(|v| v as f64)),
            )
            .color(color),
        );
        rtt = rtt.series(
            Series::new(name, Style::Line, pts(&|s| s.rtt_s.map(|v| v * 1e3))).color(color),
        );
    }
    if !any {
        return Vec::new();
    }
    vec![
        ("goodput-time".into(), goodput),
        ("windows-time".into(), windows),
        ("rtt-time".into(), rtt),
    ]
}

/// Files the report wrote.
#[derive(Debug, Clone)]
pub struct ReportFiles {
    pub html: PathBuf,
    pub summary_csv: PathBuf,
    pub plots: Vec<PathBuf>,
    pub points: Vec<PointSummary>,
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

    let mut charts = vec![(
        "goodput".to_string(),
        goodput_chart(&points, &format!("{}: goodput", plan.name)),
    )];
    charts.extend(time_charts(dir, &plan, &records));
    let mut plots = Vec::new();
    let mut svgs = Vec::new();
    for (name, chart) in &charts {
        let svg = chart.render();
        let path = plots_dir.join(format!("{name}.svg"));
        std::fs::write(&path, &svg).map_err(io(&path))?;
        plots.push(path);
        svgs.push(svg);
    }

    let measured = records.iter().filter(|r| !r.warmup).count();
    let failed = records.iter().filter(|r| r.error.is_some()).count();
    let spec_text = std::fs::read_to_string(dir.join("spec.toml")).unwrap_or_default();
    let env_text = std::fs::read_to_string(dir.join("environment.json")).unwrap_or_default();
    let mut page = Page::new(format!("tcptune experiment: {}", plan.name));
    page.summary = format!(
        "{} sweep point(s), {} planned trials ({} recorded, {} measured, {} failed). Goodput is the mean of the measured trials with its 95% confidence interval (Student t); warm-up trials are not counted.",
        plan.points.len(),
        plan.trials.len(),
        records.len(),
        measured,
        failed
    );
    let mut figures: Vec<Block> = svgs.iter().take(1).map(|s| Block::Svg(s.clone())).collect();
    figures.push(Block::Text(
        "Dashed: what the models expect for each point's settings, the smallest of the path's payload rate (the link rate × MSS / (MTU + per-packet overhead)), the receive window over the RTT (half the configured receive buffer, the share a 6.6+ kernel advertises at least) and the Mathis bound for the configured loss (C = √(3/2)).".into(),
    ));
    page.section("Goodput against the swept setting", figures);
    if svgs.len() > 1 {
        page.section(
            "Over time",
            svgs.iter().skip(1).map(|s| Block::Svg(s.clone())).collect(),
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
                g.and_then(|g| Some(format!("{} – {}", mbit(g.ci95_low?), mbit(g.ci95_high?))))
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
                "95% CI",
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
                share(|l| l.rwnd),
                share(|l| l.sndbuf),
                share(|l| l.cwnd),
                share(|l| l.app),
            ]
        })
        .collect();
    page.section(
        "Diagnosis per point",
        vec![Block::Table {
            header: [
                "point",
                "limit (most trials)",
                "rwnd-limited",
                "sndbuf-limited",
                "cwnd-limited",
                "app-limited",
            ]
            .map(String::from)
            .to_vec(),
            rows: diag,
        }],
    );
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
            4,
            "goodput chart and three time charts"
        );
        for p in &files.plots {
            assert!(std::fs::read_to_string(p).unwrap().starts_with("<svg"));
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("4096 131072 6291456"), "4096 131072 6291456");
    }
}
