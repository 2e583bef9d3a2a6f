//! Sans-IO analysis of TCP captures: feed decoded segments in capture order, get per-flow
//! Wireshark-compatible flags ([`wireshark`]), tcptrace-style statistics ([`stats`]), a short
//! diagnosis ([`diagnose`]) and bounded series for graphs ([`series`], drawn by [`svg`]).
//!
//! Memory grows with the number of flows, not packets: each flow keeps constant-size state plus
//! bounded structures (at most 10000 unacked sequence ends as Wireshark keeps, 4096 outstanding
//! segments for RTT, and a fixed number of graph points when graphs are asked for). Only
//! `--packets` keeps something per flagged packet, because that is its output.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod analysis;
pub mod diagnose;
pub mod gaps;
pub mod join;
pub mod seq;
pub mod series;
pub mod stats;
pub mod svg;
pub mod wireshark;

use std::io::Read;
use std::sync::mpsc;

use tcptune_model::{Bytes, Dur, Rate};
use tcptune_wire::packet::flags as th;
use tcptune_wire::{
    parse_frame, Addr, CaptureError, CaptureInfo, CaptureReader, LinkType, SkipReason, TcpSegment,
};

pub use analysis::{AnalyzeReport, Finished, FlagCounts, FlaggedPacket, FlowReport};
use analysis::{DirStats, GapCounts, RttStats, Skipped, WindowStats};
use series::FlowSeries;
use stats::DirAcc;
use wireshark::{ConvState, Flags, SynCheck, Verdict};

/// What to collect besides the flags and statistics.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Keep every flagged packet with the reason (`--packets`).
    pub packets: bool,
    /// Keep bounded series for graphs (`--graphs`).
    pub series: bool,
}

/// One endpoint: address and port.
pub type Endpoint = (Addr, u16);

/// A conversation key: both endpoints, lower one first, so both directions find it. Each
/// endpoint is packed into machine words (address as two words, then family and port) so
/// ordering, comparing and hashing it are a handful of integer operations: the lookup runs
/// once per packet and was the most expensive step of reading.
#[derive(Debug, Clone, Copy, Eq)]
struct ConvKey([u64; 6]);

impl PartialEq for ConvKey {
    /// Word by word without branches: the derived comparison of the array calls `memcmp`.
    fn eq(&self, o: &ConvKey) -> bool {
        self.0.iter().zip(&o.0).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

impl ConvKey {
    /// The key, and whether the segment's source is the key's first endpoint (so the
    /// analysis learns the direction without comparing addresses again).
    fn of(seg: &TcpSegment) -> (ConvKey, bool) {
        let s = pack(&seg.src, seg.sport);
        let d = pack(&seg.dst, seg.dport);
        // Any fixed order of the two endpoints works (the flow remembers which side is `a`).
        if s <= d {
            (ConvKey([s[0], s[1], s[2], d[0], d[1], d[2]]), true)
        } else {
            (ConvKey([d[0], d[1], d[2], s[0], s[1], s[2]]), false)
        }
    }

    /// Words folded with rotations, then one multiplication (FxHash's constant) and a fold of
    /// the well-mixed high bits into the low ones the table indexes with: one multiply per
    /// lookup instead of one per word, which mattered on the hot path. Keys are not
    /// attacker-chosen in a way that matters (a hostile capture could only slow its own
    /// analysis down).
    fn hash(&self) -> u64 {
        let w = &self.0;
        let folded = w[0]
            ^ w[1].rotate_left(11)
            ^ w[2].rotate_left(22)
            ^ w[3].rotate_left(33)
            ^ w[4].rotate_left(44)
            ^ w[5].rotate_left(55);
        let h = folded.wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        h ^ (h >> 32)
    }
}

/// One endpoint as three words: the 16 address bytes, then family and port.
fn pack(a: &Addr, port: u16) -> [u64; 3] {
    let fam = u64::from(a.v6) << 16 | u64::from(port);
    // Invariant: `bytes` is 16 long, so these slices have exactly the lengths converted to.
    if a.v6 {
        let word = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap_or([0; 8]));
        [word(&a.bytes[..8]), word(&a.bytes[8..]), fam]
    } else {
        // IPv4 reads just the four bytes the decoder wrote (the rest are zero): a wider read
        // of freshly written bytes stalls the CPU (a failed store-to-load forwarding).
        let v4 = u32::from_be_bytes(a.bytes[..4].try_into().unwrap_or([0; 4]));
        [u64::from(v4), 0, fam]
    }
}

/// See [`KeyIndex::route`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Route {
    pub(crate) slot: u32,
    pub(crate) src_first: bool,
}

