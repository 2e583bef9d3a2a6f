//! What would help, safe by construction. The judgement ([`crate::engine::needs`]) states *needs*
//! ("the receiver's tcp_rmem maximum must be at least 1.2 MiB, because …"); [`advise`] turns the
//! needs of every flow into recommendations against the settings known to be in effect:
//! - one recommendation per knob and host: the largest need over all flows;
//! - never a value below the current one, unless the user asked for a fit (`fit`);
//! - never a setting already in effect;
//! - where the current value is unknown (the other host of a test), the change is stated as a
//!   condition ("at least N, if it is lower there") and no command is printed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::figures::size;

/// Which end a CPU figure is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// The sending end.
    Sender,
    /// The receiving end.
    Receiver,
    /// One host running both ends (a loopback test).
    BothEnds,
}

/// A setting a recommendation can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Knob {
    /// The maximum of `net.ipv4.tcp_rmem` (how far receive autotuning may grow).
    TcpRmemMax,
    /// The maximum of `net.ipv4.tcp_wmem`.
    TcpWmemMax,
    /// `net.core.rmem_max` (the largest SO_RCVBUF an application may ask for).
    RmemMax,
    /// `net.core.wmem_max`.
    WmemMax,
    /// The test's own `-w` (SO_RCVBUF/SO_SNDBUF).
    SocketBuffer,
    /// The sender's congestion control.
    CongestionControl,
    /// `net.ipv4.tcp_sack`: selective acknowledgements.
    Sack,
    /// `net.ipv4.tcp_timestamps`.
    Timestamps,
    /// `net.ipv4.tcp_window_scaling`.
    WindowScaling,
    /// Find where packets are lost (no setting: a place to look).
    FindLoss,
    /// More CPU for the test (no setting).
    Cpu,
    /// The receiving application reads too slowly (no setting).
    ReceiverReads,
    /// An active queue manager at the bottleneck (no setting of these hosts).
    Aqm,
    /// `net.ipv4.tcp_notsent_lowat`: how much unsent data a socket may queue.
    NotsentLowat,
}

impl Knob {
    /// The sysctl the knob is, if it is one.
    pub fn sysctl(self) -> Option<&'static str> {
        Some(match self {
            Knob::TcpRmemMax => "net.ipv4.tcp_rmem",
            Knob::TcpWmemMax => "net.ipv4.tcp_wmem",
            Knob::RmemMax => "net.core.rmem_max",
            Knob::WmemMax => "net.core.wmem_max",
            Knob::CongestionControl => "net.ipv4.tcp_congestion_control",
            Knob::Sack => "net.ipv4.tcp_sack",
            Knob::Timestamps => "net.ipv4.tcp_timestamps",
            Knob::WindowScaling => "net.ipv4.tcp_window_scaling",
            _ => return None,
        })
    }
}

/// What a need asks of its knob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    /// At least this many bytes.
    AtLeast(u64),
    /// Turned on.
    On,
    /// Set to this name.
    Name(String),
    /// Nothing to set: advice only.
    Advice,
}

/// One thing the judgement says would help one flow, before merging and checking settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Need {
    /// The setting that would help.
    pub knob: Knob,
    /// Which end it is set on.
    pub on: End,
    /// The value it needs.
    pub value: Value,
    /// Why, with the numbers (reproducible from the evidence).
    pub why: String,
}

