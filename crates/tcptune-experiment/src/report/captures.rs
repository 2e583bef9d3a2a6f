//! What the trials' captures show, through tcptune-analyze: Wireshark's flags per point (mean
//! per captured trial) and the graphs of each point's first captured trial.

use tcptune_report::html::Block;

use super::results::{NamedChart, Results};
use crate::run::TrialRecord;

/// What the captures show, per point: the Wireshark flags the seed 004 notebook looked at
/// (mean per captured trial), and the time-sequence, window and RTT graphs of the point's
/// first captured trial, from the `analyze` library. Returns the table and the graphs as
/// (file stem, caption, chart); nothing when no trial kept a capture.
pub(super) fn capture_analysis(results: &Results) -> Option<(Block, Vec<NamedChart>)> {
    use tcptune_analyze::{analyze_reader, Options};
    let (dir, plan, records) = (&results.dir, &results.plan, &results.records);
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
