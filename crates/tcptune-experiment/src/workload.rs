//! Workloads on lab hosts, measured: iperf3 (the reference bulk test), an HTTP download with a
//! real server and client (`python3 -m http.server`, `curl`), or any command per host. While
//! the workload runs, the sender's connection is sampled through sock_diag inside the sender's
//! network namespace, which gives the time series (cwnd, receive window, RTT, goodput), the
//! limit shares and the verdict the same way `tcptune conns` computes them.
//!
//! This is the I/O edge of the experiment runner; hosts are reached through [`Hosts`], so the
//! same code serves the lab and the privileged tests' plain namespaces.

use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tcptune_diagnose::engine::{classify, Observations, Series};
use tcptune_diagnose::{interval, Context, Sample};
use tcptune_kernel::diag::{ext, DiagSocket};
use tcptune_kernel::filter::Filter;
use tcptune_kernel::sys::{DestroyEvents, Diag};
use tcptune_model::{Bytes, Dur, Rate};

use crate::record::{LimitShares, Measurement, SeriesSample};
use crate::settings::Settings;

/// How to reach the lab's hosts.
pub trait Hosts {
    /// A command that runs `program` inside host `host` ("client" or "server").
    fn command(&self, host: &str, program: &str) -> Command;
    /// The network namespace (`ip netns` name) of `host`.
    fn netns(&self, host: &str) -> String;
    /// The address the other host reaches `host` at.
    fn address(&self, host: &str) -> IpAddr;
    /// Whether the link between the hosts holds no packet now (so captures stopped now miss
    /// nothing still in flight). Hosts joined by no emulated link hold none.
    fn link_empty(&self) -> bool {
        true
    }
}

/// Where a trial records packets (`capture.*`).
#[derive(Debug, Clone, Copy)]
pub struct Captures<'a> {
    /// Bytes of each packet kept.
    pub snaplen: u32,
    /// The client's capture.
    pub client: &'a std::path::Path,
    /// With `capture.at = "both"`, the server's capture too. Both are then stamped in
    /// nanoseconds, running before the workload's first packet, and stopped only once the
    /// link holds no packet, so that a packet missing at one end is one the link lost.
    pub server: Option<&'a std::path::Path>,
}

/// A child process that is killed when dropped (a workload's server, a capture).
struct Guard(Option<Child>);

impl Guard {
    fn stop(mut self) -> Option<std::process::Output> {
        let mut c = self.0.take()?;
        // SIGINT lets tcpdump flush and iperf3 print; then wait.
        let _ = tcptune_os::process::kill(c.id(), tcptune_os::process::Signal::Int);
        let deadline = Instant::now() + Duration::from_secs(5);
        while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = c.kill();
        c.wait_with_output().ok()
    }
}

impl Guard {
    /// Reads the process's standard error until a line containing `what` (tcpdump's
    /// "listening on"), then leaves the rest for [`Guard::stop`]. Reads byte by byte, so
    /// nothing after that line is taken; ends with the process's last words if it exits first.
    fn wait_for_line(&mut self, what: &str) -> Result<(), String> {
        use std::io::Read;
        let Some(child) = self.0.as_mut() else {
            return Err("the process is gone".into());
        };
        let Some(mut err) = child.stderr.take() else {
            return Err("its standard error is not piped".into());
        };
        let (mut line, mut all, mut byte) = (Vec::new(), String::new(), [0u8]);
        let found = loop {
            match err.read(&mut byte) {
                Ok(1) if byte[0] != b'\n' => line.push(byte[0]),
                Ok(1) => {
                    let l = String::from_utf8_lossy(&line).into_owned();
                    line.clear();
                    if l.contains(what) {
                        break true;
                    }
                    all.push_str(&l);
                    all.push(' ');
                }
                _ => break false,
            }
        };
        child.stderr = Some(err);
        if found {
            Ok(())
        } else {
            Err(format!("it ended before saying '{what}': {}", all.trim()))
        }
    }

