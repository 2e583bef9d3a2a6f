//! iperf3's text output, line for line (`tcptune iperf3`, or the binary run as `iperf3`):
//! the connection lines, the interval table with iperf3's stream ids (the socket descriptor),
//! units (`GBytes`, `Gbits/sec`, `-f`) and column widths, the final sender/receiver block with
//! `[SUM]` lines, the server's banner, and `-T`'s prefix. The formats are iperf3 3.12's
//! (`iperf_locale.c`, `units.c`), so scripts that read iperf3's text read ours; sans-IO, the
//! reports come in and lines go out. `tcptune test` and `tcptune serve` keep their own layout.

use crate::test_report::{
    Connected, End, EndSide, IntervalReport, IntervalStream, IntervalSum, UdpFigures,
};

/// The separator iperf3 prints between interval blocks and before the final block.
pub const SEPARATOR: &str = "- - - - - - - - - - - - - - - - - - - - - - - - -";
/// The line around the server's "Server listening" banner.
pub const BANNER_RULE: &str = "-----------------------------------------------------------";
/// What iperf3's client prints last (after an empty line).
pub const DONE: &str = "iperf Done.";

/// Which end prints: the role tags of a bidirectional test and the title prefix depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client prints.
    Client,
    /// The server prints.
    Server,
}

/// What decides the layout of a test's lines.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Which end prints.
    pub side: Side,
    /// A UDP test.
    pub udp: bool,
    /// A bidirectional test (`--bidir`).
    pub bidir: bool,
    /// `-P` (streams per direction): `[SUM]` lines appear above one.
    pub streams: u32,
    /// iperf3's `-f` letter for rates (`a`: adaptive bits, iperf3's default).
    pub unit: char,
    /// A receiving client (`-R`) whose first interval is printed while the test runs: iperf3
    /// 3.12 prints the interval header without the Retr and Cwnd columns then. It has them
    /// only when the first interval is also the last (`-t 1`), printed after the results
    /// exchange that tells it the sender counts retransmissions.
    pub reverse_plain: bool,
}

/// iperf3's `unit_snprintf`: `value` (bytes, or bytes per second) in the unit `format` asks
/// for (lower case: bits, powers of 1000; upper case: bytes, powers of 1024; `a`/`A`
/// adaptive), always four places wide, without the plural "s" iperf3's formats add.
pub fn unit(value: f64, format: char) -> String {
    const BITS: [&str; 5] = ["bit", "Kbit", "Mbit", "Gbit", "Tbit"];
    const BYTES: [&str; 5] = ["Byte", "KByte", "MByte", "GByte", "TByte"];
    let bytes = format.is_ascii_uppercase();
    let (base, labels) = if bytes {
        (1024.0, BYTES)
    } else {
        (1000.0, BITS)
    };
    let mut v = if bytes { value } else { value * 8.0 };
    let conv = match format.to_ascii_uppercase() {
        'B' => 0,
        'K' => 1,
        'M' => 2,
        'G' => 3,
        'T' => 4,
        _ => {
            let mut c = 0;
            let mut t = v;
            while t >= base && c < 4 {
                t /= base;
                c += 1;
            }
            c
        }
    };
    v /= f64::powi(base, conv as i32);
    let n = if v < 9.995 {
        format!("{v:4.2}")
    } else if v < 99.95 {
        format!("{v:4.1}")
    } else {
        format!("{v:4.0}")
    };
    format!("{n} {}", labels[conv])
}

/// C's `%.2g`: two significant digits, trailing zeros dropped, exponent form outside
/// 1e-4..100 (iperf3 prints the lost share this way).
pub fn g2(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() {
            "0".into()
        } else {
            v.to_string()
        };
    }
    // The exponent after rounding to two digits (9.96 is 10, exponent 1).
    let e = format!("{v:.1e}");
    let exp: i32 = e
        .split_once('e')
        .and_then(|(_, x)| x.parse().ok())
        .unwrap_or(0);
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..2).contains(&exp) {
        let (m, _) = e.split_once('e').unwrap_or((&e, ""));
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(m.to_string()), exp.abs())
    } else {
        trim(format!("{v:.*}", (1 - exp).max(0) as usize))
    }
}

