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

use std::fmt::Write;

/// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Line,
    Points,
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
    pub x: f64,
    pub y: f64,
    pub err: Option<(f64, f64)>,
}

impl Point {
    pub fn new(x: f64, y: f64) -> Self {
        Point { x, y, err: None }
    }
    pub fn with_err(x: f64, y: f64, low: f64, high: f64) -> Self {
        Point {
            x,
            y,
            err: Some((low, high)),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
    pub style: Style,
    /// Colour; the palette's next one when `None`.
    pub color: Option<String>,
}

impl Series {
    pub fn new(name: impl Into<String>, style: Style, points: Vec<Point>) -> Self {
        Series {
            name: name.into(),
            points,
            style,
            color: None,
        }
    }
    pub fn color(mut self, c: &str) -> Self {
        self.color = Some(c.into());
        self
    }
}

/// A labelled horizontal line (a path rate, a model's bound).
#[derive(Debug, Clone)]
pub struct RefLine {
    pub name: String,
    pub y: f64,
}

/// A chart. Build it, then [`Chart::render`].
#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_log: bool,
    pub y_log: bool,
    /// Start the y axis at zero (throughput, windows) rather than at the data's minimum.
    pub y_from_zero: bool,
    /// Caps the y axis (a theory curve that runs far above the measurements).
    pub y_max: Option<f64>,
    /// Labels at given x positions instead of numeric ticks (a sweep over names).
    pub x_ticks: Option<Vec<(f64, String)>>,
    pub series: Vec<Series>,
    pub refs: Vec<RefLine>,
    pub width: u32,
    /// Height of the plot and its axes; the legend below adds to it.
    pub height: u32,
    /// Values below zero are impossible (rates, bytes, times): error bars and the axis stop
    /// at zero. On by default.
    pub non_negative: bool,
}

impl Chart {
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
    pub fn non_negative(mut self, on: bool) -> Self {
        self.non_negative = on;
        self
    }
    pub fn size(mut self, width: u32, height: u32) -> Self {
        self.width = width;
        self.height = height;
        self
    }
    pub fn x_log(mut self, on: bool) -> Self {
        self.x_log = on;
        self
    }
    pub fn y_log(mut self, on: bool) -> Self {
        self.y_log = on;
        self
    }
    pub fn y_from_zero(mut self, on: bool) -> Self {
        self.y_from_zero = on;
        self
    }
    pub fn y_max(mut self, v: f64) -> Self {
        self.y_max = Some(v);
        self
    }
    pub fn x_ticks(mut self, ticks: Vec<(f64, String)>) -> Self {
        self.x_ticks = Some(ticks);
        self
    }
    pub fn series(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }
    pub fn reference(mut self, name: impl Into<String>, y: f64) -> Self {
        self.refs.push(RefLine {
            name: name.into(),
            y,
        });
        self
    }

