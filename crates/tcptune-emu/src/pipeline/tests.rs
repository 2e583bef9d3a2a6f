//! The pipeline on a virtual clock: exact schedules where the arithmetic is exact, binomial 99%
//! intervals where decisions are random.

use super::*;
use crate::config::{Distribution, JitterOrder, LinkConfig, Loss};
use tcptune_model::{Bytes, Dur, Probability, Rate};

#[derive(Clone, Debug, PartialEq)]
struct Pkt {
    id: u64,
    len: u64,
    corrupted: bool,
}

impl Packet for Pkt {
    fn wire_bytes(&self) -> u64 {
        self.len
    }
    fn corrupt(&mut self, _: &mut Rng) {
        self.corrupted = true;
    }
}

fn p(x: f64) -> Probability {
    Probability::new(x).unwrap()
}

const MS: u64 = 1_000_000;

/// Feeds `n` packets of `len` bytes every `gap_ns` and returns (delivery time, packet) in
/// delivery order, polling at every arrival and wakeup (as the I/O edge does).
fn run(cfg: LinkConfig, seed: u64, n: u64, len: u64, gap_ns: u64) -> (Vec<(Nanos, Pkt)>, Counters) {
    let mut d = Direction::new(cfg, seed, 0).unwrap();
    let mut out = Vec::new();
    let mut got = Vec::new();
    let mut drain = |d: &mut Direction<Pkt>, now, got: &mut Vec<(Nanos, Pkt)>| {
        d.poll(now, &mut out);
        got.extend(out.drain(..).map(|p| (now, p)));
    };
    for i in 0..n {
        let now = i * gap_ns;
        // Deliver everything due before this arrival at its own time.
        while let Some(t) = d.next_wakeup().filter(|&t| t < now) {
            drain(&mut d, t, &mut got);
        }
        d.enqueue(
            now,
            Pkt {
                id: i,
                len,
                corrupted: false,
            },
        );
        drain(&mut d, now, &mut got);
    }
    while let Some(t) = d.next_wakeup() {
        drain(&mut d, t, &mut got);
    }
    let end = got.last().map_or(0, |g| g.0);
    (got, d.counters(end + 1))
}

/// Asserts `k` successes of `n` trials are inside the binomial 99% interval around `p`.
fn within_binomial_99(what: &str, k: u64, n: u64, p: f64) {
    let mean = n as f64 * p;
    let half = 2.576 * (n as f64 * p * (1.0 - p)).sqrt() + 1.0;
    assert!(
        (k as f64 - mean).abs() <= half,
        "{what}: {k} of {n}, expected {mean:.1} ± {half:.1}"
    );
}

#[test]
fn fixed_delay_delivers_each_packet_exactly_delay_later() {
    let cfg = LinkConfig {
        delay_s: Dur::from_millis(10),
        ..Default::default()
    };
    let (got, c) = run(cfg, 1, 1000, 1500, 100_000);
    assert_eq!(got.len(), 1000);
    for (t, pkt) in &got {
        assert_eq!(*t, pkt.id * 100_000 + 10 * MS);
    }
    assert_eq!((c.packets_out, c.bytes_out), (1000, 1_500_000));
}

#[test]
fn rate_serialises_at_the_configured_bits_per_second_with_overhead() {
    // 100 Mbit/s, 1500-byte packets plus 14 bytes overhead: 121.12 µs each.
    let cfg = LinkConfig {
        rate_bps: Some(Rate::from_bps(100e6)),
        queue_packets: Some(100_000),
        ..Default::default()
    };
    let (got, c) = run(cfg, 1, 10_000, 1500, 0);
    let tx = 1514 * 8 * 10; // ns at 100 Mbit/s
    for (i, (t, pkt)) in got.iter().enumerate() {
        assert_eq!(pkt.id, i as u64);
        assert_eq!(*t, (i as u64 + 1) * tx);
    }
    let secs = got.last().unwrap().0 as f64 / 1e9;
    let rate = c.bytes_out as f64 * 8.0 / secs;
    assert!((rate - 100e6 * 1500.0 / 1514.0).abs() < 1.0, "{rate}");
    assert_eq!(c.max_queue_packets, 10_000);
}

