//! The join's tests: matching, orientation, clock offset, losses, duplicates, reordering and
//! delays, on synthetic captures.

use super::*;
use tcptune_model::Dur;
use tcptune_wire::TcpOptions;

fn seg(from_a: bool, seq: u32, ack: u32, flags: u16, len: u32, ip_id: u16) -> TcpSegment {
    let (x, y) = (Addr::v4([198, 18, 0, 1]), Addr::v4([198, 18, 0, 2]));
    let (src, dst, sport, dport) = if from_a {
        (x, y, 40000, 5001)
    } else {
        (y, x, 5001, 40000)
    };
    TcpSegment {
        src,
        dst,
        sport,
        dport,
        seq,
        ack,
        flags,
        window: 500,
        hlen: 20,
        seglen: Some(len),
        options: TcpOptions::default(),
        ip_id,
    }
}

/// A sender's 10 data segments seen at the sender (A) and at the receiver (B, 5 ms later
/// on a clock 2 ms ahead), and the receiver's ACKs seen at B and then at A (3 ms later):
/// segment 3 lost between the points and retransmitted, segment 5 duplicated, segment 7
/// delayed past 9, segment 8's first copy lost before the first point; 4 retransmitted
/// although it got through.
#[test]
fn losses_duplicates_reordering_delay_and_offset_come_out_exactly() {
    // What each side was fed, to feed it again the other way round.
    let mut j_a: Vec<(i64, TcpSegment)> = Vec::new();
    let mut j_b: Vec<(i64, TcpSegment)> = Vec::new();
    let mut j = Recorder {
        j: Joiner::new(),
        a: &mut j_a,
        b: &mut j_b,
    };
    let ms = 1_000_000i64;
    let off = 2 * ms;
    let t0 = 1_000 * ms;
    let mut b_arrivals = Vec::new();
    for i in 0..10u32 {
        let s = seg(true, 1000 + i * 100, 1, th::ACK, 100, i as u16);
        let t = t0 + i64::from(i) * ms;
        if i == 8 {
            continue; // lost before A: never captured in its first transmission
        }
        j.segment(Side::A, t, &s);
        if i == 3 {
            continue; // lost between A and B
        }
        let arrive = t + 5 * ms + off + if i == 7 { 3 * ms } else { 0 };
        b_arrivals.push((arrive, s));
        if i == 5 {
            b_arrivals.push((arrive + 10_000, s));
        }
    }
    // Retransmissions of 3 and 8 (needed) and of 4 (not needed: it got through), at A.
    let r3 = seg(true, 1300, 1, th::ACK, 100, 100);
    let r4 = seg(true, 1400, 1, th::ACK, 100, 101);
    let r8 = seg(true, 1800, 1, th::ACK, 100, 102);
    j.segment(Side::A, t0 + 20 * ms, &r3);
    j.segment(Side::A, t0 + 21 * ms, &r4);
    j.segment(Side::A, t0 + 22 * ms, &r8);
    for (i, r) in [r3, r4, r8].iter().enumerate() {
        b_arrivals.push((t0 + (25 + i as i64) * ms + off, *r));
    }
    b_arrivals.sort_by_key(|x| x.0);
    for (t, s) in &b_arrivals {
        j.segment(Side::B, *t, s);
    }
    // ACKs from the receiver: seen at B, then at A 3 ms later (B's clock is 2 ms ahead).
    for k in 0..4u32 {
        let a = seg(false, 1, 1100 + k * 200, th::ACK, 0, 500 + k as u16);
        let tb = t0 + i64::from(k) * 3 * ms + 8 * ms + off;
        j.segment(Side::B, tb, &a);
        j.segment(Side::A, tb - off + 3 * ms, &a);
    }
    let r =
        j.j.finish(["sender.pcap", "receiver.pcap"], Clock::Estimate);
    assert_eq!(r.flows.len(), 1);
    let data = &r.flows[0].directions[0];
    assert_eq!(data.upstream, "sender.pcap");
    assert!(!data.upstream_assumed);
    assert_eq!(data.upstream_packets, 12);
    assert_eq!(data.matched, 11);
    assert_eq!(data.lost_between, 1);
    assert_eq!(data.duplicated, 1);
    assert_eq!(data.reordered, 1, "segment 9 arrived before 7");
    assert_eq!(data.lost_before_first, 1);
    assert_eq!(data.lost_before_first_bytes, 100);
    assert_eq!(
        (
            data.retransmissions,
            data.retransmissions_needed,
            data.retransmissions_unneeded
        ),
        (3, 2, 1)
    );
    let acks = &r.flows[0].directions[1];
    assert_eq!(acks.upstream, "receiver.pcap");
    // Given the other way round, the same: which capture is upstream comes from the
    // packets, not from the order of the arguments.
    let mut swapped = Joiner::new();
    for (side, recs) in [(Side::B, &j_a), (Side::A, &j_b)] {
        for (t, s) in recs.iter() {
            swapped.segment(side, *t, s);
        }
    }
    let rs = swapped.finish(["receiver.pcap", "sender.pcap"], Clock::Estimate);
    let sd = &rs.flows[0].directions[0];
    assert_eq!((sd.upstream.as_str(), sd.lost_between), ("sender.pcap", 1));
    assert_eq!(rs.clock.offset_s, Some(-0.003));
    assert_eq!((acks.matched, acks.lost_between), (4, 0));
    // Offset: (min A→B raw 7 ms − min B→A raw 1 ms) / 2 = 3 ms, not the true 2 ms: the
    // estimate assumes equal minimum delays (5 ms and 3 ms here), and says so.
    assert_eq!(r.clock.offset_s, Some(0.003));
    assert!(r.clock.note.contains("assuming"));
    let d = data.delay.as_ref().unwrap();
    assert_eq!(d.min_s, Dur::from_millis(4));
    assert_eq!(acks.delay.as_ref().unwrap().min_s, Dur::from_millis(4));
    assert!(r.found_problem());
    assert_eq!(r.totals.lost_between, 1);
}

