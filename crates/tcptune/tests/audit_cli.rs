//! `tcptune audit` / `tcptune tune` from the command line: output, exit codes, bad input, and
//! (privileged) apply and rollback inside a namespace.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Removes the given files when dropped (also when the test panics).
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// The snapshot file and the lock file `tune` keeps beside it.
fn snapshot_files(snap: &std::path::Path) -> Cleanup {
    let mut lock = snap.as_os_str().to_owned();
    lock.push(".lock");
    Cleanup(vec![snap.to_path_buf(), lock.into()])
}

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
            "cannot read the host state",
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
    let _cleanup = snapshot_files(&snap);
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
    // The applied values are not called a dry run, and the undo hint, run as printed, finds
    // the snapshot in the namespace.
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("dry run"), "{out}");
    assert!(out.starts_with("# applied now"), "{out}");
    let undo = out
        .split("undo with `")
        .nth(1)
        .and_then(|r| r.split('`').next());
    let undo: Vec<&str> = undo.unwrap_or_else(|| panic!("{out}")).split(' ').collect();
    assert_eq!(
        undo,
        [
            "tcptune",
            "tune",
            "--rollback",
            "--netns",
            ns.name(),
            "--snapshot",
            &snap_s
        ]
    );
    let o = tcptune(&undo[1..]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!((read("tcp_sack"), read("tcp_rmem")), (sack, rmem));
    assert!(!snap.exists());
}

#[test]
fn concurrent_applies_and_a_rollback_in_another_namespace_are_refused() {
    if !tcptune_testkit::privileged("concurrent_applies_and_a_rollback_in_another_namespace") {
        return;
    }
    let (a, b) = (
        tcptune_testkit::Netns::new("tunerace"),
        tcptune_testkit::Netns::new("tuneother"),
    );
    for ns in [&a, &b] {
        ns.exec(&["sysctl", "-q", "-w", "net.ipv4.tcp_sack=0"]);
    }
    let read = |ns: &tcptune_testkit::Netns| {
        String::from_utf8(ns.exec(&["cat", "/proc/sys/net/ipv4/tcp_sack"]).stdout).unwrap()
    };
    let snap = std::env::temp_dir().join(format!("tt-tunerace-{}.json", std::process::id()));
    let _cleanup = snapshot_files(&snap);
    let snap_s = snap.display().to_string();
    let apply = |ns: &str| {
        Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .args(["tune", "--netns", ns, "--profile", "lfn", "--apply"])
            .args(["--snapshot", &snap_s])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let rollback =
        |ns: &str| tcptune(&["tune", "--netns", ns, "--rollback", "--snapshot", &snap_s]);
    // Two applies at once: exactly one wins, and the rollback restores the original value.
    for round in 0..10 {
        let (x, y) = (apply(a.name()), apply(a.name()));
        let (x, y) = (x.wait_with_output().unwrap(), y.wait_with_output().unwrap());
        let won = [&x, &y].iter().filter(|o| o.status.success()).count();
        assert_eq!(won, 1, "round {round}: {} | {}", stderr(&x), stderr(&y));
        let lost = if x.status.success() { &y } else { &x };
        assert_eq!(lost.status.code(), Some(2), "round {round}");
        let e = stderr(lost);
        assert!(
            e.contains("snapshot already exists") || e.contains("another `tcptune tune"),
            "round {round}: {e}"
        );
        assert_eq!(read(&a), "1\n");
        let o = rollback(a.name());
        assert_eq!(o.status.code(), Some(0), "round {round}: {}", stderr(&o));
        assert_eq!(read(&a), "0\n", "round {round}: rollback restored");
    }
    // A's snapshot rolled back "in" B: refused, B untouched, A still tuned, snapshot kept.
    let o = apply(a.name()).wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = rollback(b.name());
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("taken in namespace {}", a.name()))
            && e.contains(&format!("--netns {}", a.name())),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert_eq!((read(&a), read(&b)), ("1\n".to_string(), "0\n".to_string()));
    assert!(snap.exists());
    let o = rollback(a.name());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(read(&a), "0\n");
}

