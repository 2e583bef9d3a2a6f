//! One test per defect the third wave found on ordinary traffic (loopback, bidirectional,
//! CPU-contended, `-C` other than the host's default, a stock iperf3 server): each failed on the
//! engine before its invariants, and each checks [`engine::invariants::check`] is clean.

use super::tests::{base, ctx, diagnose_samples, host_32m, run, run_with, Series};
use super::*;
use crate::advice::{HostSettings, Knob, KnownSettings};
use crate::engine::invariants::{check, Violation};
use crate::engine::{CpuScope, End};
use tcptune_kernel::SkMemInfo;
use tcptune_model::kernel::CongestionControl;

fn clean(d: &StreamDiagnosis) {
    let v: Vec<Violation> = check(&d.diagnosis());
    assert!(v.is_empty(), "{}: {v:?}", d.verdict);
}

/// A lossy sender: 2% of segments retransmitted at 5.8 Mbit/s over 20 ms.
fn lossy() -> Series {
    Series {
        snd_wnd: 4 << 20,
        rwnd_per_tick_us: 0,
        bytes_per_tick: 144_800 / 2,
        segs_retrans_per_tick: 1,
        cwnd_segs: 10,
        ..base()
    }
}

#[test]
fn a_window_that_allows_less_than_the_flow_carried_is_not_the_verdict() {
    // The bidirectional loopback case: the rwnd clock says 95%, but a 16 KiB window over the
    // 18 ms minimum RTT allows 7.3 Mbit/s and the flow carried 26 Mbit/s.
    let s = Series {
        snd_wnd: 16 << 10,
        ..base()
    };
    let d = run(&s, &ctx("100mbit"));
    assert_eq!(d.limit, Limit::ConflictingEvidence, "{}", d.verdict);
    assert!(d.verdict.contains("allows"), "{}", d.verdict);
    assert!(!d.missing.is_empty());
    assert!(
        !d.recommendations.iter().any(|r| r.knob == Knob::TcpRmemMax),
        "{:?}",
        d.recommendations
    );
    clean(&d);
}

#[test]
fn the_window_bound_is_over_the_minimum_rtt_so_it_is_a_bound() {
    // `-w 256K` on loopback: srtt 708 µs under load, min RTT 10 µs, 45.6 Gbit/s carried. Over
    // the loaded RTT the window "allowed" 5.82 Gbit/s and the test "reached 783%" of it.
    let s = Series {
        snd_wnd: 503 << 10,
        rtt_us: 708,
        bytes_per_tick: 570_000_000,
        rwnd_per_tick_us: 0,
        ..base()
    };
    let mut samples = s.samples(100);
    for x in &mut samples {
        x.info.min_rtt_us = Some(10);
    }
    let d = diagnose_stream(
        &StreamInput {
            id: 1,
            sender: &samples,
            receiver: &[],
            received_bytes: 570_000_000 * 100,
            seconds: Dur::from_secs_f64(10.0),
            cpu: &[],
        },
        &Context::default(),
    );
    let w = d.bounds.iter().find(|b| b.model == "window/RTT").unwrap();
    assert!(w.inputs.contains("min RTT 10 µs"), "{}", w.inputs);
    assert!(w.achieved_fraction <= 1.0, "{w:?}");
    clean(&d);
}

#[test]
fn a_receiver_with_unread_data_in_a_large_buffer_gets_no_larger_buffer() {
    // The bidirectional loopback case: a 30 MiB receive buffer advertising 383 KiB (the data
    // sat unread) got "raise tcp_rmem's maximum from 32 MiB to 59.9 MiB".
    let s = Series {
        snd_wnd: 383 << 10,
        rtt_us: 700,
        cwnd_segs: 4000,
        unacked: 260,
        bytes_per_tick: 40_000_000, // 3.2 Gbit/s, under the window's bound over the min RTT
        rwnd_per_tick_us: 60_000,
        ..base()
    };
    let sender = s.samples(100);
    let mut receiver = s.samples(100);
    for x in &mut receiver {
        x.info.bytes_received = x.info.bytes_acked;
        x.info.bytes_sent = Some(0);
        x.skmem = Some(SkMemInfo {
            rcvbuf: 30 << 20,
            ..SkMemInfo::default()
        });
    }
    let c = Context {
        settings: KnownSettings {
            sender: Some(host_32m()),
            receiver: Some(host_32m()),
        },
        ..Context::default()
    };
    let d = diagnose_stream(
        &StreamInput {
            id: 1,
            sender: &sender,
            receiver: &receiver,
            received_bytes: 40_000_000 * 100,
            seconds: Dur::from_secs_f64(10.0),
            cpu: &[],
        },
        &c,
    );
    assert_eq!(d.limit, Limit::ReceiverWindow, "{}", d.verdict);
    let knobs: Vec<Knob> = d.recommendations.iter().map(|r| r.knob).collect();
    assert!(!knobs.contains(&Knob::TcpRmemMax), "{knobs:?}");
    assert!(knobs.contains(&Knob::ReceiverReads), "{knobs:?}");
    clean(&d);
}

