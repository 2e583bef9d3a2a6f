//! The live core, sans-IO with time passed in: sock_diag dumps and trace events in, the
//! [`Update`]s the page shows out. Each dump becomes the table (rows with the engine's verdict
//! over the interval since the previous dump), a polled point per kept connection (rates,
//! windows, RTTs and the triage shares of `tcptune_diagnose::interval`), events from counter
//! deltas (retransmissions, RTOs, congestion-state changes, zero windows) and triggers. Trace
//! events add per-ACK points and the events the tracepoints see as they happen. No threshold
//! here judges a connection: the verdict and fixes are the engine's.

use std::collections::{HashMap, HashSet};

use tcptune_conns::conn::Conn;
use tcptune_diagnose::engine::{self, Observations, Series};
use tcptune_diagnose::{Context, Sample};
use tcptune_kernel::tcp_info::ca_state_name;
use tcptune_kernel::trace::{TraceEvent, TraceKind};
use tcptune_kernel::{DiagSocket, TcpInfo};
use tcptune_model::Dur;

use crate::update::{AckPoint, Detail, Event, EventKind, Point, Row, Trigger, Update};

/// Bounds of the live core.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Rows the table holds at most (highest rate first).
    pub rows: usize,
    /// Connections that get points, events and triggers at most (the table's first ones, plus
    /// those being watched).
    pub conns: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            rows: 500,
            conns: 64,
        }
    }
}

/// What the core remembers of one connection between dumps.
#[derive(Debug, Default)]
struct ConnState {
    ca_state: Option<u8>,
    zero_window: bool,
    cwnd_bytes: Option<u64>,
    mss: Option<u32>,
    /// The last traced snd_una and its unwrapped offset from the first one.
    una: Option<(u32, u64)>,
}

/// The core.
pub struct Scope {
    ctx: Context,
    limits: Limits,
    /// CLOCK_MONOTONIC nanoseconds of the view's start (trace events carry that clock).
    origin_ns: u64,
    /// Whether trace events report retransmissions and congestion states (else counters do).
    traced: bool,
    /// Every connection's latest sample, for the next dump's intervals.
    prev: HashMap<u64, Sample>,
    /// What triggers and events need of the kept connections.
    conns: HashMap<u64, ConnState>,
}

fn secs(origin_ns: u64, t_ns: u64) -> f64 {
    t_ns.saturating_sub(origin_ns) as f64 / 1e9
}

fn ms(us: Option<u32>) -> Option<f64> {
    us.map(|u| f64::from(u) / 1000.0)
}

/// The kernel's packets-in-flight rule (tcp_packets_in_flight) in bytes.
fn inflight(i: &TcpInfo) -> Option<u64> {
    let segs = (i.unacked? + i.retrans?).saturating_sub(i.sacked? + i.lost?);
    Some(u64::from(segs) * u64::from(i.snd_mss?))
}

/// A polled point from a row the engine has judged and its sample.
fn point(t_s: f64, c: &Conn, i: &TcpInfo) -> Point {
    let iv = c.interval.as_deref();
    Point {
        t_s,
        goodput_bps: iv.and_then(|v| v.goodput_bps).map(|r| r.bps()),
        delivery_rate_bps: i.delivery_rate_bytes_per_s.map(|r| r as f64 * 8.0),
        app_limited: i.delivery_rate_app_limited,
        cwnd_bytes: i.cwnd_bytes(),
        snd_wnd_bytes: i.snd_wnd,
        ssthresh_bytes: i
            .ssthresh()
            .and_then(|s| Some(u64::from(s) * u64::from(i.snd_mss?))),
        inflight_bytes: inflight(i),
        srtt_ms: ms(i.rtt_us),
        min_rtt_ms: ms(i.min_rtt_us),
        rttvar_ms: ms(i.rttvar_us),
        acked_bytes: i.bytes_acked,
        sent_bytes: i.bytes_sent,
        shares: iv.and_then(|v| v.shares),
    }
}

