//! A TCP test's part of the driver: data connections opened with the cookie, a thread per
//! stream noting its bytes at each boundary, tcp_info samples of both ends (the server's
//! when it sends them, else its sockets here through sock_diag), and the report with the
//! engine's diagnosis.

use std::net::SocketAddr;

use tcptune_diagnose::latency::Probe;
use tcptune_iperf3::Results;
use tcptune_kernel::cpustat::{CpuTicks, RunDelays};
use tcptune_model::Dur;

use super::diagnosis::{self, theirs, OwnCpu, TcpEvidence};
use super::transport::{Ended, Setup, Transport};
use crate::data::{own_results, DataPhase, SendPlan, StreamOutcome, StreamSocket};
use crate::document::{self, Layout, Span, TcpCounters};
use crate::peer::{LocalPeer, PeerSampler};
use crate::sock::{self, DataOptions};
use crate::test_report::{
    Connected, DiskFile, End, Extension, IntervalReport, SampledAt, StreamSamples,
};
use crate::{probe, ServerSamples, TestError};

/// The connected data streams and the first one's buffers before its connection.
pub struct Opened {
    socks: Vec<StreamSocket>,
    initial: sock::Buffers,
}

/// A running TCP data phase.
pub struct Tcp {
    data: DataPhase,
    peer: Option<PeerSampler>,
    layout: Layout,
    /// Each stream's retransmissions at its last interval report.
    prev_retrans: Vec<Option<u32>>,
    client_sends: u32,
    host_cpu_at_start: Option<CpuTicks>,
    waits_at_start: Option<RunDelays>,
    /// The test's clock, and when its time was up (the senders stopped).
    clock: std::time::Instant,
    stopped_at: Option<Dur>,
}

/// What a TCP test's streams did, with the CPU figures of the data phase.
pub struct Outcome {
    outcomes: Vec<StreamOutcome>,
    peer: Option<LocalPeer>,
    waited: Option<std::time::Duration>,
    host_cpu: Option<(f64, f64, f64)>,
}

/// The options of data stream `i`.
fn options(x: &Setup, i: u32) -> DataOptions {
    let (cfg, p) = (x.cfg, &x.params);
    let port = cfg.data_port(i);
    DataOptions {
        window: p.window,
        congestion: p.congestion.clone(),
        mss: p.mss,
        nodelay: p.nodelay,
        tos: p.tos,
        bind: cfg.bind.map(|ip| SocketAddr::new(ip, port)).or_else(|| {
            (port != 0).then(|| {
                let any: std::net::IpAddr = if x.addr.is_ipv4() {
                    std::net::Ipv4Addr::UNSPECIFIED.into()
                } else {
                    std::net::Ipv6Addr::UNSPECIFIED.into()
                };
                SocketAddr::new(any, port)
            })
        }),
        extra: cfg.data_extra.clone(),
    }
}

impl Transport for Tcp {
    type Streams = Opened;
    type Counters = TcpCounters;
    type Outcome = Outcome;
    const PROTOCOL: &'static str = "TCP";

    fn open(x: &Setup, probes: &mut Vec<Probe>) -> Result<Opened, TestError> {
        let mut socks = Vec::new();
        let mut initial = sock::Buffers::default();
        for i in 0..x.count {
            let handshake = std::time::Instant::now();
            let (mut d, b) =
                sock::connect_reporting(&x.addr, &options(x, i), x.cfg.connect_timeout).map_err(
                    |e| {
                        TestError::io(
                            "opening a data connection (is -C a congestion control this kernel \
                             has, and --cport/-B free here?)",
                            e,
                        )
                    },
                )?;
            if x.cfg.latency {
                probes.push(probe::idle_handshake(x.clock.0, handshake.elapsed()));
            }
            if i == 0 {
                initial = b;
            }
            std::io::Write::write_all(&mut d, x.cookie.as_bytes())
                .map_err(|e| TestError::io("sending the cookie on a data connection", e))?;
            socks.push(StreamSocket {
                id: if i == 0 { 1 } else { i + 2 },
                sends: i < x.client_sends,
                sock: d,
            });
        }
        Ok(Opened { socks, initial })
    }

