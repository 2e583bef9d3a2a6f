//! `test`, `audit --to` and `tune` recommend the same `tcp_rmem`/`tcp_wmem` maxima for the same
//! path and flow count: each calls its library with the same inputs, as the commands do (`test`
//! its engine with `--path-rate` and the measured RTT; `audit --to` the audit with the RTT ping
//! measured; `tune` plans from that audit), over LAN, WAN and long fat paths, 1 and 4 flows,
//! cubic and bbr, a kernel before 6.6 and one after.

use std::collections::BTreeMap;

use tcptune_diagnose::advice::{advise, HostSettings, InEffect, Knob, KnownSettings};
use tcptune_diagnose::engine::{self, Evidence};
use tcptune_diagnose::{Context, Limit};
use tcptune_host::audit::{audit, AuditInput, Role};
use tcptune_host::{tune, HostState};
use tcptune_model::kernel::{CongestionControl, KernelSource, KernelVersion};
use tcptune_model::{Bytes, Dur, Rate};

const RMEM: &str = "net.ipv4.tcp_rmem";
const WMEM: &str = "net.ipv4.tcp_wmem";

/// One path as all three commands are told it.
#[derive(Debug, Clone, Copy)]
struct Case {
    rate: &'static str,
    rtt: &'static str,
    flows: u32,
    cc: CongestionControl,
    kernel: KernelVersion,
}

