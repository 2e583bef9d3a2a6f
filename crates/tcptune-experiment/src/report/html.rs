//! `report.html`: the self-contained page of a results directory (what was run, goodput
//! against the swept setting, the time series, statistics and diagnosis per point, the seed's
//! figures, what the link and the captures show, failed trials, the spec and the environment).

use std::path::PathBuf;

use tcptune_report::html::{Block, Page};

use super::figures::{Figure, Figures};
use super::results::{Exporter, Results};
use super::summary::{auto_sentences, failure_causes, mbit, PointSummary};
use super::tables::{failures_table, join_table, realised_table};
use crate::run::RunError;

/// Writes `report.html`, embedding the figures the SVG exporter wrote.
pub(super) struct HtmlExporter<'a>(pub &'a Figures);

impl Exporter for HtmlExporter<'_> {
    fn export(&self, results: &Results) -> Result<Vec<PathBuf>, RunError> {
        let figures = self.0;
        let mut page = Page::new(format!("tcptune experiment: {}", results.plan.name));
        page.summary = summary(results);
        goodput_sections(&mut page, figures);
        page.section(
            "Statistics per point (Mbit/s)",
            vec![statistics_table(&results.points)],
        );
        page.section("Diagnosis per point", diagnosis_blocks(&results.points));
        link_sections(&mut page, results);
        capture_section(&mut page, figures);
        if let Some(t) = failures_table(&results.plan, &results.records) {
            page.section("Failed trials", vec![t]);
        }
        page.section("Spec", vec![Block::Pre(results.text("spec.toml"))]);
        page.section(
            "Environment",
            vec![Block::Pre(results.text("environment.json"))],
        );
        let html_path = results.dir.join("report.html");
        results.write(&html_path, page.render())?;
        Ok(vec![html_path])
    }
}

/// How busy the machine's CPUs were while the trials ran (recorded since the records carry
/// it): the lab emulates its paths on this machine, so a reader judging a CPU-sensitive point
/// needs the range. Empty for records without it.
fn host_busy_sentence(records: &[crate::record::TrialRecord]) -> String {
    let mut busy: Vec<f64> = records.iter().filter_map(|r| r.host_busy).collect();
    if busy.is_empty() {
        return String::new();
    }
    busy.sort_by(f64::total_cmp);
    let pct = |q: f64| 100.0 * busy[((busy.len() - 1) as f64 * q).round() as usize];
    let steal = records
        .iter()
        .filter_map(|r| r.host_steal)
        .fold(0.0f64, f64::max);
    format!(
        " While the trials ran, the machine's CPUs were busy {:.0}% of the time at the median (from {:.0}% to {:.0}%, every process counted), with at most {:.1}% taken by the hypervisor (steal).",
        pct(0.5),
        pct(0.0),
        pct(1.0),
        100.0 * steal
    )
}

/// The page's opening paragraph: what was planned, recorded, measured and failed, and why.
fn summary(results: &Results) -> String {
    let (plan, records) = (&results.plan, &results.records);
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
    let auto = plan
        .auto
        .map(|rule| format!(" {}", auto_sentences(&rule, &results.points)))
        .unwrap_or_default();
    let busy = host_busy_sentence(records);
    format!(
        "{} sweep point(s), {}{} planned trials ({} recorded: {} measured, {} failed).{why} Goodput is the mean of the measured trials with its 95% confidence interval (Student t); warm-up trials are not counted, and a failed trial counts nowhere but here.{auto}{busy}",
        plan.points.len(),
        if plan.auto.is_some() { "up to " } else { "" },
        plan.trials.len(),
        records.len(),
        measured,
        failed
    )
}

/// The goodput figure with its caption, and the time series when there are any.
fn goodput_sections(page: &mut Page, figures: &Figures) {
    const EXPECTED: &str = "what the models expect for each point's settings, the smallest of the path's payload rate (the link rate × MSS / (MTU + per-packet overhead)), the receive window over the RTT (half the configured receive buffer, the share a 6.6+ kernel advertises at least) and the Mathis bound for the configured loss (C = √(3/2))";
    let caption = if figures.heatmap {
        format!("Each cell: one combination of the two swept settings, its mean goodput and the 95% CI of the mean (cut at zero), coloured by the mean. The \"expected\" column below: {EXPECTED}.")
    } else {
        format!("Expected (dashed on a numeric sweep, the \"expected\" column below): {EXPECTED}. Whiskers: the 95% CI of the mean, cut at zero.")
    };
    let figures_blocks = vec![Block::Svg(figures.goodput.clone()), Block::Text(caption)];
    page.section("Goodput against the swept setting", figures_blocks);
    if let Some(svg) = &figures.rtt {
        page.section(
            "Round trip under load against the swept setting",
            vec![
                Block::Svg(svg.clone()),
                Block::Text("The sender's smoothed RTT (tcp_info, sampled through each trial): the mean of the trials' means and of their 99th percentiles. Dashed: the path's round trip, and that plus the time the configured bottleneck queue takes to drain at the link rate (queue × (MTU + per-packet overhead) × 8 / rate), what a sender that keeps the queue full adds to every round trip.".into()),
            ],
        );
    }
    if !figures.over_time.is_empty() {
        let grid = captioned(&figures.over_time);
        page.section(
            "Over time, every point and every measured trial",
            vec![Block::Grid(grid)],
        );
    }
}

