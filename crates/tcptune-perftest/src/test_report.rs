//! What a test prints: interval reports while it runs and the final summary, in iperf3's JSON
//! shape where iperf3 has the field (`start`, `intervals[].streams/sum`, `end.streams[].sender/
//! receiver`, `end.sum_sent/sum_received`, `cpu_utilization_percent`), plus tcptune's own
//! `tcptune` object with the tcp_info samples and the diagnosis.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_diagnose::throughput::TestDiagnosis;
use tcptune_diagnose::Sample;
use tcptune_model::Rate;

/// One data connection (iperf3's `start.connected[]`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Connected {
    /// iperf3's stream id: the data socket's descriptor.
    pub socket: i32,
    /// The local address.
    pub local_host: String,
    /// The local port.
    pub local_port: u16,
    /// The peer's address.
    pub remote_host: String,
    /// The peer's port.
    pub remote_port: u16,
}

/// The server the client connects to (iperf3's `start.connecting_to`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ConnectingTo {
    /// The server's host name or address.
    pub host: String,
    /// The server's TCP port.
    pub port: u16,
}

/// The test's settings (iperf3's `start.test_start`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TestStart {
    /// "TCP" or "UDP".
    pub protocol: String,
    /// Streams per direction (`-P`).
    pub num_streams: u32,
    /// Bytes per write (`-l`).
    pub blksize: u32,
    /// Omitted seconds (`-O`).
    pub omit: u32,
    /// Test length, seconds (`-t`).
    pub duration: u32,
    /// Bytes moved.
    pub bytes: u64,
    /// Blocks to send (`-k`), 0 for none.
    pub blocks: u64,
    /// 1 for a reverse test (`-R`).
    pub reverse: u32,
    /// The IP TOS byte (`-S`).
    pub tos: u32,
    /// The `-b` rate per stream, bits/s (0: unlimited).
    pub target_bitrate: u64,
    /// 1 for a bidirectional test (iperf3 3.7+).
    pub bidir: u32,
}

/// When the test started (iperf3's `start.timestamp`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Timestamp {
    /// RFC 7231 date, as iperf3 writes it: "Tue, 24 Nov 2026 02:18:54 GMT".
    pub time: String,
    /// Seconds since the Unix epoch.
    pub timesecs: u64,
}

impl Timestamp {
    /// The time `timesecs` seconds after the Unix epoch.
    pub fn at(timesecs: u64) -> Timestamp {
        Timestamp {
            time: http_date(timesecs),
            timesecs,
        }
    }
}

/// Seconds since the epoch as an RFC 7231 date (the proleptic Gregorian calendar, UTC).
pub fn http_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// iperf3's `start`: the connections, the host, the cookie and the settings.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Start {
    /// The data connections.
    pub connected: Vec<Connected>,
    /// The client's version string.
    pub version: String,
    /// The client host's `uname -a`-like line.
    pub system_info: String,
    /// When the test started.
    pub timestamp: Timestamp,
    /// The server the client connects to.
    pub connecting_to: ConnectingTo,
    /// The test's cookie.
    pub cookie: String,
    /// The `-M` asked for (iperf3 writes this or `tcp_mss_default`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_mss: Option<u32>,
    /// TCP_MAXSEG of the control connection, bytes, when no `-M` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_mss_default: Option<u32>,
    /// The `-b` rate per stream, bits/s (0: unlimited).
    pub target_bitrate: u64,
    /// The `-w` value asked for, 0 when not given.
    pub sock_bufsize: u32,
    /// SO_SNDBUF and SO_RCVBUF of the first data connection as the kernel set them.
    pub sndbuf_actual: u32,
    /// SO_RCVBUF of the first data connection, bytes.
    pub rcvbuf_actual: u32,
    /// The test's settings.
    pub test_start: TestStart,
}

/// One stream's figures over one reporting interval (iperf3's `intervals[].streams[]`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct IntervalStream {
    /// iperf3's stream id: the data socket's descriptor.
    pub socket: i32,
    /// Seconds since the test started.
    pub start: f64,
    /// Seconds from the start of the count where this span ends.
    pub end: f64,
    /// The span's length, seconds.
    pub seconds: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// The rate over the span, bits per second.
    pub bits_per_second: f64,
    /// Segments retransmitted in the interval (senders only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Congestion window, bytes (senders only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snd_cwnd: Option<u64>,
    /// The peer's receive window, bytes (senders only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snd_wnd: Option<u32>,
    /// Smoothed RTT, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt: Option<u32>,
    /// RTT variation, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rttvar: Option<u32>,
    /// Path MTU, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pmtu: Option<u32>,
    /// Our receive window, bytes (tcptune; receivers show it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rcv_wnd: Option<u32>,
    /// A UDP test's datagram figures.
    #[serde(flatten)]
    pub udp: Option<UdpFigures>,
    /// Whether the span falls in `-O`'s omitted seconds.
    pub omitted: bool,
    /// Whether this end sends on it (or, in a sum, the direction it sums).
    pub sender: bool,
}