/// A sender whose socket often had nothing queued and cwnd room: app-limited samples.
fn starved() -> Series {
    Series {
        snd_wnd: 4 << 20,
        rwnd_per_tick_us: 0,
        busy_per_tick_us: 50_000,
        bytes_per_tick: 1_000_000,
        notsent: 0,
        unacked: 10,
        app_limited: true,
        ..base()
    }
}

#[test]
fn the_tests_own_bulk_sender_is_never_application_limited() {
    let paced = run(&starved(), &Context::default());
    assert_eq!(paced.limit, Limit::Application, "{}", paced.verdict);
    let bulk = Context {
        bulk_sender: true,
        ..Context::default()
    };
    let d = run(&starved(), &bulk);
    assert_eq!(d.limit, Limit::ConflictingEvidence, "{}", d.verdict);
    assert!(
        d.verdict.contains("fell behind its socket"),
        "{}",
        d.verdict
    );
    assert!(!d.problem, "conflicting evidence names no fix");
    clean(&d);
    // A host kept fully busy (another job on the other core) explains it: CPU.
    let host = [CpuUse {
        end: End::BothEnds,
        scope: CpuScope::Host,
        percent: 99.0,
        cores: 1.0,
        softirq_percent: Some(10.0),
        wait_percent: None,
    }];
    let d = run_with(&starved(), &bulk, &host);
    assert_eq!(d.limit, Limit::Cpu, "{}", d.verdict);
    clean(&d);
}

#[test]
fn a_process_that_waited_for_a_cpu_is_cpu_bound_though_it_ran_under_the_threshold() {
    // 70% running and 25% waiting on a run queue: it wanted the CPU 95% of the time.
    let mk = |wait| {
        [CpuUse {
            end: End::Sender,
            scope: CpuScope::Process,
            percent: 70.0,
            cores: 1.0,
            softirq_percent: None,
            wait_percent: wait,
        }]
    };
    let bulk = Context {
        bulk_sender: true,
        ..Context::default()
    };
    let d = run_with(&starved(), &bulk, &mk(Some(25.0)));
    assert_eq!(d.limit, Limit::Cpu, "{}", d.verdict);
    assert!(d.verdict.contains("waited 25%"), "{}", d.verdict);
    let d = run_with(&starved(), &bulk, &mk(Some(2.0)));
    assert_ne!(d.limit, Limit::Cpu, "{}", d.verdict);
    // A busy host alone is not our process's limit where the process was measured.
    let host = CpuUse {
        end: End::BothEnds,
        scope: CpuScope::Host,
        percent: 100.0,
        cores: 1.0,
        softirq_percent: None,
        wait_percent: None,
    };
    let d = run_with(&base(), &Context::default(), &[mk(None)[0], host]);
    assert_eq!(d.limit, Limit::ReceiverWindow, "{}", d.verdict);
}

