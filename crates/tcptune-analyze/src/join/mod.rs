//! Two captures of one path joined: the same TCP packets seen at two points (at the sender and
//! at the receiver, or anywhere along the path) are matched, and each direction of each flow
//! gets its one-way delay distribution, where its losses happened (between the points, or
//! before the first), the reordering and duplication the path caused, and which
//! retransmissions were needed.
//!
//! Sans-IO: feed each capture's TCP segments with their capture times ([`Joiner::segment`]),
//! then [`Joiner::finish`]. Deterministic for the same input.
//!
//! Matching. A packet is identified by its directed 4-tuple and a signature of what no hop
//! changes: sequence and ACK numbers, flags, window, IP ID, segment length and the TCP options
//! that differ between transmissions (timestamps, SACK blocks). Payload bytes are not compared:
//! captures are usually cut by a snaplen, often at different lengths at the two points, and
//! the header fields already tell transmissions apart (a retransmission has a new IP ID on
//! IPv4 and a new timestamp with TCP timestamps on). Identical signatures (a duplicate made
//! by the path, or an IPv6 retransmission without timestamps) pair up in capture order.
//!
//! Which capture is upstream. For each conversation seen in both directions the two round
//! trips decide it whatever the clocks say: with capture A nearer endpoint X, (t_B − t_A) is
//! delay + offset for X→Y and −delay + offset for Y→X, so the first median exceeds the second.
//! A connection seen one way only takes the orientation of other connections between the same
//! two hosts; failing that, it cannot be told from the times when the clocks may differ: the
//! first capture given is taken as the one nearer the sender, and the report says so.
//!
//! Clock offset. With packets both ways, the offset between the capture clocks is estimated
//! NTP-style as (min delay A→B − min delay B→A) / 2, assuming the path's minimum delay is the
//! same both ways, and removed. With one direction only the offset cannot be separated from
//! the delay: delays are reported relative to the smallest. Captures taken on one host (one
//! clock) need neither: [`Clock::Same`].
//!
//! Memory: a 32-byte record per TCP packet of each capture (the matching needs to see both
//! captures whole), and 16 more per packet while they are sorted.

use std::collections::HashMap;

use tcptune_wire::packet::flags as th;
use tcptune_wire::{Addr, TcpSegment};

mod findings;

pub use findings::{ClockReport, DelayStats, JoinDirection, JoinFlow, JoinReport, JoinTotals};

/// Which of the two captures a packet came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    /// The first capture given.
    A = 0,
    /// The second capture given.
    B = 1,
}

/// What is known about the two capture clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// Separate clocks: estimate the offset from both directions (when seen).
    #[default]
    Estimate,
    /// Both captures were stamped by one clock (one host): no offset.
    Same,
}

/// A directed flow: source endpoint, then destination.
type DirKey = (Addr, u16, Addr, u16);

/// A downstream packet's partner when it is a piece of an upstream packet that was only
/// partly delivered (see [`Joiner::match_bytes`]).
const PIECE: u32 = u32::MAX - 1;

/// A downstream packet's partner when it is an extra copy of a packet already matched (its
/// signature was seen upstream): a duplicate the path made. Marked before the byte-range
/// passes so that a copy is never taken for the regrouped bytes of some other packet (a
/// duplicated retransmission would otherwise stand in for the lost original).
const COPY: u32 = u32::MAX - 2;

/// One TCP packet as the join keeps it.
#[derive(Debug, Clone, Copy)]
struct Rec {
    ts: i64,
    sig: u64,
    seq: u32,
    len: u32,
    flow: u32,
    flags: u16,
}

/// One capture's packets as the join keeps them, with flows numbered locally (so the two
/// captures can be read on two threads and merged): the analyzer's conversation index (its
/// slot, times two, plus the direction).
#[derive(Default)]
pub struct CaptureSide {
    recs: Vec<Rec>,
    index: crate::KeyIndex,
    /// Each local directed flow's endpoints (None for a direction not seen).
    keys: Vec<Option<DirKey>>,
}