    /// The chart as an SVG document.
    pub fn render(&self) -> String {
        const L: f64 = 70.0; // left margin: y tick labels and axis label
        const R: f64 = 20.0;
        const T: f64 = 36.0;
        const B: f64 = 50.0;
        let w = self.width as f64;
        let plot_w = w - L - R;
        // The legend: entries in as many columns as their longest label allows (about 6.5
        // pixels a character), below the plot; it adds to the height instead of eating the plot.
        // A series without a name has no entry (a trial's second line in the same colour, which
        // the title explains).
        let legend: Vec<String> = self
            .series
            .iter()
            .filter(|s| !s.name.is_empty())
            .map(|s| s.name.clone())
            .chain(
                self.refs
                    .iter()
                    .map(|r| format!("{} ({})", r.name, tick_label(r.y))),
            )
            .collect();
        let longest = legend.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        let col_w = 26.0 + 6.5 * longest as f64;
        let cols = ((plot_w / col_w).floor() as usize).clamp(1, 6);
        let legend_rows = legend.len().div_ceil(cols);
        let legend_h = 16.0 * legend_rows as f64 + if legend_rows > 0 { 8.0 } else { 0.0 };
        let plot_h = self.height as f64 - T - B;
        let h = self.height as f64 + legend_h;
        let clamp = |v: f64| if self.non_negative { v.max(0.0) } else { v };

        let usable = |v: f64, log: bool| v.is_finite() && (!log || v > 0.0);
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.x))
            .filter(|&x| usable(x, self.x_log));
        let mut ys: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| {
                s.points
                    .iter()
                    .flat_map(|p| [Some(p.y), p.err.map(|e| e.0), p.err.map(|e| e.1)])
            })
            .flatten()
            .map(clamp)
            .chain(self.refs.iter().map(|r| r.y))
            .filter(|&y| usable(y, self.y_log))
            .map(|y| self.y_max.map_or(y, |m| y.min(m)))
            .collect();
        if self.y_from_zero && !self.y_log {
            ys.push(0.0);
        }
        let mut x_axis = Axis::fit(xs, self.x_log);
        let mut x_labels: Vec<(f64, String)> =
            x_axis.ticks.iter().map(|t| (*t, tick_label(*t))).collect();
        if let Some(ticks) = &self.x_ticks {
            // Categories: half a step of room on each side.
            let (lo, hi) = ticks
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), (x, _)| {
                    (l.min(*x), h.max(*x))
                });
            if lo.is_finite() {
                x_axis = Axis {
                    lo: lo - 0.5,
                    hi: hi + 0.5,
                    log: false,
                    ticks: Vec::new(),
                };
                x_labels = ticks.clone();
            }
        }
        if x_axis.log && self.x_ticks.is_none() {
            // A sweep's first and last points lie on a log axis' ends, on the frame with half
            // their whiskers cut: 3% of the span as margin on each side.
            let (l, h) = (x_axis.lo.log10(), x_axis.hi.log10());
            let m = (h - l) * 0.03;
            (x_axis.lo, x_axis.hi) = (10f64.powf(l - m), 10f64.powf(h + m));
        }
        let y_axis = Axis::fit(ys.into_iter(), self.y_log);
        // Grouped bars: each bar series takes its slot of 80% of the x step.
        let bar_series: Vec<usize> = (0..self.series.len())
            .filter(|i| self.series[*i].style == Style::Bars)
            .collect();
        let step_px = {
            let mut xs: Vec<f64> = self
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.x))
                .filter(|x| x.is_finite())
                .collect();
            xs.sort_by(f64::total_cmp);
            xs.dedup();
            xs.windows(2)
                .map(|w| (w[1] - w[0]).abs())
                .fold(f64::INFINITY, f64::min)
        };
        let px = |x: f64| L + x_axis.frac(x) * plot_w;
        let py = |y: f64| T + plot_h - y_axis.frac(y) * plot_h;
        let slot = if step_px.is_finite() && !self.x_log {
            (px(x_axis.lo + step_px) - px(x_axis.lo)) * 0.8
        } else {
            plot_w * 0.5
        };
        let bar_w = slot / bar_series.len().max(1) as f64;
        let bar_floor = if self.y_log {
            y_axis.lo
        } else {
            0.0f64.max(y_axis.lo)
        };

        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
        );
        let _ = write!(s, r##"<rect width="{w}" height="{h}" fill="#ffffff"/>"##);
        let _ = write!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
            w / 2.0,
            esc(&fit(&self.title, w - 20.0, 8.5))
        );
        // Grid and ticks.
        for (t, label) in &x_labels {
            let x = px(*t);
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                T + plot_h,
                T + plot_h + 16.0,
                esc(label)
            );
        }
        for t in &y_axis.ticks {
            let y = py(*t);
            let _ = write!(
                s,
                r##"<line x1="{L}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                L + plot_w,
                L - 6.0,
                y + 4.0,
                tick_label(*t)
            );
        }
        let _ = write!(
            s,
            r##"<rect x="{L}" y="{T}" width="{plot_w:.1}" height="{plot_h:.1}" fill="none" stroke="#444"/>"##
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            L + plot_w / 2.0,
            T + plot_h + 36.0,
            esc(&self.x_label)
        );
        let _ = write!(
            s,
            r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            T + plot_h / 2.0,
            esc(&self.y_label)
        );
        // Reference lines.
        for (i, r) in self.refs.iter().enumerate() {
            if !usable(r.y, self.y_log) {
                continue;
            }
            let y = py(r.y);
            let _ = write!(
                s,
                r##"<line x1="{L}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#777" stroke-dasharray="2 3" data-ref="{i}"/>"##,
                L + plot_w
            );
        }
        // Series, clipped to the plot area. The clip id must be unique within an HTML page that
        // holds several charts, and stable so the same chart renders to the same bytes.
        let id = self.clip_id();
        let _ = write!(
            s,
            r#"<clipPath id="{id}"><rect x="{L}" y="{T}" width="{plot_w:.1}" height="{plot_h:.1}"/></clipPath><g clip-path="url(#{id})">"#
        );
        let mut colors = Vec::new();
        for (i, ser) in self.series.iter().enumerate() {
            let color = ser
                .color
                .clone()
                .unwrap_or_else(|| PALETTE[i % PALETTE.len()].to_string());
            colors.push(color.clone());
            let pts: Vec<Point> = decimate(&ser.points, plot_w as usize)
                .into_iter()
                .filter(|p| usable(p.x, self.x_log) && usable(p.y, self.y_log))
                .map(|p| Point {
                    err: p.err.map(|(lo, hi)| (clamp(lo), clamp(hi))),
                    ..p
                })
                .collect();
            let _ = write!(s, r#"<g data-series="{}">"#, esc(&ser.name));
            // Bars, segments and crosses draw only themselves (and a bar its error bar).
            let offset = bar_series
                .iter()
                .position(|b| *b == i)
                .map(|k| -slot / 2.0 + bar_w * (k as f64 + 0.5));
            match ser.style {
                Style::Bars => {
                    for p in &pts {
                        let x = px(p.x) + offset.unwrap_or(0.0);
                        let (top, base) = (py(p.y), py(bar_floor));
                        let _ = write!(
                            s,
                            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}" fill-opacity="0.85"/>"#,
                            x - bar_w * 0.45,
                            top.min(base),
                            bar_w * 0.9,
                            (base - top).abs()
                        );
                        if let Some((lo, hi)) = p
                            .err
                            .filter(|(lo, hi)| usable(*lo, self.y_log) && usable(*hi, self.y_log))
                        {
                            let (ylo, yhi) = (py(lo), py(hi));
                            let _ = write!(
                                s,
                                r##"<path d="M{x:.1} {ylo:.1}V{yhi:.1}M{:.1} {ylo:.1}h6M{:.1} {yhi:.1}h6" stroke="#222" stroke-width="1.2"/>"##,
                                x - 3.0,
                                x - 3.0
                            );
                        }
                    }
                    s.push_str("</g>");
                    continue;
                }
                Style::Segments => {
                    let mut d = String::new();
                    for p in &pts {
                        let (lo, hi) = p.err.unwrap_or((p.y, p.y));
                        let _ = write!(d, "M{:.1} {:.1}V{:.1}", px(p.x), py(lo), py(hi));
                    }
                    let _ = write!(
                        s,
                        r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5"/></g>"#
                    );
                    continue;
                }
                Style::Crosses => {
                    let mut d = String::new();
                    for p in &pts {
                        let _ = write!(
                            d,
                            "M{:.1} {:.1}l6 6m0 -6l-6 6",
                            px(p.x) - 3.0,
                            py(p.y) - 3.0
                        );
                    }
                    let _ = write!(
                        s,
                        r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5"/></g>"#
                    );
                    continue;
                }
                _ => {}
            }
            if matches!(
                ser.style,
                Style::Line | Style::LinePoints | Style::Step | Style::Dashed
            ) && pts.len() > 1
            {
                let mut d = String::new();
                for (j, p) in pts.iter().enumerate() {
                    let (x, y) = (px(p.x), py(p.y));
                    if j == 0 {
                        let _ = write!(d, "M{x:.1} {y:.1}");
                    } else if ser.style == Style::Step {
                        let _ = write!(d, "H{x:.1}V{y:.1}");
                    } else {
                        let _ = write!(d, "L{x:.1} {y:.1}");
                    }
                }
                let dash = if ser.style == Style::Dashed {
                    r#" stroke-dasharray="6 4""#
                } else {
                    ""
                };
                let _ = write!(
                    s,
                    r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"{dash}/>"#
                );
            }
            for p in &pts {
                let (x, y) = (px(p.x), py(p.y));
                if let Some((lo, hi)) = p
                    .err
                    .filter(|(lo, hi)| usable(*lo, self.y_log) && usable(*hi, self.y_log))
                {
                    let (ylo, yhi) = (py(lo), py(hi));
                    let _ = write!(
                        s,
                        r#"<path d="M{x:.1} {ylo:.1}V{yhi:.1}M{:.1} {ylo:.1}h8M{:.1} {yhi:.1}h8" stroke="{color}" stroke-width="1.2"/>"#,
                        x - 4.0,
                        x - 4.0
                    );
                }
                if matches!(ser.style, Style::Points | Style::LinePoints) || p.err.is_some() {
                    let _ = write!(
                        s,
                        r#"<circle cx="{x:.1}" cy="{y:.1}" r="2.8" fill="{color}"/>"#
                    );
                }
            }
            s.push_str("</g>");
        }
        s.push_str("</g>");
        // Legend below the plot, filled row by row.
        let place = |k: usize| {
            let (row, col) = (k / cols, k % cols);
            (
                L + col as f64 * (plot_w / cols as f64),
                T + plot_h + 50.0 + 16.0 * row as f64,
            )
        };
        let named = self
            .series
            .iter()
            .zip(&colors)
            .filter(|(s, _)| !s.name.is_empty());
        for (k, (ser, color)) in named.enumerate() {
            let (lx, ly) = place(k);
            let dash = match ser.style {
                Style::Dashed => r#" stroke-width="2" stroke-dasharray="6 4""#,
                Style::Bars => r#" stroke-width="8""#,
                _ => r#" stroke-width="2""#,
            };
            let _ = write!(
                s,
                r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}"{dash}/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
                ly - 4.0,
                lx + 18.0,
                ly - 4.0,
                lx + 22.0,
                esc(&ser.name)
            );
        }
        let named = legend.len() - self.refs.len();
        for (k, r) in self.refs.iter().enumerate() {
            let (lx, ly) = place(named + k);
            let _ = write!(
                s,
                r##"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#777" stroke-dasharray="2 3"/><text x="{:.1}" y="{ly:.1}">{} ({})</text>"##,
                ly - 4.0,
                lx + 18.0,
                ly - 4.0,
                lx + 22.0,
                esc(&r.name),
                tick_label(r.y)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

/// FNV-1a: element ids from what a chart shows, unique within a page and stable across runs.
const FNV_START: u64 = 0xcbf29ce484222325;
fn fnv(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h = (*h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
    }
}

impl Chart {
    /// An FNV-1a hash of what the chart shows, as an element id.
    fn clip_id(&self) -> String {
        let mut h = FNV_START;
        let mut eat = |bytes: &[u8]| fnv(&mut h, bytes);
        eat(self.title.as_bytes());
        for s in &self.series {
            eat(s.name.as_bytes());
            eat(&(s.points.len() as u64).to_le_bytes());
            for p in s.points.iter().take(64) {
                eat(&p.x.to_le_bytes());
                eat(&p.y.to_le_bytes());
            }
        }
        eat(&(self.refs.len() as u64).to_le_bytes());
        format!("clip{h:016x}")
    }
}

/// One cell of a [`Heatmap`]: the value that sets its colour and the lines of text it shows
/// (a mean, its interval); `None` for a combination that was not measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub value: f64,
    pub text: Vec<String>,
}

/// A table-heatmap: rows × columns of categories (a sweep of two categorical settings, such as
/// impairment × buffer), each cell coloured by its value on one sequential scale and labelled
/// with its figures, so every combination reads at once instead of as bars in a legend's
/// colours. The scale is logarithmic when the values span decades and starts at zero otherwise
/// (the values are non-negative quantities), with a colour bar below the table.
#[derive(Debug, Clone)]
pub struct Heatmap {
    pub title: String,
    /// What the rows and the columns are (the two settings' names).
    pub row_label: String,
    pub col_label: String,
    /// What the colour shows, with its unit.
    pub value_label: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    /// `cells[row][col]`.
    pub cells: Vec<Vec<Option<Cell>>>,
}

/// ColorBrewer's sequential "Blues" (light to dark): readable in grey and with the common
/// colour-vision deficiencies.
const BLUES: [(u8, u8, u8); 5] = [
    (239, 243, 255),
    (189, 215, 231),
    (107, 174, 214),
    (49, 130, 189),
    (8, 81, 156),
];

/// The colour at `t` ∈ [0, 1] of [`BLUES`], interpolated between its stops.
fn blue(t: f64) -> String {
    let t = t.clamp(0.0, 1.0) * (BLUES.len() - 1) as f64;
    let i = (t.floor() as usize).min(BLUES.len() - 2);
    let f = t - i as f64;
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    let (a, b) = (BLUES[i], BLUES[i + 1]);
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

impl Heatmap {
    /// Whether the colour scale is logarithmic: positive values spanning a decade or more.
    pub fn log_scale(&self) -> bool {
        spans_decades(self.values())
    }

    fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.cells
            .iter()
            .flatten()
            .flatten()
            .map(|c| c.value)
            .filter(|v| v.is_finite())
    }

    /// The table as an SVG document.
    pub fn render(&self) -> String {
        const PAD: f64 = 12.0;
        const T: f64 = 36.0;
        const HEAD: f64 = 22.0; // the column headers' row
        const CELL_H: f64 = 46.0;
        const CHAR: f64 = 7.0; // pixels a character at 12px, roughly
        let log = self.log_scale();
        let lines = self
            .cells
            .iter()
            .flatten()
            .flatten()
            .map(|c| c.text.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let cell_h = CELL_H.max(16.0 * lines as f64 + 14.0);
        let widest = |texts: &mut dyn Iterator<Item = &String>| {
            texts.map(|t| t.chars().count()).max().unwrap_or(0) as f64 * CHAR
        };
        let row_w = (widest(&mut self.rows.iter()) + 2.0 * PAD)
            .max(widest(&mut std::iter::once(&self.row_label)) + PAD);
        let cell_w = (widest(&mut self.cols.iter()).max(widest(
            &mut self
                .cells
                .iter()
                .flatten()
                .flatten()
                .flat_map(|c| c.text.iter()),
        )) + 2.0 * PAD)
            .max(80.0);
        let w = PAD + row_w + cell_w * self.cols.len().max(1) as f64 + PAD;
        let table_h = HEAD + cell_h * self.rows.len() as f64;
        let bar_y = T + 18.0 + table_h + 22.0;
        let h = bar_y + 12.0 + 36.0;
        let x0 = PAD + row_w;
        let y0 = T + 18.0 + HEAD;

        // The colour scale: from zero (or the log scale's decade below the smallest) to the top.
        let values: Vec<f64> = self
            .values()
            .filter(|v| !log || *v > 0.0)
            .map(|v| v.max(0.0))
            .collect();
        let axis = Axis::fit(values.iter().copied().chain((!log).then_some(0.0)), log);
        let frac = |v: f64| {
            if log && v <= 0.0 {
                0.0
            } else {
                axis.frac(v.max(axis.lo)).clamp(0.0, 1.0)
            }
        };

        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" font-family="sans-serif" font-size="12">"#
        );
        let _ = write!(
            s,
            r##"<rect width="{w:.0}" height="{h:.0}" fill="#ffffff"/>"##
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
            w / 2.0,
            esc(&fit(&self.title, w - 20.0, 8.5))
        );
        // What the rows and columns are: "rows \ columns" above the row headers, the columns'
        // name centred over them.
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
            x0 + cell_w * self.cols.len() as f64 / 2.0,
            T + 10.0,
            esc(&self.col_label)
        );
        let _ = write!(
            s,
            r##"<text x="{PAD}" y="{:.1}" fill="#444">{}</text>"##,
            y0 - 6.0,
            esc(&self.row_label)
        );
        for (j, c) in self.cols.iter().enumerate() {
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-weight="bold">{}</text>"#,
                x0 + cell_w * (j as f64 + 0.5),
                y0 - 6.0,
                esc(c)
            );
        }
        for (i, r) in self.rows.iter().enumerate() {
            let y = y0 + cell_h * i as f64;
            let _ = write!(
                s,
                r#"<text x="{PAD}" y="{:.1}" font-weight="bold">{}</text>"#,
                y + cell_h / 2.0 + 4.0,
                esc(r)
            );
            for j in 0..self.cols.len() {
                let x = x0 + cell_w * j as f64;
                let cell = self
                    .cells
                    .get(i)
                    .and_then(|row| row.get(j))
                    .and_then(|c| c.as_ref());
                let (fill, ink) = match cell {
                    Some(c) if c.value.is_finite() => {
                        let t = frac(c.value);
                        (blue(t), if t > 0.55 { "#ffffff" } else { "#111111" })
                    }
                    _ => ("#f4f4f4".to_string(), "#777777"),
                };
                let _ = write!(
                    s,
                    r##"<rect x="{x:.1}" y="{y:.1}" width="{cell_w:.1}" height="{cell_h:.1}" fill="{fill}" stroke="#ffffff" stroke-width="2"/>"##
                );
                let text: Vec<String> = match cell {
                    Some(c) => c.text.clone(),
                    None => vec!["not measured".into()],
                };
                let top = y + cell_h / 2.0 - 8.0 * (text.len() as f64 - 1.0) + 4.0;
                for (k, t) in text.iter().enumerate() {
                    let (size, weight) = if k == 0 {
                        ("13", r#" font-weight="bold""#)
                    } else {
                        ("11", "")
                    };
                    let _ = write!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="{size}"{weight} fill="{ink}">{}</text>"#,
                        x + cell_w / 2.0,
                        top + 16.0 * k as f64,
                        esc(t)
                    );
                }
            }
        }
        // The colour bar: a gradient through the stops, with the scale's ticks.
        let bar_x = x0;
        let bar_w = (cell_w * self.cols.len() as f64).min(480.0);
        let mut hash = FNV_START;
        for t in std::iter::once(&self.title)
            .chain(&self.rows)
            .chain(&self.cols)
        {
            fnv(&mut hash, t.as_bytes());
        }
        let id = format!("heat{hash:016x}");
        let _ = write!(s, r#"<defs><linearGradient id="{id}">"#);
        for (k, _) in BLUES.iter().enumerate() {
            let t = k as f64 / (BLUES.len() - 1) as f64;
            let _ = write!(s, r#"<stop offset="{:.2}" stop-color="{}"/>"#, t, blue(t));
        }
        let _ = write!(
            s,
            r##"</linearGradient></defs><rect x="{bar_x:.1}" y="{bar_y:.1}" width="{bar_w:.1}" height="12" fill="url(#{id})" stroke="#444" stroke-width="0.5"/>"##
        );
        for t in &axis.ticks {
            let x = bar_x + axis.frac(*t) * bar_w;
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#444"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"##,
                bar_y + 12.0,
                bar_y + 16.0,
                bar_y + 28.0,
                tick_label(*t)
            );
        }
        let scale = if log { ", log scale" } else { "" };
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="11">{}{scale}</text>"#,
            bar_x + bar_w + 10.0,
            bar_y + 10.0,
            esc(&self.value_label)
        );
        s.push_str("</svg>\n");
        s
    }
}

