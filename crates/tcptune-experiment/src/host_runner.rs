//! Trials on real hosts (the spec's `[hosts]`), over ssh ([`crate::remote`]). Before the
//! first trial: each host's `tcptune --version` must equal this one's, and each host's
//! environment is recorded (kernel, CPU, the TCP sysctls, the device towards the other host
//! with its MTU, qdisc and offloads, whether it has sch_netem). Each trial then:
//!
//! 1. applies the point's host settings on each host with `tcptune tune --apply --set …
//!    --hold` (tune's snapshot and exact rollback), held by the ssh session: the remote
//!    tcptune rolls back when its standard input closes, so an interrupted run, a killed
//!    runner or a dropped connection leaves the host restored without help from here;
//! 2. puts netem on the sender's device for the point's link impairments, tied to the session
//!    the same way (refused before the first trial where the sender lacks sch_netem);
//! 3. runs `tcptune serve -1` on the server and `tcptune test -J` on the client, whose
//!    document (iperf3's with tcptune's samples and diagnosis) comes back over ssh and gives
//!    the measurement and the sender's time series;
//! 4. rolls back (closes the sessions) and checks each host said it restored.
//!
//! A host lost mid-trial fails that trial with the cause; the run goes on ([`crate::run`]).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tcptune_diagnose::{interval, Sample};

use crate::hosts::{self, Endpoint, HostsSpec};
use crate::plan::{Point, Trial};
use crate::record::{LimitShares, Measurement, SeriesSample};
use crate::remote::{Host, Tied};
use crate::run::TrialRunner;

/// The port `tcptune serve` listens on.
const PORT: u16 = 5201;
/// Time for a command's ssh round trips beyond its own work.
const SLACK: Duration = Duration::from_secs(30);

/// What one host said about itself before the first trial.
struct Probe {
    version: String,
    /// `$SSH_CONNECTION`: the address we reached it at, and ours as it sees it.
    ssh_connection: Vec<String>,
}

fn probe(h: &Host) -> Result<Probe, String> {
    let script = r#"printf 'version\t%s\n' "$("$0" --version 2>&1 | head -n 1)"; printf 'ssh\t%s\n' "$SSH_CONNECTION""#;
    let argv = ["sh", "-c", script, h.tcptune.as_str()].map(String::from);
    let out = h.run(&argv, SLACK, &[0])?;
    let map = tab_lines(&String::from_utf8_lossy(&out.stdout));
    let field = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Ok(Probe {
        version: field("version"),
        ssh_connection: field("ssh").split_whitespace().map(String::from).collect(),
    })
}

/// `key<TAB>value` lines as a JSON object.
fn tab_lines(text: &str) -> serde_json::Map<String, Value> {
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), Value::String(v.trim().to_string())))
        .collect()
}

/// Kernel, CPU, TCP sysctls, and the device towards `$1` (MTU, qdisc, offloads), sch_netem.
const ENVIRONMENT: &str = r#"peer=$1
printf 'kernel\t%s\n' "$(uname -r)"
printf 'cpus\t%s\n' "$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
printf 'cpu_model\t%s\n' "$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)"
for k in net.ipv4.tcp_rmem net.ipv4.tcp_wmem net.ipv4.tcp_mem net.core.rmem_max net.core.wmem_max \
  net.core.default_qdisc net.ipv4.tcp_congestion_control net.ipv4.tcp_available_congestion_control \
  net.ipv4.tcp_sack net.ipv4.tcp_timestamps net.ipv4.tcp_window_scaling net.ipv4.tcp_ecn \
  net.ipv4.tcp_no_metrics_save net.ipv4.tcp_slow_start_after_idle; do
  f=/proc/sys/$(echo "$k" | tr . /)
  [ -r "$f" ] && printf 'sysctl.%s\t%s\n' "$k" "$(tr '\t' ' ' <"$f")"
done
dev=$(ip route get "$peer" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1)
printf 'dev\t%s\n' "$dev"
if [ -n "$dev" ]; then
  printf 'mtu\t%s\n' "$(cat /sys/class/net/"$dev"/mtu 2>/dev/null)"
  printf 'qdisc\t%s\n' "$(tc qdisc show dev "$dev" 2>/dev/null | head -n 1)"
  if command -v ethtool >/dev/null 2>&1; then
    ethtool -k "$dev" 2>/dev/null | grep -E '^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload|large-receive-offload|rx-checksumming|tx-checksumming|scatter-gather):' | sed 's/^/offload./; s/: /\t/'
  else
    printf 'offload\tunknown (ethtool is not installed)\n'
  fi
