//! Per-ACK TCP state from the kernel's tracepoints (`tcp:tcp_probe`, `tcp_retransmit_skb`,
//! `tcp_cong_state_set`, `tcp_rcvbuf_grow`) through a tracefs instance of our own.
//!
//! This is the interface the browser view consumes; until the tracer itself lands, `open`
//! reports tracing as unavailable, so every caller takes its sock_diag polling fallback.

use serde::{Deserialize, Serialize};

/// One decoded tracepoint record for one socket. `t_ns` is CLOCK_MONOTONIC nanoseconds
/// (the tracefs instance uses trace_clock "mono"), comparable with tcp_info sample times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    pub t_ns: u64,
    pub cookie: u64,
    pub kind: TraceKind,
}

/// What a tracepoint said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceKind {
    /// tcp:tcp_probe (an incoming segment on an established socket).
    Ack {
        snd_una: u32,
        snd_nxt: u32,
        cwnd_segs: u32,
        ssthresh_segs: u32,
        snd_wnd_bytes: u32,
        srtt_us: u32,
        rcv_wnd_bytes: u32,
        data_len: u16,
    },
    /// tcp:tcp_retransmit_skb
    Retransmit { state: u8 },
    /// tcp:tcp_cong_state_set (ca_state: 0 open, 1 disorder, 2 cwr, 3 recovery, 4 loss)
    CongState { ca_state: u8 },
    /// tcp:tcp_rcvbuf_grow (absent on older kernels)
    RcvbufGrow {
        rcvbuf: u32,
        rcv_wnd: u32,
        window_clamp: u32,
        rtt_us: u32,
    },
}

/// What to trace: kernel-side filter (ports and/or cookie), per-connection event cap.
pub struct TraceFilter {
    pub ports: Vec<u16>,
    pub cookies: Vec<u64>,
    pub max_events_per_conn_per_sec: u32,
}

/// Why tracing cannot be used; Display is one sentence.
#[derive(Debug, thiserror::Error)]
pub enum TraceUnavailable {
    #[error("tracing unavailable: this build has no tracefs reader yet; using sock_diag polling")]
    NotBuilt,
}

/// An open tracefs instance.
pub struct Tracer {
    _private: (),
}

impl Tracer {
    /// Opens the instance with `filter` applied in the kernel.
    pub fn open(_filter: &TraceFilter) -> Result<Tracer, TraceUnavailable> {
        Err(TraceUnavailable::NotBuilt)
    }

    /// Changes the in-kernel filter (e.g. the user chose another connection).
    pub fn set_filter(&mut self, _filter: &TraceFilter) -> Result<(), TraceUnavailable> {
        Err(TraceUnavailable::NotBuilt)
    }

    /// Non-blocking: appends what is ready; returns how many were dropped by the cap.
    pub fn read(&mut self, _out: &mut Vec<TraceEvent>) -> std::io::Result<u64> {
        Ok(0)
    }

    /// fds to poll (one per CPU buffer).
    pub fn fds(&self) -> Vec<std::os::fd::RawFd> {
        Vec::new()
    }
}
