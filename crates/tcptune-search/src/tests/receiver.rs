//! The receiver's shrink behind a BBR sender: its first candidate is the window BBR keeps in
//! flight (twice the BDP's), not the BDP's window, which such a sender always outgrows.

use super::*;

/// 100 Mbit/s × 20 ms behind a sender that fills the path only with 1.8 BDPs in flight.
fn behind_bbr(seed: u64, told_cc: bool) -> FakePath {
    let mut path = FakePath::new(seed);
    path.noise = 0.02;
    path.inflight_bdps = 1.8;
    path.sender_cc = told_cc.then_some(CongestionControl::Bbr);
    path
}

fn first_shrink(report: &Report) -> (u64, Outcome) {
    let s = report
        .steps
        .iter()
        .find(|s| s.phase == Phase::Shrink)
        .expect("a shrink trial");
    (buffer_max(&s.changes[0].1).unwrap(), s.outcome)
}

#[test]
fn behind_a_bbr_sender_the_receive_shrink_starts_at_twice_the_bdp_s_window() {
    for seed in 400..406 {
        let mut path = behind_bbr(seed, true);
        let cfg = told_receiver(&path);
        let (report, host) = drive(cfg, &mut path, settings(6 << 20));
        let bdp_buffer = path.bdp_bytes() / path.window_share;
        let twice = 2.0 * bdp_buffer;
        let (first, outcome) = first_shrink(&report);
        assert!(
            (first as f64 - twice).abs() <= 0.05 * twice,
            "seed {seed}: first candidate {first} B against {twice:.0}\n{report}"
        );
        assert_eq!(outcome, Outcome::Kept, "seed {seed}\n{report}");
        let max = buffer_max(&host[RMEM]).unwrap();
        let smallest = 0.95 * path.inflight_bdps * bdp_buffer;
        assert!(
            max as f64 <= 1.5 * smallest && path.rate(max) >= 0.95 * path.capacity_bps,
            "seed {seed}: {max} B against the smallest sufficient {smallest:.0}\n{report}"
        );

        // Not told the sender's congestion control, the search starts at the BDP's window,
        // which this sender outgrows: that trial is spent on a miss.
        let mut blind = behind_bbr(seed, false);
        let (report, _) = drive(told_receiver(&blind), &mut blind, settings(6 << 20));
        let (first, outcome) = first_shrink(&report);
        assert!(
            (first as f64) < 1.1 * bdp_buffer && outcome == Outcome::RolledBack,
            "seed {seed}: {first} B, {outcome:?}\n{report}"
        );
    }
}
