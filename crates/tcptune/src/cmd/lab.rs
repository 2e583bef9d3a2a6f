//! `tcptune lab …`: glue between the command line and `tcptune-lab`.

use anyhow::bail;
use tcptune_lab::{lab, spec, LabSpec};

use crate::cli::{LabCommand, LinkArgs};
use crate::outcome::Outcome;
use crate::output::emit;

fn apply(spec: &mut LabSpec, link: &LinkArgs, hosts: &[String]) -> anyhow::Result<()> {
    if link.direction() != tcptune_lab::Which::Both && link.is_empty() {
        bail!("--direction says which direction link options change, and none is given; add one such as --rate or --delay");
    }
    link.changes().apply(&mut spec.link)?;
    for h in hosts {
        spec::apply_host_setting(spec, h)?;
    }
    spec.validate()?;
    Ok(())
}

pub fn run(cmd: LabCommand, json: bool) -> anyhow::Result<Outcome> {
    match cmd {
        LabCommand::Run {
            spec,
            out,
            name,
            check,
            smoke,
            retry_failed,
            precision,
        } => {
            let options = tcptune_experiment::run::RunOptions {
                smoke: smoke.then_some(super::experiment::SMOKE_POINTS),
                retry_failed,
            };
            return super::experiment::run(
                &spec,
                &out,
                &name,
                check,
                &options,
                precision.as_deref(),
                json,
            );
        }
        LabCommand::Up {
            name,
            link,
            host,
            spec,
            backend,
        } => {
            lab::require_admin("lab up")?;
            let mut s = match &spec {
                Some(path) => LabSpec::from_file(path)?,
                None => LabSpec::default(),
            };
            apply(&mut s, &link, &host)?;
            s.backend = tcptune_lab::backend::choose(
                backend.as_deref(),
                spec.is_some().then_some(s.backend),
                &s.link,
            )?;
            let status = lab::up(&name, s)?;
            emit("lab up", &status, json)?;
        }
        LabCommand::Exec {
            name,
            host,
            command,
        } => {
            crate::output::no_json(
                json,
                "lab exec passes on the output of the command it runs, which is not tcptune's",
            )?;
            let code = lab::exec(&name, &host, &command)?;
            return Ok(Outcome::Exit(code.clamp(0, 255) as u8));
        }
        LabCommand::Status { name } => {
            emit("lab status", &lab::status(name.as_deref())?, json)?;
        }
        LabCommand::Set { name, link, host } => {
            let mut s = lab::current_spec(&name)?;
            apply(&mut s, &link, &host)?;
            emit("lab set", &lab::set(&name, s)?, json)?;
        }
        LabCommand::Down { name, all, force } => {
            if force && !all {
                bail!("--force goes with --all (lab down --all --force removes running labs too); to remove one lab give only --name");
            }
            let removed = match (name, all) {
                (_, true) => lab::down_all(force)?,
                (Some(n), false) => lab::down(&n)?,
                (None, false) => bail!("lab down needs --name NAME or --all"),
            };
            emit("lab down", &tcptune_lab::Removed { removed }, json)?;
        }
        LabCommand::Emulator { name } => {
            crate::output::no_json(
                json,
                "the lab's emulator process logs to its lab's directory",
            )?;
            lab::run_emulator(&name)?
        }
        LabCommand::Hog { name, cpu, .. } => {
            crate::output::no_json(json, "a lab's CPU hog prints nothing")?;
            lab::run_hog(&name, cpu)?
        }
    }
    Ok(Outcome::Ok)
}
