//! Trials on the lab: each trial brings up a fresh lab (client and server namespaces joined by
//! the emulated link) with the point's settings and the trial's seed, runs the workload,
//! records the sender's time series and the link's counters, and takes the lab down again,
//! also when the trial fails.
//!
//! The lab's emulator runs as a child of the `tcptune` binary (`lab up` re-executes it), so
//! this runner is used from `tcptune lab run`.

use std::net::IpAddr;
use std::path::Path;
use std::process::Command;

use tcptune_lab::{LabSpec, LinkChanges, Which};

use crate::plan::{Point, Trial};
use crate::record::Measurement;
use crate::run::TrialRunner;
use crate::settings::Settings;
use crate::workload::{self, Hosts};

/// Converts a point's settings into a lab spec (the link for the trial's seed).
pub fn lab_spec(s: &Settings, seed: u64) -> Result<LabSpec, String> {
    let mut spec = LabSpec::default();
    for (which, prefix) in [
        (Which::Both, "link."),
        (Which::Up, "link.up."),
        (Which::Down, "link.down."),
    ] {
        let mut ch = LinkChanges {
            direction: which,
            ..Default::default()
        };
        for (k, v) in s
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?, v)))
        {
            if k.contains('.') {
                continue; // link.up.* when reading link.*
            }
            ch.set(k, v)
                .map_err(|e| format!("{prefix}{k} = {v}: {e}"))?;
        }
        if !ch.is_empty() {
            ch.apply(&mut spec.link).map_err(|e| e.to_string())?;
        }
    }
    spec.link.seed = seed;
    for host in ["client", "server"] {
        let prefix = format!("{host}.");
        let settings = if host == "client" {
            &mut spec.client
        } else {
            &mut spec.server
        };
        for (k, v) in s
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?, v)))
        {
            settings
                .set(k, v)
                .map_err(|e| format!("{host}.{k} = {v}: {e}"))?;
        }
    }
    spec.validate().map_err(|e| e.to_string())?;
    Ok(spec)
}

/// The hosts of a running lab.
struct LabHosts<'a> {
    lab: &'a str,
    spec: &'a LabSpec,
}

impl Hosts for LabHosts<'_> {
    fn command(&self, host: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &tcptune_lab::lab::netns_name(self.lab, host),
        ]);
        // A host pinned to a CPU runs its commands there too (beside its CPU hog, if any).
        if let Some(cpu) = self.spec.host(host).ok().and_then(|h| h.cpu) {
            c.args(["taskset", "-c", &cpu.to_string()]);
        }
        c.arg(program);
        c
    }
    fn netns(&self, host: &str) -> String {
        tcptune_lab::lab::netns_name(self.lab, host)
    }
    fn address(&self, host: &str) -> IpAddr {
        // The lab's fixed addresses are valid literals; fall back to loopback only if they
        // ever stopped parsing, which a test would catch.
        tcptune_lab::lab::addresses(host)
            .0
            .parse()
            .unwrap_or(IpAddr::from([127, 0, 0, 1]))
    }
    fn link_empty(&self) -> bool {
        let held = |e: &serde_json::Value, dir: &str| e[dir]["held_packets"].as_u64();
        emulator_status(self.lab)
            .is_none_or(|e| held(&e, "up") == Some(0) && held(&e, "down") == Some(0))
    }
}

/// The lab's emulator as `lab status` reports it: each direction's counters, its lateness.
fn emulator_status(lab: &str) -> Option<serde_json::Value> {
    tcptune_lab::lab::status(Some(lab))
        .ok()
        .and_then(|l| serde_json::to_value(l).ok())
        .and_then(|v| {
            v.get("labs")
                .and_then(|l| l.get(0))
                .and_then(|l| l.get("emulator"))
                .cloned()
        })
}

