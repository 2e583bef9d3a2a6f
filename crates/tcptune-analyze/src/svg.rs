//! Hand-written SVG graphs of a flow's series: the Stevens time-sequence graph (data segments,
//! the ACK line and the receive-window edge, retransmissions marked), throughput over time, RTT
//! samples over time, and receive window with bytes in flight over time.
//!
//! The plotting is deliberately small: linear axes with "nice" ticks, polylines, step lines and
//! marks. Files are self-contained SVG that browsers and the lab report can embed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::series::{DirSeries, FlowSeries};
use crate::Finished;

const W: f64 = 900.0;
const H: f64 = 480.0;
const ML: f64 = 80.0;
const MR: f64 = 20.0;
const MT: f64 = 40.0;
const MB: f64 = 50.0;

/// How a series is drawn.
#[derive(Debug, Clone, Copy)]
pub enum Style {
    Line,
    /// Horizontal then vertical (a value that holds until the next point).
    Step,
    Dots,
    /// Vertical bars from (x, y0) to (x, y1): data segments.
    Bars,
    /// Crosses: retransmissions.
    Crosses,
}

/// One named series: (x, y) points, or (x, y0, y1) for bars.
pub struct PlotSeries {
    pub name: String,
    pub color: &'static str,
    pub style: Style,
    pub points: Vec<(f64, f64, f64)>,
}

/// A graph: title, axis labels and series.
pub struct Plot {
    pub title: String,
    pub xlabel: String,
    pub ylabel: String,
    pub series: Vec<PlotSeries>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Tick positions: about `n` round numbers covering [lo, hi].
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 && out.len() < 50 {
        out.push(t);
        t += step;
    }
    out
}

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.3}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.3}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