/// A host's settings that recommendations check against (values as the kernel prints them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// `net.ipv4.tcp_rmem`: min, default, max.
    pub tcp_rmem: Option<[u64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// `net.ipv4.tcp_wmem`: min, default, max.
    pub tcp_wmem: Option<[u64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// `net.core.rmem_max`.
    pub rmem_max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// `net.core.wmem_max`.
    pub wmem_max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// `net.ipv4.tcp_congestion_control`.
    pub congestion_control: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// `net.ipv4.tcp_sack`.
    pub sack: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// `net.ipv4.tcp_timestamps`.
    pub timestamps: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// `net.ipv4.tcp_window_scaling`.
    pub window_scaling: Option<bool>,
    /// `net.ipv4.tcp_notsent_lowat` (4294967295: unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notsent_lowat: Option<u64>,
}

impl HostSettings {
    /// The settings from a sysctl lookup (`key` → value as /proc/sys prints it).
    pub fn from_sysctls(get: impl Fn(&str) -> Option<String>) -> HostSettings {
        let triple = |k: &str| -> Option<[u64; 3]> {
            let v: Vec<u64> = get(k)?
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            (v.len() == 3).then(|| [v[0], v[1], v[2]])
        };
        let num = |k: &str| get(k)?.trim().parse::<u64>().ok();
        let flag = |k: &str| num(k).map(|v| v != 0);
        HostSettings {
            tcp_rmem: triple("net.ipv4.tcp_rmem"),
            tcp_wmem: triple("net.ipv4.tcp_wmem"),
            rmem_max: num("net.core.rmem_max"),
            wmem_max: num("net.core.wmem_max"),
            congestion_control: get("net.ipv4.tcp_congestion_control").map(|s| s.trim().into()),
            sack: flag("net.ipv4.tcp_sack"),
            timestamps: flag("net.ipv4.tcp_timestamps"),
            window_scaling: flag("net.ipv4.tcp_window_scaling"),
            notsent_lowat: num("net.ipv4.tcp_notsent_lowat"),
        }
    }

    fn number(&self, k: Knob) -> Option<u64> {
        match k {
            Knob::TcpRmemMax => self.tcp_rmem.map(|t| t[2]),
            Knob::TcpWmemMax => self.tcp_wmem.map(|t| t[2]),
            Knob::RmemMax => self.rmem_max,
            Knob::WmemMax => self.wmem_max,
            _ => None,
        }
    }

    fn flag(&self, k: Knob) -> Option<bool> {
        match k {
            Knob::Sack => self.sack,
            Knob::Timestamps => self.timestamps,
            Knob::WindowScaling => self.window_scaling,
            _ => None,
        }
    }
}

/// The settings known at each end of a flow (`None`: that host's values are unknown).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KnownSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The sending host's settings.
    pub sender: Option<HostSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The receiving host's settings.
    pub receiver: Option<HostSettings>,
}

impl KnownSettings {
    fn at(&self, end: End) -> Option<&HostSettings> {
        match end {
            End::Sender => self.sender.as_ref(),
            End::Receiver => self.receiver.as_ref(),
            End::BothEnds => None,
        }
    }
}

/// What one flow had in effect: its own settings (the socket's, not the host's defaults) and the
/// hosts' settings where known. Recommendations are checked against it, and
/// [`crate::engine::invariants`] checks them again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InEffect {
    /// The sender's congestion control as its socket ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// A socket buffer the application fixed (`-w`), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_buffer_bytes: Option<u64>,
    /// The sender's write size (`-l`), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bytes: Option<u64>,
    /// The sender sent with zero copy (`-Z`).
    #[serde(default)]
    pub zerocopy: bool,
    /// Parallel streams in the flow's direction.
    pub streams: u32,
    /// CPUs of the sending host, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    /// The sender always had more to send (tcptune's own unpaced writer).
    #[serde(default)]
    pub bulk_sender: bool,
    /// The sender's rate cap (`-b`), bits/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_cap_bps: Option<f64>,
    /// The hosts' settings, where known.
    #[serde(default)]
    pub settings: KnownSettings,
    /// The user asked for buffers fitted to the path: a maximum may then be lowered.
    #[serde(default)]
    pub fit: bool,
}

impl InEffect {
    /// Only the hosts' settings known (audit, tune, tests of the advice).
    pub fn settings(settings: KnownSettings, fit: bool) -> InEffect {
        InEffect {
            settings,
            fit,
            streams: 1,
            ..InEffect::default()
        }
    }
}

/// The write size iperf3 uses for TCP by default, and above which larger writes save little.
pub const LARGE_WRITE_BYTES: u64 = 128 * 1024;

/// A change that would help.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Recommendation {
    /// Where to make it: "the receiver", "the sender", "both ends", "the path".
    pub on: String,
    /// What to do, with the numbers behind it.
    pub change: String,
    /// The command, when the current value is known and the command is safe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The knob it changes.
    pub knob: Knob,
    /// The value in effect now, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// The value it proposes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed: Option<String>,
}

fn where_(end: End) -> &'static str {
    match end {
        End::Sender => "the sender",
        End::Receiver => "the receiver",
        End::BothEnds => "both ends",
    }
}

/// Merges the needs of all flows and checks them against what is in effect.
pub fn advise(needs: &[Need], in_effect: &InEffect) -> Vec<Recommendation> {
    // One need per (knob, end): the largest value, with its reason.
    let mut merged: Vec<Need> = Vec::new();
    for n in needs {
        match merged.iter_mut().find(|m| m.knob == n.knob && m.on == n.on) {
            Some(m) => {
                if let (Value::AtLeast(a), Value::AtLeast(b)) = (&m.value, &n.value) {
                    if b > a {
                        *m = n.clone();
                    }
                }
            }
            None => merged.push(n.clone()),
        }
    }
    merged
        .iter()
        .filter_map(|n| recommend(n, in_effect))
        .collect()
}