/// A packet lost between the points whose retransmission the path duplicated: the
/// retransmission's second copy carries the lost packet's bytes, but it is a copy of a
/// packet matched by signature, not a regrouping of the original, so the original stays
/// lost and the copy counts as a duplicate (the shape of a CI failure: the join found one
/// loss and one duplicate fewer than the emulator counted).
#[test]
fn a_duplicated_retransmission_does_not_deliver_the_lost_original() {
    let mut j = Joiner::new();
    let ms = 1_000_000i64;
    for i in 0..4u32 {
        let s = seg(true, 1000 + i * 100, 1, th::ACK, 100, i as u16);
        j.segment(Side::A, i64::from(i) * ms, &s);
        if i != 1 {
            j.segment(Side::B, i64::from(i) * ms + 5 * ms, &s);
        }
    }
    let r1 = seg(true, 1100, 1, th::ACK, 100, 50);
    j.segment(Side::A, 10 * ms, &r1);
    j.segment(Side::B, 15 * ms, &r1);
    j.segment(Side::B, 15 * ms + 1000, &r1);
    let r = j.finish(["a", "b"], Clock::Same);
    let d = &r.flows[0].directions[0];
    assert_eq!(
        (d.matched, d.lost_between, d.duplicated, d.not_seen_upstream),
        (4, 1, 1, 0),
        "{d:?}"
    );
    assert_eq!(
        (d.retransmissions, d.retransmissions_needed, d.regrouped),
        (1, 1, 0)
    );
}

/// A joiner that also keeps what it was fed.
struct Recorder<'a> {
    j: Joiner,
    a: &'a mut Vec<(i64, TcpSegment)>,
    b: &'a mut Vec<(i64, TcpSegment)>,
}

