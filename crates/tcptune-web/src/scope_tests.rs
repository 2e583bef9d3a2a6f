//! The live core on a virtual clock: dumps made by hand, time passed in.

use std::collections::HashSet;

use tcptune_diagnose::{interval, verdict, Context, Limit, Sample};
use tcptune_kernel::trace::{TraceEvent, TraceKind};
use tcptune_kernel::{DiagSocket, TcpInfo};
use tcptune_model::Dur;

use super::*;
use crate::record::{replay, Recorder};
use crate::store::{Bounds, Store};
use crate::update::{EventKind, Source, Trigger, Update};

const MS: u64 = 1_000_000;
const ORIGIN: u64 = 5_000 * MS;

fn info(t_ms: u64) -> TcpInfo {
    // A bulk sender at ~80 Mbit/s whose peer's window is the limit half of the time.
    TcpInfo {
        state: Some(1),
        ca_state: Some(0),
        snd_mss: Some(1448),
        snd_cwnd: Some(40),
        snd_ssthresh: Some(0x7fff_ffff),
        unacked: Some(30),
        sacked: Some(0),
        lost: Some(0),
        retrans: Some(0),
        rtt_us: Some(4000),
        rttvar_us: Some(500),
        min_rtt_us: Some(3000),
        snd_wnd: Some(65_536),
        total_retrans: Some(0),
        total_rto: Some(0),
        bytes_acked: Some(t_ms * 10_000),
        bytes_sent: Some(t_ms * 10_000 + 43_440),
        delivery_rate_bytes_per_s: Some(10_000_000),
        busy_time_us: Some(t_ms * 1000),
        rwnd_limited_us: Some(t_ms * 500),
        sndbuf_limited_us: Some(0),
        ..TcpInfo::default()
    }
}

fn sock(cookie: u64, port: u16, info: TcpInfo) -> DiagSocket {
    DiagSocket {
        cookie,
        info: Some(info),
        ..DiagSocket::from_addrs(
            1,
            "127.0.0.1:40000".parse().unwrap(),
            format!("127.0.0.1:{port}").parse().unwrap(),
        )
    }
}

fn scope(traced: bool) -> Scope {
    Scope::new(Context::default(), Limits::default(), ORIGIN, traced)
}

fn dump(s: &mut Scope, t_ms: u64, socks: Vec<DiagSocket>, watched: &[u64]) -> Vec<Update> {
    let w: HashSet<u64> = watched.iter().copied().collect();
    s.dump(ORIGIN + t_ms * MS, vec![(None, socks)], &w)
}

fn of<'a, T>(u: &'a [Update], f: impl Fn(&'a Update) -> Option<T>) -> Vec<T> {
    u.iter().filter_map(f).collect()
}

#[test]
fn rows_carry_the_engines_verdict_and_points_the_triage_of_the_interval() {
    let mut s = scope(false);
    dump(&mut s, 1000, vec![sock(7, 5201, info(1000))], &[]);
    let u = dump(&mut s, 1250, vec![sock(7, 5201, info(1250))], &[7]);
    let sample = |t: u64| Sample {
        at_s: Dur::from_millis(t),
        info: info(t),
        skmem: None,
    };
    let (a, b) = (sample(1000), sample(1250));
    let want = verdict(Some(&a), &b, &Context::default());
    let rows = of(&u, |x| match x {
        Update::Rows { t_s, rows } => Some((*t_s, rows.clone())),
        _ => None,
    });
    assert_eq!(rows.len(), 1);
    assert!((rows[0].0 - 1.25).abs() < 1e-9);
    assert_eq!(rows[0].1[0].limit, want.limit);
    assert_eq!(rows[0].1[0].verdict, want.text);
    let points = of(&u, |x| match x {
        Update::Point { point, .. } => Some(point.clone()),
        _ => None,
    });
    assert_eq!(points.len(), 1);
    let p = &points[0];
    assert_eq!(p.shares, interval(&a, &b).shares);
    assert_eq!(p.goodput_bps, Some(10_000.0 * 1000.0 * 8.0));
    assert_eq!(p.cwnd_bytes, Some(40 * 1448));
    assert_eq!(p.inflight_bytes, Some(30 * 1448));
    assert_eq!(p.ssthresh_bytes, None, "an infinite ssthresh is not drawn");
    assert_eq!(p.srtt_ms, Some(4.0));
    // The watched connection gets the engine's full diagnosis, consistent with the row.
    let details = of(&u, |x| match x {
        Update::Detail { detail, .. } => Some(detail.clone()),
        _ => None,
    });
    assert_eq!(details.len(), 1);
    assert_eq!(details[0].limit, want.limit);
    assert_eq!(details[0].negotiated.snd_mss, Some(1448));
}

