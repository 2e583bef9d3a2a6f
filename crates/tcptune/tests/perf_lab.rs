//! Privileged: `tcptune test` against `tcptune serve` across the lab's emulated link, checked
//! against what each scenario must be diagnosed as: a 64 KiB and a 4 KiB receive buffer on
//! 100 Mbit/s × 20 ms (receiver-window limited, with the BDP-sized tcp_rmem), a small send
//! buffer (send-buffer limited), 1% loss (loss limited, near the Mathis bound), and seed 001's
//! untuned receiver against the same receiver tuned (the factor between them).

mod common;

use common::lab::Lab;
use serde_json::Value;
use tcptune_model::buffers::{buffers, BufferQuery, FlowSharing};
use tcptune_model::kernel::{CongestionControl, KernelSource};
use tcptune_model::{Dur, Rate};

fn diagnosis(r: &Value) -> &Value {
    &r["tcptune"]["diagnosis"]
}

fn rmem_for(rate: &str, rtt_s: f64, rcvbuf: u64) -> u64 {
    let v = tcptune_kernel::sys::kernel_version().unwrap();
    let b = buffers(&BufferQuery {
        rate: rate.parse::<Rate>().unwrap(),
        rtt: Dur::from_secs_f64(rtt_s),
        flows: 1,
        sharing: FlowSharing::Shared,
        memory_budget: None,
        kernel: v,
        kernel_source: KernelSource::Detected,
        scaling_ratio: None,
        adv_win_scale: None,
        cc: CongestionControl::Cubic,
    })
    .unwrap();
    // Rounded up by the one sizing rule, as every command recommends it.
    let need = b.tcp_rmem_max_bytes.get().max(2 * rcvbuf).max(65_536);
    tcptune_model::sizing::round_buffer(tcptune_model::Bytes::new(need)).get()
}