fi
if [ -d /sys/module/sch_netem ] || modinfo sch_netem >/dev/null 2>&1 || grep -qs 'sch_netem.ko' "/lib/modules/$(uname -r)/modules.builtin"; then
  printf 'sch_netem\tyes\n'
else
  printf 'sch_netem\tno\n'
fi
"#;

fn environment_of(h: &Host, peer: &str) -> Result<serde_json::Map<String, Value>, String> {
    let argv = ["sh", "-c", ENVIRONMENT, "sh", peer].map(String::from);
    let out = h.run(&argv, SLACK, &[0])?;
    let mut map = tab_lines(&String::from_utf8_lossy(&out.stdout));
    map.insert("host".into(), Value::String(h.endpoint.to_string()));
    Ok(map)
}

/// Which host sends the bulk data of a point (as the lab's workload decides it).
fn sender(s: &crate::settings::Settings) -> &'static str {
    match s.get("workload.direction").map(String::as_str) {
        Some("download") => "server",
        _ => "client",
    }
}

/// Runs trials on the hosts of a spec's `[hosts]`.
pub struct HostRunner {
    name: String,
    client: Host,
    server: Host,
    /// Where the client reaches the server.
    server_address: String,
    /// Each host's device towards the other (for netem).
    devices: [String; 2],
    environment: Value,
}

impl HostRunner {
    /// Connects to both hosts, checks their tcptune, records their environment, and checks
    /// that each point's link impairments can be made there; every refusal is one sentence.
    pub fn connect(name: &str, spec: &HostsSpec, points: &[Point]) -> Result<HostRunner, String> {
        let client = Host::new("client", &spec.client, spec);
        let server = Host::new("server", &spec.server, spec);
        let ours = format!("tcptune {}", env!("CARGO_PKG_VERSION"));
        let (pc, ps) = (probe(&client)?, probe(&server)?);
        for (h, p) in [(&client, &pc), (&server, &ps)] {
            if p.version != ours {
                return Err(format!(
                    "{} runs '{}' ({}), not {ours} as here; install {ours} there, or set [hosts] tcptune to its path",
                    h.name(),
                    p.version,
                    h.tcptune
                ));
            }
        }
        // The address we reached a host at (SSH_CONNECTION's third field), or, for the local
        // end, ours as the other host sees it (its first).
        let reached = |p: &Probe| p.ssh_connection.get(2).cloned();
        let seen = |p: &Probe| p.ssh_connection.first().cloned();
        let server_address = spec
            .server_address
            .clone()
            .or_else(|| match spec.server {
                Endpoint::Local => seen(&pc),
                Endpoint::Ssh { .. } => reached(&ps),
            })
            .ok_or("cannot tell the server's address; set [hosts] server_address")?;
        let client_address = match spec.client {
            Endpoint::Local => seen(&ps),
            Endpoint::Ssh { .. } => reached(&pc),
        }
        .unwrap_or_default();
        let ec = environment_of(&client, &server_address)?;
        let es = environment_of(&server, &client_address)?;
        for p in points.iter().filter(|p| hosts::impairs_link(&p.settings)) {
            let (h, e) = match sender(&p.settings) {
                "client" => (&client, &ec),
                _ => (&server, &es),
            };
            if e.get("sch_netem").and_then(Value::as_str) != Some("yes") {
                return Err(format!(
                    "point {} impairs the link, which on real hosts goes through netem on the sender's device, and {} has no sch_netem; remove [link] from the spec, or load sch_netem there (modprobe sch_netem)",
                    p.label(),
                    h.name()
                ));
            }
        }
        let dev = |e: &serde_json::Map<String, Value>| {
            e.get("dev")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let devices = [dev(&ec), dev(&es)];
        let environment = serde_json::json!({
            "tcptune": env!("CARGO_PKG_VERSION"),
            "backend": "real hosts over ssh",
            "server_address": server_address,
            "client": ec,
            "server": es,
        });
        Ok(HostRunner {
            name: name.to_string(),
            client,
            server,
            server_address,
            devices,
            environment,
        })
    }

    fn host(&self, role: &str) -> &Host {
        if role == "client" {
            &self.client
        } else {
            &self.server
        }
    }

    /// Applies `host`'s settings of the point, held until the returned session closes.
    fn hold_settings(
        &self,
        h: &Host,
        s: &crate::settings::Settings,
    ) -> Result<Option<Tied>, String> {
        let sysctls = hosts::host_sysctls(s, h.role);
        if sysctls.is_empty() {
            return Ok(None);
        }
        let snapshot = format!("/var/lib/tcptune/experiment-{}-{}.json", self.name, h.role);
        let mut argv: Vec<String> = [h.tcptune.as_str(), "tune", "--apply", "--hold", "--json"]
            .map(String::from)
            .into();
        argv.extend(["--snapshot".into(), snapshot]);
        for (k, v) in sysctls {
            argv.extend(["--set".into(), format!("{k}={v}")]);
        }
        // A guard of the previous trial that lost its connection may still be rolling back
        // (the snapshot exists, or its lock is held): asked again once, a little later.
        for attempt in 0..2 {
            let mut held = h.spawn_held(&argv)?;
            match held.line(SLACK).and_then(|l| mode_of(&l)) {
                Ok(m) if m == "apply" => return Ok(Some(held)),
                Ok(m) => {
                    return Err(format!(
                        "tcptune tune on {} said '{m}', not apply",
                        h.name()
                    ))
                }
                Err(e)
                    if attempt == 0
                        && (e.contains("already exists") || e.contains("is working on")) =>
                {
                    drop(held);
                    std::thread::sleep(Duration::from_secs(3));
                }
                Err(e) => return Err(format!("applying the {}'s settings: {e}", h.role)),
            }
        }
        Err(format!(
            "applying the {}'s settings: a snapshot of an earlier trial is still there",
            h.role
        ))
    }

    /// netem on the sender's device for the point's impairments, removed when the session
    /// closes.
    fn hold_netem(&self, point: &Point, seed: u64) -> Result<Option<Tied>, String> {
        if !hosts::impairs_link(&point.settings) {
            return Ok(None);
        }
        let role = sender(&point.settings);
        let dev = &self.devices[usize::from(role == "server")];
        let argv = netem_argv(&point.settings, seed, role, dev)?;
        let h = self.host(role);
        let mut held = h.spawn_held(&argv)?;
        held.wait_for("netem on", SLACK)
            .map_err(|e| format!("netem on the {role}'s {dev}: {e}"))?;
        Ok(Some(held))
    }

    fn workload(&self, s: &crate::settings::Settings) -> Result<Value, String> {
        let port = PORT.to_string();
        let serve = [
            self.server.tcptune.as_str(),
            "serve",
            "-1",
            "-p",
            port.as_str(),
        ];
        let mut srv = self.server.spawn_tied(&serve.map(String::from))?;
        srv.wait_for("listening on", SLACK)
            .map_err(|e| format!("tcptune serve: {e}"))?;
        let secs = s
            .get("workload.duration")
            .and_then(|d| d.parse::<tcptune_model::Dur>().ok())
            .map_or(10, |d| d.secs().ceil() as u64);
        let argv = test_argv(&self.client.tcptune, &self.server_address, secs, s)?;
        // Exit 1: the diagnosis found a problem, a result like any other.
        let out = self
            .client
            .run(&argv, Duration::from_secs(secs) + SLACK, &[0, 1]);
        let _ = srv.finish(SLACK);
        let out = out?;
        let doc: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            format!(
                "tcptune test on {} printed no JSON document ({e})",
                self.client.name()
            )
        })?;
        if let Some(err) = doc.get("error").and_then(Value::as_str) {
            return Err(format!("tcptune test on {}: {err}", self.client.name()));
        }
        Ok(doc)
    }
}

