//! The diagnosis accuracy benchmark: lab paths whose limit is known by construction (a small
//! receive or send buffer, random loss under CUBIC, a `-b` cap, a clean path at its rate, a
//! CPU-bound loopback pair), each run with `tcptune test` against `tcptune serve` and against a
//! stock `iperf3 -s`, forward and reverse, single and parallel streams, with jitter and
//! reordering. For every case it prints the expected class, what the test found, what `tcptune
//! conns` found on the sending socket during the test, and what an experiment trial of the same
//! path labelled it; then the count right and the harmful recommendations (a lowered maximum, a
//! setting already in effect, two values for one knob), checked against the namespaces' real
//! sysctls. Run it with `bench/diagnose` (as root: it makes labs, removed at the end).
//!
//! Usage: bench_diagnose TCPTUNE_BIN [REPS] [CASE-SUBSTRING]

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[derive(Clone, Copy, PartialEq)]
enum Server {
    Ours,
    Iperf3,
}

struct Case {
    name: &'static str,
    /// The class the path's construction makes the limit.
    expect: &'static str,
    /// `lab up` options (link and hosts).
    lab: &'static [&'static str],
    server: Server,
    /// `tcptune test` options besides the host, time and path rate.
    test: &'static [&'static str],
    /// The test runs over the namespace's loopback (no lab link): a CPU-bound pair.
    loopback: bool,
    /// The experiment workload can express the case (no `-b`, no loopback).
    experiment: bool,
}

const RATE: &str = "100mbit";
const SECS: &str = "5";

