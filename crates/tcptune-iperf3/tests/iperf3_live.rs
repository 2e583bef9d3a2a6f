//! Interoperability with a real iperf3 (installed by `scripts/deps`) on loopback: our client
//! session drives a test against `iperf3 -s`, and `iperf3 -c` runs a test against our server
//! session. Plain blocking sockets stand in for the socket layer of `tcptune serve`/`test`;
//! what is checked is that iperf3 accepts every byte the sessions write and reports the bytes
//! our side counted. Each test moves about a second of loopback traffic.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tcptune_iperf3::session::{
    ClientEvent, ClientSession, ServerEvent, ServerPhase, ServerSession, Timeouts,
};
use tcptune_iperf3::{Cookie, Direction, Params, Results, StreamResult, COOKIE_LEN};
use tcptune_model::Dur;
use tcptune_testkit::{line_channel, wait_for_line, NoLine};

/// The whole exchange must finish within this, or the test fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(30);

/// Kills the iperf3 process if the test fails before it exits.
struct Reaped(Option<Child>);

impl Reaped {
    fn child(&mut self) -> &mut Child {
        // Invariant: the child is only taken by `output`, which consumes the wrapper.
        self.0.as_mut().expect("child present until output()")
    }

    /// Waits for iperf3 to exit (it does once its test is over) and collects its output.
    fn output(mut self) -> std::process::Output {
        let child = self.0.take().expect("child present until output()");
        child.wait_with_output().unwrap()
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn iperf3() -> Command {
    // scripts/deps installs iperf3; without it this test cannot say anything.
    assert!(
        Command::new("iperf3").arg("--version").output().is_ok(),
        "iperf3 is not installed; run scripts/deps"
    );
    Command::new("iperf3")
}

fn results(streams: &[(u32, u64)], sender: bool) -> Results {
    Results {
        cpu_util_total: 0.0,
        cpu_util_user: 0.0,
        cpu_util_system: 0.0,
        // We do not read tcp_info here, so a sender cannot count retransmits.
        sender_has_retransmits: if sender { 0 } else { -1 },
        congestion_used: None,
        streams: streams
            .iter()
            .map(|&(id, bytes)| StreamResult {
                id: id as i64,
                bytes,
                retransmits: -1,
                jitter: 0.0,
                errors: 0,
                omitted_errors: Some(0),
                packets: 0,
                omitted_packets: Some(0),
                start_time: Some(0.0),
                end_time: Some(1.0),
            })
            .collect(),
        server_output_json: None,
        server_output_text: None,
        extension: None,
    }
}

/// Reads whatever the control socket has (up to its read timeout); `None` at EOF.
fn read_some(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = [0u8; 4096];
    match s.read(&mut buf) {
        Ok(0) => None,
        Ok(n) => Some(buf[..n].to_vec()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Some(vec![]),
        Err(e) => panic!("control read: {e}"),
    }
}

/// Accepts one connection, failing the test instead of blocking past `deadline`.
fn accept_by(listener: &TcpListener, deadline: Instant) -> TcpStream {
    listener.set_nonblocking(true).unwrap();
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                return s;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "no connection from iperf3 in time"
                );
                // Polling the listener with a deadline; the event is the connection itself.
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn elapsed(start: Instant) -> Dur {
    start.elapsed().into()
}

/// Sends `total` bytes on a data stream, counting what was written.
fn send_all(mut s: TcpStream, total: usize) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let block = vec![0x5au8; 128 * 1024];
        let mut sent = 0u64;
        while (sent as usize) < total {
            match s.write(&block) {
                Ok(n) => sent += n as u64,
                Err(_) => break,
            }
        }
        sent
    })
}

/// Sends until `stop`, counting what was written.
fn send_until(mut s: TcpStream, stop: Arc<AtomicBool>) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let block = vec![0x5au8; 128 * 1024];
        let mut sent = 0u64;
        while !stop.load(Ordering::Relaxed) {
            match s.write(&block) {
                Ok(n) => sent += n as u64,
                Err(_) => break,
            }
        }
        sent
    })
}

