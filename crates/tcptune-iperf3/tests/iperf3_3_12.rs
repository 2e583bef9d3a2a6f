//! Golden test: the control connections of stock iperf3 3.12 (recorded, see
//! `fixtures/iperf3/README.md`) replayed byte by byte into our server session (the client's
//! bytes) and our client session (the server's bytes).

use std::path::PathBuf;

use tcptune_iperf3::session::{
    ClientEvent, ClientSession, ServerEvent, ServerPhase, ServerSession, Timeouts,
};
use tcptune_iperf3::{Cookie, Direction, Params, Results, COOKIE_LEN};
use tcptune_model::Dur;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/iperf3")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn now() -> Dur {
    Dur::from_millis(1)
}

fn no_results() -> Results {
    Results {
        cpu_util_total: 0.0,
        cpu_util_user: 0.0,
        cpu_util_system: 0.0,
        sender_has_retransmits: -1,
        congestion_used: None,
        streams: vec![],
        server_output_json: None,
        server_output_text: None,
        extension: None,
    }
}

/// Replays a client's control bytes into our server, acting as a server application would.
/// Returns the parameters and the client's results.
fn replay_client(c2s: &[u8]) -> (Params, Results) {
    let mut s = ServerSession::new(Dur::ZERO, Timeouts::default());
    let cookie: [u8; COOKIE_LEN] = c2s[..COOKIE_LEN].try_into().unwrap();
    let (mut params, mut results) = (None, None);
    for &b in c2s {
        for ev in s.handle_input(&[b], now()).unwrap() {
            match ev {
                ServerEvent::Params(p) => {
                    s.approve(now()).unwrap();
                    for _ in 0..p.data_streams() {
                        s.data_stream(&cookie, now()).unwrap();
                    }
                    params = Some(*p);
                }
                ServerEvent::TestEnd => s.finish(no_results(), now()).unwrap(),
                ServerEvent::ClientResults(r) => results = Some(*r),
                ServerEvent::Done => {}
            }
        }
    }
    assert_eq!(s.phase(), ServerPhase::Done);
    (params.unwrap(), results.unwrap())
}

/// Replays a server's control bytes into our client. Returns the server's results.
fn replay_server(s2c: &[u8], cookie: Cookie, params: Params) -> Results {
    let mut c = ClientSession::new(cookie, params, Dur::ZERO, Timeouts::default());
    let mut results = None;
    for &b in s2c {
        for ev in c.handle_input(&[b], now()).unwrap() {
            match ev {
                ClientEvent::TestRunning => c.end_test(now()).unwrap(),
                ClientEvent::ExchangeResults => c.send_results(&no_results(), now()).unwrap(),
                ClientEvent::ServerResults(r) => results = Some(*r),
                _ => {}
            }
        }
    }
    // The last thing we sent is IPERF_DONE.
    assert_eq!(c.take_output().last(), Some(&16));
    results.unwrap()
}

#[test]
fn forward_two_streams() {
    let c2s = fixture("3.12-forward-P2.c2s.bin");
    let (params, client) = replay_client(&c2s);
    assert_eq!(params.parallel, 2);
    assert_eq!(params.time_s, 1);
    assert_eq!(params.direction, Direction::Forward);
    assert_eq!(params.client_version.as_deref(), Some("3.12"));
    // The client sent on streams 1 and 3 and counted retransmits.
    assert_eq!(client.sender_has_retransmits, 1);
    let ids: Vec<i64> = client.streams.iter().map(|s| s.id).collect();
    assert_eq!(ids, [1, 3]);
    assert!(client
        .streams
        .iter()
        .all(|s| s.bytes > 0 && s.retransmits >= 0));

    let cookie = Cookie::from_wire(c2s[..COOKIE_LEN].try_into().unwrap()).unwrap();
    let server = replay_server(&fixture("3.12-forward-P2.s2c.bin"), cookie, params);
    // A receiving iperf3 3.12 writes −1 as 18446744073709551615.
    assert_eq!(server.sender_has_retransmits, -1);
    assert!(server.streams.iter().all(|s| s.retransmits == -1));
    let received: u64 = server.streams.iter().map(|s| s.bytes).sum();
    let sent: u64 = client.streams.iter().map(|s| s.bytes).sum();
    assert!(
        received <= sent && received > sent / 2,
        "{received} vs {sent}"
    );
}

#[test]
fn bidirectional_with_window_congestion_omit_and_server_output() {
    let c2s = fixture("3.12-bidir-w256K-reno-O1-server-output.c2s.bin");
    let (params, client) = replay_client(&c2s);
    assert_eq!(params.direction, Direction::Bidirectional);
    assert_eq!(params.window, Some(256 * 1024));
    assert_eq!(params.congestion.as_deref(), Some("reno"));
    assert_eq!(params.omit_s, 1);
    assert!(params.get_server_output);
    assert_eq!(params.data_streams(), 2);
    assert_eq!(client.streams.len(), 2);

    let cookie = Cookie::from_wire(c2s[..COOKIE_LEN].try_into().unwrap()).unwrap();
    let server = replay_server(
        &fixture("3.12-bidir-w256K-reno-O1-server-output.s2c.bin"),
        cookie,
        params.clone(),
    );
    assert!(server
        .server_output_text
        .as_deref()
        .is_some_and(|t| t.contains("Accepted connection from 127.0.0.1")));
    // Our own parameters JSON for the same options parses back to the same parameters that
    // iperf3 sent.
    let ours = params.to_json();
    assert_eq!(
        Params::from_json(ours.as_object().unwrap()).unwrap(),
        params
    );
}
