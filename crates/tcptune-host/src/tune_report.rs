//! What `tcptune tune` did, as one result: the audit and plan it acted on, the drop-in it wrote
//! and the snapshot it saved or restored. The binary prints it as text or `--json`.

use schemars::JsonSchema;
use serde::Serialize;

use crate::audit::Audit;
use crate::tune::{Plan, Snapshot};

/// What `tune` did.
#[derive(Serialize, JsonSchema)]
pub struct TuneReport {
    /// `dry-run`, `write`, `apply` or `rollback`.
    pub mode: String,
    /// The audit the plan comes from (absent for rollback).
    pub audit: Option<Audit>,
    pub plan: Option<Plan>,
    /// The drop-in file written, for --write.
    pub wrote: Option<String>,
    /// The snapshot saved by --apply or restored by --rollback.
    pub snapshot: Option<Snapshot>,
    pub snapshot_path: Option<String>,
}

impl std::fmt::Display for TuneReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(plan) = &self.plan {
            write!(f, "{plan}")?;
        }
        if let Some(w) = &self.wrote {
            writeln!(
                f,
                "\nwrote {w} (takes effect at boot, or now with `sysctl --system`)"
            )?;
        }
        match (self.mode.as_str(), &self.snapshot, &self.snapshot_path) {
            ("apply", Some(s), Some(p)) => writeln!(
                f,
                "\napplied {} value(s); the previous values are saved in {p}; undo with `tcptune tune --rollback`",
                s.sysctls.len() + s.txqueuelen.len()
            ),
            ("rollback", Some(s), Some(p)) => {
                writeln!(f, "restored from {p}:")?;
                for (k, v) in &s.sysctls {
                    writeln!(f, "  {k} = {}", v.trim_end().replace('\t', " "))?;
                }
                for (d, v) in &s.txqueuelen {
                    writeln!(f, "  dev:{d} txqueuelen {v}")?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}
