//! Every audit rule on recorded host states (fixtures/host/): what it finds, what it
//! recommends, and that it stays quiet where nothing needs changing.

use std::path::PathBuf;

use tcptune_host::audit::{audit, Action, Audit, AuditInput, Role, Verdict};
use tcptune_host::{tune, HostState};
use tcptune_model::{Bytes, Dur, Probability, Rate};

fn state(name: &str) -> HostState {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/host")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn input(rate: &str, rtt: &str) -> AuditInput {
    AuditInput {
        rate_bps: rate.parse::<Rate>().unwrap(),
        rtt_s: rtt.parse::<Dur>().unwrap(),
        loss: None,
        flows: 1,
        memory_budget_bytes: None,
        role: Role::Both,
        fit: false,
    }
}

fn finding<'a>(a: &'a Audit, setting: &str) -> &'a tcptune_host::audit::Finding {
    a.findings
        .iter()
        .find(|f| f.setting == setting)
        .unwrap_or_else(|| panic!("no finding for {setting}: {:#?}", a.findings))
}

fn changed_keys(a: &Audit) -> Vec<String> {
    let mut v: Vec<String> = a
        .changes()
        .filter_map(|f| match &f.action {
            Some(Action::Sysctl { key, .. }) => Some(key.clone()),
            Some(Action::Txqueuelen { dev, .. }) => Some(format!("dev:{dev}")),
            None => None,
        })
        .collect();
    v.sort();
    v
}

#[test]
fn seed_000_home_lan_and_dsl_need_nothing() {
    // Seed 000: "no gain where default buffers exceed BDP". An old distro's defaults carry a
    // 1 Gbit/s × 0.12 ms LAN and a 10 Mbit/s DSL line without any change.
    for (rate, rtt) in [("1gbit", "0.12ms"), ("10mbit", "20ms")] {
        let a = audit(&state("old-distro-4.15.json"), &input(rate, rtt));
        assert!(!a.needs_attention(), "{rate}/{rtt}: {a}");
        assert!(
            a.summary.starts_with("Nothing needs changing"),
            "{}",
            a.summary
        );
    }
}

#[test]
fn receive_and_send_buffers_follow_the_bdp() {
    // 1 Gbit/s × 100 ms: BDP 12.5 MB. A 4.15 kernel advertises half the buffer (adv_win_scale
    // 1), so the receive maximum must be at least 25 MB; the sender (cubic) needs 2×BDP.
    let a = audit(&state("old-distro-4.15.json"), &input("1gbit", "100ms"));
    assert_eq!(a.bdp_bytes, Bytes::new(12_500_000));
    let r = finding(&a, "net.ipv4.tcp_rmem");
    assert_eq!(r.verdict, Verdict::Change);
    let rec: Vec<u64> = r
        .recommended
        .as_ref()
        .unwrap()
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(
        &rec[..2],
        &[4096, 87380],
        "min and default stay as they were"
    );
    assert!(rec[2] >= 25_000_000 && rec[2] <= 26_000_000, "{rec:?}");
    assert!(
        r.why.contains("6 MiB") && r.why.contains("Mbit/s"),
        "{}",
        r.why
    );
    let w = finding(&a, "net.ipv4.tcp_wmem");
    assert_eq!(w.verdict, Verdict::Change);
    // The datacenter path (BDP 1.98 MB) fits in the same defaults.
    let dc = audit(&state("old-distro-4.15.json"), &input("10gbit", "1.58ms"));
    assert_eq!(finding(&dc, "net.ipv4.tcp_rmem").verdict, Verdict::Fine);
}

#[test]
fn kernels_before_6_6_use_adv_win_scale() {
    let mut s = state("old-distro-4.15.json");
    s.sysctls
        .insert("net.ipv4.tcp_adv_win_scale".into(), "2".into()); // window = 3/4 of buffer
    let a = audit(&s, &input("1gbit", "100ms"));
    let need = a.rmem_needed_bytes.get() as f64;
    assert!(
        (12.5e6 / 0.75..12.5e6 / 0.75 + 1048576.0).contains(&need),
        "{need}"
    );
}

#[test]
fn flows_share_the_path_and_a_budget_caps_them() {
    let mut i = input("10gbit", "100ms");
    i.flows = 8;
    i.memory_budget_bytes = Some("64MiB".parse().unwrap());
    i.role = Role::Receiver;
    let a = audit(&state("old-distro-4.15.json"), &i);
    assert_eq!(a.flow_bdp_bytes, Bytes::new(15_625_000));
    let r = finding(&a, "net.ipv4.tcp_rmem");
    // Each of 8 flows needs 2 × 15.6 MB; the budget allows 8 MiB each, above the current 6 MiB,
    // so the maximum rises to the budget's share and the finding says the path cannot be filled.
    assert_eq!(r.verdict, Verdict::Change);
    assert_eq!(r.recommended.as_deref(), Some("4096 87380 8388608"));
    assert!(r.why.contains("memory budget"), "{}", r.why);
    // A sender-only audit has no receive-buffer finding.
    i.role = Role::Sender;
    let a = audit(&state("old-distro-4.15.json"), &i);
    assert!(a.findings.iter().all(|f| f.setting != "net.ipv4.tcp_rmem"));
}

