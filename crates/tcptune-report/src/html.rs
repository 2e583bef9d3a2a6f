//! A self-contained HTML report: inline CSS, inline SVG charts, tables and notes, with no
//! scripts and no external resources, so it opens from disk, in a mail, or offline.

use std::fmt::Write;

use crate::svg::esc;

/// One block of a report section.
#[derive(Debug, Clone)]
pub enum Block {
    /// A paragraph of plain text (escaped).
    Text(String),
    /// A preformatted block (commands, findings).
    Pre(String),
    /// A table: header cells and rows (escaped).
    Table {
        /// Column headings (escaped).
        header: Vec<String>,
        /// Cells row by row (escaped); the first column is left-aligned, the rest right.
        rows: Vec<Vec<String>>,
    },
    /// An SVG document produced by [`crate::svg::Chart::render`] (trusted: our own output).
    Svg(String),
    /// Small SVG charts side by side, wrapping (one row per sweep point, say), each with a
    /// caption (escaped).
    Grid(Vec<(String, String)>),
}

/// One `<h2>` section of a [`Page`]: its blocks in order.
#[derive(Debug, Clone)]
pub struct Section {
    /// The heading (escaped).
    pub title: String,
    /// What the section shows, in order.
    pub blocks: Vec<Block>,
}

/// A page: a title, a one-paragraph summary, and sections.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The page's `<title>` and `<h1>` (escaped).
    pub title: String,
    /// The answer in a paragraph under the title; left out when empty.
    pub summary: String,
    /// The sections in order.
    pub sections: Vec<Section>,
}

const CSS: &str = "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;margin:1em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}pre{background:#f7f7f7;padding:.8em;overflow-x:auto}\
figure{margin:1em 0}svg{max-width:100%;height:auto}.grid{display:flex;flex-wrap:wrap;gap:.5em}\
.grid figure{margin:0;flex:0 0 32%;display:flex;flex-direction:column;justify-content:space-between}.grid figcaption{font-size:.8em;color:#555}.summary{font-size:1.05em;background:#eef5fb;padding:.8em}";

impl Page {
    /// An empty page titled `title`.
    pub fn new(title: impl Into<String>) -> Self {
        Page {
            title: title.into(),
            ..Default::default()
        }
    }

    /// Appends a section (chainable).
    pub fn section(&mut self, title: impl Into<String>, blocks: Vec<Block>) -> &mut Self {
        self.sections.push(Section {
            title: title.into(),
            blocks,
        });
        self
    }

    /// The whole document as one HTML string, with its CSS inline.
    pub fn render(&self) -> String {
        let mut h = String::new();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body>\n<h1>{}</h1>\n",
            esc(&self.title),
            esc(&self.title)
        );
        if !self.summary.is_empty() {
            let _ = writeln!(h, "<p class=\"summary\">{}</p>", esc(&self.summary));
        }
        for s in &self.sections {
            let _ = writeln!(h, "<h2>{}</h2>", esc(&s.title));
            for b in &s.blocks {
                match b {
                    Block::Text(t) => {
                        let _ = writeln!(h, "<p>{}</p>", esc(t));
                    }
                    Block::Pre(t) => {
                        let _ = writeln!(h, "<pre>{}</pre>", esc(t));
                    }
                    Block::Table { header, rows } => {
                        h.push_str("<table><thead><tr>");
                        for c in header {
                            let _ = write!(h, "<th>{}</th>", esc(c));
                        }
                        h.push_str("</tr></thead><tbody>");
                        for r in rows {
                            h.push_str("<tr>");
                            for c in r {
                                let _ = write!(h, "<td>{}</td>", esc(c));
                            }
                            h.push_str("</tr>");
                        }
                        h.push_str("</tbody></table>\n");
                    }
                    Block::Svg(svg) => {
                        let _ = writeln!(h, "<figure>{svg}</figure>");
                    }
                    Block::Grid(figs) => {
                        h.push_str("<div class=\"grid\">");
                        for (caption, svg) in figs {
                            let _ = write!(
                                h,
                                "<figure>{svg}<figcaption>{}</figcaption></figure>",
                                esc(caption)
                            );
                        }
                        h.push_str("</div>\n");
                    }
                }
            }
        }
        h.push_str("</body></html>\n");
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::svg::{Chart, Point, Series, Style};

    #[test]
    fn a_page_is_self_contained_and_escapes_text() {
        let mut p = Page::new("Seed 001 <reproduction>");
        p.summary = "median 12.4 → 41.6 Mbit/s".into();
        let chart = Chart::new("t", "x", "y").series(Series::new(
            "s",
            Style::Line,
            vec![Point::new(0.0, 1.0), Point::new(1.0, 2.0)],
        ));
        p.section(
            "Results",
            vec![
                Block::Table {
                    header: vec!["setting".into(), "n".into()],
                    rows: vec![vec!["<untuned>".into(), "600".into()]],
                },
                Block::Svg(chart.render()),
                Block::Pre("sysctl -w a=b".into()),
            ],
        );
        let html = p.render();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>Seed 001 &lt;reproduction&gt;</title>"));
        assert!(html.contains("<td>&lt;untuned&gt;</td>"));
        assert!(html.contains("<svg xmlns="));
        // Nothing is fetched when the page opens.
        for needle in ["<script", "src=", "href=", "@import", "url(http"] {
            assert!(!html.contains(needle), "{needle}");
        }
    }
}
