//! Rows of `tcptune conns` and `tcptune watch`: a socket as sock_diag reports it, joined with
//! the figures and verdict derived from it (and from its previous sample, matched by cookie),
//! plus the JSON-lines record format that `watch --record` writes and reports read back.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_kernel::procs::Owner;
use tcptune_kernel::tcp_info::state_name;
use tcptune_kernel::{BbrInfo, CongName, DiagSocket, SkMemInfo, TcpInfo};
use tcptune_model::{Bytes, Dur, Rate};

use tcptune_diagnose::engine::CpuUse;
use tcptune_diagnose::{interval, judge, snapshot, Context, Interval, Sample, Snapshot, Verdict};

/// One connection with what limits it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Conn {
    /// The named network namespace it lives in (absent: the current one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// TCP state as `ss` names it (ESTAB, CLOSE-WAIT, …).
    pub state: Cow<'static, str>,
    /// Local address and port.
    pub local: SocketAddr,
    /// Remote address and port.
    pub remote: SocketAddr,
    /// The kernel's socket cookie (stable for the socket's life; joins samples).
    pub cookie: u64,
    /// The owner's user id.
    pub uid: u32,
    /// The socket's inode (`socket:[inode]` under /proc/PID/fd).
    pub inode: u32,
    /// The owning process, when asked for and found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Box<Owner>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The congestion control algorithm.
    pub congestion: Option<CongName>,
    /// Unread bytes queued for the application.
    pub rqueue_bytes: u32,
    /// Unacknowledged plus unsent bytes.
    pub wqueue_bytes: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Figures of the newest sample (absent: no `tcp_info` in this state).
    pub snapshot: Option<Snapshot>,
    // Boxed, like the `--all` fields below: a one-shot dump has none, and 20,000 rows of
    // 680 bytes cost more in page faults than their decoding.
    /// Figures since the previous sample (watch, conns --over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Box<Interval>>,
    /// What limits it, with the evidence.
    pub verdict: Verdict,
    /// Every `tcp_info` field (with `--all`; boxed, so rows without it stay small).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<Box<TcpInfo>>,
    /// Socket memory (with `--all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skmem: Option<Box<SkMemInfo>>,
    /// BBR's model (with `--all`, when the socket uses BBR).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bbr: Option<Box<BbrInfo>>,
}

impl Conn {
    /// Builds a row from a socket taken at `at`, and its previous sample if there is one.
    /// Takes the socket by value so its `tcp_info` moves into the returned sample rather
    /// than being copied (a one-shot dump of 20,000 sockets notices).
    pub fn new(
        s: DiagSocket,
        at: Dur,
        prev: Option<&Sample>,
        ctx: &Context,
        all: bool,
    ) -> (Conn, Option<Sample>) {
        Conn::judged(s, at, prev, ctx, all, &[])
    }

    /// [`Conn::new`] with CPU figures for the engine (a loopback connection's host).
    pub fn judged(
        s: DiagSocket,
        at: Dur,
        prev: Option<&Sample>,
        ctx: &Context,
        all: bool,
        cpu: &[CpuUse],
    ) -> (Conn, Option<Sample>) {
        let full_info = if all {
            s.info.clone().map(Box::new)
        } else {
            None
        };
        let sample = s.info.map(|info| Sample {
            at_s: at,
            info,
            skmem: s.skmem,
        });
        let (snap, iv, v) = match &sample {
            Some(b) => {
                let snap = snapshot(&b.info);
                let v = judge(prev, b, ctx, cpu);
                (Some(snap), prev.map(|a| interval(a, b)), v)
            }
            None => (
                None,
                None,
                Verdict {
                    limit: tcptune_diagnose::Limit::NotEnoughEvidence,
                    share: None,
                    text: "not enough evidence: no tcp_info in this state".into(),
                    missing: Vec::new(),
                },
            ),
        };
        let conn = Conn {
            netns: None,
            state: Cow::Borrowed(state_name(s.state)),
            local: s.src,
            remote: s.dst,
            cookie: s.cookie,
            uid: s.uid,
            inode: s.inode,
            process: None,
            congestion: s.congestion,
            rqueue_bytes: s.rqueue_bytes,
            wqueue_bytes: s.wqueue_bytes,
            snapshot: snap,
            interval: iv.map(Box::new),
            verdict: v,
            tcp_info: full_info,
            skmem: if all { s.skmem.map(Box::new) } else { None },
            bbr: if all { s.bbr.map(Box::new) } else { None },
        };
        (conn, sample)
    }

