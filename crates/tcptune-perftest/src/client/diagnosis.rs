//! The engine's input from a test (`tcptune_diagnose::throughput`): each direction's context
//! (the parameters, this host's settings, the kernel), both ends' CPU use, each stream's
//! samples from both ends, and the latency report with the bufferbloat finding. iperf3's
//! document is built apart (`crate::document`).

use tcptune_diagnose::advice::{HostSettings, KnownSettings};
use tcptune_diagnose::engine::{self, CpuScope, CpuUse};
use tcptune_diagnose::latency::{DelayPlaces, LatencyReport, Probe, ProbeKind};
use tcptune_diagnose::throughput::{
    diagnose_bidir, diagnose_stream, diagnose_test, StreamInput, TestContext, TestDiagnosis,
};
use tcptune_diagnose::Sample;
use tcptune_iperf3::{Direction, Params, Results};
use tcptune_model::kernel::{CongestionControl, KernelSource, KernelVersion};
use tcptune_model::{Bytes, Dur, Rate};

use super::config::ClientConfig;
use crate::data::StreamOutcome;
use crate::ServerSamples;

fn kernel() -> (KernelVersion, KernelSource) {
    tcptune_kernel::sys::kernel_version_or_assumed()
}

/// The test context the diagnosis needs, from the parameters, for the direction in which the
/// client sends (`client_sends`) or receives. `sender_cc` is the sending socket's congestion
/// control as that end reported it; `settings` this host's values, which are the peer's too
/// when the peer is this host (a loopback test).
pub fn context(
    params: &Params,
    path_rate: Option<Rate>,
    sender_cc: Option<&str>,
    settings: &HostSettings,
    peer_is_local: bool,
    client_sends: bool,
) -> TestContext {
    let (kernel, kernel_source) = kernel();
    let known = (settings != &HostSettings::default()).then(|| settings.clone());
    let peer = known.clone().filter(|_| peer_is_local);
    // The sender's own settings where the sender is this client; the server's are its own.
    let ours_send = client_sends;
    TestContext {
        path_rate,
        window: params.window.map(|w| Bytes::new(w as u64)),
        rate_cap: params.bandwidth_bps.map(|b| Rate::from_bps(b as f64)),
        congestion: sender_cc
            .or(params.congestion.as_deref())
            .and_then(|c| c.parse::<CongestionControl>().ok()),
        kernel,
        kernel_source,
        streams: params.parallel,
        settings: if client_sends {
            KnownSettings {
                sender: known,
                receiver: peer,
            }
        } else {
            KnownSettings {
                sender: peer,
                receiver: known,
            }
        },
        // Both tcptune's sender and iperf3's write as fast as the socket takes unless a rate
        // (-b, --fq-rate) or a byte or block count (-n, -k) sets the pace.
        bulk_sender: params.bandwidth_bps.is_none()
            && params.fqrate_bps.is_none()
            && params.bytes == 0
            && params.blocks == 0,
        write_bytes: Some(u64::from(params.len)).filter(|&l| l > 0),
        zerocopy: params.zerocopy && ours_send,
        cores: (ours_send || peer_is_local).then(|| spare_cores(params, peer_is_local)),
        // Both tcptune's and iperf3's receivers read as fast as the socket gives.
        bulk_receiver: true,
        loopback: peer_is_local,
        ..TestContext::default()
    }
}

/// The cores the sender's streams can have to themselves: this host's, less those the other
/// end takes when it runs here too, halved again when both directions run (--bidir).
fn spare_cores(params: &Params, peer_is_local: bool) -> u32 {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let ends = if peer_is_local { 2 } else { 1 };
    let directions = if params.direction == Direction::Bidirectional {
        2
    } else {
        1
    };
    (ncpu / ends / directions).max(1)
}