    fn connected(streams: &Opened) -> (Vec<Connected>, (u32, u32)) {
        let connected = streams
            .socks
            .iter()
            .map(|st| {
                document::connected(
                    std::os::fd::AsRawFd::as_raw_fd(&st.sock),
                    st.sock.local_addr().ok(),
                    st.sock.peer_addr().ok(),
                )
            })
            .collect();
        // As iperf3: the buffers before the connection (the send buffer grows after it).
        (connected, (streams.initial.sndbuf, streams.initial.rcvbuf))
    }

    fn start(streams: Opened, x: &Setup, layout: Layout) -> Result<Tcp, TestError> {
        let p = &x.params;
        let plan = SendPlan {
            block: p.len,
            rate_bps: p.bandwidth_bps,
            bytes_total: p.byte_limit(),
            zerocopy: p.zerocopy,
            repeating: p.repeating_payload,
            file: x.cfg.diskfile.clone(),
        };
        let host_cpu_at_start = CpuTicks::now();
        let waits_at_start = RunDelays::now();
        // The other end's sockets, when it runs here too and sends no samples of its own.
        let peer = LocalPeer::new(&streams.socks, x.cfg.sample_every);
        let data = DataPhase::start(streams.socks, &plan, x.cfg.sample_every, x.clock.0)
            .map_err(|e| TestError::io("starting the data streams", e))?;
        let peer = peer.and_then(|p| PeerSampler::start(p, x.clock.0));
        let layout = Layout {
            roles: data.ids(),
            ..layout
        };
        Ok(Tcp {
            prev_retrans: vec![None; layout.roles.len()],
            data,
            peer,
            layout,
            client_sends: x.client_sends,
            host_cpu_at_start,
            waits_at_start,
            clock: x.clock.0,
            stopped_at: None,
        })
    }

    fn layout(&self) -> &Layout {
        &self.layout
    }

    fn started(&self) -> Dur {
        self.data.started()
    }

    fn zero(&self) -> TcpCounters {
        TcpCounters {
            bytes: vec![0; self.layout.roles.len()],
            latest: vec![None; self.layout.roles.len()],
        }
    }

    // Interval ends, the omit end and the test's end are boundaries: the stream threads note
    // their bytes when they pass one (`DataPhase::mark_at`), so a report the driver makes
    // late, on a busy host, still covers exactly the period.
    fn arm(&self, at: f64) {
        let t0 = self.data.started();
        self.data
            .mark_at(Dur::from_nanos(t0.nanos() + (at * 1e9).round() as u64));
    }

    fn at_boundary(&self, b: f64, _now: f64) -> (f64, TcpCounters) {
        let c = TcpCounters {
            bytes: self.data.bytes_at_mark(),
            latest: self.data.latest(),
        };
        (b, c)
    }

    fn now(&self) -> TcpCounters {
        TcpCounters {
            bytes: self.data.bytes(),
            latest: self.data.latest(),
        }
    }

    fn source_ended(&self) -> bool {
        self.data.file_ended()
    }

    fn moved(&self) -> u64 {
        if self.client_sends > 0 {
            self.data.sent_total()
        } else {
            self.data.bytes().iter().sum()
        }
    }

    fn interval(
        &mut self,
        span: Span,
        prev: &TcpCounters,
        now: &TcpCounters,
    ) -> Option<IntervalReport> {
        Some(document::tcp_interval(
            &self.layout,
            span,
            prev,
            now,
            &mut self.prev_retrans,
        ))
    }

    fn stop(&mut self) {
        self.data.stop_senders();
        self.stopped_at = Some(Dur::from_nanos(
            self.clock.elapsed().as_nanos().min(u64::MAX as u128) as u64,
        ));
    }