fn cases() -> Vec<Case> {
    let path: &[&str] = &["--rate", RATE, "--rtt", "20ms"];
    let mut v = Vec::new();
    let mut add = |name, expect, extra: &'static [&'static str], server, test, experiment| {
        let mut lab: Vec<&'static str> = path.to_vec();
        lab.extend_from_slice(extra);
        v.push(Case {
            name,
            expect,
            lab: Box::leak(lab.into_boxed_slice()),
            server,
            test,
            loopback: false,
            experiment,
        });
    };
    use Server::*;
    const RWND_SERVER: &[&str] = &["--host", "server.sysctl.net.ipv4.tcp_rmem=4096 65536 65536"];
    const RWND_CLIENT: &[&str] = &["--host", "client.sysctl.net.ipv4.tcp_rmem=4096 65536 65536"];
    const SND_CLIENT: &[&str] = &["--host", "client.sysctl.net.ipv4.tcp_wmem=4096 16384 16384"];
    const SND_SERVER: &[&str] = &["--host", "server.sysctl.net.ipv4.tcp_wmem=4096 16384 16384"];
    const LOSS_C: &[&str] = &["--loss", "1%", "--host", "client.cc=cubic"];
    const LOSS_S: &[&str] = &["--loss", "1%", "--host", "server.cc=cubic"];
    add(
        "clean, forward, ours",
        "path_capacity",
        &[],
        Ours,
        &[],
        true,
    );
    add(
        "clean, reverse, ours",
        "path_capacity",
        &[],
        Ours,
        &["-R"],
        true,
    );
    add(
        "clean, forward, iperf3",
        "path_capacity",
        &[],
        Iperf3,
        &[],
        false,
    );
    add(
        "clean, reverse, iperf3",
        "path_capacity",
        &[],
        Iperf3,
        &["-R"],
        false,
    );
    add(
        "clean, -P 4, ours",
        "path_capacity",
        &[],
        Ours,
        &["-P", "4"],
        true,
    );
    add(
        "clean, jitter 2 ms in order",
        "path_capacity",
        &["--jitter", "2ms", "--jitter-fifo"],
        Ours,
        &[],
        true,
    );
    // Reordering costs spurious recoveries: the sender backs off for packets that came late
    // (the verdict says so from reord_seen and D-SACKs).
    add(
        "reordering 1%",
        "loss",
        &["--reorder", "1%"],
        Ours,
        &[],
        true,
    );
    add(
        "rwnd 64K, forward, ours",
        "receiver_window",
        RWND_SERVER,
        Ours,
        &[],
        true,
    );
    add(
        "rwnd 64K, forward, iperf3",
        "receiver_window",
        RWND_SERVER,
        Iperf3,
        &[],
        false,
    );
    add(
        "rwnd 64K, reverse, ours",
        "receiver_window",
        RWND_CLIENT,
        Ours,
        &["-R"],
        true,
    );
    add(
        "rwnd 64K, reverse, iperf3",
        "receiver_window",
        RWND_CLIENT,
        Iperf3,
        &["-R"],
        false,
    );
    add(
        "rwnd 64K, -P 4, ours",
        "receiver_window",
        RWND_SERVER,
        Ours,
        &["-P", "4"],
        true,
    );
    add(
        "rwnd 64K, jitter 2 ms",
        "receiver_window",
        &[
            "--jitter",
            "2ms",
            "--jitter-fifo",
            "--host",
            "server.sysctl.net.ipv4.tcp_rmem=4096 65536 65536",
        ],
        Ours,
        &[],
        true,
    );
    add(
        "sndbuf 16K, forward, ours",
        "send_buffer",
        SND_CLIENT,
        Ours,
        &[],
        true,
    );
    add(
        "sndbuf 16K, reverse, ours",
        "send_buffer",
        SND_SERVER,
        Ours,
        &["-R"],
        true,
    );
    add(
        "loss 1% cubic, forward, ours",
        "loss",
        LOSS_C,
        Ours,
        &[],
        true,
    );
    add(
        "loss 1% cubic, reverse, ours",
        "loss",
        LOSS_S,
        Ours,
        &["-R"],
        true,
    );
    add(
        "loss 1% cubic, forward, iperf3",
        "loss",
        LOSS_C,
        Iperf3,
        &[],
        false,
    );
    add(
        "-b 20mbit, forward, ours",
        "application",
        &[],
        Ours,
        &["-b", "20mbit"],
        false,
    );
    add(
        "-b 20mbit, reverse, ours",
        "application",
        &[],
        Ours,
        &["-R", "-b", "20mbit"],
        false,
    );
    add(
        "-b 20mbit, reverse, iperf3",
        "application",
        &[],
        Iperf3,
        &["-R", "-b", "20mbit"],
        false,
    );
    v.push(Case {
        name: "dsl 10 Mbit/s x 40 ms",
        expect: "path_capacity",
        lab: &["--rate", "10mbit", "--rtt", "40ms"],
        server: Server::Ours,
        test: &[],
        loopback: false,
        experiment: true,
    });
    for (name, test) in [
        ("loopback, CPU-bound, forward", &[][..]),
        ("loopback, CPU-bound, reverse", &["-R"][..]),
    ] {
        v.push(Case {
            name,
            expect: "cpu",
            lab: &[],
            server: Server::Ours,
            test,
            loopback: true,
            experiment: false,
        });
    }
    v
}

/// A lab, brought down on drop (also when a case fails midway).
struct Lab {
    bin: String,
    name: String,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(&self.bin)
            .args(["lab", "down", "--name", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A child killed on drop.
struct Kid(Child);
impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{:?} failed: {}",
            cmd.get_args().collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ns(lab: &str, host: &str) -> String {
    format!("tcptune-{lab}-{host}")
}

fn sysctl(netns: &str, key: &str) -> Option<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", netns, "sysctl", "-n", key])
        .output()
        .ok()?;
    Some(
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Waits until something listens on `port` in `netns`.
fn wait_listening(netns: &str, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                netns,
                "ss",
                "-Htln",
                &format!("sport = :{port}"),
            ])
            .output()
            .map_err(|e| e.to_string())?;
        if !out.stdout.is_empty() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "nothing listened on port {port} in {netns} within 10 s"
    ))
}

fn diagnosis(v: &Value) -> &Value {
    let r = if v.get("result").is_some() {
        &v["result"]
    } else {
        v
    };
    &r["tcptune"]["diagnosis"]
}