/// The columns after the rate: what a row adds.
#[derive(Debug, Clone, Copy)]
pub enum Tail {
    /// Nothing (a receiver's TCP row).
    Plain,
    /// A sender's retransmissions (the final block and `[SUM]` rows).
    Retr(i64),
    /// Retransmissions and the congestion window, bytes (a sender's interval row).
    RetrCwnd(i64, u64),
    /// A UDP receiver: jitter (ms), lost and total datagrams.
    UdpReceived {
        /// Jitter, milliseconds.
        jitter_ms: f64,
        /// Datagrams lost.
        lost: i64,
        /// Datagrams expected.
        total: i64,
    },
    /// A UDP sender: datagrams sent.
    UdpSent(i64),
}

/// One row of iperf3's table.
#[derive(Debug, Clone)]
pub struct Row<'a> {
    /// The socket descriptor, or none for `[SUM]`.
    pub id: Option<i32>,
    /// `[TX-C]` and the like in a bidirectional test, else empty.
    pub role: &'a str,
    /// Seconds from the start of the count where this span begins.
    pub start: f64,
    /// Seconds from the start of the count where this span ends.
    pub end: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// The span's length, seconds.
    pub seconds: f64,
    /// The columns after the rate.
    pub tail: Tail,
    /// The last column: "sender", "receiver", "(omitted)" or empty.
    pub what: &'a str,
}

/// A row as iperf3's `report_*_format` strings print it.
pub fn row(r: &Row<'_>, rate_unit: char) -> String {
    let id = match r.id {
        Some(fd) => format!("[{fd:>3}]"),
        None => "[SUM]".into(),
    };
    let rate = if r.seconds > 0.0 {
        r.bytes as f64 / r.seconds
    } else {
        0.0
    };
    let head = format!(
        "{id}{} {:6.2}-{:<6.2} sec  {}s  {}s/sec",
        r.role,
        r.start,
        r.end,
        unit(r.bytes as f64, 'A'),
        unit(rate, rate_unit)
    );
    let what = r.what;
    match r.tail {
        Tail::Plain => format!("{head}                  {what}"),
        Tail::Retr(n) => format!("{head}  {n:3}             {what}"),
        Tail::RetrCwnd(n, cwnd) => {
            format!("{head}  {n:3}   {}s       {what}", unit(cwnd as f64, 'A'))
        }
        Tail::UdpReceived {
            jitter_ms,
            lost,
            total,
        } => {
            let pct = if total > 0 {
                100.0 * lost as f64 / total as f64
            } else {
                0.0
            };
            format!(
                "{head}  {jitter_ms:5.3} ms  {lost}/{total} ({}%)  {what}",
                g2(pct)
            )
        }
        // A bidirectional test lines the count up under the receivers' Lost/Total column.
        Tail::UdpSent(n) if r.role.is_empty() => format!("{head}  {n}  {what}"),
        Tail::UdpSent(n) => format!("{head}            {n}  {what}"),
    }
}

/// "Connecting to host HOST, port PORT", what iperf3's client prints before it connects.
pub fn connecting(host: &str, port: u16) -> String {
    format!("Connecting to host {host}, port {port}")
}

/// What iperf3's client prints after "Connecting" in a reverse test.
pub fn reverse_mode(host: &str) -> String {
    format!("Reverse mode, remote host {host} is sending")
}

/// "\[  5\] local A port P connected to B port Q", one line a data connection.
pub fn connected(c: &Connected) -> String {
    format!(
        "[{:>3}] local {} port {} connected to {} port {}",
        c.socket, c.local_host, c.local_port, c.remote_host, c.remote_port
    )
}

/// The server's banner before each test (`test`: counted from 1), as iperf3 3.12 prints it.
pub fn listening(port: u16, test: usize) -> Vec<String> {
    vec![
        BANNER_RULE.into(),
        format!("Server listening on {port} (test #{test})"),
        BANNER_RULE.into(),
    ]
}

/// "Accepted connection from A, port P" (the client's control connection).
pub fn accepted(host: &str, port: u16) -> String {
    format!("Accepted connection from {host}, port {port}")
}

