//! The control-connection conversation of one iperf3 test, for each side, as state machines
//! driven by the bytes that arrive and the current time (sans-IO: the socket layer feeds
//! `handle_input`, writes `take_output`, and calls `poll` with the clock).
//!
//! Server: cookie → PARAM_EXCHANGE → parameters → (the application approves) CREATE_STREAMS →
//! data streams, each with the cookie, roles by accept order and ids 1, 3, 4, 5, … → TEST_START,
//! TEST_RUNNING → the client's TEST_END → EXCHANGE_RESULTS → the client's results, then ours →
//! DISPLAY_RESULTS → the client's IPERF_DONE. The client mirrors it. Every phase has a deadline
//! (a silent peer wedged iperf3 servers: esnet/iperf #1735, #1986), and anything the phase does
//! not expect ends the session with an error, never a panic.

use tcptune_model::Dur;

use crate::params::{ParamError, Params, Protocol};
use crate::results::{Results, ResultsError};
use crate::wire::{
    self, encode_json, Cookie, JsonFrameReader, ServerError, State, WireError, COOKIE_LEN,
};

/// What a busy server writes to a new control connection before closing it (without reading
/// the cookie, as iperf3 does).
pub const BUSY_REPLY: [u8; 1] = [0xff];

/// What a server writes on a data connection whose cookie is not this test's, before closing.
pub const DATA_DENIED_REPLY: [u8; 1] = [0xff];

/// How long each phase may last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From connect to accepted parameters (cookie, PARAM_EXCHANGE, parameters, approval).
    pub handshake: Dur,
    /// From CREATE_STREAMS until every data stream has connected.
    pub streams: Dur,
    /// Slack after the planned end of a timed test (omit + time) before TEST_END must come.
    pub grace: Dur,
    /// The longest a test limited by bytes or blocks (time 0) may run.
    pub max_test: Dur,
    /// Each step of the results exchange and the goodbye.
    pub results: Dur,
    /// The longest any test may run, whatever it asked (iperf3's `--server-max-duration`).
    pub max_duration: Option<Dur>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            handshake: Dur::from_millis(10_000),
            streams: Dur::from_millis(10_000),
            grace: Dur::from_millis(10_000),
            max_test: Dur::from_millis(3_600_000),
            results: Dur::from_millis(10_000),
            max_duration: None,
        }
    }
}

/// Why a session ended badly.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionError {
    // Causes are in the messages, not chained as sources too (`{:#}` would print them twice);
    // the server logs these errors with `{}`.
    /// The bytes broke the control protocol's framing.
    #[error("malformed control data: {0}")]
    Wire(WireError),
    /// The client's parameters were refused.
    #[error("bad test parameters: {0}")]
    Params(ParamError),
    /// The peer's results could not be read.
    #[error("bad results: {0}")]
    Results(ResultsError),
    /// A state byte that does not belong in this phase.
    #[error("unexpected control state {state:?} while {phase}")]
    Unexpected {
        /// The state received.
        state: State,
        /// What the session was doing.
        phase: &'static str,
    },
    /// The phase's deadline passed.
    #[error("the peer sent nothing in time while {phase}")]
    Timeout {
        /// What the session was waiting for.
        phase: &'static str,
    },
    /// The control connection closed early.
    #[error("the peer closed the control connection while {phase}")]
    Closed {
        /// What the session was doing.
        phase: &'static str,
    },
    /// The server sent ACCESS_DENIED.
    #[error("the server refused the test (it is busy, or the cookie was wrong)")]
    AccessDenied,
    /// The server sent SERVER_ERROR with its codes.
    #[error("the server reported error {} (errno {})", .0.i_errno, .0.errno)]
    Server(ServerError),
    /// The peer sent SERVER_TERMINATE or CLIENT_TERMINATE.
    #[error("the peer terminated the test")]
    Terminated,
    /// A call after the session finished.
    #[error("the session already ended")]
    Ended,
    /// A call the current phase does not allow (the call, the phase).
    #[error("{0} is not possible while {1}")]
    Misuse(&'static str, &'static str),
}

impl From<WireError> for SessionError {
    fn from(e: WireError) -> SessionError {
        SessionError::Wire(e)
    }
}

impl From<ParamError> for SessionError {
    fn from(e: ParamError) -> SessionError {
        SessionError::Params(e)
    }
}

impl From<ResultsError> for SessionError {
    fn from(e: ResultsError) -> SessionError {
        SessionError::Results(e)
    }
}

/// What the next bytes on the control connection must be.
#[derive(Debug)]
enum Expect {
    Cookie(Vec<u8>),
    State,
    Json(JsonFrameReader),
    ServerErrorPayload(Vec<u8>),
    Nothing,
}

/// Feeds bytes into an `Expect`, returning what completed.
enum Piece {
    Cookie([u8; COOKIE_LEN]),
    State(State),
    Json(serde_json::Map<String, serde_json::Value>),
    ServerError(ServerError),
}

fn read_piece(expect: &mut Expect, input: &[u8]) -> (usize, Result<Option<Piece>, WireError>) {
    match expect {
        Expect::Cookie(buf) => {
            let take = (COOKIE_LEN - buf.len()).min(input.len());
            buf.extend_from_slice(&input[..take]);
            if buf.len() < COOKIE_LEN {
                return (take, Ok(None));
            }
            let mut c = [0u8; COOKIE_LEN];
            c.copy_from_slice(buf);
            (take, Ok(Some(Piece::Cookie(c))))
        }
        Expect::State => match input.first() {
            None => (0, Ok(None)),
            Some(&b) => (1, State::from_byte(b).map(|s| Some(Piece::State(s)))),
        },
        Expect::Json(r) => {
            let (used, res) = r.feed(input);
            (used, res.map(|o| o.map(Piece::Json)))
        }
        Expect::ServerErrorPayload(buf) => {
            let take = (ServerError::LEN - buf.len()).min(input.len());
            buf.extend_from_slice(&input[..take]);
            if buf.len() < ServerError::LEN {
                return (take, Ok(None));
            }
            let mut b = [0u8; ServerError::LEN];
            b.copy_from_slice(buf);
            (take, Ok(Some(Piece::ServerError(ServerError::decode(&b)))))
        }
        Expect::Nothing => (0, Ok(None)),
    }
}

