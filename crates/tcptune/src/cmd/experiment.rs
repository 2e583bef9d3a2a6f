//! `tcptune lab run SPEC --out DIR`: check the spec, run its trials on labs with progress and
//! an ETA, then write the report.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};
use tcptune_experiment::host_runner::HostRunner;
use tcptune_experiment::lab_runner::{lab_spec, LabRunner};
use tcptune_experiment::plan::CheckedPlan;
use tcptune_experiment::settings::LiveCapabilities;
use tcptune_experiment::{plan, report, run, spec};

use crate::outcome::Outcome;

fn fmt_eta(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Whether `program` is an executable file in a directory of PATH.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            std::fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// How many points a smoke run keeps at most.
pub const SMOKE_POINTS: usize = 6;

/// Reads and checks the spec; `--precision` runs it as if it said repetitions = "auto" at that
/// precision (checked as written first, so errors name its own lines).
fn load_spec(spec_path: &Path, precision: Option<&str>) -> anyhow::Result<spec::Spec> {
    let text = tcptune_kernel::file::read_text_limited(
        spec_path,
        spec::SPEC_FILE_LIMIT,
        "experiment spec",
    )?;
    let spec = spec::parse(&text, &LiveCapabilities)
        .map_err(|e| anyhow::anyhow!("{}: {e}", spec_path.display()))?;
    let Some(p) = precision else {
        return Ok(spec);
    };
    let p = tcptune_experiment::stopping::parse_precision(p)
        .map_err(|e| anyhow::anyhow!("--precision: {e}"))?;
    spec::with_precision(&text, p)
        .and_then(|t| spec::parse(&t, &LiveCapabilities))
        .map_err(|e| anyhow::anyhow!("{} with --precision: {e}", spec_path.display()))
}

pub fn run(
    spec_path: &Path,
    out: &Path,
    lab: &str,
    check: bool,
    options: &run::RunOptions,
    precision: Option<&str>,
    json: bool,
) -> anyhow::Result<Outcome> {
    // The trials' labs take this name: refuse a bad one before anything else.
    tcptune_lab::lab::check_name(lab).map_err(|e| anyhow::anyhow!("--name: {e}"))?;
    let spec = load_spec(spec_path, precision)?;
    let (points, trials) = match options.smoke {
        Some(n) => plan::smoke(&spec, n),
        None => {
            let points = plan::points(&spec);
            let trials = plan::trials(&spec, &points);
            (points, trials)
        }
    };
    check_before_running(spec_path, &spec, &points, out)?;
    let real = spec.hosts.is_some();
    if check {
        let plan = CheckedPlan::new(
            &spec,
            &points,
            trials.len(),
            out.display().to_string(),
            out.join("plan.json").exists(),
            lab,
        );
        crate::output::emit("lab run --check", &plan, json)?;
        return Ok(Outcome::Ok);
    }
    if !real {
        tcptune_lab::lab::require_admin("lab run")?;
    }
    // SIGINT/SIGTERM/SIGHUP set a flag: the trial in progress ends (its lab is removed, or
    // the hosts' settings rolled back) and the loop stops; a rerun resumes.
    tcptune_lab::os::catch_stop_signals();
    let mut runner: Box<dyn run::TrialRunner> = match &spec.hosts {
        Some(h) => Box::new(
            HostRunner::connect(&spec.name, h, &points)
                .map_err(|e| anyhow::anyhow!("{}: {e}", spec_path.display()))?,
        ),
        None => Box::new(LabRunner::new(lab)),
    };
    let mut stderr = std::io::stderr();
    let outcome = run::run_with(&spec, options, runner.as_mut(), out, &mut |p| {
        progress_line(&mut stderr, p)
    })
    .with_context(|| format!("running {}", spec_path.display()))?;
    if outcome.interrupted {
        bail!(
            "interrupted after {} trial(s) of this run; the {} and {} keeps what was measured: run the same command again to resume",
            outcome.ran,
            if real { "hosts' settings were rolled back" } else { "labs were removed" },
            out.display()
        );
    }
    let files = report::write_report(out)
        .with_context(|| format!("writing the report in {}", out.display()))?;
    if outcome.skipped > 0 {
        eprintln!(
            "resumed: {} trial(s) were already recorded",
            outcome.skipped
        );
    }
    super::report::print(files, json)?;
    let failed = run::load_records(out)
        .map(|r| {
            let ok: std::collections::BTreeSet<&str> = r
                .iter()
                .filter(|t| t.result.is_some())
                .map(|t| t.id.as_str())
                .collect();
            r.iter()
                .filter(|t| t.error.is_some() && !ok.contains(t.id.as_str()))
                .count()
        })
        .unwrap_or(outcome.failed);
    if failed > 0 {
        eprintln!(
            "{failed} trial(s) failed (their errors are in trials.jsonl and the report); add --retry-failed to run them again"
        );
        return Ok(Outcome::Problem);
    }
    Ok(Outcome::Ok)
}

/// What must hold before the first trial runs: every point makes a valid lab (or may run on
/// the real hosts), every program the trials run is installed, and `--out` is a results
/// directory or can become one (also checked by `--check`).
fn check_before_running(
    spec_path: &Path,
    spec: &tcptune_experiment::spec::Spec,
    points: &[tcptune_experiment::plan::Point],
    out: &Path,
) -> anyhow::Result<()> {
    let real = spec.hosts.is_some();
    // Every point must make a valid lab (or run on the real hosts) before the first trial runs.
    for p in points {
        let on_hosts = |s: &tcptune_experiment::settings::Settings| match real {
            true => tcptune_experiment::hosts::check_point(s),
            false => Ok(()),
        };
        on_hosts(&p.settings)
            .and_then(|()| lab_spec(&p.settings, 0))
            .and_then(|_| tcptune_experiment::settings::check_point(&p.settings))
            .map_err(|e| {
                anyhow::anyhow!(
                    "{}: point {} ({}): {e}",
                    spec_path.display(),
                    p.index,
                    p.label()
                )
            })?;
    }
    // Every program the trials run must be installed.
    let mut needed: Vec<&str> = match &spec.hosts {
        // The workload's programs run there (checked there); here only ssh.
        Some(_) => vec!["ssh"],
        None => points
            .iter()
            .flat_map(|p| tcptune_experiment::workload::programs(&p.settings))
            .collect(),
    };
    needed.sort_unstable();
    needed.dedup();
    if let Some(missing) = needed.iter().find(|p| !on_path(p)) {
        bail!(
            "{}: the trials run {missing}, which is not installed; install it (scripts/deps lists the packages)",
            spec_path.display()
        );
    }
    // The results directory is checked before anything runs, and by --check.
    if out.exists() && !out.is_dir() {
        bail!(
            "--out {} is a file; give a directory for the results",
            out.display()
        );
    }
    if out.exists()
        && !out.join("plan.json").exists()
        && std::fs::read_dir(out)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
    {
        bail!(
            "{} exists and is not an experiment's results directory; give an empty or new --out",
            out.display()
        );
    }
    Ok(())
}

/// One line per trial on standard error: its number of the total, id, point, result or
/// failure, and the time left.
fn progress_line(stderr: &mut std::io::Stderr, p: &run::Progress<'_>) {
    let r = p.record;
    let what = match (&r.result, &r.error) {
        (Some(m), _) => format!(
            "{:.2} Mbit/s{}",
            m.goodput_bps / 1e6,
            m.verdict
                .as_deref()
                .map(|v| format!(", {}", v.split(':').next().unwrap_or(v)))
                .unwrap_or_default()
        ),
        (None, Some(e)) => format!("FAILED: {e}"),
        (None, None) => String::new(),
    };
    let _ = writeln!(
        stderr,
        "[{:>3}/{}] {:<12} {}{}: {what}  (ETA {})",
        p.done,
        p.total,
        r.id,
        p.point_label,
        if r.warmup { " (warm-up)" } else { "" },
        p.eta_s.map(fmt_eta).unwrap_or_default()
    );
}
