//! Wireshark's TCP sequence analysis (`tcp.analysis.*` flags) with the rules of Wireshark
//! 4.0.17, the tshark Debian 12 ships, so counts can be checked against it packet by packet.
//!
//! The flags are decided once per packet, in capture order, from a few numbers kept per
//! direction (next expected sequence number, last ACK, last window, duplicate-ACK run, …), so
//! the state is constant-size per conversation. Wireshark's unacknowledged-segment list only
//! feeds RTT and bytes-in-flight, never a 4.0 flag, so it is not kept here (the statistics
//! keep their own bounded structure).
//!
//! Quirks are reproduced on purpose, because matching tshark is the point: sequence number 0
//! means "unknown"; timestamps are subtracted as unsigned 64-bit numbers (a packet earlier than
//! its reference gets a huge delta, never "fast" or "out of order"); windows are compared as raw
//! 16-bit values; a zero-window probe's ACK must repeat the ACK exactly. The rules in order are
//! described in docs/ (and the research notes); each check below names the flag it sets.

use tcptune_wire::packet::flags as th;
use tcptune_wire::TcpSegment;

use crate::seq;

/// Wireshark's `TCP_A_*` flag bits (same values, so debugging against Wireshark is easy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Flags(pub u16);

impl Flags {
    /// `tcp.analysis.retransmission`.
    pub const RETRANSMISSION: u16 = 0x0001;
    /// `tcp.analysis.lost_segment`: previous segment not captured.
    pub const LOST_PACKET: u16 = 0x0002;
    /// `tcp.analysis.ack_lost_segment`: ACKed segment that wasn't captured.
    pub const ACK_LOST_PACKET: u16 = 0x0004;
    /// `tcp.analysis.keep_alive`.
    pub const KEEP_ALIVE: u16 = 0x0008;
    /// `tcp.analysis.duplicate_ack`.
    pub const DUPLICATE_ACK: u16 = 0x0010;
    /// `tcp.analysis.zero_window`.
    pub const ZERO_WINDOW: u16 = 0x0020;
    /// `tcp.analysis.zero_window_probe`.
    pub const ZERO_WINDOW_PROBE: u16 = 0x0040;
    /// `tcp.analysis.zero_window_probe_ack`.
    pub const ZERO_WINDOW_PROBE_ACK: u16 = 0x0080;
    /// `tcp.analysis.keep_alive_ack`.
    pub const KEEP_ALIVE_ACK: u16 = 0x0100;
    /// `tcp.analysis.out_of_order`.
    pub const OUT_OF_ORDER: u16 = 0x0200;
    /// `tcp.analysis.fast_retransmission`.
    pub const FAST_RETRANSMISSION: u16 = 0x0400;
    /// `tcp.analysis.window_update`.
    pub const WINDOW_UPDATE: u16 = 0x0800;
    /// `tcp.analysis.window_full`.
    pub const WINDOW_FULL: u16 = 0x1000;
    /// `tcp.analysis.reused_ports`.
    pub const REUSED_PORTS: u16 = 0x2000;
    /// `tcp.analysis.spurious_retransmission`.
    pub const SPURIOUS_RETRANSMISSION: u16 = 0x4000;

