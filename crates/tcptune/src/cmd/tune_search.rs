//! `tcptune tune --search`: the edge of the closed-loop search (`tcptune_search`). It reads the
//! settings, takes tune's snapshot of every value the search may write, runs each test the
//! search asks for (the one test client, inside `--netns` when given), writes the values it
//! asks for, and appends every change with its evidence to the audit trail. A signal, a failed
//! write or a failed test (the connection lost, the server gone) restores the snapshot exactly.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use tcptune_host::audit::Action as HostAction;
use tcptune_host::tune::{self, HostIo, LiveHost, Plan, PlannedChange};
use tcptune_iperf3::params::{Direction, Params};
use tcptune_iperf3::session::SessionError;
use tcptune_perftest::client::{self, ClientConfig};
use tcptune_perftest::TestError;
use tcptune_search::duration::TestShape;
use tcptune_search::hypothesis::{writable_keys, KEYS};
use tcptune_search::{
    Action, Config, DryRun, Event, Observation, Role, Search, SearchOutput, Settings,
};

use crate::cli::{AuditArgs, SearchArgs};
use crate::outcome::Outcome;
use crate::output::emit;

/// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address; the port defaults to iperf3's.
fn host_port(to: &str) -> anyhow::Result<(String, u16)> {
    let bad = || {
        anyhow!("--to {to}: give HOST or HOST:PORT (an IPv6 address with a port as [ADDR]:PORT)")
    };
    if let Some(rest) = to.strip_prefix('[') {
        let (host, tail) = rest.split_once(']').ok_or_else(bad)?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad())?,
            None if tail.is_empty() => 5201,
            None => return Err(bad()),
        };
        return Ok((host.to_string(), port));
    }
    match to.split_once(':') {
        Some((h, p)) if !p.contains(':') => Ok((h.to_string(), p.parse().map_err(|_| bad())?)),
        _ if to.is_empty() => Err(bad()),
        _ => Ok((to.to_string(), 5201)),
    }
}

/// A test the server refused (busy) is tried again this many times, this long apart.
const BUSY_TRIES: u32 = 10;
const BUSY_WAIT: Duration = Duration::from_millis(500);

/// Runs one test against the server, inside the namespace when one is named.
struct Tester {
    host: String,
    port: u16,
    netns: Option<String>,
    params: Params,
    /// The path's rate when told (`--rate`): each test's diagnosis then calls a flow at the
    /// path's capacity so, and the search tries no congestion control on a full path.
    path_rate: Option<tcptune_model::Rate>,
    interrupted: &'static AtomicBool,
}

impl Tester {
    /// One test of `shape`'s length (seconds measured, seconds omitted as iperf3 -O).
    fn run(&self, shape: &TestShape) -> anyhow::Result<Observation> {
        let params = Params {
            time_s: shape.time_s,
            omit_s: shape.omit_s,
            ..self.params.clone()
        };
        let test = || {
            let cfg = ClientConfig {
                host: self.host.clone(),
                port: self.port,
                params: params.clone(),
                interval: None,
                sample_every: Duration::from_millis(50),
                path_rate: self.path_rate,
                connect_timeout: Duration::from_secs(5),
                interrupt: Some(self.interrupted),
                // Read in the thread that runs the test: inside the namespace when one is named.
                host_settings: tcptune_diagnose::advice::HostSettings::from_sysctls(
                    tcptune_host::read::read_sysctl,
                ),
                bind: None,
                cport: None,
                family: None,
                data_extra: Default::default(),
                control_extra: Default::default(),
                dont_fragment: false,
                rcv_timeout: None,
                diskfile: None,
                // The guardrail reads the load connections' srtt; no probes lengthen a trial.
                latency: false,
            };
            // The server may still be ending the last test: its client has what it needs and
            // the search moves on, while the control connection's last bytes cross the path
            // (over 20 Mbit/s × 60 ms at 1% loss a refusal came between two tests). iperf3's
            // server refuses a second test as ours does; the search tries again a while.
            let mut refused = 0;
            loop {
                match client::run(&cfg, &mut |_, _| {}) {
                    Err(TestError::Session(SessionError::AccessDenied))
                        if refused < BUSY_TRIES && !self.interrupted.load(Ordering::SeqCst) =>
                    {
                        refused += 1;
                        std::thread::sleep(BUSY_WAIT);
                    }
                    r => return r.map(|out| out.tcptune.diagnosis),
                }
            }
        };
        let where_ = format!("the test against {}:{}", self.host, self.port);
        let diagnosis = match &self.netns {
            Some(n) => tcptune_kernel::sys::in_netns(n, test)
                .with_context(|| format!("cannot enter namespace {n}"))?,
            None => test(),
        }
        .with_context(|| format!("{where_} failed"))?;
        Ok(Observation::from_diagnosis(&diagnosis))
    }
}

/// The audit trail: one JSON object a line, appended and flushed as each change is made, so a
/// search killed midway still leaves what it did.
struct Trail {
    file: std::fs::File,
}

