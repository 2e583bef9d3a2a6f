//! The settings an experiment can fix or sweep, named by path (`link.rate`,
//! `link.up.delay`, `server.sysctl.net.ipv4.tcp_rmem`, `client.mtu`, `workload.parallel`), and
//! how each value is checked before any trial runs: units parse, ranges hold, and the kernel
//! has what is asked for (a congestion control, a sysctl).

use std::collections::BTreeMap;

use tcptune_model::{Bytes, Dur};

/// Settings of one sweep point: path → value as written (numbers and booleans as text).
pub type Settings = BTreeMap<String, String>;

/// What this kernel offers, asked before any trial runs.
pub trait Capabilities {
    /// Congestion controls that can be selected (tcp_available_congestion_control).
    fn congestion_controls(&self) -> Vec<String>;
    /// Whether `/proc/sys/<key>` exists (dotted key).
    fn sysctl_exists(&self, key: &str) -> bool;
    /// How many CPUs a host may be pinned to (0 to n − 1).
    fn cpus(&self) -> u32;
}

/// The running kernel.
pub struct LiveCapabilities;

impl Capabilities for LiveCapabilities {
    fn congestion_controls(&self) -> Vec<String> {
        tcptune_os::sysctl::read("net.ipv4.tcp_available_congestion_control")
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }
    fn sysctl_exists(&self, key: &str) -> bool {
        tcptune_os::sysctl::exists(key)
    }
    fn cpus(&self) -> u32 {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
    }
}

// Link settings (per direction under `link.up.` / `link.down.`, both under `link.`) and host
// settings under `client.` / `server.` are the lab's: `tcptune_lab::keys::{LINK, HOST}`.

/// Workload settings under `workload.`.
pub const WORKLOAD_KEYS: [&str; 11] = [
    "kind",
    "direction",
    "duration",
    "bytes",
    "parallel",
    "window",
    "cc",
    "prime_connections",
    "client_command",
    "server_command",
    "file_size",
];

/// Capture settings under `capture.`.
pub const CAPTURE_KEYS: [&str; 3] = ["snaplen", "hosts", "at"];

/// Checks one setting; the error is the reason (the caller adds the line).
pub fn check(path: &str, value: &str, caps: &dyn Capabilities) -> Result<(), String> {
    let parts: Vec<&str> = path.splitn(2, '.').collect();
    let [section, rest] = parts[..] else {
        return Err(format!(
            "'{path}' is not a setting; settings start with link., client., server., workload. or capture."
        ));
    };
    match section {
        "link" => {
            let key = rest.strip_prefix("up.").or_else(|| rest.strip_prefix("down.")).unwrap_or(rest);
            check_link(key, value)
        }
        "client" | "server" => check_host(rest, value, caps),
        "workload" => check_workload(rest, value, caps),
        "capture" => match rest {
            "snaplen" => uint(value, 0, 262_144).map(drop),
            "hosts" => Ok(()),
            // Where the trial captures: the client only, or both ends of the link (then each
            // trial's two captures are joined: `crate::join`).
            "at" => match value {
                "client" | "both" => Ok(()),
                _ => Err(format!(
                    "capture at '{value}' is unknown; use client (one capture) or both (a capture at each end, joined)"
                )),
            },
            _ => Err(unknown("capture", rest, &CAPTURE_KEYS)),
        },
        _ => Err(format!(
            "'{path}' is not a setting; settings start with link., client., server., workload. or capture."
        )),
    }
}

fn unknown(section: &str, key: &str, known: &[&str]) -> String {
    format!(
        "'{section}.{key}' is not a known setting; {section} settings are: {}",
        known.join(", ")
    )
}

fn names(keys: &[tcptune_lab::keys::Key]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

fn uint(value: &str, min: u64, max: u64) -> Result<u64, String> {
    match value.trim().parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(format!(
            "'{value}' must be a whole number from {min} to {max}"
        )),
    }
}

