//! What limits a TCP connection, from the kernel's own counters (sans-IO).
//!
//! Samples of `tcp_info` (and socket memory) go in, with the time each was taken passed in by
//! the caller; figures and a one-line verdict with its evidence come out. The same code serves
//! `tcptune conns`/`watch` (dumps), `tcptune test` (getsockopt on its own sockets) and lab
//! reports (recorded samples), so a verdict means the same thing everywhere. For a socket of
//! one's own, build a [`Sample`] from `tcptune_kernel::sys::tcp_info_of` and `skmem_of`
//! (getsockopt `TCP_INFO` / `SO_MEMINFO`) and a monotonic clock.
//!
//! The limit breakdown is Web100's "triage" rebuilt on the kernel's chronograph counters
//! (4.10+): `busy_time` is the time with data outstanding, of which `rwnd_limited` was spent
//! blocked on the receiver's window and `sndbuf_limited` on the send buffer; the rest of busy is
//! the network's share (cwnd, pacing — the kernel does not separate them); time not busy is the
//! application's (nothing to send). The counters tick in jiffies (1–10 ms), so intervals much
//! shorter than ~50 ms give coarse shares, which [`Interval::coarse`] flags.

pub mod conn;
pub mod json;
pub mod throughput;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_kernel::{SkMemInfo, TcpInfo};
use tcptune_model::{Dur, Rate};

/// One observation of a connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Sample {
    /// When it was taken, on any monotonic clock (only differences are used).
    pub at_s: Dur,
    pub info: TcpInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skmem: Option<SkMemInfo>,
}

/// What the caller knows about the path, to state the bandwidth-delay product in a verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Context {
    /// The bottleneck rate, when known (`--rate`).
    pub path_rate: Option<Rate>,
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

/// What limits the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The receiver's window (its buffer, or its application reading slowly).
    ReceiverWindow,
    /// The sender's send buffer (SO_SNDBUF or tcp_wmem).
    SendBuffer,
    /// Congestion window or pacing: the path, or congestion control.
    Network,
    /// The sending application wrote less than the connection could carry.
    Application,
    /// This end only receives; the limit is seen at the sender.
    Receiving,
    /// Nothing moved.
    Idle,
    /// Not enough data (no `busy_time` from this kernel, or no traffic) to say.
    Unknown,
}

impl Limit {
    pub fn label(self) -> &'static str {
        match self {
            Limit::ReceiverWindow => "receiver-window limited",
            Limit::SendBuffer => "send-buffer limited",
            Limit::Network => "network/cwnd limited",
            Limit::Application => "application limited",
            Limit::Receiving => "receiving",
            Limit::Idle => "idle",
            Limit::Unknown => "unknown",
        }
    }
}

/// The verdict: the dominant limit, its share, and one line with the numbers behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    pub limit: Limit,
    /// Share of the interval (or of the busy time, for lifetime figures) under that limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// One line: "receiver-window limited 93% of the last 5 s: its window 64 KiB …".
    pub text: String,
}

/// Options agreed in the handshake.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Negotiated {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sack: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamps: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_scaling: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    pub pacing_rate_bps: Option<Rate>,
    /// bytes_retrans / bytes_sent over the connection's life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrans_ratio: Option<f64>,
    /// Shares of the busy time since the connection started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_shares: Option<Shares>,
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
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{} KiB", tcptune_model::units::fmt_sig(b / 1024.0, 3))
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{} MiB", tcptune_model::units::fmt_sig(b / 1048576.0, 3))
    } else {
        format!("{} GiB", tcptune_model::units::fmt_sig(b / 1073741824.0, 3))
    }
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
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

fn dominant(s: &Shares) -> (Limit, f64) {
    let mut best = (Limit::ReceiverWindow, s.rwnd);
    for c in [
        (Limit::SendBuffer, s.sndbuf),
        (Limit::Network, s.network),
        (Limit::Application, s.application.unwrap_or(0.0)),
    ] {
        if c.1 > best.1 {
            best = c;
        }
    }
    best
}