    /// The order of a table's rows: highest [`Conn::sort_rate`] first.
    pub fn sort_key(&self) -> std::cmp::Reverse<u64> {
        // Rates are finite and non-negative, so their bit patterns order like the values.
        std::cmp::Reverse(self.sort_rate().max(0.0).to_bits())
    }

    /// The rate used to sort rows: goodput over the interval, else the delivery rate.
    pub fn sort_rate(&self) -> f64 {
        self.interval
            .as_ref()
            .and_then(|i| i.main_rate())
            .or_else(|| self.snapshot.as_ref().and_then(|s| s.delivery_rate_bps))
            .map(Rate::bps)
            .unwrap_or(0.0)
    }
}

/// Previous samples by (namespace, cookie), to turn dumps into intervals.
#[derive(Default)]
pub struct History {
    prev: HashMap<(Option<String>, u64), Sample>,
    /// How busy this host's CPUs were since the previous dump (both ends of a loopback
    /// connection run here, so this is their CPU).
    pub host_cpu: Option<CpuUse>,
}

impl History {
    /// Rows for one dump taken at `at`; remembers this dump's samples for the next call.
    pub fn rows(
        &mut self,
        netns: Option<&str>,
        socks: &[DiagSocket],
        at: Dur,
        ctx: &Context,
        all: bool,
    ) -> Vec<Conn> {
        let mut rows = Vec::with_capacity(socks.len());
        // Connections that share a path share its capacity: with the path's rate given, a
        // connection's share is the rate over the connections to the same peer that sent
        // since the previous dump (four parallel streams each carry a quarter).
        let mut sharing: HashMap<(std::net::IpAddr, std::net::IpAddr), u32> = HashMap::new();
        if ctx.path_rate.is_some() {
            for s in socks {
                let key = (netns.map(str::to_string), s.cookie);
                let sent = |i: Option<&TcpInfo>| i.and_then(|i| i.bytes_acked).unwrap_or(0);
                let before = self.prev.get(&key).map(|p| sent(Some(&p.info)));
                if before.is_some_and(|b| sent(s.info.as_ref()) > b) {
                    *sharing.entry((s.src.ip(), s.dst.ip())).or_default() += 1;
                }
            }
        }
        let cpu: Vec<CpuUse> = self.host_cpu.into_iter().collect();
        for s in socks {
            let key = (netns.map(str::to_string), s.cookie);
            let n = sharing.get(&(s.src.ip(), s.dst.ip())).copied().unwrap_or(1);
            let shared;
            let ctx = if n > 1 {
                shared = Context {
                    streams: n,
                    ..ctx.clone()
                };
                &shared
            } else {
                ctx
            };
            let cpu: &[CpuUse] = if s.dst.ip().is_loopback() { &cpu } else { &[] };
            let (mut c, sample) = Conn::judged(s.clone(), at, self.prev.get(&key), ctx, all, cpu);
            c.netns = netns.map(str::to_string);
            if let Some(sample) = sample {
                self.prev.insert(key, sample);
            }
            rows.push(c);
        }
        rows
    }

    /// The latest sample of a connection.
    pub fn get(&self, netns: Option<&str>, cookie: u64) -> Option<&Sample> {
        self.prev.get(&(netns.map(str::to_string), cookie))
    }

    /// Forgets connections not seen in the latest dumps (keys not in `seen`).
    pub fn retain(&mut self, seen: &std::collections::HashSet<(Option<String>, u64)>) {
        self.prev.retain(|k, _| seen.contains(k));
    }
}