impl Plot {
    /// Renders the plot as an SVG document.
    pub fn render(&self) -> String {
        let pts = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, a, b) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(a).min(b);
            y1 = y1.max(a).max(b);
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        y0 = y0.min(0.0);
        if x1 - x0 < 1e-12 {
            x1 = x0 + 1e-3;
        }
        if y1 - y0 < 1e-12 {
            y1 = y0 + 1.0;
        }
        y1 += (y1 - y0) * 0.04;
        let pw = W - ML - MR;
        let ph = H - MT - MB;
        let sx = |x: f64| ML + (x - x0) / (x1 - x0) * pw;
        let sy = |y: f64| MT + ph - (y - y0) / (y1 - y0) * ph;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            W / 2.0,
            esc(&self.title)
        );
        for t in ticks(x0, x1, 8) {
            let x = sx(t);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{MT}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                MT + ph,
                MT + ph + 16.0,
                fmt_tick(t)
            );
        }
        for t in ticks(y0, y1, 6) {
            let y = sy(t);
            let _ = writeln!(
                s,
                r##"<line x1="{ML}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                ML + pw,
                ML - 6.0,
                y + 4.0,
                fmt_tick(t)
            );
        }
        let _ = writeln!(
            s,
            r#"<rect x="{ML}" y="{MT}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            ML + pw / 2.0,
            H - 12.0,
            esc(&self.xlabel)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
            MT + ph / 2.0,
            esc(&self.ylabel)
        );
        for (i, ser) in self.series.iter().enumerate() {
            let c = ser.color;
            match ser.style {
                Style::Line | Style::Step => {
                    let mut d = String::new();
                    let mut prev: Option<(f64, f64)> = None;
                    for &(x, y, _) in &ser.points {
                        let (px, py) = (sx(x), sy(y));
                        match (prev, ser.style) {
                            (None, _) => {
                                let _ = write!(d, "M{px:.1},{py:.1}");
                            }
                            (Some((_, ly)), Style::Step) => {
                                let _ = write!(d, " L{px:.1},{ly:.1} L{px:.1},{py:.1}");
                            }
                            _ => {
                                let _ = write!(d, " L{px:.1},{py:.1}");
                            }
                        }
                        prev = Some((px, py));
                    }
                    let _ = writeln!(
                        s,
                        r#"<path d="{d}" fill="none" stroke="{c}" stroke-width="1.3"/>"#
                    );
                }
                Style::Dots => {
                    for &(x, y, _) in &ser.points {
                        let _ = writeln!(
                            s,
                            r#"<circle cx="{:.1}" cy="{:.1}" r="1.8" fill="{c}"/>"#,
                            sx(x),
                            sy(y)
                        );
                    }
                }
                Style::Bars => {
                    let mut d = String::new();
                    for &(x, a, b) in &ser.points {
                        let px = sx(x);
                        let _ = write!(d, "M{px:.1},{:.1}V{:.1}", sy(a), sy(b));
                    }
                    let _ = writeln!(
                        s,
                        r#"<path d="{d}" fill="none" stroke="{c}" stroke-width="1.5"/>"#
                    );
                }
                Style::Crosses => {
                    let mut d = String::new();
                    for &(x, a, _) in &ser.points {
                        let (px, py) = (sx(x), sy(a));
                        let _ = write!(d, "M{:.1},{:.1}l6,6m0,-6l-6,6", px - 3.0, py - 3.0);
                    }
                    let _ = writeln!(
                        s,
                        r#"<path d="{d}" fill="none" stroke="{c}" stroke-width="1.5"/>"#
                    );
                }
            }
            // Legend.
            let ly = MT + 14.0 + 16.0 * i as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="12" height="4" fill="{c}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                ML + 10.0,
                ly - 6.0,
                ML + 28.0,
                ly,
                esc(&ser.name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn secs(t_ns: i64, start: i64) -> f64 {
    t_ns.saturating_sub(start) as f64 / 1e9
}

/// The four graphs of one direction's data, as (file suffix, plot).
pub fn flow_plots(label: &str, d: &DirSeries, start: i64) -> Vec<(&'static str, Plot)> {
    let seg: Vec<_> = d
        .segments
        .points()
        .iter()
        .map(|p| (secs(p.t_ns, start), p.start as f64, p.end as f64))
        .collect();
    let rex: Vec<_> = d
        .retransmissions
        .points()
        .iter()
        .map(|p| (secs(p.t_ns, start), p.start as f64, p.end as f64))
        .collect();
    let acks: Vec<_> = d
        .acks
        .points()
        .iter()
        .map(|a| (secs(a.t_ns, start), a.ack as f64, 0.0))
        .collect();
    let edge: Vec<_> = d
        .acks
        .points()
        .iter()
        .map(|a| (secs(a.t_ns, start), a.edge as f64, 0.0))
        .collect();
    let tseq = Plot {
        title: format!("Time-sequence (Stevens): {label}"),
        xlabel: "time since capture start (s)".into(),
        ylabel: "relative sequence number (bytes)".into(),
        series: vec![
            PlotSeries {
                name: "receive window edge".into(),
                color: "#d9a400",
                style: Style::Step,
                points: edge,
            },
            PlotSeries {
                name: "ACK".into(),
                color: "#2a9d3a",
                style: Style::Step,
                points: acks,
            },
            PlotSeries {
                name: "data segment".into(),
                color: "#1f4e9c",
                style: Style::Bars,
                points: seg,
            },
            PlotSeries {
                name: "retransmission".into(),
                color: "#d62828",
                style: Style::Crosses,
                points: rex,
            },
        ],
    };
    // Throughput: the change in new bytes over about 100 intervals.
    let prog = d.progress.points();
    let mut tput = Vec::new();
    if let (Some(first), Some(last)) = (prog.first(), prog.last()) {
        let span = last.0.saturating_sub(first.0).max(1);
        let step = (span / 100).max(1);
        let mut prev = *first;
        for &p in prog {
            if p.0.saturating_sub(prev.0) >= step {
                let bps = p.1.saturating_sub(prev.1) as f64 * 8.0
                    / (p.0.saturating_sub(prev.0) as f64 / 1e9);
                tput.push((secs(p.0, start), bps, 0.0));
                prev = p;
            }
        }
    }
    let throughput = Plot {
        title: format!("Throughput (new data): {label}"),
        xlabel: "time since capture start (s)".into(),
        ylabel: "bit/s".into(),
        series: vec![PlotSeries {
            name: "throughput".into(),
            color: "#1f4e9c",
            style: Style::Line,
            points: tput,
        }],
    };
    let rtt = Plot {
        title: format!("RTT samples (Karn): {label}"),
        xlabel: "time since capture start (s)".into(),
        ylabel: "RTT (ms)".into(),
        series: vec![PlotSeries {
            name: "RTT".into(),
            color: "#7b2cbf",
            style: Style::Dots,
            points: d
                .rtt
                .points()
                .iter()
                .map(|&(t, r)| (secs(t, start), r * 1e3, r * 1e3))
                .collect(),
        }],
    };
    let window = Plot {
        title: format!("Receive window and bytes in flight: {label}"),
        xlabel: "time since capture start (s)".into(),
        ylabel: "bytes".into(),
        series: vec![
            PlotSeries {
                name: "receive window (advertised, scaled)".into(),
                color: "#d9a400",
                style: Style::Step,
                points: d
                    .acks
                    .points()
                    .iter()
                    .map(|a| (secs(a.t_ns, start), a.window as f64, 0.0))
                    .collect(),
            },
            PlotSeries {
                name: "bytes in flight".into(),
                color: "#1f4e9c",
                style: Style::Line,
                points: d
                    .in_flight
                    .points()
                    .iter()
                    .map(|&(t, b)| (secs(t, start), b as f64, 0.0))
                    .collect(),
            },
        ],
    };
    vec![
        ("tseq", tseq),
        ("throughput", throughput),
        ("rtt", rtt),
        ("window", window),
    ]
}

/// Writes the graphs of the `max_flows` flows with the most data into `dir` (the direction
/// that carried more data); returns the files written.
pub fn write_graphs(
    dir: &Path,
    done: &Finished,
    max_flows: usize,
) -> std::io::Result<Vec<PathBuf>> {
    let mut flows: Vec<(&crate::FlowReport, &FlowSeries)> = done
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
    let bytes = |f: &crate::FlowReport| f.a_to_b.data_bytes.get().max(f.b_to_a.data_bytes.get());
    flows.sort_by_key(|(f, _)| std::cmp::Reverse(bytes(f)));
    let mut written = Vec::new();
    for (f, s) in flows.into_iter().take(max_flows) {
        if bytes(f) == 0 {
            continue;
        }
        let (d, label) = if f.a_to_b.data_bytes >= f.b_to_a.data_bytes {
            (&s.dirs[0], format!("stream {} {} → {}", f.stream, f.a, f.b))
        } else {
            (&s.dirs[1], format!("stream {} {} → {}", f.stream, f.b, f.a))
        };
        for (suffix, plot) in flow_plots(&label, d, done.capture_start_ns) {
            let path = dir.join(format!("stream-{}-{suffix}.svg", f.stream));
            std::fs::write(&path, plot.render())?;
            written.push(path);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(0.013, 0.0371, 6);
        assert!(t.iter().all(|v| *v >= 0.013 && *v <= 0.0371 + 1e-12));
        assert!(t.len() >= 3);
    }

    #[test]
    fn plot_renders_every_series_and_escapes_text() {
        let p = Plot {
            title: "a < b & c".into(),
            xlabel: "x".into(),
            ylabel: "y".into(),
            series: vec![
                PlotSeries {
                    name: "line".into(),
                    color: "red",
                    style: Style::Step,
                    points: vec![(0.0, 1.0, 0.0), (1.0, 2.0, 0.0)],
                },
                PlotSeries {
                    name: "bars".into(),
                    color: "blue",
                    style: Style::Bars,
                    points: vec![(0.5, 1.0, 1.5)],
                },
            ],
        };
        let svg = p.render();
        assert!(svg.starts_with("<svg"));
        assert!(svg.ends_with("</svg>\n"));
        assert!(svg.contains("a &lt; b &amp; c"));
        assert!(svg.contains(r#"stroke="red""#) && svg.contains(r#"stroke="blue""#));
        assert!(svg.contains(" L"), "the step line has segments");
    }
}