/// Gives each conversation key a dense slot number, in order of first appearance, so the
/// analysis finds a flow by indexing a `Vec` instead of hashing. It is separate from the
/// [`Analyzer`] so the pipeline can run it on the reading thread.
///
/// A small open-addressing table (linear probing, at most half full) rather than `HashMap`:
/// with a one-word hash and the slot stored beside the key, a lookup is usually one cache
/// line. Its size follows the number of conversations, never the number of packets.
#[derive(Default)]
pub(crate) struct KeyIndex {
    /// Power-of-two sized; `None` marks an empty bucket.
    table: Vec<Option<(ConvKey, u32)>>,
    len: u32,
    /// The last key looked up: consecutive packets often share it.
    last: Option<(ConvKey, u32)>,
}

impl KeyIndex {
    /// Where a decoded frame goes: its conversation's slot and whether its source is the
    /// key's first endpoint (anything for frames that are not TCP: they are only counted).
    fn route(&mut self, parsed: &Result<TcpSegment, SkipReason>) -> Route {
        match parsed {
            Ok(seg) => self.route_segment(seg),
            Err(_) => Route::default(),
        }
    }

    /// [`KeyIndex::route`] of a TCP segment (the two-capture join numbers its flows here too).
    pub(crate) fn route_segment(&mut self, seg: &TcpSegment) -> Route {
        let (key, src_first) = ConvKey::of(seg);
        Route {
            slot: self.slot(key),
            src_first,
        }
    }

    fn slot(&mut self, key: ConvKey) -> u32 {
        if let Some((k, i)) = self.last {
            if k == key {
                return i;
            }
        }
        if (self.len as usize + 1) * 2 > self.table.len() {
            self.grow();
        }
        let mask = self.table.len() - 1;
        let mut at = key.hash() as usize & mask;
        // Terminates: the table is at most half full, so an empty bucket exists.
        let i = loop {
            match self.table[at] {
                Some((k, i)) if k == key => break i,
                Some(_) => at = (at + 1) & mask,
                None => {
                    let i = self.len;
                    self.table[at] = Some((key, i));
                    self.len += 1;
                    break i;
                }
            }
        };
        self.last = Some((key, i));
        i
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.table);
        let size = (old.len() * 2).max(64);
        self.table = vec![None; size];
        let mask = size - 1;
        for (k, i) in old.into_iter().flatten() {
            let mut at = k.hash() as usize & mask;
            while self.table[at].is_some() {
                at = (at + 1) & mask;
            }
            self.table[at] = Some((k, i));
        }
    }
}

/// One conversation being analysed.
struct Flow {
    stream: u32,
    a: Endpoint,
    /// Whether `a` is its key's first endpoint: a packet goes a→b when its source is too.
    a_first: bool,
    b: Endpoint,
    client: Option<usize>,
    ws: ConvState,
    dirs: [DirAcc; 2],
    /// Last ACK number each direction sent (with the ACK flag), for bytes in flight.
    last_ack: [Option<u32>; 2],
    first_ns: i64,
    last_ns: i64,
    series: Option<Box<FlowSeries>>,
}

/// The streaming analyser: call [`Analyzer::frame`] for each frame in capture order, then
/// [`Analyzer::finish`].
pub struct Analyzer {
    opts: Options,
    flows: Vec<Flow>,
    /// Key → slot, for frames fed through [`Analyzer::frame`] (the pipeline in
    /// [`analyze_reader`] looks slots up on the reading thread instead).
    keys: KeyIndex,
    /// Slot → the flow its key currently belongs to (a reused port pair moves on to a new
    /// flow; the slot stays).
    slot_flow: Vec<usize>,
    frames: u64,
    tcp_segments: u64,
    skipped: Skipped,
    first_ns: Option<i64>,
    last_ns: i64,
    flagged: Vec<FlaggedPacket>,
}

impl Analyzer {
    /// An analyzer with no flows yet, with `opts` (graph series, flagged packets).
    pub fn new(opts: Options) -> Analyzer {
        Analyzer {
            opts,
            flows: Vec::new(),
            keys: KeyIndex::default(),
            slot_flow: Vec::new(),
            frames: 0,
            tcp_segments: 0,
            skipped: Skipped::default(),
            first_ns: None,
            last_ns: 0,
            flagged: Vec::new(),
        }
    }

