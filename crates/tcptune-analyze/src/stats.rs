//! tcptrace-style statistics for one direction of a flow, accumulated packet by packet in
//! constant memory (plus a bounded list of outstanding segments for RTT samples).
//!
//! Definitions follow tcptrace where it is cheap to do so: unique bytes are bytes above the
//! highest sequence number seen so far, retransmitted bytes are bytes at or below it, RTT
//! samples obey Karn's rule (an ACK that ends exactly at a segment never retransmitted, with no
//! retransmitted segment before it in the same ACK). Differences from tcptrace are listed in
//! the README's known limitations.

use std::collections::VecDeque;

use tcptune_wire::packet::flags as th;
use tcptune_wire::TcpSegment;

use crate::analysis::{FlagCounts, SynOptions};
use crate::seq;
use crate::wireshark::Flags;

/// At most this many outstanding segments are remembered per direction for RTT sampling;
/// beyond it the oldest are forgotten (fewer samples, never unbounded memory).
pub const MAX_RTT_OUTSTANDING: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Outstanding {
    end: u32,
    sent_ns: i64,
    retransmitted: bool,
}

/// Running min/max/mean/stdev without storing samples.
#[derive(Debug, Clone, Copy, Default)]
pub struct Running {
    pub(crate) n: u64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    sum: f64,
    sumsq: f64,
}

impl Running {
    pub(crate) fn add(&mut self, x: f64) {
        if self.n == 0 || x < self.min {
            self.min = x;
        }
        if self.n == 0 || x > self.max {
            self.max = x;
        }
        self.n += 1;
        self.sum += x;
        self.sumsq += x * x;
    }
    pub(crate) fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
    pub(crate) fn stdev(&self) -> Option<f64> {
        let m = self.mean()?;
        Some((self.sumsq / self.n as f64 - m * m).max(0.0).sqrt())
    }
}

/// Everything counted for one direction (packets sent by one endpoint).
#[derive(Debug, Clone, Default)]
pub struct DirAcc {
    pub(crate) packets: u64,
    pub(crate) data_packets: u64,
    pub(crate) data_bytes: u64,
    pub(crate) pure_acks: u64,
    pub(crate) syn: u64,
    pub(crate) fin: u64,
    pub(crate) rst: u64,
    pub(crate) unique_bytes: u64,
    pub(crate) rexmt_packets: u64,
    pub(crate) rexmt_bytes: u64,
    pub(crate) max_segment: u32,
    /// Highest sequence number sent + 1 (data only), once data was seen.
    snd_max: Option<u32>,
    pub(crate) first_ns: Option<i64>,
    pub(crate) last_ns: i64,
    pub(crate) first_data_ns: Option<i64>,
    pub(crate) last_data_ns: i64,
    pub(crate) max_idle_ns: i64,
    pub(crate) syn_options: Option<SynOptions>,
    /// Scaled advertised window (bytes) over this direction's packets.
    pub(crate) window: Running,
    pub(crate) zero_windows: u64,
    /// RTT samples (seconds) for data *sent* by this direction, measured by the peer's ACKs.
    pub(crate) rtt: Running,
    outstanding: VecDeque<Outstanding>,
    pub(crate) flags: FlagCounts,
    /// Bytes in flight after each data segment: max seen.
    pub(crate) max_in_flight: u64,
    /// What became of the holes in this direction's sequence space.
    pub(crate) gaps: crate::gaps::Gaps,
}