impl Trail {
    fn open(path: &Path) -> anyhow::Result<Trail> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the directory of {}", path.display()))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open the audit trail {}", path.display()))?;
        Ok(Trail { file })
    }

    fn line(&mut self, event: &str, data: serde_json::Value) -> anyhow::Result<()> {
        let unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let line = serde_json::json!({ "unix_s": unix_s, "event": event, "data": data });
        writeln!(self.file, "{line}")
            .and_then(|()| self.file.sync_data())
            .context("cannot write the audit trail")
    }
}

fn read_settings(io: &mut LiveHost) -> anyhow::Result<Settings> {
    let mut s = Settings::new();
    for key in KEYS {
        match io.read_sysctl(key) {
            // The search compares and prints values; the snapshot keeps the raw ones.
            Ok(v) => {
                s.insert(key.to_string(), tcptune_os::sysctl::normalize(&v));
            }
            Err(e) => {
                bail!("cannot read {key} ({e}); the search needs every setting it may change")
            }
        }
    }
    Ok(s)
}

/// A plan that writes every key the search may change with its own value: applying it takes
/// tune's snapshot of all of them (on disk, under its lock) before the search writes anything.
fn snapshot_plan(before: &Settings, netns: Option<&str>) -> Plan {
    let changes = writable_keys()
        .filter_map(|k| before.get(k).map(|v| (k, v)))
        .map(|(k, v)| PlannedChange {
            action: HostAction::Sysctl {
                key: k.to_string(),
                value: v.clone(),
                global: false,
            },
            current: v.clone(),
            why: "saved before `tune --search` changes it".into(),
        })
        .collect();
    Plan {
        netns: netns.map(str::to_string),
        changes,
        host_only: vec![],
        dropin: String::new(),
        ip_commands: vec![],
    }
}

fn config(args: &AuditArgs, s: &SearchArgs, role: Role) -> Config {
    let mut cfg = Config::new(role, f64::from(s.test_time));
    cfg.flows = s.parallel.max(1);
    cfg.path_rate_bps = args.path.rate.map(|r| r.bps());
    if let Some(v) = tcptune_kernel::sys::kernel_version() {
        cfg.kernel = v;
    }
    if let Some(m) = args.memory {
        cfg.max_memory_bytes = m.get();
    }
    cfg.max_rtt_growth = s.max_rtt_growth.get();
    cfg.max_tests = s.max_tests;
    cfg.max_time_s = s.max_time.secs();
    cfg.aa_trial = s.aa_trial;
    cfg
}

/// Runs the search to its end; any error leaves the host for the caller to restore.
fn drive(
    search: &mut Search,
    io: &mut LiveHost,
    tester: &Tester,
    trail: &mut Trail,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut event = Event::Start;
    loop {
        if tester.interrupted.load(Ordering::Relaxed) {
            bail!("interrupted (SIGINT or SIGTERM)");
        }
        let now = start.elapsed().as_secs_f64();
        match search.step(now, event) {
            Action::Write { values } => {
                for (k, v) in &values {
                    io.write_sysctl(k, v)
                        .with_context(|| format!("cannot write {k} = {v}"))?;
                }
                trail.line("write", serde_json::json!({ "values": values }))?;
                // Progress on stderr: stdout carries the report (or its JSON) alone.
                for (k, v) in &values {
                    eprintln!("tune --search: wrote {k} = {v}");
                }
                event = Event::Written;
            }
            Action::RunTest { arm } => {
                let obs = tester.run(search.test_shape())?;
                if tester.interrupted.load(Ordering::Relaxed) {
                    bail!("interrupted (SIGINT or SIGTERM) during a test");
                }
                trail.line(
                    "test",
                    serde_json::json!({ "arm": format!("{arm:?}"), "result": &obs }),
                )?;
                eprintln!(
                    "tune --search: test {arm:?}: {:.1} Mbit/s, {}",
                    obs.rate_bps / 1e6,
                    obs.verdict
                );
                event = Event::Test(Box::new(obs));
            }
            Action::Done => return Ok(()),
        }
    }
}

fn default_trail(snapshot_path: &Path, netns: Option<&str>) -> PathBuf {
    let name = match netns {
        Some(n) => format!("tune-search-trail-netns-{n}.jsonl"),
        None => "tune-search-trail.jsonl".into(),
    };
    snapshot_path.parent().unwrap_or(Path::new(".")).join(name)
}

