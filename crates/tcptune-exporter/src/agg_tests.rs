//! The aggregator on a virtual clock: deltas, closes by destroy event, lost destroy events,
//! the series cap's overflow group, counters that never go backwards, and the `cpu` class
//! from a scripted process.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use tcptune_diagnose::Context;
use tcptune_kernel::cpustat::ThreadTimes;
use tcptune_kernel::{CongName, DiagSocket, TcpInfo};
use tcptune_model::Dur;

use crate::agg::{Aggregator, Config};
use crate::cpu::{CpuWatch, Procs};
use crate::groups::{Dimension, GroupMap, Grouping};
use crate::metrics::{fixed_series, series_per_group};
use crate::poll::measure_cpu;

fn agg(by: Vec<Dimension>, max_series: usize) -> Aggregator {
    let map = GroupMap::parse("[ports]\nweb = [443]\nperf = [5201]\ndb = [5432]\n").unwrap();
    Aggregator::new(Config {
        grouping: Grouping::new(by, map).unwrap(),
        max_series,
        ctx: Context::default(),
    })
    .unwrap()
}

/// A socket's counters: (bytes acked, busy µs, rwnd-limited µs).
fn sock(cookie: u64, port: u16, acked: u64, busy: u64, rwnd: u64) -> DiagSocket {
    DiagSocket {
        cookie,
        info: Some(TcpInfo {
            bytes_acked: Some(acked),
            bytes_retrans: Some(acked / 100),
            busy_time_us: Some(busy),
            rwnd_limited_us: Some(rwnd),
            sndbuf_limited_us: Some(0),
            rtt_us: Some(2000),
            min_rtt_us: Some(500),
            delivery_rate_bytes_per_s: Some(1_000_000),
            delivery_rate_app_limited: Some(false),
            ..TcpInfo::default()
        }),
        congestion: Some(CongName::new("cubic")),
        ..DiagSocket::from_addrs(
            1,
            format!("10.0.0.1:{port}").parse().unwrap(),
            format!("10.0.0.2:{}", 40000 + cookie % 20000)
                .parse()
                .unwrap(),
        )
    }
}

/// A seeded xorshift sequence: the walks below are the same in every run.
fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

fn s(ms: u64) -> Dur {
    Dur::from_millis(ms)
}

