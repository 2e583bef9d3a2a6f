//! Privileged: a bundled spec runs in smoke mode with the current binary. Seed 001's untuned
//! host has MTU 576, below IPv6's minimum; a lab that set the MTU before the IPv6 address
//! failed every such trial at `lab up` (scripts/test runs every bundled spec this way).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[test]
fn seed001_runs_in_smoke_mode_mtu_576_included() {
    if !tcptune_testkit::privileged("seed001_runs_in_smoke_mode_mtu_576_included") {
        return;
    }
    let spec =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/seed001-web100/spec.toml");
    let out = std::env::temp_dir().join(format!("tt-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let lab = format!("ttsmoke{}", std::process::id() % 100_000);
    let o = Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(["lab", "run", "--smoke", "--name", &lab, "--out"])
        .arg(&out)
        .arg(&spec)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let records: Vec<Value> = std::fs::read_to_string(out.join("trials.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let _ = std::fs::remove_dir_all(&out);
    assert!(o.status.success(), "{stderr}");
    // Both points, one trial each, no warm-up, every one measured.
    assert_eq!(records.len(), 2, "{stderr}");
    for r in &records {
        assert!(r["error"].is_null(), "{}: {}", r["id"], r["error"]);
        assert_eq!(r["warmup"], false);
        assert!(r["result"]["goodput_bps"].as_f64().unwrap() > 0.0);
        assert!(
            r["result"]["duration_s"].as_f64().unwrap() < 2.0,
            "cut to about 1 s"
        );
    }
    let netns = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(
        !netns.contains(&format!("tcptune-{lab}-")),
        "the run left labs: {netns}"
    );
}
