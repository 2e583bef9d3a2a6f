//! A UDP test's part of the driver: streams opened as iperf3 opens them (a connect datagram
//! and its reply), a thread per stream counting datagrams, loss and jitter (`crate::udp`),
//! and the report: iperf3's UDP rows; no tcp_info, so nothing for the engine to judge.

use std::net::SocketAddr;

use tcptune_diagnose::latency::Probe;
use tcptune_iperf3::udp::UdpReceiver;
use tcptune_iperf3::Results;
use tcptune_model::{Dur, Rate};

use super::config::ClientConfig;
use super::diagnosis;
use super::transport::{Ended, Setup, Transport};
use crate::data::cpu_percent;
use crate::document::{self, Layout, Span};
use crate::sock;
use crate::test_report::{Connected, End, Extension, IntervalReport};
use crate::udp::{UdpOutcome, UdpPhase, UdpStream};
use crate::TestError;

/// A running UDP data phase.
pub struct Udp {
    data: UdpPhase,
    layout: Layout,
    started: Dur,
    client_sends: u32,
}

/// What a UDP test's streams did, and the counts when `-O`'s seconds ended.
pub struct Outcome {
    outcomes: Vec<UdpOutcome>,
    base: Option<Vec<UdpReceiver>>,
    layout: Layout,
}

/// Opens a UDP stream as iperf3 does: connect, send the connect datagram, wait for the reply.
fn udp_stream(
    cfg: &ClientConfig,
    addr: SocketAddr,
    port: u16,
) -> std::io::Result<std::net::UdpSocket> {
    let local = match cfg.bind {
        Some(ip) => SocketAddr::new(ip, port),
        None if addr.is_ipv4() => SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, port)),
        None => SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)),
    };
    let u = sock::bind_udp(&local)?;
    let fd = std::os::fd::AsFd::as_fd(&u);
    if let Some(w) = cfg.params.window {
        sock::set_window(fd, w)?;
    }
    if let Some(dev) = &cfg.data_extra.bind_dev {
        tcptune_os::socket::set_bytes(fd, libc::SOL_SOCKET, libc::SO_BINDTODEVICE, dev.as_bytes())?;
    }
    if cfg.dont_fragment {
        // IPv4's DF bit (IPv6 never fragments on the way); the path MTU is then an error.
        let v4 = sock::set_int(
            fd,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        );
        let v6 = sock::set_int(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        );
        v4.or(v6)?;
    }
    u.connect(addr)?;
    u.set_read_timeout(Some(cfg.connect_timeout))?;
    u.send(&tcptune_iperf3::udp::CONNECT_MSG.to_ne_bytes())?;
    let mut b = [0u8; 16];
    let n = u.recv(&mut b)?;
    let reply = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
    // Any iperf3 server's answer: the legacy value, or 3.13's text "9876".
    if n < 4 || (reply != tcptune_iperf3::udp::CONNECT_REPLY && reply != 0x3938_3736) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the server did not answer the UDP stream's connect datagram",
        ));
    }
    Ok(u)
}

/// A SOL_SOCKET option of the first data socket (what iperf3 reports as the buffer sizes).
fn first_socket_option(first: Option<std::os::fd::BorrowedFd<'_>>, opt: i32) -> u32 {
    first
        .and_then(|fd| sock::get_int(fd, libc::SOL_SOCKET, opt).ok())
        .map(|v| v.max(0) as u32)
        .unwrap_or(0)
}

impl Transport for Udp {
    type Streams = Vec<UdpStream>;
    type Counters = Vec<UdpReceiver>;
    type Outcome = Outcome;
    const PROTOCOL: &'static str = "UDP";

    fn open(x: &Setup, _probes: &mut Vec<Probe>) -> Result<Vec<UdpStream>, TestError> {
        let mut streams = Vec::new();
        for i in 0..x.count {
            let u = udp_stream(x.cfg, x.addr, x.cfg.data_port(i))
                .map_err(|e| TestError::io("opening a UDP stream", e))?;
            streams.push(UdpStream {
                id: if i == 0 { 1 } else { i + 2 },
                sends: i < x.client_sends,
                sock: u,
            });
        }
        Ok(streams)
    }