impl CaptureSide {
    /// A side with nothing read yet.
    pub fn new() -> CaptureSide {
        CaptureSide::default()
    }

    /// One TCP segment captured at `ts_ns` (ns since the epoch, this capture's clock).
    pub fn segment(&mut self, ts_ns: i64, seg: &TcpSegment) {
        let route = self.index.route_segment(seg);
        let flow = route.slot * 2 + u32::from(!route.src_first);
        let at = flow as usize;
        if at >= self.keys.len() {
            self.keys.resize(at + 1, None);
        }
        if self.keys[at].is_none() {
            self.keys[at] = Some((seg.src, seg.sport, seg.dst, seg.dport));
        }
        self.recs.push(Rec {
            ts: ts_ns,
            sig: signature(seg),
            seq: seg.seq,
            len: seg.seglen.unwrap_or(0),
            flow,
            flags: seg.flags,
        });
    }

    /// TCP packets fed so far.
    pub fn packets(&self) -> usize {
        self.recs.len()
    }
}

/// The sans-IO join: feed both captures' segments (in each capture's order; the two may be
/// interleaved in any way), then [`Joiner::finish`].
#[derive(Default)]
pub struct Joiner {
    recs: [Vec<Rec>; 2],
    flows: HashMap<DirKey, u32>,
    keys: Vec<DirKey>,
    sides: [CaptureSide; 2],
}

fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// What identifies one transmission of a packet along the path (see the module docs).
fn signature(seg: &TcpSegment) -> u64 {
    let o = &seg.options;
    let mut h = mix(0x51_7c_c1_b7_27_22_0a_95, u64::from(seg.seq));
    h = mix(h, u64::from(seg.ack));
    h = mix(
        h,
        u64::from(seg.flags) | u64::from(seg.window) << 16 | u64::from(seg.ip_id) << 32,
    );
    h = mix(h, u64::from(seg.seglen.unwrap_or(u32::MAX)));
    if let Some((val, ecr)) = o.timestamps {
        h = mix(h, u64::from(val) << 32 | u64::from(ecr));
    }
    for &(l, r) in o.sack_blocks() {
        h = mix(h, u64::from(l) << 32 | u64::from(r));
    }
    h
}

impl Joiner {
    /// A join with no packets yet.
    pub fn new() -> Joiner {
        Joiner::default()
    }

    /// Two captures read separately.
    pub fn from_sides(a: CaptureSide, b: CaptureSide) -> Joiner {
        Joiner {
            sides: [a, b],
            ..Joiner::default()
        }
    }

    /// One TCP segment captured at `side` at `ts_ns` (ns since the epoch, that capture's clock).
    pub fn segment(&mut self, side: Side, ts_ns: i64, seg: &TcpSegment) {
        self.sides[side as usize].segment(ts_ns, seg);
    }

    /// Packets fed from each side so far.
    pub fn packets(&self) -> [usize; 2] {
        [self.sides[0].packets(), self.sides[1].packets()]
    }

    /// Numbers the flows of both sides in one space (A's first, in order of appearance).
    fn merge_flows(&mut self) {
        for s in 0..2 {
            let side = std::mem::take(&mut self.sides[s]);
            let remap: Vec<u32> = side
                .keys
                .iter()
                .map(|k| {
                    let Some(k) = k else {
                        return u32::MAX; // a direction this capture never saw: no packets
                    };
                    let next = self.keys.len() as u32;
                    let f = *self.flows.entry(*k).or_insert(next);
                    if f == next {
                        self.keys.push(*k);
                    }
                    f
                })
                .collect();
            let mut recs = side.recs;
            for r in &mut recs {
                r.flow = remap[r.flow as usize];
            }
            self.recs[s] = recs;
        }
    }