/// The role tag of a bidirectional test's row: who sends, and which end prints.
fn role(layout: &Layout, sender: bool) -> &'static str {
    if !layout.bidir {
        return "";
    }
    match (layout.side, sender) {
        (Side::Client, true) => "[TX-C]",
        (Side::Client, false) => "[RX-C]",
        (Side::Server, true) => "[TX-S]",
        (Side::Server, false) => "[RX-S]",
    }
}

/// The table's header line. A TCP table has iperf3's Retr (and in intervals Cwnd) columns on
/// the client and on a server that sends; a UDP table the datagram columns of a sender's
/// intervals when every stream sends, else the receiver's.
fn header(l: &Layout, any_sends: bool, all_send: bool, interval: bool) -> String {
    let id = if l.bidir { "[ ID][Role]" } else { "[ ID]" };
    let retr = (l.side == Side::Client && !(interval && l.reverse_plain)) || any_sends;
    let cols = match (l.udp, interval) {
        (true, true) if all_send => "         Total Datagrams",
        (true, _) => "         Jitter    Lost/Total Datagrams",
        (false, true) if retr => "         Retr  Cwnd",
        (false, false) if retr => "         Retr",
        (false, _) => "",
    };
    format!("{id} Interval           Transfer     Bitrate{cols}")
}

/// Prints interval reports as they come: the header before the first (and again when counting
/// restarts after `-O`), a separator between blocks of several streams, `[SUM]` rows.
#[derive(Debug, Clone)]
pub struct Intervals {
    layout: Layout,
    blocks: usize,
}

impl Intervals {
    /// Interval lines for a test of this layout.
    pub fn new(layout: Layout) -> Intervals {
        Intervals { layout, blocks: 0 }
    }

    /// The lines of one interval report: each direction's streams, then its `[SUM]` row.
    pub fn lines(&mut self, r: &IntervalReport) -> Vec<String> {
        let l = &self.layout;
        let mut out = Vec::new();
        if self.blocks > 0 && l.streams > 1 {
            out.push(SEPARATOR.to_string());
        }
        if self.blocks == 0 {
            let any = r.streams.iter().any(|s| s.sender);
            let all = r.streams.iter().all(|s| s.sender);
            out.push(header(l, any, all, true));
        }
        self.blocks += 1;
        for sum in [Some(&r.sum), r.sum_bidir_reverse.as_ref()]
            .into_iter()
            .flatten()
        {
            for s in r.streams.iter().filter(|s| s.sender == sum.sender) {
                out.push(row(&stream_row(l, s), l.unit));
            }
            if l.streams > 1 {
                out.push(row(&sum_row(l, sum), l.unit));
            }
        }
        out
    }
}

fn omitted(yes: bool) -> &'static str {
    if yes {
        "(omitted)"
    } else {
        ""
    }
}

/// What an interval row shows beyond its span and bytes: a stream's or a `[SUM]`'s (which has
/// no congestion window).
struct Figures<'a> {
    udp: Option<&'a UdpFigures>,
    sender: bool,
    retransmits: Option<u64>,
    cwnd: Option<u64>,
}

fn interval_tail(f: &Figures<'_>) -> Tail {
    match (f.udp, f.sender) {
        (Some(u), true) => Tail::UdpSent(u.packets as i64),
        (Some(u), false) => Tail::UdpReceived {
            jitter_ms: u.jitter_ms.unwrap_or(0.0),
            lost: u.lost_packets.unwrap_or(0) as i64,
            total: u.packets as i64,
        },
        (None, true) => match (f.retransmits, f.cwnd) {
            (Some(n), Some(c)) => Tail::RetrCwnd(n as i64, c),
            (Some(n), None) => Tail::Retr(n as i64),
            _ => Tail::Plain,
        },
        (None, false) => Tail::Plain,
    }
}

fn stream_row<'a>(l: &Layout, s: &'a IntervalStream) -> Row<'a> {
    Row {
        id: Some(s.socket),
        role: role(l, s.sender),
        start: s.start,
        end: s.end,
        bytes: s.bytes,
        seconds: s.seconds,
        tail: interval_tail(&Figures {
            udp: s.udp.as_ref(),
            sender: s.sender,
            retransmits: s.retransmits,
            cwnd: s.snd_cwnd,
        }),
        what: omitted(s.omitted),
    }
}