    /// Every flag with its display-filter name (`tcp.analysis.<name>`), in Wireshark's order.
    pub const NAMES: [(u16, &'static str); 15] = [
        (Self::RETRANSMISSION, "retransmission"),
        (Self::FAST_RETRANSMISSION, "fast_retransmission"),
        (Self::SPURIOUS_RETRANSMISSION, "spurious_retransmission"),
        (Self::OUT_OF_ORDER, "out_of_order"),
        (Self::LOST_PACKET, "lost_segment"),
        (Self::ACK_LOST_PACKET, "ack_lost_segment"),
        (Self::DUPLICATE_ACK, "duplicate_ack"),
        (Self::ZERO_WINDOW, "zero_window"),
        (Self::ZERO_WINDOW_PROBE, "zero_window_probe"),
        (Self::ZERO_WINDOW_PROBE_ACK, "zero_window_probe_ack"),
        (Self::WINDOW_FULL, "window_full"),
        (Self::WINDOW_UPDATE, "window_update"),
        (Self::KEEP_ALIVE, "keep_alive"),
        (Self::KEEP_ALIVE_ACK, "keep_alive_ack"),
        (Self::REUSED_PORTS, "reused_ports"),
    ];

    /// Whether flag bit `f` is set.
    pub fn has(self, f: u16) -> bool {
        self.0 & f != 0
    }
    /// Whether no flag is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Wireshark's `tcp.analysis.retransmission` field is present for plain, fast and spurious
    /// retransmissions alike.
    pub fn any_retransmission(self) -> bool {
        self.has(Self::RETRANSMISSION | Self::FAST_RETRANSMISSION | Self::SPURIOUS_RETRANSMISSION)
    }
    /// Display-filter names of the flags set (retransmission listed for fast/spurious too, as
    /// the filter `tcp.analysis.retransmission` matches them).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES.iter().filter_map(move |&(bit, name)| {
            let set = if bit == Self::RETRANSMISSION {
                self.any_retransmission()
            } else {
                self.has(bit)
            };
            set.then_some(name)
        })
    }
}

/// Wireshark's `tcp_flow_t` + `tcp_analyze_seq_flow_info_t`, reduced to what the flags use.
#[derive(Debug, Clone)]
pub struct DirState {
    pub(crate) base_seq: u32,
    pub(crate) base_seq_set: bool,
    pub(crate) nextseq: u32,
    pub(crate) nextseq_time: i64,
    pub(crate) nextseq_frame: u64,
    pub(crate) maxseqtobeacked: u32,
    pub(crate) lastack: u32,
    pub(crate) lastack_time: i64,
    pub(crate) lastnondupack: u64,
    /// Unsigned as in Wireshark: the "ACKed unseen" marker -1 is `u32::MAX`, which also passes
    /// the fast-retransmission test `dupacknum >= 2` (a 4.0 quirk reproduced on purpose).
    pub(crate) dupacknum: u32,
    /// Last raw window; `u32::MAX` until the first segment.
    pub(crate) window: u32,
    /// -1 unknown, -2 no scaling used, else the shift.
    pub(crate) win_scale: i16,
    pub(crate) is_first_ack: bool,
    pub(crate) lastsegmentflags: Flags,
    pub(crate) unacked: Unacked,
}

impl Default for DirState {
    fn default() -> Self {
        DirState {
            base_seq: 0,
            base_seq_set: false,
            nextseq: 0,
            nextseq_time: 0,
            nextseq_frame: 0,
            maxseqtobeacked: 0,
            lastack: 0,
            lastack_time: 0,
            lastnondupack: 0,
            dupacknum: 0,
            window: u32::MAX,
            win_scale: -1,
            is_first_ack: false,
            lastsegmentflags: Flags(0),
            unacked: Unacked::default(),
        }
    }
}

impl DirState {
    /// The shift to apply to this direction's (non-SYN) windows, as Wireshark displays them.
    pub fn effective_shift(&self) -> u8 {
        if self.win_scale >= 0 {
            self.win_scale as u8
        } else {
            0
        }
    }
}

/// Per-conversation analysis state (one TCP stream).
#[derive(Debug, Clone, Default)]
pub struct ConvState {
    pub(crate) dirs: [DirState; 2],
    /// Time of the most recent pure SYN (0 = none: Wireshark's zero-time sentinel).
    pub(crate) ts_mru_syn: i64,
    /// Initial RTT (SYN to the first ACK-without-SYN), 0 = unknown.
    pub(crate) ts_first_rtt: i64,
}

/// The numbers a verdict was based on, kept so `--packets` can say why without recomputing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Why {
    /// Next expected sequence number of this direction, before the packet.
    pub nextseq: u32,
    /// The peer's last ACK.
    pub rev_lastack: u32,
    /// The peer's duplicate-ACK run (`u32::MAX`: the ACKed-unseen marker).
    pub rev_dupacks: u32,
    /// The peer's last raw window.
    pub rev_window: u32,
    /// Time since the peer's last packet (fast-retransmission test), ns (may be "negative").
    pub t_fast_ns: i64,
    /// Time since the segment that last advanced nextseq (out-of-order test), ns.
    pub t_ooo_ns: i64,
    /// The out-of-order threshold used, ns.
    pub ooo_threshold_ns: i64,
    /// The peer's window edge the packet was checked against (window-full test).
    pub window_edge: u32,
    /// Base sequence numbers of this direction and the peer's, to print relative numbers as
    /// Wireshark does.
    pub base: u32,
    /// The peer's base sequence number.
    pub rev_base: u32,
}