/// The latency report: the probes taken, the load connections' smoothed RTT as self probes,
/// and where the added delay sits by the senders' own counters (medians over their samples).
fn latency_report(
    mut probes: Vec<Probe>,
    senders: &[&[Sample]],
    rate: Rate,
    notsent_lowat: Option<u64>,
) -> LatencyReport {
    let mut queue_us = Vec::new();
    let mut unsent = Vec::new();
    let mut ce = 0u64;
    for samples in senders {
        for s in samples
            .iter()
            .filter(|s| s.info.bytes_acked.unwrap_or(0) > 0)
        {
            let i = &s.info;
            if let Some(rtt) = i.srtt_us() {
                probes.push(Probe {
                    at_s: s.at_s,
                    kind: ProbeKind::SelfStack,
                    phase: tcptune_diagnose::latency::Phase::Loaded,
                    rtt_s: Some(Dur::from_micros(rtt as u64)),
                });
                if let Some(m) = i.min_rtt() {
                    queue_us.push((rtt as u64).saturating_sub(m as u64));
                }
            }
            unsent.extend(i.notsent_bytes.map(u64::from));
        }
        if let (Some(a), Some(b)) = (samples.first(), samples.last()) {
            let d = |x: &Sample| x.info.delivered_ce.map(u64::from);
            ce += d(b).unwrap_or(0).saturating_sub(d(a).unwrap_or(0));
        }
    }
    // The self probes' ramp, as the foreign ones' (the samples span the data phase).
    let span = senders
        .iter()
        .flat_map(|v| v.iter().map(|s| s.at_s.nanos()));
    if let (Some(a), Some(b)) = (span.clone().min(), span.max()) {
        let mut own: Vec<Probe> = probes
            .iter()
            .filter(|p| p.kind == ProbeKind::SelfStack)
            .copied()
            .collect();
        tcptune_diagnose::latency::mark_ramp(&mut own, Dur::from_nanos(a), Dur::from_nanos(b - a));
        probes.retain(|p| p.kind != ProbeKind::SelfStack);
        probes.extend(own);
    }
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    };
    let sender_unsent_bytes = median(unsent);
    let places = DelayPlaces {
        network_queue_s: median(queue_us).map(Dur::from_micros),
        sender_unsent_bytes,
        sender_queue_s: sender_unsent_bytes
            .filter(|_| rate.bps() > 0.0)
            .map(|b| Dur::from_secs_f64(b as f64 / rate.bytes_per_sec())),
        notsent_lowat,
        ecn_marks: (ce > 0).then_some(ce),
    };
    LatencyReport::of(probes, places)
}

/// This process's CPU over the data phase, percent of one core: user, system, and the time its
/// threads waited for a CPU (None where the kernel keeps no schedstats).
#[derive(Debug, Clone, Copy)]
pub struct OwnCpu {
    /// User CPU, percent.
    pub user: f64,
    /// System CPU, percent.
    pub system: f64,
    /// Run-queue wait, percent, when known.
    pub wait: Option<f64>,
}

/// CPU use of both ends' processes over the test (iperf3's figures), for the direction in which
/// the client sends (`client_sends`). A tcptune end runs a thread per stream, so it can use up
/// to that many cores; a stock iperf3 (3.12) one. The host's figure (both ends on this host) is
/// shown but does not decide: other processes' load is in it.
fn cpu_figures(
    client_sends: bool,
    own: OwnCpu,
    server: &Results,
    server_is_tcptune: bool,
    host_cpu: Option<(f64, f64, f64)>,
    parallel: u32,
) -> Vec<CpuUse> {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let nstreams = parallel.max(1) as f64;
    let (ours_end, theirs_end) = if client_sends {
        (engine::End::Sender, engine::End::Receiver)
    } else {
        (engine::End::Receiver, engine::End::Sender)
    };
    let mut cpu = vec![
        CpuUse {
            end: ours_end,
            scope: CpuScope::Process,
            percent: own.user + own.system,
            cores: nstreams.min(ncpu),
            softirq_percent: None,
            wait_percent: own.wait,
        },
        CpuUse {
            end: theirs_end,
            scope: CpuScope::Process,
            percent: server.cpu_util_total,
            cores: if server_is_tcptune {
                nstreams.min(ncpu)
            } else {
                1.0
            },
            softirq_percent: None,
            wait_percent: None,
        },
    ];
    if let Some((busy, softirq, _steal)) = host_cpu {
        cpu.push(CpuUse {
            end: engine::End::BothEnds,
            scope: CpuScope::Host,
            percent: busy * 100.0,
            cores: 1.0,
            softirq_percent: Some(softirq * 100.0),
            wait_percent: None,
        });
    }
    cpu
}

/// The server's samples of stream `id` (none from a stock iperf3 server on another host).
pub fn theirs(server: Option<&ServerSamples>, id: u32) -> &[Sample] {
    server
        .and_then(|x| x.streams.iter().find(|s| s.id == id))
        .map(|s| s.samples.as_slice())
        .unwrap_or(&[])
}

/// What a TCP test gives the engine besides its configuration.
pub struct TcpEvidence<'a> {
    /// What the test was asked to do.
    pub cfg: &'a ClientConfig,
    /// The server runs on this host (a loopback address).
    pub peer_is_local: bool,
    /// What each stream did.
    pub outcomes: &'a [StreamOutcome],
    /// Each stream's bytes at its receiving end (in the order of `outcomes`).
    pub received: &'a [u64],
    /// The results the server sent.
    pub server: &'a Results,
    /// The server's samples, or its sockets' sampled here when it runs on this host.
    pub server_samples: Option<&'a ServerSamples>,
    /// The server is a tcptune server (it sent its samples).
    pub server_is_tcptune: bool,
    /// The counted seconds.
    pub secs: f64,
    /// This end's CPU use.
    pub own_cpu: OwnCpu,
    /// Both ends on this host: how busy its CPUs were (busy, softirq, steal shares).
    pub host_cpu: Option<(f64, f64, f64)>,
}