/// Receives until EOF or a shutdown, counting bytes.
fn receive(mut s: TcpStream) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 128 * 1024];
        let mut got = 0u64;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n as u64,
            }
        }
        got
    })
}

/// A running `iperf3 -s -1`, its port, and its stdout lines so far (up to "Server listening").
type StartedServer = (Reaped, u16, mpsc::Receiver<String>, Vec<String>);

/// Starts `iperf3 -s -1` on a port that was free a moment ago; `None` if iperf3 exits before
/// listening (another process took the port in between), so the caller can try again.
fn start_iperf3_server() -> Option<StartedServer> {
    let port = {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = Reaped(Some(
        iperf3()
            .args(["-s", "-1", "--forceflush", "-B", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    // Wait for the "Server listening" line: a pipe read with a deadline.
    let rx = line_channel(server.child().stdout.take().unwrap());
    match wait_for_line(&rx, Duration::from_secs(10), |l| {
        l.contains("Server listening")
    }) {
        Ok(output) => Some((server, port, rx, output)),
        Err(NoLine::Ended(_)) => None,
        Err(NoLine::Timeout(output)) => panic!("iperf3 -s is silent: {output:?}"),
    }
}

#[test]
fn our_client_against_iperf3_server() {
    let (mut server, port, rx, mut server_output) = (0..5)
        .find_map(|_| start_iperf3_server())
        .expect("iperf3 -s did not start listening on a free port in five attempts");

    let start = Instant::now();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut ctl = TcpStream::connect(addr).unwrap();
    ctl.set_nodelay(true).unwrap();
    ctl.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let cookie = Cookie::from_random(std::array::from_fn(|i| (i * 7 + port as usize) as u8));
    let params = Params {
        parallel: 2,
        time_s: 1,
        client_version: Some("tcptune-test".into()),
        ..Params::default()
    };
    let mut session = ClientSession::new(cookie, params, elapsed(start), Timeouts::default());
    let mut streams = Vec::new();
    let mut sent = Vec::new();
    let mut server_results = None;
    while session.phase() != tcptune_iperf3::session::ClientPhase::Done {
        assert!(start.elapsed() < LIMIT, "stuck in {:?}", session.phase());
        ctl.write_all(&session.take_output()).unwrap();
        let Some(bytes) = read_some(&mut ctl) else {
            panic!(
                "iperf3 closed the control connection in {:?}",
                session.phase()
            );
        };
        session.poll(elapsed(start)).unwrap();
        for ev in session.handle_input(&bytes, elapsed(start)).unwrap() {
            match ev {
                ClientEvent::CreateStreams {
                    count,
                    client_sends,
                } => {
                    assert_eq!((count, client_sends), (2, 2));
                    for _ in 0..count {
                        let mut s = TcpStream::connect(addr).unwrap();
                        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                        s.write_all(session.cookie().as_bytes()).unwrap();
                        streams.push(s);
                    }
                }
                ClientEvent::TestStart => {}
                ClientEvent::TestRunning => {
                    let senders: Vec<_> = streams.drain(..).map(|s| send_all(s, 8 << 20)).collect();
                    sent = senders.into_iter().map(|h| h.join().unwrap()).collect();
                    session.end_test(elapsed(start)).unwrap();
                }
                ClientEvent::ExchangeResults => {
                    // iperf3 numbers the streams 1, 3 in connection order.
                    let ours = results(&[(1, sent[0]), (3, sent[1])], true);
                    session.send_results(&ours, elapsed(start)).unwrap();
                }
                ClientEvent::ServerResults(r) => server_results = Some(r),
                ClientEvent::Done => {}
            }
        }
    }
    ctl.write_all(&session.take_output()).unwrap();
    drop(ctl);

    let r = server_results.unwrap();
    assert_eq!(r.sender_has_retransmits, -1);
    let ids: Vec<i64> = r.streams.iter().map(|s| s.id).collect();
    assert_eq!(ids, [1, 3]);
    for (s, &n) in r.streams.iter().zip(&sent) {
        assert!(s.bytes > 0 && s.bytes <= n, "{} of {n}", s.bytes);
    }
    let status = server.child().wait().unwrap();
    // The reader thread ends at EOF, now that iperf3 has exited: read to the disconnect.
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        server_output.push(line);
    }
    let text = server_output.join("\n");
    assert!(status.success(), "iperf3 -s failed: {text}");
    assert!(text.contains("receiver"), "{text}");
    assert!(!text.contains("error"), "{text}");
}

/// Runs `iperf3 -c` with `args` against our server session; returns iperf3's JSON report and
/// the bytes our server counted per stream.
fn iperf3_client_against_our_server(args: &[&str]) -> (serde_json::Value, Vec<u64>, Params) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let client = Reaped(Some(
        iperf3()
            .args(["-c", "127.0.0.1", "-J", "-p"])
            .arg(port.to_string())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let start = Instant::now();
    let mut ctl = accept_by(&listener, start + LIMIT);
    ctl.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut session = ServerSession::new(elapsed(start), Timeouts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers: Vec<(u32, JoinHandle<u64>, Option<TcpStream>)> = Vec::new();
    let mut counted = Vec::new();
    let mut params = None;
    while session.phase() != ServerPhase::Done {
        assert!(start.elapsed() < LIMIT, "stuck in {:?}", session.phase());
        ctl.write_all(&session.take_output()).unwrap();
        let Some(bytes) = read_some(&mut ctl) else {
            panic!(
                "iperf3 -c closed the control connection in {:?}",
                session.phase()
            );
        };
        session.poll(elapsed(start)).unwrap();
        for ev in session.handle_input(&bytes, elapsed(start)).unwrap() {
            match ev {
                ServerEvent::Params(p) => {
                    session.approve(elapsed(start)).unwrap();
                    ctl.write_all(&session.take_output()).unwrap();
                    for _ in 0..p.data_streams() {
                        let mut s = accept_by(&listener, start + LIMIT);
                        let mut cookie = [0u8; COOKIE_LEN];
                        s.read_exact(&mut cookie).unwrap();
                        let d = session.data_stream(&cookie, elapsed(start)).unwrap();
                        let keep = s.try_clone().unwrap();
                        let h = if d.server_sends {
                            send_until(s, stop.clone())
                        } else {
                            receive(s)
                        };
                        workers.push((d.id, h, Some(keep)));
                    }
                    params = Some(*p);
                }
                ServerEvent::TestEnd => {
                    // As iperf3 does on TEST_END: stop and close the data streams.
                    stop.store(true, Ordering::Relaxed);
                    let mut ours = Vec::new();
                    for (id, h, keep) in workers.drain(..) {
                        if let Some(s) = keep {
                            let _ = s.shutdown(std::net::Shutdown::Both);
                        }
                        let n = h.join().unwrap();
                        counted.push(n);
                        ours.push((id, n));
                    }
                    let sends = params.as_ref().unwrap().direction != Direction::Forward;
                    session
                        .finish(results(&ours, sends), elapsed(start))
                        .unwrap();
                }
                ServerEvent::ClientResults(_) | ServerEvent::Done => {}
            }
        }
    }
    let out = client.output();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "iperf3 -J output: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert!(out.status.success(), "iperf3 -c failed: {json}");
    (json, counted, params.unwrap())
}

#[test]
fn iperf3_client_against_our_server_forward_two_streams() {
    let (json, counted, params) = iperf3_client_against_our_server(&["-t", "1", "-P", "2"]);
    assert_eq!(params.parallel, 2);
    let received = json["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert_eq!(received, counted.iter().sum::<u64>());
    assert!(received > 0);
}

#[test]
fn iperf3_client_against_our_server_reverse() {
    let (json, counted, params) = iperf3_client_against_our_server(&["-t", "1", "-R"]);
    assert_eq!(params.direction, Direction::Reverse);
    // In reverse mode iperf3 reports our (the sender's) byte count as sent.
    let sent = json["end"]["sum_sent"]["bytes"].as_u64().unwrap();
    assert_eq!(sent, counted.iter().sum::<u64>());
    let received = json["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert!(received > 0 && received <= sent);
}
