//! The figures of a connection from its `tcp_info` samples: one [`Sample`]'s [`Snapshot`] and
//! the [`Interval`] between two, with the shares of time under each limit. The engine judges
//! these; they know nothing of verdicts.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_kernel::{SkMemInfo, TcpInfo};
use tcptune_model::{Dur, Rate};

/// One observation of a connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Sample {
    /// When it was taken, on any monotonic clock (only differences are used).
    pub at_s: Dur,
    /// The kernel's `tcp_info`.
    pub info: TcpInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Socket memory, when asked for.
    pub skmem: Option<SkMemInfo>,
}

/// Shares of time (fractions in [0, 1] that add up to 1 over an interval).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Shares {
    /// Blocked by the receiver's advertised window (`rwnd_limited`).
    pub rwnd: f64,
    /// Blocked by the send buffer (`sndbuf_limited`).
    pub sndbuf: f64,
    /// Sending, limited by cwnd or pacing: busy minus the two above.
    pub network: f64,
    /// Nothing to send: the application did not write (time not busy). `None` for lifetime
    /// figures, where the connection's age is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<f64>,
}

/// Options agreed in the handshake.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Negotiated {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Selective acknowledgements.
    pub sack: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// TCP timestamps.
    pub timestamps: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Window scaling.
    pub window_scaling: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Explicit congestion notification.
    pub ecn: Option<bool>,
    /// The peer's window scale (what our sends are scaled by).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_wscale: Option<u8>,
    /// Our window scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcv_wscale: Option<u8>,
    /// Sender MSS, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_mss: Option<u32>,
    /// Advertised MSS, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advmss: Option<u32>,
}

impl Negotiated {
    /// The options agreed, as `tcp_info` reports them.
    pub fn of(i: &TcpInfo) -> Negotiated {
        Negotiated {
            sack: i.sack(),
            timestamps: i.timestamps(),
            window_scaling: i.wscale(),
            ecn: i.ecn(),
            snd_wscale: i.snd_wscale,
            rcv_wscale: i.rcv_wscale,
            snd_mss: i.snd_mss,
            advmss: i.advmss,
        }
    }
}

/// Figures from one sample: state now, and shares over the connection's life so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Snapshot {
    /// Smoothed RTT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_s: Option<Dur>,
    /// Minimum RTT seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_s: Option<Dur>,
    /// srtt / min_rtt: how much queueing inflates the RTT (1 = none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_inflation: Option<f64>,
    /// cwnd × MSS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwnd_bytes: Option<u64>,
    /// The peer's receive window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_wnd_bytes: Option<u32>,
    /// Our receive window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcv_wnd_bytes: Option<u32>,
    /// What the window allows: min(cwnd, peer's window) / srtt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_rate_bps: Option<Rate>,
    /// The kernel's latest delivery-rate sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate_bps: Option<Rate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The kernel's pacing rate.
    pub pacing_rate_bps: Option<Rate>,
    /// bytes_retrans / bytes_sent over the connection's life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrans_ratio: Option<f64>,
    /// Shares of the busy time since the connection started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_shares: Option<Shares>,
    /// Options agreed in the handshake.
    pub negotiated: Negotiated,
}

/// Figures over the interval between two samples of the same connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Interval {
    /// Length of the interval.
    pub over_s: Dur,
    /// Bytes acknowledged per second (what the receiver got, in order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_bps: Option<Rate>,
    /// Bytes sent per second, retransmissions included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_rate_bps: Option<Rate>,
    /// Bytes received per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_rate_bps: Option<Rate>,
    /// Shares of the interval under each limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares: Option<Shares>,
    /// Retransmitted bytes / bytes sent in the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrans_ratio: Option<f64>,
    /// Retransmitted segments per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrans_per_s: Option<f64>,
    /// Segments newly marked lost / data segments sent (an estimate of the loss rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_ratio: Option<f64>,
    /// The kernel's chrono counters tick in jiffies; shares over less than ~50 ms are coarse.
    pub coarse: bool,
}