    /// Matches the two captures and computes every figure; `names` are the two inputs as the
    /// user gave them (for the report).
    pub fn finish(mut self, names: [&str; 2], clock: Clock) -> JoinReport {
        self.merge_flows();
        let nflows = self.keys.len();
        // Each side's packets per directed flow, in capture order.
        let mut by_flow: [Vec<Vec<u32>>; 2] = [vec![Vec::new(); nflows], vec![Vec::new(); nflows]];
        for (s, recs) in self.recs.iter().enumerate() {
            for (i, r) in recs.iter().enumerate() {
                by_flow[s][r.flow as usize].push(i as u32);
            }
        }
        // Pair packets with equal (flow, signature) in capture order: sort both sides' packets
        // together by signature, then one word of flow, side and position (16 bytes a packet:
        // this is the join's peak of memory). A capture of 2^31 packets or more is beyond it.
        let pack = |flow: u32, side: usize, i: usize| {
            u64::from(flow) << 32 | (side as u64) << 31 | (i as u64 & 0x7fff_ffff)
        };
        let mut all: Vec<(u64, u64)> = Vec::with_capacity(self.recs[0].len() + self.recs[1].len());
        for (s, recs) in self.recs.iter().enumerate() {
            all.extend(
                recs.iter()
                    .enumerate()
                    .map(|(i, r)| (r.sig, pack(r.flow, s, i))),
            );
        }
        all.sort_unstable();
        let flow_of = |e: &(u64, u64)| (e.1 >> 32) as u32;
        let side_of = |e: &(u64, u64)| ((e.1 >> 31) & 1) as usize;
        let idx_of = |e: &(u64, u64)| (e.1 & 0x7fff_ffff) as usize;
        // Per side and packet: the index of its partner on the other side.
        let mut partner: [Vec<u32>; 2] = [
            vec![u32::MAX; self.recs[0].len()],
            vec![u32::MAX; self.recs[1].len()],
        ];
        // Per side and packet: whether other packets of its signature exist on the other side
        // (an unmatched packet of a matched signature is a duplicate, not something unseen).
        let mut sig_seen_other: [Vec<bool>; 2] = [
            vec![false; self.recs[0].len()],
            vec![false; self.recs[1].len()],
        ];
        let mut g = 0;
        while g < all.len() {
            let (sig, flow) = (all[g].0, flow_of(&all[g]));
            let mut end = g;
            while end < all.len() && all[end].0 == sig && flow_of(&all[end]) == flow {
                end += 1;
            }
            let split = g + all[g..end].partition_point(|e| side_of(e) == 0);
            let (a, b) = (&all[g..split], &all[split..end]);
            for (x, y) in a.iter().zip(b) {
                partner[0][idx_of(x)] = idx_of(y) as u32;
                partner[1][idx_of(y)] = idx_of(x) as u32;
            }
            if !a.is_empty() && !b.is_empty() {
                for e in &all[g..end] {
                    sig_seen_other[side_of(e)][idx_of(e)] = true;
                }
            }
            g = end;
        }
        drop(all);
        // Per directed flow, raw differences t_B − t_A of its matched pairs.
        let mut diffs: Vec<Vec<i64>> = vec![Vec::new(); nflows];
        for (i, r) in self.recs[0].iter().enumerate() {
            let p = partner[0][i];
            if p != u32::MAX {
                diffs[r.flow as usize].push(self.recs[1][p as usize].ts - r.ts);
            }
        }
        // Which side is upstream for each directed flow.
        let mut upstream = vec![Side::A; nflows];
        let mut assumed = vec![true; nflows];
        for f in 0..nflows {
            let (s, sp, d, dp) = self.keys[f];
            let Some(&rev) = self.flows.get(&(d, dp, s, sp)) else {
                continue;
            };
            let rev = rev as usize;
            if rev < f {
                continue; // decided with its reverse
            }
            let (m, mr) = (median(&mut diffs[f]), median(&mut diffs[rev]));
            if let (Some(m), Some(mr)) = (m, mr) {
                // The point nearer X is upstream for X→Y and downstream for Y→X. Equal
                // medians (the same capture twice) tell nothing: the first capture is taken
                // as upstream both ways, marked as assumed.
                if m != mr {
                    let first = if m > mr { Side::A } else { Side::B };
                    upstream[f] = first;
                    upstream[rev] = if first == Side::A { Side::B } else { Side::A };
                    assumed[f] = false;
                    assumed[rev] = false;
                }
            }
        }
        // A conversation seen one way only takes the orientation of others between the same
        // two hosts: the capture nearer a host is nearer it for all its connections.
        let mut by_hosts: HashMap<(Addr, Addr), Side> = HashMap::new();
        for f in (0..nflows).filter(|&f| !assumed[f]) {
            by_hosts.insert((self.keys[f].0, self.keys[f].2), upstream[f]);
        }
        for f in 0..nflows {
            if assumed[f] {
                if let Some(&side) = by_hosts.get(&(self.keys[f].0, self.keys[f].2)) {
                    upstream[f] = side;
                    assumed[f] = false;
                }
            }
        }
        if clock == Clock::Same {
            for f in 0..nflows {
                if assumed[f] {
                    // One clock: the sign of the delay says which point came first.
                    if let Some(m) = median(&mut diffs[f]) {
                        upstream[f] = if m >= 0 { Side::A } else { Side::B };
                        assumed[f] = false;
                    }
                }
            }
        }
        // The clock offset (B − A), from the minimum raw delay in each orientation.
        let mut min_ab: Option<i64> = None;
        let mut min_ba: Option<i64> = None;
        for f in 0..nflows {
            match upstream[f] {
                Side::A => {
                    if let Some(m) = diffs[f].iter().copied().min() {
                        min_ab = Some(min_ab.map_or(m, |x| x.min(m)));
                    }
                }
                Side::B => {
                    // t_A − t_B is the raw delay here: its minimum is −max(t_B − t_A).
                    if let Some(m) = diffs[f].iter().copied().max() {
                        min_ba = Some(min_ba.map_or(-m, |x| x.min(-m)));
                    }
                }
            }
        }
        let (offset_ns, relative, clock_note) = match (clock, min_ab, min_ba) {
            (Clock::Same, _, _) => (
                0,
                false,
                "both captures were stamped by one clock (--same-clock): no offset to remove"
                    .to_string(),
            ),
            (Clock::Estimate, Some(ab), Some(ba)) => {
                let off = (ab - ba) / 2;
                (
                    off,
                    false,
                    format!(
                        "clock offset (second capture minus first) estimated as {:+.3} ms from \
                         the minimum one-way delays in both directions (NTP-style, assuming the \
                         path's minimum delay is the same both ways) and removed",
                        off as f64 / 1e6
                    ),
                )
            }
            (Clock::Estimate, ab, ba) => (
                ab.or(ba.map(|v| -v)).unwrap_or(0),
                true,
                "no conversation was seen going both ways between the points (packets \
                 matched one way only, or at equal times both ways), so the clock offset cannot \
                 be separated from the delay: delays are relative to the smallest one seen"
                    .to_string(),
            ),
        };
        // Unmatched downstream packets of a signature seen upstream are the path's copies.
        for f in 0..nflows {
            let d = 1 - upstream[f] as usize;
            for &i in &by_flow[d][f] {
                let i = i as usize;
                if partner[d][i] == u32::MAX && sig_seen_other[d][i] {
                    partner[d][i] = COPY;
                }
            }
        }
        drop(sig_seen_other);
        // Packets a capture point's offload merged or split: matched by their byte ranges.
        let mut merged = vec![(0u64, 0u64, 0u64); nflows];
        for f in 0..nflows {
            merged[f] = self.match_ranges(&by_flow, f, upstream[f], &mut partner);
        }
        // Build each conversation's report: flows paired with their reverse, in order of first
        // appearance.
        let mut done = vec![false; nflows];
        let mut flows_out = Vec::new();
        let mut totals = JoinTotals::default();
        for f in 0..nflows {
            if done[f] {
                continue;
            }
            let (s, sp, d, dp) = self.keys[f];
            let rev = self.flows.get(&(d, dp, s, sp)).map(|&r| r as usize);
            let mut dirs = vec![f];
            done[f] = true;
            if let Some(r) = rev {
                dirs.push(r);
                done[r] = true;
            }
            let mut out_dirs = Vec::new();
            for &df in &dirs {
                let up = upstream[df];
                let mut dir =
                    self.direction(&by_flow, df, up, &partner, offset_ns, relative, names);
                dir.upstream_assumed = assumed[df];
                (dir.coalesced, dir.segmented, dir.regrouped) = merged[df];
                totals.add(&dir);
                out_dirs.push(dir);
            }
            flows_out.push(JoinFlow {
                a: endpoint(&self.keys[f].0, self.keys[f].1),
                b: endpoint(&self.keys[f].2, self.keys[f].3),
                directions: out_dirs,
            });
        }
        JoinReport {
            inputs: [names[0].to_string(), names[1].to_string()],
            packets: [self.recs[0].len() as u64, self.recs[1].len() as u64],
            clock: ClockReport {
                method: match (clock, relative) {
                    (Clock::Same, _) => "same-clock",
                    (_, false) => "min-delay-both-directions",
                    (_, true) => "relative-to-minimum",
                }
                .to_string(),
                offset_s: (!relative).then_some(offset_ns as f64 / 1e9),
                note: clock_note,
            },
            totals,
            flows: flows_out,
            capture_problems: Vec::new(),
        }
    }

