//! `tcptune exporter` against real connections in namespaces: a real Prometheus server (the
//! Debian `prometheus` package, its own config and storage in a temporary directory, loopback
//! only) scrapes it while transfers with known limits run, and PromQL through its HTTP API
//! must give each transfer's group its limit as the dominant share and its delivered bytes
//! within 5% of what the receiver read; hundreds of connections that open and close between
//! polls must sum to what was sent within 1%; bad input is one sentence and exit 2, a wrong
//! password a 401.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::serving::{get_as as get, serving};
use serde_json::Value;
use tcptune_testkit::certs::Certs;
use tcptune_testkit::sock::{self, listen};
use tcptune_testkit::{privileged, veth_pair, wait_for, DelayLine, Kill, Netns, TempDir};

fn tcptune() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
}

fn in_ns<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> T {
    tcptune_kernel::sys::in_netns(ns.name(), f).unwrap()
}

/// Reno does not pace, so pacing time does not blur the limits provoked here.
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

/// Starts the exporter with `args` on a free loopback port; returns it and its address.
fn exporter(args: &[&str]) -> (Kill, SocketAddr) {
    let mut a = vec!["exporter", "--listen", "127.0.0.1:0"];
    a.extend_from_slice(args);
    serving(&a)
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A sample's value in a text-format scrape.
fn metric(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// A receiver that reads `chunk` bytes every `every` until EOF; joins to the bytes read.
fn reader(mut s: TcpStream, chunk: usize, every: Option<Duration>) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; chunk];
        let mut n = 0u64;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return n,
                Ok(k) => n += k as u64,
            }
            if let Some(d) = every {
                // The application's reading pace is what the test provokes.
                std::thread::sleep(d);
            }
        }
    })
}

/// A writer of `chunk` bytes every `every` (or as fast as the socket takes them) until `stop`,
/// then a FIN after what is queued.
fn writer(mut s: TcpStream, chunk: usize, every: Option<Duration>, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let buf = vec![0x42u8; chunk];
        while !stop.load(Ordering::SeqCst) {
            if s.write_all(&buf).is_err() {
                break;
            }
            if let Some(d) = every {
                // The application's writing pace is what the test provokes.
                std::thread::sleep(d);
            }
        }
        let _ = s.shutdown(Shutdown::Write);
    });
}

/// A transfer: a listener in `rx` (SO_RCVBUF `rcvbuf`), a client in `tx` (SO_SNDBUF `sndbuf`).
struct Transfer {
    read: JoinHandle<u64>,
}

#[allow(clippy::too_many_arguments)]
fn transfer(
    tx: &Netns,
    rx: &Netns,
    addr: &str,
    port: u16,
    bufs: (Option<i32>, Option<i32>),
    read: (usize, Option<Duration>),
    write: (usize, Option<Duration>),
    stop: &Arc<AtomicBool>,
) -> Transfer {
    let l: TcpListener = in_ns(rx, || listen(&format!("{addr}:{port}"), bufs.1));
    let target: SocketAddr = format!("{addr}:{port}").parse().unwrap();
    let client = in_ns(tx, || connect(target, bufs.0));
    let (server, _) = l.accept().unwrap();
    writer(client, write.0, write.1, stop.clone());
    Transfer {
        read: reader(server, read.0, read.1),
    }
}

/// A free loopback port for Prometheus (bound and released; nothing else here takes ports).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Prometheus scraping `target` every second (`job` holds more lines of its scrape job), its
/// config and storage in `dir`.
fn prometheus(dir: &TempDir, target: SocketAddr, job: &str) -> (Kill, SocketAddr) {
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - '{}'\nscrape_configs:\n  - job_name: tcptune\n    static_configs:\n      - targets: ['{target}']\n{job}",
            dist("rules.yml").display()
        ),
    )
    .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus (Debian package `prometheus`, in scripts/deps) runs");
    let p = Kill(child);
    wait_for("Prometheus ready", Duration::from_secs(60), || {
        std::thread::sleep(Duration::from_millis(100)); // pacing the probe, not synchronising
        TcpStream::connect(addr).is_ok() && get(addr, "/-/ready", None).0 == 200
    });
    (p, addr)
}

/// A file the package ships with the exporter (crates/tcptune-exporter/dist).
fn dist(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tcptune-exporter/dist")
        .join(name)
}

