//! `tcptune report DIR`: redraw an experiment's report from its results directory, or compare
//! its points with an earlier run's (`--against`).

use std::path::Path;

use anyhow::Context;
use tcptune_experiment::report::{write_report, ReportResult};

use crate::outcome::Outcome;
use crate::output::emit;

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
    emit("report", &ReportResult::from(files), json)
}

/// `report DIR --against EARLIER`: DIR's points beside an earlier run's.
pub fn against(dir: &Path, earlier: &Path, tolerance: f64, json: bool) -> anyhow::Result<Outcome> {
    let read = |p: &Path| -> anyhow::Result<(String, String)> {
        let file = if p.is_dir() {
            p.join("summary.csv")
        } else {
            p.to_path_buf()
        };
        let text = std::fs::read_to_string(&file).with_context(|| {
            format!(
                "cannot read {} (give a results directory of `tcptune lab run`, or its \
                 summary.csv)",
                file.display()
            )
        })?;
        Ok((file.display().to_string(), text))
    };
    let (a, b) = (read(dir)?, read(earlier)?);
    let r = tcptune_experiment::rerun::compare((&a.0, &a.1), (&b.0, &b.1), tolerance)?;
    emit("report --against", &r, json)?;
    Ok(if r.found_difference() {
        Outcome::Problem
    } else {
        Outcome::Ok
    })
}
