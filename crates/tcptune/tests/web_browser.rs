//! `tcptune watch --web` in a real browser: a transfer between two namespaces whose receiver
//! reads slowly through a 4 KiB buffer (so its window limits it), the page opened by Debian's
//! headless Chromium for the sending socket (`?conn=COOKIE`), its DOM dumped twice: the charts
//! hold more points the second time, and the verdict is the class `tcptune conns --json` gives
//! that socket. A screenshot is kept under target/ to look at. Also: a recording of the session
//! opens with `tcptune view`, and a bad address or a port in use is one sentence and exit 2.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::serving::{address, get, serving, snapshot};
use serde_json::Value;
use tcptune_testkit::cdp::chromium;
use tcptune_testkit::sock::{self, listen};
use tcptune_testkit::{privileged, veth_pair, wait_for, Kill, Netns, TempDir};

fn tcptune() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
}

fn in_ns<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> T {
    tcptune_kernel::sys::in_netns(ns.name(), f).unwrap()
}

/// [`serving`], checking that standard error's first line starts with `warning`.
fn serving_err(args: &[&str], warning: &str) -> (Kill, SocketAddr) {
    let mut child = tcptune()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with(warning), "{line}");
    let mut out = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut out)
        .unwrap();
    (Kill(child), address(&out))
}

/// Runs headless Chromium on `url` with `args`, within a deadline.
fn browser(exe: &Path, profile: &Path, args: &[&str], url: &str) -> std::process::Output {
    let mut child = tcptune_testkit::cdp::headless(exe, profile)
        .arg("--virtual-time-budget=5000")
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50)); // polling the child's exit
    }
    child.wait_with_output().unwrap()
}

/// An attribute's value on the element with `id` in a dumped DOM.
fn attr(html: &str, id: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("id=\"{id}\""))?;
    let start = html[..at].rfind('<')?;
    let end = at + html[at..].find('>')?;
    let tag = &html[start..end];
    let v = tag.split(&format!("{name}=\"")).nth(1)?;
    Some(v[..v.find('"')?].to_string())
}

/// A sender in `tx` to a receiver in `rx` that reads 4 KiB every 2 ms through a 4 KiB buffer,
/// until `stop`.
fn slow_receiver(tx: &Netns, rx: &Netns, addr: &str, port: u16, stop: &Arc<AtomicBool>) {
    let l: TcpListener = in_ns(rx, || listen(&format!("{addr}:{port}"), Some(4096)));
    let target: SocketAddr = format!("{addr}:{port}").parse().unwrap();
    let mut client = in_ns(tx, || {
        sock::connect(
            target,
            sock::Before {
                congestion: Some("reno"),
                ..Default::default()
            },
        )
    });
    let (mut server, _) = l.accept().unwrap();
    let s = stop.clone();
    std::thread::spawn(move || {
        let buf = vec![0x42u8; 65536];
        while !s.load(Ordering::SeqCst) && client.write_all(&buf).is_ok() {}
    });
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 4096];
        while let Ok(n) = server.read(&mut buf) {
            if n == 0 {
                break;
            }
            // The application's reading pace is what the test provokes.
            std::thread::sleep(Duration::from_millis(2));
        }
    });
}