/// The verdict on one packet.
#[derive(Debug, Clone, Copy, Default)]
pub struct Verdict {
    pub(crate) flags: Flags,
    /// The duplicate-ACK number (Wireshark's `duplicate_ack_num`), when flagged.
    pub(crate) dupack_num: u32,
    /// The frame this ACK duplicates (`duplicate_ack_frame`).
    pub(crate) dupack_frame: u64,
    pub(crate) why: Why,
}

/// What `dissect_tcp` does before the sequence analysis for a SYN on an existing conversation.
pub enum SynCheck {
    /// Carry on with this conversation.
    Same,
    /// A pure SYN with a new ISN: start a new conversation (a new `tcp.stream`), flagged
    /// REUSED_PORTS.
    NewConversation,
}

impl ConvState {
    /// The pre-analysis SYN checks of `dissect_tcp`. `d` is the packet's direction index.
    pub fn syn_check(&mut self, d: usize, seg: &TcpSegment, pre: &mut Flags) -> SynCheck {
        let syn_ack = seg.flags & (th::SYN | th::ACK);
        if syn_ack == th::SYN && self.dirs[d].base_seq_set {
            if seg.seq != self.dirs[d].base_seq {
                return SynCheck::NewConversation;
            }
            // A retransmitted SYN: restore nextseq so it is judged against the handshake
            // (Wireshark issue 17616); block C then calls it a retransmission.
            self.dirs[d].nextseq = self.dirs[d].maxseqtobeacked;
        }
        if syn_ack == (th::SYN | th::ACK)
            && self.dirs[d].base_seq_set
            && seg.seq != self.dirs[d].base_seq
        {
            self.dirs[d].base_seq = seg.seq;
            pre.0 |= Flags::REUSED_PORTS;
        }
        SynCheck::Same
    }

    /// Everything `dissect_tcp` does with a segment after the SYN checks: base sequence numbers,
    /// the sequence analysis (when the segment length is known and the header is sane), the
    /// handshake timing, and the window-scale bookkeeping. `pre` carries REUSED_PORTS.
    pub fn segment(
        &mut self,
        d: usize,
        frame: u64,
        now: i64,
        seg: &TcpSegment,
        pre: Flags,
    ) -> Verdict {
        let mut v = Verdict {
            flags: pre,
            ..Verdict::default()
        };
        if seg.bogus_header() {
            // Wireshark gives up on the segment here (after creating the conversation).
            return v;
        }
        if let Some(seglen) = seg.seglen {
            let (fwd, rev) = split(&mut self.dirs, d);
            if !fwd.base_seq_set {
                fwd.base_seq = if seg.has(th::SYN) {
                    seg.seq
                } else {
                    seg.seq.wrapping_sub(1)
                };
                fwd.base_seq_set = true;
            }
            if !rev.base_seq_set && seg.has(th::ACK) {
                rev.base_seq = seg.ack.wrapping_sub(1);
                rev.base_seq_set = true;
            }
            self.analyze(d, frame, now, seg, seglen, &mut v);
        }
        let syn_ack = seg.flags & (th::SYN | th::ACK);
        if seg.has(th::SYN) {
            if !seg.has(th::ACK) {
                self.ts_mru_syn = now;
            }
            self.dirs[d].is_first_ack = true;
        }
        if syn_ack == th::ACK && self.ts_mru_syn != 0 && self.ts_first_rtt == 0 {
            self.ts_first_rtt = now.wrapping_sub(self.ts_mru_syn);
        }
        if syn_ack == th::ACK {
            self.dirs[d].is_first_ack = false;
        }
        // Options are dissected after the analysis: a WS option takes effect from the next
        // packet on.
        if let Some(shift) = seg.options.wscale {
            self.dirs[d].win_scale = i16::from(shift.min(14));
        }
        if seg.has(th::SYN) {
            // verify_tcp_window_scaling: scaling is used only when both SYNs carry the option.
            let (fwd, rev) = split(&mut self.dirs, d);
            if fwd.win_scale == -1 {
                fwd.win_scale = -2;
                rev.win_scale = -2;
            } else if seg.has(th::ACK) && rev.win_scale == -2 {
                fwd.win_scale = -2;
            }
        }
        v
    }

