//! `tcptune serve`: an iperf3-compatible server. One listening socket takes control and data
//! connections alike (iperf3's design); each new connection's first 37 bytes are its cookie,
//! which routes it to the test that owns that cookie (a data stream) or starts a new test (a
//! control connection).
//!
//! Hardening: every connection must send its cookie within the handshake timeout; at most
//! `max_pending` connections may be waiting for theirs; at most `max_tests` tests run at once
//! (others get iperf3's ACCESS_DENIED byte); `--allow` CIDRs are checked before a byte is read;
//! every phase of a test has a deadline (the session's), and every thread polls its stop flag
//! at least every 100 ms, so no client can hold a thread, a descriptor or memory for longer
//! than the timeouts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tcptune_iperf3::session::BUSY_REPLY;
use tcptune_iperf3::session::{
    ServerEvent, ServerPhase, ServerSession, SessionError, Timeouts, DATA_DENIED_REPLY,
};
use tcptune_iperf3::{wire, Cookie, Protocol, Results, COOKIE_LEN};
use tcptune_model::Dur;

use crate::control::{Clock, Control, Got};
use crate::data::{own_results, DataPhase, SendPlan, StreamSocket};
use crate::iperf3_text;
use crate::server_conn::Conn;
use crate::server_json::ServerFacts;
use crate::server_text::{Counts, TestText, TextOptions};
use crate::sock::unmapped;
use crate::sock::{self, DataOptions};
use crate::{Cidr, ServerSamples, ServerStreamSamples, TestError};

mod udp;

/// What `tcptune serve` was asked to do.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen.
    pub bind: SocketAddr,
    /// Clients allowed (none = everyone).
    pub allow: Vec<Cidr>,
    /// Tests that may run at once.
    pub max_tests: usize,
    /// Serve one test, then return (iperf3's `-1`).
    pub one_off: bool,
    /// Connections that may be waiting to send their cookie.
    pub max_pending: usize,
    /// The control protocol's deadlines.
    pub timeouts: Timeouts,
    /// tcp_info sampling period.
    pub sample_every: Duration,
    /// Log iperf3's server text line for line (`tcptune iperf3 -s`) instead of one line a test.
    pub iperf3_text: Option<TextOptions>,
    /// iperf3's `-F`: the server's receiving streams write what arrives to this file, its
    /// sending ones send its bytes (and then nothing more until the client ends the test).
    pub diskfile: Option<std::path::PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([0, 0, 0, 0], tcptune_iperf3::DEFAULT_PORT)),
            allow: Vec::new(),
            max_tests: 1,
            one_off: false,
            max_pending: 64,
            timeouts: Timeouts::default(),
            sample_every: Duration::from_millis(50),
            iperf3_text: None,
            diskfile: None,
        }
    }
}

/// One line of what the server did, for its log.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerLog {
    /// The server listens on this address.
    Listening(SocketAddr),
    /// A client was turned away.
    Refused {
        /// The client's address.
        peer: SocketAddr,
        /// Why (`--allow`, `--max-tests`, a test already running).
        why: &'static str,
    },
    /// A test ended.
    TestDone {
        /// The client's address.
        peer: SocketAddr,
        /// What moved, in one line.
        summary: String,
    },
    /// A test failed.
    TestFailed {
        /// The client's address.
        peer: SocketAddr,
        /// Why.
        error: String,
    },
    /// Lines of iperf3's server text (only with `ServerConfig::iperf3_text`).
    Iperf3(Vec<String>),
}

impl std::fmt::Display for ServerLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerLog::Listening(a) => write!(f, "listening on {a}"),
            ServerLog::Refused { peer, why } => write!(f, "{peer}: refused ({why})"),
            ServerLog::TestDone { peer, summary } => write!(f, "{peer}: {summary}"),
            ServerLog::TestFailed { peer, error } => write!(f, "{peer}: test failed: {error}"),
            ServerLog::Iperf3(lines) => write!(f, "{}", lines.join("\n")),
        }
    }
}