/// Makes each host hand the link one wire packet at a time (`gso_max_segs 1` on its device),
/// so that the capture at the sender sees the packets the emulator decides on, not the TSO
/// super-packets the emulator splits after it: then a packet the link lost, duplicated or
/// reordered is one packet at both capture points.
fn wire_packets_only(hosts: &LabHosts) -> Result<(), String> {
    for host in ["client", "server"] {
        let mut c = hosts.command(host, "ip");
        c.args(["link", "set", tcptune_lab::lab::DEV, "gso_max_segs", "1"]);
        let out = c
            .output()
            .map_err(|e| format!("ip link set on the {host}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ip link set {} gso_max_segs 1 on the {host}: {}",
                tcptune_lab::lab::DEV,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// Takes the lab down when the trial ends, however it ends.
struct Down<'a>(&'a str);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = tcptune_lab::lab::down(self.0);
    }
}

/// When a workload fails: whether its lab was still there, and if not, the emulator's last
/// words (a workload killed by a signal is most often a lab removed under it). Empty when
/// the lab still runs.
fn lab_gone(lab: &str) -> String {
    if tcptune_lab::lab::status(Some(lab)).is_ok() {
        return String::new();
    }
    let log = std::fs::read_to_string(
        Path::new(tcptune_lab::lab::RUN_DIR)
            .join(lab)
            .join("emulator.log"),
    )
    .unwrap_or_default();
    let last = log.lines().last().unwrap_or("").trim();
    if last.is_empty() {
        "; the lab was gone when the workload failed (removed by another process, or its emulator stopped without a word)".into()
    } else {
        format!("; the lab was gone when the workload failed; its emulator said: {last}")
    }
}

/// Runs trials on labs named after `lab`: each trial on a lab of its own name (`lab` and a
/// number), because on a shared machine another `lab up` may still be sweeping the previous
/// trial's lab as a dead one, and a sweep that found a new lab under the old name would kill
/// its workload and delete its namespaces mid-trial.
pub struct LabRunner {
    /// The base of the labs' names.
    pub lab: String,
    /// Trials run so far (the next lab's number).
    pub trials: u32,
}

impl LabRunner {
    /// A runner whose labs are named after `lab`, no trial run yet.
    pub fn new(lab: &str) -> LabRunner {
        LabRunner {
            lab: lab.to_string(),
            trials: 0,
        }
    }

    /// The next trial's lab name: `lab` cut to leave room for "-" and four digits (names are
    /// at most 24 characters), numbers cycling through 10 000.
    fn next_name(&mut self) -> String {
        self.trials = self.trials.wrapping_add(1);
        let stem: String = self.lab.chars().take(19).collect();
        format!("{stem}-{:04}", self.trials % 10_000)
    }
}

impl TrialRunner for LabRunner {
    fn environment(&mut self) -> serde_json::Value {
        let read = |key: &str| tcptune_os::sysctl::read_value(key).ok();
        serde_json::json!({
            "tcptune": env!("CARGO_PKG_VERSION"),
            "kernel": tcptune_kernel::sys::kernel_release(),
            "backend": if tcptune_lab::netem::netem_available() { "emu (netem available)" } else { "emu (user-space link emulator over TUN; no sch_netem)" },
            "cpus": std::thread::available_parallelism().map(|n| n.get()).ok(),
            "congestion_controls": read("net.ipv4.tcp_available_congestion_control"),
            "net.core.rmem_max": read("net.core.rmem_max"),
            "net.core.wmem_max": read("net.core.wmem_max"),
            "net.ipv4.tcp_rmem (host)": read("net.ipv4.tcp_rmem"),
            "net.ipv4.tcp_wmem (host)": read("net.ipv4.tcp_wmem"),
            "net.ipv4.tcp_mem": read("net.ipv4.tcp_mem"),
        })
    }

    fn should_stop(&self) -> bool {
        tcptune_lab::os::interrupted()
    }

    fn run(&mut self, point: &Point, trial: &Trial, dir: &Path) -> Result<Measurement, String> {
        let spec = lab_spec(&point.settings, trial.seed)?;
        // Each trial on its own lab name; tied to this process: after a `kill -9` of the run,
        // its lab is a leftover that the rerun (resuming) removes.
        let lab = self.next_name();
        tcptune_lab::lab::up_tied(&lab, spec.clone()).map_err(|e| format!("lab up: {e}"))?;
        let _down = Down(&lab);
        let hosts = LabHosts {
            lab: &lab,
            spec: &spec,
        };
        let both = point
            .settings
            .get("capture.at")
            .is_some_and(|a| a == "both");
        let capture = match point.settings.get("capture.snaplen") {
            Some(snaplen) => {
                std::fs::create_dir_all(dir.join("captures")).map_err(|e| e.to_string())?;
                Some((
                    format!("captures/{}.pcap", trial.id),
                    both.then(|| format!("captures/{}-server.pcap", trial.id)),
                    snaplen.parse::<u32>().map_err(|e| e.to_string())?,
                ))
            }
            None => None,
        };
        if capture.as_ref().is_some_and(|c| c.1.is_some()) {
            wire_packets_only(&hosts)?;
        }
        let link_before = both.then(|| emulator_status(&lab)).flatten();
        let paths = capture
            .as_ref()
            .map(|(c, s, _)| (dir.join(c), s.as_ref().map(|s| dir.join(s))));
        let result = workload::run(
            &hosts,
            &point.settings,
            5201,
            capture
                .as_ref()
                .zip(paths.as_ref())
                .map(|((_, _, snaplen), (c, s))| workload::Captures {
                    snaplen: *snaplen,
                    client: c,
                    server: s.as_deref(),
                }),
        )
        .map_err(|e| format!("{e}{}", lab_gone(&lab)))?;
        let mut m = result.measurement;
        let series_rel = format!("series/{}.jsonl", trial.id);
        let lines: String = result
            .series
            .iter()
            .filter_map(|s| serde_json::to_string(s).ok())
            .map(|l| l + "\n")
            .collect();
        std::fs::write(dir.join(&series_rel), lines).map_err(|e| e.to_string())?;
        m.series = Some(series_rel);
        let receiver_rel = format!("series/{}-receiver.jsonl", trial.id);
        let lines: String = result
            .receiver_series
            .iter()
            .filter_map(|s| serde_json::to_string(s).ok())
            .map(|l| l + "\n")
            .collect();
        std::fs::write(dir.join(&receiver_rel), lines).map_err(|e| e.to_string())?;
        m.receiver_series = Some(receiver_rel);
        m.link = emulator_status(&lab);
        if let Some((client_rel, Some(server_rel), _)) = &capture {
            m.join = Some(crate::join::join_trial(
                dir,
                [client_rel, server_rel],
                hosts.address("client"),
                link_before,
                result.capture_problems,
            ));
        }
        if let Some((client_rel, server_rel, _)) = capture {
            m.capture = Some(client_rel);
            m.capture_server = server_rel;
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(kv: &[(&str, &str)]) -> Settings {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn settings_become_a_lab_spec() {
        let spec = lab_spec(
            &s(&[
                ("link.rate", "100mbit"),
                ("link.delay", "10ms"),
                ("link.down.loss", "1%"),
                ("server.sysctl.net.ipv4.tcp_rmem", "4096 4096 4096"),
                ("client.mtu", "9000"),
                ("client.ssthresh", "inf"),
                ("server.initcwnd", "20"),
                ("workload.kind", "iperf3"),
            ]),
            42,
        )
        .unwrap();
        assert_eq!(spec.link.seed, 42);
        assert_eq!(spec.link.up.rate_bps.unwrap().bps(), 100e6);
        assert_eq!(spec.link.down.delay_s, tcptune_model::Dur::from_millis(10));
        assert_eq!(spec.link.up.loss, tcptune_emu::Loss::None);
        assert!(matches!(
            spec.link.down.loss,
            tcptune_emu::Loss::Random { .. }
        ));
        assert_eq!(spec.server.sysctls["net.ipv4.tcp_rmem"], "4096 4096 4096");
        assert_eq!(spec.client.mtu, Some(9000));
        assert_eq!(spec.client.route.ssthresh, None);
        assert_eq!(spec.server.route.initcwnd, Some(20));
        let e = lab_spec(&s(&[("link.reorder", "10%")]), 1).unwrap_err();
        assert!(e.contains("delay"), "{e}");
    }

    #[test]
    fn every_trial_gets_a_lab_name_of_its_own() {
        let mut r = LabRunner::new("a-very-long-lab-name-of-24");
        let names: Vec<String> = (0..3).map(|_| r.next_name()).collect();
        assert_eq!(names[0], "a-very-long-lab-nam-0001");
        assert_ne!(names[1], names[2]);
        for n in &names {
            tcptune_lab::lab::check_name(n).unwrap();
        }
    }
}