#[test]
fn the_page_shows_a_transfer_growing_and_the_engines_verdict() {
    if !privileged("the_page_shows_a_transfer_growing_and_the_engines_verdict") {
        return;
    }
    let Some(exe) = chromium() else {
        tcptune_testkit::skip_without_tool(
            "the_page_shows_a_transfer_growing_and_the_engines_verdict",
            "chromium is not installed (scripts/deps installs it)",
        );
        return;
    };
    let (a, b) = (Netns::new("weba"), Netns::new("webb"));
    let (_, addr) = veth_pair(&a, &b, 74);
    let stop = Arc::new(AtomicBool::new(false));
    slow_receiver(&a, &b, &addr, 5311, &stop);
    let dir = TempDir::new("web-browser");
    let rec = dir.path().join("session.jsonl");
    let (watch, web) = serving(&[
        "watch",
        "--web",
        "127.0.0.1:0",
        "--netns",
        a.name(),
        "--record",
        rec.to_str().unwrap(),
        "dport",
        "5311",
    ]);
    let conns = tcptune()
        .args(["conns", "--json", "--netns", a.name(), "dport", "5311"])
        .output()
        .unwrap();
    assert!(
        conns.status.success(),
        "{}",
        String::from_utf8_lossy(&conns.stderr)
    );
    let doc: Value = serde_json::from_slice(&conns.stdout).unwrap();
    let row = &doc["result"]["connections"][0];
    let (cookie, limit) = (
        row["cookie"].as_u64().unwrap(),
        row["verdict"]["limit"].as_str().unwrap().to_string(),
    );
    assert_eq!(
        limit, "receiver_window",
        "the engine's class for the provoked limit: {row}"
    );
    let id = cookie.to_string();
    wait_for(
        "the connection's first points",
        Duration::from_secs(30),
        || {
            std::thread::sleep(Duration::from_millis(300)); // pacing the probe
            snapshot(web, &id)["points"]
                .as_array()
                .is_some_and(|p| p.len() >= 2)
        },
    );

    // `for=2`: the page streams for two seconds, then its stream ends, so the browser's dump
    // (which waits for open requests) happens with what the stream brought.
    let url = format!("http://{web}/?conn={id}&for=2");
    let profile = dir.path().join("chromium-profile");
    let dump = |n: usize| {
        let out = browser(&exe, &profile, &["--dump-dom"], &url);
        assert!(
            out.status.success(),
            "dump {n}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let points = |html: &str, chart: &str| -> usize {
        attr(html, chart, "data-points")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let first = dump(1);
    let n1 = points(&first, "c-rate");
    // A second look after more samples were taken (four a second).
    wait_for("more points on the server", Duration::from_secs(30), || {
        std::thread::sleep(Duration::from_millis(300)); // pacing the probe
        snapshot(web, &id)["points"]
            .as_array()
            .is_some_and(|p| p.len() > n1 + 4)
    });
    let second = dump(2);
    let n2 = points(&second, "c-rate");
    assert!(n1 >= 2 && n2 > n1, "points did not grow: {n1} then {n2}");
    for chart in ["c-win", "c-rtt", "c-seq", "c-triage"] {
        assert!(points(&second, chart) >= 2, "{chart} has no points");
    }
    assert_eq!(
        attr(&second, "detail", "data-conn").as_deref(),
        Some(id.as_str())
    );
    assert_eq!(
        attr(&second, "verdict", "data-limit").as_deref(),
        Some(limit.as_str()),
        "the page's verdict"
    );
    let banner = attr(&second, "source", "data-per-ack").unwrap_or_default();
    assert!(
        banner == "true" || banner == "false",
        "no banner: {banner:?}"
    );
    if banner == "false" {
        assert!(
            second.contains("Polled from sock_diag every 250 ms"),
            "the fallback is not stated"
        );
    }

    // A screenshot to look at: target/tcptune-web-scope.png.
    let shot = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tcptune-web-scope.png");
    let out = browser(
        &exe,
        &profile,
        &[&format!("--screenshot={}", shot.display())],
        &url,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let blue = buf[..info.buffer_size()]
        .chunks(channels)
        .filter(|px| {
            px[..3]
                .iter()
                .zip([0x00u8, 0x72, 0xB2])
                .all(|(a, b)| (*a as i32 - b as i32).abs() < 40)
        })
        .count();
    assert!(
        blue > 200,
        "no chart lines in the screenshot ({blue} blue pixels)"
    );
    stop.store(true, Ordering::SeqCst);
    drop(watch);

    // The recording opens in the same page, offline, with the points it streamed.
    let (_view, vaddr) = serving(&["view", rec.to_str().unwrap(), "--web", "127.0.0.1:0"]);
    let replayed = snapshot(vaddr, &id);
    assert!(
        replayed["points"].as_array().unwrap().len() >= n2,
        "{replayed}"
    );
    assert_eq!(get(vaddr, "/api/connections?filter=dport%205311").0, 200);
}

#[test]
fn bad_addresses_and_busy_ports_are_one_sentence_and_exit_2() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let out = tcptune()
        .args(["watch", "--web", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        format!("tcptune: error: cannot listen on 127.0.0.1:{port}: the port is in use; pick another with --listen ADDR:PORT")
    );
    let out = tcptune()
        .args(["watch", "--web", "192.0.2.1:80"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--web 192.0.2.1:80 is not a loopback address") && err.lines().count() == 1,
        "{err}"
    );
    let out = tcptune()
        .args(["watch", "--listen", "192.0.2.1:80"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot listen on 192.0.2.1:80: the address is not one of this host's"),
        "{err}"
    );
    // --listen widens, with the exporter's warning.
    let (_wide, _) = serving_err(
        &["watch", "--listen", "0.0.0.0:0"],
        "tcptune: warning: listening on 0.0.0.0:0 serves other hosts without",
    );
    let out = tcptune()
        .args(["watch", "--web", "nonsense"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_api_is_read_only_and_checks_its_filter() {
    let (_w, web) = serving(&["watch", "--web", "127.0.0.1:0"]);
    let (code, body) = get(web, "/api/connections?filter=dport%20banana");
    assert_eq!(code, 400);
    assert!(
        body.starts_with("bad filter 'dport banana'") && body.trim().lines().count() == 1,
        "{body}"
    );
    let (code, body) = get(web, "/api/connections?filter=state%20established");
    assert_eq!(code, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["connections"].is_array() && v["source"]["interval_s"].is_number());
    let mut s = TcpStream::connect(web).unwrap();
    write!(
        s,
        "POST /api/connections HTTP/1.0\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(
        resp.starts_with("HTTP/1.0 405") || resp.starts_with("HTTP/1.1 405"),
        "{resp}"
    );
    assert_eq!(get(web, "/api/stream?conn=nope").0, 404);
    let (code, page) = get(web, "/");
    assert_eq!(code, 200);
    assert!(page.contains("assets/uPlot.iife.min.js"));
    assert_eq!(get(web, "/assets/uPlot.iife.min.js").0, 200);
}

#[test]
fn a_recording_opens_offline_and_a_bad_one_is_one_sentence() {
    let dir = TempDir::new("web-view");
    let rec = dir.path().join("rec.jsonl");
    let point = |t: f64| {
        format!("{{\"type\":\"point\",\"id\":\"42\",\"point\":{{\"t_s\":{t},\"goodput_bps\":1000000.0,\"cwnd_bytes\":14480}}}}\n")
    };
    let mut text = String::from("{\"record\":\"tcptune-web/1\",\"tcptune\":\"0.1.0\",\"source\":{\"per_ack\":false,\"interval_s\":0.25}}\n");
    text += "{\"type\":\"rows\",\"t_s\":0.5,\"rows\":[]}\n";
    for t in [0.25, 0.5, 0.75] {
        text += &point(t);
    }
    std::fs::write(&rec, &text).unwrap();
    let (_view, addr) = serving(&["view", rec.to_str().unwrap(), "--web", "127.0.0.1:0"]);
    let v = snapshot(addr, "42");
    let ts: Vec<f64> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["t_s"].as_f64().unwrap())
        .collect();
    assert_eq!(ts, vec![0.25, 0.5, 0.75]);
    let (_, body) = get(addr, "/api/connections");
    let t: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(t["source"]["reason"], "a recording");

    std::fs::write(&rec, "{\"type\":\"point\"}\n").unwrap();
    let out = tcptune()
        .args(["view", rec.to_str().unwrap(), "--web", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("tcptune: error: reading the recording ")
            && err.trim().lines().count() == 1,
        "{err}"
    );
}

/// One HTTP/1.0 GET with Basic credentials (base64 of `user:password`): the status.
fn get_as(addr: SocketAddr, path: &str, basic: &str) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: test\r\nAuthorization: Basic {basic}\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_page_follows_the_exporters_web_configuration() {
    let dir = TempDir::new("web-config");
    let web = dir.path().join("web.yml");
    // alice:s3cret, bcrypt cost 4 (the hash tests/exporter.rs uses).
    let hash = "$2b$04$abcdefghijklmnopqrstuuLZYjhNQAOdpbzt4WxWlUHjv1wsyH5DG";
    std::fs::write(&web, format!("basic_auth_users:\n  alice: {hash}\n")).unwrap();
    let (_w, addr) = serving(&[
        "watch",
        "--web",
        "127.0.0.1:0",
        "--web-config",
        web.to_str().unwrap(),
    ]);
    assert_eq!(get(addr, "/").0, 401);
    assert_eq!(get(addr, "/api/connections").0, 401);
    assert_eq!(get_as(addr, "/api/connections", "YWxpY2U6d3Jvbmc="), 401);
    assert_eq!(get_as(addr, "/api/connections", "YWxpY2U6czNjcmV0"), 200);
    assert_eq!(get_as(addr, "/assets/app.js", "YWxpY2U6czNjcmV0"), 200);
}

/// curl over TLS, trusting `ca`: (exit code, body).
fn curl_tls(ca: &Path, url: &str) -> (i32, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert"])
        .arg(ca)
        .arg(url)
        .output()
        .expect("curl (scripts/deps) runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_page_and_its_streams_are_served_over_tls() {
    let dir = TempDir::new("web-tls");
    let c = tcptune_testkit::certs::Certs::make(dir.path(), "w");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: w-server.pem\n  key_file: w-server.key\n",
    )
    .unwrap();
    // A loopback connection carrying a little data (a few ACKs a tick: a stream over TLS in
    // a debug build must keep up, or the hub drops it as a slow page), for the live stream.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut rx, _) = l.accept().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let sender = std::thread::spawn(move || {
        while !s.load(Ordering::SeqCst) && tx.write_all(&[7u8; 4096]).is_ok() {
            // The application's sending pace is what the test provokes.
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while rx.read(&mut buf).is_ok_and(|n| n > 0) {}
    });
    let dport = format!("dport :{port}");
    let (watch, addr) = serving(&[
        "watch",
        "--web",
        "127.0.0.1:0",
        "--web-config",
        web.to_str().unwrap(),
        &dport,
    ]);
    let ca = c.path("ca.pem");
    let base = format!("https://{addr}");
    // Plain HTTP on the TLS port is told so, as by the exporter.
    let (code, body) = get(addr, "/");
    assert_eq!(code, 400, "{body}");
    let (code, page) = curl_tls(&ca, &format!("{base}/"));
    assert_eq!(code, 0, "{page}");
    assert!(page.contains("assets/uPlot.iife.min.js"), "{page}");
    let mut id = String::new();
    wait_for(
        "the connection in the table",
        Duration::from_secs(30),
        || {
            std::thread::sleep(Duration::from_millis(200)); // pacing the probe
            let (_, body) = curl_tls(&ca, &format!("{base}/api/connections"));
            let t: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            if let Some(r) = t["connections"].as_array().and_then(|r| r.first()) {
                id = r["id"].as_str().unwrap_or_default().to_string();
            }
            !id.is_empty()
        },
    );
    // The Server-Sent Events stream over TLS: the snapshot, updates as they come, the end.
    let (code, events) = curl_tls(&ca, &format!("{base}/api/stream?conn={id}&for=2"));
    assert_eq!(code, 0, "{events}");
    let first = events.find("event: snapshot").expect("a snapshot");
    let update = events.find("event: update").expect("updates after it");
    let end = events.rfind("event: end").expect("the end of the stream");
    assert!(first < update && update < end, "{events}");
    stop.store(true, Ordering::SeqCst);
    sender.join().unwrap();
    drop(watch);
    reader.join().unwrap();
}
