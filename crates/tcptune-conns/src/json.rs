//! `conns --json` rendered fast: the same bytes serde_json's printers (pretty or compact) make
//! of a [`ConnTable`](crate::conn::ConnTable), written by hand for the fields every row has.
//!
//! serde_json spent ~1 µs per row (bench/conns): a write per indentation level, Display round
//! trips for addresses, a call per token. Here a member's separator, indentation and key take
//! two copies, integers go through itoa and floats through zmij (serde_json's own formatters,
//! so numbers are the same digits; whole numbers, such as most rates and shares, through
//! itoa), into one reused buffer. Parts only some rows have (process, interval, `--all`'s
//! fields) go through serde with [`Pretty`], a formatter that indents like serde_json's from
//! any depth. The tests compare the bytes with serde_json's for recorded rows, so a field
//! added to a row type without its line here fails them.

use std::io;
use std::net::SocketAddr;

use serde::Serialize;
use tcptune_model::{Dur, Rate};

use crate::conn::Conn;
use crate::rows::Rendered;
use tcptune_diagnose::{Negotiated, Shares, Snapshot};

/// Indentation: two spaces per level, as serde_json's pretty printer.
const SPACES: &[u8; 64] = b"                                                                ";

fn indent(buf: &mut Vec<u8>, level: usize) {
    let mut n = 2 * level;
    while n > 0 {
        let k = n.min(SPACES.len());
        buf.extend_from_slice(&SPACES[..k]);
        n -= k;
    }
}

/// serde_json's pretty formatting (two-space indentation) for a value that starts `level`
/// levels deep, each indentation written at once.
pub struct Pretty {
    level: usize,
    has_value: bool,
}

impl Pretty {
    /// A formatter for a value that starts `level` levels deep.
    pub fn at(level: usize) -> Pretty {
        Pretty {
            level,
            has_value: false,
        }
    }
}

fn write_indent<W: ?Sized + io::Write>(w: &mut W, level: usize) -> io::Result<()> {
    let mut n = 2 * level;
    while n > 0 {
        let k = n.min(SPACES.len());
        w.write_all(&SPACES[..k])?;
        n -= k;
    }
    Ok(())
}

impl serde_json::ser::Formatter for Pretty {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(b"[")
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            w.write_all(b"\n")?;
            write_indent(w, self.level)?;
        }
        w.write_all(b"]")
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        write_indent(w, self.level)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(b"{")
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            w.write_all(b"\n")?;
            write_indent(w, self.level)?;
        }
        w.write_all(b"}")
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        write_indent(w, self.level)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// A member's key as written: quoted, with the colon and space (`"rtt_s": `).
macro_rules! k {
    ($name:literal) => {
        concat!("\"", $name, "\": ")
    };
}

/// What separates members: a comma (after the first) and the line break with its indentation.
const SEP: &[u8; 66] = b",\n                                                                ";

/// Appends one JSON object's members to a buffer, pretty-printed at a depth or compact.
struct Obj<'a> {
    buf: &'a mut Vec<u8>,
    /// Depth of the members being written.
    level: usize,
    /// No member written yet at this depth.
    first: bool,
    /// serde_json's pretty layout; else its compact one (no whitespace).
    pretty: bool,
}