/// A UDP test's figures (iperf3's names): a sender has `packets` only; a receiver also its
/// jitter and loss.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct UdpFigures {
    /// Jitter, milliseconds (receivers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    /// Datagrams lost (receivers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_packets: Option<u64>,
    /// Datagrams sent or received.
    pub packets: u64,
    /// Share of datagrams lost, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_percent: Option<f64>,
}

/// The sum over streams of one direction (iperf3's `intervals[].sum`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct IntervalSum {
    /// Seconds from the start of the count where this span begins.
    pub start: f64,
    /// Seconds from the start of the count where this span ends.
    pub end: f64,
    /// The span's length, seconds.
    pub seconds: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// The rate over the span, bits per second.
    pub bits_per_second: f64,
    /// Segments retransmitted (senders only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// A UDP test's datagram figures.
    #[serde(flatten)]
    pub udp: Option<UdpFigures>,
    /// Whether the span falls in `-O`'s omitted seconds.
    pub omitted: bool,
    /// Whether this end sends on it (or, in a sum, the direction it sums).
    pub sender: bool,
}

/// One interval's report: each stream and the sums (iperf3's `intervals[]`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct IntervalReport {
    /// Each stream's figures.
    pub streams: Vec<IntervalStream>,
    /// The main direction's sum.
    pub sum: IntervalSum,
    /// Bidirectional tests: the sum of the streams in the other direction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_bidir_reverse: Option<IntervalSum>,
}

/// One side of a stream over the whole test (iperf3's `end.streams[].sender/receiver`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EndSide {
    /// iperf3's stream id: the data socket's descriptor.
    pub socket: i32,
    /// Seconds from the start of the count where this span begins.
    pub start: f64,
    /// Seconds from the start of the count where this span ends.
    pub end: f64,
    /// The span's length, seconds.
    pub seconds: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// The rate over the span, bits per second.
    pub bits_per_second: f64,
    /// Segments retransmitted (senders only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<i64>,
    /// Largest congestion window seen, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_snd_cwnd: Option<u64>,
    /// Largest peer receive window seen, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_snd_wnd: Option<u32>,
    /// Largest smoothed RTT seen, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rtt: Option<u32>,
    /// Smallest smoothed RTT seen, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rtt: Option<u32>,
    /// Mean smoothed RTT, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_rtt: Option<u32>,
    /// Whether this end sends on the stream (iperf3's meaning: the same in both rows).
    pub sender: bool,
    /// Whether this row is the sender's (its figures and the text's "sender" label).
    #[serde(skip)]
    #[schemars(skip)]
    pub sender_row: bool,
}

/// One stream over the whole test: a TCP stream's two sides, or a UDP stream's one row.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EndStream {
    /// Whether this end sends on it (or, in a sum, the direction it sums).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<EndSide>,
    /// The receiving side's figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver: Option<EndSide>,
    /// A UDP stream (iperf3's `end.streams[].udp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpEnd>,
    /// `-F`'s file (iperf3's `end.streams[].diskfile`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diskfile: Option<DiskFile>,
}

/// What a stream sent of `-F`'s file, as iperf3 reports it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct DiskFile {
    /// Bytes the stream's sender sent.
    pub sent: u64,
    /// The file's size at the end of the test, bytes.
    pub size: u64,
    /// `sent` as a whole percentage of `size` (0 for an empty file).
    pub percent: i64,
    /// The file as given.
    pub filename: String,
}

impl DiskFile {
    /// `sent` bytes of a file of `size` bytes named `filename`.
    pub fn of(sent: u64, size: u64, filename: &str) -> DiskFile {
        DiskFile {
            sent,
            size,
            percent: if size == 0 {
                0
            } else {
                (sent as f64 / size as f64 * 100.0) as i64
            },
            filename: filename.to_string(),
        }
    }
}