fn sum_row<'a>(l: &Layout, s: &'a IntervalSum) -> Row<'a> {
    Row {
        id: None,
        role: role(l, s.sender),
        start: s.start,
        end: s.end,
        bytes: s.bytes,
        seconds: s.seconds,
        tail: interval_tail(&Figures {
            udp: s.udp.as_ref(),
            sender: s.sender,
            retransmits: s.retransmits,
            cwnd: None,
        }),
        what: omitted(s.omitted),
    }
}

/// One final row of a TCP stream's side.
fn side_row<'a>(l: &Layout, id: Option<i32>, s: &'a EndSide, sender_tag: bool) -> Row<'a> {
    let sender_row = s.sender_row;
    Row {
        id,
        role: role(l, sender_tag),
        start: s.start,
        end: s.end,
        bytes: s.bytes,
        seconds: s.seconds,
        tail: match (sender_row, s.retransmits) {
            (true, Some(n)) => Tail::Retr(n),
            _ => Tail::Plain,
        },
        what: if sender_row { "sender" } else { "receiver" },
    }
}

/// The client's final block: the separator, the header, each stream's sender and receiver
/// rows, and with several streams each direction's `[SUM]` rows after its streams. `tx[i]`:
/// whether this end sent on `end.streams[i]` (its role tag in a bidirectional test).
pub fn final_block(l: &Layout, end: &End, tx: &[bool]) -> Vec<String> {
    // The Retr column where a sender's count is known: not for the peer's streams of an
    // interrupted test, whose figures were never exchanged (iperf3 leaves it out then too).
    let counted = |s: &crate::test_report::EndStream| {
        s.sender.as_ref().is_some_and(|x| x.retransmits.is_some())
    };
    let head = if l.udp || end.streams.iter().any(counted) {
        header(l, true, true, false)
    } else {
        let plain = Layout {
            side: Side::Server,
            ..l.clone()
        };
        header(&plain, false, false, false)
    };
    let mut out = vec![SEPARATOR.to_string(), head];
    // Without tcp_info samples (UDP) a stream's own `udp.sender` says who sent.
    let sends = |k: usize| {
        tx.get(k)
            .copied()
            .or(end
                .streams
                .get(k)
                .and_then(|s| s.udp.as_ref())
                .map(|u| u.sender))
            .unwrap_or(true)
    };
    let main_tx = sends(0);
    let sums = [
        (main_tx, Some((&end.sum_sent, &end.sum_received))),
        (
            !main_tx,
            end.sum_sent_bidir_reverse
                .as_ref()
                .zip(end.sum_received_bidir_reverse.as_ref()),
        ),
    ];
    for (dir_tx, sum) in sums {
        let Some((sent, received)) = sum else {
            continue;
        };
        for (k, s) in end.streams.iter().enumerate() {
            let ours = sends(k);
            if ours != dir_tx {
                continue;
            }
            out.extend(stream_final_rows(l, s, ours));
        }
        if l.streams > 1 {
            out.push(row(&end_sum_row(l, sent, true, dir_tx), l.unit));
            out.push(row(&end_sum_row(l, received, false, dir_tx), l.unit));
        }
    }
    out
}

/// One stream's final rows: the sender's, then the receiver's.
fn stream_final_rows(l: &Layout, s: &crate::test_report::EndStream, ours: bool) -> Vec<String> {
    if let Some(u) = &s.udp {
        // The sender knows what it sent; the loss and jitter are the receiver's.
        return [
            ("sender", 0.0, 0),
            ("receiver", u.jitter_ms, u.lost_packets as i64),
        ]
        .into_iter()
        .map(|(what, jitter_ms, lost)| {
            let r = Row {
                id: Some(u.socket),
                role: role(l, ours),
                start: u.start,
                end: u.end,
                bytes: u.bytes,
                seconds: u.seconds,
                tail: Tail::UdpReceived {
                    jitter_ms,
                    lost,
                    total: u.packets as i64,
                },
                what,
            };
            row(&r, l.unit)
        })
        .collect();
    }
    let mut rows: Vec<String> = s
        .sender
        .iter()
        .map(|side| row(&side_row(l, Some(side.socket), side, ours), l.unit))
        .collect();
    // -F: what was sent of the file, between the sender's row and the receiver's.
    rows.extend(s.diskfile.as_ref().map(diskfile_line));
    rows.extend(
        s.receiver
            .iter()
            .map(|side| row(&side_row(l, Some(side.socket), side, ours), l.unit)),
    );
    rows
}

