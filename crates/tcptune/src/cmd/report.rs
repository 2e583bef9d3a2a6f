//! `tcptune report DIR`: redraw an experiment's report from its results directory.

use std::path::Path;

use anyhow::Context;
use schemars::JsonSchema;
use serde::Serialize;
use tcptune_experiment::report::{write_report, PointSummary};

use crate::output::emit;
use crate::Outcome;

/// The files written and the statistics of each sweep point.
#[derive(Serialize, JsonSchema)]
pub struct ReportResult {
    pub html: String,
    pub summary_csv: String,
    pub plots: Vec<String>,
    pub points: Vec<PointSummary>,
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
                        g.ci95_low? / 1e6,
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

pub fn run(dir: &Path, json: bool) -> anyhow::Result<Outcome> {
    if !dir.join("plan.json").is_file() {
        anyhow::bail!(
            "{} is not an experiment's results directory (no plan.json); give the --out directory of `tcptune lab run`",
            dir.display()
        );
    }
    let files = write_report(dir)
        .with_context(|| format!("cannot write the report of {}", dir.display()))?;
    print(files, json)?;
    Ok(Outcome::Ok)
}

/// Prints what a report wrote (also at the end of `lab run`).
pub fn print(files: tcptune_experiment::report::ReportFiles, json: bool) -> anyhow::Result<()> {
    let result = ReportResult {
        html: files.html.display().to_string(),
        summary_csv: files.summary_csv.display().to_string(),
        plots: files
            .plots
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        points: files.points,
    };
    emit("report", &result, json)
}
