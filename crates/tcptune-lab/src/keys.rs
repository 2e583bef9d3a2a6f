//! The one vocabulary of lab settings: every link key (`lab up --rate`, a spec's `link.rate`)
//! and host key (`--host client.mtu=9000`, a spec's `client.mtu`) with its type, unit, bounds,
//! meaning and the backends that support it, and the one parser and validator of a value.
//! `lab up`, `lab set`, lab spec files, experiment specs and the experiment runner all go
//! through this table, so a value is accepted by one exactly when it is accepted by all; the
//! `--host` help text and the README are checked against it.
//!
//! What the running kernel offers (a congestion control, a sysctl, a CPU) is not decided here:
//! the table checks the form and range of a value, the caller asks the kernel.

use tcptune_emu::config::{MAX_DELAY, MAX_JITTER, MAX_RATE_BPS, MIN_RATE_BPS};
use tcptune_model::{Bytes, Dur, Probability, Rate};

/// Which link backends carry a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backends {
    /// The user-space emulator and the netem backend.
    Both,
    /// Only the user-space emulator (`--backend emu`); the netem backend refuses it.
    EmuOnly,
}

/// The type of a value, with its bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A whole number in `min..=max`.
    Count {
        /// Smallest accepted.
        min: u64,
        /// Largest accepted.
        max: u64,
    },
    /// A whole number in `min..=max`, or `inf`: no value (the kernel's default).
    CountOrInf {
        /// Smallest accepted.
        min: u64,
        /// Largest accepted.
        max: u64,
    },
    /// A rate such as `100mbit`, in `min_bps..=max_bps`.
    Rate {
        /// Slowest accepted, bits/s.
        min_bps: f64,
        /// Fastest accepted, bits/s.
        max_bps: f64,
    },
    /// A duration such as `10ms`, at most `max`.
    Duration {
        /// Longest accepted.
        max: Dur,
    },
    /// A probability such as `1%` or `1e-3`.
    Probability,
    /// A size such as `64KiB`.
    Bytes,
    /// `true` or `false`.
    Switch,
    /// One of the words.
    OneOf(&'static [&'static str]),
    /// A Gilbert–Elliott loss model `p,r[,1-h[,1-k]]` (netem's gemodel).
    LossModel,
    /// A congestion control's name (whether the kernel has it is asked separately).
    CongestionControl,
    /// A network sysctl's value (one line); the key is `sysctl.NAME`.
    Sysctl,
}

/// A value as parsed by its [`Kind`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A [`Kind::Count`] or [`Kind::CountOrInf`].
    Count(u64),
    /// `inf` of a [`Kind::CountOrInf`].
    Inf,
    /// A [`Kind::Rate`].
    Rate(Rate),
    /// A [`Kind::Duration`].
    Duration(Dur),
    /// A [`Kind::Probability`].
    Probability(Probability),
    /// A size in bytes.
    Bytes(Bytes),
    /// On or off.
    Switch(bool),
    /// One of a setting's words (a distribution, a congestion control).
    Word(String),
}

impl Value {
    pub(crate) fn count<T: TryFrom<u64>>(&self) -> Option<T> {
        match self {
            Value::Count(n) => T::try_from(*n).ok(),
            _ => None,
        }
    }
    pub(crate) fn word(&self) -> Option<String> {
        match self {
            Value::Word(w) => Some(w.clone()),
            _ => None,
        }
    }
}

/// One setting.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// As written after `link.`/`client.`/`server.` in a spec, and in `--host HOST.KEY=…`
    /// (the `lab up` option is `--` and the name with `-` for `_`).
    pub name: &'static str,
    /// Its value's type and bounds.
    pub kind: Kind,
    /// What it does, in a few words (the help text and the docs use it).
    pub what: &'static str,
    /// Which backends can carry it.
    pub backends: Backends,
}

