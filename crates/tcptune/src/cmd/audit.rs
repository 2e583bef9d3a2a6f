//! `tcptune audit` and `tcptune tune`: read the host (or a recorded state), judge it against a
//! path, and print, write, apply or roll back the change.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use tcptune_host::audit::{self, AuditInput, Role};
use tcptune_host::tune::{self, LiveHost};
use tcptune_host::tune_report::TuneReport;
use tcptune_host::{read, HostState};
use tcptune_model::{Dur, PathSpec};

use crate::cli::{AuditArgs, RoleArg};
use crate::outcome::Outcome;
use crate::output::emit;

/// The largest `--state` file read (a recorded host state is tens of kilobytes).
const STATE_FILE_LIMIT: u64 = 16 << 20;

fn host_state(args: &AuditArgs) -> anyhow::Result<HostState> {
    let state = match &args.state {
        Some(file) => {
            let text =
                tcptune_kernel::file::read_text_limited(file, STATE_FILE_LIMIT, "host state")?;
            serde_json::from_str(&text).with_context(|| {
                format!(
                    "{} is not a host state written by `tcptune audit --save-state`",
                    file.display()
                )
            })?
        }
        None => read::read_host(args.netns.as_deref())?,
    };
    if let Some(out) = &args.save_state {
        std::fs::write(out, serde_json::to_vec_pretty(&state)?)
            .with_context(|| format!("cannot write host state to {}", out.display()))?;
    }
    Ok(state)
}

/// The minimum RTT `ping` measures to `host`, from inside the namespace when one is given.
fn measure_rtt(host: &str, netns: Option<&str>) -> anyhow::Result<Dur> {
    if host.starts_with('-') {
        bail!("--to {host}: give a host name or address");
    }
    match tcptune_host::probe::ping_min_rtt(host, netns)
        .context("cannot run ping (install iputils-ping)")?
    {
        Some(rtt) => Ok(rtt),
        None => bail!("--to {host}: no ping reply, so no RTT; give --rtt instead"),
    }
}

fn audit_input(args: &AuditArgs) -> anyhow::Result<AuditInput> {
    let mut spec = args
        .profile
        .map(|p| p.path())
        .unwrap_or_default()
        .overridden_by(args.path.spec());
    if let Some(host) = &args.to {
        if args.path.spec().rtt_s.is_some() {
            bail!("--to {host} measures the RTT; leave out --rtt (and rtt= in --path)");
        }
        spec = spec.overridden_by(PathSpec {
            rtt_s: Some(measure_rtt(host, args.netns.as_deref())?),
            ..Default::default()
        });
    }
    let (Some(rate), Some(rtt)) = (spec.rate_bps, spec.rtt_s) else {
        bail!("audit needs the path: give --path rate=1gbit,rtt=20ms (or --rate and --rtt, --to HOST for the RTT, or --profile lan|datacenter|wan|lfn|dsl)");
    };
    if args.flows == 0 {
        bail!("--flows 0: give the number of concurrent bulk flows, at least 1");
    }
    Ok(AuditInput {
        rate_bps: rate,
        rtt_s: rtt,
        loss: spec.loss,
        flows: args.flows,
        memory_budget_bytes: args.memory,
        fit: args.fit,
        role: match args.role {
            RoleArg::Sender => Role::Sender,
            RoleArg::Receiver => Role::Receiver,
            RoleArg::Both => Role::Both,
        },
    })
}

pub fn audit(args: &AuditArgs, json: bool) -> anyhow::Result<Outcome> {
    let input = audit_input(args)?;
    let result = audit::audit(&host_state(args)?, &input);
    emit("audit", &result, json)?;
    Ok(if result.changes().next().is_some() {
        Outcome::Problem
    } else {
        Outcome::Ok
    })
}

pub(crate) fn default_snapshot(netns: Option<&str>) -> PathBuf {
    let name = match netns {
        Some(n) => format!("tune-snapshot-netns-{n}.json"),
        None => "tune-snapshot.json".into(),
    };
    Path::new("/var/lib/tcptune").join(name)
}

