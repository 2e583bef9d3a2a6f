//! A results directory read back once for every exporter: the stored plan, the trial records
//! and each point's statistics, with the series files and texts read on demand, and the
//! [`Exporter`] trait each output file of the report implements.

use std::path::{Path, PathBuf};

use tcptune_report::svg::Chart;

use super::summary::{summarize, PointSummary};
use crate::run::{load_plan, load_records, RunError, SeriesSample, StoredPlan, TrialRecord};

/// A chart with its file stem and caption.
pub(super) type NamedChart = (String, String, Chart);

/// One output of the report (hyperfine's shape: one exporter per file, behind one trait).
pub(super) trait Exporter {
    /// Writes the exporter's file(s) for the results and returns their paths in order.
    fn export(&self, results: &Results) -> Result<Vec<PathBuf>, RunError>;
}

/// What a results directory holds, read once.
pub(super) struct Results {
    pub dir: PathBuf,
    pub plan: StoredPlan,
    pub records: Vec<TrialRecord>,
    pub points: Vec<PointSummary>,
}

impl Results {
    /// Reads the plan and the trial records and summarizes each point.
    pub fn load(dir: &Path) -> Result<Results, RunError> {
        let plan = load_plan(dir)?;
        let records = load_records(dir)?;
        let points = summarize(&plan, &records);
        Ok(Results {
            dir: dir.to_path_buf(),
            plan,
            records,
            points,
        })
    }

    /// A trial's series file (JSON lines, relative to the directory); empty when it is missing
    /// or unreadable, since a report still draws without it.
    pub fn series(&self, rel: &str) -> Vec<SeriesSample> {
        std::fs::read_to_string(self.dir.join(rel))
            .map(|t| {
                t.lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A text file of the directory (the spec, the environment); empty when missing.
    pub fn text(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    /// Writes one output file, naming it in the error.
    pub fn write(&self, path: &Path, contents: impl AsRef<[u8]>) -> Result<(), RunError> {
        std::fs::write(path, contents).map_err(|cause| RunError::Io {
            path: path.display().to_string(),
            cause,
        })
    }
}
