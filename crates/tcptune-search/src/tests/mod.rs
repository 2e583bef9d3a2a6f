//! The search against a model of a path on a virtual clock: throughput a function of the
//! receive buffer (window = half the buffer, over the RTT, up to the link), seeded noise, and
//! a queue that fills when the window exceeds the path's BDP.

use tcptune_diagnose::advice::Knob;
use tcptune_diagnose::engine::Limit;
use tcptune_emu::Rng;
use tcptune_model::kernel::CongestionControl;

use crate::hypothesis::{
    buffer_max, buffer_need, hypotheses, Config, Kind, Observation, Role, Settings, CC,
    CC_AVAILABLE, RMEM, SACK, WMEM,
};
use crate::outcome::{Outcome, Phase, Report};
use crate::search::{Action, ArmKind, Event, Search};
use ArmKind::{Baseline, A, B};

mod guardrail;
pub(crate) mod measured;
mod receiver;
mod sender;

const TEST_S: f64 = 2.0;

struct FakePath {
    capacity_bps: f64,
    rtt_s: f64,
    /// Relative σ of each test's throughput.
    noise: f64,
    /// Chance a test shares the path with a competing flow (it then gets 70%).
    competing: f64,
    /// Chance a test collapses to a third of its rate on a loss (CUBIC on a lossy path); the
    /// window does not hold it back then.
    collapse: f64,
    /// Whether the buffer matters at all (false: an A/A path, rwnd-limited by its reader).
    buffer_matters: bool,
    /// A path that trades RTT for throughput past this buffer max (bytes): +30% rate, 3× RTT.
    bloat_above: Option<u64>,
    /// Socket memory the test reports, as a multiple of the buffer maximum (overhead).
    memory_factor: u64,
    /// Share of the receive buffer that is window (the kernel's is about half).
    window_share: f64,
    /// Below this multiple of the BDP the window holds the flow back (the sender's
    /// `rwnd_limited`), though the rate falls only below the BDP.
    binds_below: f64,
    /// Below this buffer max (bytes) the loaded RTT reads 2× (noise a shrink must not be
    /// judged on: a smaller buffer cannot queue more).
    slow_rtt_below: Option<u64>,
    /// Below this buffer max (bytes) half the tests lose 15%, the window holding the flow back:
    /// a buffer at its edge on a LAN, where the window share of the buffer moves with the
    /// received packets' layout.
    flaky_below: Option<u64>,
    /// The window the sender keeps in flight, in BDPs: the receive window must hold it to
    /// fill the path (a BBR sender's is about two; 1.8 held on the lossy lab path).
    inflight_bdps: f64,
    /// The sender's congestion control, as its end reports it.
    sender_cc: Option<CongestionControl>,
    rng: Rng,
}

impl FakePath {
    fn new(seed: u64) -> FakePath {
        FakePath {
            capacity_bps: 100e6,
            rtt_s: 0.020,
            noise: 0.05,
            competing: 0.0,
            collapse: 0.0,
            buffer_matters: true,
            bloat_above: None,
            memory_factor: 1,
            window_share: 0.5,
            binds_below: 0.95,
            slow_rtt_below: None,
            flaky_below: None,
            inflight_bdps: 1.0,
            sender_cc: None,
            rng: Rng::new(seed),
        }
    }

    fn bdp_bytes(&self) -> f64 {
        self.capacity_bps * self.rtt_s / 8.0
    }

    /// The rate the model gives without noise.
    fn rate(&self, rmem_max: u64) -> f64 {
        if !self.buffer_matters {
            return self.capacity_bps * 0.4;
        }
        let window = rmem_max as f64 * self.window_share;
        let r = (window * 8.0 / (self.rtt_s * self.inflight_bdps)).min(self.capacity_bps);
        match self.bloat_above {
            Some(b) if rmem_max > b => r * 1.3,
            _ => r,
        }
    }

    fn test(&mut self, s: &Settings) -> Observation {
        let rmem = buffer_max(&s[RMEM]).unwrap();
        let mut rate = self.rate(rmem) * (1.0 + self.noise * self.rng.normal());
        if self.rng.chance(self.competing) {
            rate *= 0.7;
        }
        let flaky = matches!(self.flaky_below, Some(b) if rmem < b) && self.rng.chance(0.5);
        if flaky {
            rate *= 0.85;
        }
        let collapsed = self.rng.chance(self.collapse);
        if collapsed {
            rate /= 3.0;
        }
        let window = rmem as f64 * self.window_share;
        let queue_s = ((window - self.bdp_bytes()).max(0.0) * 8.0 / self.capacity_bps).min(0.001);
        let mut srtt = self.rtt_s + queue_s;
        if matches!(self.bloat_above, Some(b) if rmem > b) {
            srtt *= 3.0;
        }
        if matches!(self.slow_rtt_below, Some(b) if rmem < b) {
            srtt *= 2.0;
        }
        let limited = !collapsed
            && (flaky
                || !self.buffer_matters
                || window < self.bdp_bytes() * self.binds_below * self.inflight_bdps);
        Observation {
            rate_bps: rate,
            srtt_s: Some(srtt),
            min_rtt_s: Some(self.rtt_s),
            memory_bytes: Some(rmem * self.memory_factor),
            limit: if collapsed {
                Limit::Loss
            } else if limited {
                Limit::ReceiverWindow
            } else {
                Limit::PathCapacity
            },
            knobs: if limited {
                vec![Knob::TcpRmemMax]
            } else {
                vec![]
            },
            verdict: format!("{:.1} Mbit/s", rate / 1e6),
            rwnd_limited: Some(if limited { 1.0 } else { 0.0 }),
            sndbuf_limited: Some(0.0),
            path_payload_bps: None,
            sender_cc: self.sender_cc,
        }
    }
}