/// What both sides' sessions are to [`feed`].
trait Conversation {
    type Event;
    fn failed(&self) -> bool;
    /// Done or failed: nothing more is expected.
    fn over(&self) -> bool;
    fn set_failed(&mut self);
    fn deadline(&self) -> Option<Dur>;
    /// What the side is doing, for "… while {doing}" in errors.
    fn doing(&self) -> &'static str;
    fn expect(&mut self) -> &mut Expect;
    /// Marks the session failed (queuing whatever the peer must be told) and returns `e`.
    fn failing(&mut self, e: SessionError) -> SessionError;
    fn piece(&mut self, p: Piece, now: Dur) -> Result<Option<Self::Event>, SessionError>;
}

/// Cuts the control connection's bytes into the pieces the session expects, one after
/// another, and hands each complete piece to it: the part of `handle_input` both sides share.
/// Bytes that arrive when nothing is expected fail the session.
fn feed<C: Conversation>(c: &mut C, input: &[u8], now: Dur) -> Result<Vec<C::Event>, SessionError> {
    if c.failed() {
        return Err(SessionError::Ended);
    }
    let mut events = Vec::new();
    let mut pos = 0;
    while pos < input.len() {
        if matches!(c.expect(), Expect::Nothing) {
            let doing = c.doing();
            return Err(c.failing(SessionError::Misuse("sending more data", doing)));
        }
        let (used, piece) = read_piece(c.expect(), &input[pos..]);
        pos += used;
        match piece {
            Err(e) => return Err(c.failing(e.into())),
            Ok(None) => {}
            Ok(Some(p)) => events.extend(c.piece(p, now)?),
        }
        if used == 0 {
            break;
        }
    }
    Ok(events)
}

/// Ends the session if the current phase has run out of time.
fn poll<C: Conversation>(c: &mut C, now: Dur) -> Result<(), SessionError> {
    if c.deadline().is_some_and(|d| now >= d) {
        let phase = c.doing();
        c.set_failed();
        return Err(SessionError::Timeout { phase });
    }
    Ok(())
}

/// The peer closed the control connection: fine once the session is over, else a failure.
fn handle_eof<C: Conversation>(c: &mut C) -> Result<(), SessionError> {
    if c.over() {
        return Ok(());
    }
    let phase = c.doing();
    c.set_failed();
    Err(SessionError::Closed { phase })
}

/// The trait's methods, as each side's inherent ones.
macro_rules! conversation {
    ($session:ty, $event:ty, $phase:ty) => {
        impl Conversation for $session {
            type Event = $event;
            fn failed(&self) -> bool {
                self.phase == <$phase>::Failed
            }
            fn over(&self) -> bool {
                matches!(self.phase, <$phase>::Done | <$phase>::Failed)
            }
            fn set_failed(&mut self) {
                self.phase = <$phase>::Failed;
            }
            fn deadline(&self) -> Option<Dur> {
                <$session>::deadline(self)
            }
            fn doing(&self) -> &'static str {
                self.phase.doing()
            }
            fn expect(&mut self) -> &mut Expect {
                &mut self.expect
            }
            fn failing(&mut self, e: SessionError) -> SessionError {
                self.fail(e)
            }
            fn piece(&mut self, p: Piece, now: Dur) -> Result<Option<$event>, SessionError> {
                self.on_piece(p, now)
            }
        }
    };
}
conversation!(ServerSession, ServerEvent, ServerPhase);
conversation!(ClientSession, ClientEvent, ClientPhase);

// ------------------------------------------------------------------------------------------
// Server

/// Where the server's side of the conversation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerPhase {
    /// Waiting for the 37-byte cookie.
    Cookie,
    /// PARAM_EXCHANGE sent; waiting for the parameters.
    Params,
    /// Parameters received; the application must `approve` or `refuse` them.
    Approval,
    /// CREATE_STREAMS sent; waiting for the data connections.
    Streams,
    /// TEST_RUNNING sent; data flows until the client's TEST_END.
    Running,
    /// TEST_END received; the application must `finish` with its results.
    Finishing,
    /// EXCHANGE_RESULTS sent; waiting for the client's results.
    ClientResults,
    /// Our results and DISPLAY_RESULTS sent; waiting for IPERF_DONE.
    Goodbye,
    /// IPERF_DONE received: the test completed.
    Done,
    /// The session ended with an error or a termination.
    Failed,
}

impl ServerPhase {
    fn doing(self) -> &'static str {
        match self {
            ServerPhase::Cookie => "waiting for the cookie",
            ServerPhase::Params => "waiting for the parameters",
            ServerPhase::Approval => "deciding on the parameters",
            ServerPhase::Streams => "waiting for the data streams",
            ServerPhase::Running => "running the test",
            ServerPhase::Finishing => "ending the test",
            ServerPhase::ClientResults => "waiting for the client's results",
            ServerPhase::Goodbye => "waiting for IPERF_DONE",
            ServerPhase::Done => "done",
            ServerPhase::Failed => "ended",
        }
    }
}

/// What the server's control connection produced.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// The client's parameters: approve or refuse them.
    Params(Box<Params>),
    /// The client ended the test: stop the data streams, then `finish`.
    TestEnd,
    /// The client's results arrived (ours are sent next, automatically).
    ClientResults(Box<Results>),
    /// IPERF_DONE: the test is complete; close the control connection.
    Done,
}

