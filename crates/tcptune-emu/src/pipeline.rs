//! One direction of the emulated link as a sans-IO state machine: fed `(now, packet)`, polled
//! for the packets due at `now` and the time of the next one. No clock, no I/O, no threads:
//! the TUN edge (`sys`) and the tests drive it with their own time.
//!
//! The stages and their order are netem's `netem_enqueue()` (Linux 6.18, read from the
//! source: <https://elixir.bootlin.com/linux/v6.18/source/net/sched/sch_netem.c>):
//!
//! 1. **duplicate**: one draw; a copy is made (never of a copy);
//! 2. **loss**: one draw per packet (random, Gilbert–Elliott or every-Nth). A packet drawn
//!    for both duplication and loss still delivers one copy (netem's `count` arithmetic);
//! 3. the **copy** re-enters at stage 2 before the original continues, so it is lost, corrupted
//!    and delayed independently (netem re-enqueues the clone at the root qdisc);
//! 4. **corrupt**: one bit flipped where the receiver's checksum sees it;
//! 5. **limit**: netem's `limit`, packets held anywhere including the delay line (optional);
//! 6. **reorder**: a packet picked for reordering skips delay and rate and leaves at once;
//! 7. **delay + jitter**, then **rate**: departure is the later of the previous departure and
//!    arrival + delay, plus tx_time(len + overhead): exactly netem's arithmetic. In front of
//!    the rate sits the bottleneck drop-tail **queue** (packets and/or bytes).
//!
//! Where netem is odd, and what we do:
//! - netem's `limit` counts packets still in the delay line, so a long delay caps the rate at
//!   `limit / delay` (1000 packets over 100 ms = 10 kpps). We keep that as `limit_packets`
//!   (off by default) and add the queue a router really has: packets waiting for or in
//!   serialisation at the rate. A packet is counted from the moment it reaches the rate stage
//!   (`arrival + delay`) until it has been sent, and the limit is checked at that moment
//!   (computed at enqueue: the schedule ahead of it is already fixed).
//! - netem's jitter reorders packets (its queue is sorted by send time); that is our default
//!   too, and `jitter_order = fifo` keeps arrival order instead.
//! - Delay distributions come from iproute2's tables (inverse CDFs with 4096 entries); we draw
//!   from the analytic shapes the tables were made from (same mean 0 and σ 1). Draws below
//!   zero total delay are clamped to zero (netem would schedule in the past, i.e. at once).
//! - netem's "correlation" parameters are not implemented: its own man page calls them an
//!   approximation that changes the marginal distribution. Use Gilbert–Elliott for bursts.
//! - netem corrupts a bit of the linear skb data, which may be an IPv6 header field no
//!   checksum covers (then the packet is not dropped); we flip a bit in the transport header or
//!   payload, which the TCP/UDP/ICMP checksum covers, so a corrupted packet is always rejected
//!   (except UDP over IPv4 with checksums off).
//! - Each impairment has its own random stream (and random loss of copies another), so turning
//!   duplication on does not change which originals random loss picks; netem shares one
//!   stream.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_wire::header::Ip;

use crate::config::{ConfigError, Distribution, JitterOrder, LinkConfig, Loss};
use crate::rng::Rng;

/// Nanoseconds on the caller's monotonic clock.
pub type Nanos = u64;

/// What the pipeline needs to know about a packet.
pub trait Packet: Clone {
    /// Bytes on the wire before per-packet overhead (for an offloaded super-packet: the sum of
    /// the wire packets it stands for, headers included).
    fn wire_bytes(&self) -> u64;
    /// Wire packets it stands for (1 unless it is an offloaded super-packet).
    fn wire_packets(&self) -> u32 {
        1
    }
    /// Flips one bit that the receiver's checksum covers.
    fn corrupt(&mut self, rng: &mut Rng);
}

/// A raw IPv4 or IPv6 packet.
impl Packet for Vec<u8> {
    fn wire_bytes(&self) -> u64 {
        self.len() as u64
    }
    fn corrupt(&mut self, rng: &mut Rng) {
        corrupt_ip(self, rng);
    }
}

