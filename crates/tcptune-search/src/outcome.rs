//! What a search did: each step with both arms' results and the reason for the verdict, the
//! final state against the original, and the sysctl.d drop-in that reproduces it. The same
//! value is printed as a table, as JSON (`tune-search` schema) and as the audit trail.

use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;

use crate::duration::TestShape;
use crate::hypothesis::{NotTried, Settings};
use crate::stats::Arm;

/// Which part of the search a trial belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// A change the diagnosis pointed to.
    Change,
    /// A smaller buffer than the one kept.
    Shrink,
}

/// What became of a trial's change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It stays in effect.
    Kept,
    /// The values before it were put back.
    RolledBack,
}

/// One trial.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Step {
    /// A change or a shrink.
    pub phase: Phase,
    /// The values B wrote.
    pub changes: Vec<(String, String)>,
    /// The values they replaced (A's).
    pub was: Vec<(String, String)>,
    /// The diagnosis the change was tried on.
    pub evidence: String,
    /// Why the change was expected to help: the rule that proposed it.
    pub hypothesis: String,
    /// Throughput with the old values (A) and the new (B), bits per second.
    pub a: Option<Arm>,
    /// Throughput with the new values (B), bits per second.
    pub b: Option<Arm>,
    /// Mean loaded RTT of each arm, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_rtt_ms: Option<f64>,
    /// Mean loaded RTT of B, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_rtt_ms: Option<f64>,
    /// Tests this trial used (a first trial of a change starts from the baseline's last test
    /// when the trials' tests are as long: it is not counted twice in `Report::tests_used`).
    pub tests: usize,
    /// Kept or rolled back.
    pub outcome: Outcome,
    /// Why: the statistics or the guardrail that decided.
    pub why: String,
    /// Buffer memory all flows may take with B, bytes (buffer changes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// A changed setting: from, to.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Changed {
    /// The sysctl.
    pub key: String,
    /// Its value before the search.
    pub from: String,
    /// Its value after.
    pub to: String,
}

/// The whole search.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Report {
    /// The first test's throughput, bits per second.
    pub baseline_bps: Option<f64>,
    /// The best arm's mean throughput seen with the kept settings, bits per second.
    pub best_bps: f64,
    /// Every trial, in order.
    pub steps: Vec<Step>,
    /// Changes the search does not try, and why.
    pub not_tried: Vec<NotTried>,
    /// The settings the search leaves changed.
    pub changed: Vec<Changed>,
    /// A sysctl.d drop-in reproducing the final state.
    pub dropin: String,
    /// Tests run, the baseline included.
    pub tests_used: usize,
    /// Seconds the search took.
    pub seconds: f64,
    /// Why it stopped.
    pub stopped: String,
    /// The tests of the trials: their length, the seconds omitted, and why.
    pub test: TestShape,
}

impl Report {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        original: &Settings,
        current: &Settings,
        steps: Vec<Step>,
        not_tried: Vec<NotTried>,
        baseline_bps: Option<f64>,
        best_bps: f64,
        tests_used: usize,
        seconds: f64,
        stopped: String,
        test: TestShape,
    ) -> Report {
        let changed: Vec<Changed> = current
            .iter()
            .filter(|(k, v)| original.get(*k) != Some(v))
            .map(|(k, v)| Changed {
                key: k.clone(),
                from: original.get(k).cloned().unwrap_or_default(),
                to: v.clone(),
            })
            .collect();
        let mut dropin = format!(
            "# Written by tcptune {} `tune --search`: the settings the A/B trials kept.\n",
            env!("CARGO_PKG_VERSION")
        );
        if changed.is_empty() {
            dropin.push_str("# No change helped: nothing to set.\n");
        }
        for c in &changed {
            dropin.push_str(&format!("# was {}\n{} = {}\n", c.from, c.key, c.to));
        }
        Report {
            baseline_bps,
            best_bps,
            steps,
            not_tried,
            changed,
            dropin,
            tests_used,
            seconds,
            stopped,
            test,
        }
    }
}

