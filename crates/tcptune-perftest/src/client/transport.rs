//! What differs between a TCP and a UDP test, behind one trait the driver runs: opening the
//! streams, their counters while the data flows, the results this end sends, and what the
//! sender and receiver report at the end. Everything else (the control connection's
//! choreography, the schedule, the latency probes) is the driver's, the same for both.

use std::net::SocketAddr;

use tcptune_diagnose::latency::Probe;
use tcptune_iperf3::{Cookie, Params, Results};

use super::config::ClientConfig;
use crate::control::Clock;
use crate::document::{Layout, Span};
use crate::test_report::{Connected, End, Extension, IntervalReport, Start};
use crate::TestError;

/// What the control connection's setup gives the streams.
pub struct Setup<'a> {
    /// What the test was asked to do.
    pub cfg: &'a ClientConfig,
    /// The parameters sent to the server (a UDP test's datagram size filled in).
    pub params: Params,
    /// The server's address.
    pub addr: SocketAddr,
    /// The test's cookie.
    pub cookie: Cookie,
    /// Streams to open, and on how many of the first the client sends.
    pub count: u32,
    /// Streams the client sends on.
    pub client_sends: u32,
    /// The test clock.
    pub clock: Clock,
    /// When the test started, seconds since the Unix epoch.
    pub started_at: u64,
    /// TCP_MAXSEG of the control connection.
    pub tcp_mss_default: u32,
}

/// What the end of a test gives a transport's report.
pub struct Ended<'a> {
    /// What the test was asked to do.
    pub cfg: &'a ClientConfig,
    /// The parameters as sent (`Setup::params`).
    pub params: &'a Params,
    /// The test's `start` object.
    pub start: &'a Start,
    /// Our results as sent (CPU use included) and the server's.
    pub own: &'a Results,
    /// The results the server sent.
    pub server: &'a Results,
    /// The latency probes, when asked for.
    pub probes: Option<Vec<Probe>>,
    /// The counted seconds (after `-O`'s).
    pub secs: f64,
}

/// One transport's part of a test, from its connected streams to its report. A value of it
/// is the running data phase.
pub trait Transport: Sized {
    /// The connected streams, before the data phase.
    type Streams;
    /// Every stream's counts at one moment.
    type Counters: Clone;
    /// What the streams did, once stopped.
    type Outcome;
    /// The protocol as `start.test_start.protocol` names it.
    const PROTOCOL: &'static str;

    /// Opens the streams (an idle round trip each where opening one takes a handshake,
    /// pushed to `probes` when asked for).
    fn open(x: &Setup, probes: &mut Vec<Probe>) -> Result<Self::Streams, TestError>;
    /// The streams as `start.connected[]` lists them, and the first one's SO_SNDBUF and
    /// SO_RCVBUF as iperf3 reports them.
    fn connected(streams: &Self::Streams) -> (Vec<Connected>, (u32, u32));
    /// Starts the data phase.
    fn start(streams: Self::Streams, x: &Setup, layout: Layout) -> Result<Self, TestError>;
    /// The streams' ids, roles and descriptors.
    fn layout(&self) -> &Layout;
    /// When the data phase started, on the test clock (interval times count from it).
    fn started(&self) -> tcptune_model::Dur;
    /// The counters before anything moved.
    fn zero(&self) -> Self::Counters;
    /// Asks for the counters at boundary `at` (seconds from the start), where the transport
    /// can note them there.
    fn arm(&self, at: f64);
    /// The counters for the boundary `b`, passed at `now`, and the time they stand for.
    fn at_boundary(&self, b: f64, now: f64) -> (f64, Self::Counters);
    /// The counters now.
    fn now(&self) -> Self::Counters;
    /// Bytes moved towards a byte count (`-n`, `-k`).
    fn moved(&self) -> u64;
    /// A sending stream reached the end of `-F`'s file: the test ends, as iperf3's.
    fn source_ended(&self) -> bool {
        false
    }
    /// One interval's report from two readings of the counters.
    fn interval(
        &mut self,
        span: Span,
        prev: &Self::Counters,
        now: &Self::Counters,
    ) -> Option<IntervalReport>;
    /// The test's time is up: senders stop.
    fn stop(&mut self);
    /// Ends the data phase; `base`: the counters when `-O`'s seconds ended.
    fn finish(self, x: &Setup, base: Option<Self::Counters>) -> Self::Outcome;
    /// The results this end sends: CPU use since `cpu0`, each stream's figures.
    fn own_results(outcome: &Self::Outcome, secs: f64, cpu0: (f64, f64)) -> Results;
    /// The `end` object and tcptune's extension (samples, diagnosis, latency).
    fn report(outcome: Self::Outcome, e: Ended) -> Result<(End, Extension), TestError>;
}
