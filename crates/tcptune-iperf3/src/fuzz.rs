//! The fuzz target's body (`fuzz/fuzz_targets/iperf3.rs`), here so that its corpus is
//! replayed by an ordinary test on stable (`tests/fuzz_corpus.rs`) through the same code.
//!
//! The first byte picks what is fuzzed (modulo 3): 0 drives a [`ServerSession`] with the rest
//! as the client's control bytes, 1 a [`ClientSession`] with the rest as the server's, 2 feeds
//! the rest as UDP datagrams to the receiver's loss and jitter accounting. The application acts as
//! `tcptune serve`/`test` would whenever the session asks (approve, accept streams with the
//! session's cookie, finish, send results), and the clock advances with every chunk, so every
//! phase and every deadline is reachable. Besides "no panic", each step checks the sessions'
//! invariants: a failed call leaves the session failed, a live session always has a deadline,
//! and no step queues more than a bounded amount of output.

use tcptune_model::Dur;

use crate::params::Params;
use crate::results::{Results, StreamResult};
use crate::session::{
    ClientEvent, ClientPhase, ClientSession, ServerPhase, ServerSession, Timeouts,
};
use crate::wire::Cookie;

/// Output one step may queue at most: our results with 256 streams are far below this.
const MAX_STEP_OUTPUT: usize = 1 << 20;