#[test]
fn files_that_are_devices_fifos_or_too_large_are_refused_at_once() {
    let dir = std::env::temp_dir().join(format!("tt-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = Cleanup(vec![dir.clone()]);
    let fifo = dir.join("fifo");
    tcptune_os::fs::mkfifo(&fifo, 0o600).unwrap();
    let big = dir.join("big.json");
    std::fs::write(&big, vec![b' '; (16 << 20) + 1]).unwrap();
    let fifo_s = fifo.to_str().unwrap();
    let big_s = big.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["tune", "--rollback", "--snapshot", "/dev/zero"],
            "is a character device",
        ),
        (
            vec!["tune", "--rollback", "--snapshot", fifo_s],
            "is a FIFO",
        ),
        (
            vec!["tune", "--rollback", "--snapshot", big_s],
            "larger than 1048576 bytes",
        ),
        (
            vec!["audit", "--profile", "lan", "--state", "/dev/zero"],
            "is a character device",
        ),
        (
            vec!["audit", "--profile", "lan", "--state", fifo_s],
            "is a FIFO",
        ),
        (
            vec!["audit", "--profile", "lan", "--state", big_s],
            "larger than 16777216 bytes",
        ),
        (
            vec![
                "lab",
                "run",
                "/dev/zero",
                "--out",
                "/nonexistent",
                "--check",
            ],
            "is a character device",
        ),
        (
            vec!["lab", "run", fifo_s, "--out", "/nonexistent", "--check"],
            "is a FIFO",
        ),
        (
            vec!["lab", "run", big_s, "--out", "/nonexistent", "--check"],
            "larger than 1048576 bytes",
        ),
    ];
    // `lab up` refuses non-root users before it reads anything.
    let root = tcptune_testkit::is_root();
    let mut cases = cases;
    if root {
        cases.push((
            vec!["lab", "up", "--name", "t-file", "--spec", "/dev/zero"],
            "is a character device",
        ));
        cases.push((
            vec!["lab", "up", "--name", "t-file", "--spec", fifo_s],
            "is a FIFO",
        ));
        cases.push((
            vec!["lab", "up", "--name", "t-file", "--spec", big_s],
            "larger than 1048576 bytes",
        ));
    }
    for (args, needle) in cases {
        let o = tcptune(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(needle), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
    }
    for (env, needle) in [
        ("/dev/zero", "is a character device"),
        (fifo_s, "is a FIFO"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .arg("conns")
            .env("TCPTUNE_REPLAY_SOCK_DIAG", env)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_held_set_rolls_back_when_its_input_ends_or_on_sighup() {
    if !tcptune_testkit::privileged("a_held_set_rolls_back_when_its_input_ends_or_on_sighup") {
        return;
    }
    use std::io::BufRead;
    let ns = tcptune_testkit::Netns::new("tunehold");
    let read =
        || String::from_utf8(ns.exec(&["cat", "/proc/sys/net/ipv4/tcp_rmem"]).stdout).unwrap();
    let before = read();
    let snap = std::env::temp_dir().join(format!("tt-tunehold-{}.json", std::process::id()));
    let _cleanup = snapshot_files(&snap);
    // Ended by its input (an ssh session closing), then by SIGHUP with its input still open.
    for by_signal in [false, true] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .args(["tune", "--netns", ns.name(), "--apply", "--hold", "--json"])
            .args(["--snapshot", snap.to_str().unwrap()])
            .args(["--set", "net.ipv4.tcp_rmem=4096 16384 16384"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let applied: serde_json::Value =
            serde_json::from_str(&out.next().unwrap().unwrap()).unwrap();
        assert_eq!(applied["result"]["mode"], "apply", "{applied}");
        assert_eq!(read(), "4096\t16384\t16384\n", "held while it runs");
        assert!(snap.exists());
        let stdin = child.stdin.take();
        if by_signal {
            tcptune_testkit::signal(child.id(), tcptune_testkit::Signal::Hup);
        } else {
            drop(stdin);
        }
        let rolled: serde_json::Value =
            serde_json::from_str(&out.next().unwrap().unwrap()).unwrap();
        assert_eq!(rolled["result"]["mode"], "rollback", "{rolled}");
        let status = child.wait().unwrap();
        assert!(status.success(), "by_signal {by_signal}: {status}");
        assert_eq!(read(), before, "by_signal {by_signal}: restored");
        assert!(!snap.exists());
    }
    // --set takes network sysctls as KEY=VALUE, and only with --apply.
    let o = tcptune(&[
        "tune",
        "--apply",
        "--set",
        "kernel.pid_max=1",
        "--snapshot",
        snap.to_str().unwrap(),
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("not a network sysctl"),
        "{}",
        stderr(&o)
    );
    let o = tcptune(&["tune", "--set", "net.ipv4.tcp_sack=0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