impl Obj<'_> {
    fn open(&mut self) {
        self.buf.push(b'{');
        self.level += 1;
        self.first = true;
    }
    fn close(&mut self) {
        self.level -= 1;
        if !self.first && self.pretty {
            self.buf.push(b'\n');
            indent(self.buf, self.level);
        }
        self.buf.push(b'}');
        // The enclosing object has at least the member this one is the value of.
        self.first = false;
    }
    /// `key` as made by `k!`.
    fn key(&mut self, key: &str) {
        let from = usize::from(self.first);
        if !self.pretty {
            // `,"rtt_s":` (the key without the space after its colon).
            self.buf.extend_from_slice(&SEP[from..1]);
            self.buf.extend_from_slice(&key.as_bytes()[..key.len() - 1]);
            self.first = false;
            return;
        }
        let to = 2 + 2 * self.level;
        if to <= SEP.len() {
            self.buf.extend_from_slice(&SEP[from..to]);
        } else {
            self.buf.extend_from_slice(&SEP[from..2]);
            indent(self.buf, self.level);
        }
        self.first = false;
        self.buf.extend_from_slice(key.as_bytes());
    }
    fn u64(&mut self, k: &str, v: u64) {
        self.key(k);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }
    fn f64(&mut self, k: &str, v: f64) {
        self.key(k);
        float(self.buf, v);
    }
    fn bool(&mut self, k: &str, v: bool) {
        self.key(k);
        self.buf
            .extend_from_slice(if v { b"true" } else { b"false" });
    }
    fn str(&mut self, k: &str, v: &str) {
        self.key(k);
        string(self.buf, v);
    }
    fn addr(&mut self, k: &str, a: SocketAddr) {
        self.key(k);
        self.buf.push(b'"');
        match a {
            SocketAddr::V4(v4) => {
                let mut n = itoa::Buffer::new();
                for (i, o) in v4.ip().octets().iter().enumerate() {
                    if i > 0 {
                        self.buf.push(b'.');
                    }
                    self.buf.extend_from_slice(n.format(*o).as_bytes());
                }
                self.buf.push(b':');
                self.buf.extend_from_slice(n.format(v4.port()).as_bytes());
            }
            // Rarer; Display's text has nothing to escape.
            SocketAddr::V6(_) => {
                use std::io::Write;
                let _ = write!(self.buf, "{a}");
            }
        }
        self.buf.push(b'"');
    }
    fn opt_u64(&mut self, k: &str, v: Option<u64>) {
        if let Some(v) = v {
            self.u64(k, v);
        }
    }
    fn opt_f64(&mut self, k: &str, v: Option<f64>) {
        if let Some(v) = v {
            self.f64(k, v);
        }
    }
    fn opt_bool(&mut self, k: &str, v: Option<bool>) {
        if let Some(v) = v {
            self.bool(k, v);
        }
    }
    fn opt_dur(&mut self, k: &str, v: Option<Dur>) {
        self.opt_f64(k, v.map(Dur::secs));
    }
    fn opt_rate(&mut self, k: &str, v: Option<Rate>) {
        self.opt_f64(k, v.map(Rate::bps));
    }
    /// A member through serde (parts not every row has).
    fn serde(&mut self, k: &str, v: &impl Serialize) {
        self.key(k);
        // Writing into a Vec cannot fail, and these types serialize without errors.
        let _ = if self.pretty {
            v.serialize(&mut serde_json::Serializer::with_formatter(
                &mut *self.buf,
                Pretty::at(self.level),
            ))
        } else {
            v.serialize(&mut serde_json::Serializer::new(&mut *self.buf))
        };
    }
}

/// A number as serde_json writes an f64: whole numbers below 10^15 (rates in bytes/s × 8,
/// shares of 0 and 1) as digits and ".0", which is what zmij prints for them, without its
/// general algorithm; others by zmij; NaN and infinities as null.
fn float(buf: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        buf.extend_from_slice(b"null");
    } else if v.is_sign_positive() && v < 1e15 && (v as u64) as f64 == v {
        // (A round trip through u64 tests wholeness; fract() calls libm's trunc.)
        buf.extend_from_slice(itoa::Buffer::new().format(v as u64).as_bytes());
        buf.extend_from_slice(b".0");
    } else {
        buf.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
    }
}

