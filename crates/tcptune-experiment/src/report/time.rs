//! The time series of every point: per point three small charts (goodput, windows, RTT) with
//! each measured trial as its own line, read from the trials' series files.

use tcptune_report::svg::{Chart, Point as P, Series, Style, PALETTE};

use super::results::{NamedChart, Results};
use crate::run::{SeriesSample, TrialRecord};

/// Time series of every point: per point three small charts (goodput, congestion and
/// receive window, RTT) with every measured trial of the point as its own line, named by its
/// repetition. Returns (file stem, caption, chart) per chart.
pub(super) fn time_charts(results: &Results) -> Vec<NamedChart> {
    let mut out = Vec::new();
    for p in &results.plan.points {
        let mut trials: Vec<(&TrialRecord, Vec<SeriesSample>)> = results
            .records
            .iter()
            .filter(|r| r.point == p.index && !r.warmup)
            .filter_map(|r| {
                let rel = r.result.as_ref()?.series.as_deref()?;
                let samples = results.series(rel);
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
