//! What the scope shows, as data: the table's rows, a connection's polled points, per-ACK
//! points, events and triggers. Each is an [`Update`]; the live core makes them, the store
//! keeps them, the page draws them and a recording holds them, so live and replayed views are
//! the same points by construction.

use std::net::SocketAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_diagnose::{Limit, Negotiated, Shares};

/// One polled sample of a connection, as charted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Point {
    /// Seconds since the view started.
    pub t_s: f64,
    /// Bytes acknowledged per second since the previous sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_bps: Option<f64>,
    /// The kernel's latest delivery-rate sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate_bps: Option<f64>,
    /// Whether that delivery-rate sample was application limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_limited: Option<bool>,
    /// Congestion window, bytes (`snd_cwnd` × MSS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwnd_bytes: Option<u64>,
    /// The peer's advertised window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_wnd_bytes: Option<u32>,
    /// Slow-start threshold in bytes (absent while it is "infinite").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssthresh_bytes: Option<u64>,
    /// Bytes in flight: (unacked − sacked − lost + retrans) × MSS, the kernel's packets_out rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inflight_bytes: Option<u64>,
    /// Smoothed RTT, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srtt_ms: Option<f64>,
    /// Minimum RTT seen, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_ms: Option<f64>,
    /// RTT variation, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rttvar_ms: Option<f64>,
    /// Bytes acknowledged since the connection started (the Stevens view's snd_una, polled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_bytes: Option<u64>,
    /// Bytes sent since the connection started, retransmissions included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_bytes: Option<u64>,
    /// The triage over the interval since the previous sample (shares of time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares: Option<Shares>,
}

/// One `tcp:tcp_probe` record, as charted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AckPoint {
    /// Seconds since the view started.
    pub t_s: f64,
    /// snd_una, bytes after the first one traced (modulo 2^32 arithmetic undone).
    pub una: u64,
    /// snd_nxt, on the same scale.
    pub nxt: u64,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Slow-start threshold, bytes; `None` before the first loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssthresh_bytes: Option<u64>,
    /// The peer's advertised window, bytes (scaled).
    pub snd_wnd_bytes: u32,
    /// Smoothed RTT, ms.
    pub srtt_ms: f64,
}

/// Something that happened to a connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    /// Seconds since the view started.
    pub t_s: f64,
    /// What happened.
    pub kind: EventKind,
    /// How many, when counted from counters between two samples.
    pub count: u64,
    /// In words: "recovery → open".
    pub text: String,
}

/// The event lane's kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Segments were retransmitted.
    Retransmit,
    /// A retransmission timeout.
    Rto,
    /// The congestion state changed (open, disorder, cwr, recovery, loss).
    CongState,
    /// The peer advertised a zero window.
    ZeroWindow,
}

/// What froze the display (a scope's trigger).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// A retransmission timeout.
    Rto,
    /// The congestion window fell to half or less between two samples.
    CwndHalved,
    /// The peer advertised a zero window.
    ZeroWindow,
}

/// One row of the connection table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// The socket cookie, as a string (cookies can exceed what a JavaScript number holds).
    pub id: String,
    /// Network namespace; `None`: ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// What the row is when it is not a live socket with known addresses (an experiment's
    /// trial): the page shows it in place of the addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// TCP state number (the filter's states) and its name as `ss` prints it.
    pub state_num: u8,
    /// The state's name as `ss` prints it.
    pub state: String,
    /// The socket's local address and port.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
    /// The congestion control algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// Goodput over the last interval, else the delivery rate.
    pub rate_bps: f64,
    /// Smoothed RTT, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srtt_ms: Option<f64>,
    /// The engine's class and one-line verdict over the last interval.
    pub limit: Limit,
    /// The one-line verdict.
    pub verdict: String,
}

/// The chosen connection's verdict, fix and options (computed for connections being watched).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Detail {
    /// Seconds since the view started.
    pub t_s: f64,
    /// The engine's class over the last interval.
    pub limit: Limit,
    /// The engine's one-line verdict.
    pub verdict: String,
    /// The engine's recommendations, one line each ("the receiver: raise …").
    pub fixes: Vec<String>,
    /// What the handshake negotiated (MSS, window scale, SACK, timestamps, ECN).
    pub negotiated: Negotiated,
}

/// Where per-connection data comes from, and why (the page's banner).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Source {
    /// True: per-ACK tracepoints; false: sock_diag polling.
    pub per_ack: bool,
    /// The sampling interval of the polled figures, seconds.
    pub interval_s: f64,
    /// Why tracing is not used (one sentence), when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One thing the page is told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Update {
    /// The table after a poll (at most the store's cap of rows, highest rate first).
    Rows {
        /// Seconds since the view started.
        t_s: f64,
        /// The rows, highest rate first.
        rows: Vec<Row>,
    },
    /// A polled sample of one connection.
    Point {
        /// The socket cookie, as a string.
        id: String,
        /// The sample.
        point: Point,
    },
    /// A per-ACK point of one connection.
    Ack {
        /// The socket cookie, as a string.
        id: String,
        /// The point.
        ack: AckPoint,
    },
    /// Something happened on one connection.
    Event {
        /// The socket cookie, as a string.
        id: String,
        /// The event.
        event: Event,
    },
    /// A trigger fired: the page freezes here, with what led up to it on screen.
    Freeze {
        /// The socket cookie, as a string.
        id: String,
        /// When, seconds since the view started.
        t_s: f64,
        /// What fired.
        trigger: Trigger,
    },
    /// A new diagnosis of one connection.
    Detail {
        /// The socket cookie, as a string.
        id: String,
        /// The diagnosis.
        detail: Detail,
    },
    /// The connection is gone.
    Closed {
        /// The socket cookie, as a string.
        id: String,
        /// When, seconds since the view started.
        t_s: f64,
    },
}

impl Update {
    /// The connection it is about (none: the table).
    pub fn id(&self) -> Option<&str> {
        match self {
            Update::Rows { .. } => None,
            Update::Point { id, .. }
            | Update::Ack { id, .. }
            | Update::Event { id, .. }
            | Update::Freeze { id, .. }
            | Update::Detail { id, .. }
            | Update::Closed { id, .. } => Some(id),
        }
    }

    /// When what it shows was taken: seconds since the view started (CLOCK_MONOTONIC).
    pub fn t_s(&self) -> f64 {
        match self {
            Update::Rows { t_s, .. } | Update::Freeze { t_s, .. } | Update::Closed { t_s, .. } => {
                *t_s
            }
            Update::Point { point, .. } => point.t_s,
            Update::Ack { ack, .. } => ack.t_s,
            Update::Event { event, .. } => event.t_s,
            Update::Detail { detail, .. } => detail.t_s,
        }
    }
}

/// An update as a stream sends it: stamped with when its sample or event was taken on
/// CLOCK_REALTIME, in milliseconds since the epoch (the clock of the page's
/// `performance.timeOrigin + performance.now()`), so the page can measure how long it took to
/// draw it. Recordings hold the update alone: the stamp is about this stream, not the data.
#[derive(Debug, Clone, Serialize)]
pub struct Stamped<'a> {
    /// The update, its fields at the top level.
    #[serde(flatten)]
    pub update: &'a Update,
    /// When its sample or event was taken: ms since the epoch on CLOCK_REALTIME.
    pub taken_ms: f64,
}