/// A UDP stream over the whole test, as iperf3 reports it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UdpEnd {
    /// iperf3's stream id: the data socket's descriptor.
    pub socket: i32,
    /// Seconds from the start of the count where this span begins.
    pub start: f64,
    /// Seconds from the start of the count where this span ends.
    pub end: f64,
    /// The span's length, seconds.
    pub seconds: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// The rate over the span, bits per second.
    pub bits_per_second: f64,
    /// Jitter, milliseconds (receivers).
    pub jitter_ms: f64,
    /// Datagrams lost (receivers).
    pub lost_packets: u64,
    /// Datagrams sent or received.
    pub packets: u64,
    /// Share of datagrams lost, percent.
    pub lost_percent: f64,
    /// Datagrams that arrived out of order.
    pub out_of_order: u64,
    /// Whether this end sends on it (or, in a sum, the direction it sums).
    pub sender: bool,
}

/// A direction's totals over the test (iperf3's `end.sum_sent` and the like).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EndSum {
    /// Seconds from the start of the count where this span begins.
    pub start: f64,
    /// Seconds from the start of the count where this span ends.
    pub end: f64,
    /// The span's length, seconds.
    pub seconds: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// The rate over the span, bits per second.
    pub bits_per_second: f64,
    /// Segments retransmitted (senders only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<i64>,
    /// A UDP test's datagram figures.
    #[serde(flatten)]
    pub udp: Option<UdpFigures>,
    /// Whether this end sends on it (or, in a sum, the direction it sums).
    pub sender: bool,
}

/// CPU use of both ends over the test, percent (iperf3's `end.cpu_utilization_percent`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CpuUtilization {
    /// This end's CPU use, percent.
    pub host_total: f64,
    /// This end's user CPU, percent.
    pub host_user: f64,
    /// This end's system CPU, percent.
    pub host_system: f64,
    /// The other end's CPU use, percent.
    pub remote_total: f64,
    /// The other end's user CPU, percent.
    pub remote_user: f64,
    /// The other end's system CPU, percent.
    pub remote_system: f64,
}

/// iperf3's `end`: each stream's totals, the sums, CPU use and congestion control.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct End {
    /// Each stream's figures.
    pub streams: Vec<EndStream>,
    /// A UDP test's sum of its main direction (iperf3's `end.sum`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum: Option<EndSum>,
    /// A bidirectional UDP test's sum of the other direction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_bidir_reverse: Option<EndSum>,
    /// What the senders of the main direction sent.
    pub sum_sent: EndSum,
    /// What the receivers of the main direction received.
    pub sum_received: EndSum,
    /// The other direction's sent sum (`--bidir`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_sent_bidir_reverse: Option<EndSum>,
    /// The other direction's received sum (`--bidir`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_received_bidir_reverse: Option<EndSum>,
    /// CPU use of both ends, percent.
    pub cpu_utilization_percent: CpuUtilization,
    /// The sender's congestion control.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_tcp_congestion: Option<String>,
    /// The receiver's congestion control.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver_tcp_congestion: Option<String>,
}

/// Which end took a stream's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SampledAt {
    /// The client's end.
    Client,
    /// The server's end.
    Server,
}

/// One stream's tcp_info samples, from one end.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StreamSamples {
    /// iperf3's stream id.
    pub id: u32,
    /// Which end took the samples.
    pub at: SampledAt,
    /// True when that end sent on the stream.
    pub sender: bool,
    /// tcp_info samples, oldest first.
    pub samples: Vec<Sample>,
}

/// tcptune's additions to iperf3's output.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Extension {
    /// Sampling period of tcp_info, seconds.
    pub sample_period_s: f64,
    /// True when the server was a tcptune server and sent its side's samples.
    pub server_samples: bool,
    /// Each stream's figures.
    pub streams: Vec<StreamSamples>,
    /// The whole test's diagnosis.
    pub diagnosis: TestDiagnosis,
    /// Latency before and under the load (absent with --no-latency, -J and --json-stream).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<tcptune_diagnose::latency::LatencyReport>,
}