/// The role of a data connection, decided by accept order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataStream {
    /// iperf3's stream id: 1, 3, 4, 5, … (kept for compatibility by iperf3 itself).
    pub id: u32,
    /// True if the server sends on this stream (reverse, or the second half of bidir).
    pub server_sends: bool,
    /// True when this was the last stream the test needs (TEST_START and TEST_RUNNING have
    /// been queued).
    pub last: bool,
}

/// The server side of one test's control connection.
#[derive(Debug)]
pub struct ServerSession {
    phase: ServerPhase,
    expect: Expect,
    out: Vec<u8>,
    timeouts: Timeouts,
    deadline: Dur,
    cookie: Option<Cookie>,
    params: Option<Params>,
    streams_accepted: u32,
    own_results: Option<Results>,
}

impl ServerSession {
    /// A session for a control connection accepted at `now`.
    pub fn new(now: Dur, timeouts: Timeouts) -> ServerSession {
        ServerSession {
            phase: ServerPhase::Cookie,
            expect: Expect::Cookie(Vec::with_capacity(COOKIE_LEN)),
            out: Vec::new(),
            timeouts,
            deadline: add(now, timeouts.handshake),
            cookie: None,
            params: None,
            streams_accepted: 0,
            own_results: None,
        }
    }

    /// Where the control conversation is.
    pub fn phase(&self) -> ServerPhase {
        self.phase
    }

    /// The client's parameters, once received.
    pub fn params(&self) -> Option<&Params> {
        self.params.as_ref()
    }

    /// Bytes to write to the control connection.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// When `poll` must next be called at the latest.
    pub fn deadline(&self) -> Option<Dur> {
        (!matches!(self.phase, ServerPhase::Done | ServerPhase::Failed)).then_some(self.deadline)
    }

    /// Ends the session if the current phase has run out of time.
    pub fn poll(&mut self, now: Dur) -> Result<(), SessionError> {
        poll(self, now)
    }

    /// The peer closed the control connection.
    pub fn handle_eof(&mut self) -> Result<(), SessionError> {
        handle_eof(self)
    }

    fn fail(&mut self, e: SessionError) -> SessionError {
        // Tell a stock client why, where iperf3 would, so it prints a message it knows.
        let i_errno = match &e {
            SessionError::Params(p) => Some(p.i_errno()),
            SessionError::Results(_) => Some(wire::i_errno::RECV_RESULTS),
            SessionError::Unexpected { .. } | SessionError::Wire(WireError::UnknownState(_)) => {
                Some(wire::i_errno::MESSAGE)
            }
            SessionError::Wire(_) if self.phase == ServerPhase::Params => {
                Some(wire::i_errno::RECV_PARAMS)
            }
            _ => None,
        };
        if let Some(i_errno) = i_errno {
            self.out
                .extend_from_slice(&ServerError { i_errno, errno: 0 }.encode());
        }
        self.phase = ServerPhase::Failed;
        self.expect = Expect::Nothing;
        e
    }

    /// Consumes bytes from the control connection.
    pub fn handle_input(
        &mut self,
        input: &[u8],
        now: Dur,
    ) -> Result<Vec<ServerEvent>, SessionError> {
        feed(self, input, now)
    }

    fn on_piece(&mut self, piece: Piece, now: Dur) -> Result<Option<ServerEvent>, SessionError> {
        match (self.phase, piece) {
            (ServerPhase::Cookie, Piece::Cookie(c)) => {
                let cookie = Cookie::from_wire(&c).map_err(|e| self.fail(e.into()))?;
                self.cookie = Some(cookie);
                self.out.push(State::ParamExchange.byte());
                self.phase = ServerPhase::Params;
                self.expect = Expect::Json(JsonFrameReader::new(wire::MAX_PARAMS_JSON));
                Ok(None)
            }
            (ServerPhase::Params, Piece::Json(m)) => {
                let params = Params::from_json(&m).map_err(|e| self.fail(e.into()))?;
                self.params = Some(params.clone());
                self.phase = ServerPhase::Approval;
                self.expect = Expect::State;
                Ok(Some(ServerEvent::Params(Box::new(params))))
            }
            (ServerPhase::ClientResults, Piece::Json(m)) => {
                let results = Results::from_json(&m).map_err(|e| self.fail(e.into()))?;
                // Our results follow the client's, then DISPLAY_RESULTS (iperf3's order).
                let own = self.own_results.take().unwrap_or_else(empty_results);
                self.out.extend_from_slice(&encode_json(&own.to_json()));
                self.out.push(State::DisplayResults.byte());
                self.phase = ServerPhase::Goodbye;
                self.expect = Expect::State;
                self.deadline = add(now, self.timeouts.results);
                Ok(Some(ServerEvent::ClientResults(Box::new(results))))
            }
            (_, Piece::State(State::ClientTerminate)) => {
                self.phase = ServerPhase::Failed;
                self.expect = Expect::Nothing;
                Err(SessionError::Terminated)
            }
            (ServerPhase::Running, Piece::State(State::TestEnd)) => {
                self.phase = ServerPhase::Finishing;
                self.deadline = add(now, self.timeouts.results);
                Ok(Some(ServerEvent::TestEnd))
            }
            (ServerPhase::Goodbye, Piece::State(State::IperfDone)) => {
                self.phase = ServerPhase::Done;
                self.expect = Expect::Nothing;
                Ok(Some(ServerEvent::Done))
            }
            (phase, Piece::State(state)) => Err(self.fail(SessionError::Unexpected {
                state,
                phase: phase.doing(),
            })),
            (phase, _) => Err(self.fail(SessionError::Misuse("this message", phase.doing()))),
        }
    }

    /// Accepts the parameters: CREATE_STREAMS is queued and the data streams are awaited.
    pub fn approve(&mut self, now: Dur) -> Result<(), SessionError> {
        if self.phase != ServerPhase::Approval {
            return Err(SessionError::Misuse("approve", self.phase.doing()));
        }
        self.out.push(State::CreateStreams.byte());
        self.phase = ServerPhase::Streams;
        self.deadline = add(now, self.timeouts.streams);
        Ok(())
    }

