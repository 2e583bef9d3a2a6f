//! iperf3's `-F` on loopback, our client against our server: a sending client sends the file's
//! bytes (and the test ends at its end, as iperf3's), a receiving one writes what arrives, and
//! the server writes what it receives, byte for byte.

use tcptune_iperf3::{Direction, Params};
use tcptune_perftest::client;
use tcptune_perftest::server::ServerConfig;
use tcptune_testkit::TempDir;

mod common;
use common::{cfg, start_server};

/// Bytes that are not one repeated block, so a stream that sent a block twice or skipped one
/// would not match.
fn content(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn a_file_sent_with_f_arrives_whole_and_ends_the_test() {
    let dir = TempDir::new("diskfile-send");
    let (src, dst) = (dir.path().join("src.bin"), dir.path().join("dst.bin"));
    // 3 MiB and a bit: not a whole number of 128 KiB blocks.
    let data = content(3 * 1024 * 1024 + 12_345);
    std::fs::write(&src, &data).unwrap();
    let (addr, _stop, h, _) = start_server(ServerConfig {
        one_off: true,
        diskfile: Some(dst.clone()),
        ..ServerConfig::default()
    });
    let params = Params {
        direction: Direction::Forward,
        // Far longer than the file takes: the file's end must end the test.
        time_s: 30,
        client_version: Some("tcptune".into()),
        ..Params::default()
    };
    let mut c = cfg(addr, params);
    c.diskfile = Some(src.clone());
    let started = std::time::Instant::now();
    let out = client::run(&c, &mut |_, _| {}).unwrap();
    assert!(
        started.elapsed().as_secs() < 20,
        "the test ran {:?}: the file's end did not end it",
        started.elapsed()
    );
    h.join().unwrap();
    assert_eq!(out.end.sum_sent.bytes, data.len() as u64);
    let d = out.end.streams[0].diskfile.as_ref().expect("diskfile");
    assert_eq!(
        (d.sent, d.size, d.percent),
        (data.len() as u64, data.len() as u64, 100)
    );
    assert_eq!(d.filename, src.display().to_string());
    // What the server received (all but what was still in flight when the client ended the
    // test, as with iperf3) is the file's beginning, byte for byte.
    let got = std::fs::read(&dst).unwrap();
    assert_eq!(got.len() as u64, out.end.sum_received.bytes);
    assert!(!got.is_empty());
    assert!(
        got[..] == data[..got.len()],
        "the server's {} B are not the file's first bytes",
        got.len()
    );
}

#[test]
fn a_receiving_client_writes_what_arrives_with_f() {
    let dir = TempDir::new("diskfile-recv");
    let dst = dir.path().join("received.bin");
    let (addr, _stop, h, _) = start_server(ServerConfig {
        one_off: true,
        ..ServerConfig::default()
    });
    let params = Params {
        direction: Direction::Reverse,
        time_s: 0,
        bytes: 2_000_000,
        client_version: Some("tcptune".into()),
        ..Params::default()
    };
    let mut c = cfg(addr, params);
    c.diskfile = Some(dst.clone());
    let out = client::run(&c, &mut |_, _| {}).unwrap();
    h.join().unwrap();
    let written = std::fs::metadata(&dst).unwrap().len();
    assert_eq!(written, out.end.sum_received.bytes);
    assert!(written >= 2_000_000, "{written} B written");
    // Only its owner may read what arrived (iperf3 opens it 0600).
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&dst).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}