pub fn run(
    args: &AuditArgs,
    s: &SearchArgs,
    snapshot: Option<&Path>,
    json: bool,
) -> anyhow::Result<Outcome> {
    if args.state.is_some() || args.profile.is_some() || args.fit {
        bail!("--search measures this host's path; leave out --state, --profile and --fit");
    }
    anyhow::ensure!(
        (1..=60).contains(&s.test_time),
        "--test-time {} is outside 1..60 seconds; give --test-time 2",
        s.test_time
    );
    let to = args.to.as_deref().unwrap_or_default();
    let (host, port) = host_port(to)?;
    let netns = args.netns.clone();
    let mut io = LiveHost {
        netns: netns.clone(),
    };
    let before = read_settings(&mut io)?;
    let role = if s.reverse {
        Role::Receiver
    } else {
        Role::Sender
    };
    let tester = Tester {
        host: host.clone(),
        port,
        netns: netns.clone(),
        params: Params {
            direction: if s.reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
            time_s: s.test_time,
            parallel: s.parallel.max(1),
            ..Params::default()
        },
        path_rate: args.path.rate,
        interrupted: tcptune_os::signal::catch(&[
            tcptune_os::process::Signal::Int,
            tcptune_os::process::Signal::Term,
        ]),
    };
    let cfg = config(args, s, role);
    let mut out = SearchOutput {
        mode: "search".into(),
        server: format!("{host}:{port}"),
        role,
        netns: netns.clone(),
        settings_before: before.clone(),
        dry_run: None,
        report: None,
        snapshot_path: None,
        trail_path: None,
    };
    if s.dry_run {
        let baseline = tester.run(&TestShape::asked(s.test_time))?;
        let trial = format!(
            "A B A B … ({}–{} pairs of {} s tests, {} for a trial still promising at {}), judged at 95% by Yuen's trimmed t and the rank-sum test (the loaded RTT held within +{:.0}% of A's the same way, and on the means before a keep), within a budget of {} tests and {:.0} s; then {}'s maximum shrunk while the result holds within {:.1}% of the best",
            cfg.min_pairs,
            cfg.max_pairs,
            s.test_time,
            cfg.max_pairs + cfg.extra_pairs,
            cfg.max_pairs,
            cfg.max_rtt_growth * 100.0,
            cfg.max_tests,
            cfg.max_time_s,
            match role {
                Role::Receiver => tcptune_search::hypothesis::RMEM,
                Role::Sender => tcptune_search::hypothesis::WMEM,
            },
            cfg.shrink_tolerance * 100.0
        );
        let (hypotheses, not_tried) = Search::new(cfg, before).plan(&baseline);
        out.mode = "dry-run".into();
        out.dry_run = Some(DryRun {
            baseline,
            hypotheses,
            not_tried,
            trial,
        });
        emit("tune-search", &out, json)?;
        return Ok(Outcome::Ok);
    }
    let snapshot_path = snapshot
        .map(Path::to_path_buf)
        .unwrap_or_else(|| super::audit::default_snapshot(netns.as_deref()));
    let trail_path = s
        .trail
        .clone()
        .unwrap_or_else(|| default_trail(&snapshot_path, netns.as_deref()));
    let mut trail = Trail::open(&trail_path)?;
    tune::apply(
        &snapshot_plan(&before, netns.as_deref()),
        &mut io,
        &snapshot_path,
    )?;
    trail.line(
        "start",
        serde_json::json!({ "server": out.server, "role": role, "netns": netns,
            "snapshot": snapshot_path.display().to_string(), "settings": before }),
    )?;
    let mut search = Search::new(cfg, before);
    if let Err(e) = drive(&mut search, &mut io, &tester, &mut trail) {
        let restored = tune::rollback(&mut io, &snapshot_path);
        let _ = trail.line(
            "rollback",
            serde_json::json!({ "why": format!("{e:#}"), "restored": restored.is_ok() }),
        );
        return Err(match restored {
            Ok(_) => e.context(format!(
                "the search stopped; every value it touched was restored from {}",
                snapshot_path.display()
            )),
            Err(r) => {
                e.context(format!(
                "the search stopped and restoring failed ({r:#}); run `tcptune tune --rollback{}`",
                netns.as_deref().map(|n| format!(" --netns {n}")).unwrap_or_default()
            ))
            }
        });
    }
    let report = search.report();
    if report.changed.is_empty() {
        // Nothing kept: every value is already back; the rollback checks it and drops the file.
        tune::rollback(&mut io, &snapshot_path)?;
    } else {
        out.snapshot_path = Some(snapshot_path.display().to_string());
    }
    trail.line("done", serde_json::to_value(&report)?)?;
    out.trail_path = Some(trail_path.display().to_string());
    out.report = Some(report);
    emit("tune-search", &out, json)?;
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::host_port;

    #[test]
    fn to_takes_a_host_with_or_without_a_port() {
        assert_eq!(
            host_port("198.18.0.2").unwrap(),
            ("198.18.0.2".into(), 5201)
        );
        assert_eq!(host_port("h:5202").unwrap(), ("h".into(), 5202));
        assert_eq!(host_port("[2001:2::1]:7").unwrap(), ("2001:2::1".into(), 7));
        assert_eq!(host_port("2001:2::1").unwrap(), ("2001:2::1".into(), 5201));
        assert!(host_port("h:x").is_err());
        assert!(host_port("").is_err());
    }
}