fn evidence(
    limit: Limit,
    b: &Sample,
    snap: &Snapshot,
    ctx: &Context,
    goodput: Option<Rate>,
) -> String {
    let i = &b.info;
    let rtt = snap.rtt_s;
    match limit {
        Limit::ReceiverWindow => {
            let Some(w) = i.snd_wnd else {
                return "the peer's window is full".into();
            };
            let mut s = format!("its window {}", size(w as u64));
            match (ctx.path_rate, snap.min_rtt_s.or(rtt)) {
                (Some(rate), Some(r)) => {
                    let bdp = (rate.bytes_per_sec() * r.secs()).ceil() as u64;
                    let cmp = if (w as u64) < bdp { "<" } else { "≥" };
                    s += &format!(" {cmp} BDP {} ({rate} × {r})", size(bdp));
                }
                (None, Some(r)) => {
                    let cap = Rate::from_bps(w as f64 * 8.0 / r.secs().max(1e-9));
                    s += &format!(" per RTT {r} caps the rate at {cap}");
                    // Web100's reading: a window that stays small is a small buffer; goodput far
                    // below what even that window allows means it is often closed — the
                    // receiving application does not read fast enough.
                    if let Some(g) = goodput.filter(|g| g.bps() < cap.bps() / 4.0) {
                        s += &format!(
                            "; goodput {g} is far lower: the receiver reads slowly (window often closed)"
                        );
                    }
                }
                _ => {}
            }
            s
        }
        Limit::SendBuffer => {
            let mut s = match b.skmem {
                Some(m) => format!(
                    "send buffer {} holds {} queued",
                    size(m.sndbuf as u64),
                    size(m.wmem_queued as u64)
                ),
                None => "the send buffer is full".into(),
            };
            if let Some(c) = snap.cwnd_bytes {
                s += &format!(", cwnd {} could carry more", size(c));
            }
            s
        }
        Limit::Network => {
            let mut s = match snap.cwnd_bytes {
                Some(c) => format!("cwnd {}", size(c)),
                None => "cwnd full".into(),
            };
            if let (Some(r), Some(m)) = (rtt, snap.min_rtt_s) {
                s += &format!(", RTT {r} (min {m})");
            }
            if let Some(ca) = i.ca_state.filter(|&c| c != 0) {
                s += &format!(", in {}", tcptune_kernel::tcp_info::ca_state_name(ca));
            }
            s
        }
        Limit::Application => match i.notsent_bytes {
            Some(n) => format!(
                "nothing to send most of the time ({} unsent now)",
                size(n as u64)
            ),
            None => "nothing to send most of the time".into(),
        },
        _ => String::new(),
    }
}

/// The sender's congestion window is at least twice the receiver's advertised window and the
/// sender has (nearly) that whole window in flight: the receiver's window is the limit, whatever
/// the chronographs say.
fn window_far_below_cwnd(b: &Sample) -> Option<String> {
    let i = &b.info;
    let mss = u64::from(i.snd_mss?.max(1));
    let cwnd = u64::from(i.snd_cwnd?) * mss;
    let wnd = u64::from(i.snd_wnd?);
    let in_flight = u64::from(i.unacked?) * mss;
    (wnd > 0 && cwnd >= 2 * wnd && in_flight * 4 >= wnd * 3).then(|| {
        format!(
            "cwnd {} is {:.0}× the receive window {} it keeps full",
            size(cwnd),
            cwnd as f64 / wnd as f64,
            size(wnd)
        )
    })
}

/// Whether sample `b` shows a sender held back by its send buffer rather than by cwnd: the
/// buffer is (nearly) full, nothing written waits to be sent, and well under a cwnd (and under
/// the peer's window) of data is in flight. Returns the evidence.
fn send_buffer_full(b: &Sample) -> Option<String> {
    let m = b.skmem?;
    let i = &b.info;
    let cwnd = i.snd_cwnd?;
    let mss = i.snd_mss?.max(1);
    let in_flight = (i.unacked? + i.retrans.unwrap_or(0))
        .saturating_sub(i.sacked.unwrap_or(0) + i.lost.unwrap_or(0));
    let full = m.sndbuf > 0 && m.wmem_queued as u64 * 4 >= m.sndbuf as u64 * 3;
    let nothing_waits = i.notsent_bytes? < mss;
    let room_in_cwnd = in_flight > 0 && (in_flight as u64) * 4 < cwnd as u64 * 3;
    let room_in_peer_window = i
        .snd_wnd
        .is_none_or(|w| w as u64 > (in_flight as u64 + 2) * mss as u64);
    (full && nothing_waits && room_in_cwnd && room_in_peer_window).then(|| {
        format!(
            "send buffer {} full ({} queued) with {in_flight} of cwnd {cwnd} segments in flight",
            size(m.sndbuf as u64),
            size(m.wmem_queued as u64)
        )
    })
}