fn settings(rmem_max: u64) -> Settings {
    [
        (RMEM, format!("4096 65536 {rmem_max}")),
        (WMEM, "4096 16384 4194304".into()),
        (CC, "cubic".into()),
        (CC_AVAILABLE, "reno cubic".into()),
        (SACK, "1".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The receiver's configuration with `path`'s rate told (`--rate`).
fn told_receiver(path: &FakePath) -> Config {
    let mut cfg = Config::new(Role::Receiver, TEST_S);
    cfg.path_rate_bps = Some(path.capacity_bps);
    cfg
}

/// Runs the search to its end; returns the report and the settings in effect at the end.
fn drive(cfg: Config, path: &mut FakePath, start: Settings) -> (Report, Settings) {
    drive_with(cfg, start, |host| path.test(host))
}

/// [`drive`] with any model of a path: `test` gives a test's result under the host's settings.
fn drive_with(
    cfg: Config,
    start: Settings,
    mut test: impl FnMut(&Settings) -> Observation,
) -> (Report, Settings) {
    let mut host = start.clone();
    let mut search = Search::new(cfg, start);
    let (mut now, mut event) = (0.0, Event::Start);
    for _ in 0..1000 {
        match search.step(now, event) {
            Action::Write { values } => {
                for (k, v) in values {
                    host.insert(k, v);
                }
                event = Event::Written;
            }
            Action::RunTest { .. } => {
                now += search.test_shape().total_s();
                event = Event::Test(Box::new(test(&host)));
            }
            Action::Done => {
                assert_eq!(
                    &host,
                    search.current(),
                    "the host ends in the state the search kept"
                );
                return (search.report(), host);
            }
        }
    }
    panic!("the search did not end in 1000 actions");
}

#[test]
fn an_aa_trial_is_no_difference_in_at_least_19_of_20_noisy_runs() {
    let mut kept = 0;
    for seed in 0..20 {
        let mut path = FakePath::new(seed);
        path.buffer_matters = false;
        path.noise = 0.08;
        path.competing = 0.15;
        let (report, host) = drive(
            Config::new(Role::Receiver, TEST_S),
            &mut path,
            settings(131072),
        );
        assert!(!report.steps.is_empty(), "seed {seed}: a trial ran");
        let change_kept = report
            .steps
            .iter()
            .any(|s| s.phase == Phase::Change && s.outcome == Outcome::Kept);
        if change_kept {
            kept += 1;
        } else {
            // A buffer that does not matter may only shrink.
            let max = buffer_max(&host[RMEM]).unwrap();
            assert!(max <= 131072, "seed {seed}: {report}");
        }
    }
    eprintln!("A/A: {kept} of 20 searches kept a change");
    assert!(
        kept <= 1,
        "{kept} of 20 A/A searches kept a change that does nothing"
    );
}

#[test]
fn a_real_improvement_is_kept_then_shrunk_to_near_the_smallest_sufficient_buffer() {
    for seed in 0..5 {
        let mut path = FakePath::new(100 + seed);
        let (report, host) = drive(
            Config::new(Role::Receiver, TEST_S),
            &mut path,
            settings(65536),
        );
        let first = &report.steps[0];
        assert_eq!(first.phase, Phase::Change);
        assert_eq!(first.outcome, Outcome::Kept, "seed {seed}: {report}");
        let max = buffer_max(&host[RMEM]).unwrap();
        // The smallest buffer giving 95% of the link: window 0.95 × BDP, buffer twice that.
        let smallest = 2.0 * 0.95 * path.bdp_bytes();
        // Shrinking keeps 95% of the best *measured* mean, which noise (5% σ) moves by a few %.
        assert!(
            path.rate(max) >= 0.93 * path.capacity_bps,
            "seed {seed}: {max} B gives {:.1} Mbit/s\n{report}",
            path.rate(max) / 1e6
        );
        assert!(
            (max as f64) <= 1.5 * smallest,
            "seed {seed}: {max} B is over 1.5× {smallest:.0} B\n{report}"
        );
        assert!(
            report.tests_used <= 25,
            "seed {seed}: {} tests",
            report.tests_used
        );
        assert_eq!(report.changed.len(), 1);
        assert!(report.dropin.contains(&format!("{RMEM} = {}", host[RMEM])));
    }
}

#[test]
fn the_budget_stops_mid_trial_with_the_change_put_back() {
    let mut path = FakePath::new(3);
    path.noise = 0.3;
    path.buffer_matters = false;
    let mut cfg = Config::new(Role::Receiver, TEST_S);
    cfg.max_tests = 4;
    let (report, host) = drive(cfg.clone(), &mut path, settings(131072));
    assert_eq!(report.tests_used, 4);
    assert!(report.stopped.contains("4 tests"), "{}", report.stopped);
    assert_eq!(host, settings(131072));
    // Time: 3 tests of 2 s fit in 7 s, a fourth does not.
    cfg.max_tests = 25;
    cfg.max_time_s = 7.0;
    let (report, host) = drive(cfg, &mut FakePath::new(3), settings(65536));
    assert_eq!(report.tests_used, 3, "{report}");
    assert!(report.stopped.contains("time budget"));
    assert_eq!(host, settings(65536));
}

#[test]
fn hypotheses_follow_the_diagnosis_and_say_what_they_do_not_try() {
    let mut obs = FakePath::new(1).test(&settings(65536));
    let mut cfg = Config::new(Role::Sender, TEST_S);
    obs.limit = Limit::Loss;
    obs.knobs = vec![Knob::CongestionControl, Knob::Sack];
    let mut s = settings(65536);
    s.insert(SACK.into(), "0".into());
    let (h, not) = hypotheses(&obs, &s, &cfg);
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!(h[0].changes, vec![(SACK.to_string(), "1".to_string())]);
    assert!(not
        .iter()
        .any(|n| n.what.contains("bbr") && n.why.contains("not available")));
    assert!(not.iter().any(|n| n.what.contains("initcwnd")));
    s.insert(CC_AVAILABLE.into(), "reno cubic bbr".into());
    let (h, _) = hypotheses(&obs, &s, &cfg);
    assert!(h
        .iter()
        .any(|h| h.changes == vec![(CC.to_string(), "bbr".to_string())]));
    // The memory limit caps a buffer step, and says so when it allows none.
    cfg.role = Role::Receiver;
    obs.limit = Limit::ReceiverWindow;
    cfg.max_memory_bytes = 65536;
    let (h, not) = hypotheses(&obs, &s, &cfg);
    assert!(h.iter().all(|h| h.kind != Kind::ReceiveBuffer), "{h:?}");
    assert!(not.iter().any(|n| n.why.contains("memory limit")));
}

#[test]
fn with_the_path_rate_given_a_buffer_that_meets_it_is_left_alone() {
    let path = FakePath::new(1);
    let mut obs = FakePath::new(1).test(&settings(65536));
    obs.limit = Limit::ReceiverWindow;
    let cfg = told_receiver(&path);
    let (h, _) = hypotheses(&obs, &settings(65536), &cfg);
    let grown = buffer_max(&h[0].changes[0].1).unwrap();
    assert!(
        grown as f64 >= 2.0 * path.bdp_bytes(),
        "{grown} B holds the BDP's window"
    );
    let (h, _) = hypotheses(&obs, &settings(grown), &cfg);
    assert!(h.is_empty(), "{h:?}");
}

#[test]
fn a_change_whose_buffers_outgrow_the_memory_limit_is_rolled_back() {
    let mut path = FakePath::new(11);
    path.memory_factor = 2;
    let mut cfg = Config::new(Role::Receiver, TEST_S);
    cfg.max_memory_bytes = 1 << 20;
    let (report, host) = drive(cfg, &mut path, settings(65536));
    let step = &report.steps[0];
    assert_eq!(step.outcome, Outcome::RolledBack, "{report}");
    assert!(step.why.contains("guardrail: buffers held"), "{}", step.why);
    assert_eq!(step.tests, 2, "judged on the first B test");
    // Whatever it keeps afterwards holds within the limit.
    let max = buffer_max(&host[RMEM]).unwrap();
    assert!(max * path.memory_factor <= 1 << 20, "{report}");
}

/// Counts trials by phase and outcome.
fn count(report: &Report, phase: Phase, outcome: Outcome) -> usize {
    report
        .steps
        .iter()
        .filter(|s| s.phase == phase && s.outcome == outcome)
        .count()
}

#[test]
fn an_oversized_start_shrinks_in_at_most_four_trials_to_within_the_bracket() {
    for (seed, window_share) in [(200, 0.5), (201, 0.5), (202, 0.3), (203, 0.3)] {
        // 6 MiB on 100 Mbit/s × 20 ms; with a window share of 0.3 the model's need (sized for
        // half) is too small, so the need fails and the bisection has to find the size.
        let mut path = FakePath::new(seed);
        path.window_share = window_share;
        // A lab link's spread (the 5% default is a noisy host's).
        path.noise = 0.02;
        let cfg = told_receiver(&path);
        let (report, host) = drive(cfg, &mut path, settings(6 << 20));
        let shrinks = report
            .steps
            .iter()
            .filter(|s| s.phase == Phase::Shrink)
            .count();
        assert!(
            (1..=4).contains(&shrinks),
            "seed {seed}: {shrinks} shrink trials\n{report}"
        );
        let max = buffer_max(&host[RMEM]).unwrap() as f64;
        let smallest = 0.95 * path.bdp_bytes() / window_share;
        assert!(
            max <= 1.5 * smallest,
            "seed {seed}: {max} B over 1.5× {smallest:.0}\n{report}"
        );
        assert!(
            path.rate(max as u64) >= 0.9 * path.capacity_bps,
            "seed {seed}: {max} B\n{report}"
        );
        assert!(
            report.tests_used <= 12,
            "seed {seed}: {}\n{report}",
            report.tests_used
        );
    }
}

#[test]
fn a_lossy_paths_collapses_do_not_stop_the_shrink_where_the_window_did_not_bind() {
    for seed in 300..306 {
        // CUBIC at 0.1% loss: a third of the tests carry a third of the rate. Judged on
        // throughput alone, most shrinks of one pair would be rolled back and the 6 MiB kept.
        let mut path = FakePath::new(seed);
        path.noise = 0.03;
        path.collapse = 0.35;
        let cfg = told_receiver(&path);
        let (report, host) = drive(cfg, &mut path, settings(6 << 20));
        let max = buffer_max(&host[RMEM]).unwrap() as f64;
        let smallest = 0.95 * path.bdp_bytes() / path.window_share;
        assert!(
            max <= 1.5 * smallest,
            "seed {seed}: {max} B over 1.5× {smallest:.0}\n{report}"
        );
        // And never below what the path's rate needs: the window binds there.
        assert!(
            path.rate(max as u64) >= 0.95 * path.capacity_bps,
            "seed {seed}: {max} B\n{report}"
        );
        for s in report.steps.iter().filter(|s| s.phase == Phase::Shrink) {
            if s.outcome == Outcome::Kept && s.why.contains("path's, not the buffer's") {
                assert!(s.why.contains("held the flow back 0.0%"), "{}", s.why);
            }
        }
    }
}

#[test]
fn a_shrink_that_holds_the_rate_at_its_edge_is_rolled_back() {
    for seed in 320..324 {
        // The window holds the flow back below 1.3× the BDP while the rate holds down to the
        // BDP: the model's need (exactly the BDP's window) holds the rate, window-limited.
        // Noise of 1%: at 2% one seed's test at the need lost 4% and was rolled back for that
        // before the edge rule could be what rolls it back.
        let mut path = FakePath::new(seed);
        path.noise = 0.01;
        path.binds_below = 1.3;
        let cfg = told_receiver(&path);
        let (report, host) = drive(cfg, &mut path, settings(6 << 20));
        let window = buffer_max(&host[RMEM]).unwrap() as f64 * path.window_share;
        assert!(
            window >= 1.3 * path.bdp_bytes() && window <= 1.5 * 1.5 * path.bdp_bytes(),
            "seed {seed}: window {window} B against the BDP {}\n{report}",
            path.bdp_bytes()
        );
        assert!(
            report
                .steps
                .iter()
                .any(|s| s.outcome == Outcome::RolledBack && s.why.contains("at its edge")),
            "seed {seed}\n{report}"
        );
    }
}

#[test]
fn a_shrink_near_its_end_is_kept_only_when_a_second_pair_confirms_it() {
    // A LAN whose buffers below 256 KiB lose 15% in half the tests: one good test keeps such a
    // buffer half the time, and the bisection offers two of them (128 KiB, then about
    // 210 KiB). Judged on one pair, 31 of these 40 searches end at one; with keeps near the
    // end confirmed on a second pair and a kept shrink put back when later tests of it slide,
    // 19 (two good pairs in a row still keep one a quarter of the time).
    let (mut flaky, mut put_back, seeds) = (0, 0, 400u64..440);
    for seed in seeds.clone() {
        let mut path = FakePath::new(seed);
        path.noise = 0.005;
        path.rtt_s = 0.0002;
        path.binds_below = 1e6;
        path.flaky_below = Some(256 << 10);
        let cfg = told_receiver(&path);
        let (report, host) = drive(cfg, &mut path, settings(6 << 20));
        if buffer_max(&host[RMEM]).unwrap() < 256 << 10 {
            flaky += 1;
        }
        if report.steps.iter().any(|s| s.why.contains("put back")) {
            put_back += 1;
        }
    }
    let share = f64::from(flaky) / (seeds.end - seeds.start) as f64;
    assert!(
        share <= 0.55 && put_back > 0,
        "{flaky} of {} searches ended at a flaky buffer ({put_back} put one back)",
        seeds.end - seeds.start
    );
}

#[test]
fn a_window_held_back_behind_a_deep_queue_is_not_at_its_edge() {
    // A LAN: the window holds the flow back at every buffer (binds_below far above), the rate
    // is the link's, and the excess window waits in a queue 3 ms deep over a 0.2 ms path.
    let mut path = FakePath::new(330);
    path.noise = 0.01;
    path.rtt_s = 0.0002;
    path.binds_below = 1e6;
    path.slow_rtt_below = None;
    let cfg = told_receiver(&path);
    let (report, host) = drive(cfg, &mut path, settings(6 << 20));
    let max = buffer_max(&host[RMEM]).unwrap();
    assert!(max <= 256 << 10, "{max} B\n{report}");
    assert!(
        report.steps.iter().all(|s| !s.why.contains("at its edge")),
        "{report}"
    );
}

#[test]
fn a_receiver_below_the_told_path_rate_keeps_the_window_a_bbr_sender_would_need() {
    // Every test loss-limited at a third of the path (CUBIC at 1% loss): the receiver's shrink
    // stops at the path rate's need with the 2× headroom, not at today's third.
    let mut path = FakePath::new(310);
    path.collapse = 1.0;
    let cfg = told_receiver(&path);
    let (report, host) = drive(cfg, &mut path, settings(6 << 20));
    let max = buffer_max(&host[RMEM]).unwrap() as f64;
    let headroom = 2.0 * path.bdp_bytes() / path.window_share;
    assert!(
        max >= 0.95 * headroom && max <= 1.5 * headroom,
        "{max} B against {headroom:.0}\n{report}"
    );
}

#[test]
fn a_sender_held_back_by_the_receivers_window_keeps_the_buffer_the_path_needs() {
    // 1 Gbit/s × 100 ms told; the receiver's window caps the flow at 345 Mbit/s (held back all
    // the time) once the send buffer allows more; below that the send buffer's window (half
    // of it, as the model's rule) over the RTT is the rate. The search grows the send buffer
    // and must not shrink it back to what 345 Mbit/s needs: the receiver may grow its window.
    let (path, rtt, rwnd_cap) = (1e9, 0.1, 345e6);
    let mut rng = Rng::new(77);
    let test = |s: &Settings| {
        let wmem = buffer_max(&s[WMEM]).unwrap() as f64;
        let by_sndbuf = wmem * 0.5 * 8.0 / rtt;
        let rate = by_sndbuf.min(rwnd_cap) * (1.0 + 0.02 * rng.normal());
        let rwnd = by_sndbuf >= rwnd_cap;
        Observation {
            rate_bps: rate,
            srtt_s: Some(rtt),
            min_rtt_s: Some(rtt),
            memory_bytes: Some(wmem as u64),
            limit: if rwnd {
                Limit::ReceiverWindow
            } else {
                Limit::SendBuffer
            },
            knobs: if rwnd { vec![] } else { vec![Knob::TcpWmemMax] },
            verdict: format!("{:.1} Mbit/s", rate / 1e6),
            rwnd_limited: Some(if rwnd { 1.0 } else { 0.0 }),
            sndbuf_limited: Some(if rwnd { 0.0 } else { 1.0 }),
            path_payload_bps: None,
            sender_cc: None,
        }
    };
    let mut cfg = Config::new(Role::Sender, TEST_S);
    cfg.path_rate_bps = Some(path);
    let (report, host) = drive_with(cfg.clone(), settings(6 << 20), test);
    assert_eq!(count(&report, Phase::Change, Outcome::Kept), 1, "{report}");
    let kept = buffer_max(&host[WMEM]).unwrap();
    let need = crate::hypothesis::buffer_need(WMEM, path, rtt, true, &host, &cfg).unwrap();
    assert!(
        kept >= need,
        "{kept} B below the path's need {need}\n{report}"
    );
}

#[test]
fn a_send_buffer_that_holds_a_steady_flow_back_unseen_by_its_chronograph_is_not_shrunk_past_it() {
    // BBR at 20 Mbit/s × 60 ms: 18 Mbit/s with a send buffer of at least 600 KB, 16.8 (7%
    // less) below it, never loss-limited, `sndbuf_limited` 0.5% either way (as measured).
    let edge = 600_000;
    let mut rng = Rng::new(91);
    let test = |s: &Settings| {
        let wmem = buffer_max(&s[WMEM]).unwrap();
        let base = if wmem >= edge { 18e6 } else { 16.8e6 };
        let rate = base * (1.0 + 0.01 * rng.normal());
        Observation {
            rate_bps: rate,
            srtt_s: Some(0.066),
            min_rtt_s: Some(0.060),
            memory_bytes: Some(wmem),
            limit: Limit::Network,
            knobs: vec![],
            verdict: format!("{:.1} Mbit/s", rate / 1e6),
            rwnd_limited: Some(0.0),
            sndbuf_limited: Some(0.005),
            path_payload_bps: None,
            sender_cc: None,
        }
    };
    let mut cfg = Config::new(Role::Sender, TEST_S);
    cfg.path_rate_bps = Some(20e6);
    let mut start = settings(6 << 20);
    start.insert(CC.into(), "bbr".into());
    start.insert(CC_AVAILABLE.into(), "reno cubic bbr".into());
    let (report, host) = drive_with(cfg, start, test);
    let kept = buffer_max(&host[WMEM]).unwrap();
    assert!(kept >= edge, "{kept} B below the edge {edge}\n{report}");
    assert!(
        count(&report, Phase::Shrink, Outcome::Kept) >= 1,
        "the 4 MiB was shrunk toward the edge\n{report}"
    );
}

#[test]
fn shrinks_stay_within_the_tolerance_of_the_unshrunk_result_not_of_the_last_shrink() {
    // Each halving of the receive buffer below 6 MiB costs 2% (no noise), the window holding
    // the flow back 30% of the time at any size (neither at its edge nor quiet). Judged
    // against the last shrink kept, 3.6% then 1.8% more would pass one by one and slide past
    // the 5% the shrink may give up.
    let start = 6u64 << 20;
    let rate = |rmem: u64| 100e6 * (1.0 - 0.02 * (start as f64 / rmem as f64).log2().max(0.0));
    let test = |s: &Settings| {
        let r = rate(buffer_max(&s[RMEM]).unwrap());
        Observation {
            rate_bps: r,
            srtt_s: Some(0.020),
            min_rtt_s: Some(0.020),
            memory_bytes: None,
            limit: Limit::Network,
            knobs: vec![],
            verdict: format!("{:.1} Mbit/s", r / 1e6),
            rwnd_limited: Some(0.3),
            sndbuf_limited: Some(0.0),
            path_payload_bps: None,
            sender_cc: None,
        }
    };
    let (report, host) = drive_with(Config::new(Role::Receiver, TEST_S), settings(start), test);
    assert!(
        count(&report, Phase::Shrink, Outcome::Kept) >= 1,
        "a shrink within 5% was kept\n{report}"
    );
    let kept = buffer_max(&host[RMEM]).unwrap();
    assert!(
        rate(kept) >= 0.95 * rate(start),
        "{kept} B gives {:.1} Mbit/s of {:.1}\n{report}",
        rate(kept) / 1e6,
        rate(start) / 1e6
    );
}

#[test]
fn a_path_already_well_tuned_keeps_no_change_in_10_of_10_noisy_runs() {
    for seed in 0..10 {
        // 100 Mbit/s × 20 ms with a buffer 1.2× the smallest sufficient, jitter and a competing
        // flow; not told the rate, so the search does try a larger buffer (the flow uses its
        // whole window) and must find it does nothing.
        let mut path = FakePath::new(300 + seed);
        path.noise = 0.08;
        path.competing = 0.15;
        let start = settings((1.2 * 2.0 * path.bdp_bytes()) as u64 / 4096 * 4096);
        let (report, host) = drive(
            Config::new(Role::Receiver, TEST_S),
            &mut path,
            start.clone(),
        );
        assert!(
            report.steps.iter().any(|s| s.phase == Phase::Change),
            "seed {seed}: a change was tried\n{report}"
        );
        assert_eq!(
            count(&report, Phase::Change, Outcome::Kept),
            0,
            "seed {seed}: {report}"
        );
        assert_eq!(host, start, "seed {seed}: {report}");
    }
}

#[test]
fn the_aa_mode_runs_one_trial_of_the_settings_against_themselves() {
    let mut called = 0;
    for seed in 0..20 {
        let mut path = FakePath::new(400 + seed);
        path.noise = 0.08;
        path.competing = 0.15;
        let mut cfg = Config::new(Role::Receiver, TEST_S);
        cfg.aa_trial = true;
        let (report, host) = drive(cfg, &mut path, settings(1 << 20));
        assert_eq!(report.steps.len(), 1, "{report}");
        assert_eq!(report.steps[0].changes[0].1, settings(1 << 20)[RMEM]);
        assert_eq!(host, settings(1 << 20));
        if report.steps[0].outcome == Outcome::Kept {
            called += 1;
        }
    }
    assert!(called <= 1, "{called} of 20 A/A trials called a difference");
}

#[test]
fn a_long_fat_path_gets_tests_long_enough_for_its_slow_start() {
    let mut path = FakePath::new(500);
    path.capacity_bps = 1e9;
    path.rtt_s = 0.100;
    let mut cfg = Config::new(Role::Receiver, 4.0);
    cfg.path_rate_bps = Some(path.capacity_bps);
    // Starting at 6 MiB, which the short test's class (here "network") does not blame: the BDP does.
    let mut obs = path.test(&settings(6 << 20));
    obs.limit = Limit::Network;
    obs.knobs.clear();
    let (h, _) = hypotheses(&obs, &settings(6 << 20), &cfg);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(buffer_max(&h[0].changes[0].1).unwrap() as f64 >= 2.0 * path.bdp_bytes());
    let (report, _) = drive(cfg, &mut path, settings(6 << 20));
    assert_eq!((report.test.time_s, report.test.omit_s), (5, 0), "{report}");
    assert_eq!(report.steps[0].outcome, Outcome::Kept, "{report}");
}

#[test]
fn a_shrink_is_judged_on_throughput_not_on_the_rtt_guardrail() {
    let mut path = FakePath::new(600);
    path.noise = 0.02;
    path.slow_rtt_below = Some(4 << 20);
    let cfg = told_receiver(&path);
    let (report, host) = drive(cfg, &mut path, settings(6 << 20));
    let first = &report.steps[0];
    assert_eq!(first.phase, Phase::Shrink, "{report}");
    assert!(
        first.b_rtt_ms.unwrap() > 1.5 * first.a_rtt_ms.unwrap(),
        "{report}"
    );
    assert_eq!(first.outcome, Outcome::Kept, "{report}");
    assert!(buffer_max(&host[RMEM]).unwrap() < 4 << 20, "{report}");
}

/// The arms of the first `n` tests a search asks for on `path`.
fn first_arms(
    cfg: Config,
    path: &mut FakePath,
    start: Settings,
    n: usize,
) -> (Vec<ArmKind>, Search) {
    let mut search = Search::new(cfg, start.clone());
    let (mut host, mut arms, mut event) = (start, Vec::new(), Event::Start);
    while arms.len() < n {
        match search.step(0.0, event) {
            Action::Write { values } => {
                host.extend(values);
                event = Event::Written;
            }
            Action::RunTest { arm } => {
                arms.push(arm);
                event = Event::Test(Box::new(path.test(&host)));
            }
            Action::Done => break,
        }
    }
    (arms, search)
}

#[test]
fn the_first_trial_starts_from_the_baseline_test_when_its_tests_are_as_long() {
    // The baseline is a test of the settings in effect, run just before the first trial: the
    // trial's first A test. Then B, and A B after.
    let (arms, search) = first_arms(
        Config::new(Role::Receiver, 4.0),
        &mut FakePath::new(4),
        settings(65536),
        4,
    );
    assert_eq!(search.test_shape().total_s(), 4.0);
    assert_eq!(arms, [Baseline, B, A, B]);
    // On a long fat path the trials' tests are longer than the baseline's: a fresh A.
    let mut lfn = FakePath::new(4);
    lfn.capacity_bps = 1e9;
    lfn.rtt_s = 0.1;
    let mut cfg = Config::new(Role::Receiver, 4.0);
    cfg.path_rate_bps = Some(lfn.capacity_bps);
    let (arms, search) = first_arms(cfg, &mut lfn, settings(65536), 2);
    assert!(
        search.test_shape().total_s() > 4.0,
        "{:?}",
        search.test_shape()
    );
    assert_eq!(arms, [Baseline, A]);
}

/// The receiver of 1 Gbit/s × 16 ms under CUBIC, as measured: with 6 MiB the tests read
/// `unshrunk` (collapses after a loss in three of four, the window holding the flow back
/// 1–2%); with 4.5 MiB 827–844 Mbit/s, the window holding it back 31% and 17% (`held`); below
/// 4 MiB the window-limited 918 of a buffer at its edge. Returns the kept maximum and the report.
fn dc_10g_receiver(unshrunk: &[f64], held: [f64; 2]) -> (u64, Report) {
    let (mut big, mut mid) = (0, 0);
    let mut cfg = Config::new(Role::Receiver, 4.0);
    cfg.path_rate_bps = Some(1e9);
    let test = |s: &Settings| {
        let rmem = buffer_max(&s[RMEM]).unwrap();
        let (rate, rwnd, limit) = if rmem >= 6 << 20 {
            big += 1;
            (unshrunk[(big - 1) % unshrunk.len()], 0.015, Limit::Network)
        } else if rmem >= 4 << 20 {
            mid += 1;
            let k = (mid - 1) % 2;
            ([826.6e6, 844.1e6][k], held[k], Limit::Network)
        } else {
            (918.2e6, 0.97, Limit::PathCapacity)
        };
        Observation {
            rate_bps: rate,
            srtt_s: Some(0.0185),
            min_rtt_s: Some(0.016),
            memory_bytes: Some(rmem + (4 << 20)),
            limit,
            knobs: vec![],
            verdict: format!("{:.1} Mbit/s", rate / 1e6),
            rwnd_limited: Some(rwnd),
            sndbuf_limited: Some(0.0),
            path_payload_bps: Some(941.5e6),
            sender_cc: None,
        }
    };
    let start = [
        (RMEM, "4096 87380 6291456".to_string()),
        (WMEM, "4096 16384 4194304".into()),
        (CC, "cubic".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let (report, host) = drive_with(cfg, start, test);
    (buffer_max(&host[RMEM]).unwrap(), report)
}

#[test]
fn a_shrink_that_binds_a_flow_short_of_the_path_is_rolled_back_though_the_rate_held() {
    // The unshrunk tests as the bench's run measured them (mean 815.4 Mbit/s): 4.5 MiB's 835
    // is within the tolerance of that mean, and it was kept; ten tests of each interleaved
    // then read a median of 842 against 878.
    let unshrunk = [887.8e6, 739.8e6, 796.8e6, 837.1e6];
    let (kept, report) = dc_10g_receiver(&unshrunk, [0.31, 0.17]);
    assert_eq!(kept, 6 << 20, "{report}");
    assert!(
        report.steps.iter().any(|s| s.outcome == Outcome::RolledBack
            && s.why.contains("a limit on a flow with room left")),
        "{report}"
    );
    // The same rates with the window quiet at 4.5 MiB: the rule above is what rolled it back.
    let (kept, report) = dc_10g_receiver(&unshrunk, [0.04, 0.03]);
    assert!(kept < 6 << 20, "{report}");
}

#[test]
fn with_room_for_one_shrink_trial_the_bracket_s_middle_goes_first_not_the_need() {
    // A receiver at 6 MiB on a path it fills, with a buffer at the model's need at its edge
    // (half the tests below 1.2× the need lose 15%) and four tests left after the baseline.
    // With the need tried first, 12 of these 20 searches shrank, 5 of them to the flaky need:
    // a miss at the need after its confirming pair left no test for the bisection.
    let need = |path: &FakePath, cfg: &Config| {
        buffer_need(
            RMEM,
            path.capacity_bps,
            path.rtt_s,
            false,
            &settings(6 << 20),
            cfg,
        )
        .unwrap()
    };
    let seeds = 700u64..720;
    let mut shrunk = 0;
    for seed in seeds.clone() {
        let mut path = FakePath::new(seed);
        path.noise = 0.01;
        let mut cfg = told_receiver(&path);
        cfg.max_tests = 5;
        path.flaky_below = Some(need(&path, &cfg) * 6 / 5);
        let (report, host) = drive(cfg.clone(), &mut path, settings(6 << 20));
        let first = report
            .steps
            .iter()
            .find(|s| s.phase == Phase::Shrink)
            .unwrap_or_else(|| panic!("seed {seed}: no shrink\n{report}"));
        assert!(
            first
                .hypothesis
                .contains("the budget has room for one trial"),
            "seed {seed}: {}",
            first.hypothesis
        );
        let max = buffer_max(&host[RMEM]).unwrap();
        assert!(
            max >= need(&path, &cfg) * 6 / 5,
            "seed {seed}: ended at the flaky {max} B\n{report}"
        );
        if max < 6 << 20 {
            shrunk += 1;
        }
    }
    assert!(shrunk >= 18, "{shrunk} of 20 searches shrank the buffer");
    // With room for a miss and the bisection after it, the need still goes first.
    let mut path = FakePath::new(720);
    let cfg = told_receiver(&path);
    let (report, _) = drive(cfg, &mut path, settings(6 << 20));
    let first = report.steps.iter().find(|s| s.phase == Phase::Shrink);
    assert!(
        first.is_some_and(|s| s.hypothesis.contains("the model's need for the best rate")),
        "{report}"
    );
}

#[test]
fn a_shrink_near_its_end_is_not_begun_without_room_for_its_confirming_pair() {
    // The receiver of the test above with five tests: the baseline, the bracket's middle kept
    // on one pair, then a candidate near its end with two tests left, which could only roll
    // back or go undecided.
    let mut path = FakePath::new(721);
    path.noise = 0.01;
    let mut cfg = told_receiver(&path);
    cfg.max_tests = 5;
    let (report, host) = drive(cfg, &mut path, settings(6 << 20));
    assert_eq!(count(&report, Phase::Shrink, Outcome::Kept), 1, "{report}");
    assert_eq!(report.steps.len(), 1, "{report}");
    assert_eq!(report.tests_used, 3, "{report}");
    assert!(report.stopped.contains("no room"), "{}", report.stopped);
    assert!(buffer_max(&host[RMEM]).unwrap() < 6 << 20);
}
