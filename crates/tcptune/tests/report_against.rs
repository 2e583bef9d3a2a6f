//! `tcptune report DIR --against EARLIER`: a rerun's points beside an earlier run's, with the
//! exit code a script checking a committed result branches on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tcptune_testkit::TempDir;

fn tcptune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .unwrap()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A committed summary: seed 000's send-buffer sweep (10 points of 3 trials).
fn committed() -> PathBuf {
    repo().join("examples/seed000-datacenter/results/wmem/summary.csv")
}

#[test]
fn a_run_agrees_with_itself_and_a_moved_point_differs() {
    let dir = TempDir::new("against-moved");
    let text = std::fs::read_to_string(committed()).unwrap();
    let points = text.lines().count() - 1;
    // The same run, as a results directory: every point agrees, exit 0.
    std::fs::write(dir.path().join("summary.csv"), &text).unwrap();
    let out = tcptune(&[
        "report",
        dir.path().to_str().unwrap(),
        "--against",
        committed().to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("{points} of {points} points agree")),
        "{stdout}"
    );
    // The first point's mean and interval doubled: that point differs, exit 1.
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut f: Vec<String> = lines[1].split(',').map(str::to_string).collect();
    for c in ["mean_bps", "ci95_low_bps", "ci95_high_bps"] {
        let v: f64 = f[at(c)].parse().unwrap();
        f[at(c)] = format!("{}", v * 2.0);
    }
    lines[1] = f.join(",");
    std::fs::write(dir.path().join("summary.csv"), lines.join("\n") + "\n").unwrap();
    let out = tcptune(&[
        "--json",
        "report",
        dir.path().to_str().unwrap(),
        "--against",
        committed().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["result"];
    assert_eq!(r["differ"], 1, "{r}");
    assert_eq!(r["agree"].as_u64().unwrap() as usize, points - 1, "{r}");
    assert_eq!(r["points"][0]["agreement"], "differ");
    assert_eq!(r["points"][0]["ratio"], 2.0);
}

#[test]
fn bad_inputs_get_one_sentence_and_no_comparison() {
    let dir = TempDir::new("against-bad");
    // No summary where one is named.
    let out = tcptune(&[
        "report",
        dir.path().to_str().unwrap(),
        "--against",
        committed().to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("summary.csv"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // Runs of different specs (another sweep's columns).
    let other = repo().join("examples/seed000-datacenter/results/mtu-txqueuelen/summary.csv");
    std::fs::copy(other, dir.path().join("summary.csv")).unwrap();
    let out = tcptune(&[
        "report",
        dir.path().to_str().unwrap(),
        "--against",
        committed().to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("different settings"), "{err}");
    assert!(out.stdout.is_empty());
    // A tolerance without a run to compare with, or beyond 100%, is refused, naming the
    // option that needs changing.
    let c = committed();
    let c = c.to_str().unwrap();
    for (args, names) in [
        (vec!["report", c, "--tolerance", "2%"], "--against"),
        (
            vec!["report", c, "--against", c, "--tolerance", "150%"],
            "--tolerance",
        ),
    ] {
        let out = tcptune(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(err.contains(names), "{args:?}: {err}");
    }
}
