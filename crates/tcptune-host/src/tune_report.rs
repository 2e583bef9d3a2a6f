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
    /// The plan made (absent for rollback).
    pub plan: Option<Plan>,
    /// The drop-in file written, for --write.
    pub wrote: Option<String>,
    /// The snapshot saved by --apply or restored by --rollback.
    pub snapshot: Option<Snapshot>,
    /// Where the snapshot is, for --apply and --rollback.
    pub snapshot_path: Option<String>,
    /// The command that undoes --apply, with the --netns and --snapshot it used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<String>,
}

/// The command that rolls back an apply made with these options: as printed, it must find the
/// snapshot, so it names the namespace and a snapshot file given by hand.
pub fn undo_command(netns: Option<&str>, snapshot: Option<&std::path::Path>) -> String {
    let mut cmd = String::from("tcptune tune --rollback");
    if let Some(ns) = netns {
        cmd += &format!(" --netns {}", shell_word(ns));
    }
    if let Some(p) = snapshot {
        cmd += &format!(" --snapshot {}", shell_word(&p.display().to_string()));
    }
    cmd
}

/// `s` as one shell word: as it is when it has no special characters, else single-quoted.
pub fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=+,@%".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

impl std::fmt::Display for TuneReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(plan) = &self.plan {
            let heading = match self.mode.as_str() {
                "apply" => "# applied now (as a sysctl.d drop-in; --write installs it for boot)",
                "write" => "# sysctl.d drop-in (installed by --write)",
                _ => crate::tune::DRY_RUN_HEADING,
            };
            plan.write_headed(f, heading)?;
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
                "\napplied {} value(s); the previous values are saved in {p}; undo with `{}`",
                s.sysctls.len() + s.txqueuelen.len(),
                self.undo.as_deref().unwrap_or("tcptune tune --rollback")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_undo_command_names_the_namespace_and_snapshot_used() {
        assert_eq!(undo_command(None, None), "tcptune tune --rollback");
        assert_eq!(
            undo_command(Some("lab1"), Some(std::path::Path::new("/tmp/s.json"))),
            "tcptune tune --rollback --netns lab1 --snapshot /tmp/s.json"
        );
        assert_eq!(
            undo_command(None, Some(std::path::Path::new("/tmp/my snap's.json"))),
            r"tcptune tune --rollback --snapshot '/tmp/my snap'\''s.json'"
        );
    }
}