/// The verdict over the interval from `a` to `b` (or over the connection's life when `a` is
/// `None`).
pub fn verdict(a: Option<&Sample>, b: &Sample, ctx: &Context) -> Verdict {
    verdict_with(a, b, &snapshot(&b.info), ctx)
}

/// [`verdict`] with the snapshot of `b` already computed (saves recomputing it per row).
pub fn verdict_with(a: Option<&Sample>, b: &Sample, snap: &Snapshot, ctx: &Context) -> Verdict {
    let (shares, over, moved_out, moved_in, goodput) = match a {
        Some(a) => {
            let iv = interval(a, b);
            let out = delta(a.info.bytes_sent, b.info.bytes_sent).unwrap_or(0);
            let inn = delta(a.info.bytes_received, b.info.bytes_received).unwrap_or(0);
            let over = format!("of the last {}", iv.over_s);
            (iv.shares, over, out, inn, iv.goodput_bps)
        }
        None => (
            snap.lifetime_shares,
            "of its busy time".to_string(),
            b.info.bytes_sent.unwrap_or(0),
            b.info.bytes_received.unwrap_or(0),
            None,
        ),
    };
    if moved_out == 0 {
        let (limit, text) = if moved_in > 0 {
            (
                Limit::Receiving,
                format!(
                    "receiving only ({} in): the sender's side shows what limits it",
                    size(moved_in)
                ),
            )
        } else {
            (Limit::Idle, "idle: no data sent or received".to_string())
        };
        return Verdict {
            limit,
            share: None,
            text,
        };
    }
    let Some(shares) = shares else {
        return Verdict {
            limit: Limit::Unknown,
            share: None,
            text: "unknown: this kernel does not report busy/rwnd/sndbuf time (needs 4.10+)".into(),
        };
    };
    let (mut limit, mut share) = dominant(&shares);
    let mut ev = evidence(limit, b, snap, ctx, goodput);
    if limit == Limit::Network {
        // Either end of the interval will do: one instant can fall between the app's writes.
        if let Some(why) = send_buffer_full(b).or_else(|| a.and_then(send_buffer_full)) {
            // Measured on 6.18: a sender blocked on a 4 KiB SO_SNDBUF across a 20 ms RTT had
            // 46 segments in flight, cwnd 1051 (still growing) and sndbuf_limited 0 — the
            // kernel counted it as cwnd-limited. Socket memory shows the real limit.
            limit = Limit::SendBuffer;
            share += shares.sndbuf;
            ev = why;
        } else if let Some(why) =
            window_far_below_cwnd(b).or_else(|| a.and_then(window_far_below_cwnd))
        {
            // Measured in the lab (6.18, BBR): a receiver with a 32 KiB buffer over 20 ms held
            // the sender to its ~18 KiB window while cwnd was 62 KiB, yet rwnd_limited stayed
            // near 0: the pacing timer ends each send before the window test, so the kernel
            // books the time as busy. Web100's criterion applies: cwnd far above the window.
            limit = Limit::ReceiverWindow;
            share += shares.rwnd;
            ev = why;
        }
    }
    let text = if ev.is_empty() {
        format!("{} {} {over}", limit.label(), pct(share))
    } else {
        format!("{} {} {over}: {ev}", limit.label(), pct(share))
    };
    Verdict {
        limit,
        share: Some(share),
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> TcpInfo {
        TcpInfo {
            len: 280,
            state: Some(1),
            options: Some(7),
            snd_wscale: Some(7),
            rcv_wscale: Some(9),
            snd_mss: Some(1448),
            snd_cwnd: Some(100),
            rtt_us: Some(20_000),
            min_rtt_us: Some(10_000),
            snd_wnd: Some(65536),
            bytes_sent: Some(0),
            bytes_acked: Some(0),
            bytes_received: Some(0),
            bytes_retrans: Some(0),
            total_retrans: Some(0),
            data_segs_out: Some(0),
            busy_time_us: Some(0),
            rwnd_limited_us: Some(0),
            sndbuf_limited_us: Some(0),
            ..TcpInfo::default()
        }
    }

    fn sample(at_ms: u64, f: impl FnOnce(&mut TcpInfo)) -> Sample {
        let mut i = info();
        f(&mut i);
        Sample {
            at_s: Dur::from_millis(at_ms),
            info: i,
            skmem: None,
        }
    }

    #[test]
    fn a_window_far_below_cwnd_is_the_limit_even_when_pacing_hides_rwnd_time() {
        // BBR's pacing: all busy time booked as network, none as rwnd-limited; but cwnd is
        // 100 segments (145 KiB) against a 32 KiB window that the sender keeps full.
        let a = sample(1000, |i| i.snd_wnd = Some(32768));
        let b = sample(2000, |i| {
            i.snd_wnd = Some(32768);
            i.unacked = Some(22);
            i.bytes_sent = Some(2_000_000);
            i.bytes_acked = Some(1_900_000);
            i.busy_time_us = Some(1_000_000);
        });
        let v = verdict(Some(&a), &b, &Context::default());
        assert_eq!(v.limit, Limit::ReceiverWindow, "{}", v.text);
        assert!(
            v.text
                .contains("cwnd 141 KiB is 4× the receive window 32 KiB"),
            "{}",
            v.text
        );
        // The same, with the window not kept full (an application pause): network, not rwnd.
        let c = sample(2000, |i| {
            i.snd_wnd = Some(32768);
            i.unacked = Some(5);
            i.bytes_sent = Some(2_000_000);
            i.busy_time_us = Some(1_000_000);
        });
        assert_eq!(
            verdict(Some(&a), &c, &Context::default()).limit,
            Limit::Network
        );
    }

    #[test]
    fn receiver_window_limited_with_bdp_evidence() {
        let a = sample(1000, |_| {});
        let b = sample(6000, |i| {
            i.bytes_sent = Some(6_000_000);
            i.bytes_acked = Some(5_000_000);
            i.busy_time_us = Some(5_000_000);
            i.rwnd_limited_us = Some(4_650_000);
        });
        let iv = interval(&a, &b);
        assert_eq!(iv.over_s, Dur::from_millis(5000));
        assert!((iv.goodput_bps.unwrap().bps() - 8e6).abs() < 1.0);
        let s = iv.shares.unwrap();
        assert!((s.rwnd - 0.93).abs() < 1e-9);
        assert!((s.network - 0.07).abs() < 1e-9);
        assert_eq!(s.application, Some(0.0));
        let ctx = Context {
            path_rate: Some("200mbit".parse().unwrap()),
        };
        let v = verdict(Some(&a), &b, &ctx);
        assert_eq!(v.limit, Limit::ReceiverWindow);
        // BDP at 200 Mbit/s × min RTT 10 ms = 250 000 B.
        assert_eq!(
            v.text,
            "receiver-window limited 93% of the last 5 s: its window 64 KiB < BDP 244 KiB (200 Mbit/s × 10 ms)"
        );
    }

    #[test]
    fn idle_time_is_the_applications_share() {
        let a = sample(0, |_| {});
        let b = sample(2000, |i| {
            i.bytes_sent = Some(20_000);
            i.bytes_acked = Some(20_000);
            i.busy_time_us = Some(100_000);
        });
        let v = verdict(Some(&a), &b, &Context::default());
        assert_eq!(v.limit, Limit::Application);
        assert!((v.share.unwrap() - 0.95).abs() < 1e-9);
        assert!(v
            .text
            .starts_with("application limited 95% of the last 2 s"));
    }

    #[test]
    fn send_buffer_and_network() {
        let a = sample(0, |_| {});
        let b = sample(1000, |i| {
            i.bytes_sent = Some(1);
            i.busy_time_us = Some(1_000_000);
            i.sndbuf_limited_us = Some(700_000);
        });
        let mut b2 = b.clone();
        b2.skmem = Some(SkMemInfo {
            sndbuf: 16384,
            wmem_queued: 16000,
            ..SkMemInfo::default()
        });
        let v = verdict(Some(&a), &b2, &Context::default());
        assert_eq!(v.limit, Limit::SendBuffer);
        assert!(v.text.contains("send buffer 16 KiB"), "{}", v.text);
        let b3 = sample(1000, |i| {
            i.bytes_sent = Some(1);
            i.busy_time_us = Some(1_000_000);
            i.ca_state = Some(3);
        });
        let v = verdict(Some(&a), &b3, &Context::default());
        assert_eq!(v.limit, Limit::Network);
        assert!(v.text.contains("in recovery"), "{}", v.text);
    }

    #[test]
    fn full_send_buffer_with_room_in_cwnd_is_send_buffer_limited() {
        // The kernel called all of this busy time "network" (sndbuf_limited 0), but 46 of
        // 1051 segments are in flight and the 8 KiB buffer is full: numbers from a 6.18 run.
        let a = sample(0, |_| {});
        let mut b = sample(1000, |i| {
            i.bytes_sent = Some(3_000_000);
            i.busy_time_us = Some(1_000_000);
            i.snd_cwnd = Some(1051);
            i.unacked = Some(46);
            i.notsent_bytes = Some(0);
            i.snd_wnd = Some(3_000_000);
        });
        b.skmem = Some(SkMemInfo {
            sndbuf: 8192,
            wmem_queued: 67200,
            ..SkMemInfo::default()
        });
        let v = verdict(Some(&a), &b, &Context::default());
        assert_eq!(v.limit, Limit::SendBuffer, "{}", v.text);
        assert_eq!(
            v.text,
            "send-buffer limited 100% of the last 1 s: send buffer 8 KiB full (65.6 KiB queued) with 46 of cwnd 1051 segments in flight"
        );
        // The same sample with cwnd nearly used up stays network-limited.
        b.info.snd_cwnd = Some(50);
        assert_eq!(
            verdict(Some(&a), &b, &Context::default()).limit,
            Limit::Network
        );
        // And with a half-empty buffer too.
        b.info.snd_cwnd = Some(1051);
        b.skmem.as_mut().unwrap().wmem_queued = 2000;
        assert_eq!(
            verdict(Some(&a), &b, &Context::default()).limit,
            Limit::Network
        );
    }

    #[test]
    fn receiver_only_and_idle_and_old_kernels() {
        let a = sample(0, |_| {});
        let b = sample(1000, |i| i.bytes_received = Some(5000));
        assert_eq!(
            verdict(Some(&a), &b, &Context::default()).limit,
            Limit::Receiving
        );
        assert_eq!(
            verdict(Some(&a), &a, &Context::default()).limit,
            Limit::Idle
        );
        let mut old = sample(1000, |i| i.bytes_sent = Some(10));
        old.info.busy_time_us = None;
        assert_eq!(
            verdict(None, &old, &Context::default()).limit,
            Limit::Unknown
        );
    }

    #[test]
    fn snapshot_figures() {
        let s = snapshot(
            &sample(0, |i| {
                i.bytes_sent = Some(1000);
                i.bytes_retrans = Some(10);
            })
            .info,
        );
        assert_eq!(s.rtt_inflation, Some(2.0));
        assert_eq!(s.cwnd_bytes, Some(144_800));
        // min(cwnd 144800, window 65536) per 20 ms.
        assert!((s.window_rate_bps.unwrap().bps() - 65536.0 * 8.0 / 0.02).abs() < 1.0);
        assert_eq!(s.retrans_ratio, Some(0.01));
        assert_eq!(s.negotiated.sack, Some(true));
        assert_eq!(s.negotiated.ecn, Some(false));
        assert_eq!(size(65536), "64 KiB");
    }
}
