//! `tcptune serve` under hostile peers, one class of attack at a time (TCP control and data
//! connections, and UDP stream setup from another host): after each, a normal
//! test (`tcptune test -n 1MB`) must start at once and succeed within a second (the default
//! server runs one test at a time, so a wedged session would show as "busy"), and at the end
//! the server's peak memory (VmHWM) must stay under [`MEMORY_BOUND`]. Loopback only.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use tcptune_testkit::Kill;

mod common;
use common::serving::serve_draining;

/// `tcptune serve` on a free loopback port, once it says it listens.
fn serve() -> (Kill, SocketAddr) {
    let (child, port) = serve_draining(&["-B", "127.0.0.1"]);
    (child, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// The server's peak resident memory after every attack. A test's threads, buffers and
/// samples take some MiB (13 MiB measured); a results message parsed whole (a 64 MiB claim once cost 1.17 GB)
/// or any unbounded buffer would blow it.
const MEMORY_BOUND_KIB: u64 = 32 * 1024;
const MEMORY_BOUND: &str = "32 MiB";

fn vm_hwm_kib(pid: u32) -> u64 {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    st.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A normal test right after an attack: it must succeed within a second of the attack's end.
/// A "busy" answer is asked again within that second: the server may need a few milliseconds
/// to see the attacker's close (iperf3 answers busy then too).
fn normal_test(addr: SocketAddr, after: &str) {
    let t = Instant::now();
    loop {
        let o = Command::new(env!("CARGO_BIN_EXE_tcptune"))
            .args([
                "test",
                "127.0.0.1",
                "-p",
                &addr.port().to_string(),
                "-n",
                "1MB",
                "-J",
                "--iperf3-exit-codes",
            ])
            .output()
            .unwrap();
        let took = t.elapsed();
        let out = String::from_utf8_lossy(&o.stdout);
        if o.status.code() != Some(0) && out.contains("busy") && took < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        assert_eq!(
            o.status.code(),
            Some(0),
            "after {after}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            took < Duration::from_secs(1),
            "after {after}: the test took {took:?}"
        );
        return;
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

fn cookie(tag: u8) -> [u8; 37] {
    let mut c = [b'a' + tag % 26; 37];
    c[36] = 0;
    c
}

fn frame(json: &str) -> Vec<u8> {
    let mut v = (json.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(json.as_bytes());
    v
}

fn read_byte(c: &mut TcpStream) -> Option<u8> {
    let mut b = [0u8; 1];
    c.read_exact(&mut b).ok().map(|()| b[0])
}

/// A control connection the server took: cookie sent, PARAM_EXCHANGE read. The previous
/// attack's session may take a few milliseconds to end: "busy" is asked again for a second.
fn control(addr: SocketAddr, tag: u8) -> TcpStream {
    let t = Instant::now();
    loop {
        let mut c = connect(addr);
        c.write_all(&cookie(tag)).unwrap();
        match read_byte(&mut c) {
            Some(9) => return c,
            Some(0xff) if t.elapsed() < Duration::from_secs(1) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => panic!(
                "PARAM_EXCHANGE expected, got {other:?} after {:?}",
                t.elapsed()
            ),
        }
    }
}

/// Cookie, PARAM_EXCHANGE, parameters, CREATE_STREAMS: a control connection in stream setup.
fn in_setup(addr: SocketAddr, tag: u8, params: &str) -> TcpStream {
    let mut c = control(addr, tag);
    c.write_all(&frame(params)).unwrap();
    assert_eq!(read_byte(&mut c), Some(10), "CREATE_STREAMS");
    c
}

const PARAMS: &str = r#"{"tcp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;

#[test]
fn hostile_peers_leave_serve_free_and_small() {
    let (srv, addr) = serve();
    let pid = srv.0.id();
    normal_test(addr, "nothing");

    // 1. Garbage where the cookie goes: no NUL, control characters.
    for k in 0..20u8 {
        let mut c = connect(addr);
        let junk: Vec<u8> = (0..37u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(k))
            .collect();
        let _ = c.write_all(&junk);
        let _ = c.read(&mut [0u8; 16]);
    }
    normal_test(addr, "garbage cookies");

    // 2. Slow loris: connections that dribble their cookie a byte at a time stay pending; a
    // normal test runs while they are still open.
    let mut lorises: Vec<TcpStream> = (0..50).map(|_| connect(addr)).collect();
    for (k, l) in lorises.iter_mut().enumerate() {
        let _ = l.write_all(&cookie(k as u8)[..1 + k % 30]);
    }
    normal_test(addr, "a slow loris (during)");
    drop(lorises);
    normal_test(addr, "a slow loris");

    // 3. An oversized parameters length (CVE-2023-38403's 0xFFFFFFFF among them).
    for len in [u32::MAX, 0x7fff_ffff, 8 * 1024 + 1, 0] {
        let mut c = control(addr, 3);
        let _ = c.write_all(&len.to_be_bytes());
        // SERVER_ERROR or a close: either way, answered at once.
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
    }
    normal_test(addr, "oversized JSON lengths");

    // 4. Close in the middle of setup, and CLIENT_TERMINATE there (iperf3 sends it when its -C
    // is unknown to the kernel).
    drop(in_setup(addr, 4, PARAMS));
    normal_test(addr, "a close during stream setup");
    let mut c = in_setup(addr, 5, PARAMS);
    c.write_all(&[12]).unwrap();
    drop(c);
    normal_test(addr, "CLIENT_TERMINATE during stream setup");

    // 5. A real client with a congestion control the kernel lacks.
    let o = Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args([
            "test",
            "127.0.0.1",
            "-p",
            &addr.port().to_string(),
            "-t",
            "1",
        ])
        .args(["-C", "no-such-cc"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    normal_test(addr, "a client with a wrong -C");

    // 6. Bad state bytes: undefined ones, and defined ones out of turn, during setup.
    for state in [0u8, 3, 7, 15, 0x80, 1, 16] {
        let mut c = in_setup(addr, 6, PARAMS);
        let _ = c.write_all(&[state]);
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
    }
    normal_test(addr, "bad state bytes");

    // 7. Mistyped parameters (CVE-2024-53580: a number as title) and parameters that are not
    // JSON.
    for p in [
        r#"{"tcp":true,"title":5}"#,
        r#"{"tcp":"yes"}"#,
        "[1,2,3]",
        "{{{{",
    ] {
        let mut c = control(addr, 7);
        let _ = c.write_all(&frame(p));
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
    }
    normal_test(addr, "mistyped parameters");

    // 8. Data connections without a control connection: a cookie no test owns, then data.
    for k in 0..10u8 {
        let mut c = connect(addr);
        let _ = c.write_all(&cookie(100 + k));
        let _ = c.write_all(&[0x55; 64 * 1024]);
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
    }
    normal_test(addr, "data connections without control");

    // 9. A results message of 64 MiB from a client that asked for the server's output: refused
    // at its length, before a byte of it is stored.
    {
        let params = PARAMS.replace("\"time\":1", "\"time\":1,\"get_server_output\":1");
        let mut c = in_setup(addr, 9, &params);
        let mut d = connect(addr);
        d.write_all(&cookie(9)).unwrap();
        assert_eq!(read_byte(&mut c), Some(1), "TEST_START");
        assert_eq!(read_byte(&mut c), Some(2), "TEST_RUNNING");
        c.write_all(&[4]).unwrap(); // TEST_END
        assert_eq!(read_byte(&mut c), Some(13), "EXCHANGE_RESULTS");
        // A valid object holding an array of zeros: the costliest JSON to hold parsed (a
        // server that parsed it whole peaked at 1.17 GB).
        let len: u32 = 64 * 1024 * 1024 - 1;
        let _ = c.write_all(&len.to_be_bytes());
        let (head, tail) = (b"{\"a\":[".as_slice(), b"0]}".as_slice());
        let zeros = b"0,".repeat(32 * 1024);
        let mut left = len as usize - head.len() - tail.len();
        let mut ok = c.write_all(head).is_ok();
        while ok && left > 0 {
            let n = left.min(zeros.len());
            ok = c.write_all(&zeros[..n]).is_ok();
            left -= n;
        }
        if ok {
            let _ = c.write_all(tail);
            // The old server answered after parsing; the new one closed long before.
            let mut rest = Vec::new();
            let _ = c.read_to_end(&mut rest);
        }
        drop(d);
    }
    normal_test(addr, "a 64 MiB results message");

    // 10. UDP stream setup hijacked from another host: while a UDP test waits for its
    // streams, "connect" datagrams from 127.0.0.2 must not take them; the client's own
    // stream (from 127.0.0.1, the control connection's host) is answered.
    {
        let params = PARAMS
            .replace("\"tcp\":true", "\"udp\":true,\"bandwidth\":1000000")
            .replace("131072", "1400");
        let mut c = in_setup(addr, 10, &params);
        let stranger = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
        stranger.connect(addr).unwrap();
        stranger
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        for _ in 0..20 {
            stranger.send(b"9876").unwrap();
        }
        assert!(
            stranger.recv(&mut [0u8; 16]).is_err(),
            "a stranger's datagram was answered"
        );
        let own = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        own.connect(addr).unwrap();
        own.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        own.send(b"9876").unwrap();
        let mut reply = [0u8; 16];
        let n = own.recv(&mut reply).unwrap();
        assert_eq!(reply[..n], 987_654_321u32.to_ne_bytes());
        assert_eq!(read_byte(&mut c), Some(1), "TEST_START");
        c.write_all(&[12]).unwrap(); // CLIENT_TERMINATE
    }
    normal_test(addr, "a UDP stream hijack");

    let hwm = vm_hwm_kib(pid);
    eprintln!("tcptune serve peaked at {} MiB (VmHWM)", hwm / 1024);
    assert!(
        hwm < MEMORY_BOUND_KIB,
        "the server peaked at {} MiB, above {MEMORY_BOUND}",
        hwm / 1024
    );
}