/// The result of `tcptune test`: iperf3's `-J` document (its `start`, `intervals`, `end`,
/// `title`, `extra_data` and server output keys) with tcptune's additions under `tcptune`, a
/// key iperf3's readers ignore.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TestOutput {
    /// iperf3's `start`: the connections and the settings.
    pub start: Start,
    /// Each interval's report.
    pub intervals: Vec<IntervalReport>,
    /// iperf3's `end`: each stream's totals and the sums.
    pub end: End,
    /// `-T`, as iperf3 adds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `--extra-data`, as iperf3 adds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_data: Option<String>,
    /// The server's own report (`--get-server-output`), when the server sent it as JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_json: Option<serde_json::Value>,
    /// The same, when the server sent it as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
    /// tcptune's additions: samples, diagnosis, latency.
    pub tcptune: Extension,
    /// How the text output prints rates (`-f`); not part of the JSON.
    #[serde(skip)]
    #[schemars(skip)]
    pub units: RateUnits,
    /// The test was interrupted (Ctrl-C, SIGTERM): the figures are this end's alone (as
    /// iperf3's after an interrupt; its `error` key says so in `-J`).
    #[serde(skip)]
    #[schemars(skip)]
    pub interrupted: bool,
}

/// The unit of rates in text output: tcptune's own (adaptive, bit/s), or one of iperf3's
/// `-f` letters (k, m, g, t: Kbits/sec …; K, M, G, T: KBytes/sec …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateUnits {
    /// tcptune's own: adaptive, bit/s.
    #[default]
    Auto,
    /// An iperf3 `-f` letter.
    Fixed(char),
}

impl RateUnits {
    /// iperf3's `-f` letter; anything else is refused with the letters that work.
    pub fn from_letter(s: &str) -> Result<RateUnits, String> {
        match s {
            "k" | "m" | "g" | "t" | "K" | "M" | "G" | "T" => {
                Ok(RateUnits::Fixed(s.chars().next().unwrap_or('m')))
            }
            _ => Err(format!(
                "-f {s} is not a format; give one of k, m, g, t (bits/s) or K, M, G, T (bytes/s)"
            )),
        }
    }

    /// `bps` in these units.
    pub fn rate(self, bps: f64) -> String {
        let bps = bps.max(0.0);
        match self {
            RateUnits::Auto => rate(bps),
            RateUnits::Fixed(c) => {
                // iperf3: powers of 1000 for bits, of 1024 for bytes.
                let (div, unit) = match c {
                    'k' => (1e3, "Kbits/sec"),
                    'm' => (1e6, "Mbits/sec"),
                    'g' => (1e9, "Gbits/sec"),
                    't' => (1e12, "Tbits/sec"),
                    'K' => (8.0 * 1024.0, "KBytes/sec"),
                    'M' => (8.0 * 1024.0 * 1024.0, "MBytes/sec"),
                    'G' => (8.0 * 1024.0 * 1024.0 * 1024.0, "GBytes/sec"),
                    _ => (8.0 * 1024.0f64.powi(4), "TBytes/sec"),
                };
                let v = bps / div;
                if v < 9.995 {
                    format!("{v:.2} {unit}")
                } else if v < 99.95 {
                    format!("{v:.1} {unit}")
                } else {
                    format!("{v:.0} {unit}")
                }
            }
        }
    }
}

/// "9.41 Gbit/s" the way the rest of tcptune prints rates.
pub fn rate(bps: f64) -> String {
    Rate::from_bps(bps.max(0.0)).to_string()
}

fn size(bytes: u64) -> String {
    tcptune_diagnose::size(bytes)
}

