//! Privileged: workloads between two namespaces joined by a veth pair, measured and diagnosed
//! from the sender's own tcp_info.

use std::net::IpAddr;
use std::process::Command;

use tcptune_experiment::settings::Settings;
use tcptune_experiment::workload::{self, Hosts};
use tcptune_testkit::{privileged, veth_pair, Netns};

struct Pair {
    client: Netns,
    server: Netns,
    server_ip: IpAddr,
    client_ip: IpAddr,
}

impl Hosts for Pair {
    fn command(&self, host: &str, program: &str) -> Command {
        let ns = if host == "client" {
            &self.client
        } else {
            &self.server
        };
        ns.command(&[program])
    }
    fn netns(&self, host: &str) -> String {
        if host == "client" {
            self.client.name()
        } else {
            self.server.name()
        }
        .to_string()
    }
    fn address(&self, host: &str) -> IpAddr {
        if host == "client" {
            self.client_ip
        } else {
            self.server_ip
        }
    }
}

fn pair(tag: &str, octet: u8) -> Pair {
    let (client, server) = (
        Netns::new(&format!("{tag}c")),
        Netns::new(&format!("{tag}s")),
    );
    let (c, s) = veth_pair(&client, &server, octet);
    Pair {
        client,
        server,
        server_ip: s.parse().unwrap(),
        client_ip: c.parse().unwrap(),
    }
}

fn settings(kv: &[(&str, &str)]) -> Settings {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn iperf3_upload_with_a_tiny_receive_buffer_is_receiver_window_limited() {
    if !privileged("iperf3_upload_with_a_tiny_receive_buffer") {
        return;
    }
    assert!(
        have("iperf3"),
        "iperf3 is missing; scripts/deps installs it"
    );
    let p = pair("wlip", 61);
    // The receiver (server) may never grow its buffer beyond 16 KiB.
    p.server
        .exec(&["sysctl", "-q", "-w", "net.ipv4.tcp_rmem=4096 16384 16384"]);
    // A namespace starts with the host's default congestion control. The sender must be a
    // loss-based one whose window grows past the receiver's: BBR (some hosts' default) caps
    // its cwnd near 2x the sub-millisecond veth BDP, and would be cwnd-limited most of the time.
    // Reno, because a namespace may only pick what the host allows, and Reno is always allowed.
    p.client
        .exec(&["sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=reno"]);
    let s = settings(&[("workload.kind", "iperf3"), ("workload.duration", "2s")]);
    let r = workload::run(&p, &s, 15201, None).unwrap();
    let m = &r.measurement;
    assert!(m.goodput_bps > 0.0 && m.bytes > 0, "{m:?}");
    assert!((1.5..3.0).contains(&m.duration_s), "{m:?}");
    let v = m.verdict.as_deref().unwrap();
    assert!(v.starts_with("receiver-window limited"), "{v}");
    assert!(m.limits.as_ref().unwrap().rwnd > 0.5, "{:?}", m.limits);
    // The series comes from the data connection: its receive window never exceeds the buffer.
    assert!(r.series.len() >= 10, "{} samples", r.series.len());
    assert!(
        r.series
            .iter()
            .filter_map(|x| x.rwnd_bytes)
            .all(|w| w <= 16384),
        "{:?}",
        r.series.iter().map(|x| x.rwnd_bytes).collect::<Vec<_>>()
    );
    // The receiver's own view: it advertises no more than its 16 KiB buffer allows.
    assert!(
        r.receiver_series.len() >= 5,
        "{} receiver samples",
        r.receiver_series.len()
    );
    let advertised: Vec<u64> = r
        .receiver_series
        .iter()
        .filter_map(|x| x.rwnd_bytes)
        .collect();
    assert!(
        !advertised.is_empty() && advertised.iter().all(|w| *w <= 16384),
        "{advertised:?}"
    );
    // The series' mean goodput agrees with iperf3's figure within a third (samples start late
    // and stop early, so they see slightly different windows of the transfer).
    let g: Vec<f64> = r.series.iter().filter_map(|x| x.goodput_bps).collect();
    let mean = g.iter().sum::<f64>() / g.len() as f64;
    assert!(
        (mean / m.goodput_bps - 1.0).abs() < 0.33,
        "series {mean} vs iperf3 {}",
        m.goodput_bps
    );
}

#[test]
fn http_download_moves_the_whole_file() {
    if !privileged("http_download_moves_the_whole_file") {
        return;
    }
    assert!(
        have("curl") && have("python3"),
        "curl and python3 are needed; scripts/deps installs them"
    );
    let p = pair("wlhttp", 62);
    let s = settings(&[
        ("workload.kind", "http"),
        ("workload.file_size", "20MB"),
        ("workload.duration", "20s"),
    ]);
    let r = workload::run(&p, &s, 18080, None).unwrap();
    assert_eq!(r.measurement.bytes, 20_000_000);
    assert!(r.measurement.goodput_bps > 1e6, "{:?}", r.measurement);
    // The server sends: its connection is the one sampled.
    assert!(r.measurement.verdict.is_some());
}