    /// `tcp_analyze_sequence_number` of Wireshark 4.0.17, in the same order.
    fn analyze(
        &mut self,
        d: usize,
        frame: u64,
        now: i64,
        seg: &TcpSegment,
        seglen: u32,
        v: &mut Verdict,
    ) {
        let ooo_threshold = if self.ts_first_rtt == 0 {
            3_000_000
        } else {
            self.ts_first_rtt
        };
        let (fwd, rev) = split(&mut self.dirs, d);
        let (seq, ack, fl) = (seg.seq, seg.ack, seg.flags);
        let window = u32::from(seg.window);
        let sfr = fl & (th::SYN | th::FIN | th::RST) != 0;
        let facts = Seg {
            seq,
            ack,
            fl,
            window,
            seglen,
            sfr,
        };
        v.why = Why {
            nextseq: fwd.nextseq,
            rev_lastack: rev.lastack,
            rev_dupacks: rev.dupacknum,
            rev_window: rev.window,
            t_fast_ns: now.wrapping_sub(rev.lastack_time),
            t_ooo_ns: now.wrapping_sub(fwd.nextseq_time),
            ooo_threshold_ns: ooo_threshold,
            window_edge: 0,
            base: fwd.base_seq,
            rev_base: rev.base_seq,
        };

        forward_flags(fwd, rev, facts, v);
        let f = &mut v.flags.0;
        if ack != fwd.lastack {
            fwd.lastnondupack = frame;
            fwd.dupacknum = 0;
        }

        // ACKED UNSEEN SEGMENT (4.0 rule, with the dupacknum = -1 trick)
        if rev.maxseqtobeacked != 0 && seq::gt(ack, rev.maxseqtobeacked) && fl & th::ACK != 0 {
            if seq::lt(rev.maxseqtobeacked, rev.nextseq) {
                rev.maxseqtobeacked = rev.nextseq;
                *f |= Flags::ACK_LOST_PACKET;
            } else {
                if rev.dupacknum == 0 {
                    *f |= Flags::ACK_LOST_PACKET;
                }
                rev.dupacknum = u32::MAX;
            }
        }

        // RETRANSMISSION / FAST / SPURIOUS / OUT-OF-ORDER
        retransmission_flags(fwd, rev, facts, now, ooo_threshold, f);

        // Bookkeeping: advance nextseq (not for a zero-window probe), the continuous edge, and
        // remember this packet's ACK, window and flags.
        let is_zwp = *f & Flags::ZERO_WINDOW_PROBE != 0;
        let mut nextseq = seq.wrapping_add(seglen);
        // The +1 for SYN/FIN happens only when the segment fits in Wireshark's unacked list
        // (at most 10000 entries): a 4.0 quirk (issue 12579) that shows in one-way captures.
        if (seglen > 0 || fl & (th::SYN | th::FIN) != 0) && fwd.unacked.len() < MAX_UNACKED {
            if fl & (th::SYN | th::FIN) != 0 {
                nextseq = nextseq.wrapping_add(1);
            }
            fwd.unacked.insert(nextseq);
        }
        if (seq::gt(nextseq, fwd.nextseq) || fwd.nextseq == 0) && !is_zwp {
            fwd.nextseq = nextseq;
            fwd.nextseq_frame = frame;
            fwd.nextseq_time = now;
        }
        if (seq == fwd.maxseqtobeacked || fwd.maxseqtobeacked == 0) && !is_zwp {
            fwd.maxseqtobeacked = fwd.nextseq;
        }
        fwd.window = window;
        fwd.lastack = ack;
        fwd.lastack_time = now;
        fwd.lastsegmentflags = v.flags;
        // Every packet's ACK field (even without the ACK flag) removes what it covers.
        rev.unacked.ack(ack);
    }
}

