//! `tcptune test HOST`: the client side of one iperf3 test over real sockets, with interval
//! reports while it runs, the final report in iperf3's shape, and the diagnosis.
//!
//! One driver runs the control connection's choreography over the sans-IO `ClientSession`
//! (connect, parameters, create streams, start, the data phase with its intervals, `-O`,
//! time or byte limits and interruptions, exchange results, end) and the latency probes, for
//! TCP and UDP alike, as quinn drives quinn-proto; what differs between them sits behind
//! `transport::Transport` (`tcp.rs`, `udp.rs`). The schedule is `clock.rs`, the control
//! connection `session.rs`, iperf3's document `crate::document`, the engine's input
//! `diagnosis.rs`.

mod clock;
mod config;
mod diagnosis;
mod session;
mod tcp;
mod transport;
mod udp;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tcptune_diagnose::latency::Probe;
use tcptune_iperf3::params::{MAX_UDP_BLOCKSIZE, MIN_UDP_BLOCKSIZE};
use tcptune_iperf3::session::{ClientSession, Timeouts};
use tcptune_iperf3::Protocol;
use tcptune_model::Dur;

use crate::control::{Clock, Control};
use crate::document::{self, Layout, Span, StartFacts};
use crate::sock::{self, resolve, DataOptions};
use crate::test_report::{IntervalReport, Start, TestOutput};
use crate::{probe, TestError};
use clock::{Schedule, Step};
use session::Link;
use transport::{Ended, Setup, Transport};

pub use crate::sock::Family;
pub use config::ClientConfig;
pub use diagnosis::context;

/// Runs one test against `cfg.host`. `on_interval` gets each interval report as it happens
/// (with the stream ids, in order).
pub fn run(
    cfg: &ClientConfig,
    on_interval: &mut dyn FnMut(&IntervalReport, &[u32]),
) -> Result<TestOutput, TestError> {
    run_with(cfg, &mut |_| {}, on_interval)
}

/// `run`, also handing over the `start` object once the data streams are connected (what
/// iperf3's `--json-stream` prints as its "start" event).
pub fn run_with(
    cfg: &ClientConfig,
    on_start: &mut dyn FnMut(&Start),
    on_interval: &mut dyn FnMut(&IntervalReport, &[u32]),
) -> Result<TestOutput, TestError> {
    let addr = resolve(&cfg.host, cfg.port, cfg.family)?;
    let clock = Clock::start();
    // The idle round trip: the handshakes of the test's own connections, before any data
    // (a probe connection of its own would be taken by a one-shot `iperf3 -s -1` for its test).
    let mut probes = Vec::new();
    let started_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let ctl_opts = DataOptions {
        bind: cfg.bind.map(|ip| SocketAddr::new(ip, 0)),
        extra: cfg.control_extra.clone(),
        ..DataOptions::default()
    };
    let handshake = std::time::Instant::now();
    let ctl_sock = sock::connect(&addr, &ctl_opts, cfg.connect_timeout)
        .map_err(|e| TestError::Connect { addr, error: e })?;
    if cfg.latency {
        probes.push(probe::idle_handshake(clock.0, handshake.elapsed()));
    }
    let tcp_mss_default = sock::get_int(
        std::os::fd::AsFd::as_fd(&ctl_sock),
        libc::IPPROTO_TCP,
        libc::TCP_MAXSEG,
    )
    .map(|v| v.max(0) as u32)
    .unwrap_or(0);
    let ctl = Control::new(ctl_sock)
        .map_err(|e| TestError::io("setting up the control connection", e))?;
    // A UDP test without -l sends datagrams of the control connection's MSS (iperf3 3.12's
    // choice: no IP fragmentation on the path to the server).
    let mut params = cfg.params.clone();
    if params.protocol == Protocol::Udp && params.len == 0 {
        params.len = if tcp_mss_default > 0 {
            (tcp_mss_default as u64).clamp(MIN_UDP_BLOCKSIZE, MAX_UDP_BLOCKSIZE) as u32
        } else {
            1460
        };
    }
    let cookie = sock::random_cookie().map_err(|e| TestError::io("reading /dev/urandom", e))?;
    let s = ClientSession::new(cookie, params.clone(), clock.now(), Timeouts::default());
    let mut link = Link { ctl, s, clock };
    let (count, client_sends) = link.create_streams()?;
    let x = Setup {
        cfg,
        params,
        addr,
        cookie,
        count,
        client_sends,
        clock,
        started_at,
        tcp_mss_default,
    };
    let callbacks = Callbacks {
        on_start,
        on_interval,
    };
    match x.params.protocol {
        Protocol::Udp => drive::<udp::Udp>(&x, link, probes, callbacks),
        _ => drive::<tcp::Tcp>(&x, link, probes, callbacks),
    }
}