    /// Refuses the parameters with an iperf3 `i_errno` (for example a duration above the
    /// server's limit); SERVER_ERROR is queued and the session ends.
    pub fn refuse(&mut self, i_errno: i32) {
        self.out
            .extend_from_slice(&ServerError { i_errno, errno: 0 }.encode());
        self.phase = ServerPhase::Failed;
        self.expect = Expect::Nothing;
    }

    /// Judges a data connection by the 37 bytes it sent first. `None`: not this test's cookie,
    /// or not the time for streams; write [`DATA_DENIED_REPLY`] and close it.
    pub fn data_stream(&mut self, first: &[u8; COOKIE_LEN], now: Dur) -> Option<DataStream> {
        let params = self.params.as_ref()?;
        if self.phase != ServerPhase::Streams
            || params.protocol == Protocol::Udp
            || Cookie::from_wire(first).ok() != self.cookie
        {
            return None;
        }
        self.accept_stream(now)
    }

    /// A UDP test's next stream: its "connect" datagram arrived on the server's port (UDP
    /// streams carry no cookie). `None` when this is not a UDP test waiting for streams.
    pub fn udp_stream(&mut self, now: Dur) -> Option<DataStream> {
        let params = self.params.as_ref()?;
        if self.phase != ServerPhase::Streams || params.protocol != Protocol::Udp {
            return None;
        }
        self.accept_stream(now)
    }

    /// Counts one more data stream and gives it its id and role.
    fn accept_stream(&mut self, now: Dur) -> Option<DataStream> {
        let params = self.params.as_ref()?;
        let index = self.streams_accepted;
        self.streams_accepted += 1;
        let last = self.streams_accepted == params.data_streams();
        let stream = DataStream {
            id: if index == 0 { 1 } else { index + 2 },
            server_sends: index >= params.server_receiving_streams(),
            last,
        };
        if last {
            self.out.push(State::TestStart.byte());
            self.out.push(State::TestRunning.byte());
            self.phase = ServerPhase::Running;
            self.deadline = add(now, self.running_limit(params));
        }
        Some(stream)
    }

    fn running_limit(&self, p: &Params) -> Dur {
        let limit = if p.time_s == 0 {
            self.timeouts.max_test
        } else {
            let planned = Dur::from_millis((p.time_s as u64 + p.omit_s as u64) * 1000);
            add(planned, self.timeouts.grace)
        };
        // The server's own cap ends a longer test as a timeout.
        self.timeouts.max_duration.map_or(limit, |m| limit.min(m))
    }

    /// After TEST_END: queues EXCHANGE_RESULTS; `own` is sent after the client's results.
    pub fn finish(&mut self, own: Results, now: Dur) -> Result<(), SessionError> {
        if self.phase != ServerPhase::Finishing {
            return Err(SessionError::Misuse("finish", self.phase.doing()));
        }
        self.own_results = Some(own);
        self.out.push(State::ExchangeResults.byte());
        self.phase = ServerPhase::ClientResults;
        // The client's results never carry server output, whatever it asked for: they are
        // bounded as plain results (a client asking for our output once got a 64 MiB limit
        // here, and a server parsed all of it before refusing it).
        self.expect = Expect::Json(JsonFrameReader::new(wire::MAX_RESULTS_JSON));
        self.deadline = add(now, self.timeouts.results);
        Ok(())
    }

    /// The server is shutting down: SERVER_TERMINATE is queued and the session ends.
    pub fn terminate(&mut self) {
        self.out.push(State::ServerTerminate.byte());
        self.phase = ServerPhase::Failed;
        self.expect = Expect::Nothing;
    }
}

fn empty_results() -> Results {
    Results {
        cpu_util_total: 0.0,
        cpu_util_user: 0.0,
        cpu_util_system: 0.0,
        sender_has_retransmits: -1,
        congestion_used: None,
        streams: Vec::new(),
        server_output_json: None,
        server_output_text: None,
        extension: None,
    }
}

fn add(a: Dur, b: Dur) -> Dur {
    Dur::from_nanos(a.nanos().saturating_add(b.nanos()))
}

// ------------------------------------------------------------------------------------------
// Client

/// Where the client's side of the conversation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientPhase {
    /// Cookie sent; waiting for PARAM_EXCHANGE.
    ParamExchange,
    /// Parameters sent; waiting for CREATE_STREAMS.
    CreateStreams,
    /// Streams opened; waiting for TEST_START and TEST_RUNNING.
    Start,
    /// Data flows; the application calls `end_test`.
    Running,
    /// TEST_END sent; waiting for EXCHANGE_RESULTS.
    Exchange,
    /// EXCHANGE_RESULTS received; the application must `send_results`.
    OwnResults,
    /// Our results sent; waiting for the server's.
    ServerResults,
    /// Waiting for DISPLAY_RESULTS.
    Display,
    /// IPERF_DONE sent: the test completed.
    Done,
    /// The session ended with an error or a termination.
    Failed,
}

impl ClientPhase {
    fn doing(self) -> &'static str {
        match self {
            ClientPhase::ParamExchange => "waiting for PARAM_EXCHANGE",
            ClientPhase::CreateStreams => "waiting for CREATE_STREAMS",
            ClientPhase::Start => "waiting for the test to start",
            ClientPhase::Running => "running the test",
            ClientPhase::Exchange => "waiting for EXCHANGE_RESULTS",
            ClientPhase::OwnResults => "sending results",
            ClientPhase::ServerResults => "waiting for the server's results",
            ClientPhase::Display => "waiting for DISPLAY_RESULTS",
            ClientPhase::Done => "done",
            ClientPhase::Failed => "ended",
        }
    }
}