/// The header line of the interval table.
pub fn interval_header() -> String {
    format!(
        "{:<5} {:>13} {:>10} {:>14} {:>8} {:>10} {:>10} {:>10}",
        "[ ID]", "Interval", "Transfer", "Bitrate", "Retr", "Cwnd", "RTT", "Rwnd"
    )
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn stream_line(id: &str, s: &IntervalStream, units: RateUnits) -> String {
    let wnd = if s.sender { s.snd_wnd } else { s.rcv_wnd };
    format!(
        "{:<5} {:>13} {:>10} {:>14} {:>8} {:>10} {:>10} {:>10}",
        id,
        format!("{:.2}-{:.2} s", s.start, s.end),
        size(s.bytes),
        units.rate(s.bits_per_second),
        opt(s.retransmits),
        opt(s.snd_cwnd.map(size)),
        opt(s.rtt.map(|r| format!("{:.2} ms", r as f64 / 1000.0))),
        opt(wnd.map(|w| size(w as u64))),
    )
}

impl IntervalReport {
    /// Marks the interval as within `-O`'s omitted start.
    pub fn mark_omitted(&mut self) {
        for s in &mut self.streams {
            s.omitted = true;
        }
        self.sum.omitted = true;
        if let Some(r) = self.sum_bidir_reverse.as_mut() {
            r.omitted = true;
        }
    }

    /// The lines this interval prints: one per stream, and SUM lines with several streams.
    pub fn lines(&self, ids: &[u32], units: RateUnits) -> Vec<String> {
        let mut out: Vec<String> = self
            .streams
            .iter()
            .zip(ids)
            .map(|(s, id)| {
                let role = if s.sender { "" } else { " RX" };
                let omitted = if s.omitted { " (omitted)" } else { "" };
                let udp = match &s.udp {
                    Some(u) if !s.sender => format!(
                        "  {} datagrams, {} lost, jitter {:.3} ms",
                        u.packets,
                        u.lost_packets.unwrap_or(0),
                        u.jitter_ms.unwrap_or(0.0)
                    ),
                    Some(u) => format!("  {} datagrams", u.packets),
                    None => String::new(),
                };
                stream_line(&format!("[{id:>3}]{role}"), s, units) + &udp + omitted
            })
            .collect();
        let multi = self.streams.len() > 1;
        for sum in [Some(&self.sum), self.sum_bidir_reverse.as_ref()]
            .into_iter()
            .flatten()
        {
            if multi {
                out.push(format!(
                    "{:<5} {:>13} {:>10} {:>14} {:>8}",
                    if sum.sender { "[SUM]" } else { "[SUM]RX" },
                    format!("{:.2}-{:.2} s", sum.start, sum.end),
                    size(sum.bytes),
                    units.rate(sum.bits_per_second),
                    opt(sum.retransmits),
                ));
            }
        }
        out
    }
}

impl std::fmt::Display for TestOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "- - - - - - - - - - - - - - - - - - - - - - - - -")?;
        writeln!(
            f,
            "{:<9} {:>13} {:>10} {:>14} {:>8}",
            "[ ID]", "Interval", "Transfer", "Bitrate", "Retr"
        )?;
        let side = |f: &mut std::fmt::Formatter<'_>, id: &str, s: &EndSum, what: &str| {
            writeln!(
                f,
                "{:<9} {:>13} {:>10} {:>14} {:>8}  {what}",
                id,
                format!("{:.2}-{:.2} s", s.start, s.end),
                size(s.bytes),
                self.units.rate(s.bits_per_second),
                opt(s.retransmits),
            )
        };
        side(f, "[SUM]", &self.end.sum_sent, "sender")?;
        side(f, "[SUM]", &self.end.sum_received, "receiver")?;
        if let (Some(s), Some(r)) = (
            &self.end.sum_sent_bidir_reverse,
            &self.end.sum_received_bidir_reverse,
        ) {
            side(f, "[SUM]RX", s, "sender (reverse)")?;
            side(f, "[SUM]RX", r, "receiver (reverse)")?;
        }
        let c = &self.end.cpu_utilization_percent;
        writeln!(
            f,
            "CPU: local {:.1}% (user {:.1}%, system {:.1}%), remote {:.1}%",
            c.host_total, c.host_user, c.host_system, c.remote_total
        )?;
        if let Some(u) = self.end.sum_received.udp.as_ref() {
            // UDP: iperf3's loss and jitter; there is no tcp_info to diagnose.
            return writeln!(
                f,
                "UDP: jitter {:.3} ms, lost {}/{} datagrams ({:.2}%)",
                u.jitter_ms.unwrap_or(0.0),
                u.lost_packets.unwrap_or(0),
                u.packets,
                u.lost_percent.unwrap_or(0.0)
            );
        }
        if let Some(l) = &self.tcptune.latency {
            write!(f, "{l}")?;
        }
        writeln!(f)?;
        write!(f, "{}", self.tcptune.diagnosis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_rate_units_as_iperf3_prints_them() {
        // iperf3 3.12 wrote this pair in one run's start.timestamp.
        assert_eq!(http_date(1_795_486_734), "Tue, 24 Nov 2026 02:18:54 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        let m = RateUnits::from_letter("m").unwrap();
        assert_eq!(m.rate(941_000_000.0), "941 Mbits/sec");
        assert_eq!(
            RateUnits::from_letter("G")
                .unwrap()
                .rate(8.0 * 1024.0f64.powi(3) * 1.5),
            "1.50 GBytes/sec"
        );
        assert_eq!(
            RateUnits::from_letter("k").unwrap().rate(12_345.0),
            "12.3 Kbits/sec"
        );
        assert!(RateUnits::from_letter("x").is_err());
    }
}