    /// Matches, by byte range, the data packets the signatures left unmatched because a capture
    /// point saw them merged or split: several upstream segments that arrive as one (the
    /// receiver's GRO, or a link's coalescing) or one upstream super-packet (the sender's TSO)
    /// that arrives as several. Returns (upstream packets matched inside a larger downstream
    /// one, upstream packets matched to several downstream ones).
    fn match_ranges(
        &self,
        by_flow: &[Vec<Vec<u32>>; 2],
        flow: usize,
        up: Side,
        partner: &mut [Vec<u32>; 2],
    ) -> (u64, u64, u64) {
        let (u, d) = (up as usize, 1 - up as usize);
        // Unmatched data packets of each side: start (relative to a base) -> (end, index).
        let base = by_flow[u][flow]
            .first()
            .map(|&i| self.recs[u][i as usize].seq)
            .unwrap_or(0);
        let rel = |seq: u32| crate::seq::rel(base, seq);
        let open = |side: usize, partner: &[Vec<u32>; 2]| {
            let mut m: HashMap<i64, Vec<(i64, u32)>> = HashMap::new();
            for &i in &by_flow[side][flow] {
                let r = &self.recs[side][i as usize];
                if partner[side][i as usize] == u32::MAX && r.len > 0 {
                    let st = rel(r.seq);
                    m.entry(st).or_default().push((st + i64::from(r.len), i));
                }
            }
            m
        };
        // A chain of unmatched packets of `side` covering [start, end) exactly, contiguous.
        let chain = |m: &HashMap<i64, Vec<(i64, u32)>>, used: &[bool], start: i64, end: i64| {
            let mut at = start;
            let mut got = Vec::new();
            while at < end {
                let next = m
                    .get(&at)
                    .and_then(|v| v.iter().find(|&&(e, i)| e <= end && !used[i as usize]));
                let &(e, i) = next?;
                got.push(i);
                at = e;
            }
            (got.len() >= 2).then_some(got)
        };
        let mut coalesced = 0;
        let mut segmented = 0;
        // Merged downstream: one downstream packet = several upstream ones.
        if !by_flow[d][flow].is_empty() {
            let ups = open(u, partner);
            let mut used = vec![false; self.recs[u].len()];
            for &j in &by_flow[d][flow] {
                let r = &self.recs[d][j as usize];
                if partner[d][j as usize] != u32::MAX || r.len == 0 {
                    continue;
                }
                let st = rel(r.seq);
                if let Some(got) = chain(&ups, &used, st, st + i64::from(r.len)) {
                    partner[d][j as usize] = got[0];
                    for &i in &got {
                        used[i as usize] = true;
                        partner[u][i as usize] = j;
                    }
                    coalesced += got.len() as u64;
                }
            }
            // Split downstream: one upstream packet = several downstream ones.
            let downs = open(d, partner);
            let mut used = vec![false; self.recs[d].len()];
            for &i in &by_flow[u][flow] {
                let r = &self.recs[u][i as usize];
                if partner[u][i as usize] != u32::MAX || r.len == 0 {
                    continue;
                }
                let st = rel(r.seq);
                if let Some(got) = chain(&downs, &used, st, st + i64::from(r.len)) {
                    partner[u][i as usize] = got[0];
                    for &j in &got {
                        used[j as usize] = true;
                        partner[d][j as usize] = i;
                    }
                    segmented += 1;
                }
            }
        }
        let regrouped = self.match_bytes(by_flow, flow, up, partner, &rel);
        (coalesced, segmented, regrouped)
    }

