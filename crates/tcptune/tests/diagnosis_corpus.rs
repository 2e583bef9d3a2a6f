//! The diagnosis corpus (fixtures/diagnoses, see its README and manifest.json): recorded tests
//! of traffic nobody built to have one limit (loopback, bidirectional, CPU-contended, another
//! congestion control than the host's, iperf3 at either end, BBR and CUBIC on clean and lossy
//! lab paths) judged again by today's engine (`replay`), and captures analysed again. Every
//! stream's diagnosis keeps the engine's invariants (0 violations), and each recording gets the
//! class its construction makes its limit. A recording the engine still gets wrong carries an
//! `open` note saying what it says instead; once it is right the note must go (the test says
//! so), so the corpus never keeps a stale excuse.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use tcptune_diagnose::advice::InEffect;
use tcptune_diagnose::engine::{invariants, Context};
use tcptune_diagnose::throughput::TestDiagnosis;
use tcptune_perftest::replay::replay;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/diagnoses")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(dir().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A recorded document, gzipped when it is over 100 KB.
fn document(file: &str) -> Value {
    let raw = std::fs::read(dir().join(file)).unwrap();
    let text = if file.ends_with(".gz") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&raw[..]), &mut s).unwrap();
        s
    } else {
        String::from_utf8(raw).unwrap()
    };
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Every invariant broken by a direction's streams and its merged recommendations.
fn violations(t: &TestDiagnosis, out: &mut Vec<String>) {
    for s in &t.streams {
        for v in invariants::check(&s.diagnosis()) {
            out.push(format!("stream {}: {}: {}", s.id, v.rule, v.detail));
        }
    }
    if let Some(c) = &t.context {
        let in_effect = InEffect::of(&Context::from(c));
        for v in invariants::check_advice(&t.recommendations, &in_effect) {
            out.push(format!("the test's advice: {}: {}", v.rule, v.detail));
        }
    }
    if let Some(r) = &t.reverse {
        violations(r, out);
    }
}

/// The limit of each direction (the other one of --bidir second), as JSON names it.
fn limits(t: &TestDiagnosis) -> Vec<String> {
    let name = |t: &TestDiagnosis| {
        serde_json::to_value(t.limit)
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    };
    let mut v = vec![name(t)];
    if let Some(r) = &t.reverse {
        v.push(name(r));
    }
    v
}

/// What a case's label check found: None when it is as the manifest says.
fn label_problem(file: &str, case: &Value, found: &[String], verdict: &str) -> Option<String> {
    let expect = case["expect"].as_str().unwrap();
    let right = found.iter().all(|l| l == expect);
    match (right, case["open"].as_str()) {
        (true, None) | (false, Some(_)) => None,
        (true, Some(_)) => Some(format!(
            "{file}: now {expect} as its construction says; remove its `open` note"
        )),
        (false, None) => Some(format!(
            "{file}: expected {expect} (because {}), found {found:?}: {verdict}",
            case["why"].as_str().unwrap_or("")
        )),
    }
}

#[test]
fn every_recorded_test_replays_without_contradictions_and_with_its_label() {
    let m = manifest();
    let cases = m["tests"].as_array().unwrap();
    assert!(cases.len() >= 10, "the corpus lost its recordings");
    let mut problems = Vec::new();
    let mut open = 0;
    for case in cases {
        let file = case["file"].as_str().unwrap();
        for key in ["made", "why", "expect"] {
            assert!(
                !case[key].is_null(),
                "{file}: the manifest entry has no {key}"
            );
        }
        let doc = document(file);
        let t = replay(&doc).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut v = Vec::new();
        violations(&t, &mut v);
        problems.extend(v.into_iter().map(|x| format!("{file}: contradiction: {x}")));
        open += case["open"].is_string() as usize;
        problems.extend(label_problem(file, case, &limits(&t), &t.verdict));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    eprintln!(
        "{} recordings, {open} still judged wrongly (open)",
        cases.len()
    );
}

#[test]
fn every_capture_is_analysed_with_its_label() {
    let m = manifest();
    let cases = m["captures"].as_array().unwrap();
    let mut problems = Vec::new();
    for case in cases {
        let file = case["file"].as_str().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .arg("analyze")
            .arg(dir().join(file))
            .arg("--json")
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{file}: analyze printed no JSON ({e})"));
        // The busiest flow's data direction: its finding is "a->b: <label> …".
        let flows = v["result"]["flows"].as_array().cloned().unwrap_or_default();
        let busiest = flows
            .iter()
            .max_by_key(|f| f["packets"].as_u64().unwrap_or(0))
            .unwrap_or_else(|| panic!("{file}: no flow"));
        let text: Vec<String> = busiest["diagnosis"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect();
        let first = text.first().cloned().unwrap_or_default();
        let label = case["expect_text"].as_str().unwrap();
        let right = first.contains(label);
        match (right, case["open"].as_str()) {
            (true, None) | (false, Some(_)) => {}
            (true, Some(_)) => problems.push(format!("{file}: now right; remove its `open` note")),
            (false, None) => problems.push(format!(
                "{file}: expected \"{label}\" (because {}), found: {}",
                case["why"].as_str().unwrap_or(""),
                text.join(" | ")
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