/// Link keys, per direction (`link.up.KEY`, `link.down.KEY`) or both (`link.KEY`).
pub const LINK: &[Key] = &[
    link(
        "rate",
        Kind::Rate {
            min_bps: MIN_RATE_BPS,
            max_bps: MAX_RATE_BPS,
        },
        "bottleneck rate",
    ),
    link("delay", Kind::Duration { max: MAX_DELAY }, "one-way delay"),
    link(
        "rtt",
        Kind::Duration {
            max: Dur::from_millis(20_000),
        },
        "round-trip time: half of it each way",
    ),
    link(
        "jitter",
        Kind::Duration { max: MAX_JITTER },
        "jitter around the delay",
    ),
    link(
        "distribution",
        Kind::OneOf(&["uniform", "normal", "pareto", "paretonormal"]),
        "jitter distribution",
    ),
    Key {
        name: "jitter_order",
        kind: Kind::OneOf(&["reorder", "fifo"]),
        what: "reorder (netem's) or fifo: keep packet order under jitter (fifo: emu only)",
        backends: Backends::EmuOnly,
    },
    link("loss", Kind::Probability, "random loss probability"),
    link(
        "loss_ge",
        Kind::LossModel,
        "Gilbert-Elliott loss p,r[,1-h[,1-k]]",
    ),
    Key {
        name: "loss_every",
        kind: Kind::Count {
            min: 1,
            max: u32::MAX as u64,
        },
        what: "lose every Nth packet",
        backends: Backends::EmuOnly,
    },
    link("duplicate", Kind::Probability, "duplication probability"),
    link("corrupt", Kind::Probability, "corruption probability"),
    link(
        "reorder",
        Kind::Probability,
        "reordering probability (needs a delay)",
    ),
    link(
        "reorder_gap",
        Kind::Count {
            min: 1,
            max: 1_000_000,
        },
        "reorder only after gap-1 delayed packets",
    ),
    link(
        "queue",
        Kind::Count {
            min: 1,
            max: 10_000_000,
        },
        "bottleneck queue limit, packets",
    ),
    Key {
        name: "queue_bytes",
        kind: Kind::Bytes,
        what: "bottleneck queue limit, bytes",
        backends: Backends::EmuOnly,
    },
    link(
        "limit",
        Kind::Count {
            min: 1,
            max: 10_000_000,
        },
        "netem's limit: packets held anywhere",
    ),
    // Not negative: the emulator charges IP packets, so there is no header to take away, and
    // a negative overhead would carry more than the configured rate.
    link(
        "overhead",
        Kind::Count {
            min: 0,
            max: 10_000,
        },
        "bytes added per packet when charging the rate",
    ),
];

/// Host keys (`client.KEY`, `server.KEY`, `--host HOST.KEY=VALUE`); `sysctl.NAME` is last.
pub const HOST: &[Key] = &[
    host(
        "mtu",
        Kind::Count {
            min: 68,
            max: 65_535,
        },
        "interface MTU, bytes",
    ),
    host(
        "txqueuelen",
        Kind::Count {
            min: 1,
            max: 1_000_000,
        },
        "interface transmit queue, packets",
    ),
    Key {
        name: "line_rate",
        kind: Kind::Rate {
            min_bps: MIN_RATE_BPS,
            max_bps: MAX_RATE_BPS,
        },
        what: "the host's NIC rate (its device queue then fills and drops like a NIC's)",
        backends: Backends::EmuOnly,
    },
    host(
        "cc",
        Kind::CongestionControl,
        "congestion control (net.ipv4.tcp_congestion_control)",
    ),
    host(
        "initcwnd",
        Kind::Count {
            min: 1,
            max: 65_535,
        },
        "route's initial congestion window, segments",
    ),
    host(
        "initrwnd",
        Kind::Count {
            min: 1,
            max: 65_535,
        },
        "route's initial receive window, segments",
    ),
    host(
        "ssthresh",
        Kind::CountOrInf {
            min: 2,
            max: 1_000_000_000,
        },
        "route's initial slow-start threshold, segments (inf: none)",
    ),
    host(
        "congctl",
        Kind::CongestionControl,
        "route's congestion control",
    ),
    host("cpu_hog", Kind::Switch, "keep one CPU of the host busy"),
    host(
        "cpu",
        Kind::Count { min: 0, max: 4095 },
        "the CPU the host's commands (and hog) run on",
    ),
    host(
        "sysctl.NAME",
        Kind::Sysctl,
        "a net.* sysctl, in the host's namespace or (global ones) machine-wide until down",
    ),
];