#[test]
fn lab_diagnoses_windows_buffers_and_loss() {
    if !tcptune_testkit::privileged("lab_diagnoses_windows_buffers_and_loss") {
        return;
    }
    let _serial = tcptune_testkit::one_at_a_time();
    let lab = Lab::up("ttperf", &["--rate", "100mbit", "--rtt", "20ms"]);
    // A download from a stock iperf3 server into a client with a 64 KiB receive buffer: only
    // our receiving end is sampled, and its own window evidence names the limit.
    lab.set(&["--host", "client.sysctl.net.ipv4.tcp_rmem=4096 65536 65536"]);
    let (code, r) = lab.test_against(
        &["iperf3", "-s", "-1", "--forceflush"],
        "Server listening",
        &["-t", "3", "-R", "--path-rate", "100mbit"],
    );
    let d = diagnosis(&r);
    assert_eq!(code, 1, "{d}");
    assert_eq!(
        d["limit"], "receiver_window",
        "{} EVIDENCE {} BOUNDS {}",
        d["verdict"], d["streams"][0]["evidence"], d["streams"][0]["bounds"]
    );
    assert_eq!(d["streams"][0]["evidence"]["from_receiver"], true);
    lab.set(&[
        "--host",
        "client.sysctl.net.ipv4.tcp_rmem=4096 131072 33554432",
    ]);
    // A 4 KiB buffer's window swings between ~1.4 KiB and zero (receiver-side silly-window
    // avoidance), so the result is further below the median window over the RTT.
    for (rmem, at_bound) in [("4096 65536 65536", 0.8), ("4096 4096 4096", 0.4)] {
        lab.set(&["--host", &format!("server.sysctl.net.ipv4.tcp_rmem={rmem}")]);
        let (code, r) = lab.test(&["-t", "3", "--path-rate", "100mbit"]);
        let d = diagnosis(&r);
        assert_eq!(code, 1, "{d}");
        assert_eq!(d["limit"], "receiver_window", "{rmem}: {}", d["verdict"]);
        let s = &d["streams"][0];
        let rcvbuf = s["evidence"]["receiver_buffer_bytes"].as_u64().unwrap();
        let rtt = s["evidence"]["rtt_s"].as_f64().unwrap();
        assert!((0.019..0.03).contains(&rtt), "{rtt}");
        let n = rmem_for("100mbit", rtt, rcvbuf);
        // The receiver is the server's namespace, whose settings this client cannot read:
        // the value is proposed as a condition, without a command that might lower it.
        let rec = &s["recommendations"][0];
        assert_eq!(rec["knob"], "tcp_rmem_max", "{rmem}: {rec}");
        assert_eq!(rec["proposed"], n.to_string(), "{rmem}: {rec}");
        assert!(rec["command"].is_null(), "{rmem}: {rec}");
        // The result sits at the window/RTT bound.
        let w = s["bounds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["model"] == "window/RTT")
            .unwrap();
        assert!(
            w["achieved_fraction"].as_f64().unwrap() > at_bound,
            "{rmem}: {w}"
        );
    }
    // A small send buffer on the client (the sender).
    lab.set(&[
        "--host",
        "server.sysctl.net.ipv4.tcp_rmem=4096 131072 33554432",
        "--host",
        "client.sysctl.net.ipv4.tcp_wmem=4096 16384 16384",
    ]);
    let (code, r) = lab.test(&["-t", "3", "--path-rate", "100mbit"]);
    let d = diagnosis(&r);
    assert_eq!(code, 1);
    assert_eq!(d["limit"], "send_buffer", "{}", d["verdict"]);
    let cmd = d["recommendations"][0]["command"].as_str().unwrap();
    assert!(
        cmd.starts_with("sysctl -w net.ipv4.tcp_wmem=\"4096 16384 "),
        "{cmd}"
    );
    // 1% loss, buffers back to defaults.
    lab.set(&[
        "--host",
        "client.sysctl.net.ipv4.tcp_wmem=4096 16384 4194304",
        "--loss",
        "1%",
    ]);
    let (code, r) = lab.test(&["-t", "4", "--path-rate", "100mbit", "-C", "reno"]);
    let d = diagnosis(&r);
    assert_eq!(code, 1);
    assert_eq!(d["limit"], "loss", "{}", d["verdict"]);
    let s = &d["streams"][0];
    let p = s["evidence"]["loss_ratio"].as_f64().unwrap();
    assert!((0.003..0.03).contains(&p), "loss estimate {p}");
    let m = s["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["model"] == "Mathis")
        .unwrap();
    let f = m["achieved_fraction"].as_f64().unwrap();
    assert!((0.3..2.0).contains(&f), "result / Mathis bound = {f}");
}

#[test]
fn lab_seed_001_untuned_and_tuned_receiver() {
    if !tcptune_testkit::privileged("lab_seed_001_untuned_and_tuned_receiver") {
        return;
    }
    let _serial = tcptune_testkit::one_at_a_time();
    let lab = Lab::up(
        "ttseed1",
        &["--rate", "100mbit", "--rtt", "20ms", "--loss", "0.03%"],
    );
    let untuned = [
        "--host",
        "client.sysctl.net.ipv4.tcp_sack=0",
        "--host",
        "client.sysctl.net.ipv4.tcp_timestamps=0",
        "--host",
        "client.sysctl.net.ipv4.tcp_window_scaling=0",
        "--host",
        "client.mtu=576",
        "--host",
        "client.sysctl.net.ipv4.tcp_rmem=4096 65536 65536",
    ];
    lab.set(&untuned);
    // Download: the server (ours, so its samples come back) sends to the mistuned client.
    let (code, slow) = lab.test(&["-t", "4", "-R", "--path-rate", "100mbit"]);
    let d = diagnosis(&slow);
    assert_eq!(code, 1);
    assert_eq!(
        d["limit"], "receiver_window",
        "{} EVIDENCE {} BOUNDS {}",
        d["verdict"], d["streams"][0]["evidence"], d["streams"][0]["bounds"]
    );
    let missing = d["streams"][0]["evidence"]["missing_options"]
        .as_array()
        .unwrap();
    assert_eq!(missing.len(), 3, "{missing:?}");
    let cmds: Vec<&str> = d["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["command"].as_str())
        .collect();
    for key in [
        "tcp_rmem=",
        "tcp_sack=1",
        "tcp_timestamps=1",
        "tcp_window_scaling=1",
    ] {
        assert!(cmds.iter().any(|c| c.contains(key)), "{key} in {cmds:?}");
    }
    lab.set(&[
        "--host",
        "client.sysctl.net.ipv4.tcp_sack=1",
        "--host",
        "client.sysctl.net.ipv4.tcp_timestamps=1",
        "--host",
        "client.sysctl.net.ipv4.tcp_window_scaling=1",
        "--host",
        "client.mtu=1500",
        "--host",
        "client.sysctl.net.ipv4.tcp_rmem=4096 131072 33554432",
    ]);
    let (_, fast) = lab.test(&["-t", "4", "-R", "--path-rate", "100mbit"]);
    let a = slow["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    let b = fast["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    eprintln!(
        "seed 001: untuned {:.1} Mbit/s, tuned {:.1} Mbit/s, factor {:.1}",
        a / 1e6,
        b / 1e6,
        b / a
    );
    // The paper: ≈4×. The untuned window (64 KiB buffer, no scaling) caps at ~26 Mbit/s.
    assert!(b / a > 2.0, "untuned {a} vs tuned {b}");
    assert!(
        diagnosis(&fast)["streams"][0]["evidence"]["missing_options"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}