/// iperf3's line for `-F`: the bytes sent, the file's size and the share.
pub fn diskfile_line(d: &crate::test_report::DiskFile) -> String {
    format!(
        "        Sent {} / {} ({}%) of {}",
        unit(d.sent as f64, 'A'),
        unit(d.size as f64, 'A'),
        d.percent,
        d.filename
    )
}

/// A final `[SUM]` row: `tx` whether this end sent that direction's data.
fn end_sum_row<'a>(
    l: &Layout,
    s: &'a crate::test_report::EndSum,
    sender: bool,
    tx: bool,
) -> Row<'a> {
    let tail = match (&s.udp, s.retransmits) {
        (Some(u), _) => Tail::UdpReceived {
            jitter_ms: if sender {
                0.0
            } else {
                u.jitter_ms.unwrap_or(0.0)
            },
            lost: if sender {
                0
            } else {
                u.lost_packets.unwrap_or(0) as i64
            },
            total: u.packets as i64,
        },
        (None, Some(n)) if sender => Tail::Retr(n),
        _ => Tail::Plain,
    };
    Row {
        id: None,
        role: role(l, tx),
        start: s.start,
        end: s.end,
        bytes: s.bytes,
        seconds: s.seconds,
        tail,
        what: if sender { "sender" } else { "receiver" },
    }
}

/// `lines` with iperf3's client title prefix (`-T title` prints "title:  " before every line).
pub fn titled(title: Option<&str>, lines: &[String]) -> String {
    let mut out = String::new();
    for l in lines {
        if let Some(t) = title {
            out += t;
            out += ":  ";
        }
        out += l;
        out.push('\n');
    }
    out
}

/// One stream of a server's own interval figures: its descriptor and whether it sends.
#[derive(Debug, Clone, Copy)]
pub struct ServerStream {
    /// The stream's socket descriptor (iperf3's id).
    pub fd: i32,
    /// Whether this end sends on it.
    pub sends: bool,
}

/// The interval reports a server makes from its own byte counts and tcp_info samples (iperf3's
/// server prints its own intervals; a tcptune client's come from its stream threads).
#[derive(Debug, Clone)]
pub struct Ticker {
    streams: Vec<ServerStream>,
    prev_at: f64,
    prev_bytes: Vec<u64>,
    prev_retr: Vec<Option<u32>>,
    /// A UDP test's datagrams and losses at the last report.
    prev_udp: Vec<UdpCounts>,
}

/// A UDP stream's counts at a moment: bytes, datagrams, and (a receiver's) lost datagrams and
/// jitter, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UdpCounts {
    /// Bytes moved.
    pub bytes: u64,
    /// Datagrams sent or received.
    pub packets: u64,
    /// Datagrams lost so far.
    pub lost: u64,
    /// The receiver's jitter estimate, seconds.
    pub jitter_s: f64,
}

impl Ticker {
    /// A ticker counting from zero for these streams.
    pub fn new(streams: Vec<ServerStream>) -> Ticker {
        let n = streams.len();
        Ticker {
            streams,
            prev_at: 0.0,
            prev_bytes: vec![0; n],
            prev_retr: vec![None; n],
            prev_udp: vec![UdpCounts::default(); n],
        }
    }

    /// The streams' descriptors, in order.
    pub fn fds(&self) -> Vec<i32> {
        self.streams.iter().map(|s| s.fd).collect()
    }

    /// Counting starts again from zero at these byte counts (the end of `-O`'s seconds).
    pub fn restart(&mut self, bytes: &[u64]) {
        self.prev_at = 0.0;
        self.prev_bytes = bytes.to_vec();
    }