fn results(ids: impl Iterator<Item = u32>) -> Results {
    Results {
        cpu_util_total: 1.0,
        cpu_util_user: 0.5,
        cpu_util_system: 0.5,
        sender_has_retransmits: 1,
        congestion_used: Some("cubic".into()),
        streams: ids
            .map(|id| StreamResult {
                id: id as i64,
                bytes: 1,
                retransmits: 0,
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

/// Splits the input into chunks: each chunk is preceded by its length byte (so a mutation of
/// one length reshapes how the bytes arrive, as TCP may).
fn chunks(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    std::iter::from_fn(move || {
        let (&len, tail) = rest.split_first()?;
        if tail.is_empty() {
            return None;
        }
        let n = (len as usize).max(1).min(tail.len());
        let (chunk, after) = tail.split_at(n);
        rest = after;
        Some(chunk)
    })
}

/// Runs one input (see the module's text); returns the bytes the session wrote, so the work
/// is not optimised away. Panics only when an invariant breaks.
#[doc(hidden)]
pub fn fuzz_one(data: &[u8]) -> usize {
    let Some((&mode, rest)) = data.split_first() else {
        return 0;
    };
    match mode % 3 {
        0 => server(rest),
        1 => client(rest),
        _ => udp(rest),
    }
}

/// Chunks as UDP datagrams into the receiver's accounting, arriving 1 ms apart: the counts
/// stay consistent whatever the headers say.
fn udp(data: &[u8]) -> usize {
    let mut r = crate::udp::UdpReceiver::default();
    let wide = data.first().is_some_and(|b| b & 1 == 1);
    let mut n = 0u64;
    for (k, d) in chunks(data).enumerate() {
        r.on_datagram(d, k as f64 * 0.001, wide);
        n += d.len() as u64;
        assert_eq!(r.bytes, n);
        assert!(r.jitter.is_finite() && r.jitter >= 0.0, "{}", r.jitter);
        assert!(r.cnt_error <= r.packet_count);
    }
    r.bytes as usize
}

fn ms(n: u64) -> Dur {
    Dur::from_millis(n)
}

fn server(data: &[u8]) -> usize {
    let mut s = ServerSession::new(ms(0), Timeouts::default());
    let mut written = 0;
    // The first 37 bytes the client sent: its cookie, which its data streams repeat.
    let mut first = Vec::with_capacity(37);
    let mut now = 0u64;
    for chunk in chunks(data) {
        // Time moves by the chunk's first byte, in 100 ms steps: deadlines get hit too.
        now += 100 * (chunk[0] as u64 % 8);
        let take = (37 - first.len()).min(chunk.len());
        first.extend_from_slice(&chunk[..take]);
        let cookie: Option<[u8; 37]> = first.as_slice().try_into().ok();
        let r = s.handle_input(chunk, ms(now));
        let out = s.take_output();
        assert!(out.len() <= MAX_STEP_OUTPUT, "{} bytes queued", out.len());
        written += out.len();
        if r.is_err() {
            if std::env::var_os("FUZZ_DEBUG").is_some() {
                eprintln!("server: {r:?} at {now} ms");
            }
            assert_eq!(s.phase(), ServerPhase::Failed, "{r:?}");
            return written;
        }
        // The application's turns, in the order a session can need them after one input.
        if s.phase() == ServerPhase::Approval {
            if chunk[0] & 0x40 != 0 {
                s.refuse(crate::wire::i_errno::DURATION);
                assert_eq!(s.phase(), ServerPhase::Failed);
                return written + s.take_output().len();
            }
            s.approve(ms(now)).expect("approve in Approval");
        }
        if s.phase() == ServerPhase::Streams {
            // The streams come with the test's cookie (and one stranger, refused).
            let Some(c) = cookie else { return written };
            assert!(s.data_stream(&[0x41; 37], ms(now)).is_none());
            let want = s.params().map(Params::data_streams).unwrap_or(0);
            let udp = s
                .params()
                .is_some_and(|p| p.protocol == crate::params::Protocol::Udp);
            for _ in 0..want {
                let st = if udp {
                    // UDP streams carry no cookie; a TCP one is refused in a UDP test.
                    assert!(s.data_stream(&c, ms(now)).is_none());
                    s.udp_stream(ms(now))
                } else {
                    assert!(s.udp_stream(ms(now)).is_none());
                    s.data_stream(&c, ms(now))
                };
                st.expect("a stream of the test");
            }
            assert!(s.data_stream(&c, ms(now)).is_none(), "an extra stream");
            assert!(s.udp_stream(ms(now)).is_none(), "an extra stream");
        }
        if s.phase() == ServerPhase::Finishing {
            let n = s.params().map(Params::data_streams).unwrap_or(0);
            s.finish(results(1..=n), ms(now))
                .expect("finish when Finishing");
        }
        if let Some(d) = s.deadline() {
            if s.poll(ms(now)).is_err() {
                assert!(ms(now) >= d);
                assert_eq!(s.phase(), ServerPhase::Failed);
                return written;
            }
        } else {
            assert!(matches!(s.phase(), ServerPhase::Done | ServerPhase::Failed));
        }
        written += s.take_output().len();
    }
    let _ = s.handle_eof();
    written
}

fn client(data: &[u8]) -> usize {
    let cookie = Cookie::from_random([9; 36]);
    let params = Params {
        time_s: 1,
        parallel: 2,
        get_server_output: data.first().is_some_and(|b| b & 1 == 1),
        ..Params::default()
    };
    let mut c = ClientSession::new(cookie, params, ms(0), Timeouts::default());
    let mut written = c.take_output().len();
    let mut now = 0u64;
    for chunk in chunks(data) {
        now += 100 * (chunk[0] as u64 % 8);
        let r = c.handle_input(chunk, ms(now));
        written += c.take_output().len();
        let events = match r {
            Ok(ev) => ev,
            Err(e) => {
                assert_eq!(c.phase(), ClientPhase::Failed, "{e}");
                return written;
            }
        };
        for e in events {
            if let ClientEvent::CreateStreams {
                count,
                client_sends,
            } = e
            {
                assert!(client_sends <= count && count <= 256);
            }
        }
        if c.phase() == ClientPhase::Running {
            c.end_test(ms(now)).expect("end_test when Running");
        }
        if c.phase() == ClientPhase::OwnResults {
            c.send_results(&results(1..=2), ms(now))
                .expect("send_results when asked");
        }
        let out = c.take_output();
        assert!(out.len() <= MAX_STEP_OUTPUT);
        written += out.len();
        if let Some(d) = c.deadline() {
            if c.poll(ms(now)).is_err() {
                assert!(ms(now) >= d);
                return written;
            }
        }
    }
    let _ = c.handle_eof();
    written
}