/// The rules on a segment against its direction's last one and the peer's window (Wireshark's
/// first block, in its order): zero window and its probe, lost segment, keep-alive, window
/// update, window full, keep-alive ACK, zero-window-probe ACK and duplicate ACK.
fn forward_flags(fwd: &mut DirState, rev: &DirState, seg: Seg, v: &mut Verdict) {
    let Seg {
        seq,
        ack,
        fl,
        window,
        seglen,
        sfr,
    } = seg;
    let f = &mut v.flags.0;
    // ZERO WINDOW PROBE: one byte at the next expected sequence number while the peer
    // advertises a zero window. Nothing else in this block applies to it.
    if seglen == 1 && seq == fwd.nextseq && rev.window == 0 {
        *f |= Flags::ZERO_WINDOW_PROBE;
        return;
    }
    // ZERO WINDOW
    if window == 0 && !sfr {
        *f |= Flags::ZERO_WINDOW;
    }
    // LOST SEGMENT (previous segment not captured)
    if fwd.nextseq != 0 && seq::gt(seq, fwd.nextseq) && fl & th::RST == 0 {
        *f |= Flags::LOST_PACKET;
    }
    // KEEP-ALIVE: 0 or 1 byte starting one before the next expected byte.
    if (seglen == 0 || seglen == 1) && seq == fwd.nextseq.wrapping_sub(1) && !sfr {
        *f |= Flags::KEEP_ALIVE;
    }
    // WINDOW UPDATE
    if seglen == 0
        && window != 0
        && window != fwd.window
        && seq == fwd.nextseq
        && ack == fwd.lastack
        && !sfr
    {
        *f |= Flags::WINDOW_UPDATE;
    }
    // WINDOW FULL: the segment ends exactly at the peer's advertised right edge.
    if seglen > 0 && rev.win_scale != -1 && !sfr {
        let shift = if rev.is_first_ack || rev.win_scale == -2 {
            0
        } else {
            rev.win_scale as u32
        };
        let edge = rev.lastack.wrapping_add(rev.window.wrapping_shl(shift));
        v.why.window_edge = edge;
        if seq.wrapping_add(seglen) == edge {
            *f |= Flags::WINDOW_FULL;
        }
    }
    let same_ack = seglen == 0 && seq == fwd.nextseq && ack == fwd.lastack && !sfr;
    // KEEP-ALIVE ACK
    if same_ack
        && window != 0
        && window == fwd.window
        && rev.lastsegmentflags.has(Flags::KEEP_ALIVE)
    {
        *f |= Flags::KEEP_ALIVE_ACK;
        return;
    }
    // ZERO WINDOW PROBE ACK (4.0: the ACK must repeat exactly)
    if same_ack
        && window == 0
        && window == fwd.window
        && rev.lastsegmentflags.has(Flags::ZERO_WINDOW_PROBE)
    {
        *f |= Flags::ZERO_WINDOW_PROBE_ACK;
        return;
    }
    // DUPLICATE ACK
    if same_ack && window != 0 && window == fwd.window {
        fwd.dupacknum = if fwd.dupacknum == u32::MAX {
            1
        } else {
            fwd.dupacknum + 1
        };
        *f |= Flags::DUPLICATE_ACK;
        v.dupack_num = fwd.dupacknum;
        v.dupack_frame = fwd.lastnondupack;
    }
}

