//! `tcptune audit` / `tcptune tune` from the command line: output, exit codes, bad input, and
//! (privileged) apply and rollback inside a namespace.

use std::path::PathBuf;
use std::process::{Command, Output};

fn tcptune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .unwrap()
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/host")
        .join(name)
        .display()
        .to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn a_mistuned_state_exits_1_with_json_findings() {
    let o = tcptune(&[
        "--json",
        "audit",
        "--state",
        &fixture("mistuned-6.1.json"),
        "--profile",
        "lfn",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["command"], "audit");
    let findings = v["result"]["findings"].as_array().unwrap();
    assert!(findings
        .iter()
        .any(|f| f["setting"] == "net.ipv4.tcp_sack" && f["verdict"] == "change"));
    assert_eq!(v["result"]["bdp_bytes"], 12_500_000);
}

#[test]
fn a_home_lan_needs_nothing_and_exits_0() {
    let o = tcptune(&[
        "audit",
        "--state",
        &fixture("old-distro-4.15.json"),
        "--profile",
        "lan",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Nothing needs changing"));
}

#[test]
fn tune_dry_run_prints_the_drop_in() {
    let o = tcptune(&[
        "tune",
        "--state",
        &fixture("mistuned-6.1.json"),
        "--path",
        "rate=1gbit,rtt=100ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("net.ipv4.tcp_sack = 1"), "{out}");
    assert!(out.contains("ip link set dev eth0 txqueuelen"), "{out}");
}

#[test]
fn bad_input_is_one_sentence_and_exit_2() {
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "audit",
                "--state",
                "/nonexistent/state.json",
                "--profile",
                "lan",
            ],
            "cannot read host state",
        ),
        (&["audit", "--path", "rate=1gbit"], "audit needs the path"),
        (&["audit", "--profile", "lan", "--flows", "0"], "--flows 0"),
        (
            &[
                "audit",
                "--profile",
                "lan",
                "--netns",
                "tt-no-such-namespace",
            ],
            "does not exist",
        ),
        (
            &["tune", "--state", "/x.json", "--profile", "lan", "--apply"],
            "drop --state",
        ),
    ];
    for (args, needle) in cases {
        let o = tcptune(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(needle), "{args:?}: {e}");
        assert_eq!(
            e.trim().lines().count(),
            1,
            "{args:?}: one line expected: {e}"
        );
    }
}

#[test]
fn tune_apply_and_rollback_in_a_namespace_from_the_cli() {
    if !tcptune_testkit::privileged("tune_apply_and_rollback_in_a_namespace_from_the_cli") {
        return;
    }
    let ns = tcptune_testkit::Netns::new("tunecli");
    ns.exec(&[
        "sysctl",
        "-q",
        "-w",
        "net.ipv4.tcp_sack=0",
        "net.ipv4.tcp_rmem=4096 65536 65536",
    ]);
    let read = |k: &str| {
        String::from_utf8(ns.exec(&["cat", &format!("/proc/sys/net/ipv4/{k}")]).stdout).unwrap()
    };
    let (sack, rmem) = (read("tcp_sack"), read("tcp_rmem"));
    let snap = std::env::temp_dir().join(format!("tt-tunecli-{}.json", std::process::id()));
    let snap_s = snap.display().to_string();
    let o = tcptune(&[
        "tune",
        "--netns",
        ns.name(),
        "--path",
        "rate=1gbit,rtt=100ms",
        "--apply",
        "--snapshot",
        &snap_s,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(read("tcp_sack"), "1\n");
    assert!(
        read("tcp_rmem").ends_with("\t25165824\n"),
        "{}",
        read("tcp_rmem")
    );
    // A second apply refuses: it would overwrite the snapshot of the original values.
    let again = tcptune(&[
        "tune",
        "--netns",
        ns.name(),
        "--profile",
        "lfn",
        "--apply",
        "--snapshot",
        &snap_s,
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("snapshot already exists"));
    let o = tcptune(&[
        "tune",
        "--netns",
        ns.name(),
        "--rollback",
        "--snapshot",
        &snap_s,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!((read("tcp_sack"), read("tcp_rmem")), (sack, rmem));
    assert!(!snap.exists());
}
