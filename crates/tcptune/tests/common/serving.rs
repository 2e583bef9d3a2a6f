//! A serving tcptune command started for a test: `watch --web`, `view` and `exporter` with
//! their address read from the first line they print (`… http://ADDR/…` or `https://ADDR/…`),
//! and `tcptune serve` on a free loopback port.

#![allow(dead_code)] // each test file uses the part it needs

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};

use std::sync::mpsc::Receiver;
use std::time::Duration;

use serde_json::Value;
use tcptune_testkit::{line_channel, wait_for_line, Kill};

/// Starts `tcptune ARGS` (standard error inherited); returns it and the address its first
/// line prints.
pub fn serving(args: &[&str]) -> (Kill, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (Kill(child), address(&line))
}

/// `tcptune serve -p PORT ARGS` on a free loopback port, once it says it listens: the server,
/// its port and its log, a line at a time (read by a thread, so the server never blocks on a
/// full pipe).
pub fn serve_on_loopback(args: &[&str]) -> (Kill, u16, Receiver<String>) {
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let p = port.to_string();
        let mut child = Kill(
            Command::new(env!("CARGO_BIN_EXE_tcptune"))
                .args(["serve", "-p", &p])
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let rx = line_channel(child.0.stdout.take().unwrap());
        // A closed pipe (the port was taken meanwhile) ends the wait early: try another.
        if let Ok(seen) = wait_for_line(&rx, Duration::from_secs(10), |_| true) {
            if seen[0].starts_with("listening on") {
                return (child, port, rx);
            }
        }
    }
    panic!("tcptune serve did not start on a free port in five attempts");
}

/// [`serve_on_loopback`] with its log read and dropped.
pub fn serve_draining(args: &[&str]) -> (Kill, u16) {
    let (child, port, log) = serve_on_loopback(args);
    std::thread::spawn(move || while log.recv().is_ok() {});
    (child, port)
}

/// The address in a serving command's first line.
pub fn address(line: &str) -> SocketAddr {
    line.split("://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
}

/// One HTTP/1.0 GET: (status, body).
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    get_as(addr, path, None)
}

/// One HTTP/1.0 GET with basic-auth credentials (`user:password` in base64), if any:
/// (status, body).
pub fn get_as(addr: SocketAddr, path: &str, auth: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let auth = auth
        .map(|a| format!("Authorization: Basic {a}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.0\r\nHost: test\r\n{auth}\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = resp.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_string())
}

/// The snapshot event of a stream (the connection's history so far), as JSON; null when
/// the server has no such connection (yet).
pub fn snapshot(addr: SocketAddr, id: &str) -> Value {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /api/stream?conn={id} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let mut event = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return Value::Null;
        }
        if let Some(e) = line.strip_prefix("event: ") {
            event = e.trim().to_string();
        } else if let Some(d) = line.strip_prefix("data: ") {
            // The store's bounds come first; the snapshot is what the callers want.
            if event == "snapshot" {
                return serde_json::from_str(d).unwrap();
            }
        }
    }
}