/// Each direction's context: the main one's, and the other one's of `--bidir`.
fn contexts(e: &TcpEvidence) -> (TestContext, TestContext) {
    let p = &e.cfg.params;
    let client_sends_main = p.direction != Direction::Reverse;
    // Each direction's sender: our streams' congestion control, or the server's.
    let ours_cc = e.outcomes.iter().find_map(|o| o.congestion.clone());
    let (main_cc, rev_cc) = if client_sends_main {
        (ours_cc, e.server.congestion_used.clone())
    } else {
        (e.server.congestion_used.clone(), ours_cc)
    };
    let ctx = |cc: Option<String>, client_sends: bool| {
        context(
            p,
            e.cfg.path_rate,
            cc.as_deref(),
            &e.cfg.host_settings,
            e.peer_is_local,
            client_sends,
        )
    };
    (
        ctx(main_cc, client_sends_main),
        ctx(rev_cc, !client_sends_main),
    )
}

/// The whole TCP test judged (each direction of `--bidir` apart), and the latency report
/// from `probes` with its bufferbloat finding added to the diagnosis.
pub fn judge_tcp(
    e: &TcpEvidence,
    probes: Option<Vec<Probe>>,
) -> (TestDiagnosis, Option<LatencyReport>) {
    let p = &e.cfg.params;
    let client_sends_main = p.direction != Direction::Reverse;
    let (ctx, rev_ctx) = contexts(e);
    let cpu = cpu_figures(
        client_sends_main,
        e.own_cpu,
        e.server,
        e.server_is_tcptune,
        e.host_cpu,
        p.parallel,
    );
    // The other direction of a bidirectional test: the same processes, the ends swapped.
    let rev_cpu: Vec<CpuUse> = cpu
        .iter()
        .map(|c| CpuUse {
            end: match c.end {
                engine::End::Sender => engine::End::Receiver,
                engine::End::Receiver => engine::End::Sender,
                other => other,
            },
            ..*c
        })
        .collect();
    let mut diag_main = Vec::new();
    let mut diag_rev = Vec::new();
    for (o, &received) in e.outcomes.iter().zip(e.received) {
        let ts = theirs(e.server_samples, o.id);
        let (sender_samples, receiver_samples) = if o.sends {
            (o.samples.as_slice(), ts)
        } else {
            (ts, o.samples.as_slice())
        };
        let main = o.sends == client_sends_main;
        let d = diagnose_stream(
            &StreamInput {
                id: o.id,
                sender: sender_samples,
                receiver: receiver_samples,
                received_bytes: received,
                seconds: Dur::from_secs_f64(e.secs),
                cpu: if main { &cpu } else { &rev_cpu },
            },
            if main { &ctx } else { &rev_ctx },
        );
        if main {
            diag_main.push(d);
        } else {
            diag_rev.push(d);
        }
    }
    // The main direction's senders: where the self probes and the delay's places come from.
    let main_senders: Vec<&[Sample]> = e
        .outcomes
        .iter()
        .filter(|o| o.sends == client_sends_main)
        .map(|o| {
            if o.sends {
                o.samples.as_slice()
            } else {
                theirs(e.server_samples, o.id)
            }
        })
        .collect();
    // Each direction of a bidirectional test judged and summed on its own.
    let mut diagnosis = if p.direction == Direction::Bidirectional {
        diagnose_bidir(diag_main, diag_rev, &ctx, &rev_ctx)
    } else {
        diag_main.extend(diag_rev);
        diagnose_test(diag_main, &ctx)
    };
    let latency = probes.map(|probes| {
        latency_report(
            probes,
            &main_senders,
            diagnosis.achieved_bps,
            e.cfg
                .host_settings
                .notsent_lowat
                .filter(|_| client_sends_main),
        )
    });
    if let Some(l) = &latency {
        let in_effect = tcptune_diagnose::engine::InEffect::of(&ctx);
        let bloat = tcptune_diagnose::latency::bloat(
            &l.summary,
            &l.places,
            diagnosis.achieved_bps,
            &in_effect,
        );
        if let Some(b) = bloat {
            tcptune_diagnose::throughput::add_bloat(&mut diagnosis, b, &ctx);
        }
    }
    (diagnosis, latency)
}

/// A UDP test: no tcp_info, so the diagnosis has nothing to judge; the latency report holds
/// the probes alone (no self probes, no delay places: those come from tcp_info).
pub fn judge_udp(
    cfg: &ClientConfig,
    p: &Params,
    probes: Option<Vec<Probe>>,
    rate: Rate,
) -> (TestDiagnosis, Option<LatencyReport>) {
    let ctx = context(
        p,
        cfg.path_rate,
        None,
        &cfg.host_settings,
        false,
        p.direction != Direction::Reverse,
    );
    let latency = probes.map(|probes| latency_report(probes, &[], rate, None));
    (diagnose_test(Vec::new(), &ctx), latency)
}