/// Whether positive values span a decade or more (a ratio of 10 or more between the largest
/// and the smallest) that a linear axis would flatten the small ones to zero.
pub fn spans_decades(values: impl IntoIterator<Item = f64>) -> bool {
    let (lo, hi) = values
        .into_iter()
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
    lo.is_finite() && hi / lo >= 10.0
}

/// `text` cut with "…" to fit `width` pixels at about `per_char` pixels a character (SVG has
/// no text measurement; a title wider than its chart would run off both sides).
fn fit(text: &str, width: f64, per_char: f64) -> String {
    let max = (width / per_char).floor().max(1.0) as usize;
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", cut.trim_end())
}

/// Escapes text for SVG/HTML content and attributes.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Tick labels with SI suffixes: 1500000 → "1.5M", 0.002 → "2m".
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else if a == 0.0 || a >= 0.1 {
        (v, "")
    } else if a >= 1e-4 {
        (v * 1e3, "m")
    } else {
        (v * 1e6, "µ")
    };
    let s = format!("{scaled:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<f64>,
}

impl Axis {
    fn fit(values: impl Iterator<Item = f64>, log: bool) -> Axis {
        let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
        if !lo.is_finite() {
            (lo, hi) = if log { (1.0, 10.0) } else { (0.0, 1.0) };
        }
        if log {
            let (l, h) = (
                lo.log10().floor(),
                hi.log10().ceil().max(lo.log10().floor() + 1.0),
            );
            let decades = (h - l) as i32;
            let mut ticks = Vec::new();
            for e in l as i32..=h as i32 {
                for m in [1.0, 2.0, 5.0] {
                    let t = m * 10f64.powi(e);
                    if (m == 1.0 || decades <= 3) && t >= 10f64.powf(l) && t <= 10f64.powf(h) {
                        ticks.push(t);
                    }
                }
            }
            // The ends at the nearest 1-2-5 step outside the data rather than whole decades:
            // 1000 … 16000 spans 1000 … 20000, not … 100000 with 40% of the width empty.
            let steps = |e: f64| [1.0, 2.0, 5.0].map(|m| m * 10f64.powf(e));
            let lo = steps(l)
                .into_iter()
                .filter(|s| *s <= lo)
                .fold(10f64.powf(l), f64::max);
            let hi = steps(h - 1.0)
                .into_iter()
                .filter(|s| *s >= hi)
                .fold(10f64.powf(h), f64::min);
            ticks.retain(|t| *t >= lo && *t <= hi);
            return Axis { lo, hi, log, ticks };
        }
        if hi <= lo {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            (lo, hi) = (lo - pad, hi + pad);
        }
        let raw = (hi - lo) / 6.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        let (lo, hi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
        let n = ((hi - lo) / step).round() as usize;
        let ticks = (0..=n).map(|i| lo + i as f64 * step).collect();
        Axis { lo, hi, log, ticks }
    }

    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
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
mod tests {
    use super::*;

    fn chart() -> Chart {
        Chart::new(
            "Throughput <vs> buffer",
            "receive buffer (bytes)",
            "goodput (bit/s)",
        )
        .x_log(true)
        .series(Series::new(
            "measured",
            Style::LinePoints,
            vec![
                Point::with_err(4096.0, 1.5e6, 1.2e6, 1.8e6),
                Point::with_err(65536.0, 2.4e7, 2.2e7, 2.6e7),
            ],
        ))
        .series(Series::new(
            "window / RTT",
            Style::Dashed,
            vec![Point::new(4096.0, 1.6e6), Point::new(65536.0, 2.6e7)],
        ))
        .reference("path rate", 1e8)
    }

    #[test]
    fn renders_well_formed_svg_with_every_part() {
        let svg = chart().render();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
        assert!(
            texts.contains(&"Throughput <vs> buffer"),
            "title escaped and kept"
        );
        assert!(texts.iter().any(|t| t.starts_with("path rate (100M")));
        assert!(doc
            .descendants()
            .any(|n| n.attribute("data-series") == Some("window / RTT")));
        // One error bar per measured point, two points drawn.
        let measured = doc
            .descendants()
            .find(|n| n.attribute("data-series") == Some("measured"))
            .unwrap();
        assert_eq!(
            measured
                .children()
                .filter(|n| n.tag_name().name() == "circle")
                .count(),
            2
        );
        assert!(svg.contains("stroke-dasharray=\"6 4\""), "theory is dashed");
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        // Charts that differ get different clip ids (several share one HTML page).
        let other = Chart::new("other", "x", "y").render();
        let id = |s: &str| {
            s.split("clipPath id=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .to_string()
        };
        assert_ne!(id(&svg), id(&other));
        assert_eq!(svg, chart().render(), "rendering is deterministic");
    }

    #[test]
    fn points_at_a_log_axis_ends_stay_off_the_frame() {
        let svg = Chart::new("t", "x", "y")
            .x_log(true)
            .series(Series::new(
                "s",
                Style::Points,
                vec![Point::new(1000.0, 1.0), Point::new(10000.0, 2.0)],
            ))
            .render();
        let xs: Vec<f64> = svg
            .split("<circle cx=\"")
            .skip(1)
            .map(|c| c.split('"').next().unwrap().parse().unwrap())
            .collect();
        // The plot spans 70 … 700 pixels (720 wide, margins 70 and 20).
        assert_eq!(xs.len(), 2);
        assert!(xs[0] > 75.0 && xs[1] < 695.0, "{xs:?}");
    }

    #[test]
    fn nice_ticks_and_labels() {
        let a = Axis::fit([0.0, 97.0].into_iter(), false);
        assert_eq!(a.ticks, vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        let l = Axis::fit([4096.0, 16.0 * 1048576.0].into_iter(), true);
        // Ends at the 1-2-5 steps around the data, ticks at the decades within.
        assert_eq!((l.lo, l.hi), (2000.0, 2e7));
        assert_eq!(l.ticks, vec![1e4, 1e5, 1e6, 1e7]);
        let q = Axis::fit([1000.0, 16000.0].into_iter(), true);
        assert_eq!((q.lo, q.hi), (1000.0, 20000.0));
        assert_eq!(q.ticks, vec![1000.0, 2000.0, 5000.0, 10000.0, 20000.0]);
        assert_eq!(tick_label(1.5e6), "1.5M");
        assert_eq!(tick_label(0.002), "2m");
        assert_eq!(tick_label(25.0), "25");
    }

    #[test]
    fn empty_and_degenerate_charts_still_render() {
        for c in [
            Chart::new("empty", "x", "y"),
            Chart::new("one", "x", "y").series(Series::new(
                "s",
                Style::Line,
                vec![Point::new(1.0, 1.0)],
            )),
            Chart::new("nan", "x", "y").y_log(true).series(Series::new(
                "s",
                Style::Points,
                vec![
                    Point::new(f64::NAN, 1.0),
                    Point::new(1.0, 0.0),
                    Point::new(2.0, 3.0),
                ],
            )),
        ] {
            let svg = c.render();
            roxmltree::Document::parse(&svg).unwrap();
            assert!(!svg.contains("NaN"), "{svg}");
        }
    }

    #[test]
    fn decimation_keeps_extremes_and_bounds_size() {
        let pts: Vec<Point> = (0..100_000)
            .map(|i| Point::new(i as f64, if i == 54_321 { 1e9 } else { (i % 7) as f64 }))
            .collect();
        let d = decimate(&pts, 500);
        assert!(d.len() <= 2000, "{}", d.len());
        assert!(d.iter().any(|p| p.y == 1e9), "the spike survives");
        assert_eq!(d.first().unwrap().x, 0.0);
        assert_eq!(d.last().unwrap().x, 99_999.0);
    }

    #[test]
    fn intervals_below_zero_are_cut_at_zero() {
        // Three trials with a wide CI: the whisker would reach -60; the axis starts at 0.
        let c = Chart::new("g", "x", "y").series(Series::new(
            "m",
            Style::LinePoints,
            vec![
                Point::with_err(1.0, 40.0, -60.0, 140.0),
                Point::new(2.0, 50.0),
            ],
        ));
        let svg = c.render();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let labels: Vec<&str> = doc
            .descendants()
            .filter(|n| n.attribute("text-anchor") == Some("end"))
            .filter_map(|n| n.text())
            .collect();
        assert_eq!(labels.first(), Some(&"0"), "{labels:?}");
        assert!(labels.iter().all(|l| !l.starts_with('-')), "{labels:?}");
        // Allowed where a quantity can be negative.
        let svg = c.clone().non_negative(false).render();
        assert!(svg.contains(">-"), "a negative tick when asked");
    }

    #[test]
    fn grouped_bars_side_by_side_and_legend_in_columns() {
        let mut c = Chart::new("cats", "impairment", "goodput")
            .x_ticks(vec![(0.0, "clean".into()), (1.0, "loss".into())]);
        for k in 0..3 {
            c = c.series(Series::new(
                format!("buffer {k}"),
                Style::Bars,
                vec![Point::new(0.0, 10.0 + k as f64), Point::new(1.0, 5.0)],
            ));
        }
        let svg = c.render();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let bars: Vec<f64> = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "rect" && n.attribute("fill-opacity").is_some())
            .map(|n| n.attribute("x").unwrap().parse().unwrap())
            .collect();
        assert_eq!(bars.len(), 6);
        // The three bars of one category do not overlap.
        let mut first: Vec<f64> = bars.iter().step_by(2).copied().collect();
        first.sort_by(f64::total_cmp);
        assert!(first.windows(2).all(|w| w[1] - w[0] > 10.0), "{first:?}");
        // Short labels share rows: three entries fit on one row, so the legend adds 24 px.
        let height: f64 = doc
            .root_element()
            .attribute("height")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(height, 400.0 + 24.0);
    }

    #[test]
    fn long_titles_are_cut_to_the_chart() {
        assert_eq!(fit("short", 300.0, 10.0), "short");
        let t = fit(
            "Time-sequence (Stevens): stream 0 198.18.0.2:5201 → 198.18.0.1:40000",
            200.0,
            10.0,
        );
        assert_eq!(t.chars().count(), 20);
        assert!(t.ends_with('…'));
    }

    #[test]
    fn decades_call_for_a_log_axis() {
        assert!(spans_decades([6e4, 4e7]));
        assert!(!spans_decades([3e7, 9e7, 0.0]));
        assert!(!spans_decades([]));
    }

    #[test]
    fn segments_merge_per_column_into_one_spanning_interval() {
        let pts: Vec<Point> = (0..10_000)
            .map(|i| {
                let seq = i as f64 * 1448.0;
                Point::with_err(i as f64 * 1e-3, seq + 1448.0, seq, seq + 1448.0)
            })
            .collect();
        let d = decimate(&pts, 100);
        assert!(d.len() <= 101, "{}", d.len());
        assert_eq!(d[0].err.unwrap().0, 0.0);
        assert_eq!(d.last().unwrap().err.unwrap().1, 10_000.0 * 1448.0);
        // Together they still cover every byte: each starts where the previous ended.
        for w in d.windows(2) {
            assert_eq!(w[0].err.unwrap().1, w[1].err.unwrap().0);
        }
    }

    fn heatmap(values: [[Option<f64>; 3]; 2]) -> Heatmap {
        Heatmap {
            title: "goodput <impairment × buffer>".into(),
            row_label: "buffer".into(),
            col_label: "impairment".into(),
            value_label: "goodput (bit/s)".into(),
            rows: vec!["no limit".into(), "rmem 4096".into()],
            cols: vec!["clean".into(), "loss 1%".into(), "rtt 100ms".into()],
            cells: values
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|v| {
                            v.map(|v| Cell {
                                value: v,
                                text: vec![tick_label(v), "CI & more".into()],
                            })
                        })
                        .collect()
                })
                .collect(),
        }
    }