/// What the client's control connection produced.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// Open this many data connections to the server's port, each writing the cookie first
    /// ([`ClientSession::cookie`]); the first `client_sends` of them carry our data.
    CreateStreams {
        /// How many data connections to open.
        count: u32,
        /// Of them, how many carry data from us (the rest are the server's in `--bidir`).
        client_sends: u32,
    },
    /// TEST_START: start the interval timers.
    TestStart,
    /// TEST_RUNNING: start sending.
    TestRunning,
    /// EXCHANGE_RESULTS: call `send_results`.
    ExchangeResults,
    /// The server's results.
    ServerResults(Box<Results>),
    /// DISPLAY_RESULTS: IPERF_DONE has been queued; print and close.
    Done,
}

/// The client side of one test's control connection.
#[derive(Debug)]
pub struct ClientSession {
    phase: ClientPhase,
    expect: Expect,
    out: Vec<u8>,
    timeouts: Timeouts,
    deadline: Dur,
    cookie: Cookie,
    params: Params,
}

impl ClientSession {
    /// A session on a control connection just connected at `now`: the cookie is queued.
    pub fn new(cookie: Cookie, params: Params, now: Dur, timeouts: Timeouts) -> ClientSession {
        ClientSession {
            phase: ClientPhase::ParamExchange,
            expect: Expect::State,
            out: cookie.as_bytes().to_vec(),
            timeouts,
            deadline: add(now, timeouts.handshake),
            cookie,
            params,
        }
    }

    /// Where the control conversation is.
    pub fn phase(&self) -> ClientPhase {
        self.phase
    }

    /// The test's cookie, which every data connection writes first.
    pub fn cookie(&self) -> &Cookie {
        &self.cookie
    }

    /// Bytes to write to the control connection.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// When `poll` must next be called at the latest (none while our own test runs: the
    /// application ends it).
    pub fn deadline(&self) -> Option<Dur> {
        match self.phase {
            ClientPhase::Running
            | ClientPhase::OwnResults
            | ClientPhase::Done
            | ClientPhase::Failed => None,
            _ => Some(self.deadline),
        }
    }

    /// Ends the session if the current phase has run out of time.
    pub fn poll(&mut self, now: Dur) -> Result<(), SessionError> {
        poll(self, now)
    }

    /// The peer closed the control connection.
    pub fn handle_eof(&mut self) -> Result<(), SessionError> {
        handle_eof(self)
    }

    fn fail(&mut self, e: SessionError) -> SessionError {
        self.phase = ClientPhase::Failed;
        self.expect = Expect::Nothing;
        e
    }

    /// Consumes bytes from the control connection.
    pub fn handle_input(
        &mut self,
        input: &[u8],
        now: Dur,
    ) -> Result<Vec<ClientEvent>, SessionError> {
        feed(self, input, now)
    }

    fn on_piece(&mut self, piece: Piece, now: Dur) -> Result<Option<ClientEvent>, SessionError> {
        let state = match piece {
            Piece::ServerError(e) => return Err(self.fail(SessionError::Server(e))),
            Piece::Json(m) if self.phase == ClientPhase::ServerResults => {
                let r = Results::from_json(&m).map_err(|e| self.fail(e.into()))?;
                self.phase = ClientPhase::Display;
                self.expect = Expect::State;
                self.deadline = add(now, self.timeouts.results);
                return Ok(Some(ClientEvent::ServerResults(Box::new(r))));
            }
            Piece::State(s) => s,
            _ => return Err(self.fail(SessionError::Misuse("this message", self.phase.doing()))),
        };
        match (self.phase, state) {
            (_, State::AccessDenied) => Err(self.fail(SessionError::AccessDenied)),
            (_, State::ServerError) => {
                self.expect = Expect::ServerErrorPayload(Vec::with_capacity(ServerError::LEN));
                Ok(None)
            }
            (_, State::ServerTerminate) => Err(self.fail(SessionError::Terminated)),
            (ClientPhase::ParamExchange, State::ParamExchange) => {
                self.out
                    .extend_from_slice(&encode_json(&self.params.to_json()));
                self.phase = ClientPhase::CreateStreams;
                self.deadline = add(now, self.timeouts.handshake);
                Ok(None)
            }
            (ClientPhase::CreateStreams, State::CreateStreams) => {
                self.phase = ClientPhase::Start;
                self.deadline = add(now, self.timeouts.streams);
                let count = self.params.data_streams();
                Ok(Some(ClientEvent::CreateStreams {
                    count,
                    client_sends: self.params.server_receiving_streams(),
                }))
            }
            (ClientPhase::Start, State::TestStart) => Ok(Some(ClientEvent::TestStart)),
            (ClientPhase::Start, State::TestRunning) => {
                self.phase = ClientPhase::Running;
                Ok(Some(ClientEvent::TestRunning))
            }
            (ClientPhase::Exchange, State::ExchangeResults) => {
                self.phase = ClientPhase::OwnResults;
                Ok(Some(ClientEvent::ExchangeResults))
            }
            (ClientPhase::Display, State::DisplayResults) => {
                self.out.push(State::IperfDone.byte());
                self.phase = ClientPhase::Done;
                self.expect = Expect::Nothing;
                Ok(Some(ClientEvent::Done))
            }
            (phase, state) => Err(self.fail(SessionError::Unexpected {
                state,
                phase: phase.doing(),
            })),
        }
    }

    /// Ends the test (duration, bytes or blocks reached): TEST_END is queued.
    pub fn end_test(&mut self, now: Dur) -> Result<(), SessionError> {
        if self.phase != ClientPhase::Running {
            return Err(SessionError::Misuse("end_test", self.phase.doing()));
        }
        self.out.push(State::TestEnd.byte());
        self.phase = ClientPhase::Exchange;
        self.deadline = add(now, self.timeouts.results);
        Ok(())
    }