/// The `"mode"` of a `tcptune tune --json` line.
fn mode_of(line: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(line).map_err(|_| line.trim().to_string())?;
    v["result"]["mode"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| line.trim().to_string())
}

/// `tcptune test` for a point: iperf3's options for the workload's settings.
fn test_argv(
    tcptune: &str,
    server: &str,
    secs: u64,
    s: &crate::settings::Settings,
) -> Result<Vec<String>, String> {
    let (port, secs) = (PORT.to_string(), secs.to_string());
    let mut a: Vec<String> = [
        tcptune,
        "test",
        server,
        "-p",
        port.as_str(),
        "-t",
        secs.as_str(),
        "-J",
    ]
    .map(String::from)
    .into();
    if sender(s) == "server" {
        a.push("-R".into());
    }
    if let Some(p) = s.get("workload.parallel") {
        a.extend(["-P".into(), p.clone()]);
    }
    if let Some(cc) = s.get("workload.cc") {
        a.extend(["-C".into(), cc.clone()]);
    }
    if let Some(w) = s.get("workload.window").filter(|w| *w != "none") {
        let w = w
            .parse::<tcptune_model::Bytes>()
            .map_err(|e| e.to_string())?;
        a.extend(["-w".into(), w.get().to_string()]);
    }
    Ok(a)
}