/// The caller's hooks: the `start` object, and each interval report with the stream ids.
struct Callbacks<'a> {
    on_start: &'a mut dyn FnMut(&Start),
    on_interval: &'a mut dyn FnMut(&IntervalReport, &[u32]),
}

/// The test after CREATE_STREAMS, for either transport: streams, start, data, latency under
/// load, results, the report.
fn drive<T: Transport>(
    x: &Setup,
    mut link: Link,
    mut probes: Vec<Probe>,
    cb: Callbacks,
) -> Result<TestOutput, TestError> {
    let streams = match T::open(x, &mut probes) {
        Ok(s) => s,
        Err(e) => {
            // Tell the server at once (iperf3 does), so it does not wait for the streams.
            link.terminate();
            return Err(e);
        }
    };
    let (connected, (sndbuf, rcvbuf)) = T::connected(&streams);
    let layout = Layout {
        roles: Vec::new(),
        fds: connected.iter().map(|c| c.socket).collect(),
        client_sends_main: x.params.direction != tcptune_iperf3::Direction::Reverse,
    };
    let start = document::start(
        &x.params,
        StartFacts {
            connected,
            protocol: T::PROTOCOL,
            started_at: x.started_at,
            host: x.cfg.host.clone(),
            port: x.addr.port(),
            cookie: x.cookie.as_str().to_string(),
            tcp_mss_default: x.tcp_mss_default,
            sndbuf,
            rcvbuf,
        },
    );
    (cb.on_start)(&start);
    link.running()?;
    let cpu0 = sock::cpu_times();
    let mut data = T::start(streams, x, layout)?;
    // Round trips under the load, on their own thread (a failure to start one is no reason to
    // fail the test: the latency figures are then absent).
    let loaded = if x.cfg.latency {
        probe::Loaded::start(x.addr, probe::LOADED_RATE_HZ, x.clock.0).ok()
    } else {
        None
    };
    let ran = data_phase(&mut data, x, &mut link, cb.on_interval)?;
    if ran.interrupted {
        return interrupted(data, x, link, start, ran, cpu0);
    }
    let t0 = data.started();
    let load_end = Dur::from_nanos(link.now().nanos().saturating_sub(t0.nanos()));
    if let Some(l) = &loaded {
        l.stop();
    }
    data.stop();
    link.end_test()?;
    let outcome = data.finish(x, ran.base);
    // The probes still under way are waited for only now, once the server has been told the
    // test ended: waiting before kept the senders sending for up to a probe's timeout longer
    // than the test (a stock iperf3 server counted those bytes).
    if let Some(loaded) = loaded {
        let mut under_load = loaded.finish();
        tcptune_diagnose::latency::mark_ramp(&mut under_load, t0, load_end);
        probes.extend(under_load);
    }
    let own = T::own_results(&outcome, ran.secs, cpu0);
    let server = link.exchange(&own)?;
    drop(link);
    let probes = x.cfg.latency.then_some(probes);
    output::<T>(
        x,
        outcome,
        start,
        (ran.intervals, ran.secs),
        &own,
        &server,
        probes,
    )
}

/// iperf3's document of the test: the transport's `end` and tcptune's extension from what
/// its streams did (`ran`: the interval reports and the counted seconds), our results and the
/// server's.
fn output<T: Transport>(
    x: &Setup,
    outcome: T::Outcome,
    start: Start,
    ran: (Vec<IntervalReport>, f64),
    own: &tcptune_iperf3::Results,
    server: &tcptune_iperf3::Results,
    probes: Option<Vec<Probe>>,
) -> Result<TestOutput, TestError> {
    let (end, tcptune) = T::report(
        outcome,
        Ended {
            cfg: x.cfg,
            params: &x.params,
            start: &start,
            own,
            server,
            probes,
            secs: ran.1,
        },
    )?;
    Ok(document::output(
        &x.params, start, ran.0, end, server, tcptune,
    ))
}

/// An interrupted test (Ctrl-C, SIGTERM) ends as iperf3's does: the server is told at once
/// (CLIENT_TERMINATE, no results exchanged) and the report is this end's figures alone, the
/// peer's side counted as nothing. The output says it was interrupted, and carries no verdict
/// from that half of the evidence.
fn interrupted<T: Transport>(
    mut data: T,
    x: &Setup,
    mut link: Link,
    start: Start,
    ran: Ran<T::Counters>,
    cpu0: (f64, f64),
) -> Result<TestOutput, TestError> {
    link.terminate();
    drop(link);
    data.stop();
    let outcome = data.finish(x, ran.base);
    let own = T::own_results(&outcome, ran.secs, cpu0);
    let server = tcptune_iperf3::Results::default();
    let mut out = output::<T>(
        x,
        outcome,
        start,
        (ran.intervals, ran.secs),
        &own,
        &server,
        None,
    )?;
    out.tcptune.diagnosis = tcptune_diagnose::throughput::TestDiagnosis {
        limit: tcptune_diagnose::Limit::NotEnoughEvidence,
        verdict: "interrupted before the end: the server's figures were not exchanged, so \
                  there is no verdict"
            .into(),
        bounds: Vec::new(),
        recommendations: Vec::new(),
        streams: Vec::new(),
        reverse: None,
        bufferbloat: None,
        problem: false,
        ..out.tcptune.diagnosis
    };
    out.interrupted = true;
    Ok(out)
}