/// Retransmission, fast or spurious, or out-of-order: what a segment that does not advance
/// the sequence is (Wireshark's order of tests).
fn retransmission_flags(
    fwd: &DirState,
    rev: &DirState,
    seg: Seg,
    now: i64,
    ooo_threshold: i64,
    f: &mut u16,
) {
    let Seg {
        seq, fl, seglen, ..
    } = seg;
    if (seglen > 0 || fl & (th::SYN | th::FIN) != 0) && *f & Flags::KEEP_ALIVE == 0 {
        let mut seq_not_advanced = fwd.nextseq != 0 && seq::lt(seq, fwd.nextseq);
        if seglen > 1 && fwd.nextseq.wrapping_sub(1) == seq {
            // New data right after a zero-window probe byte.
            seq_not_advanced = false;
        }
        let t_fast = now.wrapping_sub(rev.lastack_time) as u64;
        let t_ooo = now.wrapping_sub(fwd.nextseq_time) as u64;
        let syn_fin = u32::from(fl & (th::SYN | th::FIN) != 0);
        if seglen > 0 && rev.lastack != 0 && seq::le(seq.wrapping_add(seglen), rev.lastack) {
            *f |= Flags::SPURIOUS_RETRANSMISSION;
        } else if seq_not_advanced
            && rev.dupacknum >= 2
            && rev.lastack == seq
            && t_fast < 20_000_000
        {
            *f |= Flags::FAST_RETRANSMISSION;
        } else if seq_not_advanced
            && t_ooo < ooo_threshold as u64
            && fwd.nextseq != seq.wrapping_add(seglen).wrapping_add(syn_fin)
        {
            *f |= Flags::OUT_OF_ORDER;
        } else if seq_not_advanced {
            *f |= Flags::RETRANSMISSION;
        }
    }
}

/// What the rules read of one segment.
#[derive(Debug, Clone, Copy)]
struct Seg {
    seq: u32,
    ack: u32,
    fl: u16,
    window: u32,
    seglen: u32,
    /// SYN, FIN or RST set.
    sfr: bool,
}

/// Wireshark's `TCP_MAX_UNACKED_SEGMENTS`.
const MAX_UNACKED: usize = 10_000;

/// The end sequence numbers of Wireshark's unacknowledged-segment list, kept only for its
/// length (the 10000 cap above). Kept sorted, so an ACK removes a prefix; sequence numbers are
/// ordered relative to the first one seen (flows over 2 GiB wrap, as in Wireshark).
#[derive(Debug, Clone, Default)]
pub struct Unacked {
    anchor: Option<u32>,
    ends: std::collections::VecDeque<u32>,
}

impl Unacked {
    /// Segments on the list.
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
    fn insert(&mut self, nextseq: u32) {
        let anchor = *self.anchor.get_or_insert(nextseq);
        let key = nextseq.wrapping_sub(anchor);
        match self.ends.back() {
            Some(&last) if last > key => {
                let at = self.ends.partition_point(|&e| e <= key);
                self.ends.insert(at, key);
            }
            _ => self.ends.push_back(key),
        }
    }
    fn ack(&mut self, ack: u32) {
        let Some(anchor) = self.anchor else { return };
        while let Some(&front) = self.ends.front() {
            if seq::le(front.wrapping_add(anchor), ack) {
                self.ends.pop_front();
            } else {
                break;
            }
        }
    }
}