/// A shell that puts netem (as the lab's netem backend writes it) on `dev`, says so, waits
/// for its standard input to end, and removes it.
fn netem_argv(
    s: &crate::settings::Settings,
    seed: u64,
    role: &str,
    dev: &str,
) -> Result<Vec<String>, String> {
    if dev.is_empty() {
        return Err(format!(
            "cannot tell the {role}'s device towards the other host"
        ));
    }
    let lab = crate::lab_runner::lab_spec(s, seed)?;
    let link = if role == "client" {
        &lab.link.up
    } else {
        &lab.link.down
    };
    let tc = tcptune_lab::netem::tc_commands(dev, link, seed).map_err(|e| e.to_string())?;
    // The offload switches (`-K`) are the lab's, for its veth; a real NIC keeps its own.
    let qdisc = tc
        .into_iter()
        .find(|c| c.first().is_some_and(|w| w == "qdisc"))
        .ok_or("no netem command for this link")?;
    let words: Vec<String> = qdisc.iter().map(|w| crate::remote::shell_word(w)).collect();
    let dev = crate::remote::shell_word(dev);
    Ok(vec![
        "sh".into(),
        "-c".into(),
        format!(
            "tc {} || exit 1; echo netem on {dev}; cat >/dev/null; tc qdisc del dev {dev} root",
            words.join(" ")
        ),
    ])
}

impl TrialRunner for HostRunner {
    fn environment(&mut self) -> Value {
        self.environment.clone()
    }

    fn should_stop(&self) -> bool {
        tcptune_lab::os::interrupted()
    }

    fn run(&mut self, point: &Point, trial: &Trial, dir: &Path) -> Result<Measurement, String> {
        let s = &point.settings;
        let mut held: Vec<Tied> = Vec::new();
        let mut setup = || -> Result<Value, String> {
            for role in ["client", "server"] {
                held.extend(self.hold_settings(self.host(role), s)?);
            }
            held.extend(self.hold_netem(point, trial.seed)?);
            self.workload(s)
        };
        let result = setup();
        // Roll back, newest first, whatever happened; each host must say it restored.
        let mut problems = Vec::new();
        for h in held.into_iter().rev() {
            match h.finish(SLACK) {
                Ok(lines)
                    if lines
                        .iter()
                        .any(|l| mode_of(l).is_ok_and(|m| m == "rollback")) => {}
                Ok(lines) if lines.is_empty() => {} // netem: removed, nothing to say
                Ok(lines) => problems.push(format!("the rollback said: {}", lines.join(" "))),
                Err(e) if e.contains("was lost") => problems.push(format!(
                    "rolling back: {e} (tcptune there rolls back by itself when its session ends)"
                )),
                Err(e) => problems.push(format!("rolling back: {e}")),
            }
        }
        let doc = match result {
            Ok(doc) if problems.is_empty() => doc,
            Ok(_) => return Err(problems.join("; ")),
            Err(e) => {
                problems.insert(0, e);
                return Err(problems.join("; "));
            }
        };
        let (mut m, series) = measurement(&doc)?;
        let rel = format!("series/{}.jsonl", trial.id);
        let lines: String = series
            .iter()
            .filter_map(|x| serde_json::to_string(x).ok())
            .map(|l| l + "\n")
            .collect();
        std::fs::write(dir.join(&rel), lines).map_err(|e| e.to_string())?;
        m.series = Some(rel);
        Ok(m)
    }
}

impl Drop for HostRunner {
    fn drop(&mut self) {
        self.client.close();
        self.server.close();
        let _ = std::fs::remove_dir_all(crate::remote::control_dir());
    }
}