#[test]
fn departure_is_max_of_previous_departure_and_arrival_plus_delay_plus_tx() {
    let cfg = LinkConfig {
        rate_bps: Some(Rate::from_bps(8e6)), // 1 byte per µs
        overhead_bytes: 0,
        delay_s: Dur::from_millis(5),
        ..Default::default()
    };
    // 1000-byte packets (1 ms to send) every 0.5 ms: the queue grows by 0.5 ms per packet.
    let (got, _) = run(cfg, 1, 20, 1000, MS / 2);
    let mut prev = 0;
    for (t, pkt) in &got {
        let expect = prev.max(pkt.id * MS / 2 + 5 * MS) + MS;
        assert_eq!(*t, expect);
        prev = expect;
    }
}

#[test]
fn queue_limit_drops_tail_and_bounds_the_delay() {
    let limit = 50;
    let cfg = LinkConfig {
        rate_bps: Some(Rate::from_bps(10e6)),
        delay_s: Dur::from_millis(20),
        queue_packets: Some(limit),
        ..Default::default()
    };
    // Offered at twice the rate: the queue fills and stays full.
    let tx = 1514 * 8 * 100; // ns per packet at 10 Mbit/s
    let (got, c) = run(cfg.clone(), 1, 2000, 1500, tx / 2);
    let max_delay = got
        .iter()
        .map(|(t, pkt)| t - pkt.id * tx / 2)
        .max()
        .unwrap();
    assert!(max_delay <= 20 * MS + u64::from(limit) * tx, "{max_delay}");
    assert!(
        max_delay >= 20 * MS + u64::from(limit - 1) * tx,
        "{max_delay}"
    );
    assert_eq!(c.max_queue_packets, u64::from(limit));
    assert!(c.dropped_queue > 900 && c.dropped_queue < 1000, "{c:?}");
    assert_eq!(c.packets_out + c.dropped_queue, 2000);
    // A byte limit of 10 packets' worth allows 10.
    let bytes = LinkConfig {
        queue_packets: None,
        queue_bytes: Some(Bytes::new(15_000)),
        ..cfg
    };
    let (_, c) = run(bytes, 1, 100, 1500, 0);
    assert_eq!(
        (c.packets_out, c.dropped_queue, c.max_queue_packets),
        (10, 90, 10)
    );
}

#[test]
fn netem_limit_counts_the_delay_line() {
    let cfg = LinkConfig {
        delay_s: Dur::from_millis(100),
        limit_packets: Some(10),
        ..Default::default()
    };
    // 100 packets within 1 ms: all still in the delay line, so only 10 fit.
    let (_, c) = run(cfg, 1, 100, 100, 10_000);
    assert_eq!((c.packets_out, c.dropped_limit), (10, 90));
}

#[test]
fn random_loss_share_is_inside_the_binomial_interval() {
    for (loss, seed) in [(0.01, 1), (0.001, 2), (0.2, 3)] {
        let cfg = LinkConfig {
            loss: Loss::Random { p: p(loss) },
            ..Default::default()
        };
        let n = 200_000;
        let (_, c) = run(cfg, seed, n, 100, 1000);
        within_binomial_99("loss", c.dropped_loss, n, loss);
        assert_eq!(c.packets_out + c.dropped_loss, n);
    }
}

#[test]
fn duplicate_share_is_inside_the_binomial_interval_and_copies_follow_their_original() {
    let cfg = LinkConfig {
        duplicate: p(0.05),
        ..Default::default()
    };
    let n = 100_000;
    let (got, c) = run(cfg, 4, n, 100, 1000);
    within_binomial_99("duplicate", c.duplicated, n, 0.05);
    assert_eq!(c.packets_out, n + c.duplicated);
    // With no delay the copy leaves first (it is enqueued before the original), then the
    // original: ids never go backwards.
    assert!(got.windows(2).all(|w| w[0].1.id <= w[1].1.id));
}

#[test]
fn a_packet_both_duplicated_and_lost_still_delivers_one_copy() {
    let cfg = LinkConfig {
        duplicate: p(1.0),
        loss: Loss::Random { p: p(1.0) },
        ..Default::default()
    };
    let (got, c) = run(cfg, 1, 100, 100, 1000);
    assert_eq!(got.len(), 100);
    assert_eq!((c.duplicated, c.dropped_loss), (0, 0));
}

