//! `tcptune serve` and `tcptune test` as a user runs them, on loopback: the JSON shape
//! (iperf3's fields plus ours), the exit codes, and one-sentence errors for bad input.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tcptune_testkit::{line_channel, signal, wait_for_line, Kill, Signal};

mod common;
use common::serving::serve_draining;

/// `tcptune serve -1` on a free loopback port, once it says it listens.
fn serve() -> (Kill, u16) {
    serve_draining(&["-1", "--allow", "127.0.0.0/8"])
}

fn tcptune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn json_has_iperf3s_shape_and_our_diagnosis() {
    let (_srv, port) = serve();
    let o = tcptune(&[
        "test",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-t",
        "2",
        "-P",
        "2",
        "--json",
    ]);
    let code = o.status.code().unwrap();
    assert!(
        code == 0 || code == 1,
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["command"], "test");
    let r = &v["result"];
    assert_eq!(r["start"]["test_start"]["num_streams"], 2);
    assert_eq!(r["start"]["connected"].as_array().unwrap().len(), 2);
    let iv = r["intervals"].as_array().unwrap();
    assert!(iv.len() >= 2, "{} intervals", iv.len());
    for i in iv {
        for s in i["streams"].as_array().unwrap() {
            for k in [
                "socket",
                "start",
                "end",
                "seconds",
                "bytes",
                "bits_per_second",
                "snd_cwnd",
                "rtt",
                "snd_wnd",
                "retransmits",
            ] {
                assert!(s.get(k).is_some(), "interval stream lacks {k}: {s}");
            }
        }
        assert!(i["sum"]["bits_per_second"].as_f64().unwrap() > 0.0);
    }
    let end = &r["end"];
    assert_eq!(end["streams"].as_array().unwrap().len(), 2);
    for k in ["sum_sent", "sum_received"] {
        assert!(end[k]["bytes"].as_u64().unwrap() > 0, "{k}");
    }
    assert!(end["cpu_utilization_percent"]["remote_total"]
        .as_f64()
        .is_some());
    // Ours: samples of both ends (the server is ours) and the diagnosis decides the exit code.
    let t = &r["tcptune"];
    assert_eq!(t["server_samples"], true);
    assert_eq!(t["streams"].as_array().unwrap().len(), 4);
    let problem = t["diagnosis"]["problem"].as_bool().unwrap();
    assert_eq!(code, problem as i32);
    assert!(
        t["diagnosis"]["verdict"]
            .as_str()
            .unwrap()
            .contains("Gbit/s")
            || t["diagnosis"]["verdict"]
                .as_str()
                .unwrap()
                .contains("Mbit/s")
    );
}