/// A host with the given buffer maximum in both tcp_rmem and tcp_wmem.
fn host(case: &Case, max: u64) -> HostState {
    let sysctls: BTreeMap<String, String> = [
        (RMEM, format!("4096 16384 {max}")),
        (WMEM, format!("4096 16384 {max}")),
        ("net.ipv4.tcp_congestion_control", case.cc.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    HostState {
        kernel: Some(case.kernel),
        sysctls,
        page_size: 4096,
        ..HostState::default()
    }
}

/// The third field of a tcp_rmem/tcp_wmem value.
fn max_of(value: &str) -> u64 {
    value.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// `test`'s recommended maxima for a flow its engine found window-limited (receive side) and
/// send-buffer-limited (send side) on `case`'s path, against `state`'s settings at both ends.
fn test_recommends(case: &Case, state: &HostState, fit: bool) -> (Option<u64>, Option<u64>) {
    let settings = HostSettings::from_sysctls(|k| state.sysctl(k).map(str::to_string));
    let ctx = Context {
        path_rate: Some(case.rate.parse().unwrap()),
        congestion: Some(case.cc),
        kernel: case.kernel,
        kernel_source: KernelSource::Given,
        streams: case.flows,
        settings: KnownSettings {
            sender: Some(settings.clone()),
            receiver: Some(settings),
        },
        fit,
        ..Context::default()
    };
    // The flow's own figures: the path's RTT, small buffers, and a window short of the BDP.
    let e = Evidence {
        rtt_s: Some(case.rtt.parse().unwrap()),
        receiver_buffer_bytes: Some(16_384),
        send_buffer_bytes: Some(16_384),
        peer_window_bytes: Some(4_096),
        ..Evidence::default()
    };
    let mut needs = engine::needs(Limit::ReceiverWindow, &e, &ctx);
    needs.extend(engine::needs(Limit::SendBuffer, &e, &ctx));
    let recs = advise(&needs, &InEffect::of(&ctx));
    let proposed = |knob: Knob| {
        recs.iter()
            .find(|r| r.knob == knob)
            .map(|r| r.proposed.as_deref().unwrap().parse().unwrap())
    };
    (proposed(Knob::TcpRmemMax), proposed(Knob::TcpWmemMax))
}

/// `audit`'s and `tune`'s recommended maxima for the same path, flows and host.
fn audit_and_tune_recommend(
    case: &Case,
    state: &HostState,
    fit: bool,
) -> [(Option<u64>, Option<u64>); 2] {
    let input = AuditInput {
        rate_bps: case.rate.parse::<Rate>().unwrap(),
        rtt_s: case.rtt.parse::<Dur>().unwrap(),
        loss: None,
        flows: case.flows,
        memory_budget_bytes: None,
        role: Role::Both,
        fit,
    };
    let a = audit(state, &input);
    let finding = |key: &str| {
        a.changes()
            .find(|f| f.setting == key)
            .map(|f| max_of(f.recommended.as_deref().unwrap()))
    };
    let plan = tune::plan(&a).unwrap();
    let planned = |key: &str| {
        plan.changes.iter().find_map(|c| match &c.action {
            tcptune_host::audit::Action::Sysctl { key: k, value, .. } if k == key => {
                // The drop-in `tune --write` installs says the same.
                assert!(
                    plan.dropin.contains(&format!("{key} = {value}")),
                    "{}",
                    plan.dropin
                );
                Some(max_of(value))
            }
            _ => None,
        })
    };
    [
        (finding(RMEM), finding(WMEM)),
        (planned(RMEM), planned(WMEM)),
    ]
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (rate, rtt) in [("1gbit", "0.2ms"), ("100mbit", "40ms"), ("10gbit", "100ms")] {
        for flows in [1, 4] {
            for cc in [CongestionControl::Cubic, CongestionControl::Bbr] {
                for kernel in [KernelVersion::new(6, 1), KernelVersion::new(6, 18)] {
                    out.push(Case {
                        rate,
                        rtt,
                        flows,
                        cc,
                        kernel,
                    });
                }
            }
        }
    }
    out
}

#[test]
fn test_audit_and_tune_raise_short_maxima_to_the_same_values() {
    for case in cases() {
        // 32 KiB: short of every path's need, so every command raises both maxima.
        let state = host(&case, 32_768);
        let test = test_recommends(&case, &state, false);
        let [audit, tune] = audit_and_tune_recommend(&case, &state, false);
        assert!(test.0.is_some() && test.1.is_some(), "{case:?}: {test:?}");
        assert_eq!(test, audit, "{case:?}: test vs audit");
        assert_eq!(audit, tune, "{case:?}: audit vs tune");
        // A value a person writes: whole 64 KiB steps (whole MiB above 4 MiB).
        for v in [test.0.unwrap(), test.1.unwrap()] {
            assert_eq!(v % 65_536, 0, "{case:?}: {v}");
            assert!(v <= 4 << 20 || v % (1 << 20) == 0, "{case:?}: {v}");
        }
    }
}

#[test]
fn none_lowers_a_larger_maximum_unasked_and_all_fit_it_alike_when_asked() {
    for case in cases() {
        // 1 GiB: above every path's need.
        let state = host(&case, 1 << 30);
        assert_eq!(
            test_recommends(&case, &state, false),
            (None, None),
            "{case:?}"
        );
        let [audit, tune] = audit_and_tune_recommend(&case, &state, false);
        assert_eq!((audit, tune), ((None, None), (None, None)), "{case:?}");
        // --fit: the one asked case; all three name the same fitted maxima.
        let test = test_recommends(&case, &state, true);
        let [audit, tune] = audit_and_tune_recommend(&case, &state, true);
        assert!(test.0.is_some_and(|v| v < 1 << 30), "{case:?}: {test:?}");
        assert_eq!(test, audit, "{case:?}: test --fit vs audit --fit");
        assert_eq!(audit, tune, "{case:?}: audit --fit vs tune --fit");
    }
    // The sample the README's figures follow: 1 Gbit/s × 100 ms on 6.18, one cubic flow.
    let case = Case {
        rate: "1gbit",
        rtt: "100ms",
        flows: 1,
        cc: CongestionControl::Cubic,
        kernel: KernelVersion::new(6, 18),
    };
    let want = Bytes::new(24 << 20).get();
    assert_eq!(
        test_recommends(&case, &host(&case, 65_536), false),
        (Some(want), Some(want))
    );
}