    /// Accounts one frame that was read: its number, time (ns since the epoch) and decoding.
    pub fn frame(&mut self, number: u64, now: i64, parsed: &Result<TcpSegment, SkipReason>) {
        let route = self.keys.route(parsed);
        self.frame_in_slot(number, now, parsed, route);
    }

    /// [`Analyzer::frame`] with the route already looked up by a [`KeyIndex`] fed the same
    /// frames in the same order.
    fn frame_in_slot(
        &mut self,
        number: u64,
        now: i64,
        parsed: &Result<TcpSegment, SkipReason>,
        route: Route,
    ) {
        self.frames += 1;
        if self.first_ns.is_none() {
            self.first_ns = Some(now);
        }
        self.last_ns = now;
        match parsed {
            Ok(seg) => self.segment(number, now, seg, route),
            Err(SkipReason::NotTcp) => self.skipped.not_tcp += 1,
            Err(SkipReason::Fragment) => self.skipped.fragments += 1,
            Err(SkipReason::Malformed(_)) => self.skipped.malformed += 1,
            Err(SkipReason::UnsupportedLink(link)) => {
                self.skipped.unsupported_link += 1;
                self.unsupported_link(*link);
            }
        }
    }

    fn new_flow(&mut self, route: Route, seg: &TcpSegment, now: i64) -> usize {
        let slot = route.slot as usize;
        let i = self.flows.len();
        self.flows.push(Flow {
            stream: i as u32,
            a: (seg.src, seg.sport),
            a_first: route.src_first,
            b: (seg.dst, seg.dport),
            client: None,
            ws: ConvState::default(),
            dirs: [DirAcc::default(), DirAcc::default()],
            last_ack: [None, None],
            first_ns: now,
            last_ns: now,
            series: self.opts.series.then(Box::default),
        });
        // Slots are dense and handed out in order, so `slot` is at most one past the end;
        // resizing (rather than indexing) keeps a broken caller from panicking.
        if slot >= self.slot_flow.len() {
            self.slot_flow.resize(slot + 1, i);
        }
        self.slot_flow[slot] = i;
        i
    }

    fn segment(&mut self, number: u64, now: i64, seg: &TcpSegment, route: Route) {
        self.tcp_segments += 1;
        let mut fi = match self.slot_flow.get(route.slot as usize) {
            Some(&i) => i,
            None => self.new_flow(route, seg, now),
        };
        let d = usize::from(self.flows[fi].a_first != route.src_first);
        let mut pre = Flags(0);
        if let SynCheck::NewConversation = self.flows[fi].ws.syn_check(d, seg, &mut pre) {
            fi = self.new_flow(route, seg, now);
            pre.0 |= Flags::REUSED_PORTS;
        }
        let d = usize::from(self.flows[fi].a_first != route.src_first);
        let flow = &mut self.flows[fi];
        flow.last_ns = now;
        let v = flow.ws.segment(d, number, now, seg, pre);
        if seg.bogus_header() || seg.seglen.is_none() {
            self.skipped.not_analysed += 1;
        }
        if flow.client.is_none() && seg.flags & (th::SYN | th::ACK) == th::SYN {
            flow.client = Some(d);
        }
        // The window as Wireshark shows it: SYNs unscaled, others by the known shift.
        let scaled = if seg.has(th::SYN) {
            u64::from(seg.window)
        } else {
            u64::from(seg.window) << flow.ws.dirs[d].effective_shift()
        };
        let rexmt = flow.dirs[d].sent(now, seg, scaled, v.flags);
        // What became of each hole: filled later (upstream loss or reordering) or never.
        if v.flags.has(Flags::LOST_PACKET) {
            flow.dirs[d].gaps.opened(v.why.nextseq, seg.seq);
        } else {
            // Wireshark's flags, not the byte count: a reordered original is below the highest
            // sequence too, but it is not a retransmission.
            flow.dirs[d].gaps.data(
                seg.seq,
                seg.seglen.unwrap_or(0),
                v.flags.any_retransmission(),
            );
        }
        let mut rtt = None;
        if seg.has(th::ACK) {
            rtt = flow.dirs[1 - d].acked(seg.ack, now);
            flow.last_ack[d] = Some(seg.ack);
        }
        let bif = flow.dirs[d].in_flight(flow.last_ack[1 - d]);
        let len = seg.seglen.unwrap_or(0);
        if len > 0 {
            flow.dirs[d].note_in_flight(bif);
        }
        if let Some(s) = flow.series.as_deref_mut() {
            let t = now;
            if len > 0 {
                s.data(
                    d,
                    t,
                    seg.seq,
                    len,
                    rexmt > 0 || v.flags.any_retransmission(),
                    bif,
                );
            }
            if seg.has(th::ACK) {
                s.ack(1 - d, t, seg.ack, scaled);
            }
            if let Some(r) = rtt {
                s.rtt(1 - d, t, r);
            }
        }
        if self.opts.packets && !v.flags.is_empty() {
            let stream = flow.stream;
            self.record_flagged(number, now, stream, d, seg, &v);
        }
    }