fn arm(a: &Option<Arm>) -> String {
    match a {
        Some(Arm {
            mean_bps,
            ci95_low_bps: Some(lo),
            ci95_high_bps: Some(hi),
            ..
        }) => format!("{:.1} [{:.1}–{:.1}]", mean_bps / 1e6, lo / 1e6, hi / 1e6),
        Some(a) => format!("{:.1}", a.mean_bps / 1e6),
        None => "-".into(),
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<7} {:<44} {:>24} {:>24} {:>5} {:>10}  verdict",
            "phase", "setting", "A Mbit/s [95% CI]", "B Mbit/s [95% CI]", "tests", "memory"
        )?;
        for s in &self.steps {
            let setting: Vec<String> = s
                .changes
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect();
            let phase = match s.phase {
                Phase::Change => "change",
                Phase::Shrink => "shrink",
            };
            let outcome = match s.outcome {
                Outcome::Kept => "kept",
                Outcome::RolledBack => "rolled back",
            };
            let mem = s
                .memory_bytes
                .map(|m| format!("{} KiB", m / 1024))
                .unwrap_or_else(|| "-".into());
            writeln!(
                f,
                "{phase:<7} {:<44} {:>24} {:>24} {:>5} {mem:>10}  {outcome}: {}",
                setting.join(", "),
                arm(&s.a),
                arm(&s.b),
                s.tests,
                s.why
            )?;
        }
        if self.steps.is_empty() {
            writeln!(f, "(no trial ran)")?;
        }
        for n in &self.not_tried {
            writeln!(f, "not tried: {}: {}", n.what, n.why)?;
        }
        let base = self
            .baseline_bps
            .map(|b| format!("{:.1}", b / 1e6))
            .unwrap_or_else(|| "-".into());
        writeln!(
            f,
            "baseline {base} Mbit/s, best kept {:.1} Mbit/s; {} tests in {:.0} s; stopped: {}",
            self.best_bps / 1e6,
            self.tests_used,
            self.seconds,
            self.stopped
        )?;
        writeln!(f, "tests: {}", self.test.why)?;
        write!(f, "\n{}", self.dropin)
    }
}

/// What `--dry-run` shows: the path as it is, the hypotheses and the trial each would get.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DryRun {
    /// The test of the path as it is.
    pub baseline: crate::hypothesis::Observation,
    /// The changes the baseline points to, in the order they would be tried.
    pub hypotheses: Vec<crate::hypothesis::Hypothesis>,
    /// Changes the search would not try, and why.
    pub not_tried: Vec<NotTried>,
    /// The trial each hypothesis gets, in words.
    pub trial: String,
}

/// What `tune --search` prints (`--json`: the `tune-search` schema).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchOutput {
    /// "search" or "dry-run".
    pub mode: String,
    /// The test server, HOST:PORT.
    pub server: String,
    /// Which end this host is.
    pub role: crate::hypothesis::Role,
    /// The namespace the search ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// The values before the search, as the kernel printed them.
    pub settings_before: Settings,
    /// With `--dry-run`: the path and the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<DryRun>,
    /// Without `--dry-run`: what the search did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
    /// The snapshot `tune --rollback` restores (absent when nothing was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_path: Option<String>,
    /// The audit trail of every change with its evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trail_path: Option<String>,
}

impl fmt::Display for SearchOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = &self.dry_run {
            writeln!(
                f,
                "Path as it is ({}): {:.1} Mbit/s, {}",
                self.server,
                d.baseline.rate_bps / 1e6,
                d.baseline.verdict
            )?;
            for h in &d.hypotheses {
                let set: Vec<String> = h
                    .changes
                    .iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect();
                writeln!(f, "would try: {} ({})", set.join(", "), h.why)?;
            }
            if d.hypotheses.is_empty() {
                writeln!(
                    f,
                    "no hypothesis: the diagnosis points to no setting of this host"
                )?;
            }
            for n in &d.not_tried {
                writeln!(f, "not tried: {}: {}", n.what, n.why)?;
            }
            return writeln!(f, "each as {}; nothing was changed (dry run)", d.trial);
        }
        if let Some(r) = &self.report {
            write!(f, "{r}")?;
        }
        match &self.snapshot_path {
            Some(p) => writeln!(
                f,
                "# snapshot: {p} (`tcptune tune --rollback` restores the values before the search)"
            )?,
            None => writeln!(f, "# nothing kept: every value is as it was")?,
        }
        if let Some(t) = &self.trail_path {
            writeln!(f, "# audit trail: {t}")?;
        }
        Ok(())
    }
}