impl Interval {
    /// The larger of goodput and receive rate: how fast this connection moves data either way.
    pub fn main_rate(&self) -> Option<Rate> {
        match (self.goodput_bps, self.receive_rate_bps) {
            (Some(a), Some(b)) => Some(if a.bps() >= b.bps() { a } else { b }),
            (a, b) => a.or(b),
        }
    }
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

fn us(v: u32) -> Dur {
    Dur::from_micros(v as u64)
}

/// Sizes the way windows are talked about: "64 KiB", "1.5 MiB", "900 B".
pub fn size(bytes: u64) -> String {
    tcptune_model::Bytes::new(bytes).binary(3)
}

/// Figures from a single sample.
pub fn snapshot(i: &TcpInfo) -> Snapshot {
    let rtt = i.srtt_us();
    let min_rtt = i.min_rtt();
    let window = match (i.cwnd_bytes(), i.snd_wnd) {
        (Some(c), Some(w)) => Some(c.min(w as u64)),
        (c, _) => c,
    };
    let lifetime_shares = match (i.busy_time_us, i.rwnd_limited_us, i.sndbuf_limited_us) {
        (Some(busy), Some(rwnd), Some(sndbuf)) if busy > 0 => {
            let net = busy.saturating_sub(rwnd + sndbuf);
            Some(Shares {
                rwnd: rwnd as f64 / busy as f64,
                sndbuf: sndbuf as f64 / busy as f64,
                network: net as f64 / busy as f64,
                application: None,
            })
        }
        _ => None,
    };
    Snapshot {
        rtt_s: rtt.map(us),
        min_rtt_s: min_rtt.map(us),
        rtt_inflation: match (rtt, min_rtt) {
            (Some(r), Some(m)) => Some(r as f64 / m as f64),
            _ => None,
        },
        cwnd_bytes: i.cwnd_bytes(),
        snd_wnd_bytes: i.snd_wnd,
        rcv_wnd_bytes: i.rcv_wnd,
        window_rate_bps: match (window, rtt) {
            (Some(w), Some(r)) => Some(Rate::from_bps(w as f64 * 8.0 * 1e6 / r as f64)),
            _ => None,
        },
        delivery_rate_bps: i
            .delivery_rate_bytes_per_s
            .map(|r| Rate::from_bps(r as f64 * 8.0)),
        pacing_rate_bps: i.pacing_rate().map(|r| Rate::from_bps(r as f64 * 8.0)),
        retrans_ratio: match (i.bytes_retrans, i.bytes_sent) {
            (Some(r), Some(s)) => ratio(r, s),
            _ => None,
        },
        lifetime_shares,
        negotiated: Negotiated::of(i),
    }
}

fn delta<T: Into<u64>>(a: Option<T>, b: Option<T>) -> Option<u64> {
    Some(b?.into().wrapping_sub(a?.into()))
}

/// Figures over the interval from sample `a` to the later sample `b` of the same connection.
pub fn interval(a: &Sample, b: &Sample) -> Interval {
    let dt_ns = b.at_s.nanos().saturating_sub(a.at_s.nanos());
    let dt_s = dt_ns as f64 / 1e9;
    let (ia, ib) = (&a.info, &b.info);
    let per_s = |d: Option<u64>| {
        d.filter(|_| dt_ns > 0)
            .map(|d| Rate::from_bps(d as f64 * 8.0 / dt_s))
    };
    let shares = match (
        delta(ia.busy_time_us, ib.busy_time_us),
        delta(ia.rwnd_limited_us, ib.rwnd_limited_us),
        delta(ia.sndbuf_limited_us, ib.sndbuf_limited_us),
    ) {
        (Some(busy), Some(rwnd), Some(sndbuf)) if dt_ns > 0 => {
            let dt_us = dt_ns / 1000;
            // Jiffy rounding can make busy exceed the interval a little.
            let denom = dt_us.max(busy).max(1) as f64;
            let net = busy.saturating_sub(rwnd + sndbuf);
            Some(Shares {
                rwnd: rwnd as f64 / denom,
                sndbuf: sndbuf as f64 / denom,
                network: net as f64 / denom,
                application: Some(dt_us.saturating_sub(busy) as f64 / denom),
            })
        }
        _ => None,
    };
    let sent = delta(ia.bytes_sent, ib.bytes_sent);
    let retrans = delta(ia.bytes_retrans, ib.bytes_retrans);
    Interval {
        over_s: Dur::from_nanos(dt_ns),
        goodput_bps: per_s(delta(ia.bytes_acked, ib.bytes_acked)),
        send_rate_bps: per_s(sent),
        receive_rate_bps: per_s(delta(ia.bytes_received, ib.bytes_received)),
        shares,
        retrans_ratio: match (retrans, sent) {
            (Some(r), Some(s)) => ratio(r, s),
            _ => None,
        },
        retrans_per_s: delta(ia.total_retrans, ib.total_retrans)
            .filter(|_| dt_ns > 0)
            .map(|r| r as f64 / dt_s),
        loss_ratio: match (
            delta(ia.total_retrans, ib.total_retrans),
            delta(ia.data_segs_out, ib.data_segs_out),
        ) {
            (Some(r), Some(s)) => ratio(r, s),
            _ => None,
        },
        coarse: dt_ns < 50_000_000,
    }
}
