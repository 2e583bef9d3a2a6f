//! A client that quits while the server waits for its data streams (a plain close, or
//! CLIENT_TERMINATE, as iperf3 sends when its `-C` is unknown to the kernel) frees the server
//! at once, as iperf3 does, instead of leaving it busy until the streams' 10 s deadline.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tcptune_iperf3::Params;
use tcptune_perftest::server::ServerConfig;

mod common;
use common::{cfg, start_server};

/// Runs a raw control handshake up to CREATE_STREAMS: cookie, PARAM_EXCHANGE, parameters.
/// Returns the connection, or the first byte the server answered instead.
fn handshake(addr: std::net::SocketAddr, cookie: &[u8; 37]) -> Result<TcpStream, u8> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(cookie).unwrap();
    let mut b = [0u8; 1];
    c.read_exact(&mut b).unwrap();
    if b[0] != 9 {
        return Err(b[0]);
    }
    let frame = tcptune_iperf3::wire::encode_json(
        &Params {
            time_s: 1,
            ..Params::default()
        }
        .to_json(),
    );
    c.write_all(&frame).unwrap();
    c.read_exact(&mut b).unwrap();
    if b[0] != 10 {
        return Err(b[0]);
    }
    Ok(c)
}

#[test]
fn a_client_quitting_during_stream_setup_frees_the_server_at_once() {
    // One test at a time (the default): a test stuck in setup makes the next client "busy".
    let (addr, stop, h, _) = start_server(ServerConfig::default());
    for (how, last) in [("close", None), ("CLIENT_TERMINATE", Some(12u8))] {
        let mut c = served_within(addr, b"quitquitquitquitquitquitquitquitquit\0", "start");
        if let Some(state) = last {
            c.write_all(&[state]).unwrap();
        }
        drop(c);
        // The next client is served, not refused, and within a second (the streams' deadline,
        // which once held the server, is 10 s).
        let mut next = served_within(addr, b"nextnextnextnextnextnextnextnextnext\0", how);
        next.write_all(&[12]).unwrap();
    }
    // And a whole test runs after them.
    let t = Instant::now();
    let out = loop {
        let params = Params {
            time_s: 1,
            ..Params::default()
        };
        match tcptune_perftest::client::run(&cfg(addr, params), &mut |_, _| {}) {
            Ok(out) => break out,
            // The terminated session may still hold the slot for a moment.
            Err(e) if t.elapsed() < Duration::from_secs(1) && e.to_string().contains("busy") => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(out.end.sum_received.bytes > 1_000_000);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

/// A handshake that the server accepts within a second; a busy answer is retried until then
/// (the previous test's thread may take a moment to end).
fn served_within(addr: std::net::SocketAddr, cookie: &[u8; 37], after: &str) -> TcpStream {
    let t = Instant::now();
    loop {
        match handshake(addr, cookie) {
            Ok(c) => return c,
            Err(0xff) if t.elapsed() < Duration::from_secs(1) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(b) => panic!(
                "after a {after} in setup the server answered {b:#x} for {:?}",
                t.elapsed()
            ),
        }
    }
}
