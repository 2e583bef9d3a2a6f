//! The workspace's one chart module, rendered as standalone SVG: lines, points, steps, grouped
//! bars over categories, vertical segments and crosses (a Stevens time-sequence graph), error
//! bars (confidence intervals), dashed theory curves and labelled horizontal reference lines,
//! on linear or logarithmic axes with "nice" ticks; and a table-heatmap ([`Heatmap`]) for a
//! sweep of two categorical settings. No scripts, fonts or external resources,
//! so a chart opens anywhere and embeds in a self-contained HTML page. Experiment reports and
//! `analyze`'s graphs both draw with it.
//!
//! Quantities that cannot be negative (rates, bytes, times) are never drawn below zero: a
//! confidence interval reaching below zero is cut at zero, and so is the axis.
//!
//! Large series (a Stevens graph of millions of segments) are decimated per pixel column,
//! keeping each column's extremes, so the file stays small and no spike disappears.

mod axis;
mod draw;
mod heatmap;

pub use axis::{esc, spans_decades, tick_label};
pub use heatmap::{Cell, Heatmap};

/// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Straight lines between points.
    Line,
    /// A marker at each point, no line.
    Points,
    /// Lines and markers.
    LinePoints,
    /// A step function (holds each value until the next x): windows, cwnd.
    Step,
    /// A dashed line: theory drawn beside measurements.
    Dashed,
    /// Bars from zero (or the log axis' floor) to y, side by side with the chart's other bar
    /// series at the same x: a categorical sweep.
    Bars,
    /// A vertical segment per point over its `err` interval (data segments of a Stevens
    /// graph); no marker.
    Segments,
    /// A cross at each point (retransmissions).
    Crosses,
}

/// One data point; `err` is an interval drawn as an error bar (e.g. the 95% CI).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Horizontal position, in the x axis' unit.
    pub x: f64,
    /// Vertical position, in the y axis' unit.
    pub y: f64,
    /// (low, high) of the error bar, in the y unit; `None`: no bar.
    pub err: Option<(f64, f64)>,
}

impl Point {
    /// A point without an error bar.
    pub fn new(x: f64, y: f64) -> Self {
        Point { x, y, err: None }
    }
    /// A point with an error bar from `low` to `high`.
    pub fn with_err(x: f64, y: f64, low: f64, high: f64) -> Self {
        Point {
            x,
            y,
            err: Some((low, high)),
        }
    }
}

/// One named set of points drawn in one style and colour.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend's label.
    pub name: String,
    /// The points, sorted by x for lines and steps.
    pub points: Vec<Point>,
    /// How the points are drawn.
    pub style: Style,
    /// Colour; the palette's next one when `None`.
    pub color: Option<String>,
}

impl Series {
    /// A series drawn in the palette colour of its position (set one with [`Series::color`]).
    pub fn new(name: impl Into<String>, style: Style, points: Vec<Point>) -> Self {
        Series {
            name: name.into(),
            points,
            style,
            color: None,
        }
    }
    /// Draws the series in colour `c` (any SVG colour), e.g. to match a series across charts.
    pub fn color(mut self, c: &str) -> Self {
        self.color = Some(c.into());
        self
    }
}

/// A labelled horizontal line (a path rate, a model's bound).
#[derive(Debug, Clone)]
pub struct RefLine {
    /// The legend's label.
    pub name: String,
    /// Height in the y axis' unit.
    pub y: f64,
}

/// A chart. Build it, then [`Chart::render`].
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// The x axis' label, with its unit.
    pub x_label: String,
    /// The y axis' label, with its unit.
    pub y_label: String,
    /// Logarithmic x axis.
    pub x_log: bool,
    /// Logarithmic y axis.
    pub y_log: bool,
    /// Start the y axis at zero (throughput, windows) rather than at the data's minimum.
    pub y_from_zero: bool,
    /// Caps the y axis (a theory curve that runs far above the measurements).
    pub y_max: Option<f64>,
    /// Labels at given x positions instead of numeric ticks (a sweep over names).
    pub x_ticks: Option<Vec<(f64, String)>>,
    /// The data, drawn in order (later series on top).
    pub series: Vec<Series>,
    /// Horizontal reference lines.
    pub refs: Vec<RefLine>,
    /// Width in SVG pixels.
    pub width: u32,
    /// Height of the plot and its axes; the legend below adds to it.
    pub height: u32,
    /// Values below zero are impossible (rates, bytes, times): error bars and the axis stop
    /// at zero. On by default.
    pub non_negative: bool,
}

