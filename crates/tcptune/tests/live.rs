//! Privileged tests of `tcptune conns` and `tcptune watch` against real connections in
//! network namespaces made by the testkit: each test makes TCP do something known (a receiver
//! with a tiny window, an application that writes slowly, a connection that closes between
//! polls) and checks that the verdict and the figures say what the test did. Bad input (unknown
//! namespace, bad filter, no permission) must give one sentence and exit 2.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tcptune_testkit::sock::{self, listen};
use tcptune_testkit::{privileged, veth_pair, Netns};

/// The tests that judge timing (limit shares, verdicts) take turns.
use tcptune_testkit::one_at_a_time as turn;

fn tcptune() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
}

/// Runs `f` on a thread inside the namespace: sockets made there belong to it.
fn in_ns<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> T {
    tcptune_kernel::sys::in_netns(ns.name(), f).unwrap()
}

/// A connection to `addr` (from the calling thread's namespace) with SO_SNDBUF = `sndbuf` when
/// given. Reno (built into every kernel) does not pace: with BBR, the time spent pacing counts
/// as the network's share and blurs the limit these tests provoke.
fn connect(addr: SocketAddr, sndbuf: Option<i32>) -> TcpStream {
    sock::connect(
        addr,
        sock::Before {
            sndbuf,
            congestion: Some("reno"),
            ..sock::Before::default()
        },
    )
}

/// Two namespaces joined by a veth pair: the sender in `a` (198.18.N.1), the receiver in `b`.
struct Pair {
    a: Netns,
    b: Netns,
    addr_b: String,
}

fn pair(purpose: &str, octet: u8) -> Pair {
    let a = Netns::new(&format!("{purpose}a"));
    let b = Netns::new(&format!("{purpose}b"));
    let (_, addr_b) = veth_pair(&a, &b, octet);
    Pair { a, b, addr_b }
}

impl Pair {
    /// One connection from A to B's `port`: (client end in A, server end in B), the server's
    /// listener with `rcvbuf` set before listen when given.
    fn connected(&self, port: u16, rcvbuf: Option<i32>) -> (TcpStream, TcpStream) {
        let l = in_ns(&self.b, || {
            listen(&format!("{}:{port}", self.addr_b), rcvbuf)
        });
        let target: SocketAddr = format!("{}:{port}", self.addr_b).parse().unwrap();
        let client = in_ns(&self.a, || connect(target, None));
        let (server, _) = l.accept().unwrap();
        (client, server)
    }
}

/// Runs tcptune with `args` and returns the JSON result, asserting exit 0.
fn json(args: &[&str]) -> Value {
    let out = tcptune().args(args).arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "tcptune {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["result"].clone()
}

fn sender_row(result: &Value, remote_port: u16) -> &Value {
    result["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["remote"]
                .as_str()
                .unwrap()
                .ends_with(&format!(":{remote_port}"))
        })
        .unwrap_or_else(|| panic!("no connection to port {remote_port} in {result}"))
}

/// A receiver that reads `chunk` bytes every `every` (or as fast as it can), counting bytes.
fn reader(mut s: TcpStream, chunk: usize, every: Option<Duration>) -> Arc<AtomicU64> {
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; chunk];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => c.fetch_add(n as u64, Ordering::SeqCst),
            };
            if let Some(d) = every {
                // The application's reading pace is what this test is about.
                std::thread::sleep(d);
            }
        }
    });
    count
}

/// A writer that writes `chunk` bytes every `every` (or as fast as the socket takes them)
/// until `stop`, counting bytes written.
fn writer(
    mut s: TcpStream,
    chunk: usize,
    every: Option<Duration>,
    stop: Arc<AtomicBool>,
) -> Arc<AtomicU64> {
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        let buf = vec![0x42u8; chunk];
        while !stop.load(Ordering::SeqCst) {
            if s.write_all(&buf).is_err() {
                return;
            }
            c.fetch_add(chunk as u64, Ordering::SeqCst);
            if let Some(d) = every {
                std::thread::sleep(d);
            }
        }
    });
    count
}

