//! The diagnosis accuracy benchmark: paths whose limit is known by construction (cases.rs: a
//! small receive or send buffer, random loss under CUBIC, a `-b` cap, a clean path at its rate,
//! reordering without loss, loopback pairs held by a CPU, with and without a busy neighbour,
//! `-C cubic` under a bbr default), each run with `tcptune test` against `tcptune serve` or a
//! stock `iperf3 -s`, forward, reverse and both ways, single and parallel streams, with and
//! without `--path-rate`. For every case it prints the expected class, what the test found, what
//! `tcptune conns` found on the sending socket during the test, and what an experiment trial of
//! the same path labelled it; then, for the cases the rules were tuned on and apart for the
//! cases added since, the count right, the harmful recommendations (checks.rs: every
//! recommendation against the namespaces' real sysctls, the flow's own congestion control and
//! the test's options; a failed read fails the case) and the contradictions (the engine's
//! invariants on every stream's diagnosis). Run it with `bench/diagnose` (as root: it makes
//! labs, removed at the end).
//!
//! Usage: bench_diagnose TCPTUNE_BIN [REPS] [CASE-SUBSTRING]

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tcptune_diagnose::throughput::TestDiagnosis;

mod cases;
mod checks;

use cases::{Case, Server, RATE, SECS};

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

/// What the test found, and its harmful recommendations and contradictions.
struct Found {
    /// The class of the test's direction, "forward/reverse" where a --bidir test's two differ.
    limit: String,
    verdict: String,
    harmful: Vec<String>,
    contradictions: Vec<String>,
    /// The recommendation the case requires, when missing.
    missing: Option<String>,
    conns: Result<String, String>,
    trial: Option<Result<String, String>>,
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
    if !case.loopback && case.path_rate {
        test.args(["--path-rate", rate]);
    }
    test.args(case.test)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A busy neighbour: a loop pinned to CPU 1 in the client's namespace, killed on drop.
    let _hog = if case.neighbour {
        Some(Kid(Command::new(bin)
            .args(["lab", "exec", &name, "client", "--"])
            .args(["taskset", "-c", "1", "sh", "-c", "while :; do :; done"])
            .spawn()
            .map_err(|e| e.to_string())?))
    } else {
        None
    };
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
    let d: TestDiagnosis = serde_json::from_value(diagnosis(&v).clone())
        .map_err(|e| format!("the test's diagnosis does not parse: {e}"))?;
    let ns_of = |host: &str| ns(&name, host);
    let ends = checks::Ends { case, ns: &ns_of };
    let name_of = |t: &TestDiagnosis| {
        serde_json::to_value(t.limit)
            .ok()
            .and_then(|x| x.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let limit = match &d.reverse {
        Some(r) if r.limit != d.limit => format!("{}/{}", name_of(&d), name_of(r)),
        _ => name_of(&d),
    };
    Ok(Found {
        limit,
        verdict: d.verdict.clone(),
        harmful: ends.harmful(&d, reverse)?,
        contradictions: checks::contradictions(&d),
        missing: checks::missing_knob(case, &d, reverse),
        conns,
        trial: None,
    })
}

/// The counts of one group of cases (tuned on, or added since).
#[derive(Default)]
struct Tally {
    right: usize,
    total: usize,
    harmful: usize,
    contradictions: usize,
    failed: usize,
}

impl Tally {
    fn line(&self, what: &str) -> String {
        format!(
            "{what}: right {} of {} ({:.0}%); harmful recommendations: {}; contradictions: {}; \
             failed to run: {}",
            self.right,
            self.total,
            100.0 * self.right as f64 / self.total.max(1) as f64,
            self.harmful,
            self.contradictions,
            self.failed
        )
    }
}

/// Agreement of `conns` and the experiment trial with the test.
#[derive(Default)]
struct Agree {
    conns: usize,
    conns_n: usize,
    trial: usize,
    trial_n: usize,
}

fn show(r: &Result<String, String>) -> String {
    match r {
        Ok(l) => l.clone(),
        Err(e) => format!("error: {e}"),
    }
}

/// Runs one case and prints its line; counts it in `t` and `agree`.
fn one(bin: &str, case: &Case, tag: &str, t: &mut Tally, agree: &mut Agree) {
    t.total += 1;
    let mut f = match run_case(bin, case, tag) {
        Ok(f) => f,
        Err(e) => {
            t.failed += 1;
            println!("{:<40} {:<16} FAILED: {e}", case.name, case.expect);
            return;
        }
    };
    if case.experiment {
        f.trial = Some(experiment_trial(bin, case, tag));
    }
    let class_ok = f.limit == case.expect || case.also.contains(&f.limit.as_str());
    let ok = class_ok && f.missing.is_none();
    t.right += ok as usize;
    t.harmful += f.harmful.len();
    t.contradictions += f.contradictions.len();
    if let Ok(c) = &f.conns {
        agree.conns_n += 1;
        agree.conns += (c == &f.limit) as usize;
    }
    if let Some(Ok(x)) = &f.trial {
        agree.trial_n += 1;
        agree.trial += (x == &f.limit) as usize;
    }
    println!(
        "{:<40} {:<16} {:<26} {:<18} {:<18} {}",
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
        println!("    why {}: {}", case.expect, case.why);
        println!("    verdict: {}", f.verdict);
    }
    if let Some(m) = &f.missing {
        println!("    {m}");
    }
    for c in &f.contradictions {
        println!("    CONTRADICTION: {c}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bin = args.get(1).cloned().unwrap_or_else(|| "tcptune".into());
    let reps: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(1);
    let only = args.get(3).cloned().unwrap_or_default();
    let cases: Vec<Case> = cases::cases()
        .into_iter()
        .filter(|c| c.name.contains(&only))
        .collect();
    let pid = std::process::id() % 1000;
    let (mut tuned, mut fresh, mut agree) = (Tally::default(), Tally::default(), Agree::default());
    println!(
        "{:<40} {:<16} {:<26} {:<18} {:<18}",
        "case", "expected", "test", "conns (sender)", "experiment trial"
    );
    for rep in 0..reps {
        for (i, case) in cases.iter().enumerate() {
            let tag = format!("{pid}{rep}{i:02}");
            let t = if case.tuned { &mut tuned } else { &mut fresh };
            one(&bin, case, &tag, t, &mut agree);
        }
    }
    let all = Tally {
        right: tuned.right + fresh.right,
        total: tuned.total + fresh.total,
        harmful: tuned.harmful + fresh.harmful,
        contradictions: tuned.contradictions + fresh.contradictions,
        failed: tuned.failed + fresh.failed,
    };
    // A failed run is no evidence either way: no accuracy is printed then.
    if all.failed > 0 {
        eprintln!(
            "bench/diagnose: a tool failed in {} of {} cases (above); no accuracy is printed",
            all.failed, all.total
        );
        std::process::exit(1);
    }
    println!("{}", tuned.line("cases the rules were tuned on"));
    println!("{}", fresh.line("cases added since, never tuned on"));
    println!(
        "{} (goal >= 95% right, 0 harmful, 0 contradictions); conns agrees with the test: {} \
         of {}; experiment trial agrees: {} of {}",
        all.line("all"),
        agree.conns,
        agree.conns_n,
        agree.trial,
        agree.trial_n
    );
}