/// Every sample of a scrape in the text format: series (name and labels) → value.
fn scrape(a: &Aggregator) -> HashMap<String, f64> {
    a.encode(false)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn get(m: &HashMap<String, f64>, series: &str) -> f64 {
    m.get(series).copied().unwrap_or(0.0)
}

#[test]
fn a_connection_followed_across_polls_adds_its_differences() {
    let mut a = agg(vec![], 10_000);
    // The baseline: what happened before the exporter started is not counted.
    a.dump(None, vec![sock(1, 5201, 50_000, 900_000, 0)], s(0));
    a.finish(s(1));
    let m = scrape(&a);
    assert_eq!(get(&m, "tcptune_delivered_bytes_total{group=\"all\"}"), 0.0);
    assert_eq!(
        get(&m, "tcptune_connections{group=\"all\",state=\"ESTAB\"}"),
        1.0
    );
    a.dump(
        None,
        vec![sock(1, 5201, 1_050_000, 1_700_000, 600_000)],
        s(1000),
    );
    a.finish(s(1));
    let m = scrape(&a);
    assert_eq!(get(&m, "tcptune_delivered_bytes_total{group=\"all\"}"), 1e6);
    assert_eq!(
        get(&m, "tcptune_retransmitted_bytes_total{group=\"all\"}"),
        10_000.0
    );
    let secs = |l: &str| {
        get(
            &m,
            &format!("tcptune_limit_seconds_total{{group=\"all\",limit=\"{l}\"}}"),
        )
    };
    assert!((secs("receiver_window") - 0.6).abs() < 1e-9);
    // Busy but not window-limited: the engine's class for the rest (no loss: the network).
    assert!((secs("network") - 0.2).abs() < 1e-9);
    assert!((secs("application") - 0.2).abs() < 1e-9);
    assert_eq!(
        get(
            &m,
            "tcptune_connections_limited{group=\"all\",limit=\"receiver_window\"}"
        ),
        1.0
    );
    assert_eq!(get(&m, "tcptune_rtt_seconds_count{group=\"all\"}"), 1.0);
    assert_eq!(
        get(
            &m,
            "tcptune_delivery_rate_bytes_per_second_count{group=\"all\"}"
        ),
        1.0
    );
    assert_eq!(
        get(&m, "tcptune_connections_opened_total{group=\"all\"}"),
        0.0
    );
}

#[test]
fn closes_add_the_last_difference_from_the_destroy_event() {
    let mut a = agg(vec![], 10_000);
    a.dump(None, vec![sock(1, 443, 1000, 0, 0)], s(0));
    a.dump(None, vec![sock(1, 443, 3000, 0, 0)], s(1000));
    // Closes after the second poll; its final counters come with the destroy event.
    a.destroyed(None, &sock(1, 443, 4500, 10_000, 0), s(1500));
    // Opens and closes between polls: its whole life.
    a.destroyed(None, &sock(2, 443, 777, 5000, 0), s(1600));
    a.dump(None, vec![], s(2000));
    a.finish(s(1));
    let m = scrape(&a);
    assert_eq!(
        get(&m, "tcptune_delivered_bytes_total{group=\"all\"}"),
        2000.0 + 1500.0 + 777.0
    );
    assert_eq!(
        get(&m, "tcptune_connections_opened_total{group=\"all\"}"),
        1.0
    );
    assert_eq!(
        get(&m, "tcptune_connections_closed_total{group=\"all\"}"),
        2.0
    );
    assert_eq!(
        get(&m, "tcptune_connections{group=\"all\",state=\"ESTAB\"}"),
        0.0
    );
    assert_eq!(
        get(&m, "tcptune_exporter_destroy_events_dropped_total"),
        0.0
    );
}

#[test]
fn a_destroy_event_after_the_dump_that_missed_the_socket_still_counts() {
    let mut a = agg(vec![], 10_000);
    a.dump(None, vec![sock(1, 443, 0, 0, 0)], s(0));
    // Closed just before this dump; its event is read after it.
    a.dump(None, vec![], s(1000));
    a.destroyed(None, &sock(1, 443, 9000, 0, 0), s(1001));
    a.dump(None, vec![], s(2000));
    a.finish(s(1));
    let m = scrape(&a);
    assert_eq!(
        get(&m, "tcptune_delivered_bytes_total{group=\"all\"}"),
        9000.0
    );
    assert_eq!(
        get(&m, "tcptune_exporter_destroy_events_dropped_total"),
        0.0
    );
    // A socket gone from two dumps without an event lost it: counted as dropped and closed.
    a.dump(None, vec![sock(3, 443, 0, 0, 0)], s(3000));
    a.dump(None, vec![], s(4000));
    a.dump(None, vec![], s(5000));
    let m = scrape(&a);
    assert_eq!(
        get(&m, "tcptune_exporter_destroy_events_dropped_total"),
        1.0
    );
    assert_eq!(
        get(&m, "tcptune_connections_closed_total{group=\"all\"}"),
        2.0
    );
}

#[test]
fn hundreds_of_short_connections_between_polls_sum_exactly() {
    let mut a = agg(vec![Dimension::Port], 10_000);
    a.dump(None, vec![], s(0));
    let mut sent = 0;
    for i in 0..500u64 {
        let bytes = 1000 + i * 37;
        sent += bytes;
        a.destroyed(None, &sock(100 + i, 5201, bytes, 2000, 0), s(10 + i));
    }
    a.dump(None, vec![], s(1000));
    a.finish(s(1));
    let m = scrape(&a);
    assert_eq!(
        get(&m, "tcptune_delivered_bytes_total{group=\"perf\"}"),
        sent as f64
    );
    assert_eq!(
        get(&m, "tcptune_connections_opened_total{group=\"perf\"}"),
        500.0
    );
    assert_eq!(
        get(&m, "tcptune_connections_closed_total{group=\"perf\"}"),
        500.0
    );
}

#[test]
fn groups_past_the_series_cap_fold_into_other() {
    // Room for the fixed series, `other` and exactly one group.
    let cap = fixed_series() + 2 * series_per_group();
    let mut a = agg(vec![Dimension::Port], cap);
    assert_eq!(a.max_groups(), 1);
    a.dump(None, vec![], s(0));
    a.destroyed(None, &sock(1, 443, 100, 0, 0), s(1));
    a.destroyed(None, &sock(2, 5432, 200, 0, 0), s(2));
    a.destroyed(None, &sock(3, 5201, 300, 0, 0), s(3));
    a.finish(s(1));
    let m = scrape(&a);
    assert_eq!(
        get(&m, "tcptune_delivered_bytes_total{group=\"web\"}"),
        100.0
    );
    assert_eq!(
        get(&m, "tcptune_delivered_bytes_total{group=\"other\"}"),
        500.0
    );
    assert_eq!(get(&m, "tcptune_exporter_overflow_connections_total"), 2.0);
    assert!(!m.keys().any(|k| k.contains("group=\"db\"")));
    let samples = a
        .encode(false)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .count();
    assert!(samples <= cap, "{samples} samples > --max-series {cap}");
    assert!(Aggregator::new(Config {
        grouping: Grouping::default(),
        max_series: cap - 1,
        ctx: Context::default(),
    })
    .is_err());
}

#[test]
fn counters_never_go_backwards_whatever_the_kernel_says() {
    let mut a = agg(vec![Dimension::Port], 10_000);
    // A seeded walk of counters that sometimes go down (a reused cookie, a wrapped field).
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut before: HashMap<String, f64> = HashMap::new();
    for poll in 0..50u64 {
        let mut socks: Vec<DiagSocket> = Vec::new();
        for c in 0..20u64 {
            if next() % 4 == 0 {
                continue;
            }
            let port = [443, 5201, 5432][(c % 3) as usize];
            let busy = next() % 2_000_000;
            socks.push(sock(c, port, next() % 1_000_000, busy, busy / 2));
        }
        a.dump(None, socks, s(poll * 1000));
        if next() % 3 == 0 {
            a.destroyed(
                None,
                &sock(next() % 30, 443, next() % 1_000_000, 0, 0),
                s(poll * 1000 + 500),
            );
        }
        a.finish(s(1));
        let now = scrape(&a);
        for (k, v) in &now {
            let counter = k.contains("_total")
                || k.contains("_bucket")
                || k.contains("_count")
                || k.contains("_sum");
            if counter {
                let b = before.get(k).copied().unwrap_or(0.0);
                assert!(*v >= b, "{k} went from {b} to {v} at poll {poll}");
            }
        }
        before = now;
    }
    let m = before;
    assert!(get(&m, "tcptune_delivered_bytes_total{group=\"web\"}") > 0.0);
}

#[test]
fn connections_rank_by_time_lost_to_fixable_limits() {
    let mut a = agg(vec![Dimension::Port], 10_000);
    a.dump(
        None,
        vec![
            sock(1, 443, 0, 0, 0),
            sock(2, 5201, 0, 0, 0),
            sock(3, 5432, 0, 0, 0),
        ],
        s(0),
    );
    a.dump(
        None,
        vec![
            sock(1, 443, 1000, 900_000, 300_000),
            sock(2, 5201, 1000, 900_000, 800_000),
            // Busy, but not window- or buffer-limited: nothing fixable.
            sock(3, 5432, 1000, 900_000, 0),
        ],
        s(1000),
    );
    let top = a.top(5);
    assert_eq!(top.followed, 3);
    let cookies: Vec<u64> = top.connections.iter().map(|c| c.cookie).collect();
    assert_eq!(cookies, [2, 1]);
    let c = &top.connections[0];
    assert_eq!(c.group, "perf");
    assert!((c.fixable_s - 0.8).abs() < 1e-9, "{c:?}");
    assert!((c.limit_s["receiver_window"] - 0.8).abs() < 1e-9);
    assert!(!c.verdict.text.is_empty());
    assert_eq!(a.top(1).connections.len(), 1);
}

/// A scripted `/proc`: every socket belongs to process 7, whose one thread's (run, wait) ns the
/// test sets.
struct OneProcess(ThreadTimes);

impl Procs for OneProcess {
    fn owners(&mut self, inodes: &HashSet<u32>) -> HashMap<u32, u32> {
        inodes.iter().map(|&i| (i, 7)).collect()
    }
    fn times(&mut self, pid: u32) -> Option<ThreadTimes> {
        (pid == 7).then(|| self.0.clone())
    }
}

fn ran(run_ns: u64) -> ThreadTimes {
    ThreadTimes::new(HashMap::from([(7, (run_ns, 0))]))
}

#[test]
fn an_application_limited_socket_whose_process_is_cpu_bound_is_counted_as_cpu() {
    let a = Mutex::new(agg(vec![], 10_000));
    let mut procs = OneProcess(ran(0));
    let mut w = CpuWatch::new(1, 64, 2);
    let with_inode = |acked, busy| {
        let mut s = sock(1, 5201, acked, busy, 0);
        s.inode = 4242;
        if let Some(i) = s.info.as_mut() {
            i.bytes_sent = Some(acked);
        }
        s
    };
    // Each second 1 MB delivered with 0.1 s busy: 0.9 s with nothing to send.
    let poll = |i: u64, procs: &mut OneProcess, w: &mut CpuWatch| {
        let mut g = a.lock().unwrap();
        g.dump(
            None,
            vec![with_inode(i * 1_000_000, i * 100_000)],
            s(i * 1000),
        );
        g.finish(s(0));
        drop(g);
        measure_cpu(w, procs, &a, s(i * 1000));
    };
    poll(0, &mut procs, &mut w);
    assert!(
        a.lock().unwrap().cpu_candidates(64).is_empty(),
        "no interval yet"
    );
    poll(1, &mut procs, &mut w);
    assert_eq!(a.lock().unwrap().cpu_candidates(64), [4242]);
    // The process ran 0.95 s of the next second: bound, from its second reading on.
    procs.0 = ran(950_000_000);
    poll(2, &mut procs, &mut w);
    let secs = |l: &str| {
        get(
            &scrape(&a.lock().unwrap()),
            &format!("tcptune_limit_seconds_total{{group=\"all\",limit=\"{l}\"}}"),
        )
    };
    assert!((secs("application") - 1.8).abs() < 1e-9);
    assert_eq!(secs("cpu"), 0.0);
    // Meanwhile it ran 0.2 s of the second: not bound, which the second after will show.
    procs.0 = ran(1_150_000_000);
    poll(3, &mut procs, &mut w);
    // The engine's verdict on the interval after the bound reading is the CPU: its time
    // with nothing to send and the rest of its busy time.
    assert!((secs("cpu") - 1.0).abs() < 1e-9, "{}", secs("cpu"));
    assert!((secs("application") - 1.8).abs() < 1e-9);
    let m = scrape(&a.lock().unwrap());
    assert_eq!(
        get(
            &m,
            "tcptune_connections_limited{group=\"all\",limit=\"cpu\"}"
        ),
        1.0
    );
    assert_eq!(
        a.lock().unwrap().cpu_candidates(64),
        [4242],
        "still followed"
    );
    poll(4, &mut procs, &mut w);
    assert!((secs("cpu") - 1.0).abs() < 1e-9);
    assert!((secs("application") - 2.7).abs() < 1e-9);
    assert_eq!(w.walks(), 1, "the owner was found once");
}

#[test]
fn cpu_candidates_are_the_application_limited_with_the_most_time_capped() {
    let mut a = agg(vec![], 10_000);
    let with_inode = |cookie: u64, acked, busy, rwnd| DiagSocket {
        inode: 1000 + cookie as u32,
        ..sock(cookie, 5201, acked, busy, rwnd)
    };
    let at = |t: u64| {
        vec![
            // 1: 0.9 s with nothing to send a second; 2: 0.5 s; 3: receiver-window limited;
            // 4: idle (nothing delivered).
            with_inode(1, t * 1000, t * 100_000, 0),
            with_inode(2, t * 1000, t * 500_000, 0),
            with_inode(3, t * 1000, t * 1_000_000, t * 1_000_000),
            with_inode(4, 0, 0, 0),
        ]
    };
    a.dump(None, at(0), s(0));
    a.dump(None, at(1), s(1000));
    assert_eq!(a.cpu_candidates(10), [1001, 1002]);
    assert_eq!(a.cpu_candidates(1), [1001]);
}

#[test]
fn kept_counts_and_missing_connections_match_a_full_recount() {
    // Two namespaces, connections that change state and class, vanish, come back, close by
    // event, and sockets a dump repeats: after every dump the counts kept as connections
    // change equal a count over every entry, and every connection a dump did not show has
    // left the followed set (the pass skips that look only when nothing can be missing).
    let mut a = agg(vec![Dimension::Port], 10_000);
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let mut acked: HashMap<(u8, u64), u64> = HashMap::new();
    for poll in 0..60u64 {
        for (ns, name) in [(0u8, None), (1, Some("b"))] {
            let mut shown = HashSet::new();
            let mut socks = Vec::new();
            for c in 0..24u64 {
                if next() % 5 == 0 {
                    continue;
                }
                let port = [443, 5201, 5432][(c % 3) as usize];
                let n = acked.entry((ns, c)).or_default();
                *n += next() % 100_000;
                let busy = next() % 1_000_000;
                let mut s = sock(c, port, *n, busy * (poll + 1), (busy / 2) * (poll + 1));
                s.state = [1u8, 1, 1, 4, 8][(next() % 5) as usize];
                if next() % 7 == 0 {
                    socks.push(s.clone()); // a dump that repeats a socket
                }
                socks.push(s);
                shown.insert(c);
            }
            let now = s(poll * 1000);
            a.dump(name, socks, now);
            let ns_id = a.ns_number(name).unwrap();
            for (k, c) in a.conns.iter().filter(|(k, _)| k.ns == ns_id) {
                assert!(shown.contains(&k.cookie), "poll {poll}: {k:?} not shown");
                assert_eq!(c.last.at_s, now);
            }
            if next() % 2 == 0 {
                let c = next() % 24;
                let n = acked.get(&(ns, c)).copied().unwrap_or(0) + 10;
                a.destroyed(name, &sock(c, 443, n, 0, 0), s(poll * 1000 + 500));
                acked.remove(&(ns, c));
            }
            assert_eq!(a.conns.kept(), a.conns.recount(), "poll {poll}");
        }
        a.finish(s(1));
    }
}