#[test]
fn tiny_receive_buffer_makes_the_sender_receiver_window_limited() {
    if !privileged("tiny_receive_buffer_makes_the_sender_receiver_window_limited") {
        return;
    }
    let _turn = turn();
    let p = pair("rwnd", 61);
    let port = 5201;
    let (client, server) = p.connected(port, Some(4096));
    let stop = Arc::new(AtomicBool::new(false));
    let shut = client.try_clone().unwrap();
    let written = writer(client, 64 * 1024, None, stop.clone());
    // The receiver reads 4 KiB every 2 ms: its window, not the path, sets the pace.
    let read = reader(server, 4096, Some(Duration::from_millis(2)));
    let before = read.load(Ordering::SeqCst);
    let r = json(&[
        "conns",
        "--netns",
        p.a.name(),
        "--over",
        "1s",
        "--all",
        "dport",
        &port.to_string(),
    ]);
    let after = read.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    shut.shutdown(Shutdown::Both).unwrap();

    let c = sender_row(&r, port);
    assert_eq!(c["state"], "ESTAB");
    assert_eq!(c["verdict"]["limit"], "receiver_window", "{}", c["verdict"]);
    assert!(
        c["verdict"]["share"].as_f64().unwrap() > 0.5,
        "{}",
        c["verdict"]
    );
    let text = c["verdict"]["text"].as_str().unwrap();
    assert!(text.starts_with("receiver-window limited"), "{text}");
    let info = &c["tcp_info"];
    // The window the sender sees is the receiver's small buffer, not more.
    assert!(info["snd_wnd"].as_u64().unwrap() <= 8192, "{info}");
    // Options negotiated on a plain Linux-to-Linux connection.
    let n = &c["snapshot"]["negotiated"];
    assert_eq!(
        (&n["sack"], &n["timestamps"], &n["window_scaling"]),
        (&Value::Bool(true), &Value::Bool(true), &Value::Bool(true))
    );
    // Bytes acknowledged lie between what the reader had read before the sample and what it
    // read afterwards plus its (tiny) buffer; and never exceed what was written.
    let acked = info["bytes_acked"].as_u64().unwrap();
    assert!(acked >= before, "acked {acked} < read before {before}");
    assert!(
        acked <= after + 64 * 1024,
        "acked {acked} > read {after} + buffer"
    );
    // Plus the SYN, and the part of a write still in progress.
    assert!(acked <= written.load(Ordering::SeqCst) + 64 * 1024 + 1);
    // Goodput over the interval: about 4 KiB per 2 ms at most (16 Mbit/s), and not zero.
    let goodput = c["interval"]["goodput_bps"].as_f64().unwrap();
    assert!(
        goodput > 0.0 && goodput < 4096.0 * 8.0 / 0.002 * 1.1,
        "{goodput}"
    );
}

#[test]
fn slow_writer_is_application_limited() {
    if !privileged("slow_writer_is_application_limited") {
        return;
    }
    let _turn = turn();
    let p = pair("app", 62);
    let port = 5202;
    let (client, server) = p.connected(port, None);
    let stop = Arc::new(AtomicBool::new(false));
    // 1 KiB every 20 ms: the connection could carry far more.
    let written = writer(client, 1024, Some(Duration::from_millis(20)), stop.clone());
    let _read = reader(server, 65536, None);
    let r = json(&[
        "conns",
        "--netns",
        p.a.name(),
        "--over",
        "1s",
        "dport",
        &port.to_string(),
    ]);
    stop.store(true, Ordering::SeqCst);
    let c = sender_row(&r, port);
    assert_eq!(c["verdict"]["limit"], "application", "{}", c["verdict"]);
    assert!(
        c["verdict"]["share"].as_f64().unwrap() > 0.8,
        "{}",
        c["verdict"]
    );
    // At most 1 KiB per 20 ms (plus one write either side) was offered, so goodput is at most
    // that, and some data did flow.
    let goodput = c["interval"]["goodput_bps"].as_f64().unwrap();
    let over = c["interval"]["over_s"].as_f64().unwrap();
    let max = (over / 0.020 + 2.0) * 1024.0 * 8.0 / over;
    assert!(goodput > 0.0 && goodput <= max, "goodput {goodput} > {max}");
    assert!(written.load(Ordering::SeqCst) > 0);
}