/// A JSON string literal, escaped as serde_json does: quote, backslash and control characters.
fn string(buf: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.push(b'"');
    let mut rest = s.as_bytes();
    while let Some(i) = rest
        .iter()
        .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
    {
        buf.extend_from_slice(&rest[..i]);
        match rest[i] {
            b'"' => buf.extend_from_slice(b"\\\""),
            b'\\' => buf.extend_from_slice(b"\\\\"),
            0x08 => buf.extend_from_slice(b"\\b"),
            0x0c => buf.extend_from_slice(b"\\f"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            b => {
                buf.extend_from_slice(b"\\u00");
                buf.push(HEX[usize::from(b >> 4)]);
                buf.push(HEX[usize::from(b & 0xf)]);
            }
        }
        rest = &rest[i + 1..];
    }
    buf.extend_from_slice(rest);
    buf.push(b'"');
}

fn shares(o: &mut Obj, k: &str, s: &Shares) {
    o.key(k);
    o.open();
    o.f64(k!("rwnd"), s.rwnd);
    o.f64(k!("sndbuf"), s.sndbuf);
    o.f64(k!("network"), s.network);
    o.opt_f64(k!("application"), s.application);
    o.close();
}

fn negotiated(o: &mut Obj, n: &Negotiated) {
    o.key(k!("negotiated"));
    o.open();
    o.opt_bool(k!("sack"), n.sack);
    o.opt_bool(k!("timestamps"), n.timestamps);
    o.opt_bool(k!("window_scaling"), n.window_scaling);
    o.opt_bool(k!("ecn"), n.ecn);
    o.opt_u64(k!("snd_wscale"), n.snd_wscale.map(u64::from));
    o.opt_u64(k!("rcv_wscale"), n.rcv_wscale.map(u64::from));
    o.opt_u64(k!("snd_mss"), n.snd_mss.map(u64::from));
    o.opt_u64(k!("advmss"), n.advmss.map(u64::from));
    o.close();
}

fn snapshot(o: &mut Obj, s: &Snapshot) {
    o.key(k!("snapshot"));
    o.open();
    o.opt_dur(k!("rtt_s"), s.rtt_s);
    o.opt_dur(k!("min_rtt_s"), s.min_rtt_s);
    o.opt_f64(k!("rtt_inflation"), s.rtt_inflation);
    o.opt_u64(k!("cwnd_bytes"), s.cwnd_bytes);
    o.opt_u64(k!("snd_wnd_bytes"), s.snd_wnd_bytes.map(u64::from));
    o.opt_u64(k!("rcv_wnd_bytes"), s.rcv_wnd_bytes.map(u64::from));
    o.opt_rate(k!("window_rate_bps"), s.window_rate_bps);
    o.opt_rate(k!("delivery_rate_bps"), s.delivery_rate_bps);
    o.opt_rate(k!("pacing_rate_bps"), s.pacing_rate_bps);
    o.opt_f64(k!("retrans_ratio"), s.retrans_ratio);
    if let Some(sh) = &s.lifetime_shares {
        shares(o, k!("lifetime_shares"), sh);
    }
    negotiated(o, &s.negotiated);
    o.close();
}

/// Appends `c` as the object serde_json's printer makes of it at depth `level`.
fn conn(buf: &mut Vec<u8>, level: usize, pretty: bool, c: &Conn) {
    let mut o = Obj {
        buf,
        level,
        first: true,
        pretty,
    };
    o.open();
    if let Some(ns) = &c.netns {
        o.str(k!("netns"), ns);
    }
    o.str(k!("state"), &c.state);
    o.addr(k!("local"), c.local);
    o.addr(k!("remote"), c.remote);
    o.u64(k!("cookie"), c.cookie);
    o.u64(k!("uid"), c.uid.into());
    o.u64(k!("inode"), c.inode.into());
    if let Some(p) = &c.process {
        o.serde(k!("process"), p);
    }
    if let Some(cc) = &c.congestion {
        o.str(k!("congestion"), cc.as_str());
    }
    o.u64(k!("rqueue_bytes"), c.rqueue_bytes.into());
    o.u64(k!("wqueue_bytes"), c.wqueue_bytes.into());
    if let Some(s) = &c.snapshot {
        snapshot(&mut o, s);
    }
    if let Some(i) = &c.interval {
        o.serde(k!("interval"), i);
    }
    o.key(k!("verdict"));
    o.open();
    o.key(k!("limit"));
    // A unit variant: serde writes its name (snake_case) as a string.
    let _ = serde_json::to_writer(&mut *o.buf, &c.verdict.limit);
    o.opt_f64(k!("share"), c.verdict.share);
    o.str(k!("text"), &c.verdict.text);
    if !c.verdict.missing.is_empty() {
        o.serde(k!("missing"), &c.verdict.missing);
    }
    o.close();
    if let Some(t) = &c.tcp_info {
        o.serde(k!("tcp_info"), t);
    }
    if let Some(m) = &c.skmem {
        o.serde(k!("skmem"), m);
    }
    if let Some(b) = &c.bbr {
        o.serde(k!("bbr"), b);
    }
    o.close();
}

/// How the table is laid out: serde_json's pretty printer with the table's members `level`
/// deep (1 for the table alone, 2 as the `result` of the `--json` envelope), or its compact one.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// How deep the table's members are (2 inside the `--json` envelope).
    pub level: usize,
    /// Indented as serde_json's pretty printer, else compact.
    pub pretty: bool,
}

