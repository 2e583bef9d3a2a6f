//! Privileged: latency under load in `tcptune test` on the lab's 20 Mbit/s × 20 ms link. A
//! 1000-packet bottleneck queue filled by loss-based senders raises the loaded round trip, with
//! the queue at its fullest (p99: the sawtooth reaches it at every overflow), by about the
//! queue's drain time and makes the bufferbloat
//! finding with about the queue's size; a 20-packet queue adds a few packets' serialisation
//! and no finding. The idle round trip agrees with `ping`.

mod common;

use std::process::Command;

use common::lab::Lab;
use serde_json::Value;

/// 1000 packets of 1500 bytes plus the emulator's 14 bytes of framing, at 20 Mbit/s.
const DRAIN_1000_S: f64 = 1000.0 * 1514.0 * 8.0 / 20e6;

fn summary(r: &Value) -> &Value {
    &r["tcptune"]["latency"]["summary"]
}

fn secs(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn ping_avg_s(lab: &Lab) -> f64 {
    let ns = lab.ns("client");
    let o = Command::new("ip")
        .args([
            "netns", "exec", &ns, "ping", "-n", "-q", "-c", "10", "-i", "0.2",
        ])
        .arg("198.18.0.2")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    // rtt min/avg/max/mdev = 20.336/20.394/20.520/0.065 ms
    let line = text.lines().find(|l| l.contains("min/avg/max")).unwrap();
    let avg: f64 = line
        .split('=')
        .nth(1)
        .unwrap()
        .trim()
        .split('/')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    avg / 1000.0
}

#[test]
fn a_deep_queue_is_bufferbloat_and_a_short_one_is_not() {
    if !tcptune_testkit::privileged("a_deep_queue_is_bufferbloat_and_a_short_one_is_not") {
        return;
    }
    // Reno fills a FIFO to overflow (no delay-based exit from slow start) and four streams
    // keep it near full between losses.
    let big_rmem = "server.sysctl.net.ipv4.tcp_rmem=4096 131072 16777216";
    let lab = Lab::up(
        "ttlat",
        &[
            "--rate", "20mbit", "--rtt", "20ms", "--queue", "1000", "--host", big_rmem,
        ],
    );
    let (_, r) = lab.test(&["-t", "8", "-P", "4", "-C", "reno", "--path-rate", "20mbit"]);
    let s = summary(&r);
    let idle = secs(&s["idle"]["p50_s"]);
    let full = secs(&s["loaded_foreign"]["p99_s"]) - idle;
    assert!(
        (full - DRAIN_1000_S).abs() <= 0.15 * DRAIN_1000_S,
        "loaded p99 added {full} s against a drain time of {DRAIN_1000_S} s: {s}"
    );
    let f = &r["tcptune"]["diagnosis"]["bufferbloat"];
    let implied = f["implied_buffer_bytes"]
        .as_f64()
        .expect("a bufferbloat finding");
    let queue = 1000.0 * 1514.0;
    assert!(
        (implied - queue).abs() <= 0.2 * queue,
        "implied buffer {implied} B against the queue's {queue} B: {f}"
    );
    let knobs: Vec<&str> = r["tcptune"]["diagnosis"]["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["knob"].as_str())
        .collect();
    assert!(knobs.contains(&"aqm"), "{knobs:?}");
    // The idle round trip is the path's: ping's within 5% or 100 µs.
    let ping = ping_avg_s(&lab);
    assert!(
        (idle - ping).abs() <= (0.05 * ping).max(100e-6),
        "idle {idle} s against ping {ping} s"
    );
    drop(lab);
    // A 20-packet queue: a few packets' serialisation (20 × 0.6 ms) at most, and no finding.
    let lab = Lab::up(
        "ttlat",
        &[
            "--rate", "20mbit", "--rtt", "20ms", "--queue", "20", "--host", big_rmem,
        ],
    );
    let (_, r) = lab.test(&["-t", "5", "-P", "4", "-C", "reno", "--path-rate", "20mbit"]);
    let s = summary(&r);
    let added = secs(&s["added_s"]);
    assert!(
        added < 20.0 * 1514.0 * 8.0 / 20e6 + 0.005,
        "added {added} s: {s}"
    );
    assert!(r["tcptune"]["diagnosis"]["bufferbloat"].is_null());
    // Under 30 ms added: DSLReports' A or A+.
    assert!(s["grade"] == "A+" || s["grade"] == "A", "{s}");
}
