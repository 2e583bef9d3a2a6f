//! The link options of `lab up` and `lab set`, generated from the lab's one table of link keys
//! (`tcptune_lab::keys::LINK`): each key is an option of the same name (`-` for `_`), with the
//! table's meaning and bounds as its help, checked by the table's one parser. Adding a key to
//! the table adds its option here, and a spec file, `--host`-style text and the command line
//! accept a value exactly when the others do.

use clap::error::ErrorKind;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use tcptune_emu::JitterOrder;
use tcptune_lab::keys::{self, Backends, Kind, LINK};
use tcptune_lab::{LinkChanges, Which};

/// Link options from the command line; only the given ones change the link.
#[derive(Debug, Clone, Default)]
pub struct LinkArgs {
    changes: LinkChanges,
    /// Whether any option besides `--direction` was given.
    given: bool,
}

impl LinkArgs {
    /// The changes the options ask for.
    pub fn changes(&self) -> LinkChanges {
        self.changes.clone()
    }
    /// Which direction the options change.
    pub fn direction(&self) -> Which {
        self.changes.direction
    }
    /// True when no link option was given (`--direction` alone changes nothing).
    pub fn is_empty(&self) -> bool {
        !self.given
    }
}

/// The option of a key: its name with `-` for `_`.
pub fn option(key: &str) -> String {
    key.replace('_', "-")
}

fn value_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Count { .. } | Kind::CountOrInf { .. } => "N",
        Kind::Rate { .. } => "RATE",
        Kind::Duration { .. } => "DURATION",
        Kind::Probability => "PROBABILITY",
        Kind::Bytes => "SIZE",
        Kind::LossModel => "p,r[,1-h[,1-k]]",
        _ => "VALUE",
    }
}

fn help(k: &keys::Key) -> String {
    let mut what = k.what.to_string();
    if let Some(first) = what.get(..1) {
        what.replace_range(..1, &first.to_uppercase());
    }
    let emu = match k.backends {
        Backends::EmuOnly => "; emu backend only",
        Backends::Both => "",
    };
    format!("{what} [{}{emu}]", k.kind.describe())
}

impl Args for LinkArgs {
    fn augment_args(cmd: Command) -> Command {
        let mut cmd = cmd.arg(
            Arg::new("direction")
                .long("direction")
                .default_value("both")
                .value_parser(clap::value_parser!(Which))
                .help(
                    "Which direction the link options change: up (client to server), down, or both",
                ),
        );
        for k in LINK {
            cmd = cmd.arg(
                Arg::new(k.name)
                    .long(option(k.name))
                    .value_name(value_name(&k.kind))
                    .allow_negative_numbers(true)
                    .help(help(k)),
            );
        }
        cmd.arg(
            Arg::new("jitter_fifo")
                .long("jitter-fifo")
                .action(ArgAction::SetTrue)
                .conflicts_with("jitter_order")
                .help("Keep packet order under jitter: --jitter-order fifo"),
        )
        .arg(
            Arg::new("seed")
                .long("seed")
                .value_parser(clap::value_parser!(u64))
                .help("Seed of the random decisions (same seed, same decisions)"),
        )
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for LinkArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut changes = LinkChanges {
            direction: m.get_one::<Which>("direction").copied().unwrap_or_default(),
            seed: m.get_one::<u64>("seed").copied(),
            ..LinkChanges::default()
        };
        let mut given = changes.seed.is_some();
        for k in LINK {
            if let Some(v) = m.get_one::<String>(k.name) {
                // The table names the key as a spec writes it; here it is the option.
                changes.set(k.name, v).map_err(|e| {
                    let e = e.replacen(k.name, &format!("--{}", option(k.name)), 1);
                    clap::Error::raw(ErrorKind::ValueValidation, format!("{e}\n"))
                })?;
                given = true;
            }
        }
        if m.get_flag("jitter_fifo") {
            changes.jitter_order = Some(JitterOrder::Fifo);
            given = true;
        }
        Ok(LinkArgs { changes, given })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<LinkArgs, clap::Error> {
        let cmd = LinkArgs::augment_args(Command::new("link").no_binary_name(true));
        LinkArgs::from_arg_matches(&cmd.try_get_matches_from(args)?)
    }

    /// Every link key is an option, plus `--direction`, `--seed` and `--jitter-fifo`, which
    /// are not keys of a direction's link.
    #[test]
    fn link_options_are_the_link_keys() {
        let cmd = LinkArgs::augment_args(Command::new("link"));
        let options: std::collections::BTreeSet<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_string))
            .collect();
        let mut from_keys: std::collections::BTreeSet<String> =
            LINK.iter().map(|k| option(k.name)).collect();
        from_keys.extend(["direction", "seed", "jitter-fifo"].map(String::from));
        assert_eq!(options, from_keys);
    }

    #[test]
    fn the_options_set_what_the_spec_keys_set() {
        let a = parse(&[
            "--rate",
            "100mbit",
            "--rtt",
            "20ms",
            "--queue",
            "50",
            "--jitter-fifo",
        ])
        .unwrap();
        let mut want = LinkChanges::default();
        for (k, v) in [("rate", "100mbit"), ("rtt", "20ms"), ("queue", "50")] {
            want.set(k, v).unwrap();
        }
        want.set("jitter_order", "fifo").unwrap();
        assert_eq!(format!("{:?}", a.changes()), format!("{want:?}"));
        assert!(!a.is_empty());
        let d = parse(&["--direction", "up"]).unwrap();
        assert!(d.is_empty());
        assert_eq!(d.direction(), Which::Up);
    }

    #[test]
    fn a_bad_value_is_one_sentence_naming_the_option() {
        for (args, names) in [
            (&["--queue", "0"][..], "--queue"),
            (&["--overhead", "-5"][..], "--overhead"),
            (&["--rate", "fast"][..], "--rate"),
        ] {
            let e = parse(args).unwrap_err().to_string();
            assert!(e.contains(names), "{args:?}: {e}");
            assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
        }
    }
}