/// The first option given that says what to judge against (none of them applies to
/// `tune --rollback`); `--netns` is not one, it says where.
fn path_option(args: &AuditArgs) -> Option<&'static str> {
    let p = &args.path;
    [
        (p.rate.is_some(), "--rate"),
        (p.rtt.is_some(), "--rtt"),
        (p.loss.is_some(), "--loss"),
        (p.path.is_some(), "--path"),
        (args.profile.is_some(), "--profile"),
        (args.to.is_some(), "--to"),
        (args.flows != 1, "--flows"),
        (args.memory.is_some(), "--memory"),
        (args.fit, "--fit"),
        (!matches!(args.role, RoleArg::Both), "--role"),
        (args.state.is_some(), "--state"),
        (args.save_state.is_some(), "--save-state"),
    ]
    .into_iter()
    .find_map(|(given, name)| given.then_some(name))
}

pub fn tune(
    args: &AuditArgs,
    write: Option<&Path>,
    apply: bool,
    rollback: bool,
    snapshot: Option<&Path>,
    held: (&[String], bool),
    json: bool,
) -> anyhow::Result<Outcome> {
    let (set, hold) = held;
    let snapshot_path = snapshot
        .map(Path::to_path_buf)
        .unwrap_or_else(|| default_snapshot(args.netns.as_deref()));
    let mut io = LiveHost {
        netns: args.netns.clone(),
    };
    if rollback {
        if let Some(option) = path_option(args) {
            bail!("--rollback restores the saved values and needs no path; leave out {option}");
        }
        let snap = tune::rollback(&mut io, &snapshot_path)?;
        let report = TuneReport {
            mode: "rollback".into(),
            audit: None,
            plan: None,
            wrote: None,
            snapshot: Some(snap),
            snapshot_path: Some(snapshot_path.display().to_string()),
            undo: None,
        };
        emit("tune", &report, json)?;
        return Ok(Outcome::Ok);
    }
    if snapshot.is_some() && !apply {
        bail!("--snapshot names the file --apply saves and --rollback restores; add one of them or leave it out");
    }
    if !set.is_empty() {
        if let Some(option) = path_option(args) {
            bail!("--set applies the values given and needs no path; leave out {option}");
        }
        return super::hold::run(args, set, hold, &snapshot_path, None, json);
    }
    if args.state.is_some() && (apply || write.is_some()) {
        bail!(
            "--state audits a recorded host; --apply and --write change this host, so drop --state"
        );
    }
    let input = audit_input(args)?;
    let result = audit::audit(&host_state(args)?, &input);
    let plan = tune::plan(&result)?;
    let mut report = TuneReport {
        mode: "dry-run".into(),
        audit: None,
        plan: None,
        wrote: None,
        snapshot: None,
        snapshot_path: None,
        undo: None,
    };
    if let Some(file) = write {
        if args.netns.is_some() {
            bail!("--write installs a boot-time drop-in for the host; a namespace's settings are not restored at boot, so use --apply inside it");
        }
        std::fs::write(file, &plan.dropin)
            .with_context(|| format!("cannot write {}", file.display()))?;
        report.mode = "write".into();
        report.wrote = Some(file.display().to_string());
    }
    if hold {
        return super::hold::run(args, set, hold, &snapshot_path, Some(plan), json);
    }
    if apply {
        let snap = tune::apply(&plan, &mut io, &snapshot_path)?;
        report.mode = "apply".into();
        report.snapshot = Some(snap);
        report.snapshot_path = Some(snapshot_path.display().to_string());
        report.undo = Some(tcptune_host::tune_report::undo_command(
            args.netns.as_deref(),
            snapshot,
        ));
    }
    report.audit = Some(result);
    report.plan = Some(plan);
    emit("tune", &report, json)?;
    Ok(Outcome::Ok)
}