#[test]
fn small_send_buffer_makes_the_sender_send_buffer_limited() {
    if !privileged("small_send_buffer_makes_the_sender_send_buffer_limited") {
        return;
    }
    let _turn = turn();
    // A real RTT (20 ms through a TUN delay line; this kernel has no netem): a small send
    // buffer only limits a sender that has to wait for ACKs.
    let a = Netns::new("sndbufa");
    let b = Netns::new("sndbufb");
    let (_line, _, addr_b) = tcptune_testkit::DelayLine::new(&a, &b, 64, Duration::from_millis(10));
    let port = 5204;
    let l = in_ns(&b, || listen(&format!("{addr_b}:{port}"), None));
    let target: SocketAddr = format!("{addr_b}:{port}").parse().unwrap();
    let client = in_ns(&a, || connect(target, Some(4096)));
    let (server, _) = l.accept().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let shut = client.try_clone().unwrap();
    let _written = writer(client, 65536, None, stop.clone());
    let _read = reader(server, 1 << 20, None);
    let r = json(&[
        "conns",
        "--netns",
        a.name(),
        "--over",
        "1s",
        "--all",
        "dport",
        &port.to_string(),
    ]);
    stop.store(true, Ordering::SeqCst);
    shut.shutdown(Shutdown::Both).unwrap();
    let c = sender_row(&r, port);
    assert_eq!(
        c["verdict"]["limit"],
        "send_buffer",
        "{} unacked {} notsent {} cwnd {} skmem {}",
        c["verdict"],
        c["tcp_info"]["unacked"],
        c["tcp_info"]["notsent_bytes"],
        c["tcp_info"]["snd_cwnd"],
        c["skmem"]
    );
    // Either the kernel's clock gave the send buffer most of the time, or it booked the time
    // as cwnd-limited and the verdict rests on the samples (the buffer full with cwnd to
    // spare), says so, and claims no time share.
    let by_clock = c["verdict"]["share"].as_f64().is_some_and(|s| s > 0.5);
    let by_samples = c["verdict"]["share"].is_null()
        && c["verdict"]["text"]
            .as_str()
            .unwrap()
            .contains("send buffer 8 KiB full in");
    assert!(by_clock || by_samples, "{}", c["verdict"]);
    // The kernel doubles SO_SNDBUF; the path's RTT is the delay line's 2 × 10 ms.
    assert_eq!(c["skmem"]["sndbuf"], 8192);
    let min_rtt = c["snapshot"]["min_rtt_s"].as_f64().unwrap();
    assert!(min_rtt >= 0.020, "min RTT {min_rtt}");
    // About what the send buffer holds per RTT (the kernel lets one 64 KiB skb overshoot
    // it; bounded loosely), far below what the path itself carries.
    let held = (8192.0 + 65536.0) * 8.0;
    let goodput = c["interval"]["goodput_bps"].as_f64().unwrap();
    assert!(
        goodput > 0.0 && goodput < 2.0 * held / min_rtt,
        "{goodput} vs {held}/{min_rtt}"
    );
}