/// A link value, by the lab's table (the one `lab up` and `lab set` use).
fn check_link(key: &str, value: &str) -> Result<(), String> {
    if tcptune_lab::keys::link_key(key).is_none() {
        return Err(unknown("link", key, &names(tcptune_lab::keys::LINK)));
    }
    tcptune_lab::LinkChanges::default().set(key, value)
}

fn check_cc(name: &str, caps: &dyn Capabilities) -> Result<(), String> {
    let available = caps.congestion_controls();
    if available.iter().any(|c| c == name) {
        Ok(())
    } else {
        Err(format!(
            "congestion control '{name}' is not available in this kernel (available: {})",
            available.join(", ")
        ))
    }
}

/// A host value, by the lab's table (the one `lab up --host` and `lab set` use), then against
/// what this kernel has: the sysctl, the congestion control, the CPU.
fn check_host(rest: &str, value: &str, caps: &dyn Capabilities) -> Result<(), String> {
    if tcptune_lab::keys::host_key(rest).is_none() {
        return Err(unknown("host", rest, &names(tcptune_lab::keys::HOST))
            .replace("'host.", "'client./server."));
    }
    tcptune_lab::HostSettings::default().set_key(rest, value)?;
    if let Some(key) = rest.strip_prefix("sysctl.") {
        if !caps.sysctl_exists(key) {
            return Err(format!("sysctl '{key}' does not exist in this kernel"));
        }
        if key == "net.ipv4.tcp_congestion_control" {
            return check_cc(value, caps);
        }
        return Ok(());
    }
    match rest {
        "cc" | "congctl" => check_cc(value, caps),
        "cpu" => {
            let n = caps.cpus().max(1);
            match value.trim().parse::<u32>() {
                Ok(c) if c < n => Ok(()),
                _ => Err(format!(
                    "cpu '{value}' does not exist; this machine has CPUs 0 to {}",
                    n - 1
                )),
            }
        }
        _ => Ok(()),
    }
}

/// Checks what only the settings of a whole point together decide (each value alone passed
/// [`check`]): the workload has what its kind needs.
pub fn check_point(s: &Settings) -> Result<(), String> {
    let kind = s
        .get("workload.kind")
        .map(String::as_str)
        .unwrap_or("iperf3");
    if kind == "command" && !s.contains_key("workload.client_command") {
        return Err(
            "workload kind command needs workload.client_command (the command the client runs)"
                .into(),
        );
    }
    if s.get("capture.at").is_some_and(|a| a == "both") && !s.contains_key("capture.snaplen") {
        return Err(
            "capture.at = \"both\" needs capture.snaplen (the bytes of each packet to keep, e.g. 128)"
                .into(),
        );
    }
    if kind != "command" {
        if let Some(k) = ["workload.client_command", "workload.server_command"]
            .into_iter()
            .find(|k| s.contains_key(*k))
        {
            return Err(format!(
                "{k} is only run by workload kind command, not {kind}; set kind = \"command\" or remove it"
            ));
        }
    }
    Ok(())
}

