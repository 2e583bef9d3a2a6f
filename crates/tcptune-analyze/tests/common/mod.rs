//! Shared by the tshark cross-check tests: run tshark and tcptune on a capture and list each
//! flagged packet's flags, so the two can be compared packet by packet.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use tcptune_analyze::{analyze_reader, Options};

pub const FIELDS: [&str; 15] = [
    "retransmission",
    "fast_retransmission",
    "spurious_retransmission",
    "out_of_order",
    "lost_segment",
    "ack_lost_segment",
    "duplicate_ack",
    "zero_window",
    "zero_window_probe",
    "zero_window_probe_ack",
    "window_full",
    "window_update",
    "keep_alive",
    "keep_alive_ack",
    "reused_ports",
];

pub fn fixtures() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    v.sort();
    v
}

pub fn tshark_version() -> Option<String> {
    let out = Command::new("tshark").arg("--version").output().ok()?;
    let s = String::from_utf8_lossy(&out.stdout).to_string();
    s.lines().next().map(|l| l.to_string())
}

/// frame -> (stream, flag names, dup-ack number)
pub type PerPacket = BTreeMap<u64, (u32, Vec<String>, Option<u32>)>;

pub fn tshark_flags(path: &Path) -> PerPacket {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(path).args([
        "-o",
        "tcp.desegment_tcp_streams:FALSE",
        "-Y",
        "tcp.analysis.flags",
        "-T",
        "fields",
        "-E",
        "occurrence=f",
        "-E",
        "separator=,",
        "-e",
        "frame.number",
        "-e",
        "tcp.stream",
        "-e",
        "tcp.analysis.duplicate_ack_num",
    ]);
    for f in FIELDS {
        cmd.args(["-e", &format!("tcp.analysis.{f}")]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut m = PerPacket::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let cols: Vec<&str> = line.split(',').collect();
        let frame: u64 = cols[0].parse().unwrap();
        let stream: u32 = cols[1].parse().unwrap();
        let dup = (!cols[2].is_empty()).then(|| cols[2].parse().unwrap());
        let names: Vec<String> = FIELDS
            .iter()
            .zip(&cols[3..])
            .filter(|(_, v)| !v.is_empty())
            .map(|(f, _)| f.to_string())
            .collect();
        if !names.is_empty() {
            m.insert(frame, (stream, names, dup));
        }
    }
    m
}

pub fn ours(path: &Path) -> (PerPacket, tcptune_analyze::AnalyzeReport) {
    let done = analyze_reader(
        File::open(path).unwrap(),
        &path.display().to_string(),
        Options {
            packets: true,
            series: false,
        },
    )
    .unwrap();
    let mut m = PerPacket::new();
    for p in done.report.packets.as_ref().unwrap() {
        m.insert(p.frame, (p.stream, p.flags.clone(), p.duplicate_ack_num));
    }
    (m, done.report)
}

/// Why tshark cannot be used for the comparison, if it cannot (the caller prints SKIP).
pub fn tshark_unusable() -> Option<String> {
    match tshark_version() {
        None => Some("tshark is not installed (scripts/deps installs it)".into()),
        Some(v) if !v.contains(" 4.0.") => {
            Some(format!("{v} is not 4.0.x, whose rules tcptune follows"))
        }
        Some(_) => None,
    }
}

/// Packet-by-packet and flow-by-flow differences between tshark and tcptune on `path`;
/// returns (differences, number of packets tshark flagged).
pub fn compare(path: &Path) -> (Vec<String>, usize) {
    let theirs = tshark_flags(path);
    let (mine, report) = ours(path);
    let mut diffs = Vec::new();
    for (frame, t) in &theirs {
        if mine.get(frame) != Some(t) {
            diffs.push(format!(
                "frame {frame}: tshark {t:?}, tcptune {:?}",
                mine.get(frame)
            ));
        }
    }
    for (frame, o) in &mine {
        if !theirs.contains_key(frame) {
            diffs.push(format!("frame {frame}: tshark none, tcptune {o:?}"));
        }
    }
    let mut per_stream: BTreeMap<u32, BTreeMap<String, u64>> = BTreeMap::new();
    for (stream, names, _) in theirs.values() {
        for n in names {
            *per_stream
                .entry(*stream)
                .or_default()
                .entry(n.clone())
                .or_default() += 1;
        }
    }
    for flow in &report.flows {
        for (name, n) in flow.flags.named() {
            let t = per_stream
                .get(&flow.stream)
                .and_then(|m| m.get(name))
                .copied()
                .unwrap_or(0);
            if t != n {
                diffs.push(format!(
                    "stream {} {name}: tshark {t}, tcptune {n}",
                    flow.stream
                ));
            }
        }
    }
    (diffs, theirs.len())
}
