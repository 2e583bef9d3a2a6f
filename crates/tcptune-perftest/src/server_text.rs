//! One test's iperf3 text on a server (`tcptune iperf3 -s`): the data connections' lines, the
//! server's own interval reports on its clock (iperf3's server prints them too), and its final
//! block. The formats are `iperf3_text`'s; this keeps the per-test state between the server
//! loop's rounds.

use std::time::Duration;

use tcptune_iperf3::udp::UdpReceiver;
use tcptune_iperf3::{Direction, Params, Protocol};

use crate::data::{retrans_of, DataPhase, StreamOutcome};
use crate::iperf3_text::{
    self, Intervals, Layout, ServerStream, ServerTotal, Side, Ticker, UdpCounts,
};
use crate::server_conn::Conn;
use crate::server_json::{self, ServerFacts, TestJson};
use crate::test_report::DiskFile;
use crate::udp::UdpOutcome;

/// How a server printing iperf3's text reports (its own `-i` and `-f`).
#[derive(Debug, Clone, Copy)]
pub struct TextOptions {
    /// Interval reports every this long; none = none (`-i 0`).
    pub interval: Option<Duration>,
    /// iperf3's `-f` letter (`a`: adaptive bits).
    pub unit: char,
    /// `-J`: each test's JSON document when it ends, instead of the text.
    pub json: bool,
}

/// What the streams counted at a moment.
pub enum Counts {
    /// A TCP test's streams.
    Tcp {
        /// Each stream's bytes so far.
        bytes: Vec<u64>,
        /// Each stream's latest tcp_info sample.
        latest: Vec<Option<tcptune_diagnose::Sample>>,
    },
    /// A UDP test's streams.
    Udp(Vec<UdpCounts>),
}

impl Counts {
    /// A TCP test's counts now.
    pub fn tcp(data: &DataPhase) -> Counts {
        Counts::Tcp {
            bytes: data.bytes(),
            latest: data.latest(),
        }
    }

    /// A UDP test's counts from its receivers' accounting.
    pub fn udp(counts: &[UdpReceiver]) -> Counts {
        Counts::Udp(
            counts
                .iter()
                .map(|c| UdpCounts {
                    bytes: c.bytes,
                    packets: c.packet_count,
                    lost: c.cnt_error,
                    jitter_s: c.jitter,
                })
                .collect(),
        )
    }

    fn moved(&self, since: &Ticker) -> bool {
        let mut t = since.clone();
        let r = match self {
            Counts::Tcp { bytes, latest } => t.report(1.0, bytes, latest, false),
            Counts::Udp(u) => t.report_udp(1.0, u, false),
        };
        r.streams.iter().any(|s| s.bytes > 0)
    }
}

/// The iperf3 text state of one test (or, under `-J`, its document's).
pub struct TestText {
    json: Option<TestJson>,
    /// The finished `-J` document.
    doc: Option<serde_json::Value>,
    layout: Layout,
    period: Option<f64>,
    ticker: Ticker,
    intervals: Intervals,
    /// When the next interval ends, seconds on the current count (from 0, or from `-O`'s end).
    next: f64,
    /// When the last report ended, on the current count.
    prev: f64,
}

impl TestText {
    /// Prints the data connections' lines and readies the interval reports.
    pub fn new(
        o: TextOptions,
        params: &Params,
        conns: &[Conn],
        facts: &ServerFacts,
        say: &dyn Fn(Vec<String>),
    ) -> TestText {
        let layout = Layout {
            side: Side::Server,
            udp: params.protocol == Protocol::Udp,
            bidir: params.direction == Direction::Bidirectional,
            streams: params.parallel,
            unit: o.unit,
            reverse_plain: false,
        };
        let json = o.json.then(|| TestJson::new(params, conns, facts));
        say(conns
            .iter()
            .filter(|_| json.is_none())
            .map(|c| {
                iperf3_text::connected(&crate::test_report::Connected {
                    socket: c.fd,
                    local_host: c.local.map(|a| a.ip().to_string()).unwrap_or_default(),
                    local_port: c.local.map(|a| a.port()).unwrap_or(0),
                    remote_host: c.remote.map(|a| a.ip().to_string()).unwrap_or_default(),
                    remote_port: c.remote.map(|a| a.port()).unwrap_or(0),
                })
            })
            .collect());
        let period = o.interval.map(|d| d.as_secs_f64()).filter(|&p| p > 0.0);
        TestText {
            json,
            doc: None,
            ticker: Ticker::new(
                conns
                    .iter()
                    .map(|c| ServerStream {
                        fd: c.fd,
                        sends: c.sends,
                    })
                    .collect(),
            ),
            intervals: Intervals::new(layout.clone()),
            layout,
            next: period.unwrap_or(f64::INFINITY),
            prev: 0.0,
            period,
        }
    }

    fn report(&mut self, at: f64, counts: &Counts, omitted: bool) -> Vec<String> {
        let r = match counts {
            Counts::Tcp { bytes, latest } => self.ticker.report(at, bytes, latest, omitted),
            Counts::Udp(u) => self.ticker.report_udp(at, u, omitted),
        };
        self.prev = at;
        match self.json.as_mut() {
            Some(j) => {
                j.interval(r);
                Vec::new()
            }
            None => self.intervals.lines(&r),
        }
    }