impl DirAcc {
    /// Counts a packet sent by this direction. `scaled_window` is the window in bytes as
    /// Wireshark displays it; `flags` is the Wireshark verdict. Returns the number of
    /// retransmitted (already seen) bytes in the segment.
    pub fn sent(&mut self, now: i64, seg: &TcpSegment, scaled_window: u64, flags: Flags) -> u64 {
        self.packets += 1;
        match self.first_ns {
            None => self.first_ns = Some(now),
            Some(_) => self.max_idle_ns = self.max_idle_ns.max(now.saturating_sub(self.last_ns)),
        }
        self.last_ns = now;
        let len = seg.seglen.unwrap_or(0);
        if seg.has(th::SYN) {
            self.syn += 1;
            let o = &seg.options;
            self.syn_options.get_or_insert(SynOptions {
                mss: o.mss,
                window_scale: o.wscale,
                sack_permitted: o.sack_permitted,
                timestamps: o.timestamps.is_some(),
            });
        }
        if seg.has(th::FIN) {
            self.fin += 1;
        }
        if seg.has(th::RST) {
            self.rst += 1;
        }
        if len == 0 && seg.has(th::ACK) && seg.flags & (th::SYN | th::FIN | th::RST) == 0 {
            self.pure_acks += 1;
        }
        if !seg.has(th::RST) {
            self.window.add(scaled_window as f64);
            if seg.window == 0 {
                self.zero_windows += 1;
            }
        }
        self.flags.add(flags);
        let mut rexmt = 0;
        if len > 0 {
            self.data_packets += 1;
            self.data_bytes += u64::from(len);
            self.max_segment = self.max_segment.max(len);
            if self.first_data_ns.is_none() {
                self.first_data_ns = Some(now);
            }
            self.last_data_ns = now;
            let end = seg.seq.wrapping_add(len);
            let new = match self.snd_max {
                None => u64::from(len),
                Some(m) => {
                    let ahead = seq::diff(end, m);
                    if ahead <= 0 {
                        0
                    } else {
                        u64::from(len.min(ahead as u32))
                    }
                }
            };
            rexmt = u64::from(len) - new;
            self.unique_bytes += new;
            if rexmt > 0 {
                self.rexmt_packets += 1;
                self.rexmt_bytes += rexmt;
            }
            if self.snd_max.is_none_or(|m| seq::diff(end, m) > 0) {
                self.snd_max = Some(end);
            }
        }
        // Sequence space for RTT: data plus SYN/FIN.
        let space = len + u32::from(seg.has(th::SYN)) + u32::from(seg.has(th::FIN));
        if space > 0 {
            let end = seg.seq.wrapping_add(space);
            let newest = self.outstanding.back().map(|o| o.end);
            match newest {
                Some(b) if seq::le(end, b) || seq::lt(seg.seq, b) => {
                    // A retransmission: Karn's rule forbids samples from what it covers.
                    for o in self.outstanding.iter_mut().rev() {
                        if seq::le(o.end, seg.seq) {
                            break;
                        }
                        o.retransmitted = true;
                    }
                    if seq::diff(end, b) > 0 {
                        self.push_outstanding(end, now, true);
                    }
                }
                _ => self.push_outstanding(end, now, false),
            }
        }
        rexmt
    }

    fn push_outstanding(&mut self, end: u32, now: i64, retransmitted: bool) {
        if self.outstanding.len() >= MAX_RTT_OUTSTANDING {
            self.outstanding.pop_front();
        }
        self.outstanding.push_back(Outstanding {
            end,
            sent_ns: now,
            retransmitted,
        });
    }

    /// The peer acknowledged up to `ack` at `now`: take an RTT sample if Karn allows. Returns
    /// the sample in seconds.
    pub fn acked(&mut self, ack: u32, now: i64) -> Option<f64> {
        let mut sample = None;
        let mut ambiguous = false;
        while let Some(o) = self.outstanding.front() {
            if seq::lt(ack, o.end) {
                break;
            }
            if o.end == ack && !o.retransmitted && !ambiguous && now >= o.sent_ns {
                let s = now.saturating_sub(o.sent_ns) as f64 / 1e9;
                self.rtt.add(s);
                sample = Some(s);
            }
            ambiguous |= o.retransmitted;
            self.outstanding.pop_front();
        }
        sample
    }

    /// Segments remembered for RTT sampling (at most [`MAX_RTT_OUTSTANDING`]).
    pub fn outstanding_len(&self) -> usize {
        self.outstanding.len()
    }

    /// Bytes sent but not yet acknowledged by `peer_ack`.
    pub fn in_flight(&self, peer_ack: Option<u32>) -> u64 {
        match (self.snd_max, peer_ack) {
            (Some(m), Some(a)) => seq::diff(m, a).max(0) as u64,
            _ => 0,
        }
    }

    /// Updates the bytes-in-flight high-water mark.
    pub fn note_in_flight(&mut self, bif: u64) {
        self.max_in_flight = self.max_in_flight.max(bif);
    }
}
