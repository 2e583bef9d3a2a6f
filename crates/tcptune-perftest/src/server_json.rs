//! One test's iperf3 `-J` document on a server (`iperf3 -s -J`): iperf3's client document
//! seen from the other end. iperf3 prints it when the test ends, before the results are
//! exchanged, so the peer's side of each stream is what this end knows of it: its bytes are
//! zero, its retransmissions, windows, RTTs and congestion control absent. The shapes are the
//! client's (`crate::document`), built with this end as the one that sends where it sends.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;

use serde_json::Value;
use tcptune_iperf3::udp::UdpReceiver;
use tcptune_iperf3::{Direction, Params, Protocol, Results};

use crate::data::StreamOutcome;
use crate::document::{self, Layout, StartFacts};
use crate::server_conn::Conn;
use crate::sock::{self, unmapped};
use crate::test_report::{Connected, End, IntervalReport};
use crate::udp::UdpOutcome;

/// What the control connection tells of a test, for its `start` object.
#[derive(Debug, Clone, Default)]
pub struct ServerFacts {
    /// The client's control connection, as iperf3's `accepted_connection`.
    pub peer: Option<SocketAddr>,
    /// The test's cookie.
    pub cookie: String,
    /// TCP_MAXSEG of the control connection.
    pub tcp_mss_default: u32,
}

impl ServerFacts {
    /// The facts of a test on control connection `ctl` with `cookie`.
    pub fn of(ctl: &TcpStream, cookie: &[u8]) -> ServerFacts {
        ServerFacts {
            peer: ctl.peer_addr().ok().map(unmapped),
            cookie: String::from_utf8_lossy(cookie)
                .trim_end_matches('\0')
                .to_string(),
            tcp_mss_default: sock::get_int(ctl.as_fd(), libc::IPPROTO_TCP, libc::TCP_MAXSEG)
                .map(|v| v.max(0) as u32)
                .unwrap_or(0),
        }
    }
}

/// The document of one test, built as it runs.
pub struct TestJson {
    params: Params,
    conns: Vec<Conn>,
    start: Value,
    intervals: Vec<IntervalReport>,
}

/// Whether this end (the server) sends the test's main direction (the client's `-R`).
fn sends_main(p: &Params) -> bool {
    p.direction == Direction::Reverse
}

impl TestJson {
    /// The `start` object, as the data streams are connected.
    pub fn new(params: &Params, conns: &[Conn], facts: &ServerFacts) -> TestJson {
        let started_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let first = conns.first();
        let start = document::start(
            params,
            StartFacts {
                connected: conns.iter().map(connected).collect(),
                protocol: if params.protocol == Protocol::Udp {
                    "UDP"
                } else {
                    "TCP"
                },
                started_at,
                host: facts.peer.map(|a| a.ip().to_string()).unwrap_or_default(),
                port: facts.peer.map_or(0, |a| a.port()),
                cookie: facts.cookie.clone(),
                tcp_mss_default: facts.tcp_mss_default,
                sndbuf: first.map_or(0, |c| c.sndbuf),
                rcvbuf: first.map_or(0, |c| c.rcvbuf),
            },
        );
        let mut start = serde_json::to_value(start).unwrap_or(Value::Null);
        if let Some(m) = start.as_object_mut() {
            // A server was connected to: iperf3 names the client's end of the control
            // connection.
            if let Some(to) = m.remove("connecting_to") {
                m.insert("accepted_connection".into(), to);
            }
            m.remove("tcp_mss");
        }
        TestJson {
            params: params.clone(),
            conns: conns.to_vec(),
            start,
            intervals: Vec::new(),
        }
    }

    /// An interval report, as the text would print it.
    pub fn interval(&mut self, r: IntervalReport) {
        self.intervals.push(r);
    }

    /// The document of a TCP test that ran `secs`, this end's CPU use `cpu` (user, system,
    /// percent).
    pub fn finish_tcp(&self, outcomes: &[StreamOutcome], secs: f64, cpu: (f64, f64)) -> Value {
        let none = Results::default();
        let sides = outcomes
            .iter()
            .map(|o| {
                let (mut snd, rcv) = document::tcp_sides(o, &none, &[], secs);
                if !o.sends {
                    // The peer's sending figures are not known before the exchange.
                    (snd.retransmits, snd.max_snd_cwnd, snd.max_snd_wnd) = (None, None, None);
                    (snd.max_rtt, snd.min_rtt, snd.mean_rtt) = (None, None, None);
                }
                (snd, rcv)
            })
            .collect();
        let cpu = document::cpu_utilization(cpu.0, cpu.1, &none);
        let mut end = document::tcp_end(
            &self.params,
            sends_main(&self.params),
            outcomes,
            sides,
            &none,
            cpu,
            secs,
        );
        if self.params.direction == Direction::Bidirectional {
            // iperf3 3.12's server names its own algorithm as the sender's in a bidirectional
            // test.
            end.sender_tcp_congestion = outcomes.iter().find_map(|o| o.congestion.clone());
            end.receiver_tcp_congestion = None;
        }
        self.document(Some(end))
    }

    /// The document of a UDP test that ran `secs`; `base`: the counts when `-O`'s seconds
    /// ended.
    pub fn finish_udp(
        &self,
        outcomes: &[UdpOutcome],
        base: Option<&[UdpReceiver]>,
        secs: f64,
        cpu: (f64, f64),
    ) -> Value {
        let none = Results::default();
        let layout = Layout {
            roles: outcomes.iter().map(|o| (o.id, o.sends)).collect(),
            fds: self.conns.iter().map(|c| c.fd).collect(),
            client_sends_main: sends_main(&self.params),
        };
        let cpu = document::cpu_utilization(cpu.0, cpu.1, &none);
        let end = document::udp_end(&self.params, &layout, outcomes, base, &none, cpu, secs);
        self.document(end)
    }

    /// `end` is none when the test's main direction had no stream (an empty `end`, as iperf3's
    /// when nothing ran).
    fn document(&self, end: Option<End>) -> Value {
        let end = end.map_or(Value::Object(Default::default()), |e| {
            serde_json::to_value(e).unwrap_or(Value::Null)
        });
        let mut doc = serde_json::json!({
            "start": self.start,
            "intervals": self.intervals,
            "end": end,
        });
        crate::cjson::iperf3_keys(&mut doc);
        doc
    }
}

fn connected(c: &Conn) -> Connected {
    Connected {
        socket: c.fd,
        local_host: c.local.map(|a| a.ip().to_string()).unwrap_or_default(),
        local_port: c.local.map_or(0, |a| a.port()),
        remote_host: c.remote.map(|a| a.ip().to_string()).unwrap_or_default(),
        remote_port: c.remote.map_or(0, |a| a.port()),
    }
}

/// The document as iperf3 prints it: indented, integral doubles as integers, one string a
/// line.
pub fn lines(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if crate::cjson::write_pretty(&mut out, doc).is_err() {
        return Vec::new();
    }
    String::from_utf8_lossy(&out)
        .lines()
        .map(str::to_string)
        .collect()
}