    fn connected(streams: &Vec<UdpStream>) -> (Vec<Connected>, (u32, u32)) {
        let connected = streams
            .iter()
            .map(|st| {
                document::connected(
                    std::os::fd::AsRawFd::as_raw_fd(&st.sock),
                    st.sock.local_addr().ok(),
                    st.sock.peer_addr().ok(),
                )
            })
            .collect();
        let buf = |opt: i32| {
            first_socket_option(
                streams.first().map(|s| std::os::fd::AsFd::as_fd(&s.sock)),
                opt,
            )
        };
        (connected, (buf(libc::SO_SNDBUF), buf(libc::SO_RCVBUF)))
    }

    fn start(streams: Vec<UdpStream>, x: &Setup, layout: Layout) -> Result<Udp, TestError> {
        let p = &x.params;
        // The caller's -b (tcptune test defaults UDP to iperf3's 1 Mbit/s); 0 or none:
        // unpaced.
        let rate = p.bandwidth_bps.unwrap_or(0);
        let data = UdpPhase::start(
            streams,
            p.len,
            rate,
            p.udp_counters_64bit,
            p.repeating_payload,
        )
        .map_err(|e| TestError::io("starting the UDP streams", e))?;
        let layout = Layout {
            roles: data.ids(),
            ..layout
        };
        Ok(Udp {
            data,
            layout,
            started: x.clock.now(),
            client_sends: x.client_sends,
        })
    }

    fn layout(&self) -> &Layout {
        &self.layout
    }

    fn started(&self) -> Dur {
        self.started
    }

    fn zero(&self) -> Vec<UdpReceiver> {
        vec![UdpReceiver::default(); self.layout.roles.len()]
    }

    // The stream threads publish their counts as they go: nothing to note at a boundary.
    fn arm(&self, _at: f64) {}

    fn at_boundary(&self, _b: f64, now: f64) -> (f64, Vec<UdpReceiver>) {
        (now, self.data.counts())
    }

    fn now(&self) -> Vec<UdpReceiver> {
        self.data.counts()
    }

    fn moved(&self) -> u64 {
        self.data
            .counts()
            .iter()
            .zip(&self.layout.roles)
            .filter(|(_, r)| r.1 || self.client_sends == 0)
            .map(|(c, _)| c.bytes)
            .sum()
    }

    fn interval(
        &mut self,
        span: Span,
        prev: &Vec<UdpReceiver>,
        now: &Vec<UdpReceiver>,
    ) -> Option<IntervalReport> {
        document::udp_interval(&self.layout, span, prev, now)
    }

    fn stop(&mut self) {
        self.data.stop();
    }

    fn finish(self, _x: &Setup, base: Option<Vec<UdpReceiver>>) -> Outcome {
        Outcome {
            outcomes: self.data.finish(),
            base,
            layout: self.layout,
        }
    }

    fn own_results(outcome: &Outcome, secs: f64, cpu0: (f64, f64)) -> Results {
        let (cu, cs) = cpu_percent(cpu0, secs);
        let omitted = |k: usize| outcome.base.as_ref().and_then(|v| v.get(k));
        Results {
            cpu_util_total: cu + cs,
            cpu_util_user: cu,
            cpu_util_system: cs,
            sender_has_retransmits: -1,
            congestion_used: None,
            streams: outcome
                .outcomes
                .iter()
                .enumerate()
                .map(|(k, o)| o.result(secs, omitted(k)))
                .collect(),
            server_output_json: None,
            server_output_text: None,
            extension: None,
        }
    }

    fn report(outcome: Outcome, e: Ended) -> Result<(End, Extension), TestError> {
        let cpu = document::cpu_utilization(e.own.cpu_util_user, e.own.cpu_util_system, e.server);
        let end = document::udp_end(
            e.params,
            &outcome.layout,
            &outcome.outcomes,
            outcome.base.as_deref(),
            e.server,
            cpu,
            e.secs,
        )
        .ok_or(TestError::Session(
            tcptune_iperf3::session::SessionError::Ended,
        ))?;
        let rate = Rate::from_bps(end.sum_received.bits_per_second);
        let (diagnosis, latency) = diagnosis::judge_udp(e.cfg, e.params, e.probes, rate);
        let tcptune = Extension {
            sample_period_s: e.cfg.sample_every.as_secs_f64(),
            server_samples: false,
            streams: Vec::new(),
            diagnosis,
            latency,
        };
        Ok((end, tcptune))
    }
}