#[test]
fn too_many_flows_for_tcp_mem_is_a_warning() {
    // Buffers for all flows together scale with the path's BDP: 40 Gbit/s × 100 ms = 500 MB,
    // about 2 GB of receive and send buffers, twice tcp_mem's pressure threshold here.
    let mut i = input("40gbit", "100ms");
    i.flows = 4;
    let a = audit(&state("old-distro-4.15.json"), &i);
    let m = finding(&a, "net.ipv4.tcp_mem");
    assert_eq!(m.verdict, Verdict::Warning);
    assert!(m.why.contains("pressure"), "{}", m.why);
}

#[test]
fn a_path_beyond_one_window_needs_parallel_flows() {
    let a = audit(&state("old-distro-4.15.json"), &input("100gbit", "100ms"));
    let f = finding(&a, "flows");
    assert_eq!(f.verdict, Verdict::Warning);
    assert_eq!(f.recommended.as_deref(), Some("2"));
}

#[test]
fn the_mistuned_host_gets_every_pitfall_named() {
    let mut i = input("1gbit", "100ms");
    i.loss = Some("0.1%".parse::<Probability>().unwrap());
    let a = audit(&state("mistuned-6.1.json"), &i);
    assert_eq!(
        changed_keys(&a),
        [
            "dev:eth0",
            "net.core.rmem_max",
            "net.ipv4.tcp_congestion_control",
            "net.ipv4.tcp_moderate_rcvbuf",
            "net.ipv4.tcp_mtu_probing",
            "net.ipv4.tcp_retries2",
            "net.ipv4.tcp_rmem",
            "net.ipv4.tcp_sack",
            "net.ipv4.tcp_timestamps",
            "net.ipv4.tcp_window_scaling",
            "net.ipv4.tcp_wmem",
        ]
    );
    // Window scaling off: 64 KiB over 100 ms is 5.2 Mbit/s.
    assert!(finding(&a, "net.ipv4.tcp_window_scaling")
        .why
        .contains("5.243 Mbit/s"));
    // The SO_RCVBUF application is named with its process.
    let sock = a
        .findings
        .iter()
        .find(|f| f.rule == "R5" && f.setting.starts_with("socket"))
        .unwrap();
    assert!(sock.why.contains("backupd (pid 812)"), "{}", sock.why);
    // Obsolete knob in sysctl.d, with file and line.
    let tw = finding(&a, "net.ipv4.tcp_tw_recycle");
    assert_eq!(tw.verdict, Verdict::Warning);
    assert!(tw.current.contains("99-speed.conf:3"));
    // A running value the boot files will overwrite.
    assert!(a
        .findings
        .iter()
        .any(|f| f.rule == "boot" && f.setting == "net.ipv4.tcp_sack"));
    // Route ssthresh that the kernel ignores.
    assert!(a.findings.iter().any(|f| f.rule == "R21"));
    // Cubic under 0.1% loss at 100 ms: Mathis bound far below 1 Gbit/s, bbr is available.
    let cc = finding(&a, "net.ipv4.tcp_congestion_control");
    assert_eq!(cc.recommended.as_deref(), Some("bbr"));
}

#[test]
fn the_send_buffers_rate_uses_the_factor_its_size_was_sized_with() {
    // With bbr the sender needs 3× the BDP of send buffer; the rate the current maximum allows
    // is that maximum over the same 3, not over 2. 100 Mbit/s × 100 ms: BDP 1.25 MB.
    let mut s = state("old-distro-4.15.json");
    s.sysctls
        .insert("net.ipv4.tcp_congestion_control".into(), "bbr".into());
    s.sysctls
        .insert("net.ipv4.tcp_wmem".into(), "4096 16384 3000000".into());
    for (cc, factor) in [("bbr", 3), ("cubic", 2)] {
        s.sysctls
            .insert("net.ipv4.tcp_congestion_control".into(), cc.into());
        let a = audit(&s, &input("100mbit", "100ms"));
        let w = finding(&a, "net.ipv4.tcp_wmem");
        if factor == 2 {
            // 2 × 1.25 MB fits under 3 MB.
            assert_eq!(w.verdict, Verdict::Fine, "{}", w.why);
            continue;
        }
        assert_eq!(w.verdict, Verdict::Change, "{}", w.why);
        assert!(w.why.contains("3× the BDP"), "{}", w.why);
        let bound = Rate::from_bytes_per(Bytes::new(3_000_000 / factor), "100ms".parse().unwrap());
        assert!(
            w.why.contains(&format!("holds one flow to about {bound}")),
            "{}",
            w.why
        );
    }
}