    fn finish(self, x: &Setup, base: Option<TcpCounters>) -> Outcome {
        let peer = self.peer.and_then(PeerSampler::finish);
        // Read while the stream threads still run: an ended thread's wait is lost.
        let waited = self
            .waits_at_start
            .zip(RunDelays::now())
            .map(|(a, b)| a.waited_until(&b));
        let t0 = self.data.started();
        let mut outcomes = self.data.finish();
        // Omitted bytes count for nothing (iperf3 reports and exchanges what followed -O),
        // nor do the omitted seconds' retransmissions: the samples start from the last one
        // taken by the omit's end, the baseline of the counters that follow.
        let omit_s = x.params.omit_s;
        let omit_end = Dur::from_nanos(t0.nanos() + (omit_s as f64 * 1e9).round() as u64);
        let at_omit_end = base.map(|b| b.bytes).unwrap_or_default();
        for (k, o) in outcomes.iter_mut().enumerate() {
            o.bytes = o
                .bytes
                .saturating_sub(at_omit_end.get(k).copied().unwrap_or(0));
            if omit_s > 0 {
                let after = o.samples.partition_point(|s| s.at_s <= omit_end);
                o.samples.drain(..after.saturating_sub(1));
            }
            // Nor does what followed the test's end: the last sample is taken once the
            // threads have stopped, and a lossy path still repairs what was in flight then.
            // iperf3's final total is its intervals' sum; so is ours (at least one sample
            // kept).
            if let Some(stop) = self.stopped_at {
                let keep = o.samples.partition_point(|s| s.at_s <= stop).max(1);
                o.samples.truncate(keep);
            }
        }
        // Both ends on this host (loopback): how busy all its CPUs were, softirq included.
        let host_cpu = self
            .host_cpu_at_start
            .zip(CpuTicks::now())
            .and_then(|(a, b)| a.shares_until(&b))
            .filter(|_| x.addr.ip().is_loopback());
        Outcome {
            outcomes,
            peer,
            waited,
            host_cpu,
        }
    }

    fn own_results(outcome: &Outcome, secs: f64, cpu0: (f64, f64)) -> Results {
        own_results(&outcome.outcomes, secs, cpu0)
    }

    fn report(outcome: Outcome, e: Ended) -> Result<(End, Extension), TestError> {
        let Outcome {
            outcomes,
            peer,
            waited,
            host_cpu,
        } = outcome;
        let (p, server, secs) = (e.params, e.server, e.secs);
        let server_samples: Option<ServerSamples> = server
            .extension
            .as_ref()
            .and_then(|v| serde_json::from_value(v.clone()).ok());
        let server_is_tcptune = server_samples.is_some();
        let server_samples = server_samples.or_else(|| peer.map(LocalPeer::into_samples));
        let sides: Vec<_> = outcomes
            .iter()
            .map(|o| document::tcp_sides(o, server, theirs(server_samples.as_ref(), o.id), secs))
            .collect();
        let received: Vec<u64> = sides.iter().map(|s| s.1.bytes).collect();
        let own_cpu = OwnCpu {
            user: e.own.cpu_util_user,
            system: e.own.cpu_util_system,
            wait: waited.map(|w| w.as_secs_f64() / secs.max(1e-9) * 100.0),
        };
        let peer_is_local = e
            .start
            .connected
            .first()
            .and_then(|c| c.remote_host.parse::<std::net::IpAddr>().ok())
            .is_some_and(|ip| ip.is_loopback());
        let (diagnosis, latency) = diagnosis::judge_tcp(
            &TcpEvidence {
                cfg: e.cfg,
                peer_is_local,
                outcomes: &outcomes,
                received: &received,
                server,
                server_samples: server_samples.as_ref(),
                server_is_tcptune,
                secs,
                own_cpu,
                host_cpu,
            },
            e.probes,
        );
        let cpu = document::cpu_utilization(own_cpu.user, own_cpu.system, server);
        let client_sends_main = p.direction != tcptune_iperf3::Direction::Reverse;
        let mut end = document::tcp_end(p, client_sends_main, &outcomes, sides, server, cpu, secs);
        if let Some(path) = &e.cfg.diskfile {
            // The file's size now, as iperf3 reads it at the end (fstat): what a receiving
            // stream wrote, or what a sending one read from.
            let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            let name = path.display().to_string();
            for s in &mut end.streams {
                let sent = s.sender.as_ref().map_or(0, |x| x.bytes);
                s.diskfile = Some(DiskFile::of(sent, size, &name));
            }
        }
        let mut samples: Vec<StreamSamples> = outcomes
            .into_iter()
            .map(|o| StreamSamples {
                id: o.id,
                at: SampledAt::Client,
                sender: o.sends,
                samples: o.samples,
            })
            .collect();
        if let Some(ss) = server_samples {
            samples.extend(ss.streams.into_iter().map(|s| StreamSamples {
                id: s.id,
                at: SampledAt::Server,
                sender: s.sender,
                samples: s.samples,
            }));
        }
        let tcptune = Extension {
            sample_period_s: e.cfg.sample_every.as_secs_f64(),
            server_samples: server_is_tcptune,
            streams: samples,
            diagnosis,
            latency,
        };
        Ok((end, tcptune))
    }
}