    /// Counts a frame on an undecoded link type by type (a capture has one or a few).
    #[inline(never)]
    fn unsupported_link(&mut self, link: u32) {
        let links = &mut self.skipped.unsupported_link_types;
        match links.iter_mut().find(|l| l.link_type == link) {
            Some(l) => l.frames += 1,
            None => links.push(analysis::UnsupportedLink {
                link_type: link,
                name: LinkType(link).to_string(),
                frames: 1,
            }),
        }
    }

    /// Kept out of line: it runs only with `--packets`, and inlined it slows the hot path.
    #[inline(never)]
    fn record_flagged(
        &mut self,
        number: u64,
        now: i64,
        stream: u32,
        d: usize,
        seg: &TcpSegment,
        v: &Verdict,
    ) {
        let first = self.first_ns.unwrap_or(now);
        self.flagged.push(FlaggedPacket {
            frame: number,
            stream,
            time_s: Dur::from_nanos(now.saturating_sub(first).max(0) as u64),
            direction: if d == 0 { "a_to_b" } else { "b_to_a" }.into(),
            flags: v.flags.names().map(String::from).collect(),
            duplicate_ack_num: v.flags.has(Flags::DUPLICATE_ACK).then_some(v.dupack_num),
            why: explain(seg, v),
        });
    }

    /// The report (and the graph series, when collected), given the input's name and format
    /// and what stopped reading early, if anything.
    pub fn finish(self, input: &str, format: &str, capture_problem: Option<String>) -> Finished {
        let first = self.first_ns.unwrap_or(0);
        let mut total = FlagCounts::default();
        let mut series = Vec::new();
        let flows: Vec<FlowReport> = self
            .flows
            .into_iter()
            .map(|mut fl| {
                if let Some(s) = fl.series.take() {
                    series.push((fl.stream, s));
                }
                let r = flow_report(fl, first);
                total.merge(&r.flags);
                r
            })
            .collect();
        let report = AnalyzeReport {
            input: input.into(),
            format: format.into(),
            profile: "wireshark-4.0".into(),
            frames: self.frames,
            tcp_segments: self.tcp_segments,
            skipped: self.skipped,
            capture_problem,
            capture_notes: Vec::new(),
            duration_s: Dur::from_nanos(self.last_ns.saturating_sub(first).max(0) as u64),
            flags: total,
            flows,
            packets: self.opts.packets.then_some(self.flagged),
        };
        Finished {
            report,
            series,
            capture_start_ns: first,
        }
    }
}

fn ns_dur(ns: i64) -> Dur {
    Dur::from_nanos(ns.max(0) as u64)
}