fn row(c: &Conn, state_num: u8) -> Row {
    Row {
        id: c.cookie.to_string(),
        netns: c.netns.clone(),
        label: None,
        state_num,
        state: c.state.to_string(),
        local: c.local,
        remote: c.remote,
        congestion: c.congestion.as_ref().map(ToString::to_string),
        rate_bps: c.sort_rate(),
        srtt_ms: c
            .snapshot
            .as_ref()
            .and_then(|s| s.rtt_s)
            .map(|d| d.secs() * 1e3),
        limit: c.verdict.limit,
        verdict: c.verdict.text.clone(),
    }
}

fn event(t_s: f64, kind: EventKind, count: u64, text: String) -> Event {
    Event {
        t_s,
        kind,
        count,
        text,
    }
}

impl Scope {
    /// A core judging with `ctx`, whose view started at `origin_ns` (CLOCK_MONOTONIC);
    /// `traced` says trace events will report retransmissions and congestion states.
    pub fn new(ctx: Context, limits: Limits, origin_ns: u64, traced: bool) -> Scope {
        Scope {
            ctx,
            limits,
            origin_ns,
            traced,
            prev: HashMap::new(),
            conns: HashMap::new(),
        }
    }

    /// Whether tracing feeds it.
    pub fn traced(&self) -> bool {
        self.traced
    }

    /// The cookies that get points (for a tracer's in-kernel filter).
    pub fn kept(&self) -> Vec<u64> {
        self.conns.keys().copied().collect()
    }

    /// One dump of every namespace, taken at `now_ns`; `watched` are the connections a page
    /// shows (they get the engine's full diagnosis each time).
    pub fn dump(
        &mut self,
        now_ns: u64,
        dumps: Vec<(Option<String>, Vec<DiagSocket>)>,
        watched: &HashSet<u64>,
    ) -> Vec<Update> {
        let t_s = secs(self.origin_ns, now_ns);
        let at = Dur::from_nanos(now_ns.saturating_sub(self.origin_ns));
        let mut judged = Vec::new();
        let prev = std::mem::take(&mut self.prev);
        for (netns, socks) in dumps {
            for s in socks {
                let state_num = s.state;
                let before = prev.get(&s.cookie);
                let (mut c, sample) = Conn::new(s, at, before, &self.ctx, false);
                c.netns.clone_from(&netns);
                judged.push((c, state_num, sample));
            }
        }
        judged.sort_by_cached_key(|(c, _, _)| c.sort_key());
        let mut out = Vec::new();
        let rows = judged
            .iter()
            .take(self.limits.rows)
            .map(|(c, n, _)| row(c, *n))
            .collect();
        out.push(Update::Rows { t_s, rows });
        let mut seen = HashSet::new();
        for (i, (c, _, sample)) in judged.iter().enumerate() {
            let Some(sample) = sample else { continue };
            if i >= self.limits.conns && !watched.contains(&c.cookie) {
                continue;
            }
            seen.insert(c.cookie);
            let before = prev.get(&c.cookie);
            self.one(
                t_s,
                c,
                before,
                sample,
                watched.contains(&c.cookie),
                &mut out,
            );
        }
        let present: HashSet<u64> = judged.iter().map(|(c, _, _)| c.cookie).collect();
        for (c, _, sample) in judged {
            if let Some(s) = sample {
                self.prev.insert(c.cookie, s);
            }
        }
        let gone: Vec<u64> = self
            .conns
            .keys()
            .filter(|k| !seen.contains(k))
            .copied()
            .collect();
        for k in gone {
            self.conns.remove(&k);
            if present.contains(&k) {
                continue; // open, but no longer among the kept ones
            }
            out.push(Update::Closed {
                id: k.to_string(),
                t_s,
            });
        }
        out
    }