    /// What is left when the two points' offloads grouped the bytes differently (TSO at one,
    /// GRO at the other, or different GRO groupings): an upstream packet all of whose bytes
    /// arrived in leftover downstream packets was delivered, at the arrival of its last byte;
    /// a leftover downstream packet made only of such bytes is a regrouping, not something
    /// unseen. Returns the upstream packets matched so.
    fn match_bytes(
        &self,
        by_flow: &[Vec<Vec<u32>>; 2],
        flow: usize,
        up: Side,
        partner: &mut [Vec<u32>; 2],
        rel: &dyn Fn(u32) -> i64,
    ) -> u64 {
        let (u, d) = (up as usize, 1 - up as usize);
        let leftovers = |side: usize, partner: &[Vec<u32>; 2]| {
            let mut v: Vec<(i64, i64, u32)> = by_flow[side][flow]
                .iter()
                .filter_map(|&i| {
                    let r = &self.recs[side][i as usize];
                    (partner[side][i as usize] == u32::MAX && r.len > 0).then(|| {
                        let st = rel(r.seq);
                        (st, st + i64::from(r.len), i)
                    })
                })
                .collect();
            v.sort_unstable();
            v
        };
        let downs = leftovers(d, partner);
        if downs.is_empty() {
            return 0;
        }
        let mut covered = Ranges::default();
        for &(st, e, _) in &downs {
            covered.add(st, e);
        }
        // The leftover downstream packet holding byte `b`, earliest arrival first (a bounded
        // look back: overlapping leftovers are few).
        let holder = |b: i64| {
            let at = downs.partition_point(|x| x.0 <= b);
            downs[..at]
                .iter()
                .rev()
                .take(64)
                .filter(|x| x.1 > b)
                .min_by_key(|x| self.recs[d][x.2 as usize].ts)
                .map(|x| x.2)
        };
        let ups = leftovers(u, partner);
        let mut delivered = 0;
        for &(st, e, i) in &ups {
            if covered.covers(st, e) {
                if let Some(j) = holder(e - 1) {
                    partner[u][i as usize] = j;
                    delivered += 1;
                }
            }
        }
        // Leftover downstream packets made of bytes that passed the upstream point in these
        // packets (delivered whole, or only in part: the rest lost on the way) belong to them;
        // which transmission a piece came from is not known, so pieces take no part in the
        // reordering count.
        let mut bytes = Ranges::default();
        for &(st, e, _) in &ups {
            bytes.add(st, e);
        }
        for &(st, e, j) in &downs {
            if bytes.covers(st, e) && partner[d][j as usize] == u32::MAX {
                partner[d][j as usize] = PIECE;
            }
        }
        // What is left and made only of bytes that passed the upstream point repeats bytes
        // already delivered: the path's copy of a packet, merged by the downstream point's
        // offload with its neighbour (its signature is then no packet's upstream).
        let mut all = Ranges::default();
        for &i in &by_flow[u][flow] {
            let r = &self.recs[u][i as usize];
            if r.len > 0 {
                let st = rel(r.seq);
                all.add(st, st + i64::from(r.len));
            }
        }
        for &(st, e, j) in &downs {
            if all.covers(st, e) && partner[d][j as usize] == u32::MAX {
                partner[d][j as usize] = COPY;
            }
        }
        delivered
    }