/// Borrows direction `d` and the other one mutably.
fn split(dirs: &mut [DirState; 2], d: usize) -> (&mut DirState, &mut DirState) {
    let [a, b] = dirs;
    if d == 0 {
        (a, b)
    } else {
        (b, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcptune_wire::{Addr, TcpOptions};

    /// A conversation fed segment by segment; `c` (direction 0) is the client.
    struct Conv {
        st: ConvState,
        frame: u64,
    }

    fn seg(seq: u32, ack: u32, flags: u16, window: u16, len: u32, ws: Option<u8>) -> TcpSegment {
        TcpSegment {
            src: Addr::v4([10, 0, 0, 1]),
            dst: Addr::v4([10, 0, 0, 2]),
            sport: 1,
            dport: 2,
            seq,
            ack,
            flags,
            window,
            hlen: 20,
            seglen: Some(len),
            options: TcpOptions {
                wscale: ws,
                ..TcpOptions::default()
            },
            ip_id: 0,
        }
    }

    impl Conv {
        fn new() -> Conv {
            Conv {
                st: ConvState::default(),
                frame: 0,
            }
        }
        fn send(&mut self, d: usize, t_us: i64, s: TcpSegment) -> Verdict {
            self.frame += 1;
            let mut pre = Flags(0);
            let _ = self.st.syn_check(d, &s, &mut pre);
            // Time 0 is Wireshark's "unset" sentinel: start the clock at 1 s.
            self.st
                .segment(d, self.frame, (1_000_000 + t_us) * 1000, &s, pre)
        }
        /// Handshake with window scale `ws` on both sides; client ISN 1000, server 5000.
        fn handshake(&mut self, ws: Option<u8>) {
            self.send(0, 0, seg(1000, 0, th::SYN, 1000, 0, ws));
            self.send(1, 100, seg(5000, 1001, th::SYN | th::ACK, 1000, 0, ws));
            self.send(0, 200, seg(1001, 5001, th::ACK, 1000, 0, None));
        }
    }

    const A: u16 = th::ACK;

    #[test]
    fn duplicate_acks_are_numbered_and_a_changed_ack_resets_the_run() {
        let mut c = Conv::new();
        c.handshake(None);
        c.send(0, 300, seg(1001, 5001, A, 1000, 100, None));
        c.send(1, 400, seg(5001, 1101, A, 1000, 0, None));
        let d1 = c.send(1, 500, seg(5001, 1101, A, 1000, 0, None));
        let d2 = c.send(1, 600, seg(5001, 1101, A, 1000, 0, None));
        assert!(d1.flags.has(Flags::DUPLICATE_ACK) && d2.flags.has(Flags::DUPLICATE_ACK));
        assert_eq!((d1.dupack_num, d2.dupack_num), (1, 2));
        assert_eq!(d1.dupack_frame, 5, "duplicates the last ACK that changed");
        // A different window is a window update, not a duplicate.
        let wu = c.send(1, 700, seg(5001, 1101, A, 900, 0, None));
        assert_eq!(wu.flags, Flags(Flags::WINDOW_UPDATE));
    }

    #[test]
    fn resend_after_two_dup_acks_within_20ms_is_fast_else_plain() {
        let mut c = Conv::new();
        c.handshake(None);
        for i in 0..3 {
            c.send(
                0,
                300 + i,
                seg(1001 + 100 * i as u32, 5001, A, 1000, 100, None),
            );
        }
        for t in [400, 410, 420] {
            c.send(1, t, seg(5001, 1101, A, 1000, 0, None));
        }
        let fast = c.send(0, 430, seg(1101, 5001, A, 1000, 100, None));
        assert_eq!(fast.flags, Flags(Flags::FAST_RETRANSMISSION));
        // 25 ms after the peer's last packet and 3 ms past the OOO threshold: a retransmission.
        let plain = c.send(0, 430 + 25_000, seg(1101, 5001, A, 1000, 100, None));
        assert_eq!(plain.flags, Flags(Flags::RETRANSMISSION));
        // Already acknowledged data is spurious.
        let sp = c.send(0, 60_000, seg(1001, 5001, A, 1000, 100, None));
        assert_eq!(sp.flags, Flags(Flags::SPURIOUS_RETRANSMISSION));
    }

    #[test]
    fn out_of_order_needs_the_irtt_threshold() {
        let mut c = Conv::new();
        c.handshake(None); // iRTT = 200 µs
        c.send(0, 300, seg(1001, 5001, A, 1000, 100, None));
        c.send(0, 310, seg(1201, 5001, A, 1000, 100, None)); // 1101..1201 missing
        let ooo = c.send(0, 400, seg(1101, 5001, A, 1000, 100, None));
        assert_eq!(ooo.flags, Flags(Flags::OUT_OF_ORDER));
        c.send(0, 500, seg(1401, 5001, A, 1000, 100, None));
        let late = c.send(0, 900, seg(1301, 5001, A, 1000, 100, None));
        assert_eq!(late.flags, Flags(Flags::RETRANSMISSION), "400 µs > iRTT");
    }

    #[test]
    fn zero_window_probe_and_its_ack() {
        let mut c = Conv::new();
        c.handshake(None);
        c.send(0, 300, seg(1001, 5001, A, 1000, 100, None));
        let zw = c.send(1, 400, seg(5001, 1101, A, 0, 0, None));
        assert_eq!(zw.flags, Flags(Flags::ZERO_WINDOW));
        let probe = c.send(0, 500_000, seg(1101, 5001, A, 1000, 1, None));
        assert_eq!(probe.flags, Flags(Flags::ZERO_WINDOW_PROBE));
        let pack = c.send(1, 500_100, seg(5001, 1101, A, 0, 0, None));
        // Zero window is tested first and does not end the checks.
        assert_eq!(
            pack.flags,
            Flags(Flags::ZERO_WINDOW | Flags::ZERO_WINDOW_PROBE_ACK)
        );
        // The probe did not advance nextseq: the same byte again is a probe again.
        let again = c.send(0, 900_000, seg(1101, 5001, A, 1000, 1, None));
        assert!(again.flags.has(Flags::ZERO_WINDOW_PROBE));
    }

    #[test]
    fn keep_alive_and_its_ack() {
        let mut c = Conv::new();
        c.handshake(None);
        c.send(0, 300, seg(1001, 5001, A, 1000, 100, None));
        c.send(1, 400, seg(5001, 1101, A, 1000, 0, None));
        let ka = c.send(0, 5_000_000, seg(1100, 5001, A, 1000, 0, None));
        assert_eq!(ka.flags, Flags(Flags::KEEP_ALIVE));
        let kaa = c.send(1, 5_000_100, seg(5001, 1101, A, 1000, 0, None));
        assert_eq!(kaa.flags, Flags(Flags::KEEP_ALIVE_ACK));
    }

    #[test]
    fn window_full_uses_the_scale_but_not_on_the_syn_window() {
        let mut c = Conv::new();
        c.handshake(Some(2));
        // The client's data fills the server's advertised 1000 bytes exactly: unscaled, as the
        // server has sent nothing but its SYN/ACK yet.
        let full = c.send(0, 300, seg(1001, 5001, A, 1000, 1000, None));
        assert!(full.flags.has(Flags::WINDOW_FULL), "{full:?}");
        // After the server's first plain ACK its window 100 is scaled by 4: edge 2001 + 400.
        c.send(1, 400, seg(5001, 2001, A, 100, 0, None));
        let full = c.send(0, 500, seg(2001, 5001, A, 1000, 400, None));
        assert!(full.flags.has(Flags::WINDOW_FULL));
        // Without a captured handshake the scale is unknown: never window-full.
        let mut u = Conv::new();
        u.send(1, 0, seg(5001, 1001, A, 100, 0, None));
        let v = u.send(0, 10, seg(1001, 5001, A, 1000, 100, None));
        assert!(!v.flags.has(Flags::WINDOW_FULL));
    }

    #[test]
    fn lost_segment_and_acked_unseen() {
        let mut c = Conv::new();
        c.handshake(None);
        c.send(0, 300, seg(1001, 5001, A, 1000, 100, None));
        let gap = c.send(0, 310, seg(1201, 5001, A, 1000, 100, None));
        assert_eq!(gap.flags, Flags(Flags::LOST_PACKET));
        let unseen = c.send(1, 400, seg(5001, 1501, A, 1000, 0, None));
        assert!(unseen.flags.has(Flags::ACK_LOST_PACKET));
        // The unseen-ACK marker makes the next resend "fast" (4.0's unsigned dupacknum).
        let fast = c.send(0, 410, seg(1101, 5001, A, 1000, 100, None));
        assert_eq!(
            fast.flags,
            Flags(Flags::SPURIOUS_RETRANSMISSION),
            "below the ACK"
        );
    }

    #[test]
    fn syn_with_a_new_isn_asks_for_a_new_conversation() {
        let mut c = Conv::new();
        c.handshake(None);
        let mut pre = Flags(0);
        let s = seg(7777, 0, th::SYN, 1000, 0, None);
        assert!(matches!(
            c.st.syn_check(0, &s, &mut pre),
            SynCheck::NewConversation
        ));
        let again = seg(1000, 0, th::SYN, 1000, 0, None);
        assert!(matches!(
            c.st.syn_check(0, &again, &mut pre),
            SynCheck::Same
        ));
        let v = c.st.segment(0, 99, 1_000_000, &again, pre);
        assert_eq!(v.flags, Flags(Flags::RETRANSMISSION), "a repeated SYN");
    }
}