/// A data connection handed to its test: the socket, its cookie, and its accept sequence number.
type Routed = (TcpStream, [u8; COOKIE_LEN], u64);
type Routes = Arc<Mutex<HashMap<[u8; COOKIE_LEN], Sender<Routed>>>>;

/// Accept sequence numbers of connections whose cookie has not been routed yet. A test takes
/// its data streams in accept order (their roles in a bidirectional test depend on it, as in
/// iperf3), so it waits for every earlier connection to be classified first.
#[derive(Default)]
struct Unrouted(Mutex<BTreeSet<u64>>);

impl Unrouted {
    fn first(&self) -> u64 {
        self.0
            .lock()
            .ok()
            .and_then(|s| s.first().copied())
            .unwrap_or(u64::MAX)
    }
}

/// Removes a sequence number from [`Unrouted`] when dropped (after the connection is routed).
struct Routing(Arc<Unrouted>, u64);
impl Drop for Routing {
    fn drop(&mut self) {
        if let Ok(mut s) = (self.0).0.lock() {
            s.remove(&self.1);
        }
    }
}

/// A bound server; `run` serves until `stop` is set (or after one test with `one_off`).
pub struct Server {
    listener: TcpListener,
    cfg: ServerConfig,
    stop: Arc<AtomicBool>,
}

/// Decrements a counter when dropped, so every exit path releases its slot.
struct Slot(Arc<AtomicUsize>);
impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn take_slot(c: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
    c.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
        (n < max).then_some(n + 1)
    })
    .ok()
    .map(|_| Slot(c.clone()))
}

