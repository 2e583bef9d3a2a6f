//! Hostile clients against our server on loopback: thousands of random, truncated and
//! malformed control sessions, then a normal test; no descriptor or thread is left behind.
//! (Its own test binary, so the process-wide descriptor and thread counts are this test's.)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tcptune_iperf3::Params;
use tcptune_perftest::client;
use tcptune_perftest::server::{ServerConfig, ServerLog};

mod common;
use common::{cfg, start_server};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn threads() -> usize {
    let st = std::fs::read_to_string("/proc/self/status").unwrap();
    st.lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn hostile_control_sessions_then_a_normal_test() {
    let fds_before = open_fds();
    let threads_before = threads();
    let (addr, stop, h, logs) = start_server(ServerConfig {
        max_tests: 4,
        timeouts: tcptune_iperf3::session::Timeouts {
            handshake: tcptune_model::Dur::from_millis(500),
            ..Default::default()
        },
        ..ServerConfig::default()
    });
    // A fixed-seed generator: the sessions are random but the test is repeatable.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let valid_cookie = b"abcdefghijklmnopqrstuvwxyz234567abcd\0";
    for i in 0..2000 {
        let Ok(mut c) = TcpStream::connect(addr) else {
            continue;
        };
        let mut msg: Vec<u8> = Vec::new();
        match i % 4 {
            // Random bytes.
            0 => msg.extend((0..rnd() % 200).map(|_| rnd() as u8)),
            // A truncated cookie.
            1 => msg.extend_from_slice(&valid_cookie[..(rnd() % 37) as usize]),
            // A valid cookie and a huge or truncated length prefix.
            2 => {
                msg.extend_from_slice(valid_cookie);
                msg.extend_from_slice(&(rnd() as u32).to_be_bytes()[..(1 + rnd() % 4) as usize]);
            }
            // A valid cookie and random JSON-ish parameters.
            _ => {
                msg.extend_from_slice(valid_cookie);
                let body = format!(
                    "{{\"tcp\":true,\"time\":{},\"parallel\":\"{}\"}}",
                    rnd() % 100,
                    rnd()
                );
                msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
                msg.extend_from_slice(&body.as_bytes()[..(rnd() as usize % (body.len() + 1))]);
            }
        }
        let _ = c.write_all(&msg);
        // Half close abruptly, half wait for whatever the server says (bounded).
        if i % 2 == 0 {
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let _ = c.shutdown(std::net::Shutdown::Write);
            let mut sink = Vec::new();
            let _ = c.read_to_end(&mut sink);
        }
    }
    let out = client::run(
        &cfg(
            addr,
            Params {
                time_s: 1,
                ..Params::default()
            },
        ),
        &mut |_, _| {},
    )
    .unwrap();
    assert!(out.end.sum_received.bytes > 1_000_000);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    assert_eq!(open_fds(), fds_before, "descriptors left open");
    assert_eq!(threads(), threads_before, "threads left running");
    let logs = logs.lock().unwrap();
    assert!(logs.iter().any(|l| matches!(l, ServerLog::TestDone { .. })));
    // No thread left behind: the server joined them all (h.join returned), and every hostile
    // session ended as a failure or refusal, not a completed test.
    assert_eq!(
        logs.iter()
            .filter(|l| matches!(l, ServerLog::TestDone { .. }))
            .count(),
        1
    );
}
