//! Every command's real `--json` output validated against its published schema (`schema/`)
//! by an independent validator (the `jsonschema` crate), not by the code that wrote both.
//!
//! `tests/schema.rs` only checks that `schema/` is what the types generate; here the documents
//! the commands print are checked against those files, so a hand-written `Serialize` (`Dur`,
//! `KernelVersion`, `CongName`), a hand-written `JsonSchema` (the same and `Bytes`) or the
//! hand-written `conns --json` renderer (tcptune-diagnose's json.rs) cannot drift from the
//! contract unseen. The schemas are checked strictly: an object field the schema does not name
//! fails too (a strict copy adds `additionalProperties: false` where the schema is silent).
//!
//! Inputs are real: recorded kernel answers (fixtures/kernel), recorded host states
//! (fixtures/host), captures (fixtures/*.pcap*), recorded trials (fixtures/experiment), a
//! loopback `serve`/`test` pair, and, as root, a lab brought up, changed, run and taken down.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tcptune_testkit::{line_channel, privileged, wait_for_line, Kill, TempDir};

mod common;
use common::serving::serve_draining;

/// `tcptune serve -1` on a free loopback port, once it says it listens.
fn serve() -> (Kill, u16) {
    serve_draining(&["-1", "--allow", "127.0.0.0/8"])
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The schemas the unprivileged test validates documents of.
const UNPRIVILEGED: &[&str] = &[
    "tune-search",
    "model-bdp",
    "model-window",
    "model-buffers",
    "model-mathis",
    "model-pftk",
    "model-cubic",
    "model-ramp",
    "audit",
    "tune",
    "report",
    "report-against",
    "conns",
    "watch-record",
    "test",
    "lab-run-check",
    "analyze",
    "analyze-join",
    "watch-web-record",
];

/// The schemas only a root run reaches (a lab is built).
const PRIVILEGED: &[&str] = &["lab-up", "lab-status", "lab-set", "lab-down", "report"];
/// Served over HTTP, not printed (the exporter needs sock_diag's destroy events: root).
const SERVED: &[&str] = &["exporter-connections"];

/// The published schema, made strict: every object schema that lists `properties` and says
/// nothing of other properties gets `additionalProperties: false`. (No published schema
/// composes an object from parts with `allOf`, or sets `properties` beside a `oneOf`, so a
/// branch never has to accept its siblings' fields; `strict_is_safe` checks that.)
fn strict(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if m.contains_key("properties") && !m.contains_key("additionalProperties") {
                    m.insert("additionalProperties".into(), Value::Bool(false));
                }
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

fn schema(name: &str) -> Value {
    let path = repo().join("schema").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Validates `doc` (what `what` printed) against `schema/NAME.json`, strictly; returns the
/// errors as lines naming the document and the JSON pointer.
fn validate(name: &str, what: &str, doc: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(&strict(schema(name)))
        .unwrap_or_else(|e| panic!("schema/{name}.json is not a valid JSON Schema: {e}"));
    validator
        .iter_errors(doc)
        .map(|e| format!("{what} (schema {name}): at {}: {e}", e.instance_path()))
        .take(20)
        .collect()
}

/// Collects documents and what went wrong, and which schemas were used.
#[derive(Default)]
struct Checked {
    errors: Vec<String>,
    used: BTreeSet<String>,
}

impl Checked {
    fn doc(&mut self, name: &str, what: &str, doc: &Value) {
        self.used.insert(name.to_string());
        self.errors.extend(validate(name, what, doc));
    }

    /// Runs tcptune with `args` (which include `--json`), expects one of `codes`, and
    /// validates the one document it prints.
    fn run(&mut self, name: &str, args: &[&str], codes: &[i32]) -> Value {
        let out = tcptune(args).output().unwrap();
        self.document(name, args, &out, codes)
    }

    fn document(&mut self, name: &str, args: &[&str], out: &Output, codes: &[i32]) -> Value {
        let what = format!("tcptune {}", args.join(" "));
        let code = out.status.code().unwrap_or(-1);
        assert!(
            codes.contains(&code),
            "{what} exited {code}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{what} printed no JSON document: {e}"));
        assert_eq!(doc["schema_version"], 1, "{what}");
        self.doc(name, &what, &doc);
        doc
    }

    /// JSON lines (one object each), every line against `name`.
    fn lines(&mut self, name: &str, what: &str, text: &str) -> usize {
        let mut n = 0;
        for l in text.lines() {
            let doc: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{what}: a line is not JSON ({e}): {l}"));
            self.doc(name, what, &doc);
            n += 1;
        }
        n
    }

    fn finish(self, expected: &[&str]) {
        let want: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
        assert_eq!(self.used, want, "schemas validated against");
        assert!(
            self.errors.is_empty(),
            "documents that do not follow their schema:\n{}",
            self.errors.join("\n")
        );
    }
}

fn tcptune(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tcptune"));
    c.args(args);
    c
}

fn fixture(rel: &str) -> String {
    repo().join("fixtures").join(rel).display().to_string()
}

#[test]
fn every_schema_is_exercised_here() {
    let mut names = BTreeSet::new();
    for f in std::fs::read_dir(repo().join("schema")).unwrap() {
        let p = f.unwrap().path();
        if p.extension().is_some_and(|e| e == "json") {
            names.insert(p.file_stem().unwrap().to_string_lossy().to_string());
        }
    }
    let covered: BTreeSet<String> = UNPRIVILEGED
        .iter()
        .chain(PRIVILEGED)
        .chain(SERVED)
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        names, covered,
        "a schema that no test here validates output against"
    );
}

#[test]
fn strict_is_safe() {
    // `strict` relies on no object schema combining `properties` with a composition.
    fn walk(v: &Value, at: &str, bad: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if m.contains_key("properties")
                    && ["allOf", "anyOf", "oneOf"]
                        .iter()
                        .any(|k| m.contains_key(*k))
                {
                    bad.push(at.to_string());
                }
                for (k, x) in m {
                    walk(x, &format!("{at}/{k}"), bad);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}/{i}"), bad);
                }
            }
            _ => {}
        }
    }
    let mut bad = Vec::new();
    for name in UNPRIVILEGED.iter().chain(PRIVILEGED) {
        walk(&schema(name), name, &mut bad);
    }
    assert!(bad.is_empty(), "{bad:?}");
}

