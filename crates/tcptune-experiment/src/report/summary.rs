//! The statistics of each sweep point over its measured trials (mean, SD, 95% CI of goodput,
//! means of retransmits, RTT and buffers, the kernel's limit shares), the point's verdict and
//! evidence from the diagnosis engine, and why its failed trials failed.

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_report::stats::{summarize as stats, Summary};

use super::theory::{theory, Theory};
use crate::run::{StoredPlan, TrialRecord};

/// The statistics of one sweep point.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PointSummary {
    /// The point's number, from 0.
    pub index: usize,
    /// The settings that vary, as "link.delay=5ms, client.mtu=9000" ("base" when none do).
    pub label: String,
    /// The swept settings and their values at this point, in spec order.
    pub varied: Vec<(String, String)>,
    /// Goodput over the measured (not warm-up) trials, bits per second.
    pub goodput_bps: Option<Summary>,
    /// Mean over trials of the sender's retransmitted segments.
    pub retransmits_mean: Option<f64>,
    /// Mean over trials of the smallest RTT, seconds.
    pub rtt_min_s_mean: Option<f64>,
    /// Mean over trials of the sender's mean and 99th-percentile smoothed RTT under the load.
    pub rtt_mean_s_mean: Option<f64>,
    /// Mean over trials of the 99th-percentile smoothed RTT, seconds.
    pub rtt_p99_s_mean: Option<f64>,
    /// Mean over trials of the sender's largest send buffer and the receiver's largest
    /// receive buffer (the memory the connection was granted), bytes.
    pub sndbuf_peak_mean: Option<f64>,
    /// Mean over trials of the receiver's largest receive buffer, bytes.
    pub rcvbuf_peak_mean: Option<f64>,
    /// Mean over trials of the limit shares (fractions of 1).
    pub limits_mean: Option<crate::run::LimitShares>,
    /// The limit class of most of the point's trials, from the diagnosis engine (see [`point_verdict`]).
    pub verdict: Option<String>,
    /// The engine's diagnosis of one trial of that class, evidence included (the sentence a
    /// reader checks the verdict against: a send-buffer limit shows as a full send buffer,
    /// not as the kernel's sndbuf-limited time, which counts only a blocked writer).
    pub evidence: Option<String>,
    /// Trials that failed.
    pub failures: usize,
    /// With `repetitions = "auto"`: why the point took no more trials (its interval reached
    /// the precision, or it took the maximum); its measured trials are `goodput_bps.n`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<crate::stopping::Stop>,
    /// Why the point's trials failed: each distinct error once, with how many times.
    pub failure_causes: Vec<String>,
    /// What the models predict at this point, beside the measurements.
    pub theory: Theory,
}

/// Statistics per point from the recorded trials (warm-ups and failures excluded).
pub fn summarize(plan: &StoredPlan, records: &[TrialRecord]) -> Vec<PointSummary> {
    // Points with measured trials planned but never recorded (auto: unfinished unless closed).
    let recorded: std::collections::BTreeSet<&str> =
        records.iter().map(|r| r.id.as_str()).collect();
    let mut rounds_left = vec![false; plan.points.len()];
    for t in plan.trials.iter().filter(|t| !t.warmup) {
        if !recorded.contains(t.id.as_str()) {
            if let Some(l) = rounds_left.get_mut(t.point) {
                *l = true;
            }
        }
    }
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
                rtt_mean_s_mean: mean(ok.iter().filter_map(|m| m.rtt_mean_s).collect()),
                rtt_p99_s_mean: mean(ok.iter().filter_map(|m| m.rtt_p99_s).collect()),
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
                stopped: plan.auto.map(|rule| {
                    let values: Vec<f64> = ok.iter().map(|m| m.goodput_bps).collect();
                    let left = rounds_left.get(p.index).copied().unwrap_or(false);
                    crate::stopping::status(&values, &rule, left)
                }),
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

/// Distinct failure causes with their counts, for the one-line summary.
pub(super) fn failure_causes<'a>(
    records: impl IntoIterator<Item = &'a TrialRecord>,
) -> Vec<(String, usize)> {
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

/// With `repetitions = "auto"`: the rule, and how many trials the points took, which met the
/// precision and which stopped at the maximum (with the half-width they reached), in
/// sentences for the text and HTML reports.
pub fn auto_sentences(rule: &crate::stopping::Auto, points: &[PointSummary]) -> String {
    use crate::stopping::Stop;
    let n = |p: &PointSummary| p.goodput_bps.as_ref().map_or(0, |g| g.n);
    let half = |p: &PointSummary| {
        let g = p.goodput_bps.as_ref()?;
        Some((g.ci95_high? - g.ci95_low?) / 2.0 / g.mean.abs())
    };
    let with = |stop: Stop| points.iter().filter(move |p| p.stopped == Some(stop));
    let range = |mut v: Vec<usize>| {
        v.sort_unstable();
        match (v.first(), v.last()) {
            (Some(a), Some(b)) if a == b => format!("{a}"),
            (Some(a), Some(b)) => format!("{a} to {b}"),
            _ => "0".into(),
        }
    };
    let mut out = format!("{}.", capitalised(&rule.describe()));
    let precise: Vec<usize> = with(Stop::Precise).map(n).collect();
    out.push_str(&format!(
        " {} point(s) met it, with {} trials",
        precise.len(),
        range(precise)
    ));
    let at_max: Vec<String> = with(Stop::Maximum)
        .map(|p| {
            format!(
                "{} ({} trials, ±{})",
                p.label,
                n(p),
                half(p).map_or("no interval".into(), |h| format!("{:.1}%", h * 100.0))
            )
        })
        .collect();
    if at_max.is_empty() {
        out.push_str("; none stopped at the maximum");
    } else {
        out.push_str(&format!(
            "; {} stopped at the maximum without: {}",
            at_max.len(),
            at_max.join(", ")
        ));
    }
    let unfinished = with(Stop::Unfinished).count();
    if unfinished > 0 {
        out.push_str(&format!(
            "; {unfinished} unfinished (the run was cut: rerun it to resume)"
        ));
    }
    out.push('.');
    out
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Bits per second as Mbit/s with two decimals, as the tables and the heatmap print them.
pub(super) fn mbit(v: f64) -> String {
    format!("{:.2}", v / 1e6)
}