    /// The figures of one directed flow with its upstream side known.
    #[allow(clippy::too_many_arguments)]
    fn direction(
        &self,
        by_flow: &[Vec<Vec<u32>>; 2],
        flow: usize,
        up: Side,
        partner: &[Vec<u32>; 2],
        offset_ns: i64,
        relative: bool,
        names: [&str; 2],
    ) -> JoinDirection {
        let (u, d) = (up as usize, 1 - up as usize);
        let (s, sp, dst, dp) = self.keys[flow];
        let mut dir = JoinDirection {
            from: endpoint(&s, sp),
            to: endpoint(&dst, dp),
            upstream: names[u].to_string(),
            upstream_assumed: false,
            ..JoinDirection::default()
        };
        // The upstream point's packets in its capture order.
        let mut delays = Vec::new();
        let mut base: Option<u32> = None;
        let mut highest: i64 = 0;
        let mut delivered = Ranges::default();
        for &i in &by_flow[u][flow] {
            let (i, r) = (i as usize, &self.recs[u][i as usize]);
            dir.upstream_packets += 1;
            let p = partner[u][i];
            if p == u32::MAX {
                dir.lost_between += 1;
                if r.len > 0 {
                    dir.lost_between_data += 1;
                }
            } else {
                dir.matched += 1;
                // Downstream time minus upstream time, each on its own capture's clock.
                let raw = if up == Side::A {
                    self.recs[1][p as usize].ts - r.ts
                } else {
                    self.recs[0][p as usize].ts - r.ts
                };
                // Offset is B − A: it inflates A→B differences and deflates B→A ones.
                delays.push(if up == Side::A {
                    raw - offset_ns
                } else {
                    raw + offset_ns
                });
            }
            // Sequence space of the data (SYN and FIN take one number each).
            let span = r.len + u32::from(r.flags & (th::SYN | th::FIN) != 0);
            if r.flags & th::SYN != 0 {
                base = Some(r.seq);
                highest = highest.max(i64::from(span));
                if p != u32::MAX {
                    delivered.add(0, i64::from(span));
                }
                continue;
            }
            if span == 0 {
                continue;
            }
            let b = *base.get_or_insert(r.seq);
            let start = crate::seq::rel(b, r.seq);
            let end = start + i64::from(span);
            if start < highest {
                dir.retransmissions += 1;
                if delivered.covers(start, end) {
                    dir.retransmissions_unneeded += 1;
                } else {
                    dir.retransmissions_needed += 1;
                }
            } else if start > highest && highest > 0 {
                // Bytes the upstream point never saw: lost before it (or missed by it).
                dir.lost_before_first += 1;
                dir.lost_before_first_bytes += (start - highest) as u64;
            }
            highest = highest.max(end);
            if p != u32::MAX {
                delivered.add(start, end);
            }
        }
        // The downstream point's packets in its capture order: duplicates and unseen ones;
        // then, latest arrival first, reordering: a packet is early (reordered) when one that
        // passed the upstream point before it arrives after it. That counts the packet the
        // path moved ahead once, however many it overtook (as netem's and the emulator's
        // counters count it, and RFC 4737's "reordered" packets the other way round).
        let mut arrivals = Vec::new();
        for &i in &by_flow[d][flow] {
            let i = i as usize;
            dir.downstream_packets += 1;
            let p = partner[d][i];
            match p {
                PIECE => continue,
                COPY => {
                    dir.duplicated += 1;
                    continue;
                }
                u32::MAX => {
                    dir.not_seen_upstream += 1;
                    continue;
                }
                _ => {}
            }
            arrivals.push(p);
        }
        let mut earliest_after = u32::MAX;
        for &pos in arrivals.iter().rev() {
            if pos > earliest_after {
                dir.reordered += 1;
            }
            earliest_after = earliest_after.min(pos);
        }
        if relative {
            if let Some(&m) = delays.iter().min() {
                for x in &mut delays {
                    *x -= m;
                }
            }
        }
        dir.delay = DelayStats::of(&mut delays, relative);
        dir
    }
}

