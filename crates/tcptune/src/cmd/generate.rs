//! `tcptune _generate man|completions DIR` (hidden): the man pages and shell completions,
//! generated from the clap definition in cli.rs so they never disagree with `--help`.
//! scripts/package runs it to fill the Debian package.

use std::path::Path;

use anyhow::Context;
use clap::{Command, CommandFactory};
use clap_complete::Shell;

use crate::cli::{Cli, Generate};
use crate::outcome::Outcome;

/// The shells whose completions are written: tcptune.bash, _tcptune (zsh), tcptune.fish.
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

pub fn run(what: Generate, dir: &Path) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the directory {}", dir.display()))?;
    let written = |e: std::io::Error| {
        anyhow::Error::new(e).context(format!("cannot write into {}", dir.display()))
    };
    match what {
        // One page per visible command and subcommand: tcptune.1, tcptune-lab-up.1, …
        Generate::Man => clap_mangen::generate_to(Cli::command(), dir).map_err(written)?,
        Generate::Completions => {
            let mut cmd = visible(&Cli::command());
            for shell in SHELLS {
                clap_complete::generate_to(shell, &mut cmd, "tcptune", dir).map_err(written)?;
            }
        }
    }
    Ok(Outcome::Ok)
}

/// `cmd` without its hidden subcommands (internal ones such as `lab _emulator`), which
/// clap_complete would otherwise offer: the names, arguments and help that completion uses.
fn visible(cmd: &Command) -> Command {
    let mut c = Command::new(cmd.get_name().to_string())
        .args(cmd.get_arguments().cloned())
        .about(cmd.get_about().cloned().unwrap_or_default());
    if let Some(v) = cmd.get_version() {
        c = c.version(v.to_string());
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        c = c.subcommand(visible(sub));
    }
    c
}