    /// Waits up to `limit` for the process to exit by itself (no signal), then kills it.
    fn wait(mut self, limit: Duration) {
        let Some(mut c) = self.0.take() else { return };
        let deadline = Instant::now() + limit;
        while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits until a socket listens on `port` in `netns` (a real event, polled with a deadline).
fn wait_listening(netns: &str, port: u16, limit: Duration) -> Result<(), String> {
    let filter: Filter = format!("state listening sport {port}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut diag = Diag::open_in_netns(netns).map_err(|e| format!("{e}"))?;
    let deadline = Instant::now() + limit;
    loop {
        if !diag
            .dump(&filter, 0)
            .map_err(|e| format!("{e}"))?
            .is_empty()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "nothing listened on port {port} in {netns} within {limit:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

type Samples = Result<Vec<(Dur, DiagSocket)>, String>;

/// Samples the connections matching a filter in a namespace until stopped, and records the
/// final state of each matching connection as it closes (sock_diag destroy events), so a
/// transfer shorter than the sampling period is still seen.
struct Sampler {
    netns: String,
    filter: Filter,
    stop: Arc<AtomicBool>,
    polls: std::thread::JoinHandle<Samples>,
    closes: std::thread::JoinHandle<Samples>,
}

impl Sampler {
    fn start(netns: String, filter: Filter, period: Duration) -> Result<Sampler, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (netns_copy, filter_copy) = (netns.clone(), filter.clone());
        let t0 = Instant::now();
        // Subscribe before the workload starts so no close is missed.
        let mut events = DestroyEvents::subscribe(Some(&netns)).map_err(|e| format!("{e}"))?;
        let (flag, mut f) = (stop.clone(), filter.clone());
        // A destroyed socket reports state CLOSE, which a connected-states filter would reject.
        f.states = u32::MAX;
        let closes = std::thread::spawn(move || {
            let mut out = Vec::new();
            let take = |batch: Vec<DiagSocket>, out: &mut Vec<(Dur, DiagSocket)>| {
                for s in batch.into_iter().filter(|s| f.matches(s)) {
                    out.push((Dur::from(t0.elapsed()), s));
                }
            };
            while !flag.load(Ordering::Relaxed) {
                take(
                    events
                        .next(Duration::from_millis(20))
                        .map_err(|e| format!("{e}"))?,
                    &mut out,
                );
            }
            // Events queued before the stop are in the socket buffer already: drain them.
            take(
                events.next(Duration::ZERO).map_err(|e| format!("{e}"))?,
                &mut out,
            );
            Ok(out)
        });
        let flag = stop.clone();
        let polls = std::thread::spawn(move || {
            let mut diag = Diag::open_in_netns(&netns).map_err(|e| format!("{e}"))?;
            let mut out = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let at = Dur::from(t0.elapsed());
                for s in diag
                    .dump(&filter, ext::INFO | ext::SKMEMINFO)
                    .map_err(|e| format!("{e}"))?
                {
                    out.push((at, s));
                }
                std::thread::sleep(period);
            }
            Ok(out)
        });
        Ok(Sampler {
            netns: netns_copy,
            filter: filter_copy,
            stop,
            polls,
            closes,
        })
    }

    /// Stops sampling once the workload's connections have closed (or after a grace period),
    /// so their final statistics arrive as destroy events first.
    fn finish(self) -> Samples {
        wait_closed(&self.netns, &self.filter, Duration::from_secs(3));
        self.stop.store(true, Ordering::Relaxed);
        let panicked = |_| "the sampler thread panicked".to_string();
        let mut all = self.polls.join().map_err(panicked)??;
        all.extend(self.closes.join().map_err(panicked)??);
        all.sort_by_key(|(at, _)| *at);
        Ok(all)
    }
}

/// Waits (up to `limit`) until every connection matching `filter` in `netns` has closed or
/// reached TIME_WAIT, the moment the kernel has written its final statistics: its destroy
/// event, and its entry in the TCP metrics cache.
fn wait_closed(netns: &str, filter: &Filter, limit: Duration) {
    const TIME_WAIT: u8 = 6;
    let Ok(mut diag) = Diag::open_in_netns(netns) else {
        return;
    };
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        match diag.dump(filter, 0) {
            Ok(open) if open.iter().any(|s| s.state != TIME_WAIT) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            _ => break,
        }
    }
}

/// What the samples of the busiest connection say.
struct Observed {
    series: Vec<SeriesSample>,
    limits: Option<LimitShares>,
    verdict: Option<String>,
    limit: tcptune_diagnose::Limit,
    limit_share: Option<f64>,
    rtt_min_s: Option<f64>,
    rtt_mean_s: Option<f64>,
    rtt_p99_s: Option<f64>,
    retransmits: Option<u64>,
    sndbuf_peak_bytes: Option<u64>,
}

fn observe(
    samples: Vec<(Dur, DiagSocket)>,
    path_rate: Option<Rate>,
    streams: u32,
    bulk_sender: bool,
) -> Option<Observed> {
    // The data connection is the one that moved the most bytes (iperf3 also has a control
    // connection on the same port).
    let busiest = samples
        .iter()
        .max_by_key(|(_, s)| s.info.as_ref().and_then(|i| i.bytes_acked).unwrap_or(0))?
        .1
        .cookie;
    let conn: Vec<Sample> = samples
        .into_iter()
        .filter(|(_, s)| s.cookie == busiest)
        .filter_map(|(at, s)| {
            Some(Sample {
                at_s: at,
                info: s.info?,
                skmem: s.skmem,
            })
        })
        .collect();
    let (first, last) = (conn.first()?, conn.last()?);
    let mut series = Vec::with_capacity(conn.len());
    let t0 = first.at_s.secs();
    for (a, b) in spaced_pairs(&conn, |s| s.at_s.secs()) {
        let iv = interval(a, b);
        let i = &b.info;
        series.push(SeriesSample {
            t_s: b.at_s.secs() - t0,
            goodput_bps: delivery_rate(a, b).or(iv.goodput_bps.map(Rate::bps)),
            snd_cwnd_bytes: i.cwnd_bytes(),
            rwnd_bytes: i.snd_wnd.map(u64::from),
            rtt_s: i.srtt_us().map(|r| r as f64 / 1e6),
            retransmits: i.total_retrans.map(u64::from),
            ..Default::default()
        });
    }
    trim_tail(&mut series);
    let whole = interval(first, last);
    // One sample (a transfer shorter than the period, seen only as it closed): judge the
    // connection over its life.
    // The lab's links charge netem's 14-byte framing per packet unless a spec says otherwise.
    let ctx = Context {
        path_rate,
        framing_bytes: tcptune_model::goodput::NETEM_FRAMING,
        // Parallel streams share the path: each is judged against its share.
        streams,
        bulk_sender,
        ..Context::default()
    };
    // The whole series, so medians and per-sample evidence cover the trial; one sample (a
    // transfer shorter than the period, seen only as it closed) is judged over its life.
    let over = if conn.len() > 1 {
        "of the trial"
    } else {
        "of its busy time"
    };
    let obs = Observations::socket(Series::of(&conn));
    let (v, _) = classify(&obs, &ctx, over);
    let mut rtts: Vec<f64> = conn
        .iter()
        .filter_map(|s| s.info.srtt_us())
        .map(|r| r as f64 / 1e6)
        .collect();
    rtts.sort_by(f64::total_cmp);
    let p99 = rtts
        .get(((rtts.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
        .copied();
    Some(Observed {
        series,
        limits: whole.shares.map(|s| LimitShares {
            rwnd: s.rwnd,
            sndbuf: s.sndbuf,
            cwnd: s.network,
            app: s.application.unwrap_or(0.0),
        }),
        limit: v.limit,
        limit_share: v.share,
        verdict: Some(v.text),
        rtt_min_s: last.info.min_rtt().map(|r| r as f64 / 1e6),
        rtt_mean_s: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
        rtt_p99_s: p99,
        retransmits: last.info.total_retrans.map(u64::from),
        sndbuf_peak_bytes: conn
            .iter()
            .filter_map(|s| s.skmem.map(|m| u64::from(m.sndbuf)))
            .max(),
    })
}

/// The shortest interval a series' rate is computed over. Samples come every 50 ms (100 ms
/// at the receiver), but a connection's final state arrives as a destroy event at any moment,
/// often a few milliseconds after the last poll: bytes over such a sliver make a rate spike
/// far above the path (seed 003's 1.5 Gbit/s on a 200 Mbit/s link). A sample closer than
/// this to the last one used waits for a later one to span the interval.
const MIN_RATE_INTERVAL_S: f64 = 0.025;

/// Consecutive pairs of samples at least [`MIN_RATE_INTERVAL_S`] apart: each pair starts at
/// the end of the previous one, skipping samples that came too soon.
fn spaced_pairs<T>(samples: &[T], at: impl Fn(&T) -> f64) -> Vec<(&T, &T)> {
    let mut out = Vec::new();
    let Some(mut base) = samples.first() else {
        return out;
    };
    for s in &samples[1..] {
        if at(s) - at(base) >= MIN_RATE_INTERVAL_S {
            out.push((base, s));
            base = s;
        }
    }
    out
}

/// The sender's delivery rate between two samples, from segments delivered (acknowledged or
/// SACKed, `tcpi_delivered`) times the MSS. Acknowledged bytes would jump when a recovery ends
/// (one cumulative ACK covers everything SACKed during it: seed 003's rates three times the
/// path's); delivered segments count each when it arrived. `None` before 4.18 kernels.
fn delivery_rate(a: &Sample, b: &Sample) -> Option<f64> {
    let dt = b.at_s.secs() - a.at_s.secs();
    let segs = b.info.delivered?.checked_sub(a.info.delivered?)?;
    let mss = b.info.snd_mss?;
    (dt > 0.0).then(|| f64::from(segs) * f64::from(mss) * 8.0 / dt)
}

/// Drops the samples after the transfer ended: the last intervals of a series often hold
/// only the transfer's last bytes or none (the connection idles until it closes), and drawn
/// as rates they are a plunge to zero that the path never showed. A tail sample goes when
/// its rate is below 5% of the series' largest.
fn trim_tail(series: &mut Vec<SeriesSample>) {
    let peak = series
        .iter()
        .filter_map(|s| s.goodput_bps)
        .fold(0.0, f64::max);
    while series.len() > 1
        && series
            .last()
            .is_some_and(|s| s.goodput_bps.unwrap_or(0.0) < peak * 0.05)
    {
        series.pop();
    }
}

/// Which host sends the data.
fn sender(s: &Settings) -> (&'static str, &'static str) {
    let download = match (
        s.get("workload.direction").map(String::as_str),
        s.get("workload.kind").map(String::as_str),
    ) {
        (Some(d), _) => d == "download",
        (None, Some("http")) => true,
        _ => false,
    };
    if download {
        ("server", "client")
    } else {
        ("client", "server")
    }
}

fn spawn(mut cmd: Command) -> Result<Guard, String> {
    let line = format!("{cmd:?}");
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(|c| Guard(Some(c)))
        .map_err(|e| format!("cannot start {line}: {e}"))
}

fn run_to_end(cmd: Command, limit: Duration) -> Result<std::process::Output, String> {
    run_to_end_allowing(cmd, limit, &[0])
}

/// Like [`run_to_end`], also accepting the exit codes in `ok` (curl's 28: the transfer was cut
/// at `--max-time`, which for a capped download is a measurement, not a failure).
fn run_to_end_allowing(
    mut cmd: Command,
    limit: Duration,
    ok: &[i32],
) -> Result<std::process::Output, String> {
    let line = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {line}: {e}"))?;
    let pid = child.id();
    // Collect the output on a thread (draining the pipes so the child never blocks on them)
    // and wait for it with a deadline.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(r) => r.map_err(|e| format!("{line}: {e}"))?,
        Err(_) => {
            // Our own child, not reaped yet, so the PID is still its.
            let _ = tcptune_os::process::kill(pid, tcptune_os::process::Signal::Kill);
            return Err(format!("{line} did not finish within {limit:?}"));
        }
    };
    if !out.status.code().is_some_and(|c| ok.contains(&c)) {
        // iperf3 --json reports its error in the JSON on stdout, not on stderr.
        let json_error = serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string));
        let why = json_error.unwrap_or_else(|| {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if err.is_empty() {
                let so = String::from_utf8_lossy(&out.stdout);
                so.chars()
                    .skip(so.chars().count().saturating_sub(300))
                    .collect()
            } else {
                err
            }
        });
        return Err(format!("{line} failed ({}): {why}", out.status));
    }
    Ok(out)
}

/// Starts a one-off iperf3 server on the server host and waits until it listens.
fn iperf3_server(hosts: &dyn Hosts, port: u16) -> Result<Guard, String> {
    let mut srv = hosts.command("server", "iperf3");
    srv.args(["-s", "-1", "-p", &port.to_string()]);
    let server = spawn(srv)?;
    wait_listening(&hosts.netns("server"), port, Duration::from_secs(10))?;
    Ok(server)
}

/// A workload's measurement and the time series of both ends.
#[derive(Debug, Clone, Default)]
pub struct WorkloadResult {
    /// The sender's figures.
    pub measurement: Measurement,
    /// The sender's connection.
    pub series: Vec<SeriesSample>,
    /// The receiver's connection: bytes received, the window it advertises, its receive space.
    pub receiver_series: Vec<SeriesSample>,
    /// Captures at both ends: what makes them incomplete (packets tcpdump dropped).
    pub capture_problems: Vec<String>,
}

/// What tcpdump's closing words say it missed ("N packets dropped by kernel"), if anything.
fn capture_drops(host: &str, out: Option<&std::process::Output>) -> Option<String> {
    let Some(out) = out else {
        return Some(format!("the {host}'s capture did not stop cleanly"));
    };
    let text = String::from_utf8_lossy(&out.stderr);
    let dropped = text
        .lines()
        .find_map(|l| l.trim().strip_suffix(" packets dropped by kernel"))
        .and_then(|n| n.trim().parse::<u64>().ok());
    match dropped {
        Some(0) => None,
        Some(n) => Some(format!("the {host}'s capture dropped {n} packets")),
        None => Some(format!(
            "the {host}'s capture said nothing of its drops: {}",
            text.trim().lines().last().unwrap_or("")
        )),
    }
}

/// The receiver's view, from the samples of its busiest connection: its series and the
/// largest receive buffer (`sk_rcvbuf`) it had.
fn receiver_view(samples: Vec<(Dur, DiagSocket)>) -> (Vec<SeriesSample>, Option<u64>) {
    let Some(busiest) = samples
        .iter()
        .max_by_key(|(_, s)| s.info.as_ref().and_then(|i| i.bytes_received).unwrap_or(0))
        .map(|(_, s)| s.cookie)
    else {
        return (Vec::new(), None);
    };
    let mut rcvbuf_peak = None;
    let conn: Vec<(Dur, tcptune_kernel::tcp_info::TcpInfo)> = samples
        .into_iter()
        .filter(|(_, s)| s.cookie == busiest)
        .filter_map(|(at, s)| {
            if let Some(m) = s.skmem {
                rcvbuf_peak = rcvbuf_peak.max(Some(u64::from(m.rcvbuf)));
            }
            Some((at, s.info?))
        })
        .collect();
    let Some(t0) = conn.first().map(|(at, _)| at.secs()) else {
        return (Vec::new(), rcvbuf_peak);
    };
    let series = spaced_pairs(&conn, |(t, _)| t.secs())
        .into_iter()
        .map(|((ta, a), (tb, b))| {
            let dt = tb.secs() - ta.secs();
            let got = b
                .bytes_received
                .zip(a.bytes_received)
                .map(|(b, a)| b.saturating_sub(a));
            SeriesSample {
                t_s: tb.secs() - t0,
                goodput_bps: got.filter(|_| dt > 0.0).map(|g| g as f64 * 8.0 / dt),
                snd_cwnd_bytes: None,
                rwnd_bytes: b.rcv_wnd.map(u64::from),
                rtt_s: b.rcv_rtt_us.filter(|r| *r > 0).map(|r| r as f64 / 1e6),
                retransmits: None,
                rcv_space_bytes: b.rcv_space.map(u64::from),
                rcv_ssthresh_bytes: b.rcv_ssthresh.map(u64::from),
            }
        })
        .collect();
    (series, rcvbuf_peak)
}

/// The programs a trial with these settings runs (so a missing one is reported before the first
/// trial, not by every trial).
pub fn programs(s: &Settings) -> Vec<&'static str> {
    let mut p = vec!["ip"];
    match s
        .get("workload.kind")
        .map(String::as_str)
        .unwrap_or("iperf3")
    {
        "http" => p.extend(["python3", "curl"]),
        "command" => p.push("sh"),
        _ => p.push("iperf3"),
    }
    if s.contains_key("capture.snaplen") {
        p.push("tcpdump");
    }
    if s.contains_key("client.cpu") || s.contains_key("server.cpu") {
        p.push("taskset");
    }
    p
}

/// Runs the point's workload once and measures it. `port` should differ between trials that
/// might overlap; `capture` says where to record packets.
pub fn run(
    hosts: &dyn Hosts,
    s: &Settings,
    port: u16,
    capture: Option<Captures>,
) -> Result<WorkloadResult, String> {
    let kind = s
        .get("workload.kind")
        .map(String::as_str)
        .unwrap_or("iperf3");
    let duration = s
        .get("workload.duration")
        .and_then(|d| d.parse::<Dur>().ok())
        .unwrap_or(Dur::from_millis(10_000));
    let path_rate = ["link.rate", "link.up.rate", "link.down.rate"]
        .iter()
        .find_map(|k| s.get(*k)?.parse::<Rate>().ok());
    let (send_host, _recv_host) = sender(s);
    let server_addr = hosts.address("server");

    let (joined, caps) = start_captures(hosts, port, capture)?;
    let (filter, recv_filter): (String, String) = match send_host {
        "client" => (format!("dport {port}"), format!("sport {port}")),
        _ => (format!("sport {port}"), format!("dport {port}")),
    };
    let filter: Filter = filter.parse().map_err(|e| format!("{e}"))?;
    let recv_filter: Filter = recv_filter.parse().map_err(|e| format!("{e}"))?;
    let recv_host = if send_host == "client" {
        "server"
    } else {
        "client"
    };
    // The receiver's socket is sampled from the moment its server listens (or at once).
    let mut receiver: Option<Sampler> = None;
    let mut start_receiver = || -> Result<(), String> {
        if receiver.is_none() {
            receiver = Some(Sampler::start(
                hosts.netns(recv_host),
                recv_filter.clone(),
                Duration::from_millis(100),
            )?);
        }
        Ok(())
    };

    let t = Trial {
        hosts,
        s,
        port,
        server_addr,
        send_host,
        duration,
    };
    let (measured, observed) = match kind {
        "iperf3" | "bulk" => run_iperf3(&t, filter, &mut start_receiver)?,
        "http" => run_http(&t, filter, &mut start_receiver)?,
        "command" => run_command(&t, filter, &mut start_receiver)?,
        other => return Err(format!("workload kind '{other}' is unknown")),
    };
    if joined {
        // The last packets (FIN, the final ACKs) may still be on the link.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !hosts.link_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let mut capture_problems = Vec::new();
    for (host, g) in caps {
        let out = g.stop();
        if joined {
            capture_problems.extend(capture_drops(host, out.as_ref()));
        }
    }
    let (receiver_series, rcvbuf_peak) = match receiver {
        Some(r) => receiver_view(r.finish()?),
        None => (Vec::new(), None),
    };
    let mut m = measured;
    m.rcvbuf_peak_bytes = rcvbuf_peak;
    let mut series = Vec::new();
    let streams = s
        .get("workload.parallel")
        .and_then(|p| p.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    // iperf3 writes as fast as the socket takes (the workloads have no rate cap): a bulk
    // sender, never application limited. An http or command workload sets its own pace.
    let bulk = s.get("workload.kind").is_none_or(|k| k == "iperf3");
    if let Some(o) = observe(observed, path_rate, streams, bulk) {
        m.retransmits = m.retransmits.or(o.retransmits);
        m.rtt_min_s = o.rtt_min_s;
        m.rtt_mean_s = o.rtt_mean_s;
        m.rtt_p99_s = o.rtt_p99_s;
        m.limits = o.limits;
        m.verdict = o.verdict;
        m.limit = Some(o.limit);
        m.limit_share = o.limit_share;
        m.sndbuf_peak_bytes = o.sndbuf_peak_bytes;
        series = o.series;
    }
    Ok(WorkloadResult {
        measurement: m,
        series,
        receiver_series,
        capture_problems,
    })
}

/// What every workload kind needs to know about the trial.
#[derive(Clone, Copy)]
struct Trial<'a> {
    hosts: &'a dyn Hosts,
    s: &'a Settings,
    port: u16,
    server_addr: IpAddr,
    /// The host whose socket sends the data ("client" or "server").
    send_host: &'static str,
    duration: Dur,
}

/// What a workload kind returns: its own measurement and the sender's sampled sockets.
type Measured = Result<(Measurement, Vec<(Dur, DiagSocket)>), String>;

/// iperf3 (or a bulk transfer): primed connections first when asked, then one timed test.
fn run_iperf3(
    t: &Trial,
    filter: Filter,
    start_receiver: &mut dyn FnMut() -> Result<(), String>,
) -> Measured {
    let Trial {
        hosts,
        s,
        port,
        server_addr,
        duration,
        ..
    } = *t;
    // Short transfers first, so the client's TCP metrics cache knows the server (the
    // only way a route's ssthresh reaches a connection: tcp_init_metrics reads the
    // cache entry that an earlier connection to the destination left).
    let primes: u32 = s
        .get("workload.prime_connections")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for _ in 0..primes {
        let server = iperf3_server(hosts, port)?;
        let mut cli = hosts.command("client", "iperf3");
        cli.args([
            "-c",
            &server_addr.to_string(),
            "-p",
            &port.to_string(),
            "-n",
            "100K",
            "--json",
        ]);
        run_to_end(cli, Duration::from_secs(30))?;
        // The one-off server exits after its test: let it close its sockets itself. A
        // signal now would reset the connection, and a reset writes no metrics.
        server.wait(Duration::from_secs(5));
        // The cache entry is written as the connection reaches TIME_WAIT, an RTT after
        // the client is done: the measured connection must not start before that.
        let to_server: Filter = format!("dport {port}")
            .parse()
            .map_err(|e| format!("{e}"))?;
        wait_closed(&hosts.netns("client"), &to_server, Duration::from_secs(5));
    }
    let server = iperf3_server(hosts, port)?;
    start_receiver()?;
    let sampler = Sampler::start(hosts.netns(t.send_host), filter, Duration::from_millis(50))?;
    let mut cli = hosts.command("client", "iperf3");
    cli.args([
        "-c",
        &server_addr.to_string(),
        "-p",
        &port.to_string(),
        "--json",
    ]);
    cli.args(["-t", &format!("{:.3}", duration.secs())]);
    if t.send_host == "server" {
        cli.arg("-R");
    }
    if let Some(p) = s.get("workload.parallel") {
        cli.args(["-P", p]);
    }
    if let Some(cc) = s.get("workload.cc") {
        cli.args(["-C", cc]);
    }
    if let Some(w) = s.get("workload.window").filter(|w| *w != "none") {
        // iperf3 -w sets SO_SNDBUF and SO_RCVBUF on both ends' data sockets.
        let w = w.parse::<Bytes>().map_err(|e| e.to_string())?;
        cli.args(["-w", &w.get().to_string()]);
    }
    let out = run_to_end(cli, duration.std() + Duration::from_secs(30));
    let samples = sampler.finish();
    drop(server);
    let out = out?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("iperf3 printed no JSON result ({e})"))?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(format!("iperf3: {err}"));
    }
    let recv = &v["end"]["sum_received"];
    let m = Measurement {
        goodput_bps: recv["bits_per_second"]
            .as_f64()
            .ok_or("iperf3 reported no throughput")?,
        bytes: recv["bytes"].as_u64().unwrap_or(0),
        duration_s: recv["seconds"].as_f64().unwrap_or(duration.secs()),
        retransmits: v["end"]["sum_sent"]["retransmits"].as_u64(),
        ..Default::default()
    };
    Ok((m, samples?))
}