/// Every query of the shipped dashboard and every recorded series of the shipped rules
/// returns series from a Prometheus that scraped the exporter; the rules load and pass
/// `promtool check rules`.
fn dashboard_and_rules_answer(prom: SocketAddr) {
    let check = Command::new("promtool")
        .args(["check", "rules"])
        .arg(dist("rules.yml"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(dist("grafana-dashboard.json")).unwrap())
            .unwrap();
    let mut exprs = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    assert!(exprs.len() >= 8);
    let (_, rules) = get(prom, "/api/v1/rules", None);
    let rules: Value = serde_json::from_str(&rules).unwrap();
    for g in rules["data"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            assert_eq!(r["health"], "ok", "{r}");
            if r["type"] == "recording" {
                exprs.push(r["name"].as_str().unwrap().to_string());
            }
        }
    }
    assert!(
        exprs.iter().any(|e| e.starts_with("tcptune:")),
        "no recording rules loaded"
    );
    for e in exprs {
        let q = e
            .replace("$instance", ".*")
            .replace("$group", ".*")
            .replace("$__rate_interval", "1m");
        // Rules are evaluated on their own clock: a recorded series may be a second behind.
        wait_for(&format!("series for {q}"), Duration::from_secs(30), || {
            std::thread::sleep(Duration::from_millis(200)); // pacing the queries
            !promql(prom, &q).is_empty()
        });
    }
}