impl Chart {
    /// An empty 720 × 400 chart with linear axes, y from zero, values non-negative.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log: false,
            y_log: false,
            y_from_zero: true,
            y_max: None,
            x_ticks: None,
            series: Vec::new(),
            refs: Vec::new(),
            width: 720,
            height: 400,
            non_negative: true,
        }
    }
    /// Sets [`Chart::non_negative`].
    pub fn non_negative(mut self, on: bool) -> Self {
        self.non_negative = on;
        self
    }
    /// Sets the size in SVG pixels (the legend adds to the height).
    pub fn size(mut self, width: u32, height: u32) -> Self {
        self.width = width;
        self.height = height;
        self
    }
    /// Sets [`Chart::x_log`].
    pub fn x_log(mut self, on: bool) -> Self {
        self.x_log = on;
        self
    }
    /// Sets [`Chart::y_log`].
    pub fn y_log(mut self, on: bool) -> Self {
        self.y_log = on;
        self
    }
    /// Sets [`Chart::y_from_zero`].
    pub fn y_from_zero(mut self, on: bool) -> Self {
        self.y_from_zero = on;
        self
    }
    /// Caps the y axis at `v` (see [`Chart::y_max`]).
    pub fn y_max(mut self, v: f64) -> Self {
        self.y_max = Some(v);
        self
    }
    /// Labels the x axis at these positions instead of numeric ticks.
    pub fn x_ticks(mut self, ticks: Vec<(f64, String)>) -> Self {
        self.x_ticks = Some(ticks);
        self
    }
    /// Adds a series on top of the others.
    pub fn series(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }
    /// Adds a labelled horizontal line at `y`.
    pub fn reference(mut self, name: impl Into<String>, y: f64) -> Self {
        self.refs.push(RefLine {
            name: name.into(),
            y,
        });
        self
    }
}

/// Keeps at most about four points per pixel column (first, min, max, last) when a series has
/// far more points than the chart has columns; points must be sorted by x. Points with
/// intervals (a Stevens graph's segments) merge per column into one interval spanning them.
pub fn decimate(points: &[Point], columns: usize) -> Vec<Point> {
    let columns = columns.max(1);
    if points.len() <= columns * 4 {
        return points.to_vec();
    }
    if points.iter().any(|p| p.err.is_some()) {
        return merge_intervals(points, columns);
    }
    let (x0, x1) = (points[0].x, points[points.len() - 1].x);
    let width = (x1 - x0) / columns as f64;
    if width.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return points.to_vec();
    }
    let mut out = Vec::with_capacity(columns * 4);
    let mut start = 0;
    while start < points.len() {
        let col = ((points[start].x - x0) / width).floor();
        let mut end = start;
        while end < points.len() && ((points[end].x - x0) / width).floor() == col {
            end += 1;
        }
        let bucket = &points[start..end];
        let min = bucket
            .iter()
            .copied()
            .min_by(|a, b| a.y.total_cmp(&b.y))
            .unwrap_or(bucket[0]);
        let max = bucket
            .iter()
            .copied()
            .max_by(|a, b| a.y.total_cmp(&b.y))
            .unwrap_or(bucket[0]);
        let mut keep = vec![bucket[0], min, max, bucket[bucket.len() - 1]];
        keep.sort_by(|a, b| a.x.total_cmp(&b.x));
        keep.dedup();
        out.extend(keep);
        start = end.max(start + 1);
    }
    out
}

/// One point per pixel column: the column's lowest low to its highest high.
fn merge_intervals(points: &[Point], columns: usize) -> Vec<Point> {
    let (x0, x1) = (points[0].x, points[points.len() - 1].x);
    let width = (x1 - x0) / columns as f64;
    if width.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return points.to_vec();
    }
    let mut out: Vec<(f64, Point)> = Vec::with_capacity(columns + 1);
    for p in points {
        let col = ((p.x - x0) / width).floor();
        let (lo, hi) = p.err.unwrap_or((p.y, p.y));
        match out.last_mut() {
            Some((c, q)) if *c == col => {
                let (qlo, qhi) = q.err.unwrap_or((q.y, q.y));
                q.err = Some((qlo.min(lo), qhi.max(hi)));
                q.y = q.y.max(p.y);
            }
            _ => out.push((
                col,
                Point {
                    err: Some((lo, hi)),
                    ..*p
                },
            )),
        }
    }
    out.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests;