    /// The fill colours of the cells in drawing order (rows, then columns).
    fn fills(svg: &str) -> Vec<String> {
        svg.split("<rect ")
            .filter(|r| r.contains("stroke-width=\"2\""))
            .map(|r| r.split("fill=\"").nth(1).unwrap()[..7].to_string())
            .collect()
    }

    fn darkness(hex: &str) -> u32 {
        let c = |i: usize| u32::from_str_radix(&hex[i..i + 2], 16).unwrap();
        3 * 255 - (c(1) + c(3) + c(5))
    }

    #[test]
    fn heatmap_colours_cells_by_value_and_labels_each() {
        // Linear: values within a decade; a higher value is a darker cell.
        let map = heatmap([
            [Some(4.8e7), Some(4.4e7), Some(3.9e7)],
            [Some(1.2e7), None, Some(6.0e6)],
        ]);
        assert!(!map.log_scale());
        let svg = map.render();
        let f = fills(&svg);
        assert_eq!(f.len(), 6, "one rect per cell: {f:?}");
        assert!(darkness(&f[0]) > darkness(&f[1]) && darkness(&f[1]) > darkness(&f[2]));
        assert!(darkness(&f[2]) > darkness(&f[3]) && darkness(&f[3]) > darkness(&f[5]));
        assert_eq!(f[4], "#f4f4f4", "an unmeasured cell is grey");
        assert!(svg.contains(">not measured<"));
        assert!(svg.contains(">48M<") && svg.contains(">6M<"));
        // Escaped text, a colour bar from zero, nothing below it.
        assert!(
            svg.contains("goodput &lt;impairment × buffer&gt;") && svg.contains("CI &amp; more")
        );
        assert!(svg.contains(">0<") && !svg.contains(">-"));
        assert!(svg.contains(">goodput (bit/s)<"));

        // Values spanning decades (a 4 KiB buffer beside a free path): a log scale, on which
        // the small values still differ in colour.
        let map = heatmap([
            [Some(4.8e7), Some(4.4e7), Some(4.0e7)],
            [Some(1.2e7), Some(2.0e5), Some(1.0e5)],
        ]);
        assert!(map.log_scale());
        let svg = map.render();
        let f = fills(&svg);
        assert!(darkness(&f[4]) > darkness(&f[5]), "{f:?}");
        assert!(svg.contains("goodput (bit/s), log scale"));
    }
}