/// What the data phase leaves: its interval reports, the counted seconds (the time the bytes
/// took, until the senders stop, as iperf3 reports it), the counters when `-O`'s seconds
/// ended, and whether an interruption ended it.
struct Ran<C> {
    intervals: Vec<IntervalReport>,
    secs: f64,
    base: Option<C>,
    interrupted: bool,
}

/// Runs the data phase to its end by the schedule, or to an interruption (whose partial
/// interval is reported, as iperf3 reports it).
fn data_phase<T: Transport>(
    data: &mut T,
    x: &Setup,
    link: &mut Link,
    on_interval: &mut dyn FnMut(&IntervalReport, &[u32]),
) -> Result<Ran<T::Counters>, TestError> {
    let p = &x.params;
    let t0 = data.started();
    let since = |now: Dur| (now.nanos().saturating_sub(t0.nanos())) as f64 / 1e9;
    let ids = data.layout().ids();
    let mut schedule = Schedule::new(
        x.cfg.interval.map(|i| i.as_secs_f64()),
        p.omit_s,
        p.time_s,
        p.byte_limit().is_some(),
    );
    let mut prev = data.zero();
    let mut base = None;
    let mut intervals = Vec::new();
    let mut emit = |r: Option<IntervalReport>, omitted: bool| {
        if let Some(mut r) = r {
            if omitted {
                r.mark_omitted();
            }
            on_interval(&r, &ids);
            intervals.push(r);
        }
    };
    let span = |(start, end): (f64, f64)| Span { start, end };
    let mut next = schedule.next_boundary();
    if let Some(b) = next {
        data.arm(b);
    }
    // --rcv-timeout: a test that only receives fails when its bytes stop coming (iperf3's
    // idle timeout; a sender's stall is TCP's to time out, --snd-timeout).
    let rcv_limit = x
        .cfg
        .rcv_timeout
        .filter(|_| p.direction == tcptune_iperf3::Direction::Reverse);
    let mut last_rx = (data.moved(), link.now());
    loop {
        let now = since(link.now());
        let mut done = false;
        if let Some(b) = next.filter(|&b| now >= b) {
            let (t, counters) = data.at_boundary(b, now);
            for step in schedule.at_boundary(b, t) {
                match step {
                    Step::Report {
                        start,
                        end,
                        omitted,
                    } => {
                        emit(data.interval(span((start, end)), &prev, &counters), omitted);
                        prev = counters.clone();
                    }
                    Step::OmitEnd => {
                        base = Some(counters.clone());
                        prev = counters.clone();
                    }
                    Step::Done => done = true,
                }
            }
            next = schedule.next_boundary();
            if let Some(b) = next {
                data.arm(b);
            }
        }
        let bytes_done = schedule.awaits_bytes() && data.moved() >= p.byte_limit().unwrap_or(0);
        if !done && (bytes_done || data.source_ended()) {
            // Bytes-limited, or -F's file all sent: the last interval ends when the bytes are
            // done.
            let counters = data.now();
            let last = schedule.last_interval(now);
            let r = data.interval(span(last), &prev, &counters);
            let moved_any = r.as_ref().is_some_and(|r| r.sum.bytes > 0);
            if schedule.keeps_last(last, moved_any) {
                emit(r, false);
            }
            done = true;
        }
        let interrupted = x.cfg.interrupt.is_some_and(|i| i.load(Ordering::Relaxed));
        if interrupted && !done {
            let counters = data.now();
            let last = schedule.last_interval(now);
            let r = data.interval(span(last), &prev, &counters);
            let moved_any = r.as_ref().is_some_and(|r| r.sum.bytes > 0);
            if schedule.keeps_last(last, moved_any) {
                emit(r, base.is_none() && p.omit_s > 0);
            }
        }
        if done || interrupted {
            return Ok(Ran {
                intervals,
                secs: schedule.counted(since(link.now())),
                base,
                interrupted: interrupted && !done,
            });
        }
        let mut wait = Duration::from_secs_f64(schedule.wait(now));
        if let Some(limit) = rcv_limit {
            let (moved, at) = (data.moved(), link.now());
            if moved != last_rx.0 {
                last_rx = (moved, at);
            } else if at.nanos().saturating_sub(last_rx.1.nanos()) as u128 >= limit.as_nanos() {
                return Err(TestError::RcvTimeout(limit.as_millis()));
            }
            wait = wait.min(limit / 4);
        }
        link.watch(wait)?;
    }
}