/// The result of `tcptune conns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConnTable {
    /// Connections, highest rate first.
    pub connections: Vec<Conn>,
    /// Show every field in text output.
    #[serde(skip)]
    pub all: bool,
}

impl fmt::Display for ConnTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.connections.is_empty() {
            return f.write_str(NO_ROWS);
        }
        f.write_str(&header())?;
        // A big table renders its second half on another core meanwhile (a dump of 20,000
        // sockets spends ~6 ms here, a sixth of `conns`'s time); the text is the same.
        const PARALLEL_FROM: usize = 4096;
        if self.connections.len() >= PARALLEL_FROM {
            let (first, second) = self.connections.split_at(self.connections.len() / 2);
            return std::thread::scope(|scope| {
                let later = scope.spawn(|| {
                    let mut text = String::new();
                    // Writing into a String cannot fail.
                    let _ = write_rows(&mut text, second, self.all);
                    text
                });
                write_rows(f, first, self.all)?;
                match later.join() {
                    Ok(text) => f.write_str(&text),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            });
        }
        write_rows(f, &self.connections, self.all)
    }
}

const NO_ROWS: &str = "no TCP connections match\n";

fn header() -> String {
    format!(
        "{:<10} {:<24} {:<24} {:>9} {:>9} {:>9} {:>11} VERDICT\n",
        "STATE", "LOCAL", "REMOTE", "RTT", "CWND", "PEER WND", "RATE"
    )
}

/// The text of a [`ConnTable`], built row by row as the sockets are decoded: each row is
/// rendered where it is made and only its line and sort key are kept, ~150 bytes instead of a
/// ~440-byte row (see the `rows` module). The result is the same text as the table's.
#[derive(Debug, Default)]
pub struct TextRows {
    rows: crate::rows::Rendered,
    all: bool,
}

/// Text written into a byte buffer (rows are rendered with `fmt::Write`).
struct Utf8<'a>(&'a mut Vec<u8>);

impl fmt::Write for Utf8<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl TextRows {
    /// An empty table; with `all`, each row followed by its details (`--all`).
    pub fn new(all: bool) -> TextRows {
        TextRows {
            rows: Default::default(),
            all,
        }
    }

    /// Renders a row and keeps its text and sort key.
    pub fn push(&mut self, c: &Conn) {
        let all = self.all;
        // Writing into a buffer cannot fail.
        self.rows.push(c.sort_key(), |buf| {
            let _ = write_rows(&mut Utf8(buf), std::slice::from_ref(c), all);
        });
    }

    /// Writes the table: the rows sorted as `ConnTable`'s (highest rate first, stable).
    pub fn write(self, w: &mut impl std::io::Write) -> std::io::Result<()> {
        if self.rows.is_empty() {
            return w.write_all(NO_ROWS.as_bytes());
        }
        self.rows.write(header().as_bytes(), 0, b"", w)
    }