/// Flips one random bit after the IP header (in the part the transport checksum covers); in
/// the IPv4 header (covered by its checksum) when there is nothing after it.
pub fn corrupt_ip(pkt: &mut [u8], rng: &mut Rng) {
    if pkt.is_empty() {
        return;
    }
    let hdr = Ip::new(pkt).map_or(0, Ip::header_len);
    let start = if hdr < pkt.len() { hdr } else { 0 };
    let i = start + rng.below((pkt.len() - start) as u64) as usize;
    pkt[i] ^= 1 << rng.below(8);
}

/// Packets and bytes through one direction, and why packets were dropped. Packets are the
/// units the pipeline handled (an offloaded super-packet counts once); queue depths count
/// wire packets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Counters {
    /// Packets offered to the link (duplicates not included).
    pub packets_in: u64,
    /// Bytes offered (IP length), duplicates not included.
    pub bytes_in: u64,
    /// Packets delivered to the far side (duplicates included).
    pub packets_out: u64,
    /// Bytes delivered (IP length), duplicates included.
    pub bytes_out: u64,
    /// Dropped by the loss model.
    pub dropped_loss: u64,
    /// Dropped because the bottleneck queue was full.
    pub dropped_queue: u64,
    /// Dropped by netem's `limit` (or the emulator's memory cap).
    pub dropped_limit: u64,
    /// Copies made by the duplicate impairment.
    pub duplicated: u64,
    /// Of the drops above (loss, queue, limit), copies made by duplication: their original
    /// went on, so the far side got one packet, as if neither had happened (what a capture at
    /// each end sees: `duplicated − copies_dropped` extra copies, drops − this many losses).
    #[serde(default)]
    pub copies_dropped: u64,
    /// Packets with a bit flipped by the corrupt impairment.
    pub corrupted: u64,
    /// Packets sent at once by the reorder impairment, skipping the delay.
    pub reordered: u64,
    /// Packets in the bottleneck queue now (waiting for or in serialisation).
    pub queue_packets: u64,
    /// Bytes in the bottleneck queue now.
    pub queue_bytes: u64,
    /// The largest queue a packet found on arrival (itself included).
    pub max_queue_packets: u64,
    /// Packets held anywhere in this direction now (delay line and queue).
    pub held_packets: u64,
}

struct Held<P> {
    time: Nanos,
    seq: u64,
    pkt: P,
}
impl<P> PartialEq for Held<P> {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl<P> Eq for Held<P> {}
impl<P> PartialOrd for Held<P> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<P> Ord for Held<P> {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(o.time, o.seq))
    }
}

/// A packet scheduled at the rate: when it reaches the queue, when it has been sent, and the
/// bytes charged before it (so the bytes queued behind a point are one subtraction).
struct Slot {
    arrive: Nanos,
    depart: Nanos,
    bytes: u64,
    cum_before: u64,
    /// Wire packets before this one (a super-packet counts as the packets it stands for).
    cum_pkts_before: u64,
}

/// Streams: one per impairment, so enabling one does not shift another's decisions.
struct Streams {
    dup: Rng,
    loss: Rng,
    corrupt: Rng,
    delay: Rng,
    reorder: Rng,
    /// Random loss of copies, so copies do not consume the originals' loss draws.
    copy_loss: Rng,
}

/// The emulator refuses to hold more than this (a 10 s delay at 10 Gbit/s would be 12 GB).
pub const MEMORY_CAP_BYTES: u64 = 1 << 30;

/// One direction of the link.
pub struct Direction<P> {
    cfg: LinkConfig,
    rng: Streams,
    ge_bad: bool,
    nth: u64,
    reorder_counter: u64,
    held: BinaryHeap<Reverse<Held<P>>>,
    held_bytes: u64,
    seq: u64,
    last_depart: Nanos,
    last_time: Nanos,
    rateq: VecDeque<Slot>,
    cum_bytes: u64,
    cum_pkts: u64,
    counters: Counters,
}

