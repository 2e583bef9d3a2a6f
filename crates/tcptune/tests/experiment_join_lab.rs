//! Privileged: an experiment whose trial captures at both ends of the link (`capture.at =
//! "both"`). The trial's record carries the join of its two captures, whose lost, duplicated
//! and reordered counts equal the emulator's own counters in both directions, and the report
//! sets them side by side.
//!
//! The spec is `examples/two-point-join/spec.toml`. The workload is an HTTP download over a
//! rate-limited link, so packets are in flight both ways for the whole transfer: the emulator
//! counts a reordering decision, the join a packet that arrived ahead of one sent before it,
//! and the two agree while every packet picked for reordering has one to overtake. Packets sent on an empty link (the handshake, the last ACK)
//! could break that: the handshake's reorder draws are fixed by the seed, and the last ACK's
//! chance is the reorder probability.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn tcptune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .expect("run tcptune")
}

/// The test's results directory, removed on drop (the runner takes its own labs down).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The example spec (`examples/two-point-join`), whose README quotes this test.
const SPEC: &str = include_str!("../../../examples/two-point-join/spec.toml");

#[test]
fn a_trial_captured_at_both_ends_reports_the_join_beside_the_emulators_counts() {
    if !tcptune_testkit::privileged("a_trial_captured_at_both_ends_reports_the_join") {
        return;
    }
    tcptune_testkit::steal::retry_when_starved("experiment_join", || {
        let dir = TempDir(std::env::temp_dir().join(format!("tt-exp-join-{}", std::process::id())));
        let _ = std::fs::remove_dir_all(&dir.0);
        std::fs::create_dir_all(&dir.0).unwrap();
        let spec = dir.0.join("spec.toml");
        std::fs::write(&spec, SPEC).unwrap();
        let out = dir.0.join("out");
        let lab = format!("ttjoin{}", std::process::id() % 100_000);
        let o = tcptune(&[
            "lab",
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--name",
            &lab,
        ]);
        assert!(
            o.status.success(),
            "lab run failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let trials: Vec<Value> = std::fs::read_to_string(out.join("trials.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(trials.len(), 1);
        let m = &trials[0]["result"];
        assert!(m.is_object(), "the trial failed: {}", trials[0]["error"]);
        assert!(out.join(m["capture"].as_str().unwrap()).exists());
        assert!(out.join(m["capture_server"].as_str().unwrap()).exists());
        let join = &m["join"];
        assert!(join.is_object(), "no join in {m}");
        assert_eq!(join["problems"], Value::Null, "{join}");
        assert!(
            join["clock"].as_str().unwrap().contains("no offset"),
            "{join}"
        );
        for dir in ["up", "down"] {
            let (j, e, b) = (&join[dir], &m["link"][dir], &join["link_before"][dir]);
            eprintln!("{dir}: join {j}\n{dir}: emulator {e}\n{dir}: before the workload {b}");
            let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
            // The emulator's counts over the trial's captures; a copy it made and then dropped
            // left the far side one packet, as if neither had happened.
            let d = |k: &str| n(e, k) - n(b, k);
            let copies_dropped = d("copies_dropped");
            let e = &serde_json::json!({
                "packets_in": d("packets_in"),
                "dropped": d("dropped_loss") + d("dropped_queue") + d("dropped_limit") - copies_dropped,
                "dropped_loss": d("dropped_loss"),
                "duplicated": d("duplicated") - copies_dropped,
                "reordered": d("reordered"),
            });
            // Every packet on the link is the workload's TCP (IPv6 is off): the sender's
            // capture saw each packet the emulator took in.
            assert_eq!(n(j, "packets"), n(e, "packets_in"), "{dir}");
            assert_eq!(n(j, "not_seen_upstream"), 0, "{dir}");
            assert_eq!(n(j, "lost_between"), n(e, "dropped"), "{dir}");
            assert_eq!(n(j, "duplicated"), n(e, "duplicated"), "{dir}");
            assert_eq!(n(j, "reordered"), n(e, "reordered"), "{dir}");
        }
        // Enough of each impairment in the data's direction for the equalities to mean
        // something.
        let (j, e) = (&join["down"], &m["link"]["down"]);
        for k in ["dropped_loss", "duplicated", "reordered"] {
            assert!(e[k].as_u64().unwrap() >= 5, "{k}: {e}");
        }
        // Losses were repaired by needed retransmissions.
        assert!(j["retransmissions_needed"].as_u64().unwrap() > 0, "{j}");
        // The one-way delay: 5 ms ± 1 ms plus the time in the rate's queue.
        let mean_ms = j["delay_mean_s"].as_f64().unwrap() * 1e3;
        assert!(mean_ms > 4.0, "{j}");

        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("Both ends captured: the captures joined"));
        for cell in ["emulator counted", "join found", "duplicated", "reordered"] {
            assert!(html.contains(cell), "{cell} not in the report");
        }
        // The row of losses shows the join's count (one trial: the mean is the count).
        let lost = format!("{:.1}", j["lost_between"].as_u64().unwrap() as f64);
        assert!(html.contains(&lost), "{lost} not in the report");
        // Nothing of the run's labs is left.
        let st = tcptune(&["lab", "status", "--json"]);
        assert!(!String::from_utf8_lossy(&st.stdout).contains(&format!("\"{lab}-")));
    });
}