#[test]
fn bbr_on_old_kernels_wants_fq() {
    let mut s = state("old-distro-4.15.json");
    s.sysctls
        .insert("net.ipv4.tcp_congestion_control".into(), "bbr".into());
    let a = audit(&s, &input("1gbit", "20ms"));
    assert_eq!(finding(&a, "net.ipv4.tcp_congestion_control").rule, "R11");
    s.kernel = Some(tcptune_host::state::KernelVersion::new(4, 9));
    let a = audit(&s, &input("1gbit", "20ms"));
    assert_eq!(finding(&a, "net.ipv4.tcp_congestion_control").rule, "R10");
    s.interfaces[1].qdisc = "fq".into();
    let a = audit(&s, &input("1gbit", "20ms"));
    assert_eq!(
        finding(&a, "net.ipv4.tcp_congestion_control").verdict,
        Verdict::Fine
    );
}

#[test]
fn in_a_namespace_global_settings_go_to_the_host_and_boot_files_are_ignored() {
    let mut s = state("mistuned-6.1.json");
    s.netns = Some("lab".into());
    let a = audit(&s, &input("1gbit", "100ms"));
    assert!(a
        .findings
        .iter()
        .all(|f| f.rule != "R25" && f.rule != "boot"));
    let plan = tune::plan(&a).unwrap();
    assert!(plan
        .host_only
        .iter()
        .any(|c| matches!(&c.action, Action::Sysctl { key, .. } if key == "net.core.rmem_max")));
    assert!(plan
        .changes
        .iter()
        .all(|c| !matches!(&c.action, Action::Sysctl { global: true, .. })));
    assert!(plan.ip_commands.iter().all(|c| c.starts_with("ip -n lab ")));
}

#[test]
fn the_drop_in_lists_each_change_with_the_value_it_replaces() {
    let a = audit(&state("mistuned-6.1.json"), &input("1gbit", "100ms"));
    let plan = tune::plan(&a).unwrap();
    assert!(
        plan.dropin.contains("# was 0\nnet.ipv4.tcp_sack = 1\n"),
        "{}",
        plan.dropin
    );
    assert!(
        plan.dropin
            .contains("net.ipv4.tcp_rmem = 4096 65536 25165824"),
        "{}",
        plan.dropin
    );
    assert_eq!(plan.ip_commands, ["ip link set dev eth0 txqueuelen 1388"]);
}

#[test]
fn recorded_state_of_this_kernel_against_datacenter_and_lan_paths() {
    let s = state("this-kernel-6.18.json");
    assert!(s.kernel.unwrap().at_least(6, 6));
    let a = audit(&s, &input("10gbit", "1.58ms"));
    // 6.18's receive default (tcp_rmem max 32 MiB) carries a 1.98 MB BDP; the send maximum of
    // 4 MiB is short of the 3 × BDP that BBR provisions (tcp_bbr.c bbr_sndbuf_expand).
    assert_eq!(finding(&a, "net.ipv4.tcp_rmem").verdict, Verdict::Fine);
    assert_eq!(changed_keys(&a), ["net.ipv4.tcp_wmem"], "{a}");
    // A 1 Gbit/s LAN needs nothing.
    assert_eq!(audit(&s, &input("1gbit", "0.12ms")).changes().count(), 0);
}

#[test]
fn a_recorded_application_with_a_small_so_rcvbuf_gets_r5() {
    // Recorded from a lab server while `iperf3 -w 32K` received (sk_rcvbuf 64 KiB).
    let s = state("lab-mistuned-app-6.18.json");
    assert_eq!(s.locked_sockets.len(), 1);
    let a = audit(&s, &input("100mbit", "20ms"));
    let f = a
        .findings
        .iter()
        .find(|f| f.rule == "R5" && f.setting.starts_with("socket "))
        .unwrap_or_else(|| panic!("{:#?}", a.findings));
    assert_eq!(f.verdict, Verdict::Warning);
    assert!(f.why.contains("iperf3 (pid"), "{}", f.why);
    assert!(f.why.contains("remove the setsockopt"), "{}", f.why);
    // rmem_max (4 MiB here) already lets the application ask for enough: no change there.
    assert_eq!(finding(&a, "net.core.rmem_max").verdict, Verdict::Fine);
    // Where its window (about 32 KiB) is at least twice the BDP, nothing is said about it:
    // 100 Mbit/s × 1 ms has a BDP of 12.5 kB. On a 1 Gbit/s × 0.2 ms LAN (25 kB) it is not.
    let short = audit(&s, &input("100mbit", "1ms"));
    assert!(!short
        .findings
        .iter()
        .any(|f| f.setting.starts_with("socket ")));
    let lan = audit(&s, &input("1gbit", "0.2ms"));
    assert!(lan
        .findings
        .iter()
        .any(|f| f.setting.starts_with("socket ")));
}