/// An instant PromQL query's result vector.
fn promql(prom: SocketAddr, q: &str) -> Vec<Value> {
    let (status, body) = get(prom, &format!("/api/v1/query?query={}", encode(q)), None);
    assert_eq!(status, 200, "{q}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn scalar(prom: SocketAddr, q: &str) -> f64 {
    promql(prom, q)
        .first()
        .and_then(|r| r["value"][1].as_str()?.parse().ok())
        .unwrap_or(f64::NAN)
}

#[test]
fn prometheus_sees_each_transfers_limit_and_its_bytes() {
    if !privileged("prometheus_sees_each_transfers_limit_and_its_bytes") {
        return;
    }
    // Receiver window and application: a veth pair (no delay); send buffer: a 20 ms delay
    // line, since a small send buffer limits only a sender that waits for ACKs.
    let (a1, b1) = (Netns::new("expa"), Netns::new("expb"));
    let (_, addr1) = veth_pair(&a1, &b1, 71);
    let (a2, b2) = (Netns::new("expc"), Netns::new("expd"));
    let (_line, _, addr2) = DelayLine::new(&a2, &b2, 72, Duration::from_millis(10));
    let dir = TempDir::new("exporter-prom");
    let map = dir.path().join("groups.toml");
    std::fs::write(
        &map,
        "[ports]\nrwnd = [5301]\napp = [5302]\nsndbuf = [5303]\n",
    )
    .unwrap();
    let (_exp, exp_addr) = exporter(&[
        "--netns",
        a1.name(),
        a2.name(),
        "--group-by",
        "port",
        "--groups",
        map.to_str().unwrap(),
        "--interval",
        "200ms",
    ]);
    let (_prom, prom) = prometheus(&dir, exp_addr, "");
    wait_for(
        "the exporter's baseline poll",
        Duration::from_secs(30),
        || {
            metric(
                &get(exp_addr, "/metrics", None).1,
                "tcptune_exporter_polls_total",
            ) >= 1.0
        },
    );
    let stop = Arc::new(AtomicBool::new(false));
    let t = [
        // The receiver reads 4 KiB every 2 ms through a 4 KiB buffer: its window sets the pace.
        transfer(
            &a1,
            &b1,
            &addr1,
            5301,
            (None, Some(4096)),
            (4096, Some(Duration::from_millis(2))),
            (65536, None),
            &stop,
        ),
        // 1 KiB every 100 ms: the application has nothing to send most of the time.
        transfer(
            &a1,
            &b1,
            &addr1,
            5302,
            (None, None),
            (65536, None),
            (1024, Some(Duration::from_millis(100))),
            &stop,
        ),
        // An 8 KiB send buffer on a 20 ms path, drained by a fast reader.
        transfer(
            &a2,
            &b2,
            &addr2,
            5303,
            (Some(4096), None),
            (1 << 20, None),
            (65536, None),
            &stop,
        ),
    ];
    std::thread::sleep(Duration::from_secs(6)); // the transfers' length, not a synchronisation
    stop.store(true, Ordering::SeqCst);
    let read: Vec<u64> = t.into_iter().map(|t| t.read.join().unwrap()).collect();
    for (group, limit, read) in [
        ("rwnd", "receiver_window", read[0]),
        ("app", "application", read[1]),
        ("sndbuf", "send_buffer", read[2]),
    ] {
        let delivered = format!("tcptune_delivered_bytes_total{{group=\"{group}\"}}");
        // Until Prometheus has scraped the poll after the connection closed.
        wait_for(
            &format!("{group}'s closed count in Prometheus"),
            Duration::from_secs(30),
            || {
                std::thread::sleep(Duration::from_millis(200)); // pacing the queries
                scalar(
                    prom,
                    &format!("tcptune_connections_closed_total{{group=\"{group}\"}}"),
                ) >= 1.0
            },
        );
        let got = scalar(prom, &delivered);
        assert!(
            (got - read as f64).abs() <= 0.05 * read as f64,
            "{group}: Prometheus says {got} bytes delivered, the receiver read {read}"
        );
        let top = promql(prom, &format!("topk(1, sum by (limit) (tcptune_limit_seconds_total{{group=\"{group}\",limit!=\"idle\"}}))"));
        let share = scalar(prom, &format!("sum(tcptune_limit_seconds_total{{group=\"{group}\",limit=\"{limit}\"}}) / sum(tcptune_limit_seconds_total{{group=\"{group}\",limit!=\"idle\"}})"));
        let all = promql(
            prom,
            &format!("tcptune_limit_seconds_total{{group=\"{group}\"}} > 0"),
        );
        eprintln!("{group}: {limit} share {share:.3}, delivered {got} of {read} read");
        assert_eq!(top[0]["metric"]["limit"], limit, "{group}: {all:?}");
        assert!(share >= 0.8, "{group}: {limit} share {share}: {all:?}");
    }
    dashboard_and_rules_answer(prom);
    // The scrape is clean for promtool.
    let (_, body) = get(exp_addr, "/metrics", None);
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn hundreds_of_short_connections_sum_to_what_was_sent() {
    if !privileged("hundreds_of_short_connections_sum_to_what_was_sent") {
        return;
    }
    let (a, b) = (Netns::new("shorta"), Netns::new("shortb"));
    let (_, addr) = veth_pair(&a, &b, 73);
    let (_exp, exp) = exporter(&["--netns", a.name(), "--interval", "1s"]);
    wait_for(
        "the exporter's baseline poll",
        Duration::from_secs(30),
        || {
            metric(
                &get(exp, "/metrics", None).1,
                "tcptune_exporter_polls_total",
            ) >= 1.0
        },
    );
    let l = in_ns(&b, || listen(&format!("{addr}:5310"), None));
    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    let server = std::thread::spawn(move || {
        for _ in 0..300 {
            let (s, _) = l.accept().unwrap();
            r.fetch_add(reader(s, 65536, None).join().unwrap(), Ordering::SeqCst);
        }
    });
    let target: SocketAddr = format!("{addr}:5310").parse().unwrap();
    let mut sent = 0u64;
    for i in 0..300u64 {
        let mut c = in_ns(&a, || connect(target, None));
        let buf = vec![7u8; 10_000 + (i as usize * 97) % 20_000];
        c.write_all(&buf).unwrap();
        sent += buf.len() as u64;
    }
    server.join().unwrap();
    assert_eq!(received.load(Ordering::SeqCst), sent);
    let series = "tcptune_delivered_bytes_total{group=\"all\"}";
    wait_for("every close counted", Duration::from_secs(30), || {
        std::thread::sleep(Duration::from_millis(100)); // pacing the scrapes
        metric(
            &get(exp, "/metrics", None).1,
            "tcptune_connections_closed_total{group=\"all\"}",
        ) >= 300.0
    });
    let body = get(exp, "/metrics", None).1;
    let delivered = metric(&body, series);
    assert!(
        (delivered - sent as f64).abs() <= 0.01 * sent as f64,
        "delivered {delivered} vs sent {sent}\n{body}"
    );
    assert_eq!(
        metric(&body, "tcptune_connections_opened_total{group=\"all\"}"),
        300.0
    );
    assert_eq!(
        metric(&body, "tcptune_exporter_destroy_events_dropped_total"),
        0.0
    );
}

#[test]
fn bad_input_is_one_sentence_and_exit_2_and_a_wrong_password_401() {
    let dir = TempDir::new("exporter-bad");
    let fails = |args: &[&str], needle: &str| {
        let out = tcptune().arg("exporter").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    fails(
        &["--netns", "tt-no-such-namespace"],
        "network namespace 'tt-no-such-namespace' does not exist",
    );
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().to_string();
    fails(&["--listen", &port], "the port is in use");
    let map = dir.path().join("g.toml");
    std::fs::write(&map, "[ports]\nweb = [\"90000\"]\n").unwrap();
    fails(
        &["--group-by", "port", "--groups", map.to_str().unwrap()],
        "group map line 2",
    );
    fails(&["--group-by", "port"], "needs a group map file");
    fails(
        &["--group-by", "vlan"],
        "unknown --group-by dimension 'vlan'",
    );
    fails(&["--max-series", "10"], "--max-series 10 is too small");
    let web = dir.path().join("web.yml");
    std::fs::write(&web, "http_server_config:\n  http2: true\n").unwrap();
    fails(
        &["--web-config", web.to_str().unwrap()],
        "web config line 2: tcptune serves HTTP/1.1 only",
    );
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: x.pem\n  key_file: x.key\n",
    )
    .unwrap();
    fails(
        &["--web-config", web.to_str().unwrap()],
        &format!(
            "cannot read the TLS certificate file {}: No such file",
            dir.path().join("x.pem").display()
        ),
    );
    if !tcptune_testkit::is_root() {
        // Reading the default namespace's sockets needs no privilege, but keep to what CI runs.
        return;
    }
    // alice:s3cret, bcrypt cost 4 (made with Python's `crypt.crypt("s3cret", "$2b$04$" + salt)`).
    let hash = "$2b$04$abcdefghijklmnopqrstuuLZYjhNQAOdpbzt4WxWlUHjv1wsyH5DG";
    std::fs::write(&web, format!("basic_auth_users:\n  alice: {hash}\n")).unwrap();
    let (_exp, addr) = exporter(&["--web-config", web.to_str().unwrap()]);
    assert_eq!(get(addr, "/metrics", None).0, 401);
    assert_eq!(get(addr, "/metrics", Some("YWxpY2U6d3Jvbmc=")).0, 401);
    let (status, body) = get(addr, "/connections?top=3", Some("YWxpY2U6czNjcmV0"));
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["connections"].is_array(), "{v}");
    assert_eq!(
        get(addr, "/connections?top=0", Some("YWxpY2U6czNjcmV0")).0,
        400
    );
    // Changed while it runs (a new file renamed over it, as configuration tools write): the
    // next request follows it; a broken one is refused and the previous one stays.
    let replace = |text: String| {
        let tmp = dir.path().join("web.yml.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &web).unwrap();
    };
    replace(format!("basic_auth_users:\n  bob: {hash}\n"));
    // bob:s3cret
    assert_eq!(get(addr, "/metrics", Some("Ym9iOnMzY3JldA==")).0, 200);
    assert_eq!(get(addr, "/metrics", Some("YWxpY2U6czNjcmV0")).0, 401);
    replace("basic_auth_users:\n  eve: plain\n".into());
    assert_eq!(get(addr, "/metrics", Some("Ym9iOnMzY3JldA==")).0, 200);
    assert_eq!(get(addr, "/metrics", None).0, 401);
}

#[test]
fn prometheus_scrapes_over_tls_with_a_client_certificate() {
    if !privileged("prometheus_scrapes_over_tls_with_a_client_certificate") {
        return;
    }
    let dir = TempDir::new("exporter-tls");
    let c = Certs::make(dir.path(), "e");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: e-server.pem\n  key_file: e-server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: e-ca.pem\n",
    )
    .unwrap();
    let (mut exp, addr) = exporter(&["--web-config", web.to_str().unwrap()]);
    let (status, body) = get(addr, "/metrics", None);
    assert_eq!(status, 400, "plain HTTP on the TLS port: {body}");
    assert!(!body.contains("tcptune_"), "{body}");
    let p = |f: &str| c.path(f).display().to_string();
    // A second job trusts the CA but has no client certificate: its scrapes must fail.
    let job = format!(
        "    scheme: https\n    tls_config:\n      ca_file: {ca}\n      cert_file: {}\n      key_file: {}\n  - job_name: nocert\n    scheme: https\n    tls_config:\n      ca_file: {ca}\n    static_configs:\n      - targets: ['{addr}']\n",
        p("client.pem"),
        p("client.key"),
        ca = p("ca.pem"),
    );
    let (_prom, prom) = prometheus(&dir, addr, &job);
    wait_for(
        "Prometheus scraping over TLS",
        Duration::from_secs(60),
        || {
            std::thread::sleep(Duration::from_millis(200)); // pacing the probe, not synchronising
            scalar(prom, "up{job=\"tcptune\"}") == 1.0
                && scalar(prom, "tcptune_exporter_polls_total") >= 1.0
                && !promql(prom, "up{job=\"nocert\"}").is_empty()
        },
    );
    assert_eq!(scalar(prom, "max_over_time(up{job=\"nocert\"}[1m])"), 0.0);
    // Stopped by a signal, it removes the private directory of its TLS relay socket.
    let pid = exp.0.id();
    let relay = std::env::temp_dir().join(format!("tcptune-http-{pid}-0"));
    assert!(relay.exists(), "{}", relay.display());
    tcptune_testkit::signal(pid, tcptune_testkit::Signal::Term);
    let _ = exp.0.wait();
    assert!(!relay.exists(), "{} left behind", relay.display());
}