#[test]
fn copies_dropped_make_the_far_sides_count_of_duplicates_and_losses() {
    let cfg = LinkConfig {
        duplicate: p(0.1),
        loss: Loss::Random { p: p(0.1) },
        ..Default::default()
    };
    let n = 20_000;
    let (got, c) = run(cfg, 12, n, 100, 1000);
    // What the far side saw: each original once or not at all, plus extra copies.
    let mut ids: Vec<u64> = got.iter().map(|g| g.1.id).collect();
    let delivered = ids.len() as u64;
    ids.dedup();
    let (originals, extra) = (ids.len() as u64, delivered - ids.len() as u64);
    assert!(c.copies_dropped > 0, "{c:?}");
    assert_eq!(extra, c.duplicated - c.copies_dropped);
    assert_eq!(n - originals, c.dropped_loss - c.copies_dropped);
}

#[test]
fn corruption_share_is_inside_the_binomial_interval() {
    let cfg = LinkConfig {
        corrupt: p(0.01),
        ..Default::default()
    };
    let n = 200_000;
    let (got, c) = run(cfg, 5, n, 100, 1000);
    let corrupted = got.iter().filter(|g| g.1.corrupted).count() as u64;
    assert_eq!(corrupted, c.corrupted);
    within_binomial_99("corrupt", corrupted, n, 0.01);
}

#[test]
fn reorder_sends_the_picked_share_at_once_and_the_rest_delayed() {
    let cfg = LinkConfig {
        delay_s: Dur::from_millis(10),
        reorder: p(0.25),
        ..Default::default()
    };
    let n = 50_000;
    let (got, c) = run(cfg, 6, n, 100, 100_000);
    within_binomial_99("reorder", c.reordered, n, 0.25);
    let immediate = got.iter().filter(|(t, pkt)| *t == pkt.id * 100_000).count() as u64;
    assert_eq!(immediate, c.reordered);
    let late = got
        .iter()
        .filter(|(t, pkt)| *t == pkt.id * 100_000 + 10 * MS)
        .count() as u64;
    assert_eq!(immediate + late, n);
}

#[test]
fn reorder_gap_reorders_only_after_gap_minus_one_delayed_packets() {
    let cfg = LinkConfig {
        delay_s: Dur::from_millis(10),
        reorder: p(1.0),
        reorder_gap: 5,
        ..Default::default()
    };
    let (got, c) = run(cfg, 1, 100, 100, 100_000);
    // Packets 4, 9, 14, … (every 5th) go at once.
    assert_eq!(c.reordered, 20);
    for (t, pkt) in &got {
        let immediate = *t == pkt.id * 100_000;
        assert_eq!(immediate, pkt.id % 5 == 4, "packet {}", pkt.id);
    }
}

#[test]
fn every_nth_loss_drops_exactly_every_nth_packet() {
    let cfg = LinkConfig {
        loss: Loss::EveryNth { n: 100 },
        ..Default::default()
    };
    let (got, c) = run(cfg, 1, 10_000, 100, 1000);
    assert_eq!(c.dropped_loss, 100);
    assert!(got.iter().all(|g| g.1.id % 100 != 99));
}

#[test]
fn gilbert_elliott_matches_its_stationary_loss_and_burst_length() {
    let (pp, r) = (0.01, 0.25);
    let cfg = LinkConfig {
        loss: Loss::GilbertElliott {
            p: p(pp),
            r: p(r),
            bad_loss: p(1.0),
            good_loss: p(0.0),
        },
        ..Default::default()
    };
    let n = 400_000;
    let (got, c) = run(cfg.clone(), 7, n, 100, 1000);
    let expect = cfg.loss.mean();
    let share = c.dropped_loss as f64 / n as f64;
    // Losses come in bursts, so the spread is wider than binomial: allow 10%.
    assert!((share - expect).abs() < 0.1 * expect, "{share} vs {expect}");
    // Mean burst length: the loss uses the state the packet started in, so a bad period of
    // length k loses k packets: mean 1/r.
    let delivered: std::collections::HashSet<u64> = got.iter().map(|g| g.1.id).collect();
    let (mut bursts, mut lost, mut in_burst) = (0u64, 0u64, false);
    for id in 0..n {
        let l = !delivered.contains(&id);
        lost += u64::from(l);
        bursts += u64::from(l && !in_burst);
        in_burst = l;
    }
    let mean_burst = lost as f64 / bursts as f64;
    assert!((mean_burst - 1.0 / r).abs() < 0.1 / r, "{mean_burst}");
}