/// The median of `v` (sorted in place), None if empty.
fn median(v: &mut [i64]) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

fn endpoint(a: &Addr, port: u16) -> String {
    if a.v6 {
        format!("[{a}]:{port}")
    } else {
        format!("{a}:{port}")
    }
}

/// Delivered sequence ranges, merged: a sorted list of disjoint [start, end).
#[derive(Default)]
struct Ranges(Vec<(i64, i64)>);

impl Ranges {
    fn add(&mut self, s: i64, e: i64) {
        let v = &mut self.0;
        // Most deliveries extend the last range.
        if let Some(last) = v.last_mut() {
            if s >= last.0 && s <= last.1 {
                last.1 = last.1.max(e);
                return;
            }
        }
        let i = v.partition_point(|r| r.1 < s);
        let mut j = i;
        let (mut ns, mut ne) = (s, e);
        while j < v.len() && v[j].0 <= ne {
            ns = ns.min(v[j].0);
            ne = ne.max(v[j].1);
            j += 1;
        }
        v.splice(i..j, [(ns, ne)]);
    }

    fn covers(&self, s: i64, e: i64) -> bool {
        let i = self.0.partition_point(|r| r.1 < e);
        self.0.get(i).is_some_and(|r| r.0 <= s && r.1 >= e)
    }
}