#[test]
fn congestion_control_advice_follows_what_the_flow_ran_not_the_host_default() {
    let host_bbr = KnownSettings {
        sender: Some(host_32m()),
        receiver: None,
    };
    // `-C cubic` on a lossy path while the host default is bbr: advice, not "in effect".
    let cubic = Context {
        congestion: Some(CongestionControl::Cubic),
        settings: host_bbr.clone(),
        ..ctx("100mbit")
    };
    let d = run(&lossy(), &cubic);
    assert_eq!(d.limit, Limit::Loss, "{}", d.verdict);
    let cc = d
        .recommendations
        .iter()
        .find(|r| r.knob == Knob::CongestionControl)
        .expect("a congestion-control recommendation");
    assert_eq!(cc.current.as_deref(), Some("cubic"));
    assert!(
        cc.change.contains("let the application use the default"),
        "{}",
        cc.change
    );
    assert_eq!(cc.command, None, "the sysctl is already bbr");
    clean(&d);
    // The flow ran bbr on a host whose default is cubic: never "try bbr".
    let host_cubic = KnownSettings {
        sender: Some(HostSettings {
            congestion_control: Some("cubic".into()),
            ..host_32m()
        }),
        receiver: None,
    };
    let bbr = Context {
        congestion: Some(CongestionControl::Bbr),
        settings: host_cubic,
        ..ctx("100mbit")
    };
    let d = run(&lossy(), &bbr);
    assert!(
        !d.recommendations
            .iter()
            .any(|r| r.knob == Knob::CongestionControl),
        "{:?}",
        d.recommendations
    );
    clean(&d);
}

#[test]
fn loss_models_are_not_shown_as_bounds_for_bbr() {
    let bbr = Context {
        congestion: Some(CongestionControl::Bbr),
        ..ctx("100mbit")
    };
    let d = run(&lossy(), &bbr);
    assert!(
        !d.bounds
            .iter()
            .any(|b| b.model == "Mathis" || b.model == "PFTK"),
        "{:?}",
        d.bounds
    );
    let n = &d.bounds_not_shown[0];
    assert_eq!(n.model, "Mathis, PFTK");
    assert!(n.why.contains("bbr"), "{}", n.why);
    assert!(!d.verdict.contains("Mathis"), "{}", d.verdict);
    clean(&d);
}

#[test]
fn cpu_advice_names_only_what_the_flow_did_not_have() {
    let cpu = [CpuUse {
        end: End::Sender,
        scope: CpuScope::Process,
        percent: 99.0,
        cores: 1.0,
        softirq_percent: None,
        wait_percent: None,
    }];
    let bulk = |cores, zerocopy, write| Context {
        bulk_sender: true,
        streams: 2,
        cores: Some(cores),
        zerocopy,
        write_bytes: Some(write),
        ..Context::default()
    };
    // -P 2 on a 2-core host, -l 128 KiB, -Z: none of the three is advice.
    let d = run_with(&starved(), &bulk(2, true, 128 << 10), &cpu);
    assert_eq!(d.limit, Limit::Cpu, "{}", d.verdict);
    let advice = &d.recommendations[0].change;
    for opt in ["(-P)", "(-l)", "(-Z)"] {
        assert!(!advice.contains(opt), "{advice}");
    }
    clean(&d);
    // Spare cores, small writes, no zero copy: all three are.
    let d = run_with(&starved(), &bulk(8, false, 8 << 10), &cpu);
    let advice = &d.recommendations[0].change;
    for opt in ["(-P)", "(-l)", "(-Z)"] {
        assert!(advice.contains(opt), "{advice}");
    }
    clean(&d);
}

#[test]
fn a_window_limit_against_a_stock_server_names_tcp_rmem_without_the_path_rate() {
    // No --path-rate and no receiver samples (iperf3 -s sends none): the knob and a size the
    // window shows is too small are still known.
    let d = run(&base(), &Context::default());
    assert_eq!(d.limit, Limit::ReceiverWindow, "{}", d.verdict);
    let r = d
        .recommendations
        .iter()
        .find(|r| r.knob == Knob::TcpRmemMax)
        .expect("tcp_rmem named");
    assert_eq!(r.on, "the receiver");
    assert_eq!(
        r.proposed.as_deref(),
        Some("262144"),
        "4 × the 64 KiB window"
    );
    assert_eq!(r.command, None, "the remote's current value is unknown");
    clean(&d);
}

