//! Records into [`TraceEvent`]s: each tcp event's fields found through its format, the socket
//! of events without a cookie (tcp_retransmit_skb, tcp_cong_state_set) found by its address,
//! the per-connection cap, and the in-kernel filter expressions.

use std::collections::HashMap;

use super::event::{TraceEvent, TraceFilter, TraceKind};
use super::format::{EventFormat, Field, FormatError};

/// The events traced, as (tracefs name, whether tracing needs it).
pub const EVENTS: [(&str, bool); 4] = [
    ("tcp_probe", true),
    ("tcp_retransmit_skb", false),
    ("tcp_cong_state_set", false),
    ("tcp_rcvbuf_grow", false),
];

fn read(rec: &[u8], f: &Field) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = rec.get(f.offset..f.offset + f.size) {
        w[..s.len()].copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

/// Which event a record is, with the fields it is decoded from.
#[derive(Debug, Clone)]
enum Layout {
    Probe {
        data_len: Field,
        snd_nxt: Field,
        snd_una: Field,
        snd_cwnd: Field,
        ssthresh: Field,
        snd_wnd: Field,
        srtt: Field,
        rcv_wnd: Field,
    },
    Retransmit {
        state: Field,
    },
    CongState {
        cong_state: Field,
    },
    RcvbufGrow {
        rcvbuf: Field,
        rcv_wnd: Field,
        window_clamp: Field,
        rtt_us: Field,
    },
}

/// One event's decoder: its layout and the socket's identity fields.
#[derive(Debug, Clone)]
struct Decoder {
    layout: Layout,
    skaddr: Field,
    sport: Field,
    dport: Field,
    cookie: Option<Field>,
}

impl Decoder {
    fn new(f: &EventFormat) -> Result<Decoder, FormatError> {
        let g = |n: &str| f.field(n, 4);
        let layout = match f.name.as_str() {
            "tcp_probe" => Layout::Probe {
                data_len: f.field("data_len", 2)?,
                snd_nxt: g("snd_nxt")?,
                snd_una: g("snd_una")?,
                snd_cwnd: g("snd_cwnd")?,
                ssthresh: g("ssthresh")?,
                snd_wnd: g("snd_wnd")?,
                srtt: g("srtt")?,
                rcv_wnd: g("rcv_wnd")?,
            },
            "tcp_retransmit_skb" => Layout::Retransmit { state: g("state")? },
            "tcp_cong_state_set" => Layout::CongState {
                cong_state: f.field("cong_state", 1)?,
            },
            "tcp_rcvbuf_grow" => Layout::RcvbufGrow {
                rcvbuf: g("rcvbuf")?,
                rcv_wnd: g("rcv_wnd")?,
                window_clamp: g("window_clamp")?,
                rtt_us: g("rtt_us")?,
            },
            other => {
                return Err(FormatError::Missing {
                    event: other.to_string(),
                    what: "a decoder in tcptune".into(),
                })
            }
        };
        Ok(Decoder {
            layout,
            skaddr: f.field("skaddr", 8)?,
            sport: f.field("sport", 2)?,
            dport: f.field("dport", 2)?,
            cookie: f.field("sock_cookie", 8).ok(),
        })
    }

    fn kind(&self, r: &[u8]) -> TraceKind {
        let u32_ = |f: &Field| read(r, f) as u32;
        match &self.layout {
            Layout::Probe {
                data_len,
                snd_nxt,
                snd_una,
                snd_cwnd,
                ssthresh,
                snd_wnd,
                srtt,
                rcv_wnd,
            } => TraceKind::Ack {
                snd_una: u32_(snd_una),
                snd_nxt: u32_(snd_nxt),
                cwnd_segs: u32_(snd_cwnd),
                ssthresh_segs: u32_(ssthresh),
                snd_wnd_bytes: u32_(snd_wnd),
                srtt_us: u32_(srtt),
                rcv_wnd_bytes: u32_(rcv_wnd),
                data_len: read(r, data_len) as u16,
            },
            Layout::Retransmit { state } => TraceKind::Retransmit {
                state: read(r, state) as u8,
            },
            Layout::CongState { cong_state } => TraceKind::CongState {
                ca_state: read(r, cong_state) as u8,
            },
            Layout::RcvbufGrow {
                rcvbuf,
                rcv_wnd,
                window_clamp,
                rtt_us,
            } => TraceKind::RcvbufGrow {
                rcvbuf: u32_(rcvbuf),
                rcv_wnd: u32_(rcv_wnd),
                window_clamp: u32_(window_clamp),
                rtt_us: u32_(rtt_us),
            },
        }
    }
}

/// Socket addresses remembered, beyond which the map starts afresh (a bound on memory).
const MAX_SOCKETS: usize = 65_536;

/// Decodes records of the events it was given formats for (by `common_type`).
#[derive(Debug, Clone, Default)]
pub struct Decoders {
    by_id: HashMap<u16, Decoder>,
    common_type: Option<Field>,
    /// Socket address → (cookie, local port, remote port), learnt from events that carry the
    /// cookie, to name the socket of those that do not. The ports guard against an address
    /// reused by a later socket.
    sockets: HashMap<u64, (u64, u16, u16)>,
}

impl Decoders {
    /// Adds an event's decoder from its format.
    pub fn add(&mut self, f: &EventFormat) -> Result<(), FormatError> {
        self.common_type = Some(f.field("common_type", 2)?);
        self.by_id.insert(f.id, Decoder::new(f)?);
        Ok(())
    }

    /// Decodes one record into the event and its socket's (local, remote) ports; `None` for
    /// an event it does not know. Events without a cookie get the one last seen on the same
    /// socket address with the same ports, or 0 when there is none (a retransmission before
    /// the socket's first incoming segment).
    pub fn decode(&mut self, ts: u64, rec: &[u8]) -> Option<(TraceEvent, [u16; 2])> {
        let id = read(rec, self.common_type.as_ref()?) as u16;
        let d = self.by_id.get(&id)?;
        let (sk, sport, dport) = (
            read(rec, &d.skaddr),
            read(rec, &d.sport) as u16,
            read(rec, &d.dport) as u16,
        );
        let cookie = match &d.cookie {
            Some(c) => {
                let cookie = read(rec, c);
                if self.sockets.len() >= MAX_SOCKETS && !self.sockets.contains_key(&sk) {
                    self.sockets.clear();
                }
                self.sockets.insert(sk, (cookie, sport, dport));
                cookie
            }
            None => match self.sockets.get(&sk) {
                Some(&(c, s, p)) if (s, p) == (sport, dport) => c,
                _ => 0,
            },
        };
        let e = TraceEvent {
            t_ns: ts,
            cookie,
            kind: d.kind(rec),
        };
        Some((e, [sport, dport]))
    }
}

/// Whether an event is one the filter asks for (the kernel's filter is the first pass; this
/// one also covers events without a cookie field, which the kernel cannot filter by cookie).
pub fn wanted(filter: &TraceFilter, e: &TraceEvent, ports: [u16; 2]) -> bool {
    (filter.ports.is_empty() && filter.cookies.is_empty())
        || filter.cookies.contains(&e.cookie)
        || ports.iter().any(|p| filter.ports.contains(p))
}

/// Moves the events of `pending` stamped at or before `horizon` to `out`, in time order,
/// keeping the newer ones. Each CPU's events are in order; the CPUs are merged by a stable
/// sort. A CPU drained early in a read may still get events older than those of a CPU drained
/// later, so only events older than the horizon are final.
pub fn release(pending: &mut Vec<TraceEvent>, horizon: u64, out: &mut Vec<TraceEvent>) {
    pending.sort_by_key(|e| e.t_ns);
    let ready = pending.partition_point(|e| e.t_ns <= horizon);
    out.extend(pending.drain(..ready));
}

/// The in-kernel filter of one event: its ports (either end) or its cookies. The tcp events
/// store ports in host order (`ntohs` in the tracepoints' assignments), so the numbers compare
/// as written. An event without a cookie field is not filtered in the kernel when cookies are
/// asked for (its socket is known only after decoding; such events are rare). "0" clears.
pub fn filter_expr(filter: &TraceFilter, has_cookie: bool) -> String {
    if !has_cookie && !filter.cookies.is_empty() {
        return "0".to_string();
    }
    let mut terms: Vec<String> = filter
        .ports
        .iter()
        .map(|p| format!("sport == {p} || dport == {p}"))
        .collect();
    if has_cookie {
        terms.extend(filter.cookies.iter().map(|c| format!("sock_cookie == {c}")));
    }
    if terms.is_empty() {
        "0".to_string()
    } else {
        terms.join(" || ")
    }
}

/// The per-connection cap: at most `per_sec` events of a socket in each second of trace time
/// (0: no cap); the rest are dropped and counted.
#[derive(Debug, Clone, Default)]
pub struct Cap {
    per_sec: u32,
    /// cookie → (second, events passed in it).
    seen: HashMap<u64, (u64, u32)>,
    /// Events dropped by the cap so far.
    pub dropped: u64,
}

impl Cap {
    /// A cap of `per_sec` events per socket per second of trace time (0: no cap).
    pub fn new(per_sec: u32) -> Cap {
        Cap {
            per_sec,
            ..Cap::default()
        }
    }

    /// Whether the event passes (and counts it).
    pub fn pass(&mut self, e: &TraceEvent) -> bool {
        if self.per_sec == 0 {
            return true;
        }
        let sec = e.t_ns / 1_000_000_000;
        if self.seen.len() >= MAX_SOCKETS && !self.seen.contains_key(&e.cookie) {
            self.seen.retain(|_, (s, _)| *s >= sec);
        }
        let slot = self.seen.entry(e.cookie).or_insert((sec, 0));
        if slot.0 != sec {
            *slot = (sec, 0);
        }
        if slot.1 >= self.per_sec {
            self.dropped += 1;
            return false;
        }
        slot.1 += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(name: &str) -> EventFormat {
        let text = match name {
            "tcp_probe" => include_str!("../../../../fixtures/kernel/6.18/trace/tcp_probe.format"),
            "tcp_retransmit_skb" => {
                include_str!("../../../../fixtures/kernel/6.18/trace/tcp_retransmit_skb.format")
            }
            "tcp_cong_state_set" => {
                include_str!("../../../../fixtures/kernel/6.18/trace/tcp_cong_state_set.format")
            }
            _ => include_str!("../../../../fixtures/kernel/6.18/trace/tcp_rcvbuf_grow.format"),
        };
        EventFormat::parse(text).unwrap()
    }

    fn put(rec: &mut [u8], f: &EventFormat, name: &str, v: u64) {
        let fl = &f.fields[name];
        rec[fl.offset..fl.offset + fl.size].copy_from_slice(&v.to_le_bytes()[..fl.size]);
    }

    fn all() -> Decoders {
        let mut d = Decoders::default();
        for (e, _) in EVENTS {
            d.add(&fmt(e)).unwrap();
        }
        d
    }

    #[test]
    fn decodes_a_probe_record_by_its_format() {
        let f = fmt("tcp_probe");
        let mut rec = vec![0u8; 136];
        for (n, v) in [
            ("common_type", u64::from(f.id)),
            ("sport", 40000),
            ("dport", 5201),
            ("data_len", 0),
            ("snd_nxt", 0x1000_0000),
            ("snd_una", 0x0fff_0000),
            ("snd_cwnd", 73),
            ("ssthresh", 0x7fff_ffff),
            ("snd_wnd", 3_000_000),
            ("srtt", 20_512),
            ("rcv_wnd", 65_483),
            ("sock_cookie", 0x4321),
            ("skaddr", 0xffff_8880_1234_5000),
        ] {
            put(&mut rec, &f, n, v);
        }
        let (e, ports) = all().decode(77, &rec).unwrap();
        assert_eq!(ports, [40000, 5201]);
        assert_eq!(
            e,
            TraceEvent {
                t_ns: 77,
                cookie: 0x4321,
                kind: TraceKind::Ack {
                    snd_una: 0x0fff_0000,
                    snd_nxt: 0x1000_0000,
                    cwnd_segs: 73,
                    ssthresh_segs: 0x7fff_ffff,
                    snd_wnd_bytes: 3_000_000,
                    srtt_us: 20_512,
                    rcv_wnd_bytes: 65_483,
                    data_len: 0,
                }
            }
        );
    }

    #[test]
    fn retransmit_takes_the_cookie_of_its_socket_address_and_ports() {
        let mut d = all();
        let p = fmt("tcp_probe");
        let mut probe = vec![0u8; 136];
        put(&mut probe, &p, "common_type", u64::from(p.id));
        put(&mut probe, &p, "skaddr", 0xabc0);
        put(&mut probe, &p, "sock_cookie", 99);
        put(&mut probe, &p, "sport", 1);
        put(&mut probe, &p, "dport", 2);
        d.decode(1, &probe).unwrap();
        let r = fmt("tcp_retransmit_skb");
        let mut rt = vec![0u8; 80];
        put(&mut rt, &r, "common_type", u64::from(r.id));
        put(&mut rt, &r, "skaddr", 0xabc0);
        put(&mut rt, &r, "state", 1);
        put(&mut rt, &r, "sport", 1);
        put(&mut rt, &r, "dport", 2);
        let (e, _) = d.decode(2, &rt).unwrap();
        assert_eq!((e.cookie, e.kind), (99, TraceKind::Retransmit { state: 1 }));
        // The same address with other ports is another socket: unknown.
        put(&mut rt, &r, "dport", 3);
        assert_eq!(d.decode(3, &rt).unwrap().0.cookie, 0);
        let c = fmt("tcp_cong_state_set");
        let mut cs = vec![0u8; 64];
        put(&mut cs, &c, "common_type", u64::from(c.id));
        put(&mut cs, &c, "skaddr", 0xabc0);
        put(&mut cs, &c, "sport", 1);
        put(&mut cs, &c, "dport", 2);
        put(&mut cs, &c, "cong_state", 3);
        let (e, ports) = d.decode(4, &cs).unwrap();
        assert_eq!(ports, [1, 2]);
        assert_eq!(
            (e.cookie, e.kind),
            (99, TraceKind::CongState { ca_state: 3 })
        );
        let mut other = vec![0u8; 64];
        other[..2].copy_from_slice(&9999u16.to_le_bytes());
        assert!(d.decode(5, &other).is_none(), "an unknown event id");
    }

    #[test]
    fn filter_expressions() {
        let f = TraceFilter {
            ports: vec![5201, 80],
            cookies: vec![7],
            max_events_per_conn_per_sec: 0,
        };
        assert_eq!(
            filter_expr(&f, true),
            "sport == 5201 || dport == 5201 || sport == 80 || dport == 80 || sock_cookie == 7"
        );
        assert_eq!(
            filter_expr(&f, false),
            "0",
            "cookies asked: filtered after decoding"
        );
        let ports_only = TraceFilter {
            cookies: vec![],
            ..f.clone()
        };
        assert_eq!(
            filter_expr(&ports_only, false),
            "sport == 5201 || dport == 5201 || sport == 80 || dport == 80"
        );
        let e = TraceEvent {
            t_ns: 0,
            cookie: 7,
            kind: TraceKind::Retransmit { state: 1 },
        };
        assert!(wanted(&f, &e, [1, 2]), "by cookie");
        assert!(wanted(&ports_only, &e, [80, 2]), "by port");
        assert!(!wanted(&ports_only, &e, [1, 2]));
        let none = TraceFilter {
            ports: vec![],
            cookies: vec![],
            max_events_per_conn_per_sec: 0,
        };
        assert_eq!(filter_expr(&none, true), "0");
    }

    #[test]
    fn release_merges_cpus_and_holds_what_is_newer_than_the_horizon() {
        let ev = |t_ns| TraceEvent {
            t_ns,
            cookie: 1,
            kind: TraceKind::CongState { ca_state: 0 },
        };
        let times = |v: &[TraceEvent]| v.iter().map(|e| e.t_ns).collect::<Vec<_>>();
        // CPU 0 drained first (10, 30), then CPU 1 (20, 40, 60); 50 reaches CPU 0 later.
        let mut pending = vec![ev(10), ev(30), ev(20), ev(40), ev(60)];
        let mut out = Vec::new();
        release(&mut pending, 45, &mut out);
        assert_eq!(
            (times(&out), times(&pending)),
            (vec![10, 20, 30, 40], vec![60])
        );
        pending.push(ev(50));
        release(&mut pending, 100, &mut out);
        assert_eq!(times(&out), vec![10, 20, 30, 40, 50, 60]);
        assert!(pending.is_empty());
    }

    #[test]
    fn cap_counts_per_connection_per_second() {
        let mut cap = Cap::new(2);
        let ev = |t_ns, cookie| TraceEvent {
            t_ns,
            cookie,
            kind: TraceKind::CongState { ca_state: 0 },
        };
        let passed: Vec<bool> = [(1, 1), (2, 1), (3, 1), (4, 2), (1_000_000_001, 1)]
            .iter()
            .map(|&(t, c)| cap.pass(&ev(t, c)))
            .collect();
        assert_eq!(passed, vec![true, true, false, true, true]);
        assert_eq!(cap.dropped, 1);
        let mut none = Cap::new(0);
        assert!((0..1000).all(|i| none.pass(&ev(i, 1))));
    }
}
