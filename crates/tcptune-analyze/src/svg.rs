//! The graphs of a flow's series, drawn with the workspace's one chart module
//! (`tcptune_report::svg`): the Stevens time-sequence graph (data segments, the ACK line and
//! the receive-window edge, retransmissions marked), throughput over time, RTT samples over
//! time, and receive window with bytes in flight over time. Files are self-contained SVG that
//! browsers and the lab report can embed.

use std::path::{Path, PathBuf};

use tcptune_report::svg::{spans_decades, Chart, Point, Series, Style};

use crate::analysis::{Finished, FlowReport};
use crate::series::{DirSeries, FlowSeries};

fn secs(t_ns: i64, start: i64) -> f64 {
    t_ns.saturating_sub(start) as f64 / 1e9
}

/// The shortest interval the throughput graph divides bytes by: a rate over less is a
/// sampling artefact (two packets a microsecond apart make a terabit), not a throughput.
const MIN_THROUGHPUT_INTERVAL_NS: i64 = 1_000_000;

/// The four graphs of one direction's data, as (file suffix, chart).
pub fn flow_plots(label: &str, d: &DirSeries, start: i64) -> Vec<(&'static str, Chart)> {
    let time = "time since capture start (s)";
    let seg: Vec<Point> = d
        .segments
        .points()
        .iter()
        .map(|p| {
            let (lo, hi) = (p.start as f64, p.end as f64);
            Point::with_err(secs(p.t_ns, start), hi, lo, hi)
        })
        .collect();
    let rex: Vec<Point> = d
        .retransmissions
        .points()
        .iter()
        .map(|p| Point::new(secs(p.t_ns, start), p.start as f64))
        .collect();
    let acks: Vec<Point> = d
        .acks
        .points()
        .iter()
        .map(|a| Point::new(secs(a.t_ns, start), a.ack as f64))
        .collect();
    let edge: Vec<Point> = d
        .acks
        .points()
        .iter()
        .map(|a| Point::new(secs(a.t_ns, start), a.edge as f64))
        .collect();
    let tseq = Chart::new(
        format!("Time-sequence (Stevens): {label}"),
        time,
        "relative sequence number (bytes)",
    )
    .size(900, 480)
    .series(Series::new("receive window edge", Style::Step, edge).color("#E69F00"))
    .series(Series::new("ACK", Style::Step, acks).color("#009E73"))
    .series(Series::new("data segment", Style::Segments, seg).color("#0072B2"))
    .series(Series::new("retransmission", Style::Crosses, rex).color("#D55E00"));
    // Throughput: the change in new bytes over about 100 intervals.
    let prog = d.progress.points();
    let mut tput = Vec::new();
    if let (Some(first), Some(last)) = (prog.first(), prog.last()) {
        let span = last.0.saturating_sub(first.0).max(1);
        let step = (span / 100).max(MIN_THROUGHPUT_INTERVAL_NS);
        let mut prev = *first;
        for &p in prog {
            if p.0.saturating_sub(prev.0) >= step {
                let bps = p.1.saturating_sub(prev.1) as f64 * 8.0
                    / (p.0.saturating_sub(prev.0) as f64 / 1e9);
                tput.push(Point::new(secs(p.0, start), bps));
                prev = p;
            }
        }
    }
    let throughput = Chart::new(format!("Throughput (new data): {label}"), time, "bit/s")
        .size(900, 480)
        .series(Series::new("throughput", Style::Line, tput).color("#0072B2"));
    let rtt = Chart::new(format!("RTT samples (Karn): {label}"), time, "RTT (ms)")
        .size(900, 480)
        .series(
            Series::new(
                "RTT",
                Style::Points,
                d.rtt
                    .points()
                    .iter()
                    .map(|&(t, r)| Point::new(secs(t, start), r * 1e3))
                    .collect(),
            )
            .color("#CC79A7"),
        );
    let window = Chart::new(
        format!("Receive window and bytes in flight: {label}"),
        time,
        "bytes",
    )
    .size(900, 480)
    .series(
        Series::new(
            "receive window (advertised, scaled)",
            Style::Step,
            d.acks
                .points()
                .iter()
                .map(|a| Point::new(secs(a.t_ns, start), a.window as f64))
                .collect(),
        )
        .color("#E69F00"),
    )
    .series(
        Series::new(
            "bytes in flight",
            Style::Line,
            d.in_flight
                .points()
                .iter()
                .map(|&(t, b)| Point::new(secs(t, start), b as f64))
                .collect(),
        )
        .color("#0072B2"),
    );
    // A window of megabytes beside a few segments in flight (a receiver that advertises far
    // more than the path holds) would flatten the flight to the zero line: a log axis then.
    let log = spans_decades(
        window
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.y)),
    );
    let window = window.y_log(log);
    vec![
        ("tseq", tseq),
        ("throughput", throughput),
        ("rtt", rtt),
        ("window", window),
    ]
}

/// The graphs of the `max_flows` flows with the most data (the direction that carried
/// more), as (stream, file suffix, chart).
pub fn flow_charts(done: &Finished, max_flows: usize) -> Vec<(u32, &'static str, Chart)> {
    let mut flows: Vec<(&FlowReport, &FlowSeries)> = done
        .series
        .iter()
        .filter_map(|(stream, s)| {
            done.report
                .flows
                .iter()
                .find(|f| f.stream == *stream)
                .map(|f| (f, s.as_ref()))
        })
        .collect();
    let bytes = |f: &FlowReport| f.a_to_b.data_bytes.get().max(f.b_to_a.data_bytes.get());
    flows.sort_by_key(|(f, _)| std::cmp::Reverse(bytes(f)));
    let mut out = Vec::new();
    for (f, s) in flows.into_iter().take(max_flows) {
        if bytes(f) == 0 {
            continue;
        }
        let (d, label) = if f.a_to_b.data_bytes >= f.b_to_a.data_bytes {
            (&s.dirs[0], format!("stream {} {} → {}", f.stream, f.a, f.b))
        } else {
            (&s.dirs[1], format!("stream {} {} → {}", f.stream, f.b, f.a))
        };
        for (suffix, chart) in flow_plots(&label, d, done.capture_start_ns) {
            out.push((f.stream, suffix, chart));
        }
    }
    out
}

/// Writes the graphs of the `max_flows` flows with the most data into `dir` (the direction
/// that carried more data); returns the files written.
pub fn write_graphs(
    dir: &Path,
    done: &Finished,
    max_flows: usize,
) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (stream, suffix, chart) in flow_charts(done, max_flows) {
        let path = dir.join(format!("stream-{stream}-{suffix}.svg"));
        std::fs::write(&path, chart.render())?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_direction_draws_four_empty_charts() {
        let d = DirSeries::default();
        let plots = flow_plots("a < b", &d, 0);
        assert_eq!(
            plots.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            ["tseq", "throughput", "rtt", "window"]
        );
        for (_, c) in &plots {
            let svg = c.render();
            assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
            assert!(svg.contains("a &lt; b"), "titles are escaped");
        }
    }
}
