//! Our client against our server on loopback: every direction, parallel streams, bytes mode,
//! and the server's samples arriving in the results extension.

use std::sync::atomic::Ordering;

use tcptune_iperf3::{Direction, Params};
use tcptune_perftest::client;
use tcptune_perftest::server::ServerConfig;
use tcptune_perftest::test_report::SampledAt;

mod common;
use common::{cfg, start_server};

#[test]
fn every_direction_against_our_server() {
    let (addr, stop, h, _) = start_server(ServerConfig {
        max_tests: 2,
        ..ServerConfig::default()
    });
    for (direction, parallel) in [
        (Direction::Forward, 1),
        (Direction::Reverse, 2),
        (Direction::Bidirectional, 2),
    ] {
        let params = Params {
            direction,
            parallel,
            time_s: 1,
            client_version: Some("tcptune".into()),
            ..Params::default()
        };
        let mut ticks = 0;
        let out = client::run(&cfg(addr, params), &mut |r, ids| {
            assert_eq!(r.streams.len(), ids.len());
            ticks += 1;
        })
        .unwrap();
        assert!(ticks >= 2, "{direction:?}: {ticks} interval reports");
        let want = match direction {
            Direction::Bidirectional => 4,
            _ => parallel as usize,
        };
        assert_eq!(out.end.streams.len(), want);
        let sent = out.end.sum_sent.bytes;
        let recv = out.end.sum_received.bytes;
        assert!(sent > 1_000_000, "{direction:?}: sent {sent}");
        // Receivers count all but what was in flight when the test ended.
        assert!(
            recv as f64 >= 0.9 * sent as f64 && recv <= sent,
            "{direction:?}: {sent} vs {recv}"
        );
        // The server's samples came back in the extension.
        assert!(out.tcptune.server_samples);
        assert!(out
            .tcptune
            .streams
            .iter()
            .any(|s| s.at == SampledAt::Server && s.samples.len() >= 10));
        // 1 s at 50 ms: about 20 samples of each of our streams.
        assert!(out
            .tcptune
            .streams
            .iter()
            .filter(|s| s.at == SampledAt::Client)
            .all(|s| s.samples.len() >= 15));
        // Each direction judged and summed on its own: the reverse one apart, for --bidir.
        let diag = &out.tcptune.diagnosis;
        let reverse = diag.reverse.as_deref();
        assert_eq!(
            diag.streams.len() + reverse.map_or(0, |r| r.streams.len()),
            want
        );
        assert_eq!(reverse.is_some(), direction == Direction::Bidirectional);
        for t in std::iter::once(diag).chain(reverse) {
            let sum: f64 = t.streams.iter().map(|s| s.achieved_bps.bps()).sum();
            assert!((t.achieved_bps.bps() - sum).abs() < 1.0, "{}", t.verdict);
            // Every sender was sampled (ours or the server's), so the limit is known, and no
            // verdict contradicts its evidence.
            for d in &t.streams {
                assert_ne!(
                    d.limit,
                    tcptune_diagnose::Limit::NotEnoughEvidence,
                    "{}",
                    d.verdict
                );
                let broken = tcptune_diagnose::engine::invariants::check(&d.diagnosis());
                assert!(broken.is_empty(), "{}: {broken:?}", d.verdict);
            }
        }
        if direction == Direction::Bidirectional {
            assert!(out.end.sum_sent_bidir_reverse.as_ref().unwrap().bytes > 1_000_000);
        }
    }
    // Bytes mode.
    let out = client::run(
        &cfg(
            addr,
            Params {
                bytes: 20_000_000,
                time_s: 0,
                ..Params::default()
            },
        ),
        &mut |_, _| {},
    )
    .unwrap();
    assert!(
        out.end.sum_sent.bytes >= 20_000_000 && out.end.sum_sent.bytes < 20_000_000 + 131_072 + 1
    );
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

#[test]
fn rate_cap_zero_copy_congestion_control_and_window() {
    let (addr, stop, h, _) = start_server(ServerConfig::default());
    // -b 200mbit -Z -C reno -w 1MiB, forward: our sendfile sender, paced.
    let params = Params {
        time_s: 2,
        bandwidth_bps: Some(200_000_000),
        zerocopy: true,
        congestion: Some("reno".into()),
        window: Some(1 << 20),
        ..Params::default()
    };
    let out = client::run(&cfg(addr, params), &mut |_, _| {}).unwrap();
    let r = out.end.sum_received.bits_per_second;
    assert!((180e6..=220e6).contains(&r), "paced at {r} bit/s");
    assert_eq!(out.end.sender_tcp_congestion.as_deref(), Some("reno"));
    assert_eq!(out.end.receiver_tcp_congestion.as_deref(), Some("reno"));
    assert_eq!(out.start.sock_bufsize, 1 << 20);
    // The kernel doubles SO_SNDBUF: the sender's samples show the fixed 2 MiB buffer.
    let snd = out.tcptune.streams.iter().find(|s| s.sender).unwrap();
    assert_eq!(snd.samples.last().unwrap().skmem.unwrap().sndbuf, 2 << 20);
    // The cap makes the sender application limited, which is not a problem.
    let d = &out.tcptune.diagnosis;
    assert_eq!(d.limit, tcptune_diagnose::Limit::Application, "{d}");
    assert!(!d.problem, "{d}");
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

/// Stream roles in a bidirectional test follow accept order; the server classifies connections
/// on separate threads, so it must restore that order (a swapped pair would have both ends
/// writing on one connection and nobody reading). Several runs with four streams each way.
#[test]
fn bidirectional_roles_survive_racing_classification() {
    // Two slots: the client has its results while the server still ends the last test, so the
    // next test may arrive before that test's slot is free (a refusal seen in CI).
    let (addr, stop, h, _) = start_server(ServerConfig {
        max_tests: 2,
        ..ServerConfig::default()
    });
    for _ in 0..4 {
        let params = Params {
            direction: Direction::Bidirectional,
            parallel: 4,
            time_s: 1,
            ..Params::default()
        };
        let out = client::run(&cfg(addr, params), &mut |_, _| {}).unwrap();
        for st in &out.end.streams {
            assert!(
                st.receiver.as_ref().unwrap().bytes > 100_000,
                "a stalled stream: {st:?}"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

#[test]
fn udp_against_our_server_counts_datagrams_loss_and_jitter() {
    // Two slots: the client has its results while the server still ends the last test, so the
    // next test may arrive before that test's slot is free (a refusal seen in CI).
    let (addr, stop, h, _) = start_server(ServerConfig {
        max_tests: 2,
        ..ServerConfig::default()
    });
    for direction in [
        Direction::Forward,
        Direction::Reverse,
        Direction::Bidirectional,
    ] {
        let params = Params {
            protocol: tcptune_iperf3::Protocol::Udp,
            direction,
            time_s: 1,
            len: 1400,
            bandwidth_bps: Some(8_000_000),
            udp_counters_64bit: direction == Direction::Reverse,
            ..Params::default()
        };
        let out = client::run(&cfg(addr, params), &mut |_, _| {}).unwrap();
        let sum = out.end.sum.as_ref().expect("a UDP test has end.sum");
        let figures = out.end.sum_received.udp.as_ref().unwrap();
        // 8 Mbit/s of 1400-byte datagrams for a second: about 714 datagrams, none lost on
        // loopback, each counted with its bytes.
        let sent = out.end.sum_sent.udp.as_ref().unwrap().packets;
        assert!(
            (600..=800).contains(&sent),
            "{direction:?}: {sent} datagrams"
        );
        assert_eq!(out.end.sum_sent.bytes, sent * 1400, "{direction:?}");
        assert_eq!(figures.lost_packets, Some(0), "{direction:?}");
        assert!(
            figures.jitter_ms.unwrap() < 20.0,
            "{direction:?}: {figures:?}"
        );
        let rate = out.end.sum_sent.bits_per_second;
        assert!((rate - 8e6).abs() < 0.8e6, "{direction:?}: {rate}");
        assert!(sum.udp.is_some());
        let rows = out.end.streams.iter().filter(|s| s.udp.is_some()).count();
        let want = if direction == Direction::Bidirectional {
            2
        } else {
            1
        };
        assert_eq!(rows, want, "{direction:?}");
    }
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}