    /// `restart` for a UDP test.
    pub fn restart_udp(&mut self, counts: &[UdpCounts]) {
        self.restart(&counts.iter().map(|c| c.bytes).collect::<Vec<_>>());
        self.prev_udp = counts.to_vec();
    }

    /// A UDP test's interval: datagrams sent, or received with their loss and jitter.
    pub fn report_udp(
        &mut self,
        now_s: f64,
        counts: &[UdpCounts],
        omitted: bool,
    ) -> IntervalReport {
        let bytes: Vec<u64> = counts.iter().map(|c| c.bytes).collect();
        let mut r = self.report(now_s, &bytes, &[], omitted);
        let mut figures = Vec::new();
        for (i, s) in r.streams.iter_mut().enumerate() {
            let now = counts.get(i).copied().unwrap_or_default();
            let prev = self.prev_udp.get(i).copied().unwrap_or_default();
            let (lost, packets) = (
                now.lost.saturating_sub(prev.lost),
                now.packets.saturating_sub(prev.packets),
            );
            let u = UdpFigures {
                jitter_ms: (!s.sender).then_some(now.jitter_s * 1000.0),
                lost_packets: (!s.sender).then_some(lost),
                packets,
                // The text shows it in parentheses; `-J` has it as a number.
                lost_percent: (!s.sender).then(|| crate::document::percent(lost, packets)),
            };
            s.retransmits = None;
            s.snd_cwnd = None;
            figures.push((s.sender, u.clone()));
            s.udp = Some(u);
        }
        self.prev_udp = counts.to_vec();
        for sum in [Some(&mut r.sum), r.sum_bidir_reverse.as_mut()]
            .into_iter()
            .flatten()
        {
            let sel: Vec<&UdpFigures> = figures
                .iter()
                .filter(|(sends, _)| *sends == sum.sender)
                .map(|(_, u)| u)
                .collect();
            let n = sel.len().max(1) as f64;
            sum.retransmits = None;
            sum.udp = Some(UdpFigures {
                jitter_ms: (!sum.sender)
                    .then(|| sel.iter().filter_map(|u| u.jitter_ms).sum::<f64>() / n),
                lost_packets: (!sum.sender)
                    .then(|| sel.iter().filter_map(|u| u.lost_packets).sum()),
                packets: sel.iter().map(|u| u.packets).sum(),
                lost_percent: (!sum.sender).then(|| {
                    crate::document::percent(
                        sel.iter().filter_map(|u| u.lost_packets).sum(),
                        sel.iter().map(|u| u.packets).sum(),
                    )
                }),
            });
        }
        r
    }

    /// The interval from the last report to `now_s` (seconds since counting started).
    pub fn report(
        &mut self,
        now_s: f64,
        bytes: &[u64],
        latest: &[Option<tcptune_diagnose::Sample>],
        omitted: bool,
    ) -> IntervalReport {
        let secs = (now_s - self.prev_at).max(1e-9);
        let mut streams = Vec::new();
        for (i, st) in self.streams.iter().enumerate() {
            let b = bytes
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(self.prev_bytes[i]);
            let info = latest.get(i).and_then(|s| s.as_ref()).map(|s| &s.info);
            let now_retr = info.and_then(|i| i.total_retrans);
            let retransmits = match (st.sends, self.prev_retr[i], now_retr) {
                (true, Some(a), Some(b)) => Some(b.wrapping_sub(a) as u64),
                (true, None, Some(b)) => Some(b as u64),
                (true, _, None) => Some(0),
                _ => None,
            };
            self.prev_retr[i] = now_retr.or(self.prev_retr[i]);
            // The text prints the window; `-J` shows the rest of a sender's figures.
            let f = crate::document::info_figures(info, st.sends);
            streams.push(IntervalStream {
                socket: st.fd,
                start: self.prev_at,
                end: now_s,
                seconds: secs,
                bytes: b,
                bits_per_second: b as f64 * 8.0 / secs,
                retransmits,
                snd_cwnd: st.sends.then(|| f.snd_cwnd.unwrap_or(0)),
                snd_wnd: f.snd_wnd,
                rtt: f.rtt,
                rttvar: f.rttvar,
                pmtu: f.pmtu,
                rcv_wnd: f.rcv_wnd,
                udp: None,
                omitted,
                sender: st.sends,
            });
        }
        let first = self.streams.first().map(|s| s.sends).unwrap_or(false);
        let sum_of = |sends: bool| {
            let sel: Vec<&IntervalStream> = streams.iter().filter(|s| s.sender == sends).collect();
            let bytes: u64 = sel.iter().map(|s| s.bytes).sum();
            (!sel.is_empty()).then(|| IntervalSum {
                start: self.prev_at,
                end: now_s,
                seconds: secs,
                bytes,
                bits_per_second: bytes as f64 * 8.0 / secs,
                retransmits: sel.iter().map(|s| s.retransmits).sum(),
                udp: None,
                omitted,
                sender: sends,
            })
        };
        let sum = sum_of(first);
        let rev = sum_of(!first);
        self.prev_at = now_s;
        self.prev_bytes = bytes.to_vec();
        IntervalReport {
            sum: sum.unwrap_or(IntervalSum {
                start: 0.0,
                end: now_s,
                seconds: secs,
                bytes: 0,
                bits_per_second: 0.0,
                retransmits: None,
                udp: None,
                omitted,
                sender: first,
            }),
            streams,
            sum_bidir_reverse: rev,
        }
    }
}