    /// Reports the interval that ended by `now` (seconds on the current count); returns how
    /// long until the next one ends.
    pub fn tick(
        &mut self,
        now: f64,
        omitting: bool,
        counts: impl FnOnce() -> Counts,
        say: &dyn Fn(Vec<String>),
    ) -> Duration {
        let Some(period) = self.period else {
            return Duration::from_secs(1);
        };
        if now >= self.next {
            let at = self.next;
            let lines = self.report(at, &counts(), omitting);
            say(lines);
            self.next += period;
        }
        Duration::from_secs_f64((self.next - now).clamp(0.001, 1.0))
    }

    /// `-O`'s seconds ended at `now` (on the omitting count) with the streams at `at_end`: the
    /// rest of them is reported as omitted, and counting starts again from there.
    pub fn omit_ended(&mut self, now: f64, at_end: &Counts, say: &dyn Fn(Vec<String>)) {
        if self.period.is_some() && now - self.prev > 1e-3 {
            let lines = self.report(now, at_end, true);
            say(lines);
        }
        match at_end {
            Counts::Tcp { bytes, .. } => self.ticker.restart(bytes),
            Counts::Udp(u) => self.ticker.restart_udp(u),
        }
        self.prev = 0.0;
        self.next = self.period.unwrap_or(f64::INFINITY);
    }

    /// The test ended at `secs`: a last, partial interval, printed as iperf3 prints it (when
    /// it lasted a tenth of the period or moved bytes).
    pub fn last(&mut self, secs: f64, omitting: bool, counts: &Counts, say: &dyn Fn(Vec<String>)) {
        let Some(period) = self.period else { return };
        let long = secs - self.prev >= 0.1 * period;
        // A test over in less than a millisecond (`-F` of a small file) still reports what it
        // moved, as iperf3's "0.00-0.00" row.
        if (long && secs - self.prev > 1e-3) || counts.moved(&self.ticker) {
            let lines = self.report(secs, counts, omitting);
            say(lines);
        }
    }

    /// The final block of a TCP test, from what each stream moved over `secs` (or `-J`'s
    /// document, with this end's CPU use `cpu`: user, system, percent); `diskfile`: `-F`'s
    /// file name and its size now.
    pub fn finish(
        &mut self,
        outcomes: &[StreamOutcome],
        secs: f64,
        diskfile: Option<(&str, u64)>,
        cpu: (f64, f64),
    ) -> Vec<String> {
        if let Some(j) = &self.json {
            let doc = j.finish_tcp(outcomes, secs, cpu);
            let lines = server_json::lines(&doc);
            self.doc = Some(doc);
            return lines;
        }
        let totals: Vec<ServerTotal> = outcomes
            .iter()
            .map(|o| ServerTotal {
                fd: o.fd,
                sends: o.sends,
                bytes: o.bytes,
                retransmits: o.sends.then(|| retrans_of(&o.samples).unwrap_or(0)),
                udp: None,
                // What this end moved stands for what was sent: the server prints its block
                // before the client's figures arrive.
                diskfile: diskfile.map(|(name, size)| DiskFile::of(o.bytes, size, name)),
            })
            .collect();
        iperf3_text::server_final_block(&self.layout, &totals, secs)
    }

    /// The final block of a UDP test: each stream's counts less those of `-O`'s seconds.
    pub fn finish_udp(
        &mut self,
        outcomes: &[UdpOutcome],
        omitted: Option<&[UdpReceiver]>,
        secs: f64,
        cpu: (f64, f64),
    ) -> Vec<String> {
        if let Some(j) = &self.json {
            let doc = j.finish_udp(outcomes, omitted, secs, cpu);
            let lines = server_json::lines(&doc);
            self.doc = Some(doc);
            return lines;
        }
        let fds: Vec<i32> = self.ticker.fds();
        let totals: Vec<ServerTotal> = outcomes
            .iter()
            .enumerate()
            .map(|(k, o)| {
                let before = omitted.and_then(|v| v.get(k)).cloned().unwrap_or_default();
                let c = &o.counts;
                ServerTotal {
                    fd: fds.get(k).copied().unwrap_or(0),
                    sends: o.sends,
                    bytes: c.bytes.saturating_sub(before.bytes),
                    retransmits: None,
                    udp: Some(UdpCounts {
                        bytes: c.bytes.saturating_sub(before.bytes),
                        packets: c.packet_count.saturating_sub(before.packet_count),
                        lost: c.cnt_error.saturating_sub(before.cnt_error),
                        jitter_s: c.jitter,
                    }),
                    diskfile: None,
                }
            })
            .collect();
        iperf3_text::server_final_block(&self.layout, &totals, secs)
    }

    /// The `-J` document, once the test finished.
    pub fn document(&self) -> Option<&serde_json::Value> {
        self.doc.as_ref()
    }
}