/// The statistics table: goodput's n, mean, SD, CI, median and range beside the expectation.
fn statistics_table(points: &[PointSummary]) -> Block {
    let rows = points
        .iter()
        .map(|p| {
            let g = p.goodput_bps.as_ref();
            vec![
                p.label.clone(),
                // With auto repetitions, why the point took no more.
                format!(
                    "{}{}",
                    g.map_or(0, |g| g.n),
                    p.stopped
                        .map(|s| format!(" ({})", s.text()))
                        .unwrap_or_default()
                ),
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
    Block::Table {
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
    }
}

/// The diagnosis section: the explanation and the table of each point's limit, evidence and
/// the kernel's time shares.
fn diagnosis_blocks(points: &[PointSummary]) -> Vec<Block> {
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
    ]
}

/// The seed's figures against this run, what the link did and the two-capture join.
fn link_sections(page: &mut Page, results: &Results) {
    let (dir, plan, records) = (&results.dir, &results.plan, &results.records);
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
    if let Some(t) = realised_table(plan, records) {
        page.section(
            "What the link did (data direction, mean per trial)",
            vec![
                Block::Text("The emulator's counters beside the configured values: the share of the packets entering the link that it dropped for loss, duplicated, corrupted or reordered, its queue's drops, and the bytes that left it over the transfer's duration.".into()),
                t,
            ],
        );
    }
    if let Some(t) = join_table(plan, records) {
        page.section(
            "Both ends captured: the captures joined (data direction, mean per trial)",
            vec![
                Block::Text(format!("Each trial captured at both ends of the link was joined (tcptune analyze A B): packets seen at the client matched with those seen at the server. Beside each impairment as configured: what the emulator counted (packets it dropped for loss, duplicated, reordered; it counts every packet on the link, the captures only the workload's TCP) and what the join found (packets lost between the ends, extra copies, packets that arrived ahead of one sent before them). The one-way delay is the data connection's, the time in the rate's queue included ({}). Below: data lost before the link (holes at the sender's capture), the retransmissions the join found needed, and packets the sender's capture never saw.", records.iter().find_map(|r| Some(r.result.as_ref()?.join.as_ref()?.clock.clone())).unwrap_or_default())),
                t,
            ],
        );
    }
}

/// What the captures show: Wireshark's flags and the first captured trial's graphs.
fn capture_section(page: &mut Page, figures: &Figures) {
    if let Some(table) = &figures.capture_table {
        let mut blocks = vec![
            Block::Text("Wireshark 4.0's flags in each trial's capture (tcptune analyze), mean per captured trial: duplicate ACKs, retransmissions (fast, other — after a timeout, mostly — and spurious), out-of-order segments, zero windows advertised and windows filled.".into()),
            table.clone(),
        ];
        if !figures.capture_graphs.is_empty() {
            let grid = captioned(&figures.capture_graphs);
            blocks.push(Block::Text("The first captured trial of each point: its time-sequence graph (segments, ACKs, the receive window's edge, retransmissions), the advertised window with bytes in flight, and its RTT samples.".into()));
            blocks.push(Block::Grid(grid));
        }
        page.section("What the captures show", blocks);
    }
}

/// Figures as the page's grid takes them: (caption, SVG).
fn captioned(figures: &[Figure]) -> Vec<(String, String)> {
    figures
        .iter()
        .map(|f| (f.caption.clone(), f.svg.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::host_busy_sentence;
    use crate::record::TrialRecord;

    fn record(busy: Option<f64>, steal: Option<f64>) -> TrialRecord {
        TrialRecord {
            id: "p000-r01".into(),
            point: 0,
            rep: Some(1),
            warmup: false,
            seed: 1,
            started_unix_s: 0,
            wall_s: 1.0,
            host_busy: busy,
            host_steal: steal,
            result: None,
            error: None,
        }
    }

    #[test]
    fn the_machines_busy_range_is_said_only_when_the_records_carry_it() {
        assert_eq!(host_busy_sentence(&[record(None, None)]), "");
        let s = host_busy_sentence(&[
            record(Some(0.9), Some(0.01)),
            record(Some(0.2), Some(0.0)),
            record(Some(0.5), Some(0.03)),
            record(None, None),
        ]);
        assert!(s.contains("busy 50% of the time at the median"), "{s}");
        assert!(s.contains("from 20% to 90%"), "{s}");
        assert!(s.contains("at most 3.0%"), "{s}");
    }
}