    /// A kept connection's point, events, triggers and (when watched) detail.
    fn one(
        &mut self,
        t_s: f64,
        c: &Conn,
        before: Option<&Sample>,
        sample: &Sample,
        watched: bool,
        out: &mut Vec<Update>,
    ) {
        let id = c.cookie.to_string();
        let traced = self.traced;
        let st = self.conns.entry(c.cookie).or_default();
        let i = &sample.info;
        out.push(Update::Point {
            id: id.clone(),
            point: point(t_s, c, i),
        });
        st.mss = i.snd_mss.or(st.mss);
        if let Some(prev) = before {
            let p = &prev.info;
            let d = |a: Option<u32>, b: Option<u32>| {
                u64::from(b.unwrap_or(0).saturating_sub(a.unwrap_or(0)))
            };
            let rto = u64::from(i.total_rto.unwrap_or(0))
                .saturating_sub(u64::from(p.total_rto.unwrap_or(0)));
            if !traced {
                let n = d(p.total_retrans, i.total_retrans);
                if n > 0 {
                    let text =
                        format!("{n} segment{} retransmitted", if n == 1 { "" } else { "s" });
                    out.push(ev(&id, event(t_s, EventKind::Retransmit, n, text)));
                }
            }
            if rto > 0 {
                let text = format!(
                    "{rto} retransmission timeout{}",
                    if rto == 1 { "" } else { "s" }
                );
                out.push(ev(&id, event(t_s, EventKind::Rto, rto, text)));
                out.push(freeze(&id, t_s, Trigger::Rto));
            }
        }
        match i.ca_state {
            Some(ca) if !traced => Self::ca_change(st, &id, t_s, ca, false, out),
            // Traced, the tracepoint reports changes; a poll only gives the first state.
            Some(ca) if st.ca_state.is_none() => st.ca_state = Some(ca),
            _ => {}
        }
        if let Some(w) = i.snd_wnd {
            Self::window(st, &id, t_s, w, out);
        }
        if let Some(cw) = i.cwnd_bytes() {
            Self::cwnd(st, &id, t_s, cw, out);
        }
        if watched {
            let d = self.detail(t_s, before, sample);
            out.push(Update::Detail { id, detail: d });
        }
    }

    /// The engine's diagnosis of the interval (or the life so far), with its fixes.
    fn detail(&self, t_s: f64, prev: Option<&Sample>, cur: &Sample) -> Detail {
        let (series, over) = match prev {
            Some(a) => (
                Series::Two(a, cur),
                format!(
                    "of the last {}",
                    Dur::from_nanos(cur.at_s.nanos().saturating_sub(a.at_s.nanos()))
                ),
            ),
            None => (Series::One(cur), "of its busy time".to_string()),
        };
        let d = engine::diagnose(&Observations::socket(series), &self.ctx, &over);
        Detail {
            t_s,
            limit: d.limit,
            verdict: d.verdict,
            fixes: d
                .recommendations
                .iter()
                .map(|r| match &r.command {
                    Some(cmd) => format!("{}: {} ({cmd})", r.on, r.change),
                    None => format!("{}: {}", r.on, r.change),
                })
                .collect(),
            negotiated: tcptune_diagnose::Negotiated::of(&cur.info),
        }
    }

    fn ca_change(
        st: &mut ConnState,
        id: &str,
        t_s: f64,
        ca: u8,
        traced: bool,
        out: &mut Vec<Update>,
    ) {
        let before = st.ca_state.replace(ca);
        if before.is_none_or(|b| b == ca) {
            return;
        }
        let from = before.map_or("?", ca_state_name);
        let text = format!("{from} → {}", ca_state_name(ca));
        out.push(ev(id, event(t_s, EventKind::CongState, 1, text)));
        // Only the tracepoint sees the loss state as it is entered: that is the RTO. Polled,
        // tcpi_total_rto counts them (above), and a poll may miss a short loss state.
        if traced && ca == 4 {
            out.push(ev(
                id,
                event(
                    t_s,
                    EventKind::Rto,
                    1,
                    "retransmission timeout (loss state)".into(),
                ),
            ));
            out.push(freeze(id, t_s, Trigger::Rto));
        }
    }

