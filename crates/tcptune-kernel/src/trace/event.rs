//! What the tracer hands out and what it is asked for: the decoded events and the filter
//! (the interface the browser view builds on; re-exported by the trace module).

use serde::{Deserialize, Serialize};

/// One decoded tracepoint record for one socket. `t_ns` is CLOCK_MONOTONIC nanoseconds (the
/// tracefs instance uses trace_clock "mono"), comparable with tcp_info sample times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceEvent {
    pub t_ns: u64,
    /// The socket cookie (as sock_diag reports it); 0 for a retransmission or state change
    /// on a socket not yet seen in a tcp_probe event.
    pub cookie: u64,
    pub kind: TraceKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceKind {
    /// tcp:tcp_probe (an incoming segment on an established socket): the socket's state as
    /// the segment arrived, before TCP processed it.
    Ack {
        snd_una: u32,
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
    /// tcp:tcp_retransmit_skb (`state`: the socket's TCP state number).
    Retransmit { state: u8 },
    /// tcp:tcp_cong_state_set (ca_state: 0 open, 1 disorder, 2 cwr, 3 recovery, 4 loss)
    CongState { ca_state: u8 },
    /// tcp:tcp_rcvbuf_grow (absent on older kernels); `rtt_us` is the receiver's RTT
    /// estimate, µs.
    RcvbufGrow {
        rcvbuf: u32,
        rcv_wnd: u32,
        window_clamp: u32,
        rtt_us: u32,
    },
}

/// What to trace: kernel-side filter (ports, either end, and/or cookies; both empty: every TCP
/// socket), and the per-connection cap (events of one socket per second of trace time beyond
/// it are dropped and counted; 0: no cap).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceFilter {
    pub ports: Vec<u16>,
    pub cookies: Vec<u64>,
    pub max_events_per_conn_per_sec: u32,
}