fn recommend(n: &Need, in_effect: &InEffect) -> Option<Recommendation> {
    let (settings, fit) = (&in_effect.settings, in_effect.fit);
    let on = where_(n.on).to_string();
    let host = settings.at(n.on);
    let rec = |change: String, command: Option<String>, current: Option<String>, proposed| {
        Some(Recommendation {
            on: on.clone(),
            change,
            command,
            knob: n.knob,
            current,
            proposed,
        })
    };
    match (&n.value, n.knob.sysctl()) {
        (Value::AtLeast(v), Some(key)) => {
            let v = *v;
            let cur = host.and_then(|h| h.number(n.knob));
            match cur {
                Some(c) if c >= v && !(fit && c > v) => None, // already in effect
                Some(c) => {
                    let verb = if c > v { "lower" } else { "raise" };
                    let value = match (n.knob, host) {
                        (Knob::TcpRmemMax, Some(h)) => {
                            h.tcp_rmem.map(|t| format!("{} {} {v}", t[0], t[1].min(v)))
                        }
                        (Knob::TcpWmemMax, Some(h)) => {
                            h.tcp_wmem.map(|t| format!("{} {} {v}", t[0], t[1].min(v)))
                        }
                        _ => Some(v.to_string()),
                    }?;
                    let fitted = if c > v {
                        " (fitted to the path, as asked)"
                    } else {
                        ""
                    };
                    rec(
                        format!(
                            "{verb} {key}'s maximum from {} to {}{fitted}: {}",
                            size(c),
                            size(v),
                            n.why
                        ),
                        Some(format!("sysctl -w {key}=\"{value}\"")),
                        Some(c.to_string()),
                        Some(v.to_string()),
                    )
                }
                None => rec(
                    format!(
                        "make {key}'s maximum at least {} if it is lower there (its current \
                         value was not reported): {}",
                        size(v),
                        n.why
                    ),
                    None,
                    None,
                    Some(v.to_string()),
                ),
            }
        }
        (Value::AtLeast(v), None) => rec(
            n.why.clone(),
            Some(format!("-w {v}")),
            None,
            Some(v.to_string()),
        ),
        (Value::On, Some(key)) => {
            let (s, r) = (
                settings.sender.as_ref().and_then(|h| h.flag(n.knob)),
                settings.receiver.as_ref().and_then(|h| h.flag(n.knob)),
            );
            match (s, r) {
                (Some(true), Some(true)) => rec(
                    format!(
                        "{}; both ends have {key}=1, so something on the path strips the option",
                        n.why
                    ),
                    None,
                    Some("1".into()),
                    None,
                ),
                // One end known on: the option is off at the other.
                (Some(true), _) | (_, Some(true)) | (Some(false), _) | (_, Some(false)) => {
                    let off_at = match (s, r) {
                        (Some(false), Some(false)) => "both ends",
                        (Some(false), _) | (_, Some(true)) => "the sender",
                        _ => "the receiver",
                    };
                    Some(Recommendation {
                        on: off_at.into(),
                        change: n.why.clone(),
                        command: Some(format!("sysctl -w {key}=1")),
                        knob: n.knob,
                        current: Some("0".into()),
                        proposed: Some("1".into()),
                    })
                }
                (None, None) => rec(
                    format!(
                        "{} ({key}=1; the ends' current values were not reported)",
                        n.why
                    ),
                    None,
                    None,
                    Some("1".into()),
                ),
            }
        }
        (Value::Name(name), Some(key)) => recommend_name(n, name, key, host, in_effect),
        _ => rec(n.why.clone(), None, None, None),
    }
}

