//! `tcptune tune --apply --set KEY=VALUE … [--hold]`: apply exactly the given sysctls (not an
//! audit's plan) under tune's snapshot, and with `--hold` stay until standard input ends or
//! SIGHUP/SIGINT/SIGTERM arrives, then roll back exactly. An experiment on real hosts runs
//! this over ssh for each trial: when the run is interrupted, killed, or its connection drops,
//! sshd closes the command's standard input and the host restores itself.

use std::path::Path;
use std::time::Duration;

use anyhow::bail;
use tcptune_host::audit::Action;
use tcptune_host::tune::{self, HostIo, LiveHost, Plan, PlannedChange};
use tcptune_host::tune_report::TuneReport;

use crate::cli::AuditArgs;
use crate::outcome::Outcome;
use crate::output::emit;

/// The `--set` values as a plan: each a network sysctl, checked as the lab checks them.
pub fn plan_of(set: &[String], io: &mut dyn HostIo) -> anyhow::Result<Plan> {
    let mut changes = Vec::new();
    let mut dropin = String::new();
    for kv in set {
        let Some((key, value)) = kv.split_once('=') else {
            bail!("--set {kv}: give KEY=VALUE, e.g. --set 'net.ipv4.tcp_rmem=4096 131072 6291456'");
        };
        let (key, value) = (key.trim(), value.trim());
        tcptune_lab::keys::Kind::Sysctl
            .parse(&format!("sysctl.{key}"), value)
            .map_err(|e| anyhow::anyhow!("--set {kv}: {e}"))?;
        if changes
            .iter()
            .any(|c: &PlannedChange| matches!(&c.action, Action::Sysctl { key: k, .. } if k == key))
        {
            bail!("--set names {key} twice; give each sysctl once");
        }
        let current = io.read_sysctl(key).map_err(|e| {
            anyhow::anyhow!("--set {kv}: cannot read {key} ({e}); is it a sysctl of this kernel?")
        })?;
        dropin.push_str(&format!("# was {}\n{key} = {value}\n", current.trim()));
        changes.push(PlannedChange {
            action: Action::Sysctl {
                key: key.to_string(),
                value: value.to_string(),
                global: false,
            },
            current: current.trim().to_string(),
            why: "given with --set".into(),
        });
    }
    Ok(Plan {
        netns: io.netns().map(str::to_string),
        changes,
        host_only: Vec::new(),
        dropin,
        ip_commands: Vec::new(),
    })
}

/// Blocks until standard input ends (or fails) or a stop signal arrives.
fn wait_for_release() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = tx.send(());
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if tcptune_lab::os::interrupted() {
                    return;
                }
            }
            _ => return,
        }
    }
}

fn report(mode: &str, plan: Option<Plan>, snap: tune::Snapshot, path: &Path) -> TuneReport {
    TuneReport {
        mode: mode.into(),
        audit: None,
        plan,
        wrote: None,
        snapshot: Some(snap),
        snapshot_path: Some(path.display().to_string()),
        undo: None,
    }
}

/// `tune --apply [--set …] --hold` and `tune --apply --set …`.
pub fn run(
    args: &AuditArgs,
    set: &[String],
    hold: bool,
    snapshot_path: &Path,
    plan: Option<Plan>,
    json: bool,
) -> anyhow::Result<Outcome> {
    let mut io = LiveHost {
        netns: args.netns.clone(),
    };
    // Before anything changes: a signal during the apply must not kill it half-done without
    // its rollback.
    if hold {
        tcptune_lab::os::catch_stop_signals();
    }
    let plan = match plan {
        Some(p) => p,
        None => plan_of(set, &mut io)?,
    };
    let snap = tune::apply(&plan, &mut io, snapshot_path)?;
    let mut applied = report("apply", Some(plan), snap, snapshot_path);
    if !hold {
        applied.undo = Some(tcptune_host::tune_report::undo_command(
            args.netns.as_deref(),
            Some(snapshot_path),
        ));
        emit("tune", &applied, json)?;
        return Ok(Outcome::Ok);
    }
    // Told, then held; if the output is gone (the session with it), restore at once.
    if emit("tune", &applied, json).is_ok() && !tcptune_lab::os::interrupted() {
        wait_for_release();
    }
    let snap = tune::rollback(&mut io, snapshot_path)?;
    // The reader may be gone (a dropped connection): the rollback is done either way.
    let _ = emit("tune", &report("rollback", None, snap, snapshot_path), json);
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake;
    impl HostIo for Fake {
        fn netns(&self) -> Option<&str> {
            None
        }
        fn netns_inode(&mut self) -> std::io::Result<u64> {
            Ok(1)
        }
        fn read_sysctl(&mut self, key: &str) -> std::io::Result<String> {
            match key {
                "net.ipv4.tcp_rmem" => Ok("4096\t131072\t6291456\n".into()),
                _ => Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
            }
        }
        fn write_sysctl(&mut self, _: &str, _: &str) -> std::io::Result<()> {
            Ok(())
        }
        fn read_txqueuelen(&mut self, _: &str) -> std::io::Result<u32> {
            Ok(1000)
        }
        fn write_txqueuelen(&mut self, _: &str, _: u32) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn set_values_become_a_plan_and_bad_ones_are_refused_in_a_sentence() {
        let p = plan_of(&["net.ipv4.tcp_rmem=4096 16384 16384".into()], &mut Fake).unwrap();
        assert_eq!(p.changes.len(), 1);
        assert_eq!(p.changes[0].current, "4096\t131072\t6291456");
        assert!(p.dropin.contains("net.ipv4.tcp_rmem = 4096 16384 16384"));
        for (bad, want) in [
            ("net.ipv4.tcp_rmem", "give KEY=VALUE"),
            ("kernel.pid_max=1", "not a network sysctl"),
            ("net.ipv4.tcp_nonsense=1", "is it a sysctl of this kernel?"),
        ] {
            let e = plan_of(&[bad.into()], &mut Fake).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
        let e = plan_of(
            &[
                "net.ipv4.tcp_rmem=1 2 3".into(),
                "net.ipv4.tcp_rmem=1 2 4".into(),
            ],
            &mut Fake,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("twice"), "{e}");
    }
}