impl Layout {
    /// The table's text up to its first row: `{"connections":[`, indented or not.
    fn head(self, buf: &mut Vec<u8>) {
        buf.push(b'{');
        if self.pretty {
            buf.push(b'\n');
            indent(buf, self.level);
            buf.extend_from_slice(b"\"connections\": [");
        } else {
            buf.extend_from_slice(b"\"connections\":[");
        }
    }

    /// A row as an element of the `connections` array, after a comma: the comma, the line
    /// break and indentation when pretty, and the object one level deeper than the array.
    fn row(self, buf: &mut Vec<u8>, c: &Conn) {
        buf.push(b',');
        if self.pretty {
            buf.push(b'\n');
            indent(buf, self.level + 1);
        }
        conn(buf, self.level + 1, self.pretty, c);
    }

    /// The table's text after its last row (`any`: there were rows).
    fn tail(self, buf: &mut Vec<u8>, any: bool) {
        if self.pretty {
            if any {
                buf.push(b'\n');
                indent(buf, self.level);
            }
            buf.extend_from_slice(b"]\n");
            indent(buf, self.level - 1);
        } else {
            buf.push(b']');
        }
        buf.push(b'}');
    }
}

/// Writes what serde_json makes of a [`ConnTable`](crate::conn::ConnTable) of `rows` (in the
/// order given), laid out as `layout`. Rows are rendered into one reused buffer that is
/// written every 64 KiB, so the document is never held whole (18 MB for 20,000 rows pretty,
/// whose page faults alone cost more than rendering them).
pub fn write_table<'a>(
    rows: impl IntoIterator<Item = &'a Conn>,
    layout: Layout,
    w: &mut impl io::Write,
) -> io::Result<()> {
    const FLUSH_AT: usize = 1 << 16;
    let mut buf = Vec::with_capacity(2 * FLUSH_AT);
    layout.head(&mut buf);
    let mut any = false;
    for c in rows {
        let start = buf.len();
        layout.row(&mut buf, c);
        if !any {
            // The first row has no comma before it.
            buf.remove(start);
            any = true;
        }
        if buf.len() >= FLUSH_AT {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    layout.tail(&mut buf, any);
    w.write_all(&buf)
}

/// The rows of a one-shot `conns --json`, rendered as they are decoded and written sorted
/// (see the `rows` module).
pub struct JsonRows {
    layout: Layout,
    /// Each row with a comma before it.
    rows: Rendered,
}

impl JsonRows {
    /// An empty table laid out as `layout` says.
    pub fn new(layout: Layout) -> JsonRows {
        JsonRows {
            layout,
            rows: Rendered::default(),
        }
    }

    /// Renders a row and keeps its bytes and sort key.
    pub fn push(&mut self, c: &Conn) {
        let layout = self.layout;
        self.rows.push(c.sort_key(), |buf| layout.row(buf, c));
    }

    /// Writes the table, rows sorted as `ConnTable`'s (highest rate first, stable), between
    /// `before` and `after`.
    pub fn write(self, before: &[u8], after: &[u8], w: &mut impl io::Write) -> io::Result<()> {
        let mut head = before.to_vec();
        self.layout.head(&mut head);
        let mut tail = Vec::new();
        self.layout.tail(&mut tail, !self.rows.is_empty());
        tail.extend_from_slice(after);
        // The first row has no comma before it.
        self.rows.write(&head, 1, &tail, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::{ConnTable, History};
    use tcptune_diagnose::Context;
    use tcptune_kernel::procs::Owner;

    use crate::recorded_sockets as recorded;

    /// Rows with every optional part somewhere: `--all`'s fields, namespaces (with characters
    /// JSON escapes), owners, intervals from a second sample, IPv6 addresses, a socket without
    /// tcp_info, a non-finite figure.
    fn varied_rows(n: usize) -> Vec<Conn> {
        let socks = recorded();
        let mut history = History::default();
        let ctx = Context::default();
        let mut rows = Vec::new();
        for i in 0..n {
            let mut s = socks[i % socks.len()].clone();
            s.src.set_port(1024 + (i % 60_000) as u16);
            s.rqueue_bytes = i as u32;
            if i % 11 == 3 {
                s.src = format!("[2001:2::{:x}]:{}", i, 80 + i % 7).parse().unwrap();
                s.dst = "[fe80::1%2]:5201".parse().unwrap();
            }
            if i % 13 == 4 {
                s.info = None;
            }
            let all = i % 7 == 0;
            let ns = (i % 5 == 0).then(|| format!("ns{i} \"q\" \\ \n\t\u{1}é"));
            // Two samples of the same socket: the second row has an interval.
            let first = std::slice::from_ref(&s);
            let _ = history.rows(ns.as_deref(), first, Dur::from_millis(0), &ctx, all);
            if let Some(info) = s.info.as_mut() {
                if let Some(b) = info.bytes_acked.as_mut() {
                    *b += 1_000_000 + i as u64;
                }
            }
            let with_interval = i % 3 == 0;
            let mut c = if with_interval {
                history
                    .rows(
                        ns.as_deref(),
                        std::slice::from_ref(&s),
                        Dur::from_millis(100),
                        &ctx,
                        all,
                    )
                    .remove(0)
            } else {
                let (mut c, _) = Conn::new(s, Dur::ZERO, None, &ctx, all);
                c.netns = ns;
                c
            };
            if i % 4 == 1 {
                c.process = Some(Box::new(Owner {
                    pid: 100 + i as u32,
                    comm: format!("app{i}"),
                }));
            }
            if i == 2 {
                if let Some(snap) = c.snapshot.as_mut() {
                    snap.rtt_inflation = Some(f64::NAN);
                    snap.retrans_ratio = Some(f64::INFINITY);
                }
            }
            rows.push(c);
        }
        // Distinct rates, so the order is visible.
        for (i, c) in rows.iter_mut().enumerate() {
            if let Some(s) = c.snapshot.as_mut() {
                s.delivery_rate_bps = Some(Rate::from_bps(((i * 7919) % 1000) as f64 * 1e3));
            }
        }
        rows
    }

    fn by_hand(rows: &[Conn], level: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let pretty = true;
        write_table(rows, Layout { level, pretty }, &mut out).unwrap();
        out
    }

    /// The table as [`JsonRows`] writes it from rows pushed unsorted.
    fn pushed(rows: &[Conn], layout: Layout) -> Vec<u8> {
        let mut table = JsonRows::new(layout);
        for c in rows {
            table.push(c);
        }
        let mut w = crate::rows::tests::Trickle(Vec::new());
        table.write(b"<", b">", &mut w).unwrap();
        let mut out = w.0;
        assert_eq!(out.first(), Some(&b'<'));
        assert_eq!(out.pop(), Some(b'>'));
        out.remove(0);
        out
    }

    #[test]
    fn compact_rows_are_serde_jsons_bytes() {
        let rows = varied_rows(400);
        let mut sorted = rows.clone();
        sorted.sort_by_cached_key(Conn::sort_key);
        let compact = Layout {
            level: 1,
            pretty: false,
        };
        let mut fast = Vec::new();
        write_table(&sorted, compact, &mut fast).unwrap();
        let table = ConnTable {
            connections: sorted,
            all: false,
        };
        let serde = serde_json::to_vec(&table).unwrap();
        assert_eq!(
            String::from_utf8(fast).unwrap(),
            String::from_utf8(serde.clone()).unwrap()
        );
        // Rendered as decoded (unsorted) and written sorted: the same bytes.
        assert_eq!(pushed(&rows, compact), serde);
        let empty = ConnTable {
            connections: vec![],
            all: false,
        };
        assert_eq!(pushed(&[], compact), serde_json::to_vec(&empty).unwrap());
    }

    #[test]
    fn rows_pushed_unsorted_are_written_as_the_sorted_table() {
        // More rows than one writev takes, several blocks, and rates that tie (stable order).
        let rows = varied_rows(2500);
        let mut sorted = rows.clone();
        sorted.sort_by_cached_key(Conn::sort_key);
        let pretty = Layout {
            level: 1,
            pretty: true,
        };
        let fast = pushed(&rows, pretty);
        assert!(fast.len() > 2 * crate::rows::BLOCK);
        let table = ConnTable {
            connections: sorted,
            all: false,
        };
        assert_eq!(fast, serde_json::to_vec_pretty(&table).unwrap());
        let empty = ConnTable {
            connections: vec![],
            all: false,
        };
        assert_eq!(
            pushed(&[], pretty),
            serde_json::to_vec_pretty(&empty).unwrap()
        );
    }

    #[test]
    fn rows_by_hand_are_serde_jsons_bytes() {
        let rows = varied_rows(400);
        assert!(rows.iter().any(|c| c.interval.is_some()));
        assert!(rows
            .iter()
            .any(|c| c.tcp_info.is_some() && c.skmem.is_some()));
        assert!(rows.iter().any(|c| c.local.is_ipv6()));
        assert!(rows.iter().any(|c| c.snapshot.is_none()));
        let mut sorted = rows.clone();
        sorted.sort_by_cached_key(Conn::sort_key);
        let fast = by_hand(&sorted, 1);
        let table = ConnTable {
            connections: sorted,
            all: false,
        };
        let serde = serde_json::to_vec_pretty(&table).unwrap();
        assert_eq!(
            String::from_utf8(fast.clone()).unwrap(),
            String::from_utf8(serde).unwrap()
        );
        // And so the same document.
        let a: serde_json::Value = serde_json::from_slice(&fast).unwrap();
        assert_eq!(a, serde_json::to_value(&table).unwrap());
        // Empty.
        assert_eq!(
            by_hand(&[], 1),
            serde_json::to_vec_pretty(&ConnTable {
                connections: vec![],
                all: false
            })
            .unwrap()
        );
    }

    #[test]
    fn nested_at_any_depth_as_serde_json() {
        // The table as the value of an envelope member, two levels in.
        #[derive(Serialize)]
        struct Outer<'a> {
            a: u8,
            result: &'a ConnTable,
        }
        let rows = varied_rows(30);
        let mut sorted = rows.clone();
        sorted.sort_by_cached_key(Conn::sort_key);
        let table = ConnTable {
            connections: sorted,
            all: true,
        };
        let serde = serde_json::to_string_pretty(&Outer {
            a: 1,
            result: &table,
        })
        .unwrap();
        let mut fast = b"{\n  \"a\": 1,\n  \"result\": ".to_vec();
        fast.extend(by_hand(&table.connections, 2));
        fast.extend(b"\n}");
        assert_eq!(String::from_utf8(fast).unwrap(), serde);
    }

    #[test]
    fn floats_are_serde_jsons_digits() {
        let mut values = vec![0.0, -0.0, 1.0, 0.5, 1e-7, 6e-6, 1.7e-5, 2.8333333333333335];
        let mut p = 1.0;
        for _ in 0..20 {
            values.extend([p, p - 1.0, p + 1.0, p * 1.5, -p, p / 3.0]);
            p *= 10.0;
        }
        values.extend([
            2730666664.0,
            1927529411.764706,
            9007199254740992.0,
            1e15 - 1.0,
        ]);
        values.extend([f64::NAN, f64::INFINITY, f64::MAX, f64::MIN_POSITIVE]);
        let mut x = 0x9e3779b97f4a7c15_u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push((x % 100_000_000_000) as f64 / [1.0, 8.0, 1e3, 1e9][(x % 4) as usize]);
        }
        for v in values {
            let mut buf = Vec::new();
            float(&mut buf, v);
            let expected = serde_json::to_string(&v).unwrap();
            assert_eq!(String::from_utf8(buf).unwrap(), expected, "{v:e}");
        }
    }

    #[test]
    fn strings_are_escaped_as_serde_json() {
        let s = "plain \" \\ / \u{0} \u{8} \u{c} \n \r \t \u{1f} \u{7f} é ✓";
        let mut buf = Vec::new();
        string(&mut buf, s);
        assert_eq!(buf, serde_json::to_vec(s).unwrap());
    }
}
