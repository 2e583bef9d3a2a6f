//! Bounded time series of one flow for graphs: data segments (time, sequence), the peer's ACK
//! and receive-window edge, RTT samples and bytes in flight, per direction.
//!
//! Each series keeps at most [`MAX_POINTS`] points: when full it drops every other point and
//! from then on keeps one point in two (then four, …), so a flow of any length costs the same
//! memory and the points stay spread over the whole flow. Retransmissions are kept in their
//! own series (also bounded) so thinning never hides them.

use crate::seq::rel;

/// Points kept per series.
pub const MAX_POINTS: usize = 4000;

/// A decimating series of points.
#[derive(Debug, Clone)]
pub struct Series<T> {
    points: Vec<T>,
    stride: u64,
    seen: u64,
}

impl<T> Default for Series<T> {
    fn default() -> Self {
        Series {
            points: Vec::new(),
            stride: 1,
            seen: 0,
        }
    }
}

impl<T> Series<T> {
    /// Adds a point, thinning the series when it is full.
    pub fn push(&mut self, p: T) {
        if self.stride == 0 {
            self.stride = 1;
        }
        if self.seen % self.stride == 0 {
            if self.points.len() >= MAX_POINTS {
                let mut i = 0;
                self.points.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
                if self.seen % self.stride != 0 {
                    self.seen += 1;
                    return;
                }
            }
            self.points.push(p);
        }
        self.seen += 1;
    }
    /// The points kept, in the order pushed.
    pub fn points(&self) -> &[T] {
        &self.points
    }
    /// Points offered (kept or not).
    pub fn seen(&self) -> u64 {
        self.seen
    }
}

/// A data segment: time (ns since the epoch), sequence range relative to the first seen.
#[derive(Debug, Clone, Copy)]
pub struct SegPoint {
    /// Time, ns since the epoch.
    pub t_ns: i64,
    /// First sequence number, relative.
    pub start: u64,
    /// Sequence number after the last byte, relative.
    pub end: u64,
}

/// An ACK: time, acknowledged sequence and right window edge, relative to the first data seq.
#[derive(Debug, Clone, Copy)]
pub struct AckPoint {
    /// Time, ns since the epoch.
    pub t_ns: i64,
    /// Acknowledged sequence number, relative.
    pub ack: i64,
    /// Right edge of the advertised window (ack + window), relative.
    pub edge: i64,
    /// The advertised window, bytes (scaled).
    pub window: u64,
}

/// Series for the data sent in one direction (and the peer's ACKs of it).
#[derive(Debug, Clone, Default)]
pub struct DirSeries {
    /// First sequence number seen in this direction (graphs start at 0 there).
    pub base: Option<u32>,
    /// Data segments sent for the first time.
    pub segments: Series<SegPoint>,
    /// Retransmitted data segments.
    pub retransmissions: Series<SegPoint>,
    /// The peer's ACKs of this data.
    pub acks: Series<AckPoint>,
    /// (time ns, RTT seconds).
    pub rtt: Series<(i64, f64)>,
    /// (time ns, bytes in flight).
    pub in_flight: Series<(i64, u64)>,
    /// (time ns, cumulative payload bytes above the previous highest) for throughput.
    pub progress: Series<(i64, u64)>,
    unique: u64,
    high: u64,
}

/// Both directions of a flow; index 0 is a→b data.
#[derive(Debug, Clone, Default)]
pub struct FlowSeries {
    /// a→b at index 0, b→a at 1.
    pub dirs: [DirSeries; 2],
}

impl FlowSeries {
    /// A data segment sent in direction `d`.
    pub fn data(
        &mut self,
        d: usize,
        t_ns: i64,
        seq: u32,
        len: u32,
        retransmission: bool,
        in_flight: u64,
    ) {
        let s = &mut self.dirs[d];
        let base = *s.base.get_or_insert(seq);
        let start = rel(base, seq).max(0) as u64;
        let p = SegPoint {
            t_ns,
            start,
            end: start + u64::from(len),
        };
        if retransmission {
            s.retransmissions.push(p);
        }
        s.segments.push(p);
        if p.end > s.high {
            s.unique += p.end - s.high.max(p.start);
            s.high = p.end;
        }
        s.progress.push((t_ns, s.unique));
        s.in_flight.push((t_ns, in_flight));
    }
    /// An ACK of direction `d`'s data (sent by the peer) with its scaled window in bytes.
    pub fn ack(&mut self, d: usize, t_ns: i64, ack: u32, window: u64) {
        let s = &mut self.dirs[d];
        let Some(base) = s.base else { return };
        let a = rel(base, ack);
        s.acks.push(AckPoint {
            t_ns,
            ack: a,
            edge: a + window as i64,
            window,
        });
    }
    /// An RTT sample for direction `d`'s data.
    pub fn rtt(&mut self, d: usize, t_ns: i64, rtt_s: f64) {
        self.dirs[d].rtt.push((t_ns, rtt_s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_stays_bounded_and_spans_the_whole_input() {
        let mut s = Series::default();
        for i in 0..1_000_000u64 {
            s.push(i);
        }
        assert!(s.points().len() <= MAX_POINTS);
        assert!(s.points().len() >= MAX_POINTS / 2);
        assert_eq!(s.points()[0], 0);
        assert!(*s.points().last().unwrap() > 990_000);
        assert!(s.points().windows(2).all(|w| w[0] < w[1]));
        assert_eq!(s.seen(), 1_000_000);
    }
}
