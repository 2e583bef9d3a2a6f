//! `tcptune iperf3` as a client, on what a new user meets beyond the JSON: the messages of a
//! wrong address family and of `-v`, a real iperf3 3.12 server's state not leaking into
//! later tests (its server keeps `--get-server-output` for the tests after one that asked),
//! and iperf3 3.12's options that change the output or the run (`-t 0`, `--timestamps`,
//! a server's `-i`/`-f`) against real iperf3 servers and clients.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tcptune_testkit::{line_channel, signal, wait_for_line, Kill, Signal};

fn tcptune_iperf3(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .arg("iperf3")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_wrong_family_is_named_as_iperf3_names_it() {
    for (flag, host, asked) in [("-6", "127.0.0.1", "IPv6"), ("-4", "::1", "IPv4")] {
        let o = tcptune_iperf3(&[flag, "-c", host, "-t", "1"]);
        assert!(!o.status.success());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains("address family for hostname not supported"),
            "{flag} {host}: {e}"
        );
        assert!(e.contains(&format!("no {asked} address")), "{e}");
        assert!(!e.contains("cannot resolve"), "{e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
    // A name that does not resolve at all is still that.
    let o = tcptune_iperf3(&["-c", "no-such-host.invalid", "-t", "1"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot resolve"));
}

#[test]
fn version_names_both_protocols() {
    let o = tcptune_iperf3(&["-v"]);
    assert!(o.status.success());
    let v = String::from_utf8_lossy(&o.stdout);
    assert!(v.contains("TCP and UDP"), "{v}");
}

#[test]
fn server_output_is_shown_only_when_asked_even_when_iperf3_sends_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut srv = Kill(
        Command::new("iperf3")
            .args(["-s", "-p", &port, "--forceflush"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 is installed (scripts/deps)"),
    );
    let lines = line_channel(srv.0.stdout.take().unwrap());
    let ready = || {
        wait_for_line(&lines, Duration::from_secs(20), |l| {
            l.contains("Server listening")
        })
        .expect("iperf3 -s ready");
    };
    ready();
    let test = |extra: &[&str]| {
        let mut args = vec!["-c", "127.0.0.1", "-p", &port, "-t", "1"];
        args.extend(extra);
        let o = tcptune_iperf3(&args);
        ready();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o
    };
    let asked: Value =
        serde_json::from_slice(&test(&["--get-server-output", "-J"]).stdout).unwrap();
    assert!(asked["server_output_text"].is_string(), "{asked}");
    // iperf3 3.12's server still sends it; our client, as iperf3's, does not show it.
    let later: Value = serde_json::from_slice(&test(&["-J"]).stdout).unwrap();
    assert!(later.get("server_output_text").is_none(), "{later}");
    assert!(later.get("server_output_json").is_none(), "{later}");
    let text = String::from_utf8_lossy(&test(&[]).stdout).to_string();
    assert!(!text.contains("Server output"), "{text}");
}

/// An `iperf3 -s` on a free port, ready, with its output lines.
fn iperf3_server(extra: &[&str]) -> (Kill, String, std::sync::mpsc::Receiver<String>) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut srv = Kill(
        Command::new("iperf3")
            .args(["-s", "-p", &port, "--forceflush"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 is installed (scripts/deps)"),
    );
    let lines = line_channel(srv.0.stdout.take().unwrap());
    wait_for_line(&lines, Duration::from_secs(20), |l| {
        l.contains("Server listening")
    })
    .expect("iperf3 -s ready");
    (srv, port, lines)
}

#[test]
fn t0_runs_until_interrupted_and_timestamps_prefix_each_line() {
    let (_srv, port, _lines) = iperf3_server(&[]);
    let mut client = Kill(
        Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .args([
                "iperf3",
                "-c",
                "127.0.0.1",
                "-p",
                &port,
                "-t",
                "0",
                "-i",
                "0.2",
            ])
            .arg("--timestamps=<%Y> ")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let rx = line_channel(client.0.stdout.take().unwrap());
    // -t 0 has no end: the sixth interval (past a second) comes, and only SIGINT ends it.
    let seen = wait_for_line(&rx, Duration::from_secs(20), |l| l.contains("1.00-1.20"))
        .unwrap_or_else(|e| panic!("-t 0 stopped early: {e:?}"));
    signal(client.0.id(), Signal::Int);
    let status = client.0.wait().unwrap();
    // As iperf3's client: the summary of what this end saw, then its interrupt error, exit 1.
    assert_eq!(status.code(), Some(1));
    let mut err = String::new();
    std::io::Read::read_to_string(client.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(err, "iperf3: interrupt - the client has terminated\n");
    let rest: Vec<String> = rx.iter().collect();
    assert!(rest.iter().any(|l| l.ends_with("sender")), "{rest:?}");
    assert!(rest.iter().any(|l| l.ends_with("receiver")), "{rest:?}");
    assert!(!rest.iter().any(|l| l.contains("iperf Done")), "{rest:?}");
    // Every line, header included, starts with the formatted time.
    assert!(seen.len() >= 7, "{seen:?}");
    for l in &seen {
        assert!(
            l.starts_with("<20") && l.as_bytes().get(5) == Some(&b'>'),
            "{l}"
        );
    }
}

#[test]
fn socket_options_take_effect() {
    let (_srv, port, _lines) = iperf3_server(&[]);
    // --fq-rate caps the pacing rate (SO_MAX_PACING_RATE): 200 Mbit/s on a loopback that
    // carries tens of Gbit/s.
    let o = tcptune_iperf3(&[
        "-c",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1",
        "--fq-rate",
        "200M",
        "-J",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rate = v["end"]["sum_sent"]["bits_per_second"].as_f64().unwrap();
    // (The first round trips go out before pacing applies, so a 1 s average is a little above.)
    assert!(rate < 260e6 && rate > 50e6, "{rate}");
    // A device that does not exist is the system's answer, in one sentence.
    let o = tcptune_iperf3(&[
        "-c",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1",
        "--bind-dev",
        "tt-nodev0",
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.contains("No such device"), "{e}");
    // A bad DSCP name is named.
    let o = tcptune_iperf3(&["-c", "127.0.0.1", "-p", &port, "--dscp", "XX"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a DSCP"));
}

#[test]
fn a_server_command_line_with_i_and_f_serves_iperf3() {
    // `iperf3 -s -i 10 -f m` as service units have it: tcptune serves, an iperf3 client tests.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut srv = Kill(
        Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .args([
                "iperf3", "-s", "-p", &port, "-i", "10", "-f", "m", "-d", "-1",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let lines = line_channel(srv.0.stdout.take().unwrap());
    wait_for_line(&lines, Duration::from_secs(20), |l| {
        l.starts_with("Server listening on")
    })
    .expect("tcptune iperf3 -s ready");
    let o = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port, "-t", "1", "-J"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.get("error").is_none(), "{v}");
    assert!(srv.0.wait().unwrap().success());
}

#[test]
fn server_max_duration_ends_a_longer_test() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut srv = Kill(
        Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .args([
                "iperf3",
                "-s",
                "-p",
                &port,
                "--server-max-duration",
                "1",
                "-1",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let lines = line_channel(srv.0.stdout.take().unwrap());
    // A failed test's "iperf3: error - …" goes to standard error, as iperf3's server writes it.
    let errors = line_channel(srv.0.stderr.take().unwrap());
    wait_for_line(&lines, Duration::from_secs(20), |l| {
        l.starts_with("Server listening on")
    })
    .expect("tcptune iperf3 -s ready");
    let started = std::time::Instant::now();
    let o = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port, "-t", "30", "-J"])
        .output()
        .unwrap();
    // Ended by the server after its 1 s (plus the handshake), not after the asked 30 s.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.get("error").is_some(), "{v}");
    let log = wait_for_line(&errors, Duration::from_secs(20), |l| {
        l.starts_with("iperf3: error - ")
    })
    .expect("the server logs the test it ended");
    assert!(log.last().unwrap().contains("in time"), "{log:?}");
    assert!(srv.0.wait().unwrap().success());
}