    /// The table as [`TextRows::write`] writes it.
    pub fn finish(self) -> String {
        let mut out = Vec::new();
        // Writing into a Vec cannot fail, and every row is text.
        let _ = self.write(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The table's rows, without the header.
fn write_rows(f: &mut impl fmt::Write, rows: &[Conn], all: bool) -> fmt::Result {
    {
        let mut line = Row::default();
        for c in rows {
            let s = c.snapshot.as_ref();
            // Without an interval the rate is the kernel's last delivery-rate sample, which
            // is 0 on a socket that only receives: show "-" rather than a misleading 0.
            let rate = c.interval.as_ref().and_then(|i| i.main_rate()).or_else(|| {
                s.and_then(|s| s.delivery_rate_bps)
                    .filter(|r| r.bps() > 0.0)
            });
            line.buf.clear();
            line.left(&c.state, 10);
            line.addr(c.local, 24);
            line.addr(c.remote, 24);
            line.dur(s.and_then(|s| s.rtt_s), 9);
            line.size(s.and_then(|s| s.cwnd_bytes), 9);
            line.size(s.and_then(|s| s.snd_wnd_bytes).map(u64::from), 9);
            line.rate(rate, 11);
            line.buf.push_str(&c.verdict.text);
            line.buf.push('\n');
            f.write_str(&line.buf)?;
            if let Some(p) = &c.process {
                // Appended to the row (after the verdict) so the columns stay aligned.
                writeln!(f, "{:>12} process {} (pid {})", "", p.comm, p.pid)?;
            }
            if all {
                write_details(f, c)?;
            }
        }
        Ok(())
    }
}

/// One table row, built by hand: with thousands of connections, the generic formatting
/// machinery (padding char by char, a `fmt::write` per cell) was a fifth of `tcptune conns`'s
/// time (see bench/conns). Each method appends a cell and the separating space.
#[derive(Default)]
struct Row {
    buf: String,
    /// Scratch space for one right-aligned cell (reused).
    cell: String,
}

const SPACES: &str = "                                ";

impl Row {
    fn pad(&mut self, n: usize) {
        let mut n = n;
        while n > 0 {
            let k = n.min(SPACES.len());
            self.buf.push_str(&SPACES[..k]);
            n -= k;
        }
    }
    fn left(&mut self, s: &str, width: usize) {
        self.buf.push_str(s);
        self.pad(width.saturating_sub(s.chars().count()) + 1);
    }
    /// A right-aligned cell whose text `fill` appends; `fill` returns its width in chars.
    fn right(&mut self, width: usize, fill: impl FnOnce(&mut String) -> usize) {
        let mut cell = std::mem::take(&mut self.cell);
        cell.clear();
        let n = fill(&mut cell);
        self.pad(width.saturating_sub(n));
        self.buf.push_str(&cell);
        self.buf.push(' ');
        self.cell = cell;
    }
    fn addr(&mut self, a: SocketAddr, width: usize) {
        let start = self.buf.len();
        match a {
            SocketAddr::V4(v4) => {
                let o = v4.ip().octets();
                for (i, b) in o.iter().enumerate() {
                    if i > 0 {
                        self.buf.push('.');
                    }
                    push_u64(&mut self.buf, *b as u64);
                }
                self.buf.push(':');
                push_u64(&mut self.buf, v4.port() as u64);
            }
            SocketAddr::V6(_) => {
                let _ = fmt::Write::write_fmt(&mut self.buf, format_args!("{a}"));
            }
        }
        let n = self.buf.len() - start; // addresses are ASCII
        self.pad(width.saturating_sub(n) + 1);
    }
    /// "27 µs", "1.23 ms", "2.50 s".
    fn dur(&mut self, d: Option<Dur>, width: usize) {
        self.right(width, |c| {
            let Some(d) = d else {
                c.push('-');
                return 1;
            };
            let us = d.nanos() / 1000;
            let (whole, frac, unit) = if us < 1000 {
                (us, None, " µs")
            } else if us < 1_000_000 {
                (us / 1000, Some(us % 1000 / 10), " ms")
            } else {
                (us / 1_000_000, Some(us % 1_000_000 / 10_000), " s")
            };
            push_u64(c, whole);
            if let Some(f) = frac {
                c.push('.');
                if f < 10 {
                    c.push('0');
                }
                push_u64(c, f);
            }
            c.push_str(unit);
            c.chars().count()
        });
    }
    /// "900 B", "14.1 KiB", "2.5 MiB".
    fn size(&mut self, b: Option<u64>, width: usize) {
        self.right(width, |c| {
            let Some(b) = b else {
                c.push('-');
                return 1;
            };
            // The unit is Bytes'; the figure is written in tenths by hand, without allocating.
            match Bytes::new(b).binary_unit() {
                (1, _) => {
                    push_u64(c, b);
                    c.push_str(" B");
                }
                (unit, prefix) => {
                    push_tenths(c, (b * 10 + unit / 2) / unit);
                    c.push(' ');
                    c.push_str(prefix);
                    c.push('B');
                }
            }
            c.len()
        });
    }
    /// "15.9 Mb/s": bits per second with a decimal prefix.
    fn rate(&mut self, r: Option<Rate>, width: usize) {
        self.right(width, |c| {
            let Some(r) = r else {
                c.push('-');
                return 1;
            };
            let bps = r.bps().max(0.0) as u64;
            let (unit, p) = match bps {
                0..1_000 => (1, ""),
                1_000..1_000_000 => (1_000, "k"),
                1_000_000..1_000_000_000 => (1_000_000, "M"),
                _ => (1_000_000_000, "G"),
            };
            if unit == 1 {
                push_u64(c, bps);
            } else {
                push_tenths(c, (bps * 10 + unit / 2) / unit);
            }
            c.push(' ');
            c.push_str(p);
            c.push_str("b/s");
            c.len()
        });
    }
}

/// Appends a decimal integer without the formatting machinery.
fn push_u64(s: &mut String, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        s.push(d as char);
    }
}

/// Appends `tenths / 10` with one decimal: 141 → "14.1".
fn push_tenths(s: &mut String, tenths: u64) {
    push_u64(s, tenths / 10);
    s.push('.');
    push_u64(s, tenths % 10);
}

fn write_details(f: &mut impl fmt::Write, c: &Conn) -> fmt::Result {
    let mut line = format!("    cookie {} uid {} inode {}", c.cookie, c.uid, c.inode);
    if let Some(ns) = &c.netns {
        line += &format!(" netns {ns}");
    }
    if let Some(cc) = c.congestion {
        line += &format!(" cc {cc}");
    }
    writeln!(f, "{line}")?;
    if let Some(s) = &c.snapshot {
        let n = &s.negotiated;
        let flag = |b: Option<bool>, name: &str| match b {
            Some(true) => format!(" {name}"),
            _ => String::new(),
        };
        writeln!(
            f,
            "    options:{}{}{}{}  window scale snd/rcv {}/{}  mss {}",
            flag(n.sack, "sack"),
            flag(n.timestamps, "ts"),
            flag(n.window_scaling, "wscale"),
            flag(n.ecn, "ecn"),
            n.snd_wscale.map(|v| v.to_string()).unwrap_or("-".into()),
            n.rcv_wscale.map(|v| v.to_string()).unwrap_or("-".into()),
            n.snd_mss.map(|v| v.to_string()).unwrap_or("-".into()),
        )?;
        if let Some(sh) = &s.lifetime_shares {
            writeln!(
                f,
                "    lifetime busy: rwnd {:.0}% sndbuf {:.0}% network {:.0}%",
                sh.rwnd * 100.0,
                sh.sndbuf * 100.0,
                sh.network * 100.0
            )?;
        }
    }
    if let Some(i) = &c.tcp_info {
        // Every decoded field (alphabetically) as key=value pairs.
        if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(i) {
            let pairs: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
            for chunk in pairs.chunks(8) {
                writeln!(f, "    {}", chunk.join(" "))?;
            }
        }
    }
    if let Some(m) = &c.skmem {
        writeln!(
            f,
            "    skmem: rmem {} rcvbuf {} wmem {} sndbuf {} queued {} drops {}",
            m.rmem_alloc,
            m.rcvbuf,
            m.wmem_alloc,
            m.sndbuf,
            m.wmem_queued,
            m.drops.unwrap_or(0)
        )?;
    }
    if let Some(b) = &c.bbr {
        writeln!(
            f,
            "    bbr: bw {} min_rtt {} pacing_gain {:.2} cwnd_gain {:.2}",
            Rate::from_bps(b.bw_bytes_per_s as f64 * 8.0),
            Dur::from_micros(b.min_rtt_us as u64),
            b.pacing_gain,
            b.cwnd_gain
        )?;
    }
    Ok(())
}

/// One line of `watch --record FILE` (JSON lines): a sample of one connection, or its final
/// statistics when it closed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecordLine {
    /// Seconds since the watch started.
    pub t_s: Dur,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The named network namespace (absent: the current one).
    pub netns: Option<String>,
    /// The kernel's socket cookie.
    pub cookie: u64,
    /// Local address and port.
    pub local: SocketAddr,
    /// Remote address and port.
    pub remote: SocketAddr,
    /// TCP state as `ss` names it.
    pub state: String,
    /// True for the final statistics of a closing connection (destroy event).
    #[serde(default)]
    pub closed: bool,
    /// The sample: `tcp_info` and socket memory, with the time it was taken.
    pub sample: Sample,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The congestion control algorithm.
    pub congestion: Option<CongName>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(f: impl FnOnce(&mut Row)) -> String {
        let mut r = Row::default();
        f(&mut r);
        r.buf
    }

    /// Rows from the recorded loopback dump, varied so each line differs.
    fn recorded_rows(n: usize) -> Vec<Conn> {
        let socks = crate::recorded_sockets();
        (0..n)
            .map(|i| {
                let mut s = socks[i % socks.len()].clone();
                s.src.set_port(1024 + (i % 60_000) as u16);
                s.rqueue_bytes = i as u32;
                let (mut c, _) = Conn::new(s, Dur::ZERO, None, &Context::default(), i % 7 == 0);
                if i % 5 == 0 {
                    c.netns = Some(format!("ns{i}"));
                }
                c
            })
            .collect()
    }

    #[test]
    fn rows_rendered_as_decoded_make_the_same_table() {
        for all in [false, true] {
            let mut rows = recorded_rows(300);
            // Distinct rates, so the order is visible: a stable sort, highest first.
            for (i, c) in rows.iter_mut().enumerate() {
                if let Some(s) = c.snapshot.as_mut() {
                    s.delivery_rate_bps = Some(Rate::from_bps(((i * 7919) % 1000) as f64));
                }
            }
            let mut text = TextRows::new(all);
            for c in &rows {
                text.push(c);
            }
            rows.sort_by_cached_key(Conn::sort_key);
            let table = ConnTable {
                connections: rows,
                all,
            };
            assert_eq!(text.finish(), table.to_string());
        }
        assert_eq!(TextRows::new(false).finish(), "no TCP connections match\n");
    }

    #[test]
    fn a_big_table_renders_in_two_halves_exactly_as_in_one() {
        for all in [false, true] {
            let rows = recorded_rows(5000);
            let mut one = String::new();
            write_rows(&mut one, &rows, all).unwrap();
            let table = ConnTable {
                connections: rows,
                all,
            };
            let text = table.to_string();
            let (header, body) = text.split_once('\n').unwrap();
            assert!(header.starts_with("STATE"));
            assert_eq!(body, one);
            // One line per row, more with --all's details; rows keep their order.
            assert!(body.lines().count() >= 5000);
            assert!(body.lines().next().unwrap().contains(":1024 "));
        }
    }

    #[test]
    fn all_shows_bbrs_model_in_text() {
        let mut s = crate::recorded_sockets()
            .into_iter()
            .find(|s| s.info.is_some())
            .unwrap();
        s.bbr = Some(BbrInfo {
            bw_bytes_per_s: 1_250_000,
            min_rtt_us: 20_000,
            pacing_gain: 739.0 / 256.0,
            cwnd_gain: 2.0,
        });
        let (c, _) = Conn::new(s.clone(), Dur::ZERO, None, &Context::default(), true);
        let text = ConnTable {
            connections: vec![c],
            all: true,
        }
        .to_string();
        let line = text.lines().find(|l| l.starts_with("    bbr: ")).unwrap();
        assert_eq!(
            line,
            format!(
                "    bbr: bw {} min_rtt {} pacing_gain 2.89 cwnd_gain 2.00",
                Rate::from_bps(10e6),
                Dur::from_millis(20)
            )
        );
        // Without --all, no details.
        let (c, _) = Conn::new(s, Dur::ZERO, None, &Context::default(), false);
        let brief = ConnTable {
            connections: vec![c],
            all: false,
        };
        assert!(!brief.to_string().contains("bbr:"));
    }

    #[test]
    fn cells_are_aligned_and_rounded() {
        assert_eq!(cell(|r| r.size(Some(0), 6)), "   0 B ");
        assert_eq!(cell(|r| r.size(Some(1023), 7)), " 1023 B ");
        assert_eq!(cell(|r| r.size(Some(1024), 7)), "1.0 KiB ");
        assert_eq!(cell(|r| r.size(Some(1536 * 1024), 8)), " 1.5 MiB ");
        assert_eq!(cell(|r| r.size(None, 3)), "  - ");
        assert_eq!(cell(|r| r.dur(Some(Dur::from_micros(999)), 7)), " 999 µs ");
        assert_eq!(
            cell(|r| r.dur(Some(Dur::from_micros(1_050)), 7)),
            "1.05 ms "
        );
        assert_eq!(cell(|r| r.dur(Some(Dur::from_millis(2_500)), 6)), "2.50 s ");
        assert_eq!(cell(|r| r.rate(Some(Rate::from_bps(999.0)), 7)), "999 b/s ");
        assert_eq!(
            cell(|r| r.rate(Some(Rate::from_bps(15.94e6)), 9)),
            "15.9 Mb/s "
        );
        assert_eq!(cell(|r| r.left("ESTAB", 7)), "ESTAB   ");
        assert_eq!(
            cell(|r| r.addr("198.18.0.1:5201".parse().unwrap(), 16)),
            "198.18.0.1:5201  "
        );
        assert_eq!(
            cell(|r| r.addr("[2001:2::1]:80".parse().unwrap(), 15)),
            "[2001:2::1]:80  "
        );
        let mut s = String::new();
        push_u64(&mut s, 0);
        push_u64(&mut s, u64::MAX);
        assert_eq!(s, format!("0{}", u64::MAX));
    }

    #[test]
    fn parallel_connections_are_judged_against_their_share_of_the_path() {
        let sock = |cookie: u64, port: u16, acked: u64| DiagSocket {
            cookie,
            info: Some(TcpInfo {
                len: 280,
                state: Some(1),
                options: Some(7),
                snd_wscale: Some(7),
                rcv_wscale: Some(9),
                snd_mss: Some(1448),
                snd_cwnd: Some(100),
                rtt_us: Some(20_000),
                min_rtt_us: Some(10_000),
                snd_wnd: Some(65536),
                bytes_sent: Some(acked),
                bytes_acked: Some(acked),
                bytes_received: Some(0),
                bytes_retrans: Some(0),
                total_retrans: Some(0),
                data_segs_out: Some(0),
                busy_time_us: Some(acked / 10),
                rwnd_limited_us: Some(0),
                sndbuf_limited_us: Some(0),
                ..TcpInfo::default()
            }),
            ..DiagSocket::from_addrs(
                1,
                format!("198.18.0.1:{port}").parse().unwrap(),
                "198.18.0.2:5201".parse().unwrap(),
            )
        };
        let ctx = Context::with_path_rate(Some("100mbit".parse().unwrap()));
        let mut h = History::default();
        // Four streams, each 23 Mbit/s over 1 s: together at the 100 Mbit/s path's capacity.
        let first: Vec<DiagSocket> = (0..4).map(|k| sock(k, 40000 + k as u16, 0)).collect();
        h.rows(None, &first, Dur::ZERO, &ctx, false);
        let second: Vec<DiagSocket> = (0..4)
            .map(|k| sock(k, 40000 + k as u16, 2_875_000))
            .collect();
        let rows = h.rows(None, &second, Dur::from_millis(1000), &ctx, false);
        for r in &rows {
            assert_eq!(
                r.verdict.limit,
                tcptune_diagnose::Limit::PathCapacity,
                "{}",
                r.verdict.text
            );
        }
    }
}