#[test]
fn filter_runs_in_the_kernel_and_picks_the_right_connections() {
    if !privileged("filter_runs_in_the_kernel_and_picks_the_right_connections") {
        return;
    }
    let ns = Netns::new("filter");
    let socks = in_ns(&ns, || {
        let l4 = TcpListener::bind("127.0.0.1:7001").unwrap();
        let l6 = TcpListener::bind("[::1]:7002").unwrap();
        let c4 = TcpStream::connect("127.0.0.1:7001").unwrap();
        let c6 = TcpStream::connect("[::1]:7002").unwrap();
        let a4 = l4.accept().unwrap().0;
        let a6 = l6.accept().unwrap().0;
        (l4, l6, c4, c6, a4, a6)
    });
    let ports = |r: &Value| -> Vec<(u16, u16)> {
        let mut v: Vec<(u16, u16)> = r["connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let p = |k: &str| c[k].as_str().unwrap().parse::<SocketAddr>().unwrap().port();
                (p("local"), p("remote"))
            })
            .collect();
        v.sort();
        v
    };
    let (c4, c6) = (
        socks.2.local_addr().unwrap().port(),
        socks.3.local_addr().unwrap().port(),
    );
    // Both ends of both connections, no listeners (the default state set is "connected").
    assert_eq!(ports(&json(&["conns", "--netns", ns.name()])).len(), 4);
    assert_eq!(
        ports(&json(&["conns", "--netns", ns.name(), "dport", "7001"])),
        vec![(c4, 7001)]
    );
    assert_eq!(
        ports(&json(&[
            "conns",
            "--netns",
            ns.name(),
            "ipv6",
            "sport",
            "7002"
        ])),
        vec![(7002, c6)]
    );
    assert_eq!(
        ports(&json(&[
            "conns",
            "--netns",
            ns.name(),
            "port",
            "7001",
            "src",
            "127.0.0.0/8"
        ])),
        {
            let mut v = vec![(c4, 7001), (7001, c4)];
            v.sort();
            v
        }
    );
    assert_eq!(
        ports(&json(&[
            "conns",
            "--netns",
            ns.name(),
            "state",
            "listening"
        ])),
        vec![(7001, 0), (7002, 0)]
    );
    assert!(ports(&json(&["conns", "--netns", ns.name(), "dst", "10.0.0.0/8"])).is_empty());
    // -p finds the owner: this test process holds every one of these sockets.
    let r = json(&["conns", "--netns", ns.name(), "-p", "dport", "7001"]);
    assert_eq!(r["connections"][0]["process"]["pid"], std::process::id());
    // The connections are not visible from outside the namespace.
    let here = json(&["conns", "port", "7001"]);
    assert!(ports(&here).iter().all(|&(l, r)| l != c4 && r != c4));
    drop(socks);
}

#[test]
fn closed_shows_a_connection_that_lived_between_two_polls() {
    if !privileged("closed_shows_a_connection_that_lived_between_two_polls") {
        return;
    }
    let p = pair("closed", 63);
    let port = 5203;
    let l = in_ns(&p.b, || listen(&format!("{}:{port}", p.addr_b), None));
    let mut child = tcptune()
        .args([
            "watch",
            "--closed",
            "--netns",
            p.a.name(),
            "--count",
            "1",
            "--json",
            "dport",
        ])
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it has subscribed (it says so on stderr) before making the connection.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("watching for closing connections"), "{line}");
    const N: usize = 100_000;
    let target: SocketAddr = format!("{}:{port}", p.addr_b).parse().unwrap();
    // Poll 1: nothing to see yet.
    let poll = || json(&["conns", "--netns", p.a.name(), "dport", &port.to_string()]);
    assert!(poll()["connections"].as_array().unwrap().is_empty());
    let mut c = in_ns(&p.a, || connect(target, None));
    let local = c.local_addr().unwrap();
    let (mut s, _) = l.accept().unwrap();
    c.write_all(&vec![7u8; N]).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), N);
    drop(s);
    drop(c);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(child.wait().unwrap().success());
    let rec: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(rec["closed"], true);
    assert_eq!(rec["local"], local.to_string());
    assert_eq!(rec["remote"], target.to_string());
    let info = &rec["sample"]["info"];
    // Every byte was acknowledged, plus the SYN and the FIN (an active opener counts both).
    assert_eq!(info["bytes_acked"].as_u64().unwrap(), N as u64 + 2);
    assert_eq!(info["bytes_sent"].as_u64().unwrap(), N as u64);
    // Poll 2: gone again. Only the destroy event saw the connection.
    assert!(poll()["connections"].as_array().unwrap().is_empty());
}

