//! `tcptune iperf3` as a client, on what a new user meets beyond the JSON: the messages of a
//! wrong address family and of `-v`, and a real iperf3 3.12 server's state not leaking into
//! later tests (its server keeps `--get-server-output` for the tests after one that asked).

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tcptune_testkit::{line_channel, wait_for_line, Kill};

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
