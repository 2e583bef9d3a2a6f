//! Holes in one direction's sequence space: what became of each "previous segment not
//! captured". A hole that a later segment fills was not the capture's doing: the original never
//! passed the capture point (lost upstream, then retransmitted) or passed it late (reordered).
//! A hole nothing fills was dropped by the capture point or its buffer, or lies before the
//! capture began. Wireshark flags the hole; this says which of the two it was, so a capture at
//! the receiver of a lossy path is not blamed for the path's losses.

use std::collections::VecDeque;

use crate::seq;

/// At most this many holes are followed at once (a capture of a broken flow cannot make it
/// hold more); the oldest are dropped past it and counted in [`Gaps::unfollowed`].
const MAX_OPEN: usize = 4096;

/// The holes of one direction.
#[derive(Debug, Clone, Default)]
pub struct Gaps {
    /// Open holes, [start, end) in sequence space, oldest first.
    open: VecDeque<(u32, u32)>,
    /// Holes a later segment flagged as a retransmission filled (lost upstream).
    pub filled_by_retransmission: u64,
    /// Holes a later segment not flagged so filled: reordered upstream, or a retransmission
    /// quick enough that Wireshark calls it out of order.
    pub filled_late: u64,
    /// Holes no longer followed (over the cap).
    pub unfollowed: u64,
}

impl Gaps {
    /// A segment at `seq` arrived past the next expected byte `expected`: a hole opens.
    pub fn opened(&mut self, expected: u32, seq: u32) {
        if !seq::gt(seq, expected) {
            return;
        }
        if self.open.len() >= MAX_OPEN {
            self.open.pop_front();
            self.unfollowed += 1;
        }
        self.open.push_back((expected, seq));
    }

    /// A data segment [seq, seq + len) was seen: every open hole it overlaps is filled.
    pub fn data(&mut self, seq: u32, len: u32, retransmission: bool) {
        if len == 0 || self.open.is_empty() {
            return;
        }
        let end = seq.wrapping_add(len);
        let before = self.open.len();
        self.open
            .retain(|&(a, b)| !(seq::lt(seq, b) && seq::gt(end, a)));
        let filled = (before - self.open.len()) as u64;
        if retransmission {
            self.filled_by_retransmission += filled;
        } else {
            self.filled_late += filled;
        }
    }

    /// Holes still open: never filled in the capture.
    pub fn never_filled(&self) -> u64 {
        self.open.len() as u64 + self.unfollowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hole_a_retransmission_fills_is_upstream_loss_and_one_left_open_is_the_captures() {
        let mut g = Gaps::default();
        // 1000..2000 missing, then 5000..6000 missing.
        g.opened(1000, 2000);
        g.opened(5000, 6000);
        // New data beyond the holes fills nothing.
        g.data(6000, 1000, false);
        assert_eq!(g.never_filled(), 2);
        // The retransmission of 1000..1500 fills the first hole (partly is enough: the capture
        // saw the range the sender resent).
        g.data(1000, 500, true);
        assert_eq!(g.filled_by_retransmission, 1);
        assert_eq!(g.never_filled(), 1);
        // A late original (reordered) fills the second.
        g.data(5000, 1000, false);
        assert_eq!(g.filled_late, 1);
        assert_eq!(g.never_filled(), 0);
        // Not a hole: a segment at the expected byte.
        g.opened(7000, 7000);
        assert_eq!(g.never_filled(), 0);
    }

    #[test]
    fn holes_across_the_sequence_wrap_are_followed_and_the_cap_holds() {
        let mut g = Gaps::default();
        g.opened(u32::MAX - 100, 200);
        g.data(u32::MAX - 50, 10, true);
        assert_eq!(g.filled_by_retransmission, 1);
        for k in 0..(MAX_OPEN as u32 + 10) {
            g.opened(k * 10, k * 10 + 5);
        }
        assert_eq!(g.unfollowed, 10);
        assert_eq!(g.never_filled(), MAX_OPEN as u64 + 10);
    }
}