/// One stream of a server's final block: what this end moved over the test.
#[derive(Debug, Clone)]
pub struct ServerTotal {
    /// The stream's socket descriptor (iperf3's id).
    pub fd: i32,
    /// Whether this end sends on it.
    pub sends: bool,
    /// Bytes moved.
    pub bytes: u64,
    /// Segments retransmitted (senders only).
    pub retransmits: Option<i64>,
    /// A UDP stream's datagrams, lost datagrams and jitter.
    pub udp: Option<UdpCounts>,
    /// `-F`'s file: what was sent of it.
    pub diskfile: Option<crate::test_report::DiskFile>,
}

/// The server's final block: its own side of each stream, each direction's `[SUM]` rows after
/// its streams when there are several.
pub fn server_final_block(l: &Layout, totals: &[ServerTotal], secs: f64) -> Vec<String> {
    let any = totals.iter().any(|t| t.sends);
    let mut out = vec![SEPARATOR.to_string(), header(l, any, false, false)];
    let tail = |t: &ServerTotal| match (t.udp, t.sends, t.retransmits) {
        (Some(u), sends, _) => Tail::UdpReceived {
            jitter_ms: if sends { 0.0 } else { u.jitter_s * 1000.0 },
            lost: if sends { 0 } else { u.lost as i64 },
            total: u.packets as i64,
        },
        (None, true, n) => Tail::Retr(n.unwrap_or(0)),
        (None, false, _) => Tail::Plain,
    };
    let what = |sends: bool| if sends { "sender" } else { "receiver" };
    let first = totals.first().map(|t| t.sends).unwrap_or(false);
    for sends in [first, !first] {
        let sel: Vec<&ServerTotal> = totals.iter().filter(|t| t.sends == sends).collect();
        if sel.is_empty() {
            continue;
        }
        for t in &sel {
            let r = Row {
                id: Some(t.fd),
                role: role(l, t.sends),
                start: 0.0,
                end: secs,
                bytes: t.bytes,
                seconds: secs,
                tail: tail(t),
                what: what(t.sends),
            };
            // -F's line follows a sender's row and precedes a receiver's (iperf3 prints it
            // between the two, and a server prints only its own side's).
            let disk = t.diskfile.as_ref().map(diskfile_line);
            if !t.sends {
                out.extend(disk.clone());
            }
            out.push(row(&r, l.unit));
            if t.sends {
                out.extend(disk);
            }
        }
        if l.streams > 1 {
            let udp: Option<Vec<UdpCounts>> = sel.iter().map(|t| t.udp).collect();
            let sum = ServerTotal {
                fd: 0,
                sends,
                bytes: sel.iter().map(|t| t.bytes).sum(),
                retransmits: sel.iter().map(|t| t.retransmits).sum(),
                udp: udp.map(|u| UdpCounts {
                    bytes: u.iter().map(|c| c.bytes).sum(),
                    packets: u.iter().map(|c| c.packets).sum(),
                    lost: u.iter().map(|c| c.lost).sum(),
                    jitter_s: u.iter().map(|c| c.jitter_s).sum::<f64>() / u.len().max(1) as f64,
                }),
                diskfile: None,
            };
            let r = Row {
                id: None,
                role: role(l, sends),
                start: 0.0,
                end: secs,
                bytes: sum.bytes,
                seconds: secs,
                tail: tail(&sum),
                what: what(sends),
            };
            out.push(row(&r, l.unit));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_as_iperf3_prints_them() {
        assert_eq!(unit(3.45 * 1024.0 * 1024.0 * 1024.0, 'A'), "3.45 GByte");
        assert_eq!(unit(29.6e9 / 8.0, 'a'), "29.6 Gbit");
        assert_eq!(unit(941e6 / 8.0, 'a'), " 941 Mbit");
        assert_eq!(unit(941e6 / 8.0, 'm'), " 941 Mbit");
        assert_eq!(unit(1.5 * 1024.0 * 1024.0, 'M'), "1.50 MByte");
        assert_eq!(unit(0.0, 'a'), "0.00 bit");
        assert_eq!(g2(0.0), "0");
        assert_eq!(g2(1.234), "1.2");
        assert_eq!(g2(12.6), "13");
        assert_eq!(g2(0.05), "0.05");
        assert_eq!(g2(0.000012), "1.2e-05");
        assert_eq!(g2(100.0), "1e+02");
    }

    /// Rows with the widths of iperf3 3.12's lines (seen in its output on this host).
    #[test]
    fn rows_as_iperf3_prints_them() {
        let r = |id, role, tail, what, bytes: u64| Row {
            id,
            role,
            start: 0.0,
            end: 1.0,
            bytes,
            seconds: 1.0,
            tail,
            what,
        };
        let mib = 1024 * 1024;
        assert_eq!(
            row(
                &r(Some(5), "", Tail::RetrCwnd(3, 1023 * 1024), "", 699 * mib),
                'a'
            ),
            "[  5]   0.00-1.00   sec   699 MBytes  5.86 Gbits/sec    3   1023 KBytes       "
        );
        assert_eq!(
            row(&r(None, "", Tail::Retr(6), "sender", 1536 * mib), 'a'),
            "[SUM]   0.00-1.00   sec  1.50 GBytes  12.9 Gbits/sec    6             sender"
        );
        assert_eq!(
            row(
                &r(Some(12), "[RX-C]", Tail::Plain, "receiver", 158 * mib),
                'a'
            ),
            "[ 12][RX-C]   0.00-1.00   sec   158 MBytes  1.33 Gbits/sec                  receiver"
        );
        let udp = Tail::UdpReceived {
            jitter_ms: 0.005,
            lost: 0,
            total: 39,
        };
        assert_eq!(
            row(&r(Some(5), "", udp, "", 1_277_952), 'a'),
            "[  5]   0.00-1.00   sec  1.22 MBytes  10.2 Mbits/sec  0.005 ms  0/39 (0%)  "
        );
        assert_eq!(
            row(&r(Some(5), "", Tail::UdpSent(39), "", 1_277_952), 'a'),
            "[  5]   0.00-1.00   sec  1.22 MBytes  10.2 Mbits/sec  39  "
        );
        assert_eq!(
            row(&r(Some(5), "[TX-C]", Tail::UdpSent(39), "", 1_277_952), 'a'),
            "[  5][TX-C]   0.00-1.00   sec  1.22 MBytes  10.2 Mbits/sec            39  "
        );
        // -f m: the rate in Mbits/sec however large; the transfer stays adaptive.
        assert_eq!(
            row(&r(Some(5), "", Tail::Plain, "receiver", 686 * mib), 'm'),
            "[  5]   0.00-1.00   sec   686 MBytes  5755 Mbits/sec                  receiver"
        );
        assert_eq!(
            titled(Some("t"), &["a".into(), String::new()]),
            "t:  a\nt:  \n"
        );
    }
}