#[test]
fn each_direction_of_a_bidirectional_test_is_judged_and_summed_apart() {
    let mut fwd = Vec::new();
    for id in [1, 3] {
        let mut d = run(&base(), &ctx("100mbit"));
        d.id = id;
        fwd.push(d);
    }
    let rev_series = Series {
        bytes_per_tick: 100_000,
        ..lossy()
    };
    let mut rev = run(&rev_series, &ctx("100mbit"));
    rev.id = 2;
    let rev_rate = rev.achieved_bps.bps();
    let c = Context {
        streams: 2,
        ..ctx("100mbit")
    };
    let t = diagnose_bidir(fwd, vec![rev], &c, &ctx("100mbit"));
    let fwd_sum: f64 = t.streams.iter().map(|s| s.achieved_bps.bps()).sum();
    assert!((t.achieved_bps.bps() - fwd_sum).abs() < 1.0);
    assert!(t.verdict.contains("over 2 streams"), "{}", t.verdict);
    let r = t.reverse.as_deref().unwrap();
    assert!((r.achieved_bps.bps() - rev_rate).abs() < 1.0);
    assert_eq!(r.streams.len(), 1);
    let text = t.to_string();
    assert!(text.contains("Diagnosis (the server sending)"), "{text}");
    for s in t.streams.iter().chain(&r.streams) {
        clean(s);
    }
}

#[test]
fn the_check_catches_each_broken_promise() {
    let mut d = run(&lossy(), &ctx("100mbit")).diagnosis();
    assert!(check(&d).is_empty());
    // A bound reached 5×.
    let mut b = d.bounds[0].clone();
    b.achieved_fraction = 5.0;
    d.bounds.push(b);
    // The bulk sender called application limited.
    d.limit = Limit::Application;
    d.in_effect.bulk_sender = true;
    // A knob twice, and the flow's own congestion control recommended.
    let r = d.recommendations[0].clone();
    d.recommendations.push(r);
    d.in_effect.congestion = Some("bbr".into());
    d.recommendations.push(crate::advice::Recommendation {
        on: "the sender".into(),
        change: "try bbr".into(),
        command: None,
        knob: Knob::CongestionControl,
        current: None,
        proposed: Some("bbr".into()),
    });
    let rules: Vec<String> = check(&d).into_iter().map(|v| v.rule).collect();
    for want in [
        "bound_exceeded",
        "bulk_sender_application",
        "advice_twice",
        "advice_in_effect",
    ] {
        assert!(rules.iter().any(|r| r == want), "{want} not in {rules:?}");
    }
}

#[test]
fn on_loopback_a_network_limit_is_the_cpu() {
    // A cwnd/pacing-limited series (no window, no send buffer, no loss).
    let s = Series {
        snd_wnd: 4 << 20,
        rwnd_per_tick_us: 0,
        cwnd_segs: 60,
        unacked: 58,
        ..base()
    };
    let d = run(&s, &Context::default());
    assert_eq!(d.limit, Limit::Network, "{}", d.verdict);
    let lo = Context {
        loopback: true,
        ..Context::default()
    };
    let d = run(&s, &lo);
    assert_eq!(d.limit, Limit::Cpu, "{}", d.verdict);
    assert!(
        d.verdict.contains("on loopback there is no network"),
        "{}",
        d.verdict
    );
    clean(&d);
}

#[test]
fn a_bulk_reader_that_read_slowly_fell_behind() {
    // The loopback CPU-bound case: a 58 KiB window over a 5 µs minimum RTT allows 95 Gbit/s,
    // 4.9 Gbit/s arrived, the rwnd clock says 71%.
    let s = Series {
        snd_wnd: 58 << 10,
        rtt_us: 100,
        bytes_per_tick: 61_000_000,
        rwnd_per_tick_us: 71_000,
        ..base()
    };
    let mut samples = s.samples(100);
    for x in &mut samples {
        x.info.min_rtt_us = Some(5);
    }
    let judge = |ctx: &Context, cpu: &[CpuUse]| {
        diagnose_stream(
            &StreamInput {
                id: 1,
                sender: &samples,
                receiver: &[],
                received_bytes: 61_000_000 * 100,
                seconds: Dur::from_secs_f64(10.0),
                cpu,
            },
            ctx,
        )
    };
    let d = judge(&Context::default(), &[]);
    assert_eq!(d.limit, Limit::ReceiverWindow, "{}", d.verdict);
    let test = Context {
        bulk_receiver: true,
        loopback: true,
        ..Context::default()
    };
    let d = judge(&test, &[]);
    assert_eq!(d.limit, Limit::ConflictingEvidence, "{}", d.verdict);
    assert!(
        d.verdict.contains("fell behind its socket"),
        "{}",
        d.verdict
    );
    clean(&d);
    let host = [CpuUse {
        end: End::BothEnds,
        scope: CpuScope::Host,
        percent: 100.0,
        cores: 1.0,
        softirq_percent: None,
        wait_percent: None,
    }];
    let d = judge(&test, &host);
    assert_eq!(d.limit, Limit::Cpu, "{}", d.verdict);
    clean(&d);
}