const fn link(name: &'static str, kind: Kind, what: &'static str) -> Key {
    Key {
        name,
        kind,
        what,
        backends: Backends::Both,
    }
}

const fn host(name: &'static str, kind: Kind, what: &'static str) -> Key {
    Key {
        name,
        kind,
        what,
        backends: Backends::Both,
    }
}

/// The link key `name`.
pub fn link_key(name: &str) -> Option<&'static Key> {
    LINK.iter().find(|k| k.name == name)
}

/// The host key `name` (`sysctl.net.…` is the `sysctl.NAME` key).
pub fn host_key(name: &str) -> Option<&'static Key> {
    let name = if name.starts_with("sysctl.") {
        "sysctl.NAME"
    } else {
        name
    };
    HOST.iter().find(|k| k.name == name)
}

/// The names of `keys`, comma-separated (for help texts and errors).
pub fn names(keys: &[Key]) -> String {
    keys.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// `'KEY' is not a … setting; use …` for an unknown host key.
pub fn unknown_host_key(key: &str) -> String {
    format!("'{key}' is not a host setting; use {}", names(HOST))
}

/// `'KEY' is not a … setting; use …` for an unknown link key.
pub fn unknown_link_key(key: &str) -> String {
    format!("'{key}' is not a link setting; use {}", names(LINK))
}

/// Checks a sysctl name looks like a network one (the kernel decides whether it exists).
pub fn check_sysctl_name(key: &str) -> Result<(), String> {
    if key.starts_with("net.") && tcptune_os::sysctl::check_key(key).is_ok() {
        Ok(())
    } else {
        Err(format!(
            "'{key}' is not a network sysctl name; the lab sets net.* sysctls such as \
             net.ipv4.tcp_rmem"
        ))
    }
}

fn count(key: &str, v: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .map_err(|_| format!("{key}={v} is not a whole number"))
}

impl Kind {
    /// Parses and checks `value` of the setting `key` (named in the error).
    pub fn parse(&self, key: &str, value: &str) -> Result<Value, String> {
        let v = value.trim();
        if v.contains('\n') {
            return Err(format!("{key}: a value must be one line"));
        }
        let unit = |e: tcptune_model::UnitError| format!("{key}: {e}");
        let value = match *self {
            Kind::CountOrInf { .. } if v == "inf" => Value::Inf,
            Kind::Count { .. } | Kind::CountOrInf { .. } => {
                // A negative number is out of range, not "not a number".
                let n = match v.parse::<i64>() {
                    Ok(n) => n,
                    Err(_) => i64::try_from(count(key, v)?).unwrap_or(i64::MAX),
                };
                self.check_count(key, n)?;
                Value::Count(n.unsigned_abs())
            }
            Kind::Rate { .. } => Value::Rate(v.parse().map_err(unit)?),
            Kind::Duration { .. } => Value::Duration(v.parse().map_err(unit)?),
            Kind::Probability => Value::Probability(v.parse().map_err(unit)?),
            Kind::Bytes => Value::Bytes(v.parse().map_err(unit)?),
            Kind::Switch => match v {
                "true" => Value::Switch(true),
                "false" => Value::Switch(false),
                _ => return Err(format!("{key}={v} is not a switch; use true or false")),
            },
            Kind::OneOf(words) => {
                if !words.contains(&v) {
                    return Err(format!("{key}: '{v}' is not one of {}", words.join(", ")));
                }
                Value::Word(v.to_string())
            }
            Kind::LossModel => {
                parse_ge(v).ok_or_else(|| {
                    format!(
                        "{key} '{v}' must be p,r[,1-h[,1-k]] with probabilities, e.g. \
                         1%,30%,100%,0%"
                    )
                })?;
                Value::Word(v.to_string())
            }
            Kind::CongestionControl => {
                if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!("'{v}' is not a congestion control name"));
                }
                Value::Word(v.to_string())
            }
            Kind::Sysctl => {
                let name = key.strip_prefix("sysctl.").unwrap_or(key);
                check_sysctl_name(name)?;
                Value::Word(v.to_string())
            }
        };
        self.check(key, &value)?;
        Ok(value)
    }

    /// Checks a whole number (typed, as from the command line) against the bounds.
    pub fn check_count(&self, key: &str, n: i64) -> Result<(), String> {
        match *self {
            Kind::Count { min, max } | Kind::CountOrInf { min, max }
                if n < 0 || !(min..=max).contains(&n.unsigned_abs()) =>
            {
                let inf = if matches!(self, Kind::CountOrInf { .. }) {
                    ", or inf"
                } else {
                    ""
                };
                Err(format!(
                    "{key}={n} is out of range; give a whole number from {min} to {max}{inf}"
                ))
            }
            _ => Ok(()),
        }
    }

    /// Checks a parsed (or typed) value against the bounds.
    pub fn check(&self, key: &str, value: &Value) -> Result<(), String> {
        match (*self, value) {
            (Kind::Count { .. } | Kind::CountOrInf { .. }, Value::Count(n)) => {
                self.check_count(key, i64::try_from(*n).unwrap_or(i64::MAX))
            }
            (Kind::Rate { min_bps, max_bps }, Value::Rate(r))
                if !(min_bps..=max_bps).contains(&r.bps()) =>
            {
                Err(format!(
                    "{key} {r} is out of range; give a rate between 1kbit and 400gbit"
                ))
            }
            (Kind::Duration { max }, Value::Duration(d)) if *d > max => Err(format!(
                "{key} {d} is out of range; give a duration of at most {max}"
            )),
            _ => Ok(()),
        }
    }

    /// The bounds as the docs state them.
    pub fn describe(&self) -> String {
        match *self {
            Kind::Count { min, max } => format!("whole number {min} to {max}"),
            Kind::CountOrInf { min, max } => format!("whole number {min} to {max}, or inf"),
            Kind::Rate { .. } => "rate, 1kbit to 400gbit".into(),
            Kind::Duration { max } => format!("duration, at most {max}"),
            Kind::Probability => "probability, 0 to 100%".into(),
            Kind::Bytes => "size".into(),
            Kind::Switch => "true or false".into(),
            Kind::OneOf(w) => w.join(" | "),
            Kind::LossModel => "p,r[,1-h[,1-k]] probabilities".into(),
            Kind::CongestionControl => "congestion control name".into(),
            Kind::Sysctl => "the sysctl's value, one line".into(),
        }
    }
}

/// The Gilbert–Elliott parameters `p,r[,1-h[,1-k]]`.
pub fn parse_ge(s: &str) -> Option<Vec<Probability>> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    parts
        .iter()
        .map(|x| x.parse::<Probability>())
        .collect::<Result<_, _>>()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_names_every_key() {
        let readme = include_str!("../../../README.md");
        let para = |start: &str| {
            let i = readme
                .find(start)
                .unwrap_or_else(|| panic!("README lost {start:?}"));
            readme[i..].split("\n\n").next().unwrap_or("").to_string()
        };
        let hosts = para("- Host settings: `--host HOST.KEY=VALUE`");
        let spec = para("A spec (TOML) names the link");
        for k in HOST {
            assert!(
                hosts.contains(&format!("`{}`", k.name)),
                "README's --host list lacks {}",
                k.name
            );
            let name = k.name.replace("sysctl.NAME", "sysctl.\"net.");
            assert!(spec.contains(&name), "README's spec paragraph lacks {name}");
        }
        for k in LINK {
            assert!(
                spec.contains(k.name),
                "README's spec paragraph lacks link {}",
                k.name
            );
        }
    }
}