/// The limit `tcptune conns` gives the busiest connection on `port` in `netns` over 2 s, taken
/// once the data connection carries data.
fn conns_limit(bin: &str, netns: &str, port: u16, rate: Option<&str>) -> Result<String, String> {
    let port_s = port.to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out =
            run(Command::new(bin).args(["conns", "--netns", netns, "--json", "port", &port_s]))?;
        let v: Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        let moving = v["result"]["connections"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["snapshot"]["delivery_rate_bps"].as_f64().unwrap_or(0.0) > 1e6);
        if moving {
            break;
        }
        if Instant::now() > deadline {
            return Err("no data connection moved within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut cmd = Command::new(bin);
    cmd.args([
        "conns", "--netns", netns, "--over", "2s", "--json", "port", &port_s,
    ]);
    if let Some(r) = rate {
        cmd.args(["--rate", r]);
    }
    let out = run(&mut cmd)?;
    let v: Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
    let rows = v["result"]["connections"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let rate = |c: &Value| {
        let i = &c["interval"];
        i["goodput_bps"]
            .as_f64()
            .unwrap_or(0.0)
            .max(i["receive_rate_bps"].as_f64().unwrap_or(0.0))
    };
    // Sending sockets only (a -P run has several; take the busiest one).
    rows.iter()
        .filter(|c| c["interval"]["goodput_bps"].as_f64().unwrap_or(0.0) > 0.0)
        .max_by(|a, b| rate(a).total_cmp(&rate(b)))
        .and_then(|c| c["verdict"]["limit"].as_str().map(str::to_string))
        .ok_or_else(|| "no sending connection".into())
}

/// What the test found, and its harmful recommendations.
struct Found {
    limit: String,
    verdict: String,
    harmful: Vec<String>,
    conns: Result<String, String>,
    trial: Option<Result<String, String>>,
}

fn harmful(d: &Value, lab: &str, reverse: bool) -> Vec<String> {
    let mut bad = Vec::new();
    let recs = d["recommendations"].as_array().cloned().unwrap_or_default();
    for (i, r) in recs.iter().enumerate() {
        let on = r["on"].as_str().unwrap_or("");
        let knob = r["knob"].as_str().unwrap_or("");
        if recs[..i]
            .iter()
            .any(|x| x["on"] == r["on"] && x["knob"] == r["knob"])
        {
            bad.push(format!("two values for {knob} on {on}"));
        }
        // Check against the namespace it names, where the value is a sysctl.
        let host = match (on, reverse) {
            ("the sender", false) | ("the receiver", true) => "client",
            ("the receiver", false) | ("the sender", true) => "server",
            _ => continue,
        };
        let key = match knob {
            "tcp_rmem_max" => "net.ipv4.tcp_rmem",
            "tcp_wmem_max" => "net.ipv4.tcp_wmem",
            "rmem_max" => "net.core.rmem_max",
            "wmem_max" => "net.core.wmem_max",
            "congestion_control" => "net.ipv4.tcp_congestion_control",
            _ => continue,
        };
        let Some(actual) = sysctl(&ns(lab, host), key) else {
            continue;
        };
        let Some(proposed) = r["proposed"].as_str() else {
            continue;
        };
        if knob == "congestion_control" {
            if actual == proposed {
                bad.push(format!("{key} is already {actual} on {host}"));
            }
            continue;
        }
        let now: u64 = actual
            .split_whitespace()
            .last()
            .and_then(|x| x.parse().ok())
            .unwrap_or(0);
        let want: u64 = proposed.parse().unwrap_or(0);
        if want <= now {
            bad.push(format!(
                "{key} on {host}: proposes {want}, the namespace has {now} (lower or in effect)"
            ));
        }
    }
    bad
}

fn experiment_trial(bin: &str, case: &Case, tag: &str) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("tcptune-bench-diagnose-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut link = String::new();
    let mut client = String::new();
    let mut server = String::new();
    let mut it = case.lab.iter();
    while let Some(k) = it.next() {
        match *k {
            "--rate" => link += &format!("rate = \"{}\"\n", it.next().unwrap()),
            "--rtt" => link += &format!("rtt = \"{}\"\n", it.next().unwrap()),
            "--loss" => link += &format!("loss = \"{}\"\n", it.next().unwrap()),
            "--jitter" => link += &format!("jitter = \"{}\"\n", it.next().unwrap()),
            "--reorder" => link += &format!("reorder = \"{}\"\n", it.next().unwrap()),
            "--jitter-fifo" => link += "jitter_order = \"fifo\"\n",
            "--host" => {
                let kv = it.next().unwrap();
                let (host, rest) = kv.split_once('.').unwrap();
                let (key, val) = rest.split_once('=').unwrap();
                let line = match key.strip_prefix("sysctl.") {
                    Some(s) => format!("sysctl.\"{s}\" = \"{val}\"\n"),
                    None => format!("{key} = \"{val}\"\n"),
                };
                if host == "client" {
                    client += &line;
                } else {
                    server += &line;
                }
            }
            other => return Err(format!("the spec writer does not know {other}")),
        }
    }
    let reverse = case.test.contains(&"-R");
    let parallel = case
        .test
        .iter()
        .position(|a| *a == "-P")
        .map(|i| format!("parallel = \"{}\"\n", case.test[i + 1]))
        .unwrap_or_default();
    let spec = format!(
        "name = \"diag-{tag}\"\nseed = 1\nrepetitions = 1\nwarmup = false\n\n[link]\n{link}\n\
         [client]\n{client}\n[server]\n{server}\n[workload]\nkind = \"iperf3\"\n\
         direction = \"{}\"\nduration = \"{SECS}s\"\n{parallel}",
        if reverse { "download" } else { "upload" }
    );
    let spec_path = dir.join("spec.toml");
    std::fs::write(&spec_path, spec).map_err(|e| e.to_string())?;
    let out = dir.join("out");
    run(Command::new(bin)
        .args(["lab", "run", "--name", &format!("dq{tag}"), "--out"])
        .arg(&out)
        .arg(&spec_path))?;
    let trials = std::fs::read_to_string(out.join("trials.jsonl")).map_err(|e| e.to_string())?;
    let last: Value = trials
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or("no trial recorded")?;
    let r = last["result"]["limit"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("trial failed: {}", last["error"]));
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn run_case(bin: &str, case: &Case, tag: &str) -> Result<Found, String> {
    let name = format!("dx{tag}");
    let mut up = Command::new(bin);
    up.args(["lab", "up", "--name", &name]).args(case.lab);
    if case.loopback {
        up.args(["--rate", RATE]);
    }
    run(&mut up)?;
    let _lab = Lab {
        bin: bin.to_string(),
        name: name.clone(),
    };
    let port = 5201u16;
    let (server_host, target) = if case.loopback {
        ("client", "127.0.0.1")
    } else {
        ("server", "server")
    };
    let server_cmd: Vec<String> = match case.server {
        Server::Ours => vec![bin.into(), "serve".into(), "-1".into()],
        Server::Iperf3 => vec!["iperf3".into(), "-s".into(), "-1".into()],
    };
    let _server = Kid(Command::new(bin)
        .args(["lab", "exec", &name, server_host, "--"])
        .args(&server_cmd)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?);
    wait_listening(&ns(&name, server_host), port)?;
    let rate = case
        .lab
        .iter()
        .position(|a| *a == "--rate")
        .map(|i| case.lab[i + 1])
        .unwrap_or(RATE);
    let mut test = Command::new(bin);
    test.args([
        "lab", "exec", &name, "client", "--", bin, "test", target, "-t", SECS, "--json",
    ]);
    if !case.loopback {
        test.args(["--path-rate", rate]);
    }
    test.args(case.test)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Kid(test.spawn().map_err(|e| e.to_string())?);
    let reverse = case.test.contains(&"-R");
    let sender = if reverse && !case.loopback {
        "server"
    } else {
        "client"
    };
    let conns = conns_limit(
        bin,
        &ns(&name, sender),
        port,
        (!case.loopback).then_some(rate),
    );
    let mut stdout = String::new();
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .map_err(|e| e.to_string())?;
    let status = child.0.wait().map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_str(&stdout).map_err(|e| {
        let mut err = String::new();
        if let Some(mut s) = child.0.stderr.take() {
            let _ = s.read_to_string(&mut err);
        }
        format!("test printed no JSON ({e}; exit {status}): {}", err.trim())
    })?;
    let d = diagnosis(&v);
    let found = Found {
        limit: d["limit"].as_str().unwrap_or("?").to_string(),
        verdict: d["verdict"].as_str().unwrap_or("").to_string(),
        harmful: harmful(d, &name, reverse),
        conns,
        trial: None,
    };
    Ok(found)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bin = args.get(1).cloned().unwrap_or_else(|| "tcptune".into());
    let reps: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(1);
    let only = args.get(3).cloned().unwrap_or_default();
    let cases: Vec<Case> = cases()
        .into_iter()
        .filter(|c| c.name.contains(&only))
        .collect();
    let pid = std::process::id() % 1000;
    let (mut right, mut total, mut harmful_n) = (0, 0, 0);
    let (mut conns_agree, mut conns_n, mut trial_agree, mut trial_n) = (0, 0, 0, 0);
    // Cases where a tool failed (the test, conns or the experiment trial): no accuracy is
    // printed then, as a failed run is no evidence either way.
    let mut failed = 0;
    println!(
        "{:<34} {:<16} {:<18} {:<18} {:<18}",
        "case", "expected", "test", "conns (sender)", "experiment trial"
    );
    for rep in 0..reps {
        for (i, case) in cases.iter().enumerate() {
            let tag = format!("{pid}{rep}{i:02}");
            total += 1;
            let mut f = match run_case(&bin, case, &tag) {
                Ok(f) => f,
                Err(e) => {
                    println!("{:<34} {:<16} FAILED: {e}", case.name, case.expect);
                    failed += 1;
                    continue;
                }
            };
            if case.experiment {
                f.trial = Some(experiment_trial(&bin, case, &tag));
            }
            let ok = f.limit == case.expect;
            right += ok as usize;
            harmful_n += f.harmful.len();
            let show = |r: &Result<String, String>| match r {
                Ok(l) => l.clone(),
                Err(e) => format!("error: {e}"),
            };
            failed += (f.conns.is_err() || matches!(f.trial, Some(Err(_)))) as usize;
            if let Ok(c) = &f.conns {
                conns_n += 1;
                conns_agree += (c == &f.limit) as usize;
            }
            if let Some(Ok(t)) = &f.trial {
                trial_n += 1;
                trial_agree += (t == &f.limit) as usize;
            }
            println!(
                "{:<34} {:<16} {:<18} {:<18} {:<18} {}",
                case.name,
                case.expect,
                format!("{}{}", f.limit, if ok { "" } else { " ✗" }),
                show(&f.conns),
                f.trial.as_ref().map(show).unwrap_or_else(|| "n/a".into()),
                if f.harmful.is_empty() {
                    String::new()
                } else {
                    format!("HARMFUL: {}", f.harmful.join("; "))
                }
            );
            if !ok {
                println!("    verdict: {}", f.verdict);
            }
        }
    }
    if failed > 0 {
        eprintln!(
            "bench/diagnose: a tool failed in {failed} of {total} cases (above); no accuracy is printed"
        );
        std::process::exit(1);
    }
    println!(
        "right: {right} of {total} ({:.0}%, goal >= 95%); harmful recommendations: {harmful_n} \
         (goal 0); conns agrees with the test: {conns_agree} of {conns_n}; experiment trial \
         agrees: {trial_agree} of {trial_n}",
        100.0 * right as f64 / total.max(1) as f64
    );
}