    fn window(st: &mut ConnState, id: &str, t_s: f64, w: u32, out: &mut Vec<Update>) {
        let zero = w == 0;
        if zero && !st.zero_window {
            out.push(ev(
                id,
                event(
                    t_s,
                    EventKind::ZeroWindow,
                    1,
                    "the peer advertised a zero window".into(),
                ),
            ));
            out.push(freeze(id, t_s, Trigger::ZeroWindow));
        }
        st.zero_window = zero;
    }

    fn cwnd(st: &mut ConnState, id: &str, t_s: f64, cwnd: u64, out: &mut Vec<Update>) {
        if st
            .cwnd_bytes
            .is_some_and(|before| cwnd > 0 && cwnd * 2 <= before)
        {
            out.push(freeze(id, t_s, Trigger::CwndHalved));
        }
        st.cwnd_bytes = Some(cwnd);
    }

    /// Trace events (any order within a read; each is applied at its own time stamp). Events
    /// of connections the core does not keep are ignored.
    pub fn trace(&mut self, events: &[TraceEvent]) -> Vec<Update> {
        let mut out = Vec::new();
        for e in events {
            let t_s = secs(self.origin_ns, e.t_ns);
            let Some(st) = self.conns.get_mut(&e.cookie) else {
                continue;
            };
            let id = e.cookie.to_string();
            match e.kind {
                TraceKind::Ack {
                    snd_una,
                    snd_nxt,
                    cwnd_segs,
                    ssthresh_segs,
                    snd_wnd_bytes,
                    srtt_us,
                    ..
                } => {
                    let mss = u64::from(st.mss.unwrap_or(1));
                    // Sequence numbers wrap at 2^32; a record from another CPU's buffer that
                    // is older than the last one read does not move snd_una back.
                    let (last, una) = match st.una {
                        Some((last, off)) => match snd_una.wrapping_sub(last) {
                            d if d < 1 << 31 => (snd_una, off + u64::from(d)),
                            _ => (last, off),
                        },
                        None => (snd_una, 0),
                    };
                    st.una = Some((last, una));
                    let cwnd = u64::from(cwnd_segs) * mss;
                    out.push(Update::Ack {
                        id: id.clone(),
                        ack: AckPoint {
                            t_s,
                            una,
                            nxt: una + u64::from(snd_nxt.wrapping_sub(snd_una)),
                            cwnd_bytes: cwnd,
                            ssthresh_bytes: (ssthresh_segs < 0x7fff_ffff)
                                .then(|| u64::from(ssthresh_segs) * mss),
                            snd_wnd_bytes,
                            srtt_ms: f64::from(srtt_us) / 1000.0,
                        },
                    });
                    Self::window(st, &id, t_s, snd_wnd_bytes, &mut out);
                    Self::cwnd(st, &id, t_s, cwnd, &mut out);
                }
                TraceKind::Retransmit { .. } => {
                    out.push(ev(
                        &id,
                        event(
                            t_s,
                            EventKind::Retransmit,
                            1,
                            "segment retransmitted".into(),
                        ),
                    ));
                }
                TraceKind::CongState { ca_state } => {
                    Self::ca_change(st, &id, t_s, ca_state, true, &mut out);
                }
                TraceKind::RcvbufGrow { .. } => {}
            }
        }
        out
    }
}

fn ev(id: &str, event: Event) -> Update {
    Update::Event {
        id: id.to_string(),
        event,
    }
}

fn freeze(id: &str, t_s: f64, trigger: Trigger) -> Update {
    Update::Freeze {
        id: id.to_string(),
        t_s,
        trigger,
    }
}

#[cfg(test)]
#[path = "scope_tests.rs"]
mod tests;
