//! The report of a results directory: statistics per sweep point, `summary.csv`, and the
//! self-contained HTML report with its SVG plots (goodput against the swept setting with 95% CI
//! bars and the theory beside it, the time series of each point, the statistics table, the
//! diagnosis of each point, the spec and the environment). Everything is read back from the
//! results directory, so `tcptune report DIR` can redraw a report at any time.
//!
//! One module per job: [`theory`](mod@theory) (what the models expect), [`summary`] (statistics and
//! verdict per point), `results` (the directory read once, and the `Exporter` trait), `csv`,
//! `chart` and `heatmap` (the goodput figure), `time` (series over time), `captures` (what the
//! captures show), `figures` (every figure drawn once; the SVG exporter), `tables` (link, join and
//! failure tables) and `html` (the page). `write_report` runs the exporters.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;

mod captures;
mod chart;
mod csv;
mod figures;
mod heatmap;
mod html;
mod results;
mod rtt;
pub mod summary;
mod tables;
pub mod theory;
mod time;

pub use csv::summary_csv;
pub use summary::{auto_sentences, point_evidence, point_verdict, summarize, PointSummary};
pub use tables::{realised, Realised};
pub use theory::{theory, Theory};

use crate::plan::Point;
use crate::run::{load_plan, RunError};
use figures::{Figures, SvgExporter};
use html::HtmlExporter;
use results::{Exporter, Results};

/// Files the report wrote.
#[derive(Debug, Clone)]
pub struct ReportFiles {
    /// The HTML report.
    pub html: PathBuf,
    /// summary.csv: one row per point.
    pub summary_csv: PathBuf,
    /// Each SVG chart written.
    pub plots: Vec<PathBuf>,
    /// The statistics of each sweep point.
    pub points: Vec<PointSummary>,
    /// With `repetitions = "auto"`: the stopping rule the run used.
    pub auto: Option<crate::stopping::Auto>,
}

// What `tcptune report` (and the end of `lab run`) prints; its doc line is its JSON Schema's
// description (schema/report.json).
/// The files written and the statistics of each sweep point.
#[derive(Serialize, JsonSchema)]
pub struct ReportResult {
    /// The HTML report's path.
    pub html: String,
    /// summary.csv's path: one row per point.
    pub summary_csv: String,
    /// Each SVG chart's path.
    pub plots: Vec<String>,
    /// The statistics of each sweep point.
    pub points: Vec<PointSummary>,
    /// With `repetitions = "auto"`: the stopping rule the run used (each point's
    /// `stopped` says why it took no more trials).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<crate::stopping::Auto>,
}

impl std::fmt::Display for ReportResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<48} {:>4} {:>10} {:>21} {:>10}  verdict",
            "point", "n", "mean Mb/s", "95% CI", "expected"
        )?;
        for p in &self.points {
            let g = p.goodput_bps.as_ref();
            let ci = g
                .and_then(|g| {
                    Some(format!(
                        "{:.2} – {:.2}",
                        g.ci95_low?.max(0.0) / 1e6,
                        g.ci95_high? / 1e6
                    ))
                })
                .unwrap_or_default();
            writeln!(
                f,
                "{:<48} {:>4} {:>10} {:>21} {:>10}  {}",
                p.label,
                g.map(|g| g.n).unwrap_or(0),
                g.map(|g| format!("{:.2}", g.mean / 1e6))
                    .unwrap_or_default(),
                ci,
                p.theory
                    .expected_bps
                    .map(|e| format!("{:.2}", e / 1e6))
                    .unwrap_or_default(),
                p.verdict.as_deref().unwrap_or("—")
            )?;
        }
        if let Some(rule) = &self.auto {
            writeln!(f, "{}", auto_sentences(rule, &self.points))?;
        }
        for p in self.points.iter().filter(|p| p.failures > 0) {
            writeln!(
                f,
                "{}: {} trial(s) failed: {}",
                p.label,
                p.failures,
                p.failure_causes.join("; ")
            )?;
        }
        writeln!(f, "\nreport: {}\nsummary: {}", self.html, self.summary_csv)
    }
}

impl From<ReportFiles> for ReportResult {
    fn from(files: ReportFiles) -> ReportResult {
        ReportResult {
            html: files.html.display().to_string(),
            summary_csv: files.summary_csv.display().to_string(),
            plots: files
                .plots
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            points: files.points,
            auto: files.auto,
        }
    }
}

/// Writes `summary.csv`, `plots/*.svg` and `report.html` for a results directory.
pub fn write_report(dir: &Path) -> Result<ReportFiles, RunError> {
    let results = Results::load(dir)?;
    let summary_csv = first(csv::CsvExporter.export(&results)?);
    let figures = Figures::draw(&results);
    let plots = SvgExporter(&figures).export(&results)?;
    let html = first(HtmlExporter(&figures).export(&results)?);
    Ok(ReportFiles {
        html,
        summary_csv,
        plots,
        points: results.points,
        auto: results.plan.auto,
    })
}

/// The one file a single-file exporter wrote.
fn first(mut paths: Vec<PathBuf>) -> PathBuf {
    // Invariant: the CSV and HTML exporters each write exactly one file and return its path.
    paths.swap_remove(0)
}

/// Points of a stored plan, for callers that only have the directory.
pub fn points_of(dir: &Path) -> Result<Vec<Point>, RunError> {
    Ok(load_plan(dir)?.points)
}

#[cfg(test)]
mod tests;