impl Server {
    /// Listens where `cfg` says, before any test is served.
    pub fn bind(cfg: ServerConfig) -> Result<Server, TestError> {
        let listener = TcpListener::bind(cfg.bind).map_err(|e| TestError::Bind {
            addr: cfg.bind,
            error: e,
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| TestError::io("setting up the listening socket", e))?;
        Ok(Server {
            listener,
            cfg,
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A flag that stops `run` (within 200 ms) when set.
    pub fn stop_handle(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Serves until stopped; `log` gets one line per event (called from several threads).
    pub fn run(&self, log: Arc<dyn Fn(ServerLog) + Send + Sync>) -> Result<(), TestError> {
        if let Ok(a) = self.listener.local_addr() {
            log(ServerLog::Listening(a));
        }
        let routes: Routes = Arc::new(Mutex::new(HashMap::new()));
        let unrouted = Arc::new(Unrouted::default());
        let mut seq: u64 = 0;
        let tests = Arc::new(AtomicUsize::new(0));
        let pending = Arc::new(AtomicUsize::new(0));
        let finished = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(AtomicUsize::new(0));
        let mut workers: Vec<std::thread::JoinHandle<()>> = Vec::new();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            if self.cfg.one_off && finished.load(Ordering::SeqCst) > 0 {
                break;
            }
            workers.retain(|w| !w.is_finished());
            let (conn, peer) = match self.listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    tcptune_os::poll::wait_readable(
                        self.listener.as_fd(),
                        Duration::from_millis(200),
                    )
                    .map_err(|e| TestError::io("waiting for connections", e))?;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors or a connection reset before accept: keep serving.
                Err(_) => continue,
            };
            if !self.cfg.allow.is_empty() && !self.cfg.allow.iter().any(|c| c.contains(peer.ip())) {
                log(ServerLog::Refused {
                    peer,
                    why: "not in --allow",
                });
                continue;
            }
            let Some(pslot) = take_slot(&pending, self.cfg.max_pending) else {
                log(ServerLog::Refused {
                    peer,
                    why: "too many connections waiting to start",
                });
                continue;
            };
            seq += 1;
            if let Ok(mut u) = unrouted.0.lock() {
                u.insert(seq);
            }
            let routing = Routing(unrouted.clone(), seq);
            let ctx = ConnCtx {
                routes: routes.clone(),
                unrouted: unrouted.clone(),
                tests: tests.clone(),
                finished: finished.clone(),
                started: started.clone(),
                cfg: self.cfg.clone(),
                log: log.clone(),
            };
            let spawned = std::thread::Builder::new()
                .name("conn".into())
                .spawn(move || handle_conn(conn, peer, pslot, routing, ctx));
            if let Ok(h) = spawned {
                workers.push(h);
            }
        }
        // Let running tests end by their own deadlines; one_off waits for its test's thread.
        for w in workers {
            let _ = w.join();
        }
        Ok(())
    }
}

struct ConnCtx {
    routes: Routes,
    unrouted: Arc<Unrouted>,
    tests: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
    started: Arc<AtomicUsize>,
    cfg: ServerConfig,
    log: Arc<dyn Fn(ServerLog) + Send + Sync>,
}

fn read_cookie(conn: &mut TcpStream, limit: Duration) -> io::Result<[u8; COOKIE_LEN]> {
    let end = Instant::now() + limit;
    let mut buf = [0u8; COOKIE_LEN];
    let mut got = 0;
    while got < COOKIE_LEN {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "no cookie in time"));
        }
        conn.set_read_timeout(Some(left))?;
        match conn.read(&mut buf[got..]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(buf)
}

fn handle_conn(mut conn: TcpStream, peer: SocketAddr, pslot: Slot, routing: Routing, ctx: ConnCtx) {
    let seq = routing.1;
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
    let cookie = match read_cookie(&mut conn, ctx.cfg.timeouts.handshake.std()) {
        Ok(c) => c,
        Err(_) => return,
    };
    drop(pslot);
    // A data stream of a running test?
    let route = ctx.routes.lock().ok().and_then(|r| r.get(&cookie).cloned());
    if let Some(tx) = route {
        if let Err(mpsc::SendError((mut c, _, _))) = tx.send((conn, cookie, seq)) {
            let _ = c.write_all(&DATA_DENIED_REPLY);
        }
        // Only now is it routed: the test, seeing it gone from the set, finds it in its queue.
        drop(routing);
        return;
    }
    drop(routing);
    let Some(tslot) = take_slot(&ctx.tests, ctx.cfg.max_tests) else {
        let _ = conn.write_all(&BUSY_REPLY);
        (ctx.log)(ServerLog::Refused {
            peer,
            why: "busy: --max-tests reached",
        });
        return;
    };
    if ctx.cfg.one_off && ctx.started.fetch_add(1, Ordering::SeqCst) > 0 {
        let _ = conn.write_all(&BUSY_REPLY);
        return;
    }
    let (tx, rx) = mpsc::channel();
    if let Ok(mut r) = ctx.routes.lock() {
        r.insert(cookie, tx);
    }
    let say = |lines: Vec<String>| {
        if ctx.cfg.iperf3_text.is_some() && !lines.is_empty() {
            (ctx.log)(ServerLog::Iperf3(lines));
        }
    };
    let result = serve_test(conn, cookie, rx, &ctx.unrouted, &ctx.cfg, &say);
    if let Ok(mut r) = ctx.routes.lock() {
        r.remove(&cookie);
    }
    drop(tslot);
    // Only a real test (past the parameters) counts for -1: probes and garbage do not end it.
    match result {
        Ok(summary) => {
            ctx.finished.fetch_add(1, Ordering::SeqCst);
            (ctx.log)(ServerLog::TestDone { peer, summary });
        }
        Err((e, real)) => {
            if real {
                ctx.finished.fetch_add(1, Ordering::SeqCst);
            } else if ctx.cfg.one_off {
                ctx.started.fetch_sub(1, Ordering::SeqCst);
            }
            (ctx.log)(ServerLog::TestFailed {
                peer,
                error: e.to_string(),
            });
        }
    }
}

/// Thins samples so the results message stays well inside iperf3's 1 MiB limit.
fn thin(samples: &mut [ServerStreamSamples], budget: usize) {
    loop {
        // The extension is this array inside a small object.
        let size = serde_json::to_vec(&*samples)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size <= budget || samples.iter().all(|s| s.samples.len() <= 2) {
            return;
        }
        for s in samples.iter_mut() {
            let n = s.samples.len();
            if n > 2 {
                let last = s.samples[n - 1].clone();
                let mut k = 0;
                s.samples.retain(|_| {
                    k += 1;
                    (k - 1) % 2 == 0
                });
                if s.samples.last() != Some(&last) {
                    s.samples.push(last);
                }
            }
        }
    }
}

type Failure = (TestError, bool);

fn serve_test(
    conn: TcpStream,
    cookie: [u8; COOKIE_LEN],
    rx: Receiver<Routed>,
    unrouted: &Unrouted,
    cfg: &ServerConfig,
    say: &dyn Fn(Vec<String>),
) -> Result<String, Failure> {
    // What this test printed, for iperf3's --get-server-output.
    let kept = std::cell::RefCell::new(Vec::new());
    let keep = |lines: Vec<String>| {
        kept.borrow_mut().extend(lines.iter().cloned());
        say(lines);
    };
    let say: &dyn Fn(Vec<String>) = &keep;
    let clock = Clock::start();
    let json = cfg.iperf3_text.is_some_and(|o| o.json);
    let facts = ServerFacts::of(&conn, &cookie);
    if let Some(peer) = facts.peer.filter(|_| !json) {
        say(vec![iperf3_text::accepted(
            &peer.ip().to_string(),
            peer.port(),
        )]);
    }
    let early = |e: TestError| (e, false);
    let mut ctl = Control::new(conn).map_err(|e| early(TestError::io("control setup", e)))?;
    let mut s = ServerSession::new(clock.now(), cfg.timeouts);
    s.handle_input(&cookie, clock.now())
        .map_err(|e| early(TestError::Session(e)))?;
    // Parameters.
    let params = loop {
        let ev = step(&mut ctl, &mut s, &clock).map_err(early)?;
        if let Some(p) = ev.into_iter().find_map(|e| match e {
            ServerEvent::Params(p) => Some(*p),
            _ => None,
        }) {
            break p;
        }
    };
    if params.protocol == Protocol::Sctp {
        s.refuse(wire::i_errno::RECV_PARAMS);
        let _ = ctl.write(&s.take_output());
        return Err((
            TestError::Unsupported("SCTP tests are not served (TCP and UDP are)"),
            false,
        ));
    }
    // A UDP test's streams arrive on a UDP socket on our port, bound before CREATE_STREAMS.
    let udp_listener = if params.protocol == Protocol::Udp {
        match ctl
            .sock
            .local_addr()
            .and_then(|a| sock::bind_udp(&unmapped(a)))
        {
            Ok(u) => Some(u),
            Err(e) => {
                s.refuse(wire::i_errno::RECV_PARAMS);
                let _ = ctl.write(&s.take_output());
                return Err((TestError::io("binding the UDP port", e), false));
            }
        }
    } else {
        None
    };
    s.approve(clock.now())
        .map_err(|e| early(TestError::Session(e)))?;
    ctl.write(&s.take_output())
        .map_err(|e| early(TestError::io("writing CREATE_STREAMS", e)))?;
    let fail = |e: TestError| (e, true);
    if let Some(listener) = udp_listener {
        let text = Text {
            opts: cfg.iperf3_text,
            facts: &facts,
            say,
            kept: &kept,
        };
        return udp::serve_udp(ctl, s, clock, &params, listener, rx, text).map_err(fail);
    }
    let opts = DataOptions {
        window: params.window,
        congestion: params.congestion.clone(),
        nodelay: params.nodelay,
        tos: params.tos,
        ..DataOptions::default()
    };
    let mut streams = Vec::new();
    // Connections that arrived, by accept order, waiting for earlier ones to be classified.
    let mut queue: BTreeMap<u64, (TcpStream, [u8; COOKIE_LEN], Instant)> = BTreeMap::new();
    // Only a bidirectional test's roles depend on the order (and only briefly: a client sends
    // its cookie as soon as it connects, so an earlier connection still silent after this is
    // not one of its streams, and a slow loris cannot hold the test up).
    let ordered = params.direction == tcptune_iperf3::Direction::Bidirectional;
    const ORDER_WAIT: Duration = Duration::from_millis(200);
    while s.phase() == ServerPhase::Streams {
        let left = s
            .deadline()
            .map(|d| d.nanos().saturating_sub(clock.now().nanos()))
            .unwrap_or(0);
        // While some are queued, look again soon for the earlier ones' classification; else
        // every 20 ms, to see the client give up on the control connection (below).
        let mut wait = Duration::from_nanos(left)
            .max(Duration::from_millis(1))
            .min(Duration::from_millis(20));
        if !queue.is_empty() {
            wait = wait.min(Duration::from_millis(2));
        }
        // A client that fails to open its streams (a congestion control its kernel lacks) or
        // quits sends CLIENT_TERMINATE or closes the control connection: end the test now, as
        // iperf3 does, instead of holding the server busy until the streams' deadline.
        if tcptune_os::poll::wait_readable(ctl.sock.as_fd(), Duration::ZERO)
            .map_err(|e| fail(TestError::io("waiting on the control connection", e)))?
        {
            step(&mut ctl, &mut s, &clock).map_err(fail)?;
            continue;
        }
        match rx.recv_timeout(wait) {
            Ok((c, first, seq)) => {
                queue.insert(seq, (c, first, Instant::now()));
            }
            Err(RecvTimeoutError::Timeout) => {
                s.poll(clock.now())
                    .map_err(|e| fail(TestError::Session(e)))?;
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(fail(TestError::Session(
                    tcptune_iperf3::session::SessionError::Ended,
                )))
            }
        }
        // Everything accepted before `first` has been routed (sent before it left the set),
        // so after draining the channel the queue holds all of them, in order.
        let first = unrouted.first();
        while let Ok((c, cookie, seq)) = rx.try_recv() {
            queue.insert(seq, (c, cookie, Instant::now()));
        }
        while s.phase() == ServerPhase::Streams {
            let Some(entry) = queue.first_entry() else {
                break;
            };
            if ordered && *entry.key() > first && entry.get().2.elapsed() < ORDER_WAIT {
                break;
            }
            let (mut c, cookie, _) = entry.remove();
            match s.data_stream(&cookie, clock.now()) {
                Some(ds) => {
                    let _ = opts.apply_connected(c.as_fd());
                    streams.push(StreamSocket {
                        id: ds.id,
                        sends: ds.server_sends,
                        sock: c,
                    });
                }
                None => {
                    let _ = c.write_all(&DATA_DENIED_REPLY);
                }
            }
        }
    }
    for (_, (mut c, _, _)) in queue {
        let _ = c.write_all(&DATA_DENIED_REPLY);
    }
    // From now on data connections with this cookie are extra: refuse them as they come.
    let plan = SendPlan {
        block: params.len,
        rate_bps: params.bandwidth_bps,
        bytes_total: params.byte_limit(),
        zerocopy: params.zerocopy,
        repeating: params.repeating_payload,
        file: cfg.diskfile.clone(),
    };
    let conns: Vec<Conn> = streams.iter().map(Conn::of_tcp).collect();
    let text = cfg
        .iperf3_text
        .map(|o| TestText::new(o, &params, &conns, &facts, say));
    let (u0, s0) = sock::cpu_times();
    let data = DataPhase::start(streams, &plan, cfg.sample_every, clock.0)
        .map_err(|e| fail(TestError::io("starting the data streams", e)))?;
    let mut text = text;
    ctl.write(&s.take_output())
        .map_err(|e| fail(TestError::io("writing TEST_START", e)))?;
    // The test's time runs from TEST_START, when the client starts its clock, to TEST_END;
    // with -O, from the end of the omitted seconds, whose bytes do not count (as in iperf3).
    let mut t0 = Instant::now();
    let omit = Duration::from_secs(params.omit_s as u64);
    if !omit.is_zero() {
        data.mark_at(Dur::from_nanos(
            clock.now().nanos() + omit.as_nanos() as u64,
        ));
    }
    let mut omitting = !omit.is_zero();
    let mut at_omit_end = vec![0u64; data.ids().len()];
    // Running: until TEST_END (or the deadline, or the client's CLIENT_TERMINATE).
    let (mut ended, mut terminated) = (false, false);
    while !ended {
        while let Ok((mut c, _, _)) = rx.try_recv() {
            let _ = c.write_all(&DATA_DENIED_REPLY);
        }
        if omitting && t0.elapsed() >= omit {
            omitting = false;
            at_omit_end = data.bytes_at_mark();
            if let Some(t) = text.as_mut() {
                let at_end = Counts::Tcp {
                    bytes: at_omit_end.clone(),
                    latest: data.latest(),
                };
                t.omit_ended(t0.elapsed().as_secs_f64(), &at_end, say);
            }
            // Counting restarts at the mark, not when this thread got to run.
            t0 += omit;
        }
        let mut wait = if omitting {
            omit.saturating_sub(t0.elapsed())
        } else {
            Duration::from_secs(1)
        };
        if let Some(t) = text.as_mut() {
            let now = t0.elapsed().as_secs_f64();
            wait = wait.min(t.tick(now, omitting, || Counts::tcp(&data), say));
        }
        match step_within(&mut ctl, &mut s, &clock, wait) {
            Ok(ev) => ended = ev.contains(&ServerEvent::TestEnd),
            // CLIENT_TERMINATE (the client's Ctrl-C): iperf3's server text still ends with
            // the test's final block, then the error.
            Err(TestError::Session(SessionError::Terminated)) if text.is_some() => {
                (ended, terminated) = (true, true);
            }
            Err(e) => return Err(fail(e)),
        }
    }
    // Measured before the stream threads are stopped: joining them takes up to their 100 ms
    // poll, which once made a 3 s test's receiver report 3.10 s (and a rate 3% low).
    let secs = t0.elapsed().as_secs_f64();
    let mut outcomes = data.finish();
    if let Some(t) = text.as_mut() {
        // After the receivers took what had arrived (a small `-F` file can come with
        // TEST_END, before a receiving thread ran): the last interval counts it.
        let at_end = Counts::Tcp {
            bytes: outcomes.iter().map(|o| o.bytes).collect(),
            latest: outcomes.iter().map(|o| o.samples.last().cloned()).collect(),
        };
        t.last(secs, omitting, &at_end, say);
    }
    for (o, &b) in outcomes.iter_mut().zip(&at_omit_end) {
        o.bytes = o.bytes.saturating_sub(b);
    }
    if let Some(t) = text.as_mut() {
        let name = cfg.diskfile.as_ref().map(|p| p.display().to_string());
        let size = cfg
            .diskfile
            .as_ref()
            .map_or(0, |p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0));
        let cpu = crate::data::cpu_percent((u0, s0), secs);
        say(t.finish(&outcomes, secs, name.as_deref().map(|n| (n, size)), cpu));
    }
    if terminated {
        return Err(fail(TestError::Session(SessionError::Terminated)));
    }
    let mut samples: Vec<ServerStreamSamples> = outcomes
        .iter()
        .map(|o| ServerStreamSamples {
            id: o.id,
            sender: o.sends,
            samples: o.samples.clone(),
        })
        .collect();
    thin(&mut samples, (wire::MAX_RESULTS_JSON as usize) / 2);
    let bytes: u64 = outcomes.iter().map(|o| o.bytes).sum();
    let summary = format!(
        "{} stream(s), {:?}, {} in {:.1} s ({})",
        outcomes.len(),
        params.direction,
        tcptune_diagnose::size(bytes),
        secs,
        crate::test_report::rate(bytes as f64 * 8.0 / secs.max(1e-9))
    );
    let own = Results {
        extension: serde_json::to_value(ServerSamples { streams: samples }).ok(),
        // --get-server-output: our side's report, as text (iperf3 sends text unless the
        // server itself runs with -J).
        server_output_text: params
            .get_server_output
            .then(|| {
                if cfg.iperf3_text.is_some() {
                    kept.borrow().join("\n") + "\n"
                } else {
                    server_output_text(&outcomes, secs)
                }
            })
            .filter(|_| !json),
        // Under -J the server's report is its document (iperf3's `server_output_json`).
        server_output_json: text
            .as_ref()
            .and_then(|t| t.document().cloned())
            .filter(|_| params.get_server_output),
        ..own_results(&outcomes, secs, (u0, s0))
    };
    s.finish(own, clock.now())
        .map_err(|e| fail(TestError::Session(e)))?;
    while s.phase() != ServerPhase::Done {
        step(&mut ctl, &mut s, &clock).map_err(fail)?;
    }
    let _ = ctl.write(&s.take_output());
    Ok(summary)
}

/// How a test prints iperf3's text: its options, where lines go, and what it printed so far.
struct Text<'a> {
    opts: Option<TextOptions>,
    facts: &'a ServerFacts,
    say: &'a dyn Fn(Vec<String>),
    kept: &'a std::cell::RefCell<Vec<String>>,
}