fn check_workload(key: &str, value: &str, caps: &dyn Capabilities) -> Result<(), String> {
    match key {
        "kind" => match value {
            "bulk" | "iperf3" | "http" | "command" => Ok(()),
            _ => Err(format!("workload kind '{value}' is unknown; use bulk, iperf3, http or command")),
        },
        "direction" => match value {
            "upload" | "download" => Ok(()),
            _ => Err(format!("direction '{value}' is unknown; use upload (client sends) or download (server sends)")),
        },
        // iperf3 reads -t as whole seconds and 0 as "forever", so less than 1s would hang.
        "duration" => match value.parse::<Dur>() {
            Ok(d) if d >= Dur::from_millis(1000) => Ok(()),
            Ok(_) => Err(format!(
                "workload duration '{value}' is too short; give at least 1s"
            )),
            Err(e) => Err(e.to_string()),
        },
        "bytes" | "file_size" => value.parse::<Bytes>().map(drop).map_err(|e| e.to_string()),
        // "none": the application leaves its buffers to autotuning (lets a paired group
        // compare an application that sets SO_RCVBUF with one that does not).
        "window" if value == "none" => Ok(()),
        "window" => value.parse::<Bytes>().map(drop).map_err(|e| format!("{e}; or none")),
        "parallel" => uint(value, 1, 128).map(drop),
        "prime_connections" => uint(value, 0, 10).map(drop),
        "cc" => check_cc(value, caps),
        "client_command" | "server_command" => Ok(()),
        _ => Err(unknown("workload", key, &WORKLOAD_KEYS)),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A kernel like the build machines': reno, cubic and bbr, and a handful of sysctls.
    pub struct FakeCaps;
    impl Capabilities for FakeCaps {
        fn congestion_controls(&self) -> Vec<String> {
            vec!["reno".into(), "bbr".into(), "cubic".into()]
        }
        fn sysctl_exists(&self, key: &str) -> bool {
            [
                "net.ipv4.tcp_rmem",
                "net.ipv4.tcp_wmem",
                "net.ipv4.tcp_sack",
                "net.ipv4.tcp_timestamps",
                "net.ipv4.tcp_window_scaling",
                "net.ipv4.tcp_congestion_control",
                "net.core.rmem_max",
            ]
            .contains(&key)
        }
        fn cpus(&self) -> u32 {
            2
        }
    }

    #[test]
    fn known_settings_pass_and_unknown_ones_say_what_exists() {
        let ok = [
            ("link.rate", "100mbit"),
            ("link.up.delay", "10ms"),
            ("link.down.loss", "1%"),
            ("link.loss_ge", "1%,10%,100%,0%"),
            ("link.rtt", "20ms"),
            ("workload.window", "64KiB"),
            ("workload.window", "none"),
            ("server.cc", "bbr"),
            ("server.sysctl.net.ipv4.tcp_rmem", "4096 131072 6291456"),
            ("client.mtu", "9000"),
            ("client.ssthresh", "inf"),
            ("server.congctl", "cubic"),
            ("workload.parallel", "4"),
            ("client.cpu", "1"),
            ("workload.duration", "1s"),
            ("link.overhead", "0"),
        ];
        for (k, v) in ok {
            check(k, v, &FakeCaps).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        let bad = [
            ("link.latency", "10ms", "link settings are: rate, delay"),
            ("link.rate", "10m", "ambiguous"),
            ("link.loss", "150%", "out of range"),
            ("client.mtu", "20", "from 68"),
            ("server.congctl", "vegas", "not available in this kernel"),
            (
                "server.sysctl.net.ipv4.tcp_congestion_control",
                "westwood",
                "not available",
            ),
            ("server.sysctl.net.ipv4.tcp_nonsense", "1", "does not exist"),
            ("server.sysctl.kernel.pid_max", "1", "not a network sysctl"),
            ("router.mtu", "1500", "not a setting"),
            ("workload.window", "big", "or none"),
            // Values that used to pass and then failed or lied in every trial.
            ("client.cpu", "99", "this machine has CPUs 0 to 1"),
            ("server.cpu", "2", "does not exist"),
            ("workload.duration", "0s", "at least 1s"),
            ("workload.duration", "0.5s", "at least 1s"),
            ("link.overhead", "-100", "from 0 to 10000"),
            ("link.up.overhead", "10001", "from 0 to 10000"),
            ("link.rate", "1e300tbit", "out of range"),
            ("link.delay", "1e-12s", "out of range"),
            ("workload.cc", "vegas", "not available in this kernel"),
            ("capture.at", "server", "use client (one capture) or both"),
        ];
        for (k, v, want) in bad {
            let e = check(k, v, &FakeCaps)
                .err()
                .unwrap_or_else(|| panic!("{k}={v} was accepted"));
            assert!(e.contains(want), "{k}={v}: {e}");
        }
    }

    #[test]
    fn a_point_needs_what_its_workload_kind_runs() {
        let s = |kv: &[(&str, &str)]| -> Settings {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let e = check_point(&s(&[("workload.kind", "command")])).unwrap_err();
        assert!(e.contains("needs workload.client_command"), "{e}");
        let e = check_point(&s(&[("capture.at", "both")])).unwrap_err();
        assert!(e.contains("needs capture.snaplen"), "{e}");
        check_point(&s(&[("capture.at", "both"), ("capture.snaplen", "128")])).unwrap();
        check_point(&s(&[
            ("workload.kind", "command"),
            ("workload.client_command", "true"),
        ]))
        .unwrap();
        let e = check_point(&s(&[("workload.client_command", "true")])).unwrap_err();
        assert!(
            e.contains("only run by workload kind command, not iperf3"),
            "{e}"
        );
        check_point(&s(&[("workload.kind", "bulk")])).unwrap();
    }

    /// What `lab up --host` / `lab set --host` (then the spec's validation) accepts, the
    /// experiment's check accepts, and the other way round: one table decides both.
    /// The running kernel's answers read once: the congestion controls available can change
    /// while other tests load a module, and both entry points must be asked the same question.
    struct ReadOnce(Vec<String>);

    impl Capabilities for ReadOnce {
        fn congestion_controls(&self) -> Vec<String> {
            self.0.clone()
        }
        fn sysctl_exists(&self, key: &str) -> bool {
            LiveCapabilities.sysctl_exists(key)
        }
        fn cpus(&self) -> u32 {
            LiveCapabilities.cpus()
        }
    }

    fn both_entry_points_agree(key: &str, value: &str) {
        thread_local! {
            static CCS: Vec<String> = LiveCapabilities.congestion_controls();
        }
        let caps = ReadOnce(CCS.with(Vec::clone));
        let experiment = check(&format!("client.{key}"), value, &caps);
        let mut spec = tcptune_lab::LabSpec::default();
        let lab =
            tcptune_lab::spec::apply_host_setting(&mut spec, &format!("client.{key}={value}"))
                .and_then(|()| spec.validate())
                .map_err(|e| e.to_string())
                // What the lab asks the kernel only at `up` (and the experiment before any trial).
                .and_then(|()| {
                    let ccs = caps.congestion_controls();
                    match spec
                        .client
                        .congestion_controls()
                        .into_iter()
                        .find(|c| !ccs.iter().any(|a| a == c))
                    {
                        Some(cc) => Err(format!("{cc} not available")),
                        None => Ok(()),
                    }
                });
        assert_eq!(
            experiment.is_ok(),
            lab.is_ok(),
            "client.{key}={value:?}: experiment {experiment:?}, lab {lab:?}"
        );
    }

    #[test]
    fn lab_and_experiment_accept_the_same_host_values() {
        use proptest::prelude::*;
        let keys: Vec<&str> = tcptune_lab::keys::HOST
            .iter()
            .map(|k| {
                if k.name == "sysctl.NAME" {
                    "sysctl.net.ipv4.tcp_sack"
                } else {
                    k.name
                }
            })
            .collect();
        let words = [
            "0",
            "1",
            "2",
            "45",
            "68",
            "1500",
            "65535",
            "65536",
            "1000000000",
            "4000000000",
            "-1",
            "inf",
            "true",
            "false",
            "on",
            "yes",
            "cubic",
            "reno",
            "no_such_cc",
            "bad name",
            "100mbit",
            "10m",
            "400gbit",
            "500gbit",
            "1kbit",
            "999bit",
            "",
            "1.5",
        ];
        for k in &keys {
            for w in words {
                both_entry_points_agree(k, w);
            }
        }
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(
                &(
                    0..keys.len(),
                    prop_oneof![any::<i64>().prop_map(|n| n.to_string()), "[a-z0-9.%-]{0,8}"],
                ),
                |(k, v)| {
                    both_entry_points_agree(keys[k], &v);
                    Ok(())
                },
            )
            .unwrap();
    }
}
