//! An error's cause is printed once: a library error either says its cause or chains it as
//! its `source`, never both, and the binary prints the chain (`{:#}`) on one line.

use std::process::{Command, Output};

fn tcptune(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// Asserts the command failed with exit 2 and its one error line holds `os` exactly once.
fn assert_cause_once(out: &Output, os: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("tcptune: error: "), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(stderr.matches(os).count(), 1, "{stderr}");
}

#[test]
fn connecting_to_a_closed_port_says_connection_refused_once() {
    // A port that was free a moment ago: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = tcptune(&["test", "-c", "127.0.0.1", "-p", &port.to_string()], &[]);
    let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED).to_string();
    assert!(refused.contains("os error"), "{refused}");
    assert_cause_once(&out, &refused);
}

#[test]
fn a_missing_file_is_said_missing_once() {
    let dir = std::env::temp_dir().join(format!("tcptune-error-chain-{}", std::process::id()));
    let missing = dir.join("no-such-recording.nl");
    let out = tcptune(
        &["conns"],
        &[("TCPTUNE_REPLAY_SOCK_DIAG", missing.to_str().unwrap())],
    );
    let not_found = std::io::Error::from_raw_os_error(libc::ENOENT).to_string();
    assert_cause_once(&out, &not_found);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(missing.to_str().unwrap()),
        "the message names the file"
    );
}
