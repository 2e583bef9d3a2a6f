//! `tcptune conns` on recorded kernel answers (fixtures/kernel/6.18, see its README), without
//! root: the table and JSON say what the capture program did, and filters apply.

use std::process::Command;

use serde_json::Value;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/kernel/6.18/");

fn conns(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .arg("conns")
        .args(args)
        .env("TCPTUNE_REPLAY_SOCK_DIAG", format!("{DIR}dump-loopback.nl"))
        .env("TCPTUNE_REPLAY_KERNEL", "6.18.44")
        .output()
        .unwrap()
}

fn facts() -> Value {
    serde_json::from_slice(&std::fs::read(format!("{DIR}facts.json")).unwrap()).unwrap()
}

#[test]
fn recorded_dump_gives_the_captured_verdicts() {
    let port = facts()["server_port"].as_u64().unwrap();
    let out = conns(&["--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["command"], "conns");
    let rows = v["result"]["connections"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let server = rows
        .iter()
        .find(|c| c["local"].as_str().unwrap().ends_with(&format!(":{port}")))
        .unwrap();
    // The client's 4 KiB SO_RCVBUF limited the server's sending all of its busy time.
    assert_eq!(server["verdict"]["limit"], "receiver_window");
    assert_eq!(server["verdict"]["share"], 1.0);
    assert_eq!(server["snapshot"]["snd_wnd_bytes"], 4096);
    assert_eq!(server["congestion"], "bbr");
    let client = rows.iter().find(|c| c != &server).unwrap();
    // The receiving end alone over its life gives no rate to set against its window: the
    // verdict says the sender's side is what would tell.
    assert_eq!(client["verdict"]["limit"], "not_enough_evidence");
    assert!(client["verdict"]["missing"][0]
        .as_str()
        .unwrap()
        .contains("sending end"));
    assert_eq!(client["snapshot"]["negotiated"]["rcv_wscale"], 0);
}

#[test]
fn text_table_and_filters_on_a_recording() {
    let port = facts()["server_port"].as_u64().unwrap().to_string();
    let out = conns(&["sport", &port]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "header and the server's row: {text}");
    assert!(lines[0].starts_with("STATE"));
    assert!(lines[1].starts_with("ESTAB"));
    assert!(
        lines[1].contains("receiver-window limited 100% of its busy time at ")
            && lines[1].contains(": its window 4 KiB"),
        "{}",
        lines[1]
    );
    // A filter that matches nothing.
    let out = conns(&["dport", "1-2"]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "no TCP connections match\n"
    );
}

#[test]
fn watch_closed_replays_the_recorded_destroy_events() {
    let port = facts()["server_port"].as_u64().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(["watch", "--closed", "--json"])
        .env(
            "TCPTUNE_REPLAY_SOCK_DIAG",
            format!("{DIR}destroy-events.nl"),
        )
        .env("TCPTUNE_REPLAY_KERNEL", "6.18.44")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output().unwrap()));
    // A replay ends by itself; listening to the live kernel instead would never end. The
    // deadline only bounds a failure: the pass case returns as soon as the replay is done.
    let out = match rx.recv_timeout(std::time::Duration::from_secs(20)) {
        Ok(out) => out,
        Err(_) => {
            // The child this test started.
            tcptune_testkit::signal(pid, tcptune_testkit::Signal::Kill);
            panic!("watch --closed did not end on a replay (it listens to the live kernel)");
        }
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Client and server closed (the listener, unconnected, is not a connection).
    assert_eq!(lines.len(), 2, "{text}");
    for l in &lines {
        assert_eq!(l["closed"], true, "{l}");
        let ends = format!("{} {}", l["local"], l["remote"]);
        assert!(ends.contains(&format!(":{port}")), "{ends}");
    }
}
