//! `tcptune report DIR`: redraw an experiment's report from its results directory.

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
