//! Every command honours `--json` or refuses it, and every option acts or is refused where it
//! does not apply: in one sentence on standard error, exit 2, nothing done. None of these
//! needs root: each refusal comes before anything is read, bound or created.

use std::process::{Command, Output};

fn tcptune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .unwrap()
}

/// Asserts that `args` is refused with one line naming `needle`, and prints nothing else.
fn refused(args: &[&str], needle: &str) {
    let out = tcptune(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one sentence: {err}");
    assert!(err.contains(needle), "{args:?}: {err} (expected {needle})");
    assert!(out.stdout.is_empty(), "{args:?} printed {:?}", out.stdout);
}

#[test]
fn json_is_refused_by_commands_without_a_document() {
    let no_json = "--json does not apply";
    refused(&["serve", "--json", "-p", "1"], no_json);
    refused(
        &["--json", "lab", "exec", "nolab", "client", "--", "true"],
        no_json,
    );
    refused(&["schema", "--list", "--json"], no_json);
}

#[test]
fn lab_run_check_honours_json_and_checks_out_and_name() {
    let spec = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart/spec.toml"
    );
    let out_dir = std::env::temp_dir().join(format!("tt-check-{}", std::process::id()));
    let out_arg = out_dir.to_str().unwrap();
    let out = tcptune(&["lab", "run", spec, "--out", out_arg, "--check", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["command"], "lab run --check");
    let plan = &v["result"];
    let points = plan["points"].as_array().unwrap();
    assert!(!points.is_empty());
    let reps = plan["repetitions"].as_u64().unwrap() as usize;
    let warmups = if plan["warmup"].as_bool().unwrap() {
        1
    } else {
        0
    };
    assert_eq!(plan["trials"], points.len() * (reps + warmups));
    assert_eq!(plan["out"], out_arg);
    assert_eq!(plan["resumes"], false);
    assert!(!out_dir.exists(), "--check created {out_arg}");
    // The same text as a table.
    let text = tcptune(&["lab", "run", spec, "--out", out_arg, "--check"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains(&format!("{} point(s)", points.len())),
        "{text}"
    );
    assert!(text.contains(out_arg), "{text}");
    // --out and --name are checked as a run would check them.
    refused(&["lab", "run", spec, "--out", spec, "--check"], "is a file");
    refused(
        &[
            "lab", "run", spec, "--out", out_arg, "--name", "Bad_Name", "--check",
        ],
        "--name",
    );
}

#[test]
fn models_refuse_what_they_do_not_read() {
    refused(
        &[
            "model", "bdp", "--rate", "1gbit", "--rtt", "10ms", "--loss", "1%",
        ],
        "leave out --loss",
    );
    refused(
        &["model", "bdp", "--path", "rate=1gbit,rtt=10ms,loss=1%"],
        "leave out --loss",
    );
    refused(
        &[
            "model", "cubic", "--rtt", "10ms", "--loss", "1e-6", "--rate", "1gbit",
        ],
        "leave out --rate",
    );
    refused(
        &["model", "pftk", "--path", "rate=1gbit,rtt=10ms,loss=1%"],
        "leave out --rate",
    );
    refused(
        &[
            "model", "buffers", "--rate", "1gbit", "--rtt", "10ms", "--loss", "1%",
        ],
        "leave out --loss",
    );
    refused(
        &[
            "model", "ramp", "--rate", "1gbit", "--rtt", "10ms", "--loss", "1%",
        ],
        "leave out --loss",
    );
    refused(
        &[
            "model", "window", "--rtt", "10ms", "--window", "64KiB", "--rate", "1gbit",
        ],
        "not both",
    );
    refused(
        &[
            "model",
            "mathis",
            "--rtt",
            "10ms",
            "--target-rate",
            "100mbit",
            "--rate",
            "1gbit",
        ],
        "leave out --rate",
    );
    refused(
        &[
            "model",
            "buffers",
            "--rate",
            "1gbit",
            "--rtt",
            "10ms",
            "--kernel",
            "6.1",
            "--scaling-ratio",
            "0.6",
        ],
        "--scaling-ratio",
    );
    refused(
        &[
            "model",
            "buffers",
            "--rate",
            "1gbit",
            "--rtt",
            "10ms",
            "--kernel",
            "6.18",
            "--adv-win-scale",
            "2",
        ],
        "--adv-win-scale",
    );
    // What a model reads still works, and what it does not read is not in its help.
    assert!(
        tcptune(&["model", "mathis", "--rtt", "100ms", "--loss", "1e-4", "--rate", "10mbit"])
            .status
            .success()
    );
    for (model, hidden) in [("bdp", "--loss"), ("cubic", "--rate"), ("pftk", "--rate")] {
        let help = String::from_utf8(tcptune(&["model", model, "--help"]).stdout).unwrap();
        assert!(help.contains("--rtt"), "{help}");
        assert!(
            !help.contains(hidden),
            "model {model} --help shows {hidden}: {help}"
        );
    }
}

#[test]
fn options_of_other_modes_are_refused() {
    refused(&["watch", "--closed", "--top", "5"], "--top");
    refused(&["watch", "--closed", "--interval", "10ms"], "--interval");
    refused(&["watch", "--detail", "--top", "5"], "--top");
    refused(&["watch", "-p", "--json"], "leave out -p");
    refused(&["analyze", "x.pcap", "--graph-flows", "3"], "--graphs");
    refused(
        &["tune", "--rollback", "--rate", "1gbit"],
        "leave out --rate",
    );
    refused(&["tune", "--rollback", "--write"], "--write");
    refused(&["tune", "--snapshot", "/nonexistent/s.json"], "--snapshot");
    refused(
        &[
            "audit",
            "--to",
            "198.18.0.2",
            "--rtt",
            "10ms",
            "--rate",
            "1gbit",
        ],
        "leave out --rtt",
    );
    refused(
        &["lab", "up", "--name", "x", "--direction", "up"],
        "--direction",
    );
    refused(&["schema", "conns", "--list"], "--list");
}