#[test]
fn the_verdict_and_the_advice_blame_the_same_thing() {
    // A veth-like path: min RTT 10 µs, the flow's RTT 2 ms, a 64 KiB window at 1 Gbit/s. The
    // window covers the BDP at the minimum RTT (1.25 KB) but not at the flow's (250 KB): the
    // buffer held it, and the verdict must not call the reader slow while the advice raises
    // tcp_rmem (it once did).
    let s = Series {
        snd_wnd: 64 << 10,
        rtt_us: 2_000,
        bytes_per_tick: 3_276_800,
        ..base()
    };
    let mut samples = s.samples(100);
    for x in &mut samples {
        x.info.min_rtt_us = Some(10);
    }
    let d = diagnose_samples(&samples, &ctx("1gbit"), &[]);
    assert_eq!(d.limit, Limit::ReceiverWindow, "{}", d.verdict);
    assert!(!d.verdict.contains("reads slowly"), "{}", d.verdict);
    assert!(d.verdict.contains("< BDP"), "{}", d.verdict);
    let knobs: Vec<Knob> = d.recommendations.iter().map(|r| r.knob).collect();
    assert!(knobs.contains(&Knob::TcpRmemMax), "{knobs:?}");
    assert!(!knobs.contains(&Knob::ReceiverReads), "{knobs:?}");
    clean(&d);

    // A 4 MiB window on 100 Mbit/s × 20 ms (BDP 250 KB), closed 95% of the time at 2 Mbit/s:
    // the reader held it, in the verdict and in the advice alike.
    let s = Series {
        snd_wnd: 4 << 20,
        bytes_per_tick: 25_000,
        unacked: 17,
        ..base()
    };
    let d = run(&s, &ctx("100mbit"));
    assert_eq!(d.limit, Limit::ReceiverWindow, "{}", d.verdict);
    assert!(d.verdict.contains("reads slowly"), "{}", d.verdict);
    let knobs: Vec<Knob> = d.recommendations.iter().map(|r| r.knob).collect();
    assert!(knobs.contains(&Knob::ReceiverReads), "{knobs:?}");
    assert!(!knobs.contains(&Knob::TcpRmemMax), "{knobs:?}");
    clean(&d);
}

#[test]
fn the_invariant_check_finds_a_verdict_that_blames_the_reader_beside_buffer_advice() {
    let s = Series {
        snd_wnd: 4 << 20,
        bytes_per_tick: 25_000,
        unacked: 17,
        ..base()
    };
    let mut d = run(&s, &ctx("100mbit")).diagnosis();
    let mut raise = d.recommendations[0].clone();
    raise.knob = Knob::TcpRmemMax;
    d.recommendations.push(raise);
    let rules: Vec<String> = check(&d).into_iter().map(|v| v.rule).collect();
    assert!(rules.contains(&"verdict_advice".to_string()), "{rules:?}");
}

#[test]
fn a_window_that_grew_during_the_flow_bounds_it_by_its_largest_value() {
    // The Web100 seed's untuned receiver: a 64 KiB window most of the time and 128 KiB for
    // the last 40%, so the median (64 KiB over 20 ms: 26 Mbit/s) is below the 37 Mbit/s the
    // flow carried. The window held it all along; the largest window is its bound, and the
    // verdict is the window's, not conflicting evidence.
    let s = Series {
        bytes_per_tick: 458_752,
        ..base()
    };
    let mut samples = s.samples(100);
    for x in samples.iter_mut().skip(60) {
        x.info.snd_wnd = Some(128 << 10);
    }
    let d = diagnose_samples(&samples, &ctx("1gbit"), &[]);
    assert_eq!(d.limit, Limit::ReceiverWindow, "{}", d.verdict);
    clean(&d);
}