impl<P: Packet> Direction<P> {
    /// A direction with `cfg`; `seed` and `stream_base` select the random streams (give the two
    /// directions of a link different bases).
    pub fn new(cfg: LinkConfig, seed: u64, stream_base: u64) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let s = |i| Rng::stream(seed, stream_base * 16 + i);
        Ok(Direction {
            cfg,
            rng: Streams {
                dup: s(1),
                loss: s(2),
                corrupt: s(3),
                delay: s(4),
                reorder: s(5),
                copy_loss: s(6),
            },
            ge_bad: false,
            nth: 0,
            reorder_counter: 0,
            held: BinaryHeap::new(),
            held_bytes: 0,
            seq: 0,
            last_depart: 0,
            last_time: 0,
            rateq: VecDeque::new(),
            cum_bytes: 0,
            cum_pkts: 0,
            counters: Counters::default(),
        })
    }

    /// The direction's settings as given.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Changes the settings; packets already held keep their schedule.
    pub fn set_config(&mut self, cfg: LinkConfig) -> Result<(), ConfigError> {
        cfg.validate()?;
        self.cfg = cfg;
        Ok(())
    }

    /// The counters, with the queue depth as of `now`.
    pub fn counters(&self, now: Nanos) -> Counters {
        let mut c = self.counters.clone();
        let in_queue = self
            .rateq
            .iter()
            .filter(|s| s.arrive <= now && now < s.depart);
        let (n, b) = in_queue.fold((0, 0), |(n, b), s| (n + 1, b + s.bytes));
        // (n counts slots; a slot may be a super-packet, close enough for a status display)
        c.queue_packets = n;
        c.queue_bytes = b;
        c.held_packets = self.held.len() as u64;
        c
    }

    /// When the next packet is due, if any is held.
    pub fn next_wakeup(&self) -> Option<Nanos> {
        self.held.peek().map(|Reverse(h)| h.time)
    }

    /// A packet arrives at `now`.
    pub fn enqueue(&mut self, now: Nanos, pkt: P) {
        self.counters.packets_in += 1;
        self.counters.bytes_in += pkt.wire_bytes();
        self.enqueue_at_depth(now, pkt, 0);
    }

    fn loss_event(&mut self, copy: bool) -> bool {
        let r = &mut self.rng.loss;
        match self.cfg.loss {
            Loss::None => false,
            Loss::Random { p } if copy => self.rng.copy_loss.chance(p.get()),
            Loss::Random { p } => r.chance(p.get()),
            Loss::GilbertElliott {
                p,
                r: to_good,
                bad_loss,
                good_loss,
            } => {
                // netem's loss_gilb_ell(): the transition and the loss draw are separate, and
                // the loss uses the state the packet started in.
                if self.ge_bad {
                    if r.chance(to_good.get()) {
                        self.ge_bad = false;
                    }
                    r.chance(bad_loss.get())
                } else {
                    if r.chance(p.get()) {
                        self.ge_bad = true;
                    }
                    r.chance(good_loss.get())
                }
            }
            Loss::EveryNth { n } => {
                self.nth += 1;
                self.nth % u64::from(n) == 0
            }
        }
    }

    fn jittered_delay(&mut self) -> u64 {
        let d = self.cfg.delay_s.nanos() as f64;
        let j = self.cfg.jitter_s.nanos() as f64;
        if j == 0.0 {
            return d as u64;
        }
        let r = &mut self.rng.delay;
        let t = match self.cfg.distribution {
            Distribution::Uniform => 2.0 * r.uniform() - 1.0,
            Distribution::Normal => r.normal(),
            Distribution::Pareto => r.pareto(),
            Distribution::Paretonormal => r.paretonormal(),
        };
        (d + j * t).max(0.0).round() as u64
    }

    fn tx_time(&self, pkt: &P) -> u64 {
        let Some(rate) = self.cfg.rate_bps else {
            return 0;
        };
        let overhead = i64::from(self.cfg.overhead_bytes) * i64::from(pkt.wire_packets());
        let bytes = (pkt.wire_bytes() as i64 + overhead).max(1) as f64;
        (bytes * 8e9 / rate.bps()).round() as u64
    }

    fn enqueue_at_depth(&mut self, now: Nanos, mut pkt: P, depth: u8) {
        let mut count = 1;
        if depth == 0
            && self.cfg.duplicate.get() > 0.0
            && self.rng.dup.chance(self.cfg.duplicate.get())
        {
            count += 1;
        }
        if self.loss_event(depth > 0) {
            count -= 1;
        }
        if count == 0 {
            self.counters.dropped_loss += 1;
            self.counters.copies_dropped += u64::from(depth > 0);
            return;
        }
        if count > 1 {
            self.counters.duplicated += 1;
            self.enqueue_at_depth(now, pkt.clone(), depth + 1);
        }
        if self.cfg.corrupt.get() > 0.0 && self.rng.corrupt.chance(self.cfg.corrupt.get()) {
            pkt.corrupt(&mut self.rng.corrupt);
            self.counters.corrupted += 1;
        }
        let held = self.held.len() as u64;
        let bytes = pkt.wire_bytes();
        if self.cfg.limit_packets.is_some_and(|l| held >= u64::from(l))
            || self.held_bytes + bytes > MEMORY_CAP_BYTES
        {
            self.counters.dropped_limit += 1;
            self.counters.copies_dropped += u64::from(depth > 0);
            return;
        }
        // netem: "gap == 0 || counter < gap - 1 || reorder < random" means delayed.
        let gap = u64::from(self.cfg.reorder_gap.max(1));
        let reorder = self.cfg.reorder.get() > 0.0
            && self.reorder_counter + 1 >= gap
            && self.rng.reorder.chance(self.cfg.reorder.get());
        let time = if reorder {
            self.reorder_counter = 0;
            self.counters.reordered += 1;
            now
        } else {
            let arrive = now + self.jittered_delay();
            let mut time = arrive;
            if self.cfg.rate_bps.is_some() {
                while self.rateq.front().is_some_and(|s| s.depart <= now) {
                    self.rateq.pop_front();
                }
                // The packets still in the queue when this one reaches it.
                let ahead = self.rateq.partition_point(|s| s.depart <= arrive);
                let (q_pkts, q_bytes) = self.rateq.get(ahead).map_or((0, 0), |s| {
                    (
                        self.cum_pkts - s.cum_pkts_before,
                        self.cum_bytes - s.cum_before,
                    )
                });
                let n = u64::from(pkt.wire_packets());
                let full_pkts = self
                    .cfg
                    .effective_queue_packets()
                    .is_some_and(|l| q_pkts + n > u64::from(l));
                let full_bytes = self
                    .cfg
                    .queue_bytes
                    .is_some_and(|l| q_bytes + bytes > l.get());
                if full_pkts || full_bytes {
                    self.counters.dropped_queue += 1;
                    self.counters.copies_dropped += u64::from(depth > 0);
                    return;
                }
                self.counters.max_queue_packets = self.counters.max_queue_packets.max(q_pkts + n);
                let depart = self.last_depart.max(arrive) + self.tx_time(&pkt);
                self.rateq.push_back(Slot {
                    arrive,
                    depart,
                    bytes,
                    cum_before: self.cum_bytes,
                    cum_pkts_before: self.cum_pkts,
                });
                self.cum_bytes += bytes;
                self.cum_pkts += n;
                self.last_depart = depart;
                time = depart;
            }
            if self.cfg.jitter_order == JitterOrder::Fifo {
                time = time.max(self.last_time);
                self.last_time = time;
            }
            self.reorder_counter += 1;
            time
        };
        self.seq += 1;
        self.held_bytes += bytes;
        self.held.push(Reverse(Held {
            time,
            seq: self.seq,
            pkt,
        }));
    }

    /// Moves every packet due at `now` to `out` (in send-time order) and returns when the next
    /// one is due.
    pub fn poll(&mut self, now: Nanos, out: &mut Vec<P>) -> Option<Nanos> {
        self.poll_each(now, |_, p| out.push(p))
    }

    /// Like [`Direction::poll`], passing each packet with the time it was due (the I/O edge
    /// measures its own lateness with it).
    pub fn poll_each(&mut self, now: Nanos, mut f: impl FnMut(Nanos, P)) -> Option<Nanos> {
        while let Some(Reverse(h)) = self.held.peek() {
            if h.time > now {
                return Some(h.time);
            }
            let Some(Reverse(h)) = self.held.pop() else {
                break;
            };
            let b = h.pkt.wire_bytes();
            self.held_bytes -= b;
            self.counters.packets_out += 1;
            self.counters.bytes_out += b;
            f(h.time, h.pkt);
        }
        None
    }
}

#[cfg(test)]
mod tests;
