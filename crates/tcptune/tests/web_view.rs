//! `tcptune view` on what is not a recording of the page: an experiment's results directory
//! (each trial a row with its series and the runner's verdict), one trial's series file, and a
//! packet capture (each direction that carried data a row, with the wire's figures and the
//! engine's verdict from the capture; zero windows and retransmissions as events).

use std::path::Path;
use std::process::Command;

mod common;

use common::serving::{get, serving, snapshot};
use serde_json::Value;
use tcptune_experiment::record::{Measurement, SeriesSample, TrialRecord};
use tcptune_testkit::TempDir;

fn connections(addr: std::net::SocketAddr) -> Value {
    let (status, body) = get(addr, "/api/connections");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// A results directory as `lab run` leaves it: trials.jsonl and one series per trial.
fn results(dir: &Path) {
    std::fs::create_dir_all(dir.join("series")).unwrap();
    let mut trials = String::new();
    for (i, mbit) in [(1, 40.0), (2, 20.0)] {
        let id = format!("p000-r0{i}");
        let samples: Vec<String> = (1..=5u32)
            .map(|k| {
                serde_json::to_string(&SeriesSample {
                    t_s: 0.1 * f64::from(k),
                    goodput_bps: Some(mbit * 1e6),
                    snd_cwnd_bytes: Some(14480 * u64::from(k)),
                    rwnd_bytes: Some(65536),
                    rtt_s: Some(0.02),
                    retransmits: Some(u64::from(k / 3)),
                    ..SeriesSample::default()
                })
                .unwrap()
            })
            .collect();
        std::fs::write(
            dir.join(format!("series/{id}.jsonl")),
            samples.join("\n") + "\n",
        )
        .unwrap();
        let record = TrialRecord {
            id: id.clone(),
            point: 0,
            rep: Some(i),
            warmup: false,
            seed: 1,
            started_unix_s: 0,
            wall_s: 0.5,
            host_busy: None,
            host_steal: None,
            result: Some(Measurement {
                goodput_bps: mbit * 1e6,
                duration_s: 0.5,
                verdict: Some(format!("receiver-window limited at {mbit} Mbit/s")),
                limit: Some(tcptune_diagnose::Limit::ReceiverWindow),
                series: Some(format!("series/{id}.jsonl")),
                ..Measurement::default()
            }),
            error: None,
        };
        trials += &serde_json::to_string(&record).unwrap();
        trials.push('\n');
    }
    std::fs::write(dir.join("trials.jsonl"), trials).unwrap();
}

#[test]
fn an_experiments_trials_open_as_rows_with_their_series_and_verdicts() {
    let dir = TempDir::new("web-view-trials");
    results(dir.path());
    let (_view, addr) = serving(&["view", dir.path().to_str().unwrap(), "--web", "127.0.0.1:0"]);
    let t = connections(addr);
    let rows = t["connections"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{t}");
    assert!(rows.iter().all(|r| r["limit"] == "receiver_window"), "{t}");
    assert!(
        rows[0]["label"].as_str().unwrap().starts_with("p000-r0"),
        "{t}"
    );
    assert!(t["source"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("an experiment's trials"));
    let v = snapshot(addr, "p000-r02");
    let cwnd: Vec<u64> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["cwnd_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(cwnd, vec![14480, 28960, 43440, 57920, 72400]);
    // Retransmits 0,0,1,1,1: one event, at the third sample.
    let events = v["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{v}");
    assert_eq!(events[0]["kind"], "retransmit");

    // One trial's series file opens alone, its record found in the directory around it.
    let one = dir.path().join("series/p000-r01.jsonl");
    let (_one, addr) = serving(&["view", one.to_str().unwrap(), "--web", "127.0.0.1:0"]);
    let t = connections(addr);
    assert_eq!(
        t["connections"][0]["verdict"],
        "receiver-window limited at 40 Mbit/s"
    );
}

#[test]
fn a_capture_opens_with_the_wires_figures_and_its_zero_windows() {
    let cap = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/zerowin.pcap");
    let (_view, addr) = serving(&["view", cap, "--web", "127.0.0.1:0"]);
    let t = connections(addr);
    let rows = t["connections"].as_array().unwrap();
    assert!(!rows.is_empty(), "{t}");
    assert!(t["source"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("a capture"));
    let (mut zero, mut most) = (0, 0);
    for r in rows {
        let v = snapshot(addr, r["id"].as_str().unwrap());
        let points = v["points"].as_array().unwrap();
        most = most.max(points.len());
        // Acknowledged bytes never go back.
        let acked: Vec<u64> = points
            .iter()
            .filter_map(|p| p["acked_bytes"].as_u64())
            .collect();
        assert!(acked.windows(2).all(|w| w[0] <= w[1]), "{acked:?}");
        assert!(points.iter().all(|p| p.get("cwnd_bytes").is_none()));
        zero += v["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "zero_window")
            .count();
    }
    assert!(
        most > 10,
        "the data direction is drawn over the capture: {most} points"
    );
    assert!(zero > 0, "the fixture's zero windows are events");
}

#[test]
fn what_view_cannot_read_is_one_sentence_and_exit_2() {
    let dir = TempDir::new("web-view-bad");
    std::fs::create_dir_all(dir.path().join("empty")).unwrap();
    let bad_series = dir.path().join("s.jsonl");
    std::fs::write(&bad_series, "{\"t_s\":0.1}\nnot json\n").unwrap();
    for (arg, start) in [
        (
            dir.path().join("empty"),
            "tcptune: error: reading the experiment results ",
        ),
        (bad_series, "tcptune: error: reading the trial series "),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .args(["view", arg.to_str().unwrap(), "--web", "127.0.0.1:0"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(start) && err.trim().lines().count() == 1,
            "{err}"
        );
    }
}

#[test]
fn a_committed_results_directory_without_series_opens_with_its_verdicts() {
    // The repository keeps trial records, not series: each trial is a row with no points.
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/seed004-buffers/results/cpu"
    );
    let (_view, addr) = serving(&["view", dir, "--web", "127.0.0.1:0"]);
    let t = connections(addr);
    let rows = t["connections"].as_array().unwrap();
    assert_eq!(rows.len(), 9, "{t}");
    assert!(rows.iter().all(|r| r["limit"] == "path_capacity"), "{t}");
}