impl Recorder<'_> {
    fn segment(&mut self, side: Side, t: i64, s: &TcpSegment) {
        self.j.segment(side, t, s);
        match side {
            Side::A => self.a.push((t, *s)),
            Side::B => self.b.push((t, *s)),
        }
    }
}

#[test]
fn one_clock_gives_true_delays_and_one_direction_gives_relative_ones() {
    let ms = 1_000_000i64;
    let fed = || {
        let mut j = Joiner::new();
        for i in 0..5u32 {
            let s = seg(true, 1000 + i * 100, 1, th::ACK, 100, i as u16);
            let t = i64::from(i) * ms;
            j.segment(Side::A, t, &s);
            j.segment(Side::B, t + 10 * ms + i64::from(i) * 100_000, &s);
        }
        j
    };
    let same = fed().finish(["a", "b"], Clock::Same);
    let d = same.flows[0].directions[0].delay.clone().unwrap();
    assert_eq!(
        (d.min_s, d.max_s),
        (Dur::from_millis(10), Dur::from_micros(10_400))
    );
    assert_eq!(same.clock.method, "same-clock");
    let est = fed().finish(["a", "b"], Clock::Estimate);
    assert_eq!(est.clock.method, "relative-to-minimum");
    assert_eq!(est.clock.offset_s, None);
    let d = est.flows[0].directions[0].delay.clone().unwrap();
    assert!(d.relative);
    assert_eq!((d.min_s, d.max_s), (Dur::ZERO, Dur::from_micros(400)));
    assert!(est.flows[0].directions[0].upstream_assumed);
    assert!(!est.found_problem());
}

#[test]
fn a_connection_seen_one_way_takes_the_orientation_of_its_hosts_other_connections() {
    let ms = 1_000_000i64;
    let mut j = Joiner::new();
    // Connection 1 both ways: B (given first) is nearer the sender 198.18.0.1.
    let data = seg(true, 100, 1, th::ACK, 10, 1);
    let ack = seg(false, 1, 110, th::ACK, 0, 2);
    j.segment(Side::A, 5 * ms, &data);
    j.segment(Side::B, 0, &data);
    j.segment(Side::B, 9 * ms, &ack);
    j.segment(Side::A, 4 * ms, &ack);
    // Connection 2 from the same host, one way only (another source port).
    let mut one_way = seg(true, 500, 1, th::ACK, 10, 3);
    one_way.sport = 40001;
    j.segment(Side::A, 7 * ms, &one_way);
    j.segment(Side::B, 2 * ms, &one_way);
    let r = j.finish(["near-receiver", "near-sender"], Clock::Estimate);
    let second = &r.flows[1].directions[0];
    assert_eq!(second.from, "198.18.0.1:40001");
    assert_eq!(
        (second.upstream.as_str(), second.upstream_assumed),
        ("near-sender", false)
    );
}

#[test]
fn offload_merged_and_split_packets_match_by_byte_range() {
    let ms = 1_000_000i64;
    let mut j = Joiner::new();
    // Upstream: 4 segments of 100 bytes, then a 300-byte TSO super-packet.
    for i in 0..4u32 {
        j.segment(
            Side::A,
            i64::from(i) * 10_000,
            &seg(true, 1000 + i * 100, 1, th::ACK, 100, i as u16),
        );
    }
    j.segment(Side::A, ms, &seg(true, 1400, 1, th::ACK, 300, 9));
    // Downstream: the first two merged (GRO), the next two as sent, the super-packet
    // split into three.
    let merged = seg(true, 1000, 1, th::ACK, 200, 0);
    j.segment(Side::B, 5 * ms, &merged);
    j.segment(Side::B, 5 * ms + 1, &seg(true, 1200, 1, th::ACK, 100, 2));
    j.segment(Side::B, 5 * ms + 2, &seg(true, 1300, 1, th::ACK, 100, 3));
    for k in 0..3u32 {
        j.segment(
            Side::B,
            6 * ms + i64::from(k),
            &seg(true, 1400 + k * 100, 1, th::ACK, 100, 9),
        );
    }
    let r = j.finish(["a", "b"], Clock::Same);
    let d = &r.flows[0].directions[0];
    assert_eq!((d.coalesced, d.segmented), (2, 1));
    assert_eq!(
        (d.lost_between, d.not_seen_upstream, d.reordered),
        (0, 0, 0)
    );
    assert_eq!(d.matched, 5);
    assert_eq!(d.delay.as_ref().unwrap().samples, 5);
}