/// A named setting (the congestion control): checked against what the flow ran, then the
/// host's default.
fn recommend_name(
    n: &Need,
    name: &String,
    key: &str,
    host: Option<&HostSettings>,
    in_effect: &InEffect,
) -> Option<Recommendation> {
    let on = where_(n.on).to_string();
    let rec = |change: String, command: Option<String>, current: Option<String>, proposed| {
        Some(Recommendation {
            on: on.clone(),
            change,
            command,
            knob: n.knob,
            current,
            proposed,
        })
    };
    let host_cur = host.and_then(|h| h.congestion_control.clone());
    match (in_effect.congestion.clone(), host_cur) {
        // What the flow ran is what is in effect, whatever the host's default.
        (Some(f), _) if f == *name => None,
        // Not known: the flow ran the host's default.
        (None, Some(h)) if h == *name => None,
        (Some(f), Some(h)) if h == *name => rec(
            format!(
                "{}: this flow ran {f}, which its application chose (TCP_CONGESTION, \
                 `-C {f}`); the host's default {key} is already {name}: let the \
                 application use the default",
                n.why
            ),
            None,
            Some(f),
            Some(name.clone()),
        ),
        (flow, Some(h)) if flow.as_ref().is_none_or(|f| *f == h) => rec(
            format!("{}: {key} is {h} now", n.why),
            Some(format!("sysctl -w {key}={name}")),
            Some(h),
            Some(name.clone()),
        ),
        (Some(f), _) => rec(
            format!(
                "{}: this flow ran {f}, which its application chose (`-C {name}` for \
                 the test, TCP_CONGESTION in an application)",
                n.why
            ),
            None,
            Some(f),
            Some(name.clone()),
        ),
        (None, _) => rec(
            format!(
                "{} ({key}={name}, if the sender does not run it already)",
                n.why
            ),
            None,
            None,
            Some(name.clone()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(knob: Knob, on: End, v: u64) -> Need {
        Need {
            knob,
            on,
            value: Value::AtLeast(v),
            why: format!("need {v}"),
        }
    }

    fn host(rmem_max: u64) -> HostSettings {
        HostSettings {
            tcp_rmem: Some([4096, 131072, rmem_max]),
            congestion_control: Some("bbr".into()),
            sack: Some(true),
            ..HostSettings::default()
        }
    }

    #[test]
    fn a_maximum_is_never_lowered_unless_a_fit_was_asked() {
        let s = KnownSettings {
            receiver: Some(host(32 << 20)),
            ..KnownSettings::default()
        };
        let n = [need(Knob::TcpRmemMax, End::Receiver, 1 << 20)];
        assert!(
            advise(&n, &InEffect::settings(s.clone(), false)).is_empty(),
            "32 MiB already covers 1 MiB"
        );
        let fit = advise(&n, &InEffect::settings(s.clone(), true));
        assert_eq!(fit.len(), 1);
        assert_eq!(
            fit[0].command.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem=\"4096 131072 1048576\"")
        );
        assert!(fit[0].change.starts_with("lower"), "{}", fit[0].change);
    }

    #[test]
    fn one_recommendation_per_knob_the_largest_need() {
        let s = KnownSettings {
            receiver: Some(host(6 << 20)),
            ..KnownSettings::default()
        };
        let n = [
            need(Knob::TcpRmemMax, End::Receiver, 8 << 20),
            need(Knob::TcpRmemMax, End::Receiver, 16 << 20),
            need(Knob::TcpRmemMax, End::Receiver, 12 << 20),
        ];
        let r = advise(&n, &InEffect::settings(s.clone(), false));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].proposed.as_deref(), Some("16777216"));
        assert_eq!(r[0].current.as_deref(), Some("6291456"));
        assert_eq!(
            r[0].command.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem=\"4096 131072 16777216\"")
        );
    }

    #[test]
    fn unknown_values_get_a_condition_and_no_command() {
        let n = [need(Knob::TcpRmemMax, End::Receiver, 8 << 20)];
        let r = advise(&n, &InEffect::default());
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].command, None);
        assert!(
            r[0].change.contains("at least 8 MiB if it is lower"),
            "{}",
            r[0].change
        );
    }

    #[test]
    fn a_setting_in_effect_is_not_named() {
        let s = KnownSettings {
            sender: Some(host(6 << 20)),
            ..KnownSettings::default()
        };
        let bbr = Need {
            knob: Knob::CongestionControl,
            on: End::Sender,
            value: Value::Name("bbr".into()),
            why: "try bbr".into(),
        };
        assert!(advise(
            std::slice::from_ref(&bbr),
            &InEffect::settings(s.clone(), false)
        )
        .is_empty());
        // Unknown: a condition, no command.
        let r = advise(&[bbr], &InEffect::default());
        assert_eq!(r[0].command, None);
        // SACK known on at the sender: the receiver is where it is off.
        let sack = Need {
            knob: Knob::Sack,
            on: End::BothEnds,
            value: Value::On,
            why: "turn SACK on".into(),
        };
        let r = advise(&[sack], &InEffect::settings(s.clone(), false));
        assert_eq!(r[0].on, "the receiver");
        assert_eq!(
            r[0].command.as_deref(),
            Some("sysctl -w net.ipv4.tcp_sack=1")
        );
    }

    #[test]
    fn settings_from_sysctls() {
        let h = HostSettings::from_sysctls(|k| {
            Some(
                match k {
                    "net.ipv4.tcp_rmem" => "4096\t131072\t33554432",
                    "net.core.rmem_max" => "212992",
                    "net.ipv4.tcp_congestion_control" => "bbr\n",
                    "net.ipv4.tcp_sack" => "1",
                    _ => return None,
                }
                .to_string(),
            )
        });
        assert_eq!(h.tcp_rmem, Some([4096, 131072, 33554432]));
        assert_eq!(h.rmem_max, Some(212992));
        assert_eq!(h.congestion_control.as_deref(), Some("bbr"));
        assert_eq!(h.sack, Some(true));
        assert_eq!(h.timestamps, None);
    }
}