fn dir_stats(acc: &DirAcc, duration_ns: i64) -> DirStats {
    let secs = duration_ns as f64 / 1e9;
    DirStats {
        packets: acc.packets,
        data_packets: acc.data_packets,
        data_bytes: Bytes::new(acc.data_bytes),
        pure_acks: acc.pure_acks,
        syn: acc.syn,
        fin: acc.fin,
        rst: acc.rst,
        unique_bytes: Bytes::new(acc.unique_bytes),
        retransmitted_packets: acc.rexmt_packets,
        retransmitted_bytes: Bytes::new(acc.rexmt_bytes),
        max_segment_bytes: acc.max_segment,
        syn_options: acc.syn_options,
        window: (acc.window.n > 0).then(|| WindowStats {
            min_bytes: Bytes::new(acc.window.min as u64),
            mean_bytes: Bytes::new(acc.window.mean().unwrap_or(0.0).round() as u64),
            max_bytes: Bytes::new(acc.window.max as u64),
            zero_windows: acc.zero_windows,
        }),
        rtt: (acc.rtt.n > 0).then(|| RttStats {
            samples: acc.rtt.n,
            min_s: Dur::from_secs_f64(acc.rtt.min),
            mean_s: Dur::from_secs_f64(acc.rtt.mean().unwrap_or(0.0)),
            max_s: Dur::from_secs_f64(acc.rtt.max),
            stdev_s: Dur::from_secs_f64(acc.rtt.stdev().unwrap_or(0.0)),
        }),
        throughput_bps: if secs > 0.0 {
            Rate::from_bps(acc.unique_bytes as f64 * 8.0 / secs)
        } else {
            Rate::from_bps(0.0)
        },
        max_idle_s: ns_dur(acc.max_idle_ns),
        max_in_flight_bytes: Bytes::new(acc.max_in_flight),
        flags: acc.flags,
        gaps: GapCounts {
            filled_later: acc.gaps.filled_by_retransmission + acc.gaps.filled_late,
            filled_by_retransmission: acc.gaps.filled_by_retransmission,
            never_filled: acc.gaps.never_filled(),
        },
    }
}

fn endpoint(e: &Endpoint) -> String {
    if e.0.v6 {
        format!("[{}]:{}", e.0, e.1)
    } else {
        format!("{}:{}", e.0, e.1)
    }
}

fn flow_report(fl: Flow, capture_start: i64) -> FlowReport {
    let duration = fl.last_ns.saturating_sub(fl.first_ns);
    let a_to_b = dir_stats(&fl.dirs[0], duration);
    let b_to_a = dir_stats(&fl.dirs[1], duration);
    let mut flags = a_to_b.flags;
    flags.merge(&b_to_a.flags);
    let mut r = FlowReport {
        stream: fl.stream,
        a: endpoint(&fl.a),
        b: endpoint(&fl.b),
        client: fl
            .client
            .map(|c| if c == 0 { "a" } else { "b" }.to_string()),
        start_s: ns_dur(fl.first_ns.saturating_sub(capture_start)),
        duration_s: ns_dur(duration),
        packets: fl.dirs[0].packets + fl.dirs[1].packets,
        initial_rtt_s: (fl.ws.ts_first_rtt > 0).then(|| ns_dur(fl.ws.ts_first_rtt)),
        flags,
        a_to_b,
        b_to_a,
        diagnosis: Vec::new(),
    };
    r.diagnosis = diagnose::diagnose(&r);
    r
}