/// The measurement and the sender's time series from `tcptune test -J`'s document.
pub fn measurement(doc: &Value) -> Result<(Measurement, Vec<SeriesSample>), String> {
    let end = &doc["end"];
    let recv = &end["sum_received"];
    let mut m = Measurement {
        goodput_bps: recv["bits_per_second"]
            .as_f64()
            .ok_or("tcptune test reported no throughput")?,
        bytes: recv["bytes"].as_u64().unwrap_or(0),
        duration_s: recv["seconds"].as_f64().unwrap_or(0.0),
        retransmits: end["sum_sent"]["retransmits"].as_u64(),
        ..Default::default()
    };
    let ext = &doc["tcptune"];
    let diagnosis = &ext["diagnosis"];
    m.verdict = diagnosis["verdict"].as_str().map(str::to_string);
    m.limit = serde_json::from_value(diagnosis["limit"].clone()).ok();
    m.limit_share = diagnosis["streams"][0]["share"].as_f64();
    // The sending end's samples of its busiest stream.
    let conn: Vec<Sample> = ext["streams"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|st| st["sender"] == true)
        .filter_map(|st| serde_json::from_value::<Vec<Sample>>(st["samples"].clone()).ok())
        .max_by_key(|v| v.last().and_then(|s| s.info.bytes_acked).unwrap_or(0))
        .unwrap_or_default();
    let (Some(first), Some(last)) = (conn.first(), conn.last()) else {
        return Ok((m, Vec::new()));
    };
    let mut rtts: Vec<f64> = conn
        .iter()
        .filter_map(|s| s.info.srtt_us())
        .map(|r| f64::from(r) / 1e6)
        .collect();
    rtts.sort_by(f64::total_cmp);
    m.rtt_min_s = last.info.min_rtt().map(|r| f64::from(r) / 1e6);
    m.rtt_mean_s = (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64);
    m.rtt_p99_s = rtts
        .get(((rtts.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
        .copied();
    m.retransmits = m.retransmits.or(last.info.total_retrans.map(u64::from));
    m.sndbuf_peak_bytes = conn
        .iter()
        .filter_map(|s| s.skmem.map(|k| u64::from(k.sndbuf)))
        .max();
    m.limits = interval(first, last).shares.map(|s| LimitShares {
        rwnd: s.rwnd,
        sndbuf: s.sndbuf,
        cwnd: s.network,
        app: s.application.unwrap_or(0.0),
    });
    let t0 = first.at_s.secs();
    let mut series = Vec::new();
    let mut base = first;
    for b in &conn[1..] {
        // Rates over at least 25 ms, as the lab's series (shorter ones are sampling noise).
        if b.at_s.secs() - base.at_s.secs() < 0.025 {
            continue;
        }
        series.push(SeriesSample {
            t_s: b.at_s.secs() - t0,
            goodput_bps: interval(base, b).goodput_bps.map(|r| r.bps()),
            snd_cwnd_bytes: b.info.cwnd_bytes(),
            rwnd_bytes: b.info.snd_wnd.map(u64::from),
            rtt_s: b.info.srtt_us().map(|r| f64::from(r) / 1e6),
            retransmits: b.info.total_retrans.map(u64::from),
            ..Default::default()
        });
        base = b;
    }
    Ok((m, series))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(kv: &[(&str, &str)]) -> crate::settings::Settings {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_test_command_carries_the_workload() {
        let s = settings(&[
            ("workload.direction", "download"),
            ("workload.parallel", "4"),
            ("workload.window", "64KiB"),
            ("workload.cc", "reno"),
        ]);
        let a = test_argv("/bin/tcptune", "198.18.9.2", 3, &s).unwrap();
        assert_eq!(
            a,
            [
                "/bin/tcptune",
                "test",
                "198.18.9.2",
                "-p",
                "5201",
                "-t",
                "3",
                "-J",
                "-R",
                "-P",
                "4",
                "-C",
                "reno",
                "-w",
                "65536"
            ]
        );
        let a = test_argv("tcptune", "h", 2, &settings(&[("workload.window", "none")])).unwrap();
        assert!(!a.contains(&"-w".to_string()) && !a.contains(&"-R".to_string()));
    }

    #[test]
    fn netem_goes_on_the_senders_device_and_comes_off_when_the_session_ends() {
        let s = settings(&[("link.delay", "10ms"), ("link.down.loss", "1%")]);
        let a = netem_argv(&s, 7, "server", "eth0").unwrap();
        let script = &a[2];
        assert!(
            script.starts_with("tc qdisc replace dev eth0 root netem"),
            "{script}"
        );
        assert!(
            script.contains("delay 10000us") || script.contains("delay"),
            "{script}"
        );
        assert!(
            script.contains("loss random"),
            "the download direction's loss: {script}"
        );
        assert!(
            script.ends_with("cat >/dev/null; tc qdisc del dev eth0 root"),
            "{script}"
        );
        let up = netem_argv(&s, 7, "client", "eth0").unwrap();
        assert!(!up[2].contains("loss"), "{}", up[2]);
        let e = netem_argv(&s, 7, "client", "").unwrap_err();
        assert!(e.contains("cannot tell the client's device"), "{e}");
    }

    #[test]
    fn a_tune_line_gives_its_mode() {
        let l =
            r#"{"tcptune":"0","schema_version":1,"command":"tune","result":{"mode":"rollback"}}"#;
        assert_eq!(mode_of(l).unwrap(), "rollback");
        assert_eq!(mode_of("error: no").unwrap_err(), "error: no");
    }
}