    /// Sends our results after EXCHANGE_RESULTS; the server's are read next.
    pub fn send_results(&mut self, own: &Results, now: Dur) -> Result<(), SessionError> {
        if self.phase != ClientPhase::OwnResults {
            return Err(SessionError::Misuse("send_results", self.phase.doing()));
        }
        self.out.extend_from_slice(&encode_json(&own.to_json()));
        self.phase = ClientPhase::ServerResults;
        let max = if self.params.get_server_output {
            wire::MAX_RESULTS_WITH_OUTPUT_JSON
        } else {
            wire::MAX_RESULTS_JSON
        };
        self.expect = Expect::Json(JsonFrameReader::new(max));
        self.deadline = add(now, self.timeouts.results);
        Ok(())
    }

    /// We are giving up (a signal): CLIENT_TERMINATE is queued and the session ends.
    pub fn terminate(&mut self) {
        self.out.push(State::ClientTerminate.byte());
        self.phase = ClientPhase::Failed;
        self.expect = Expect::Nothing;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Direction;
    use crate::results::StreamResult;
    use proptest::prelude::*;

    fn t(ms: u64) -> Dur {
        Dur::from_millis(ms)
    }

    fn results(ids: &[u32], bytes: u64) -> Results {
        Results {
            cpu_util_total: 1.0,
            cpu_util_user: 0.5,
            cpu_util_system: 0.5,
            sender_has_retransmits: 1,
            congestion_used: Some("cubic".into()),
            streams: ids
                .iter()
                .map(|&id| StreamResult {
                    id: id as i64,
                    bytes,
                    retransmits: 0,
                    jitter: 0.0,
                    errors: 0,
                    omitted_errors: Some(0),
                    packets: 0,
                    omitted_packets: Some(0),
                    start_time: Some(0.0),
                    end_time: Some(10.0),
                })
                .collect(),
            server_output_json: None,
            server_output_text: None,
            extension: None,
        }
    }

    /// Moves every queued byte from one side to the other, in `chunk`-sized pieces.
    fn pump_to_server(
        c: &mut ClientSession,
        s: &mut ServerSession,
        now: Dur,
        chunk: usize,
    ) -> Vec<ServerEvent> {
        let bytes = c.take_output();
        let mut ev = Vec::new();
        for piece in bytes.chunks(chunk.max(1)) {
            ev.extend(s.handle_input(piece, now).unwrap());
        }
        ev
    }

    fn pump_to_client(
        s: &mut ServerSession,
        c: &mut ClientSession,
        now: Dur,
        chunk: usize,
    ) -> Vec<ClientEvent> {
        let bytes = s.take_output();
        let mut ev = Vec::new();
        for piece in bytes.chunks(chunk.max(1)) {
            ev.extend(c.handle_input(piece, now).unwrap());
        }
        ev
    }

    /// A whole test between our client and our server, returning the stream assignments.
    fn converse(direction: Direction, parallel: u32, chunk: usize) -> Vec<DataStream> {
        let cookie = Cookie::from_random([7; 36]);
        let params = Params {
            direction,
            parallel,
            time_s: 2,
            client_version: Some("tcptune".into()),
            ..Params::default()
        };
        let mut c = ClientSession::new(cookie, params.clone(), t(0), Timeouts::default());
        let mut s = ServerSession::new(t(0), Timeouts::default());
        assert!(pump_to_server(&mut c, &mut s, t(1), chunk).is_empty());
        assert_eq!(s.phase(), ServerPhase::Params);
        assert!(pump_to_client(&mut s, &mut c, t(2), chunk).is_empty());
        let ev = pump_to_server(&mut c, &mut s, t(3), chunk);
        assert_eq!(ev, vec![ServerEvent::Params(Box::new(params.clone()))]);
        s.approve(t(4)).unwrap();
        let ev = pump_to_client(&mut s, &mut c, t(5), chunk);
        let (count, client_sends) = match ev.as_slice() {
            [ClientEvent::CreateStreams {
                count,
                client_sends,
            }] => (*count, *client_sends),
            other => panic!("{other:?}"),
        };
        assert_eq!(count, params.data_streams());
        let mut streams = Vec::new();
        for i in 0..count {
            let st = s.data_stream(c.cookie().as_bytes(), t(6)).unwrap();
            assert_eq!(st.last, i + 1 == count);
            // The client sends on its first `client_sends` streams; the server on the others.
            assert_eq!(st.server_sends, i >= client_sends);
            streams.push(st);
        }
        // A connection with another cookie is refused, even now.
        assert_eq!(
            s.data_stream(Cookie::from_random([1; 36]).as_bytes(), t(6)),
            None
        );
        let ev = pump_to_client(&mut s, &mut c, t(7), chunk);
        assert_eq!(ev, vec![ClientEvent::TestStart, ClientEvent::TestRunning]);
        c.end_test(t(2007)).unwrap();
        assert_eq!(
            pump_to_server(&mut c, &mut s, t(2008), chunk),
            vec![ServerEvent::TestEnd]
        );
        let ids: Vec<u32> = streams.iter().map(|s| s.id).collect();
        s.finish(results(&ids, 100), t(2009)).unwrap();
        assert_eq!(
            pump_to_client(&mut s, &mut c, t(2010), chunk),
            vec![ClientEvent::ExchangeResults]
        );
        c.send_results(&results(&ids, 99), t(2011)).unwrap();
        let ev = pump_to_server(&mut c, &mut s, t(2012), chunk);
        assert_eq!(
            ev,
            vec![ServerEvent::ClientResults(Box::new(results(&ids, 99)))]
        );
        let ev = pump_to_client(&mut s, &mut c, t(2013), chunk);
        assert_eq!(
            ev,
            vec![
                ClientEvent::ServerResults(Box::new(results(&ids, 100))),
                ClientEvent::Done
            ]
        );
        assert_eq!(
            pump_to_server(&mut c, &mut s, t(2014), chunk),
            vec![ServerEvent::Done]
        );
        assert_eq!(
            (c.phase(), s.phase()),
            (ClientPhase::Done, ServerPhase::Done)
        );
        assert_eq!((c.deadline(), s.deadline()), (None, None));
        streams
    }

    #[test]
    fn a_whole_test_forward_reverse_and_bidirectional() {
        let f = converse(Direction::Forward, 3, 1000);
        assert_eq!(f.iter().map(|s| s.id).collect::<Vec<_>>(), [1, 3, 4]);
        assert!(f.iter().all(|s| !s.server_sends));
        let r = converse(Direction::Reverse, 2, 1);
        assert!(r.iter().all(|s| s.server_sends));
        let b = converse(Direction::Bidirectional, 2, 7);
        assert_eq!(b.iter().map(|s| s.id).collect::<Vec<_>>(), [1, 3, 4, 5]);
        assert_eq!(b.iter().filter(|s| s.server_sends).count(), 2);
    }

    #[test]
    fn the_exact_bytes_a_stock_peer_sees() {
        let cookie = Cookie::from_random([0; 36]);
        let mut c = ClientSession::new(cookie, Params::default(), t(0), Timeouts::default());
        let hello = c.take_output();
        assert_eq!(hello.len(), 37);
        assert_eq!(&hello[..36], "a".repeat(36).as_bytes());
        assert_eq!(hello[36], 0);
        let mut s = ServerSession::new(t(0), Timeouts::default());
        s.handle_input(&hello, t(0)).unwrap();
        assert_eq!(s.take_output(), [9]); // PARAM_EXCHANGE
        c.handle_input(&[9], t(0)).unwrap();
        let params = c.take_output();
        let len = u32::from_be_bytes(params[..4].try_into().unwrap()) as usize;
        assert_eq!(params.len(), 4 + len);
        assert!(params[4..].starts_with(b"{\""));
        s.handle_input(&params, t(0)).unwrap();
        s.approve(t(0)).unwrap();
        assert_eq!(s.take_output(), [10]); // CREATE_STREAMS
        s.data_stream(cookie.as_bytes(), t(0)).unwrap();
        assert_eq!(s.take_output(), [1, 2]); // TEST_START, TEST_RUNNING
    }

    #[test]
    fn busy_denied_and_server_errors_reach_the_client() {
        let cookie = Cookie::from_random([3; 36]);
        let mut c = ClientSession::new(cookie, Params::default(), t(0), Timeouts::default());
        assert_eq!(
            c.handle_input(&BUSY_REPLY, t(1)),
            Err(SessionError::AccessDenied)
        );
        assert_eq!(c.handle_input(&[9], t(1)), Err(SessionError::Ended));

        // A server refusing a 100 000 s test answers SERVER_ERROR with i_errno 5.
        let mut c = ClientSession::new(
            cookie,
            Params {
                time_s: 86_400,
                ..Params::default()
            },
            t(0),
            Timeouts::default(),
        );
        let mut s = ServerSession::new(t(0), Timeouts::default());
        s.handle_input(&c.take_output(), t(0)).unwrap();
        c.handle_input(&s.take_output(), t(0)).unwrap();
        s.handle_input(&c.take_output(), t(0)).unwrap();
        s.refuse(wire::i_errno::DURATION);
        let e = c.handle_input(&s.take_output(), t(0)).unwrap_err();
        assert_eq!(
            e,
            SessionError::Server(ServerError {
                i_errno: 5,
                errno: 0
            })
        );
    }

    #[test]
    fn hostile_parameters_get_server_error_not_a_crash() {
        let mut s = ServerSession::new(t(0), Timeouts::default());
        s.handle_input(Cookie::from_random([0; 36]).as_bytes(), t(0))
            .unwrap();
        s.take_output();
        let frame = encode_json(&serde_json::json!({"tcp": true, "title": 5}));
        let e = s.handle_input(&frame, t(0)).unwrap_err();
        assert!(matches!(e, SessionError::Params(_)), "{e}");
        assert_eq!(
            s.take_output(),
            ServerError {
                i_errno: 114,
                errno: 0
            }
            .encode()
        );
        assert_eq!(s.phase(), ServerPhase::Failed);

        let mut s = ServerSession::new(t(0), Timeouts::default());
        s.handle_input(Cookie::from_random([0; 36]).as_bytes(), t(0))
            .unwrap();
        let e = s.handle_input(&[0xff, 0xff, 0xff, 0xff], t(0)).unwrap_err();
        assert!(
            matches!(e, SessionError::Wire(WireError::FrameTooLong { .. })),
            "{e}"
        );
    }

    #[test]
    fn client_results_are_bounded_as_plain_results_even_with_server_output() {
        let cookie = Cookie::from_random([2; 36]);
        let params = Params {
            get_server_output: true,
            time_s: 1,
            ..Params::default()
        };
        let mut c = ClientSession::new(cookie, params, t(0), Timeouts::default());
        let mut s = ServerSession::new(t(0), Timeouts::default());
        s.handle_input(&c.take_output(), t(0)).unwrap();
        c.handle_input(&s.take_output(), t(0)).unwrap();
        s.handle_input(&c.take_output(), t(0)).unwrap();
        s.approve(t(0)).unwrap();
        s.data_stream(cookie.as_bytes(), t(0)).unwrap();
        s.handle_input(&[State::TestEnd.byte()], t(1000)).unwrap();
        s.finish(results(&[1], 5), t(1000)).unwrap();
        // A length just above the plain-results limit is refused at the header, before a
        // byte of the body is read or stored.
        let len = wire::MAX_RESULTS_JSON + 1;
        let e = s.handle_input(&len.to_be_bytes(), t(1001)).unwrap_err();
        assert_eq!(
            e,
            SessionError::Wire(WireError::FrameTooLong {
                len,
                max: wire::MAX_RESULTS_JSON
            })
        );
        assert_eq!(s.phase(), ServerPhase::Failed);
    }

    #[test]
    fn udp_streams_are_counted_without_a_cookie() {
        let cookie = Cookie::from_random([4; 36]);
        let params = Params {
            protocol: Protocol::Udp,
            parallel: 2,
            len: 1400,
            ..Params::default()
        };
        let mut c = ClientSession::new(cookie, params, t(0), Timeouts::default());
        let mut s = ServerSession::new(t(0), Timeouts::default());
        // Not before the parameters are approved.
        assert_eq!(s.udp_stream(t(0)), None);
        s.handle_input(&c.take_output(), t(0)).unwrap();
        c.handle_input(&s.take_output(), t(0)).unwrap();
        s.handle_input(&c.take_output(), t(0)).unwrap();
        s.approve(t(0)).unwrap();
        s.take_output();
        // A TCP data connection has no place in a UDP test, even with the cookie.
        assert_eq!(s.data_stream(cookie.as_bytes(), t(1)), None);
        let a = s.udp_stream(t(1)).unwrap();
        assert_eq!((a.id, a.server_sends, a.last), (1, false, false));
        assert!(s.take_output().is_empty());
        let b = s.udp_stream(t(2)).unwrap();
        assert_eq!((b.id, b.last), (3, true));
        assert_eq!(s.take_output(), [1, 2]); // TEST_START, TEST_RUNNING
        assert_eq!(s.udp_stream(t(3)), None);
    }

    #[test]
    fn every_phase_has_a_deadline() {
        let to = Timeouts::default();
        let mut s = ServerSession::new(t(0), to);
        s.poll(t(9_999)).unwrap();
        assert_eq!(
            s.poll(t(10_000)),
            Err(SessionError::Timeout {
                phase: "waiting for the cookie"
            })
        );
        // A timed test may run omit + time + grace.
        let cookie = Cookie::from_random([0; 36]);
        let params = Params {
            time_s: 30,
            omit_s: 2,
            ..Params::default()
        };
        let mut c = ClientSession::new(cookie, params, t(0), to);
        let mut s = ServerSession::new(t(0), to);
        s.handle_input(&c.take_output(), t(0)).unwrap();
        c.handle_input(&s.take_output(), t(0)).unwrap();
        s.handle_input(&c.take_output(), t(0)).unwrap();
        s.approve(t(100)).unwrap();
        assert_eq!(s.deadline(), Some(t(10_100)));
        s.data_stream(cookie.as_bytes(), t(200)).unwrap();
        assert_eq!(s.deadline(), Some(t(200 + 32_000 + 10_000)));
        assert!(s.poll(t(42_200)).is_err());
        // --server-max-duration caps a longer test (and one without an end).
        for time_s in [30, 0] {
            let capped = Timeouts {
                max_duration: Some(Dur::from_millis(5_000)),
                ..to
            };
            let params = Params {
                time_s,
                ..Params::default()
            };
            let mut c = ClientSession::new(cookie, params, t(0), capped);
            let mut s = ServerSession::new(t(0), capped);
            s.handle_input(&c.take_output(), t(0)).unwrap();
            c.handle_input(&s.take_output(), t(0)).unwrap();
            s.handle_input(&c.take_output(), t(0)).unwrap();
            s.approve(t(100)).unwrap();
            s.data_stream(cookie.as_bytes(), t(200)).unwrap();
            assert_eq!(s.deadline(), Some(t(5_200)), "-t {time_s}");
        }
        // EOF before the end is an error; after Done it is not.
        let mut s = ServerSession::new(t(0), to);
        assert!(s.handle_eof().is_err());
    }

    #[test]
    fn misuse_and_unexpected_states_are_errors() {
        let mut s = ServerSession::new(t(0), Timeouts::default());
        assert!(s.approve(t(0)).is_err());
        assert!(s.finish(results(&[1], 1), t(0)).is_err());
        assert_eq!(s.data_stream(&[0; 37], t(0)), None);
        let cookie = Cookie::from_random([0; 36]);
        let mut c = ClientSession::new(cookie, Params::default(), t(0), Timeouts::default());
        c.take_output();
        assert!(c.end_test(t(0)).is_err());
        let e = c.handle_input(&[1], t(0)).unwrap_err(); // TEST_START before PARAM_EXCHANGE
        assert!(
            matches!(
                e,
                SessionError::Unexpected {
                    state: State::TestStart,
                    ..
                }
            ),
            "{e}"
        );
        let mut c = ClientSession::new(cookie, Params::default(), t(0), Timeouts::default());
        assert!(matches!(
            c.handle_input(&[3], t(0)),
            Err(SessionError::Wire(WireError::UnknownState(3)))
        ));
        // A client's CLIENT_TERMINATE ends the server's session at any point.
        let mut s = ServerSession::new(t(0), Timeouts::default());
        s.handle_input(cookie.as_bytes(), t(0)).unwrap();
        s.handle_input(&encode_json(&Params::default().to_json()), t(0))
            .unwrap();
        assert_eq!(s.handle_input(&[12], t(0)), Err(SessionError::Terminated));
    }

    proptest! {
        #[test]
        fn random_control_bytes_never_panic_or_hang_the_server(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..12),
            valid_prefix: bool,
        ) {
            let mut s = ServerSession::new(t(0), Timeouts::default());
            if valid_prefix {
                s.handle_input(Cookie::from_random([5; 36]).as_bytes(), t(0)).unwrap();
            }
            for (i, chunk) in chunks.iter().enumerate() {
                if s.handle_input(chunk, t(i as u64)).is_err() {
                    prop_assert_eq!(s.phase(), ServerPhase::Failed);
                    break;
                }
                if s.phase() == ServerPhase::Approval {
                    // Random bytes happened to form valid parameters: approve and go on.
                    s.approve(t(i as u64)).unwrap();
                }
            }
            // Whatever happened, the session ends by its deadline.
            if s.phase() != ServerPhase::Failed {
                let d = s.deadline().unwrap();
                prop_assert!(s.poll(d).is_err());
            }
        }

        #[test]
        fn random_server_bytes_never_panic_the_client(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut c = ClientSession::new(Cookie::from_random([5; 36]), Params::default(), t(0), Timeouts::default());
            let _ = c.handle_input(&bytes, t(0));
        }
    }
}