/// Says which rule fired and on what numbers, for `--packets`.
fn explain(seg: &TcpSegment, v: &Verdict) -> String {
    let w = &v.why;
    let len = seg.seglen.unwrap_or(0);
    // Relative numbers, as Wireshark shows them: ours from our base, ACKs from the peer's.
    let rs = |x: u32| x.wrapping_sub(w.base);
    let ra = |x: u32| x.wrapping_sub(w.rev_base);
    let seq = rs(seg.seq);
    let ack = ra(seg.ack);
    let ms = |ns: i64| {
        if ns < 0 {
            "a negative time (capture out of order)".to_string()
        } else {
            format!("{:.3} ms", ns as f64 / 1e6)
        }
    };
    let dups = if w.rev_dupacks == u32::MAX {
        "the ACKed-unseen marker as".to_string()
    } else {
        w.rev_dupacks.to_string()
    };
    let mut why = Vec::new();
    let f = v.flags;
    if f.has(Flags::REUSED_PORTS) {
        why.push(format!(
            "SYN with a new initial sequence number {} on a used port pair",
            seg.seq
        ));
    }
    if f.has(Flags::SPURIOUS_RETRANSMISSION) {
        why.push(format!(
            "seq {}+{len} ends at or below the peer's last ACK {}: all of it was already acknowledged",
            seq, ra(w.rev_lastack)
        ));
    }
    if f.has(Flags::FAST_RETRANSMISSION) {
        why.push(format!(
            "seq {} < next expected {}, equals the peer's ACK after {} duplicate ACKs, {} after the peer's last packet (< 20 ms)",
            seq, rs(w.nextseq), dups, ms(w.t_fast_ns)
        ));
    }
    if f.has(Flags::OUT_OF_ORDER) {
        why.push(format!(
            "seq {} < next expected {}, {} after the highest segment (< {} threshold)",
            seq,
            rs(w.nextseq),
            ms(w.t_ooo_ns),
            ms(w.ooo_threshold_ns)
        ));
    }
    if f.has(Flags::RETRANSMISSION) {
        why.push(format!(
            "seq {} < next expected {} and not fast ({} dup ACKs, {} since the peer's last packet) nor out-of-order ({} since the highest segment)",
            seq,
            rs(w.nextseq),
            dups,
            ms(w.t_fast_ns),
            ms(w.t_ooo_ns)
        ));
    }
    if f.has(Flags::LOST_PACKET) {
        why.push(format!(
            "seq {} > next expected {}: {} bytes before it were not captured",
            seq,
            rs(w.nextseq),
            seg.seq.wrapping_sub(w.nextseq)
        ));
    }
    if f.has(Flags::ACK_LOST_PACKET) {
        why.push(format!("ACK {} covers data that was not captured", ack));
    }
    if f.has(Flags::DUPLICATE_ACK) {
        why.push(format!(
            "same ACK {}, window and seq as frame {} with no data: duplicate #{}",
            ack, v.dupack_frame, v.dupack_num
        ));
    }
    if f.has(Flags::ZERO_WINDOW) {
        why.push("advertises a zero receive window".into());
    }
    if f.has(Flags::ZERO_WINDOW_PROBE) {
        why.push(format!(
            "1 byte at the next expected seq {} while the peer's window is 0",
            seq
        ));
    }
    if f.has(Flags::ZERO_WINDOW_PROBE_ACK) {
        why.push("repeats its zero-window ACK after the peer's probe".into());
    }
    if f.has(Flags::WINDOW_FULL) {
        why.push(format!(
            "ends at {}, exactly the peer's advertised right edge (ACK {} + window)",
            seq.wrapping_add(len),
            ra(w.rev_lastack)
        ));
    }
    if f.has(Flags::WINDOW_UPDATE) {
        why.push(format!(
            "no data, same ACK {}, window changed to {}",
            ack, seg.window
        ));
    }
    if f.has(Flags::KEEP_ALIVE) {
        why.push(format!("{len} bytes at seq {} = next expected - 1", seq));
    }
    if f.has(Flags::KEEP_ALIVE_ACK) {
        why.push("repeats its ACK after the peer's keep-alive".into());
    }
    why.join("; ")
}

/// Frames per batch handed from the reading thread to the analysis thread: large enough that
/// the channel costs nothing per packet, small enough that a batch stays in the cache.
const BATCH: usize = 1024;
/// Batches queued between the threads at most (bounds memory whatever the capture size).
const QUEUE: usize = 4;

/// One decoded frame on its way to the analysis thread.
struct Item {
    number: u64,
    ts_ns: i64,
    parsed: Result<TcpSegment, SkipReason>,
    route: Route,
}

/// Reads a whole capture from `src` and analyses it. A damaged file gives a partial report
/// that says where reading stopped; only a file that cannot be read at all is an error.
///
/// Two threads: this one reads records, decodes headers and looks up each conversation's
/// slot; a second one runs the analysis proper, in capture order. Batches travel through a
/// bounded channel and are recycled, so memory stays independent of the capture's length and
/// nothing is allocated per packet. `src` stays on the calling thread (standard input's lock
/// cannot move), and the results are exactly those of feeding [`Analyzer::frame`] in order.
pub fn analyze_reader<R: Read>(
    src: R,
    input: &str,
    opts: Options,
) -> Result<Finished, CaptureError> {
    let mut reader = CaptureReader::new(src)?;
    let (full_tx, full_rx) = mpsc::sync_channel::<Vec<Item>>(QUEUE);
    // Emptied batches go back for reuse; at most QUEUE + 3 batches ever exist (queued, being
    // analysed, being filled, returned), so `try_send` below never finds this channel full.
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<Item>>(QUEUE + 3);
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let mut an = Analyzer::new(opts);
            for mut batch in full_rx {
                for it in &batch {
                    an.frame_in_slot(it.number, it.ts_ns, &it.parsed, it.route);
                }
                batch.clear();
                let _ = empty_tx.try_send(batch);
            }
            an
        });
        let mut keys = KeyIndex::default();
        let mut batch = Vec::with_capacity(BATCH);
        let end = loop {
            match reader.next() {
                Ok(Some(frame)) => {
                    let parsed = parse_frame(&frame);
                    let route = keys.route(&parsed);
                    batch.push(Item {
                        number: frame.number,
                        ts_ns: frame.ts_ns,
                        parsed,
                        route,
                    });
                    if batch.len() == BATCH {
                        let next = empty_rx
                            .try_recv()
                            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
                        if full_tx.send(std::mem::replace(&mut batch, next)).is_err() {
                            // The analysis thread is gone (it panicked): join says why.
                            break Ok(None);
                        }
                    }
                }
                Ok(None) => break Ok(None),
                Err(e) if e.is_partial() => break Ok(Some(e.to_string())),
                Err(e) => break Err(e),
            }
        };
        if !batch.is_empty() {
            let _ = full_tx.send(batch);
        }
        drop(full_tx);
        let an = match worker.join() {
            Ok(an) => an,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        let problem = end?;
        let format = reader.info().format;
        let mut done = an.finish(input, format, problem);
        done.report.capture_notes = capture_notes(reader.info());
        Ok(done)
    })
}