#[test]
fn counter_deltas_make_events_and_triggers_freeze() {
    let mut s = scope(false);
    dump(&mut s, 0, vec![sock(7, 5201, info(0))], &[]);
    let mut i = info(250);
    i.total_retrans = Some(3);
    i.total_rto = Some(1);
    i.ca_state = Some(4);
    i.snd_cwnd = Some(10); // 40 → 10: more than halved
    let u = dump(&mut s, 250, vec![sock(7, 5201, i.clone())], &[]);
    let events = of(&u, |x| match x {
        Update::Event { event, .. } => Some((event.kind, event.count, event.text.clone())),
        _ => None,
    });
    assert!(events.contains(&(EventKind::Retransmit, 3, "3 segments retransmitted".into())));
    assert!(events.contains(&(EventKind::Rto, 1, "1 retransmission timeout".into())));
    assert!(events.contains(&(EventKind::CongState, 1, "open → loss".into())));
    let triggers = of(&u, |x| match x {
        Update::Freeze { trigger, .. } => Some(*trigger),
        _ => None,
    });
    assert_eq!(triggers, vec![Trigger::Rto, Trigger::CwndHalved]);
    // A zero window is an event and a trigger once, when it closes.
    i.snd_wnd = Some(0);
    let u = dump(&mut s, 500, vec![sock(7, 5201, i.clone())], &[]);
    let zero = |u: &[Update]| {
        of(u, |x| match x {
            Update::Freeze { trigger, .. } => Some(*trigger),
            _ => None,
        })
    };
    assert_eq!(zero(&u), vec![Trigger::ZeroWindow]);
    assert!(zero(&dump(&mut s, 750, vec![sock(7, 5201, i)], &[])).is_empty());
}

#[test]
fn a_connection_gone_from_the_dump_is_closed_and_only_the_first_are_kept() {
    let mut s = Scope::new(
        Context::default(),
        Limits { rows: 10, conns: 1 },
        ORIGIN,
        false,
    );
    let slow = |t| {
        let mut i = info(t);
        i.bytes_acked = Some(t);
        i.delivery_rate_bytes_per_s = Some(1);
        i
    };
    dump(
        &mut s,
        0,
        vec![sock(1, 1, info(0)), sock(2, 2, slow(0))],
        &[],
    );
    let u = dump(
        &mut s,
        250,
        vec![sock(1, 1, info(250)), sock(2, 2, slow(250))],
        &[],
    );
    let ids = of(&u, |x| match x {
        Update::Point { id, .. } => Some(id.clone()),
        _ => None,
    });
    assert_eq!(ids, vec!["1"], "only the fastest connection is kept");
    let u = dump(
        &mut s,
        500,
        vec![sock(1, 1, info(500)), sock(2, 2, slow(500))],
        &[2],
    );
    let ids = of(&u, |x| match x {
        Update::Point { id, .. } => Some(id.clone()),
        _ => None,
    });
    assert_eq!(ids, vec!["1", "2"], "a watched one is kept too");
    let u = dump(&mut s, 750, vec![sock(2, 2, slow(750))], &[2]);
    let closed = of(&u, |x| match x {
        Update::Closed { id, t_s } => Some((id.clone(), *t_s)),
        _ => None,
    });
    assert_eq!(closed, vec![("1".to_string(), 0.75)]);
}

fn ack(t_ms: u64, una: u32, nxt: u32, cwnd: u32, wnd: u32) -> TraceEvent {
    TraceEvent {
        t_ns: ORIGIN + t_ms * MS,
        cookie: 7,
        kind: TraceKind::Ack {
            snd_una: una,
            snd_nxt: nxt,
            cwnd_segs: cwnd,
            ssthresh_segs: 0x7fff_ffff,
            snd_wnd_bytes: wnd,
            srtt_us: 2500,
            rcv_wnd_bytes: 65_535,
            data_len: 0,
        },
    }
}