/// An HTTP download of a sparse file from python3's http.server with curl.
fn run_http(
    t: &Trial,
    filter: Filter,
    start_receiver: &mut dyn FnMut() -> Result<(), String>,
) -> Measured {
    let Trial {
        hosts,
        s,
        port,
        server_addr,
        duration,
        ..
    } = *t;
    let size = s
        .get("workload.file_size")
        .and_then(|b| b.parse::<Bytes>().ok())
        .unwrap_or(Bytes::new(100_000_000));
    let dir = std::env::temp_dir().join(format!("tcptune-http-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = std::fs::File::create(dir.join("file")).map_err(|e| e.to_string())?;
    file.set_len(size.get()).map_err(|e| e.to_string())?;
    let mut srv = hosts.command("server", "python3");
    srv.args([
        "-m",
        "http.server",
        &port.to_string(),
        "--bind",
        &server_addr.to_string(),
        "--directory",
    ])
    .arg(&dir);
    let server = spawn(srv)?;
    let listening = wait_listening(&hosts.netns("server"), port, Duration::from_secs(10));
    start_receiver()?;
    let sampler = Sampler::start(hosts.netns(t.send_host), filter, Duration::from_millis(50))?;
    let mut cli = hosts.command("client", "curl");
    let host = match server_addr {
        IpAddr::V6(a) => format!("[{a}]"),
        IpAddr::V4(a) => a.to_string(),
    };
    cli.args([
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{size_download} %{time_total}",
    ]);
    cli.args(["--max-time", &format!("{:.0}", duration.secs().max(1.0))]);
    cli.arg(format!("http://{host}:{port}/file"));
    let out = listening.and_then(|()| {
        run_to_end_allowing(cli, duration.std() + Duration::from_secs(30), &[0, 28])
    });
    let samples = sampler.finish();
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    let bytes: u64 = it
        .next()
        .and_then(|b| b.parse().ok())
        .ok_or("curl reported no size")?;
    let secs: f64 = it
        .next()
        .and_then(|t| t.parse().ok())
        .ok_or("curl reported no time")?;
    let m = Measurement {
        goodput_bps: bytes as f64 * 8.0 / secs.max(1e-9),
        bytes,
        duration_s: secs,
        ..Default::default()
    };
    Ok((m, samples?))
}

/// The spec's own commands: an optional server command and the client command, timed.
fn run_command(
    t: &Trial,
    filter: Filter,
    start_receiver: &mut dyn FnMut() -> Result<(), String>,
) -> Measured {
    let Trial {
        hosts, s, duration, ..
    } = *t;
    let server = match s.get("workload.server_command") {
        Some(c) => {
            let mut cmd = hosts.command("server", "sh");
            cmd.args(["-c", c]);
            Some(spawn(cmd)?)
        }
        None => None,
    };
    start_receiver()?;
    let sampler = Sampler::start(hosts.netns(t.send_host), filter, Duration::from_millis(50))?;
    let started = Instant::now();
    let client = s
        .get("workload.client_command")
        .ok_or("workload kind command needs workload.client_command")?;
    let mut cmd = hosts.command("client", "sh");
    cmd.args(["-c", client]);
    let out = run_to_end(cmd, duration.std() + Duration::from_secs(30));
    let secs = started.elapsed().as_secs_f64();
    let samples = sampler.finish()?;
    drop(server);
    out?;
    // Goodput from what the busiest connection had acknowledged.
    let bytes = samples
        .iter()
        .filter_map(|(_, s)| s.info.as_ref()?.bytes_acked)
        .max()
        .unwrap_or(0);
    let m = Measurement {
        goodput_bps: bytes as f64 * 8.0 / secs.max(1e-9),
        bytes,
        duration_s: secs,
        ..Default::default()
    };
    Ok((m, samples))
}

/// A running tcpdump and the host it captures on.
type Tcpdump = (&'static str, Guard);

/// Starts tcpdump on each host that captures, waiting (for a joined capture) until it listens.
fn start_captures(
    hosts: &dyn Hosts,
    port: u16,
    capture: Option<Captures>,
) -> Result<(bool, Vec<Tcpdump>), String> {
    let joined = capture.is_some_and(|c| c.server.is_some());
    let mut caps = Vec::new();
    if let Some(c) = capture {
        for (host, path) in [("client", Some(c.client)), ("server", c.server)] {
            let Some(path) = path else { continue };
            let mut cmd = hosts.command(host, "tcpdump");
            cmd.args(["-i", "any", "-s", &c.snaplen.to_string(), "-U"]);
            if joined {
                // Stamps as fine as the kernel takes them, each packet handed over at once, and
                // an 8 MB buffer: a packet the capture dropped would pass for one the link lost.
                cmd.args([
                    "--time-stamp-precision=nano",
                    "--immediate-mode",
                    "-B",
                    "8192",
                ]);
            }
            cmd.arg("-w").arg(path);
            cmd.args(["tcp", "port", &port.to_string()]);
            let mut g = spawn(cmd)?;
            if joined {
                g.wait_for_line("listening on")
                    .map_err(|e| format!("tcpdump on the {host}: {e}"))?;
            }
            caps.push((host, g));
        }
    }

    Ok((joined, caps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_never_taken_over_slivers() {
        // Polls every 50 ms, then a destroy event 3 ms after the last poll.
        let at = [0.0, 0.05, 0.10, 0.15, 0.153];
        let pairs = spaced_pairs(&at, |t| *t);
        assert_eq!(
            pairs.iter().map(|(a, b)| (**a, **b)).collect::<Vec<_>>(),
            [(0.0, 0.05), (0.05, 0.10), (0.10, 0.15)]
        );
        // Samples bunched together are merged into one interval that spans enough time.
        let at = [0.0, 0.01, 0.02, 0.03, 0.08];
        let pairs = spaced_pairs(&at, |t| *t);
        assert_eq!(
            pairs.iter().map(|(a, b)| (**a, **b)).collect::<Vec<_>>(),
            [(0.0, 0.03), (0.03, 0.08)]
        );
        assert!(spaced_pairs::<f64>(&[], |t| *t).is_empty());
    }

    #[test]
    fn the_delivery_rate_counts_segments_as_they_arrive() {
        let at = |t: u64, delivered: u32, acked: u64| Sample {
            at_s: Dur::from_millis(t),
            info: tcptune_kernel::tcp_info::TcpInfo {
                delivered: Some(delivered),
                snd_mss: Some(1448),
                bytes_acked: Some(acked),
                ..Default::default()
            },
            skmem: None,
        };
        // 100 segments in 50 ms, though a recovery's cumulative ACK acknowledged 3× as much.
        let (a, b) = (at(0, 1000, 1_000_000), at(50, 1100, 1_434_400));
        let r = delivery_rate(&a, &b).unwrap();
        assert!((r - 100.0 * 1448.0 * 8.0 / 0.05).abs() < 1e-6, "{r}");
        // Without the field (kernels before 4.18) there is no delivery rate.
        let mut old = b.clone();
        old.info.delivered = None;
        assert_eq!(delivery_rate(&a, &old), None);
    }

    #[test]
    fn the_idle_tail_after_the_transfer_is_not_a_rate() {
        let s = |g: f64| SeriesSample {
            goodput_bps: Some(g),
            ..Default::default()
        };
        let mut v = vec![s(1e6), s(90e6), s(2e6), s(95e6), s(1e5), s(0.0)];
        trim_tail(&mut v);
        // A dip inside the transfer stays; the tail after it goes.
        assert_eq!(v.len(), 4);
        let mut flat = vec![s(0.0), s(0.0)];
        trim_tail(&mut flat);
        assert_eq!(flat.len(), 2, "a series that never moved stays as it is");
    }
}