/// Reads two captures (on two threads) and joins them. A damaged file joins what was read
/// before the damage and says so in `capture_problems`; a file that cannot be read at all, or
/// holds no TCP, is an error naming it.
pub fn join_readers<RA: std::io::Read + Send, RB: std::io::Read + Send>(
    a: RA,
    b: RB,
    names: [&str; 2],
    clock: Clock,
) -> Result<JoinReport, JoinError> {
    let read = |src: Box<dyn std::io::Read + Send + '_>, name: &str| {
        let mut reader = tcptune_wire::CaptureReader::new(src).map_err(|e| JoinError {
            input: name.to_string(),
            why: e.to_string(),
        })?;
        let mut side = CaptureSide::new();
        let problem = loop {
            match reader.next() {
                Ok(Some(frame)) => {
                    if let Ok(seg) = tcptune_wire::parse_frame(&frame) {
                        side.segment(frame.ts_ns, &seg);
                    }
                }
                Ok(None) => break None,
                Err(e) if e.is_partial() => break Some(format!("{name}: {e}")),
                Err(e) => {
                    return Err(JoinError {
                        input: name.to_string(),
                        why: e.to_string(),
                    })
                }
            }
        };
        if side.packets() == 0 {
            return Err(JoinError {
                input: name.to_string(),
                why: "it holds no TCP packet tcptune can decode".to_string(),
            });
        }
        Ok((side, problem))
    };
    let (ra, rb) = std::thread::scope(|scope| {
        let tb = scope.spawn(|| read(Box::new(b), names[1]));
        let ra = read(Box::new(a), names[0]);
        let rb = match tb.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        (ra, rb)
    });
    let (sa, pa) = ra?;
    let (sb, pb) = rb?;
    let mut report = Joiner::from_sides(sa, sb).finish(names, clock);
    report.capture_problems = [pa, pb].into_iter().flatten().collect();
    Ok(report)
}

/// Why two captures could not be joined: which input, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{input}: {why}")]
pub struct JoinError {
    /// The input as given on the command line.
    pub input: String,
    /// What is wrong with it, in one sentence.
    pub why: String,
}

#[cfg(test)]
mod tests;
