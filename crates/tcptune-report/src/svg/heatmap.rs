//! The table-heatmap: rows × columns of two categorical settings, each cell coloured by its
//! value on ColorBrewer's "Blues" and labelled with its figures, with a colour bar below.

use std::fmt::Write;

use super::axis::{esc, fit, fnv, spans_decades, tick_label, Axis, FNV_START};

/// (a mean, its interval); `None` for a combination that was not measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The value that picks the colour, in the heatmap's `value_label` unit.
    pub value: f64,
    /// Lines of text printed in the cell (the mean, its interval).
    pub text: Vec<String>,
}

/// A table-heatmap: rows × columns of categories (a sweep of two categorical settings, such as
/// impairment × buffer), each cell coloured by its value on one sequential scale and labelled
/// with its figures, so every combination reads at once instead of as bars in a legend's
/// colours. The scale is logarithmic when the values span decades and starts at zero otherwise
/// (the values are non-negative quantities), with a colour bar below the table.
#[derive(Debug, Clone)]
pub struct Heatmap {
    /// Title above the table.
    pub title: String,
    /// What the rows and the columns are (the two settings' names).
    pub row_label: String,
    /// The column setting's name.
    pub col_label: String,
    /// What the colour shows, with its unit.
    pub value_label: String,
    /// Row headings: the first setting's values, top to bottom.
    pub rows: Vec<String>,
    /// Column headings: the second setting's values, left to right.
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
        let bar_w = (cell_w * self.cols.len() as f64).min(480.0);
        self.colour_bar(&axis, (x0, bar_y, bar_w), &mut s);
        s.push_str("</svg>\n");
        s
    }

    /// The colour bar below the table at (x, y) and `width` wide: a gradient through the stops,
    /// with the scale's ticks and what the colour shows.
    fn colour_bar(&self, axis: &Axis, (bar_x, bar_y, bar_w): (f64, f64, f64), s: &mut String) {
        let log = axis.log;
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
    }
}
