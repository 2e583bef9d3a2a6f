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
        Generate::Man => {
            clap_mangen::generate_to(Cli::command(), dir).map_err(written)?;
            for entry in std::fs::read_dir(dir).map_err(written)? {
                let path = entry.map_err(written)?.path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if name.starts_with("tcptune") && name.ends_with(".1") {
                    let page = std::fs::read_to_string(&path).map_err(written)?;
                    let page = super::manpage::with_sections(name.trim_end_matches(".1"), &page);
                    std::fs::write(&path, roff_glyphs(&page)).map_err(written)?;
                }
            }
        }
        Generate::Completions => {
            let mut cmd = visible(&Cli::command());
            for shell in SHELLS {
                clap_complete::generate_to(shell, &mut cmd, "tcptune", dir).map_err(written)?;
            }
        }
    }
    Ok(Outcome::Ok)
}

/// The help text's non-ASCII characters as groff's named glyphs, which every output device
/// can draw (an ASCII terminal draws `\(<=` as `<=`); left as UTF-8, groff in the C locale
/// warns "can't find special character" and drops them.
fn roff_glyphs(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    for c in page.chars() {
        match c {
            '…' => out.push_str("..."),
            '×' => out.push_str("\\(mu"),
            '√' => out.push_str("\\(sr"),
            '≤' => out.push_str("\\(<="),
            '≥' => out.push_str("\\(>="),
            '·' => out.push_str("\\(pc"),
            'σ' => out.push_str("\\(*s"),
            '—' => out.push_str("\\(em"),
            '–' => out.push_str("\\(en"),
            '→' => out.push_str("\\(->"),
            'µ' => out.push_str("\\(mc"),
            c if c.is_ascii() => out.push(c),
            // Any other character as groff's Unicode escape, which at worst is dropped with
            // a warning, as before.
            c => out.push_str(&format!("\\[u{:04X}]", c as u32)),
        }
    }
    out
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
