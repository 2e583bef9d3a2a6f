//! `tune --search` refusals and failures, without a network or privileges: each ends with one
//! sentence naming the input and a non-zero exit, never a panic or a change to the host.

use std::process::{Command, Output};

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
