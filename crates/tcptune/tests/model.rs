//! `tcptune model …` run as a user runs it: the built binary, its text and `--json` output, and
//! its exit code and one-line message on bad input.

use std::process::{Command, Output};

use serde_json::Value;

fn tcptune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .expect("the tcptune binary runs")
}

/// Runs a command that must succeed and returns its stdout.
fn text(args: &[&str]) -> String {
    let out = tcptune(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a command with `--json` and returns its `result`, checking the envelope.
fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let doc: Value = serde_json::from_str(&text(&all)).expect("--json prints one JSON document");
    let command = format!("{} {}", args[0], args[1]);
    assert_eq!(doc["command"], Value::String(command));
    assert_eq!(doc["schema_version"], 1);
    doc["result"].clone()
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Runs a command that must fail as a usage/input error: exit 2, one line naming the problem.
fn usage_error(args: &[&str]) -> String {
    let out = tcptune(args);
    assert_eq!(out.status.code(), Some(2), "{args:?} should exit 2");
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    assert!(err.starts_with("tcptune: error: "), "{err}");
    err
}

#[test]
fn buffers_for_seed_000_on_an_old_and_a_new_kernel() {
    let old = json(&[
        "model", "buffers", "--rate", "10gbit", "--rtt", "1.58ms", "--kernel", "6.1",
    ]);
    assert_eq!(old["window_bytes"], 1_975_000);
    assert_eq!(old["window_rule"]["rule"], "adv_win_scale");
    assert_eq!(old["tcp_rmem_max_bytes"], 3_949_999);
    assert_eq!(old["kernel"], "6.1");
    assert_eq!(old["kernel_source"], "given");
    let new = json(&[
        "model",
        "buffers",
        "--path",
        "rate=10gbit,rtt=1.58ms",
        "--kernel",
        "6.18",
        "--scaling-ratio",
        "0.86",
        "--cc",
        "bbr",
    ]);
    assert_eq!(new["window_rule"]["scaling_ratio"], 220);
    assert_eq!(new["tcp_wmem_max_bytes"], 3 * 1_975_000);
    let t = text(&[
        "model", "buffers", "--rate", "1gbit", "--rtt", "50ms", "--kernel", "6.6",
    ]);
    assert!(t.contains("tcp_rmem max  ≥ 12500000 B"), "{t}");
    assert!(t.contains("does not apply / caveats:"), "{t}");
}

#[test]
fn buffers_detects_the_running_kernel_without_kernel() {
    let r = json(&["model", "buffers", "--rate", "1gbit", "--rtt", "1ms"]);
    let source = r["kernel_source"].as_str().unwrap();
    let running = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok();
    match running {
        Some(release) => {
            assert_eq!(source, "detected");
            let mut it = release.trim().split('.');
            let want = format!("{}.{}", it.next().unwrap(), it.next().unwrap());
            assert!(
                want.starts_with(r["kernel"].as_str().unwrap()),
                "{want} vs {}",
                r["kernel"]
            );
        }
        None => assert_eq!(source, "assumed"),
    }
}

#[test]
fn buffers_with_flows_and_a_memory_budget() {
    let r = json(&[
        "model", "buffers", "--rate", "10gbit", "--rtt", "100ms", "--flows", "4", "--memory",
        "128MB", "--kernel", "6.18",
    ]);
    assert_eq!(r["flows"], 4);
    assert_eq!(r["window_bytes"], 31_250_000);
    assert_eq!(r["memory"]["receiver"]["fits"], false);
    assert!((num(&r["memory"]["receiver"]["aggregate_rate_bps"]) - 5.12e9).abs() < 1.0);
    let r = json(&[
        "model", "buffers", "--rate", "100gbit", "--rtt", "100ms", "--kernel", "6.18",
    ]);
    assert_eq!(r["exceeds_max_window"], true);
    assert_eq!(r["min_flows"], 2);
}

#[test]
fn mathis_and_its_inverse_on_seed_001() {
    // Seed 001: 20 ms, 411 Mbps, MSS 1460, C = 1: 0.0002 % with decimal Mbps, 0.00018 % when
    // Mbps is read as 2^20 bit/s.
    let dec = json(&[
        "model",
        "mathis",
        "--rtt",
        "20ms",
        "--target-rate",
        "411mbit",
        "--mss",
        "1460",
        "--constant",
        "1",
    ]);
    assert_eq!(dec["direction"], "loss_for_rate");
    assert!((num(&dec["loss"]) - 2.02e-6).abs() < 1e-8);
    let t = text(&[
        "model",
        "mathis",
        "--rtt",
        "20ms",
        "--target-rate",
        "411Mibit",
        "--mss",
        "1460",
        "--constant",
        "1",
    ]);
    assert!(t.contains("max loss  0.000184%"), "{t}");
    // And back: the bound at that loss is the target.
    let loss = format!("{}", num(&dec["loss"]));
    let back = json(&[
        "model",
        "mathis",
        "--rtt",
        "20ms",
        "--loss",
        &loss,
        "--mss",
        "1460",
        "--constant",
        "1",
    ]);
    assert!((num(&back["rate_bps"]) - 411e6).abs() < 1.0);
    // Mathis et al. 1997: 1448 B × 8 / 100 ms × √(3/2) / √1e-4 = 14.2 Mbit/s; delayed ACKs × √(1/2).
    let t = text(&["model", "mathis", "--rtt", "100ms", "--loss", "1e-4"]);
    assert!(t.contains("max rate  14.19 Mbit/s"), "{t}");
    let d = json(&[
        "model",
        "mathis",
        "--rtt",
        "100ms",
        "--loss",
        "1e-4",
        "--delayed-ack",
    ]);
    assert!((num(&d["rate_bps"]) / 1e6 - 10.03).abs() < 0.01);
}

#[test]
fn pftk_cubic_and_ramp_reference_numbers() {
    let p = json(&["model", "pftk", "--rtt", "50ms", "--loss", "1e-2"]);
    assert!((num(&p["rate_bps"]) / 1e6 - 1.84).abs() < 0.01);
    assert_eq!(p["limited_by"], "loss");
    let p = json(&[
        "model", "pftk", "--rtt", "50ms", "--loss", "5%", "--rto", "1s", "--b", "1",
    ]);
    assert_eq!(p["packets_per_ack"], 1);
    assert!(num(&p["rate_bps"]) < 0.6e6);
    let c = json(&["model", "cubic", "--rtt", "100ms", "--loss", "1e-6"]);
    assert_eq!(c["region"], "cubic");
    assert!((num(&c["rate_bps"]) / 1e6 - 687.0).abs() < 1.0);
    let t = text(&["model", "cubic", "--path", "rtt=10ms,loss=1e-4"]);
    assert!(t.contains("Reno-friendly"), "{t}");

    // Seed 003: ssthresh 65535 vs infinite on a 10 Gbit/s path.
    let r = json(&[
        "model",
        "ramp",
        "--rate",
        "10gbit",
        "--rtt",
        "10ms",
        "--mss",
        "1460",
        "--cc",
        "reno",
        "--ssthresh",
        "65535,inf",
    ]);
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["ssthresh_bytes"], 65535);
    assert!(runs[1]["ssthresh_bytes"].is_null());
    assert!((num(&runs[0]["time_to_target_s"]) - 76.64).abs() < 0.01);
    assert!((num(&runs[1]["time_to_target_s"]) - 0.1).abs() < 1e-9);
    let t = text(&[
        "model", "ramp", "--rate", "1gbit", "--rtt", "20ms", "--window", "64KiB",
    ]);
    assert!(t.contains("target not reached: the receive window"), "{t}");
}

#[test]
fn bad_input_is_one_sentence_and_exit_2() {
    let e = usage_error(&["model", "bdp", "--rate", "10m", "--rtt", "1ms"]);
    assert!(e.contains("10mbit") && e.contains("10MB/s"), "{e}");
    let e = usage_error(&["model", "buffers", "--rate", "1gbit"]);
    assert!(e.contains("--rtt"), "{e}");
    let e = usage_error(&["model", "mathis", "--rtt", "1ms", "--loss", "101%"]);
    assert!(e.contains("101%"), "{e}");
    let e = usage_error(&["model", "mathis", "--rtt", "1ms"]);
    assert!(e.contains("--loss") && e.contains("--target-rate"), "{e}");
    let e = usage_error(&["model", "cubic", "--rtt", "1ms", "--loss", "0"]);
    assert!(e.contains("--loss"), "{e}");
    let e = usage_error(&[
        "model", "buffers", "--rate", "1gbit", "--rtt", "1ms", "--flows", "0",
    ]);
    assert!(e.contains("--flows"), "{e}");
    let e = usage_error(&[
        "model", "buffers", "--rate", "1gbit", "--rtt", "1ms", "--kernel", "six",
    ]);
    assert!(e.contains("6.18"), "{e}");
    let e = usage_error(&[
        "model", "ramp", "--rate", "1gbit", "--rtt", "1ms", "--cc", "bbr",
    ]);
    assert!(e.contains("--cc reno"), "{e}");
    let e = usage_error(&[
        "model",
        "ramp",
        "--rate",
        "1gbit",
        "--rtt",
        "1ms",
        "--ssthresh",
        "x",
    ]);
    assert!(e.contains("inf"), "{e}");
    let e = usage_error(&["model", "pftk", "--rtt", "1ms", "--loss", "1%", "--b", "0"]);
    assert!(e.contains("--b"), "{e}");
    let e = usage_error(&[
        "model", "buffers", "--rate", "1gbit", "--rtt", "1ms", "--flowz", "2",
    ]);
    assert!(e.contains("--flows"), "{e}");
    // A negative quantity reaches the unit's own sentence, not clap's "unexpected argument".
    for args in [
        &["conns", "--rate", "-5mbit"][..],
        &["model", "bdp", "--rate", "1gbit", "--rtt", "-3ms"],
        &["watch", "--interval", "-1s"],
        &["audit", "--profile", "lan", "--memory", "-1MiB"],
    ] {
        let e = usage_error(args);
        assert!(e.contains("is negative;"), "{args:?}: {e}");
        assert!(!e.contains("unexpected argument"), "{args:?}: {e}");
    }
}

#[test]
fn non_finite_and_out_of_range_units_are_refused_everywhere() {
    let e = usage_error(&["model", "bdp", "--rate", "1e300tbit", "--rtt", "1ms"]);
    assert!(e.contains("'1e300tbit' is out of range"), "{e}");
    let e = usage_error(&["model", "bdp", "--rate", "1gbit", "--rtt", "1e-12s"]);
    assert!(e.contains("'1e-12s' is out of range"), "{e}");
    let e = usage_error(&["model", "bdp", "--path", "rate=1e300tbit,rtt=1ms"]);
    assert!(e.contains("1e300tbit"), "{e}");
    let e = usage_error(&["model", "mathis", "--rtt", "1e-12s", "--loss", "1%"]);
    assert!(e.contains("1e-12s"), "{e}");
    // The iperf3 client refuses before it connects (it used to reach the server as "inf").
    let e = usage_error(&["test", "198.18.0.2", "-b", "1e300tbit"]);
    assert!(e.contains("'1e300tbit' is out of range"), "{e}");
    // The largest accepted values give finite output.
    let v = json(&["model", "bdp", "--rate", "1000tbit", "--rtt", "1440min"]);
    assert_eq!(v["bdp_bytes"].as_u64(), Some(10_800_000_000_000_000_000));
    assert!(!v.to_string().contains("null"), "{v}");
    let e = usage_error(&["model", "bdp", "--rate", "1000tbit", "--rtt", "100000min"]);
    assert!(e.contains("at most 1 day"), "{e}");
}