#[test]
fn bytes_regrouped_across_boundaries_are_delivered_not_lost() {
    // Upstream: two 300-byte TSO packets; downstream: the same 600 bytes as 200 + 400
    // (a different grouping), then a lost one: 100 bytes that never arrive.
    let mut j = Joiner::new();
    j.segment(Side::A, 0, &seg(true, 1000, 1, th::ACK, 300, 1));
    j.segment(Side::A, 10, &seg(true, 1300, 1, th::ACK, 300, 2));
    j.segment(Side::A, 20, &seg(true, 1600, 1, th::ACK, 100, 3));
    j.segment(Side::B, 1_000_000, &seg(true, 1000, 1, th::ACK, 200, 1));
    j.segment(Side::B, 1_000_010, &seg(true, 1200, 1, th::ACK, 400, 1));
    let r = j.finish(["a", "b"], Clock::Same);
    let d = &r.flows[0].directions[0];
    assert_eq!((d.regrouped, d.coalesced, d.segmented), (2, 0, 0));
    assert_eq!((d.lost_between, d.not_seen_upstream), (1, 0));
    assert_eq!(d.matched, 2);
    // One TSO packet of which only part arrived: lost (some of its bytes were), and the
    // part that arrived is not something the upstream point never saw.
    let mut j = Joiner::new();
    j.segment(Side::A, 0, &seg(true, 1000, 1, th::ACK, 300, 1));
    j.segment(Side::B, 1_000_000, &seg(true, 1000, 1, th::ACK, 100, 1));
    j.segment(Side::B, 1_000_010, &seg(true, 1200, 1, th::ACK, 100, 1));
    let r = j.finish(["a", "b"], Clock::Same);
    let d = &r.flows[0].directions[0];
    assert_eq!((d.lost_between, d.not_seen_upstream, d.matched), (1, 0, 0));
}

#[test]
fn ranges_merge_and_cover() {
    let mut r = Ranges::default();
    r.add(0, 10);
    r.add(20, 30);
    r.add(5, 22);
    assert_eq!(r.0, vec![(0, 30)]);
    r.add(40, 50);
    assert!(r.covers(41, 50) && !r.covers(29, 41) && r.covers(0, 30));
}

#[test]
fn a_copy_merged_with_its_neighbour_downstream_is_a_duplicate_not_unseen() {
    // Upstream: three 100-byte packets. Downstream: the first, then the path's copy of the
    // first merged with the second by the receiver's offload (200 bytes whose signature no
    // upstream packet has), then the third. The emulator counts one duplicate, nothing lost.
    let mut j = Joiner::new();
    for k in 0..3u32 {
        j.segment(
            Side::A,
            i64::from(k) * 10,
            &seg(true, 1000 + k * 100, 1, th::ACK, 100, k as u16),
        );
    }
    j.segment(Side::B, 1_000_000, &seg(true, 1000, 1, th::ACK, 100, 0));
    j.segment(Side::B, 1_000_010, &seg(true, 1000, 1, th::ACK, 200, 0));
    j.segment(Side::B, 1_000_020, &seg(true, 1200, 1, th::ACK, 100, 2));
    let r = j.finish(["a", "b"], Clock::Same);
    let d = &r.flows[0].directions[0];
    assert_eq!(
        (d.lost_between, d.not_seen_upstream, d.duplicated),
        (0, 0, 1)
    );
}
