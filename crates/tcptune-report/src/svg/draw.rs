//! How a [`Chart`] becomes SVG: its layout (legend columns, axes, bar slots), the frame
//! (title, grid, ticks, axis labels, reference lines), each series in its style, clipped to the
//! plot, and the legend below.

use std::fmt::Write;

use super::axis::{esc, fit, fnv, tick_label, Axis, FNV_START};
use super::{decimate, Chart, Point, Series, Style, PALETTE};

/// Margins around the plot: left (y tick labels and the axis label), right, top, bottom.
const L: f64 = 70.0;
const R: f64 = 20.0;
const T: f64 = 36.0;
const B: f64 = 50.0;

/// Whether a value can be drawn on an axis (finite, and positive on a log axis).
fn usable(v: f64, log: bool) -> bool {
    v.is_finite() && (!log || v > 0.0)
}

/// A chart's geometry, worked out before anything is drawn.
struct Layout {
    w: f64,
    h: f64,
    plot_w: f64,
    plot_h: f64,
    /// Legend entries (named series and references) and the columns they go in.
    legend_len: usize,
    cols: usize,
    x_axis: Axis,
    x_labels: Vec<(f64, String)>,
    y_axis: Axis,
    /// The bar series' indices, the x step's 80% they share, each bar's width and the value
    /// bars rise from.
    bar_series: Vec<usize>,
    slot: f64,
    bar_w: f64,
    bar_floor: f64,
}

impl Layout {
    fn px(&self, x: f64) -> f64 {
        L + self.x_axis.frac(x) * self.plot_w
    }

    fn py(&self, y: f64) -> f64 {
        T + self.plot_h - self.y_axis.frac(y) * self.plot_h
    }
}

impl Chart {
    /// The chart as an SVG document.
    pub fn render(&self) -> String {
        let f = self.layout();
        let mut s = String::new();
        self.draw_frame(&f, &mut s);
        // Series, clipped to the plot area. The clip id must be unique within an HTML page that
        // holds several charts, and stable so the same chart renders to the same bytes.
        let id = self.clip_id();
        let _ = write!(
            s,
            r#"<clipPath id="{id}"><rect x="{L}" y="{T}" width="{:.1}" height="{:.1}"/></clipPath><g clip-path="url(#{id})">"#,
            f.plot_w, f.plot_h
        );
        let mut colors = Vec::new();
        for (i, ser) in self.series.iter().enumerate() {
            let color = ser
                .color
                .clone()
                .unwrap_or_else(|| PALETTE[i % PALETTE.len()].to_string());
            self.draw_series(&f, i, ser, &color, &mut s);
            colors.push(color);
        }
        s.push_str("</g>");
        self.draw_legend(&f, &colors, &mut s);
        s.push_str("</svg>\n");
        s
    }

    /// Where everything goes: the legend's columns, the axes and the bars' slots.
    fn layout(&self) -> Layout {
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
        let (x_axis, x_labels, y_axis) = self.axes();
        let mut f = Layout {
            w,
            h,
            plot_w,
            plot_h,
            legend_len: legend.len(),
            cols,
            x_axis,
            x_labels,
            y_axis,
            bar_series: Vec::new(),
            slot: 0.0,
            bar_w: 0.0,
            bar_floor: 0.0,
        };
        // Grouped bars: each bar series takes its slot of 80% of the x step.
        f.bar_series = (0..self.series.len())
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
        f.slot = if step_px.is_finite() && !self.x_log {
            (f.px(f.x_axis.lo + step_px) - f.px(f.x_axis.lo)) * 0.8
        } else {
            plot_w * 0.5
        };
        f.bar_w = f.slot / f.bar_series.len().max(1) as f64;
        f.bar_floor = if self.y_log {
            f.y_axis.lo
        } else {
            0.0f64.max(f.y_axis.lo)
        };
        f
    }

    /// A value as drawn: below zero cut at zero when the quantity cannot be negative.
    fn clamp(&self, v: f64) -> f64 {
        if self.non_negative {
            v.max(0.0)
        } else {
            v
        }
    }

    /// The x axis with its tick labels (the categories' names over categories) and the y axis,
    /// fitted to every point, interval and reference line that the axes can show.
    fn axes(&self) -> (Axis, Vec<(f64, String)>, Axis) {
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
            .map(|v| self.clamp(v))
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
        (x_axis, x_labels, y_axis)
    }

    /// The document's head, title, grid with ticks, frame, axis labels and reference lines.
    fn draw_frame(&self, f: &Layout, s: &mut String) {
        let (w, h, plot_w, plot_h) = (f.w, f.h, f.plot_w, f.plot_h);
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
        for (t, label) in &f.x_labels {
            let x = f.px(*t);
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                T + plot_h,
                T + plot_h + 16.0,
                esc(label)
            );
        }
        for t in &f.y_axis.ticks {
            let y = f.py(*t);
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
            let y = f.py(r.y);
            let _ = write!(
                s,
                r##"<line x1="{L}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#777" stroke-dasharray="2 3" data-ref="{i}"/>"##,
                L + plot_w
            );
        }
    }

    /// One series in its style, inside its own group.
    fn draw_series(&self, f: &Layout, i: usize, ser: &Series, color: &str, s: &mut String) {
        let (px, py) = (|x| f.px(x), |y| f.py(y));
        let (slot, bar_w, bar_floor) = (f.slot, f.bar_w, f.bar_floor);
        let bar_series = &f.bar_series;
        let pts: Vec<Point> = decimate(&ser.points, f.plot_w as usize)
            .into_iter()
            .filter(|p| usable(p.x, self.x_log) && usable(p.y, self.y_log))
            .map(|p| Point {
                err: p.err.map(|(lo, hi)| (self.clamp(lo), self.clamp(hi))),
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
                return;
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
                return;
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
                return;
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

    /// The legend below the plot, filled row by row: the named series, then the references.
    fn draw_legend(&self, f: &Layout, colors: &[String], s: &mut String) {
        let (plot_w, plot_h, cols) = (f.plot_w, f.plot_h, f.cols);
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
            .zip(colors)
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
        let named = f.legend_len - self.refs.len();
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
