//! `tune --search` refusals and failures, without a network or privileges: each ends with one
//! sentence naming the input and a non-zero exit, never a panic or a change to the host.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use tcptune_testkit::{line_channel, wait_for_line, Kill};

mod common;
use common::serving::serve_on_loopback;

fn tcptune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .unwrap()
}

fn fails_saying(args: &[&str], words: &[&str]) {
    let o = tcptune(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} succeeded");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for w in words {
        assert!(err.contains(w), "{args:?}: {err:?} does not say {w:?}");
    }
}

#[test]
fn search_needs_a_server_and_its_own_options_need_search() {
    fails_saying(&["tune", "--search"], &["--to"]);
    fails_saying(&["tune", "--dry-run"], &["--search"]);
    fails_saying(&["tune", "-R", "--rate", "1gbit"], &["--search"]);
    fails_saying(&["tune", "--search", "--to", "h", "--apply"], &["--apply"]);
}

#[test]
fn a_bad_server_or_test_time_is_named() {
    fails_saying(
        &["tune", "--search", "--to", "h:x"],
        &["--to h:x", "HOST:PORT"],
    );
    fails_saying(
        &["tune", "--search", "--to", "127.0.0.1", "--test-time", "0"],
        &["--test-time 0"],
    );
    fails_saying(
        &["tune", "--search", "--to", "127.0.0.1", "--state", "x.json"],
        &["--state"],
    );
}

#[test]
fn a_server_that_is_not_there_fails_the_dry_run_before_any_change() {
    // Port 1 on loopback: nothing listens, so the first test fails at once.
    fails_saying(
        &[
            "tune",
            "--search",
            "--to",
            "127.0.0.1:1",
            "--dry-run",
            "--test-time",
            "1",
        ],
        &["127.0.0.1:1"],
    );
}

#[test]
fn a_server_still_busy_with_another_test_is_asked_again() {
    // Another client's 2 s test holds the server (one test at a time, as iperf3's): the
    // search's first test is refused, and asked again until the server is free.
    let (_srv, port, log) = serve_on_loopback(&["-B", "127.0.0.1"]);
    let port = port.to_string();
    let mut other = Kill(
        Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .args(["test", "127.0.0.1", "-p", &port, "-t", "2", "-i", "0.2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let other_out = line_channel(other.0.stdout.take().unwrap());
    // Its first interval line: the other test is running.
    wait_for_line(&other_out, Duration::from_secs(10), |l| {
        l.contains("0.00-0.20")
    })
    .expect("the other client's test started");
    let to = format!("127.0.0.1:{port}");
    let o = tcptune(&[
        "tune",
        "--search",
        "--to",
        &to,
        "--dry-run",
        "--test-time",
        "1",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "the dry run failed: {err}");
    let refused = log.try_iter().any(|l| l.contains("refused (busy"));
    assert!(
        refused,
        "the server never refused the search's test: the retry went untested"
    );
}