#[test]
fn uniform_jitter_stays_within_bounds_and_fifo_keeps_order() {
    let base = LinkConfig {
        delay_s: Dur::from_millis(10),
        jitter_s: Dur::from_millis(2),
        ..Default::default()
    };
    let (got, _) = run(base.clone(), 8, 20_000, 100, 50_000);
    let delays: Vec<u64> = got.iter().map(|(t, pkt)| t - pkt.id * 50_000).collect();
    assert!(delays.iter().all(|&d| (8 * MS..=12 * MS).contains(&d)));
    let mean = delays.iter().sum::<u64>() as f64 / delays.len() as f64;
    assert!((mean - 10e6).abs() < 0.02e6, "{mean}");
    // netem's default: jitter reorders.
    assert!(got.windows(2).any(|w| w[0].1.id > w[1].1.id));
    let fifo = LinkConfig {
        jitter_order: JitterOrder::Fifo,
        ..base
    };
    let (got, _) = run(fifo, 8, 20_000, 100, 50_000);
    assert!(got.windows(2).all(|w| w[0].1.id < w[1].1.id));
}

#[test]
fn normal_jitter_has_the_configured_sigma() {
    let cfg = LinkConfig {
        delay_s: Dur::from_millis(50),
        jitter_s: Dur::from_millis(5),
        distribution: Distribution::Normal,
        ..Default::default()
    };
    let (got, _) = run(cfg, 9, 50_000, 100, 10_000);
    let d: Vec<f64> = got
        .iter()
        .map(|(t, pkt)| (t - pkt.id * 10_000) as f64)
        .collect();
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64).sqrt();
    assert!(
        (mean - 50e6).abs() < 0.1e6 && (sd - 5e6).abs() < 0.1e6,
        "{mean} {sd}"
    );
}

#[test]
fn same_seed_same_decisions_and_another_seed_differs() {
    let cfg = LinkConfig {
        rate_bps: Some(Rate::from_bps(50e6)),
        delay_s: Dur::from_millis(5),
        jitter_s: Dur::from_millis(1),
        loss: Loss::Random { p: p(0.02) },
        duplicate: p(0.01),
        corrupt: p(0.01),
        reorder: p(0.01),
        ..Default::default()
    };
    let a = run(cfg.clone(), 42, 20_000, 1200, 100_000);
    let b = run(cfg.clone(), 42, 20_000, 1200, 100_000);
    assert_eq!(a.0, b.0);
    assert_eq!(a.1, b.1);
    let c = run(cfg, 43, 20_000, 1200, 100_000);
    assert_ne!(a.0, c.0);
}

#[test]
fn enabling_duplication_does_not_change_which_originals_are_lost() {
    let lossy = LinkConfig {
        loss: Loss::Random { p: p(0.05) },
        ..Default::default()
    };
    let survivors = |cfg| {
        let (got, _) = run(cfg, 11, 20_000, 100, 1000);
        let mut v: Vec<u64> = got.into_iter().map(|g| g.1.id).collect();
        v.dedup();
        v
    };
    let with_dup = LinkConfig {
        duplicate: p(0.1),
        ..lossy.clone()
    };
    // A packet drawn for both is delivered once (netem's arithmetic), so compare the originals
    // lost without duplication: each is either lost again or was saved by its copy.
    let (a, b) = (survivors(lossy), survivors(with_dup));
    assert!(a.iter().all(|id| b.binary_search(id).is_ok()));
    assert!(b.len() > a.len());
}

#[test]
fn corrupt_ip_flips_one_bit_after_the_header() {
    let mut pkt = vec![0u8; 60];
    pkt[0] = 0x45; // IPv4, 20-byte header
    let orig = pkt.clone();
    let mut r = Rng::new(3);
    for _ in 0..100 {
        let mut c = orig.clone();
        corrupt_ip(&mut c, &mut r);
        let diff: Vec<usize> = (0..60).filter(|&i| c[i] != orig[i]).collect();
        assert_eq!(diff.len(), 1);
        assert!(diff[0] >= 20);
        assert_eq!((c[diff[0]] ^ orig[diff[0]]).count_ones(), 1);
    }
    pkt.corrupt(&mut r);
    assert_ne!(pkt, orig);
}
