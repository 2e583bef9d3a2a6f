//! `tcptune lab …`: glue between the command line and `tcptune-lab`.

use anyhow::bail;
use tcptune_lab::{lab, spec, LabSpec};

use crate::cli::{LabCommand, LinkArgs};
use crate::output::emit;
use crate::Outcome;

fn apply(spec: &mut LabSpec, link: &LinkArgs, hosts: &[String]) -> anyhow::Result<()> {
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
        } => return super::experiment::run(&spec, &out, &name, check, json),
        LabCommand::Up {
            name,
            link,
            host,
            spec,
            backend,
        } => {
            let mut s = match &spec {
                Some(path) => LabSpec::from_file(path)?,
                None => LabSpec::default(),
            };
            apply(&mut s, &link, &host)?;
            match backend.as_str() {
                "emu" | "auto" => {}
                "netem" if !tcptune_lab::netem::netem_available() => bail!(
                    "--backend netem needs the sch_netem qdisc, which this kernel lacks; use \
                     --backend emu"
                ),
                "netem" => bail!(
                    "--backend netem is not implemented yet (see `Known limitations`); use \
                     --backend emu"
                ),
                other => bail!("--backend '{other}' is unknown; use emu, netem or auto"),
            }
            let status = lab::up(&name, s)?;
            emit("lab up", &status, json)?;
        }
        LabCommand::Exec {
            name,
            host,
            command,
        } => {
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
        LabCommand::Down { name, all } => {
            let removed = match (name, all) {
                (_, true) => lab::down_all(),
                (Some(n), false) => lab::down(&n)?,
                (None, false) => bail!("lab down needs --name NAME or --all"),
            };
            emit("lab down", &tcptune_lab::Removed { removed }, json)?;
        }
        LabCommand::Emulator { name } => lab::run_emulator(&name)?,
        LabCommand::Hog { cpu, .. } => lab::run_hog(cpu)?,
    }
    Ok(Outcome::Ok)
}
