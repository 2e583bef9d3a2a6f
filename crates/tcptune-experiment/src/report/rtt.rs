//! The round trip under load against the swept setting, drawn where a point sets the
//! bottleneck's queue (`link.queue` or `link.queue_bytes`): the sender's mean and 99th
//! percentile smoothed RTT per point, with the theory beside them, the path's own round trip
//! and that plus the full queue's drain time (what a loss-based sender that fills the queue
//! reaches at every overflow).

use tcptune_report::svg::{Chart, Point as P, Series, Style, PALETTE};

use super::chart::numeric;
use super::summary::PointSummary;

/// The chart, when some point sets a queue and the first swept setting is a number at every
/// point.
pub(super) fn rtt_chart(points: &[PointSummary], title: &str) -> Option<Chart> {
    if !points.iter().any(|p| p.theory.queue_drain_s.is_some()) {
        return None;
    }
    let key = points.first()?.varied.first()?.0.clone();
    let x = |p: &PointSummary| numeric(&key, &p.varied.first()?.1).map(|(v, _)| v);
    let mut pts: Vec<(f64, &PointSummary)> = points
        .iter()
        .map(|p| x(p).map(|v| (v, p)))
        .collect::<Option<_>>()?;
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let unit = numeric(&key, &points[0].varied[0].1)
        .map(|(_, u)| u)
        .unwrap_or("");
    let x_label = if unit.is_empty() {
        key.clone()
    } else {
        format!("{key} ({unit})")
    };
    let ms = |s: f64| s * 1e3;
    let line = |f: &dyn Fn(&PointSummary) -> Option<f64>| -> Vec<P> {
        pts.iter()
            .filter_map(|(x, p)| Some(P::new(*x, ms(f(p)?))))
            .collect()
    };
    let log = pts.iter().all(|(x, _)| *x > 0.0)
        && tcptune_report::svg::spans_decades(pts.iter().map(|(x, _)| *x));
    let mut chart = Chart::new(title, x_label, "round trip (ms)").x_log(log);
    chart = chart
        .series(
            Series::new(
                "sender's srtt, mean of the trials' means",
                Style::LinePoints,
                line(&|p| p.rtt_mean_s_mean),
            )
            .color(PALETTE[0]),
        )
        .series(
            Series::new(
                "sender's srtt, p99",
                Style::LinePoints,
                line(&|p| p.rtt_p99_s_mean),
            )
            .color(PALETTE[1]),
        )
        .series(
            Series::new(
                "theory: the path's round trip + the full queue's drain time",
                Style::Dashed,
                line(&|p| Some(p.theory.rtt_s? + p.theory.queue_drain_s?)),
            )
            .color(PALETTE[1]),
        )
        .series(
            Series::new(
                "theory: the path's round trip (an empty queue)",
                Style::Dashed,
                line(&|p| p.theory.rtt_s),
            )
            .color(PALETTE[2]),
        );
    Some(chart)
}