/// The server's report of a test for `--get-server-output`: a line per stream and its role.
fn server_output_text(outcomes: &[crate::data::StreamOutcome], secs: f64) -> String {
    let mut out = String::from("tcptune serve: the server's side of the test\n");
    for o in outcomes {
        out += &format!(
            "[{:>3}] 0.00-{:.2} sec {:>10} {:>14} {}\n",
            o.id,
            secs,
            tcptune_diagnose::size(o.bytes),
            crate::test_report::rate(o.bytes as f64 * 8.0 / secs.max(1e-9)),
            if o.sends { "sender" } else { "receiver" }
        );
    }
    out
}

/// One round on the control connection: write what is queued, read what comes (until the
/// session's deadline), and return the events.
fn step(
    ctl: &mut Control,
    s: &mut ServerSession,
    clock: &Clock,
) -> Result<Vec<ServerEvent>, TestError> {
    step_within(ctl, s, clock, Duration::from_secs(1))
}

/// `step`, waiting for input at most `max`.
fn step_within(
    ctl: &mut Control,
    s: &mut ServerSession,
    clock: &Clock,
    max: Duration,
) -> Result<Vec<ServerEvent>, TestError> {
    ctl.write(&s.take_output())
        .map_err(|e| TestError::io("writing to the control connection", e))?;
    match ctl
        .read(clock, s.deadline(), max)
        .map_err(|e| TestError::io("reading the control connection", e))?
    {
        Got::Eof => {
            s.handle_eof().map_err(TestError::Session)?;
            Ok(Vec::new())
        }
        Got::Nothing => {
            s.poll(clock.now()).map_err(TestError::Session)?;
            Ok(Vec::new())
        }
        Got::Data(n) => {
            let r = s.handle_input(ctl.data(n), clock.now());
            // Whatever the session queued (a SERVER_ERROR for the client) goes out first.
            let _ = ctl.write(&s.take_output());
            r.map_err(TestError::Session)
        }
    }
}

impl Cidr {
    /// Whether `ip` may be served.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map(IpAddr::V4)
                .unwrap_or(IpAddr::V6(v6)),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u32::MAX << (32 - self.prefix as u32)
                };
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u128::MAX << (128 - self.prefix as u32)
                };
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// For a cookie check in tests: whether these bytes are a well-formed cookie.
pub fn is_cookie(b: &[u8; COOKIE_LEN]) -> bool {
    Cookie::from_wire(b).is_ok()
}