#[test]
fn fit_sizes_maxima_to_the_path_and_leaves_enough_alone_otherwise() {
    // The mistuned lab host: 6 MiB / 4 MiB maxima; 1 Gbit/s × 1.5 ms needs ~384 KiB.
    let s = state("lab-mistuned-6.18.json");
    let plain = audit(&s, &input("1gbit", "1.5ms"));
    assert_eq!(finding(&plain, "net.ipv4.tcp_rmem").verdict, Verdict::Fine);
    let fit = audit(
        &s,
        &AuditInput {
            fit: true,
            ..input("1gbit", "1.5ms")
        },
    );
    let r = finding(&fit, "net.ipv4.tcp_rmem");
    assert_eq!(r.verdict, Verdict::Change);
    // 1.5 × 384 KiB.
    assert_eq!(r.recommended.as_deref(), Some("4096 87380 589824"));
    assert!(r.why.contains("--fit"), "{}", r.why);
    // The send side (BBR here: 3× the BDP, 576 KiB) is fitted to 1.5× that, rounded up to
    // 64 KiB.
    let w = finding(&fit, "net.ipv4.tcp_wmem");
    assert_eq!(w.recommended.as_deref(), Some("4096 16384 917504"));
    // A maximum that suffices but leaves less than the headroom is raised: 1 Gbit/s × 20 ms
    // needs 5 MiB of receive buffer; 6 MiB is below 1.5× that (7.5 MiB, a whole 8 MiB).
    let mid = audit(
        &s,
        &AuditInput {
            fit: true,
            ..input("1gbit", "20ms")
        },
    );
    let m = finding(&mid, "net.ipv4.tcp_rmem");
    assert_eq!(m.recommended.as_deref(), Some("4096 87380 8388608"));
    assert!(m.why.contains("little headroom"), "{}", m.why);
    // A long fat path needs more than the maxima: raised to 1.5× the need.
    let lfn = audit(
        &s,
        &AuditInput {
            fit: true,
            ..input("1gbit", "100ms")
        },
    );
    let need = lfn.rmem_needed_bytes.get();
    assert_eq!(
        finding(&lfn, "net.ipv4.tcp_rmem").recommended,
        Some(format!("4096 87380 {}", tcptune_host::audit::fitted(need)))
    );
    // A LAN needs little (25 KB BDP): twice the receive side's need rounds up to the 128 KiB
    // floor; BBR's send side (3 × 25 KB, rounded up to 128 KiB) grows by half to 192 KiB.
    let lan = audit(
        &s,
        &AuditInput {
            fit: true,
            ..input("1gbit", "0.2ms")
        },
    );
    assert_eq!(
        finding(&lan, "net.ipv4.tcp_rmem").recommended.as_deref(),
        Some("4096 87380 131072")
    );
    assert_eq!(
        finding(&lan, "net.ipv4.tcp_wmem").recommended.as_deref(),
        Some("4096 16384 196608")
    );
    assert_eq!(tcptune_host::audit::fitted(1), 128 * 1024);
}

#[test]
fn the_send_buffer_is_sized_for_the_control_the_audit_recommends() {
    // CUBIC host, BBR available. Without loss the sender stays on CUBIC: 2× the window.
    let s = state("mistuned-6.1.json");
    let clean = audit(&s, &input("1gbit", "100ms"));
    let bdp = clean.flow_bdp_bytes.get();
    assert!(clean.wmem_needed_bytes.get() >= 2 * bdp && clean.wmem_needed_bytes.get() < 3 * bdp);
    // With 0.1% loss (Mathis: ~27 Mbit/s at this host's 9000-byte MTU) R13 switches it to BBR, whose send buffer is 3× the window; the send
    // side must be sized for that, or the recommendation would starve the new control.
    let mut lossy = input("1gbit", "100ms");
    lossy.loss = Some("0.1%".parse::<Probability>().unwrap());
    let a = audit(&s, &lossy);
    assert_eq!(
        finding(&a, "net.ipv4.tcp_congestion_control")
            .recommended
            .as_deref(),
        Some("bbr")
    );
    assert!(
        a.wmem_needed_bytes.get() >= 3 * bdp,
        "{:?}",
        a.wmem_needed_bytes
    );
    let w = finding(&a, "net.ipv4.tcp_wmem");
    assert!(w.why.contains("3× the BDP"), "{}", w.why);
    assert!(w.why.contains("bbr (recommended below)"), "{}", w.why);
}
