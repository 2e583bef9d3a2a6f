//! What the tracer hands out and what it is asked for: the decoded events and the filter
//! (the interface the browser view builds on; re-exported by the trace module).

use serde::{Deserialize, Serialize};

/// One decoded tracepoint record for one socket. `t_ns` is CLOCK_MONOTONIC nanoseconds (the
/// tracefs instance uses trace_clock "mono"), comparable with tcp_info sample times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceEvent {
    /// When, CLOCK_MONOTONIC nanoseconds.
    pub t_ns: u64,
    /// The socket cookie (as sock_diag reports it); 0 for a retransmission or state change
    /// on a socket not yet seen in a tcp_probe event.
    pub cookie: u64,
    /// What happened.
    pub kind: TraceKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceKind {
    /// tcp:tcp_probe (an incoming segment on an established socket): the socket's state as
    /// the segment arrived, before TCP processed it.
    Ack {
        /// Oldest unacknowledged sequence number.
        snd_una: u32,
        /// Next sequence number to send; `snd_nxt - snd_una` is the bytes in flight.
        snd_nxt: u32,
        /// Congestion window, segments.
        cwnd_segs: u32,
        /// Slow-start threshold as `tcp_current_ssthresh`: outside a window reduction at
        /// least ¾ of cwnd; 2^31-1 before the first loss.
        ssthresh_segs: u32,
        /// The peer's advertised window, bytes (scaled).
        snd_wnd_bytes: u32,
        /// Smoothed RTT, µs.
        srtt_us: u32,
        /// The window we advertise, bytes.
        rcv_wnd_bytes: u32,
        /// Payload bytes of the arriving segment (0: a pure ACK).
        data_len: u16,
    },
    /// tcp:tcp_retransmit_skb: a segment was retransmitted.
    Retransmit {
        /// The socket's TCP state number (`tcptune_kernel::filter::state`).
        state: u8,
    },
    /// tcp:tcp_cong_state_set: the congestion state changed.
    CongState {
        /// The new state: 0 open, 1 disorder, 2 cwr, 3 recovery, 4 loss.
        ca_state: u8,
    },
    /// tcp:tcp_rcvbuf_grow (absent on older kernels); `rtt_us` is the receiver's RTT
    /// estimate, µs.
    RcvbufGrow {
        /// Receive buffer, bytes (`sk_rcvbuf`) after the growth.
        rcvbuf: u32,
        /// The receive window currently offered, bytes.
        rcv_wnd: u32,
        /// The most the window may grow to, bytes.
        window_clamp: u32,
        /// The receiver's RTT estimate, µs.
        rtt_us: u32,
    },
}

/// What to trace: kernel-side filter (ports, either end, and/or cookies; both empty: every TCP
/// socket), and the per-connection cap (events of one socket per second of trace time beyond
/// it are dropped and counted; 0: no cap).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceFilter {
    /// Ports to trace, matched at either end; empty: any.
    pub ports: Vec<u16>,
    /// Socket cookies to trace; empty: any.
    pub cookies: Vec<u64>,
    /// Events of one socket kept per second of trace time; 0: no cap.
    pub max_events_per_conn_per_sec: u32,
}
