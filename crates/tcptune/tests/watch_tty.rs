//! `tcptune watch` on a real terminal: run inside a pseudo-terminal of 80 columns (util-linux
//! `script`, which gives the child a pty and copies our pipe to it as typed keys), its frames
//! must fit the width without a line broken inside a word, and `q` must end it.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use tcptune_testkit::Kill;
use tcptune_testkit::{line_channel, wait_for_line, NoLine};

/// A shell word: `s` in single quotes.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn watch_fits_80_columns_and_q_quits() {
    // A connection for the table: loopback, idle, both ends in this process.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let _server = listener.accept().unwrap();

    let watch = format!(
        "stty cols 80 rows 40; exec {} watch --interval 100ms port {port}",
        quoted(env!("CARGO_BIN_EXE_tcptune"))
    );
    let child = Command::new("script")
        .args(["-q", "-e", "-c", &watch, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs (scripts/deps installs bsdutils)");
    let mut child = Kill(child);
    let lines = line_channel(child.0.stdout.take().unwrap());
    // Two frames drawn: the second one's header says so, and the first frame is whole.
    let frames = wait_for_line(&lines, Duration::from_secs(20), |l| {
        l.contains("t=0.1s") || l.contains("t=0.2s")
    })
    .unwrap_or_else(|e| panic!("no second frame: {e:?}"));
    let text: Vec<String> = frames
        .iter()
        .map(|l| l.trim_end_matches('\r').replace("\x1b[H\x1b[2J", ""))
        .collect();
    // The first frame: from its title to the next title.
    let first: Vec<&String> = text
        .iter()
        .skip_while(|l| !l.starts_with("tcptune watch"))
        .skip(1)
        .take_while(|l| !l.starts_with("tcptune watch"))
        .collect();
    assert!(first.len() >= 3, "header and rows: {text:#?}");
    for l in &first {
        assert!(l.chars().count() <= 80, "wider than 80 columns: {l:?}");
    }
    // Each row (its address line) continues under LOCAL with the columns that did not fit,
    // aligned with the header's continued column names.
    assert!(first[0].starts_with("STATE"), "{first:#?}");
    assert!(first[1].starts_with("            PEER WND"), "{first:#?}");
    let row = first
        .iter()
        .position(|l| l.contains(&format!(":{port} ")))
        .unwrap_or_else(|| panic!("the connection is listed: {first:#?}"));
    assert!(first[row + 1].starts_with("           "), "{first:#?}");
    // No word is cut at the edge: the header's names are whole.
    let names: Vec<&str> = first[..2]
        .iter()
        .flat_map(|l| l.split_whitespace())
        .collect();
    assert_eq!(
        names,
        ["STATE", "LOCAL", "REMOTE", "RTT", "CWND", "PEER", "WND", "RATE", "VERDICT"]
    );

    // `q` quits: the output ends and the exit status is 0.
    let mut keys = child.0.stdin.take().unwrap();
    keys.write_all(b"q").unwrap();
    keys.flush().unwrap();
    match wait_for_line(&lines, Duration::from_secs(20), |_| false) {
        Err(NoLine::Ended(_)) => {}
        other => panic!("watch kept running after q: {other:?}"),
    }
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status}");
    drop(keys);
}
