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
use crate::run::{Measurement, TrialRunner};
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
    pub lab: String,
    /// Trials run so far (the next lab's number).
    pub trials: u32,
}

impl LabRunner {
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
        let capture = match point.settings.get("capture.snaplen") {
            Some(snaplen) => {
                std::fs::create_dir_all(dir.join("captures")).map_err(|e| e.to_string())?;
                Some((
                    format!("captures/{}.pcap", trial.id),
                    snaplen.parse::<u32>().map_err(|e| e.to_string())?,
                ))
            }
            None => None,
        };
        let cap_path = capture.as_ref().map(|(rel, snap)| (dir.join(rel), *snap));
        let result = workload::run(
            &hosts,
            &point.settings,
            5201,
            cap_path.as_ref().map(|(p, s)| (p.as_path(), *s)),
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
        m.capture = capture.map(|(rel, _)| rel);
        m.link = tcptune_lab::lab::status(Some(&lab))
            .ok()
            .and_then(|l| serde_json::to_value(l).ok())
            .and_then(|v| {
                v.get("labs")
                    .and_then(|l| l.get(0))
                    .and_then(|l| l.get("emulator"))
                    .cloned()
            });
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