#[test]
fn trace_events_give_per_ack_points_across_a_sequence_wrap() {
    let mut s = scope(true);
    let mut first = info(0);
    first.snd_cwnd = Some(10);
    dump(&mut s, 0, vec![sock(7, 5201, first)], &[]);
    let start = u32::MAX - 1000;
    let mut other = ack(1, 0, 0, 1, 1);
    other.cookie = 99; // not kept: ignored
    let u = s.trace(&[
        ack(1, start, start.wrapping_add(5000), 10, 65_536),
        other,
        ack(2, start.wrapping_add(3000), start.wrapping_add(9000), 4, 0),
        TraceEvent {
            t_ns: ORIGIN + 3 * MS,
            cookie: 7,
            kind: TraceKind::CongState { ca_state: 4 },
        },
        TraceEvent {
            t_ns: ORIGIN + 3 * MS,
            cookie: 7,
            kind: TraceKind::Retransmit { state: 1 },
        },
    ]);
    let acks = of(&u, |x| match x {
        Update::Ack { ack, .. } => Some((ack.una, ack.nxt, ack.cwnd_bytes)),
        _ => None,
    });
    assert_eq!(acks, vec![(0, 5000, 10 * 1448), (3000, 9000, 4 * 1448)]);
    let triggers = of(&u, |x| match x {
        Update::Freeze { trigger, .. } => Some(*trigger),
        _ => None,
    });
    assert_eq!(
        triggers,
        vec![Trigger::ZeroWindow, Trigger::CwndHalved, Trigger::Rto]
    );
    let kinds = of(&u, |x| match x {
        Update::Event { event, .. } => Some(event.kind),
        _ => None,
    });
    assert_eq!(
        kinds,
        vec![
            EventKind::ZeroWindow,
            EventKind::CongState,
            EventKind::Rto,
            EventKind::Retransmit
        ]
    );
}

#[test]
fn a_recording_replays_to_the_points_that_were_streamed() {
    let source = Source {
        per_ack: false,
        interval_s: 0.25,
        reason: Some("tracing unavailable: test".into()),
    };
    let mut live = Store::new(Bounds::default(), source.clone());
    let mut file = Vec::new();
    let mut rec = Recorder::new(std::io::Cursor::new(&mut file), &source).unwrap();
    let mut s = scope(false);
    for k in 0..40u64 {
        let mut i = info(k * 250);
        i.total_retrans = Some((k / 10) as u32);
        i.snd_cwnd = Some(if k == 20 { 12 } else { 40 });
        let u = dump(&mut s, k * 250, vec![sock(7, 5201, i)], &[7]);
        for x in &u {
            live.apply(x);
        }
        rec.write(&u).unwrap();
    }
    let again = replay(std::io::Cursor::new(file), Bounds::default()).unwrap();
    let (a, b) = (live.view("7").unwrap(), again.view("7").unwrap());
    assert_eq!(a.points.len(), 40);
    assert_eq!(a.points, b.points);
    assert_eq!(a.events, b.events);
    assert_eq!(a.frozen, b.frozen);
    assert_eq!(a.detail, b.detail);
    assert!(
        !a.frozen.is_empty() && a.frozen[0].points.len() == 21,
        "the history before the trigger is kept"
    );
    assert_eq!(
        live.rows(&Default::default()),
        again.rows(&Default::default())
    );
    assert_eq!(
        again.source.reason.as_deref(),
        Some("a recording (tracing unavailable: test)")
    );
}

#[test]
fn the_table_is_filtered_with_conns_filter_language() {
    let mut st = Store::new(
        Bounds::default(),
        Source {
            per_ack: false,
            interval_s: 0.25,
            reason: None,
        },
    );
    let mut s = scope(false);
    for u in dump(
        &mut s,
        0,
        vec![sock(1, 5201, info(0)), sock(2, 443, info(0))],
        &[],
    ) {
        st.apply(&u);
    }
    let ids = |f: &str| -> Vec<String> {
        st.rows(&f.parse().unwrap())
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(ids("dport 443"), vec!["2"]);
    assert_eq!(ids("").len(), 2);
    assert!(ids("state listening").is_empty());
    let _ = Limit::ALL;
}