/// What the reader did that a reader of the report should know.
fn capture_notes(info: &CaptureInfo) -> Vec<String> {
    let mut notes = Vec::new();
    if info.gzip {
        notes.push("decompressed from gzip".to_string());
    }
    if info.swapped_lengths > 0 {
        notes.push(format!(
            "pcap version {}.{} stores captured and original length the other way round: \
             swapped back in {} records, as libpcap and Wireshark read them",
            info.version.0, info.version.1, info.swapped_lengths
        ));
    }
    if info.non_packet_records > 0 {
        notes.push(format!(
            "{} pcapng records without packets (custom, systemd journal or sysdig event \
             blocks) took frame numbers, as in Wireshark",
            info.non_packet_records
        ));
    }
    notes
}

/// Runs every stage on arbitrary bytes, as the fuzz target and its corpus replay do: read,
/// decode, analyse with all options, render the text and the graphs. Returns the rendered text
/// length (so the work is not optimised away); never panics on any input.
#[doc(hidden)]
pub fn fuzz_one(data: &[u8]) -> usize {
    let opts = Options {
        packets: true,
        series: true,
    };
    let Ok(done) = analyze_reader(data, "fuzz", opts) else {
        return 0;
    };
    let mut n = done.report.to_string().len();
    for (_, s) in &done.series {
        for d in &s.dirs {
            for (_, plot) in svg::flow_plots("fuzz", d, done.capture_start_ns) {
                n += plot.render().len();
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcptune_wire::TcpOptions;

    fn seg(sport: u16, seq: u32, ack: u32, flags: u16, len: u32) -> TcpSegment {
        TcpSegment {
            src: Addr::v4([10, 0, 0, 1]),
            dst: Addr::v4([10, 0, 0, 2]),
            sport,
            dport: 80,
            seq,
            ack,
            flags,
            window: 100,
            hlen: 20,
            seglen: Some(len),
            options: TcpOptions::default(),
            ip_id: 0,
        }
    }

    /// The sequential path the pipeline must match exactly: one thread, frame by frame.
    fn sequential(data: &[u8], opts: Options) -> AnalyzeReport {
        let mut reader = CaptureReader::new(data).unwrap();
        let mut an = Analyzer::new(opts);
        let problem = loop {
            match reader.next() {
                Ok(Some(f)) => an.frame(f.number, f.ts_ns, &parse_frame(&f)),
                Ok(None) => break None,
                Err(e) => break Some(e.to_string()),
            }
        };
        let format = reader.info().format;
        an.finish("t", format, problem).report
    }

    #[test]
    fn the_pipeline_reports_exactly_what_the_sequential_analysis_does() {
        use tcptune_wire::write::{PcapWriter, SegSpec};
        // Many batches' worth of frames over 300 interleaved flows (so the flow index grows
        // several times), with losses, reordering, duplicate ACKs and reused port pairs.
        let mut w = PcapWriter::new(Vec::new(), 96).unwrap();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = [1000u32; 300];
        let mut isn = [1000u32; 300];
        for i in 0..(BATCH * (QUEUE + 6)) as u32 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let f = (rng % 300) as usize;
            let base = SegSpec {
                ts_ns: 1_000_000_000 + i64::from(i) * 3000,
                src: [10, 0, (f >> 8) as u8, f as u8],
                dst: [10, 9, 0, 1],
                sport: 40000 + f as u16,
                dport: 80,
                window: 500,
                ..SegSpec::default()
            };
            let roll = (rng >> 32) % 100;
            let seg = if roll < 2 {
                // A new connection on the same port pair: a SYN with a new ISN.
                isn[f] = isn[f].wrapping_add(77_777);
                next[f] = isn[f].wrapping_add(1);
                SegSpec {
                    seq: isn[f],
                    flags: th::SYN,
                    ..base
                }
            } else if roll < 30 {
                // The peer's ACK (sometimes a duplicate of the previous one).
                SegSpec {
                    src: base.dst,
                    dst: base.src,
                    sport: 80,
                    dport: base.sport,
                    seq: 5,
                    ack: next[f].wrapping_sub(if roll < 10 { 1000 } else { 0 }),
                    flags: th::ACK,
                    ..base
                }
            } else {
                let skip = if roll > 97 { 1000 } else { 0 }; // a segment not captured
                let back = if roll == 97 { 2000 } else { 0 }; // a retransmission
                let seq = next[f].wrapping_add(skip).wrapping_sub(back);
                next[f] = next[f].wrapping_add(skip + 1000).wrapping_sub(back);
                SegSpec {
                    seq,
                    ack: 5,
                    flags: th::ACK,
                    payload_len: 1000,
                    ..base
                }
            };
            w.segment(&seg).unwrap();
        }
        let data = w.into_inner();
        let opts = Options {
            packets: true,
            series: false,
        };
        let json = |r: &AnalyzeReport| serde_json::to_string(r).unwrap();
        let piped = analyze_reader(&data[..], "t", opts).unwrap().report;
        assert!(piped.flows.len() > 300, "reused ports make new streams");
        let f = piped.flags;
        assert!(f.reused_ports > 0 && f.duplicate_ack > 0 && f.lost_segment > 0);
        assert!(f.retransmission > 0 && f.ack_lost_segment > 0);
        assert_eq!(json(&piped), json(&sequential(&data, opts)));
        // Cut mid-record: the same partial report and the same reason.
        let cut = &data[..data.len() - 30];
        let piped = analyze_reader(cut, "t", opts).unwrap().report;
        assert!(piped.capture_problem.is_some());
        assert_eq!(json(&piped), json(&sequential(cut, opts)));
    }

    #[test]
    fn per_flow_memory_is_bounded_however_many_packets() {
        // One-way data with no ACKs captured: the worst case for every per-flow list.
        let mut an = Analyzer::new(Options {
            packets: false,
            series: true,
        });
        let mut seq = 1u32;
        for i in 0..300_000u64 {
            an.frame(
                i + 1,
                1_000_000_000 + i as i64 * 1000,
                &Ok(seg(1, seq, 1, th::ACK, 1000)),
            );
            seq = seq.wrapping_add(1000);
        }
        let f = &an.flows[0];
        assert_eq!(an.flows.len(), 1);
        assert!(f.ws.dirs[0].unacked.len() <= 10_000);
        assert!(f.dirs[0].outstanding_len() <= stats::MAX_RTT_OUTSTANDING);
        let s = f.series.as_ref().unwrap();
        assert!(s.dirs[0].segments.points().len() <= series::MAX_POINTS);
        assert!(s.dirs[0].progress.points().len() <= series::MAX_POINTS);
        let r = an.finish("t", "pcap", None).report;
        assert_eq!(r.flows[0].a_to_b.unique_bytes, Bytes::new(300_000_000));
    }

    #[test]
    fn a_syn_with_a_new_isn_starts_a_new_stream_flagged_reused_ports() {
        let mut an = Analyzer::new(Options {
            packets: true,
            series: false,
        });
        an.frame(1, 1_000_000_000, &Ok(seg(7, 100, 0, th::SYN, 0)));
        an.frame(2, 1_000_001_000, &Ok(seg(7, 101, 1, th::ACK, 10)));
        an.frame(3, 1_000_002_000, &Ok(seg(7, 900, 0, th::SYN, 0)));
        an.frame(4, 1_000_003_000, &Ok(seg(8, 5, 0, th::SYN, 0)));
        let r = an.finish("t", "pcap", None).report;
        let streams: Vec<_> = r
            .packets
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| (p.frame, p.stream))
            .collect();
        assert_eq!(streams, vec![(3, 1)]);
        assert_eq!(r.flows.len(), 3);
        assert_eq!(r.flows[1].flags.reused_ports, 1);
        assert_eq!(r.flows[2].stream, 2);
    }
}