#[test]
fn text_output_shows_intervals_and_the_diagnosis() {
    let (_srv, port) = serve();
    let o = tcptune(&[
        "test",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-t",
        "1",
        "-i",
        "0.5",
        "-R",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Cwnd") && text.contains("Rwnd"), "{text}");
    assert!(
        text.lines().filter(|l| l.starts_with("[  1] RX")).count() >= 2,
        "{text}"
    );
    assert!(text.contains("Diagnosis: "), "{text}");
}

#[test]
fn bad_input_is_one_sentence_and_exit_2() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for args in [
        vec![
            "test".to_string(),
            "127.0.0.1".into(),
            "-p".into(),
            closed.to_string(),
            "-t".into(),
            "1".into(),
        ],
        vec!["test".into(), "127.0.0.1".into(), "-w".into(), "0".into()],
        vec![
            "test".into(),
            "127.0.0.1".into(),
            "-i".into(),
            "0.01".into(),
        ],
        vec!["test".into(), "no.such.host.invalid".into()],
        vec!["serve".into(), "--allow".into(), "nonsense".into()],
        vec![
            "test".into(),
            "127.0.0.1".into(),
            "-b".into(),
            "100M/8".into(),
        ],
        vec!["test".into(), "127.0.0.1".into(), "-f".into(), "x".into()],
        vec![
            "test".into(),
            "-c".into(),
            "127.0.0.1".into(),
            "-n".into(),
            "1M".into(),
            "-O".into(),
            "1".into(),
        ],
    ] {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = tcptune(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{a:?}: {err}");
        assert!(err.starts_with("tcptune: error: "), "{a:?}: {err}");
    }
    // iperf3's front end exits as iperf3 does (1), in iperf3's words.
    let closed = closed.to_string();
    for (a, words) in [
        (
            vec!["iperf3", "-c", "127.0.0.1", "-A", "1"],
            "iperf3: error - ",
        ),
        (
            vec!["iperf3", "-p", "5201"],
            "iperf3: parameter error - must either be a client (-c) or server (-s)",
        ),
        (
            vec!["iperf3", "-c", "127.0.0.1", "-p", &closed, "-t", "1"],
            "iperf3: error - unable to connect to server: Connection refused",
        ),
        (
            vec!["iperf3", "-c", "127.0.0.1", "-F", "/etc/hosts", "--bidir"],
            "iperf3: error - -F /etc/hosts works with one-way TCP tests only",
        ),
    ] {
        let o = tcptune(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{a:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{a:?}: {err}");
        assert!(err.starts_with(words), "{a:?}: {err}");
    }
}

#[test]
fn ctrl_c_ends_the_test_on_both_ends() {
    let (mut srv, port) = serve();
    let mut client = Kill(
        Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .args([
                "test",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-t",
                "60",
                "-i",
                "0.2",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Wait for the first interval line (the test is running), then send SIGINT.
    let rx = line_channel(client.0.stdout.take().unwrap());
    wait_for_line(&rx, Duration::from_secs(10), |l| l.starts_with("[  1]"))
        .expect("interval lines");
    signal(client.0.id(), Signal::Int);
    let status = client.0.wait().unwrap();
    assert_eq!(status.code(), Some(2));
    let mut err = String::new();
    std::io::Read::read_to_string(client.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("interrupted"), "{err}");
    // This end's summary follows, with no verdict drawn from half the evidence.
    let rest: Vec<String> = rx.iter().collect();
    assert!(rest.iter().any(|l| l.ends_with("sender")), "{rest:?}");
    assert!(
        rest.iter()
            .any(|l| l.starts_with("Diagnosis: interrupted before the end")),
        "{rest:?}"
    );
    assert!(
        !rest.iter().any(|l| l.contains("No problem found")),
        "{rest:?}"
    );
    assert!(
        !rest.iter().any(|l| l.starts_with("What would help")),
        "{rest:?}"
    );
    // The server (-1) saw CLIENT_TERMINATE, ended that test and exited: no 60 s wait.
    let start = std::time::Instant::now();
    let status = srv.0.wait().unwrap();
    assert!(status.success());
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn errors_under_iperf3_json_are_json_documents_or_events() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    // A run-time error (nothing listens), a usage error and a refused option.
    for args in [
        vec!["iperf3", "-c", "127.0.0.1", "-p", &closed, "-t", "1", "-J"],
        vec!["iperf3", "-c", "127.0.0.1", "-t", "zero", "--json"],
        vec!["test", "-c", "127.0.0.1", "--fq-rate", "1G", "-J"],
    ] {
        let o = tcptune(&args);
        // iperf3's front end exits 1 on an error, as iperf3; tcptune test exits 2.
        let want = if args[0] == "iperf3" { 1 } else { 2 };
        assert_eq!(o.status.code(), Some(want), "{args:?}");
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&o.stdout)));
        let msg = v["error"].as_str().unwrap();
        assert!(!msg.is_empty() && !msg.contains('\n'), "{args:?}: {msg}");
    }
    let o = tcptune(&["iperf3", "-c", "127.0.0.1", "-p", &closed, "--json-stream"]);
    let events: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["event"], "error");
    assert!(events[0]["data"]
        .as_str()
        .unwrap()
        .contains("unable to connect to server"));
    assert_eq!(events[1]["event"], "end");
}

#[test]
fn serve_detaches_with_a_pid_file_and_a_log_and_ends_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("tcptune-daemon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("serve.pid");
    let logfile = dir.join("serve.log");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    // iperf3's spelling: the parent returns at once, the daemon keeps serving.
    let o = tcptune(&[
        "iperf3",
        "-s",
        "-D",
        "-p",
        &port,
        "-B",
        "127.0.0.1",
        "-I",
        pidfile.to_str().unwrap(),
        "--logfile",
        logfile.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The daemon writes its pid file, then its log's first line; wait for both (bounded).
    let t = std::time::Instant::now();
    let pid: u32 = loop {
        let log = std::fs::read_to_string(&logfile).unwrap_or_default();
        if let (Ok(p), true) = (
            std::fs::read_to_string(&pidfile),
            log.contains("listening on"),
        ) {
            break p.trim().parse().unwrap();
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no daemon: {log}");
        std::thread::sleep(Duration::from_millis(20));
    };
    /// Ends the daemon even if an assertion fails first.
    struct Term(u32);
    impl Drop for Term {
        fn drop(&mut self) {
            // The daemon this test started (the pid from its own pid file).
            signal(self.0, Signal::Term);
        }
    }
    let daemon = Term(pid);
    let o = tcptune(&["test", "-c", "127.0.0.1", "-p", &port, "-n", "1MB", "-J"]);
    let code = o.status.code().unwrap();
    assert!(
        code == 0 || code == 1,
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    drop(daemon);
    let t = std::time::Instant::now();
    while pidfile.exists() {
        assert!(t.elapsed() < Duration::from_secs(5), "the pid file stayed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = std::fs::read_to_string(&logfile).unwrap();
    // iperf3's server text: the banner, then the test's final block.
    assert!(log.starts_with("-----"), "{log}");
    assert!(log.lines().any(|l| l.ends_with("  receiver")), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_binary_named_iperf3_takes_iperf3s_command_line() {
    let dir = std::env::temp_dir().join(format!("tcptune-as-iperf3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("iperf3");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tcptune"), &link).unwrap();
    let o = Command::new(&link).arg("-v").output().unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("tcptune "));
    let (_srv, port) = serve();
    let o = Command::new(&link)
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-n", "1M", "-J"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    // iperf3's document at the top level: no envelope.
    assert_eq!(v["start"]["test_start"]["bytes"], 1 << 20);
    assert!(v["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0);
    assert!(v.get("result").is_none() && v["tcptune"]["diagnosis"].is_object());
    let _ = std::fs::remove_dir_all(&dir);
}