/// The validator is not vacuous: a wrong type, a missing required field and an unnamed field
/// each fail.
#[test]
fn the_validator_rejects_what_the_schema_excludes() {
    let out = tcptune(&["model", "bdp", "--rate", "10gbit", "--rtt", "1ms", "--json"])
        .output()
        .unwrap();
    let good: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(validate("model-bdp", "good", &good).is_empty());
    let mut wrong_type = good.clone();
    wrong_type["result"]["bdp_bytes"] = Value::String("1250000".into());
    assert!(!validate("model-bdp", "wrong type", &wrong_type).is_empty());
    let mut missing = good.clone();
    missing["result"]
        .as_object_mut()
        .unwrap()
        .remove("bdp_bytes");
    assert!(!validate("model-bdp", "missing", &missing).is_empty());
    let mut extra = good;
    extra["result"]["undocumented"] = Value::Bool(true);
    assert!(!validate("model-bdp", "extra", &extra).is_empty());
}

fn models(c: &mut Checked) {
    let m = |args: &[&str]| -> Vec<String> {
        let mut v = vec!["model".to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        v.push("--json".into());
        v
    };
    let cases: &[(&str, &[&str])] = &[
        ("model-bdp", &["bdp", "--rate", "10gbit", "--rtt", "1.58ms"]),
        (
            "model-window",
            &["window", "--window", "64KiB", "--rtt", "20ms"],
        ),
        (
            "model-window",
            &["window", "--rate", "1gbit", "--rtt", "20ms"],
        ),
        (
            "model-buffers",
            &[
                "buffers", "--rate", "10gbit", "--rtt", "1.58ms", "--kernel", "6.1",
            ],
        ),
        (
            "model-buffers",
            &[
                "buffers", "--rate", "1gbit", "--rtt", "100ms", "--kernel", "4.15",
            ],
        ),
        (
            "model-mathis",
            &["mathis", "--rtt", "100ms", "--loss", "1e-4"],
        ),
        (
            "model-mathis",
            &[
                "mathis", "--rate", "1gbit", "--rtt", "100ms", "--loss", "1e-4",
            ],
        ),
        ("model-pftk", &["pftk", "--rtt", "50ms", "--loss", "1e-2"]),
        (
            "model-cubic",
            &["cubic", "--rtt", "100ms", "--loss", "1e-6"],
        ),
        (
            "model-cubic",
            &["cubic", "--rtt", "10ms", "--loss", "1e-3", "--mss", "8948"],
        ),
        ("model-ramp", &["ramp", "--rate", "1gbit", "--rtt", "50ms"]),
    ];
    for (name, args) in cases {
        let a = m(args);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let doc = c.run(name, &a, &[0]);
        // The hand-written `KernelVersion` and `Dur` serializers are among what was validated.
        if *name == "model-buffers" {
            let kernel = &doc["result"]["kernel"];
            assert!(kernel == "6.1" || kernel == "4.15", "{kernel}");
            assert!(doc["result"]["rtt_s"].is_f64());
        }
    }
}

fn host(c: &mut Checked) {
    for (state, path) in [
        ("mistuned-6.1.json", "rate=1gbit,rtt=100ms"),
        ("old-distro-4.15.json", "rate=10gbit,rtt=1.58ms,loss=0.01%"),
        ("this-kernel-6.18.json", "rate=1gbit,rtt=1ms"),
        ("lab-mistuned-app-6.18.json", "rate=100mbit,rtt=20ms"),
    ] {
        let st = fixture(&format!("host/{state}"));
        c.run(
            "audit",
            &["audit", "--state", &st, "--path", path, "--json"],
            &[0, 1],
        );
        // tune on a recorded state is a dry run: it prints what it would change.
        c.run(
            "tune",
            &["tune", "--state", &st, "--path", path, "--json"],
            &[0, 1],
        );
    }
}

fn experiment(c: &mut Checked) {
    let dir = TempDir::new("schema-report");
    let src = repo().join("fixtures/experiment/seed000-wmem");
    for f in ["plan.json", "trials.jsonl"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    let d = dir.path().to_str().unwrap();
    c.run("report", &["report", d, "--json"], &[0]);
    let committed = repo().join("examples/seed000-datacenter/results/wmem/summary.csv");
    let against = committed.to_str().unwrap();
    c.run(
        "report-against",
        &["report", d, "--against", against, "--json"],
        &[0, 1],
    );
    let spec = repo().join("examples/quickstart/spec.toml");
    let out = dir.path().join("check");
    c.run(
        "lab-run-check",
        &[
            "lab",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--check",
            "--json",
        ],
        &[0],
    );
}

fn replayed(dump: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tcptune"));
    c.env(
        "TCPTUNE_REPLAY_SOCK_DIAG",
        fixture(&format!("kernel/6.18/{dump}")),
    )
    .env("TCPTUNE_REPLAY_KERNEL", "6.18.44");
    c
}

fn kernel_recordings(c: &mut Checked) {
    for extra in [&[][..], &["--all"], &["--processes"]] {
        let mut args = vec!["conns", "--json"];
        args.extend_from_slice(extra);
        let out = replayed("dump-loopback.nl").args(&args).output().unwrap();
        let doc = c.document("conns", &args, &out, &[0]);
        let rows = doc["result"]["connections"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        // The hand-written `CongName` serializer and the hand-written row renderer.
        assert!(rows.iter().all(|r| r["congestion"].is_string()), "{rows:?}");
        let mut pretty = args.clone();
        pretty.push("--pretty");
        let out = replayed("dump-loopback.nl").args(&pretty).output().unwrap();
        c.document("conns", &pretty, &out, &[0]);
    }
    // The destroy events a closing connection gives, as JSON lines. (A replay ends by itself;
    // tests/replay.rs bounds the failure where it would listen to the live kernel instead.)
    let out = replayed("destroy-events.nl")
        .args(["watch", "--closed", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(c.lines("watch-record", "watch --closed --json", &text), 2);
    // What `watch --web --record` keeps: a header, then the table and points of each dump.
    let rec = std::env::temp_dir().join(format!("tt-web-record-{}.jsonl", std::process::id()));
    let out = replayed("dump-loopback.nl")
        .args([
            "watch",
            "--web",
            "127.0.0.1:0",
            "--duration",
            "1s",
            "--record",
        ])
        .arg(&rec)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&rec).unwrap();
    let _ = std::fs::remove_file(&rec);
    assert!(c.lines("watch-web-record", "watch --web --record", &text) >= 5);
}

fn captures(c: &mut Checked) {
    let mut files = Vec::new();
    for sub in ["", "encap"] {
        for f in std::fs::read_dir(repo().join("fixtures").join(sub)).unwrap() {
            let p = f.unwrap().path();
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            if n.ends_with(".pcap") || n.ends_with(".pcapng") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 20, "{files:?}");
    for p in &files {
        let f = p.to_str().unwrap();
        c.run("analyze", &["analyze", "--json", f], &[0, 1]);
    }
    let f = fixture("zerowin.pcap");
    c.run("analyze", &["analyze", "--json", "--packets", &f], &[0, 1]);
    let (a, b) = (fixture("loss.pcap"), fixture("dup-reorder.pcapng"));
    c.run(
        "analyze-join",
        &["analyze", "--json", "--same-clock", &a, &b],
        &[1],
    );
    c.run("analyze-join", &["analyze", "--json", &a, &b], &[0, 1]);
}

fn loopback_test(c: &mut Checked) {
    for extra in [&["-P", "2"][..], &["-R"]] {
        let (_srv, port) = serve();
        let p = port.to_string();
        let mut args = vec!["test", "127.0.0.1", "-p", &p, "-t", "1", "--json"];
        args.extend_from_slice(extra);
        // 1: the diagnosis found a limit worth fixing (loopback often has one).
        let doc = c.run("test", &args, &[0, 1]);
        assert!(!doc["result"]["intervals"].as_array().unwrap().is_empty());
    }
}

/// `tune --search --dry-run` against a loopback server: one test of the path as it is and the
/// hypotheses, nothing changed.
fn tune_search_dry_run(c: &mut Checked) {
    let (_srv, port) = serve();
    let to = format!("127.0.0.1:{port}");
    let args = [
        "tune",
        "--search",
        "--to",
        &to,
        "--dry-run",
        "--test-time",
        "1",
        "--json",
    ];
    let doc = c.run("tune-search", &args, &[0, 1]);
    assert_eq!(doc["result"]["mode"], "dry-run", "{doc}");
}

#[test]
fn every_command_prints_what_its_schema_says() {
    let mut c = Checked::default();
    models(&mut c);
    host(&mut c);
    experiment(&mut c);
    kernel_recordings(&mut c);
    captures(&mut c);
    loopback_test(&mut c);
    tune_search_dry_run(&mut c);
    c.finish(UNPRIVILEGED);
}

/// A lab brought up, changed, listed, run once (one point, one trial) and taken down: each
/// `--json` document against its schema.
#[test]
fn lab_commands_print_what_their_schemas_say() {
    if !privileged("lab_commands_print_what_their_schemas_say") {
        return;
    }
    struct Down(String);
    impl Drop for Down {
        fn drop(&mut self) {
            let _ = tcptune(&["lab", "down", "--name", &self.0]).output();
        }
    }
    let name = format!("t-sv{}", std::process::id() % 100_000);
    let mut c = Checked::default();
    let n = name.as_str();
    let guard = Down(name.clone());
    c.run(
        "lab-up",
        &[
            "lab", "up", "--name", n, "--rate", "100mbit", "--rtt", "4ms", "--json",
        ],
        &[0],
    );
    c.run(
        "lab-set",
        &["lab", "set", "--name", n, "--loss", "0.1%", "--json"],
        &[0],
    );
    let st = c.run(
        "lab-status",
        &["lab", "status", "--name", n, "--json"],
        &[0],
    );
    assert_eq!(st["result"]["labs"].as_array().unwrap().len(), 1);
    c.run("lab-down", &["lab", "down", "--name", n, "--json"], &[0]);
    drop(guard);

    // `lab run` of a one-trial spec (its own lab), then the report of what it recorded.
    let dir = TempDir::new("schema-lab-run");
    let spec = dir.path().join("spec.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"{n}r\"\nseed = 1\nrepetitions = 1\nwarmup = false\n\
             [link]\nrate = \"100mbit\"\ndelay = \"2ms\"\n\
             [workload]\nkind = \"iperf3\"\nduration = \"1s\"\n\
             [sweep]\n\"server.sysctl.net.ipv4.tcp_rmem\" = [\"4096 131072 262144\"]\n"
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let run = tcptune(&[
        "lab",
        "run",
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--name",
        &format!("{n}r"),
    ])
    .output()
    .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    c.run("report", &["report", out.to_str().unwrap(), "--json"], &[0]);
    c.finish(&["lab-up", "lab-set", "lab-status", "lab-down", "report"]);
}

/// One HTTP/1.0 GET on loopback: the body after the headers.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: test\r\n\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    assert!(
        r.starts_with("HTTP/1.1 200") || r.starts_with("HTTP/1.0 200"),
        "{r}"
    );
    r.split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default()
}

/// `/connections` of a running exporter, while a loopback test runs, against its schema.
#[test]
fn the_exporters_connections_follow_their_schema() {
    if !privileged("the_exporters_connections_follow_their_schema") {
        return;
    }
    let mut child = tcptune(&["exporter", "--listen", "127.0.0.1:0", "--interval", "100ms"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = line_channel(child.stdout.take().unwrap());
    let _exporter = Kill(child);
    let lines = wait_for_line(&rx, Duration::from_secs(10), |l| l.contains("http://"))
        .expect("the exporter printed its address");
    let addr = lines
        .last()
        .unwrap()
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_string();
    let (_srv, port) = serve();
    let p = port.to_string();
    let mut test = Kill(
        tcptune(&["test", "127.0.0.1", "-p", &p, "-t", "3", "--no-latency"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut c = Checked::default();
    // Polled until the transfer shows (each poll a document checked), with a deadline.
    let mut seen = 0;
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while seen == 0 && std::time::Instant::now() < end {
        let body = http_get(&addr, "/connections?top=5");
        let doc: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        c.doc("exporter-connections", "GET /connections?top=5", &doc);
        seen = doc["connections"].as_array().map_or(0, |a| a.len());
    }
    let _ = test.0.wait();
    assert!(seen > 0, "no connection listed while a test ran");
    c.finish(SERVED);
}