#[test]
fn watch_records_samples_and_follows_one_connection_at_1ms() {
    if !privileged("watch_records_samples_and_follows_one_connection_at_1ms") {
        return;
    }
    let p = pair("watch", 65);
    let port = 5205;
    let (client, server) = p.connected(port, None);
    let stop = Arc::new(AtomicBool::new(false));
    let written = writer(client, 1024, Some(Duration::from_millis(1)), stop.clone());
    let _read = reader(server, 65536, None);

    // The table view, recorded: one JSON line per connection per sample.
    let dir = std::env::temp_dir().join(format!("tt-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("rec.jsonl");
    let out = tcptune()
        .args([
            "watch",
            "--netns",
            p.a.name(),
            "--interval",
            "100ms",
            "--count",
            "3",
        ])
        .arg("--record")
        .arg(&rec)
        .args(["dport", &port.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let screen = String::from_utf8(out.stdout).unwrap();
    assert_eq!(screen.matches("tcptune watch").count(), 3, "{screen}");
    assert!(screen.contains(&format!(":{port}")), "{screen}");
    let lines: Vec<Value> = std::fs::read_to_string(&rec)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "one connection, three samples");
    let acked: Vec<u64> = lines
        .iter()
        .map(|l| l["sample"]["info"]["bytes_acked"].as_u64().unwrap())
        .collect();
    assert!(acked.windows(2).all(|w| w[0] <= w[1]), "{acked:?}");
    assert!(acked[2] > acked[0], "data flowed: {acked:?}");
    assert!(lines.iter().all(|l| l["cookie"] == lines[0]["cookie"]));
    let t: Vec<f64> = lines.iter().map(|l| l["t_s"].as_f64().unwrap()).collect();
    assert!(t[2] - t[0] >= 0.19, "samples 100 ms apart: {t:?}");
    std::fs::remove_dir_all(&dir).unwrap();

    // One connection at 1 ms by exact query, as JSON lines.
    let started = Instant::now();
    let out = tcptune()
        .args([
            "watch",
            "--netns",
            p.a.name(),
            "--detail",
            "--interval",
            "1ms",
        ])
        .args(["--count", "200", "--json", "dport", &port.to_string()])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 200);
    let t: Vec<f64> = lines.iter().map(|l| l["t_s"].as_f64().unwrap()).collect();
    // 199 intervals of at least 1 ms each (never faster than asked); the upper bound only
    // says it keeps going on a loaded machine, where sleeps overshoot.
    let span = t[199] - t[0];
    assert!((0.199..4.0).contains(&span), "span {span} s, took {took:?}");
    assert!(t.windows(2).all(|w| w[1] > w[0]));
    stop.store(true, Ordering::SeqCst);
    assert!(written.load(Ordering::SeqCst) > 0);
}

#[test]
fn all_netns_sees_connections_in_every_namespace() {
    if !privileged("all_netns_sees_connections_in_every_namespace") {
        return;
    }
    let (n1, n2) = (Netns::new("alla"), Netns::new("allb"));
    let mk = |ns: &Netns, port: u16| {
        in_ns(ns, move || {
            let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
            let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let a = l.accept().unwrap().0;
            (l, c, a)
        })
    };
    let _k1 = mk(&n1, 7101);
    let _k2 = mk(&n2, 7102);
    let r = json(&["conns", "--all-netns", "dport", "7101-7102"]);
    let mut seen: Vec<(String, String)> = r["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["netns"] == n1.name() || c["netns"] == n2.name())
        .map(|c| {
            (
                c["netns"].as_str().unwrap().to_string(),
                c["remote"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (n1.name().to_string(), "127.0.0.1:7101".to_string()),
            (n2.name().to_string(), "127.0.0.1:7102".to_string()),
        ]
    );
}

/// Runs tcptune expecting exit 2 and one line on stderr containing `needle`.
fn fails_with(cmd: &mut Command, needle: &str) {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_input_is_one_sentence_and_exit_2() {
    fails_with(
        tcptune().args(["conns", "--netns", "tt-no-such-namespace"]),
        "network namespace 'tt-no-such-namespace' does not exist",
    );
    fails_with(
        tcptune().args(["conns", "dport", "http"]),
        "'http' is not a port",
    );
    fails_with(
        tcptune().args(["watch", "state", "sleepy"]),
        "not a TCP state",
    );
    fails_with(
        tcptune().args(["watch", "--interval", "1ms"]),
        "add --detail",
    );
    if !privileged("bad_input_is_one_sentence_and_exit_2 (permission)") {
        return;
    }
    let ns = Netns::new("perm");
    // An unprivileged user may not enter a network namespace. The binary is copied to a
    // world-readable place first: the build directory may not be reachable for that user.
    let dir = std::env::temp_dir().join(format!("tt-perm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("tcptune");
    std::fs::copy(env!("CARGO_BIN_EXE_tcptune"), &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    fails_with(
        Command::new(&bin)
            .args(["conns", "--netns", ns.name()])
            .uid(65534)
            .gid(65534),
        "needs root",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
