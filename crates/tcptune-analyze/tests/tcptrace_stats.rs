//! Where tcptune's per-direction statistics and tcptrace's could differ, pinned down on one
//! synthetic conversation (README, "Capture analysis", the statistics): a retransmitted SYN and
//! FIN, a repeated one-byte zero-window probe, and a record cut inside its TCP header. tcptune's
//! numbers are asserted; when tcptrace is installed (scripts/deps), its `-l` output for the same
//! file must give the same ones.

use std::process::Command;

use tcptune_analyze::{analyze_reader, Options};
use tcptune_wire::packet::flags::{ACK, FIN, SYN};
use tcptune_wire::write::{PcapWriter, SegSpec};

fn capture() -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), 1500).unwrap();
    let mut t = 1_000_000_000i64;
    let mut put = |w: &mut PcapWriter<Vec<u8>>, from_a: bool, seq, ack, flags, len, window| {
        let (src, dst, sport, dport) = if from_a {
            ([198, 18, 0, 1], [198, 18, 0, 2], 40000, 5001)
        } else {
            ([198, 18, 0, 2], [198, 18, 0, 1], 5001, 40000)
        };
        t += 1_000_000;
        w.segment(&SegSpec {
            ts_ns: t,
            src,
            dst,
            sport,
            dport,
            seq,
            ack,
            flags,
            window,
            options: &[],
            payload_len: len,
            ip_id: 0,
        })
        .unwrap();
    };
    put(&mut w, true, 100, 0, SYN, 0, 1000);
    put(&mut w, true, 100, 0, SYN, 0, 1000); // the SYN again
    put(&mut w, false, 500, 101, SYN | ACK, 0, 1000);
    put(&mut w, true, 101, 501, ACK, 0, 1000);
    for i in 0..3 {
        put(&mut w, true, 101 + i * 1000, 501, ACK, 1000, 1000);
    }
    put(&mut w, false, 501, 3101, ACK, 0, 0); // zero window
    put(&mut w, true, 3101, 501, ACK, 1, 1000); // a one-byte probe
    put(&mut w, false, 501, 3101, ACK, 0, 0);
    put(&mut w, true, 3101, 501, ACK, 1, 1000); // the probe again
    put(&mut w, false, 501, 3101, ACK, 0, 1000); // the window opens
    put(&mut w, true, 3101, 501, ACK, 1000, 1000); // from the probed byte on
    put(&mut w, false, 501, 4101, ACK, 0, 1000);
    put(&mut w, true, 4101, 501, FIN | ACK, 0, 1000);
    put(&mut w, true, 4101, 501, FIN | ACK, 0, 1000); // the FIN again
    put(&mut w, false, 501, 4102, FIN | ACK, 0, 1000);
    put(&mut w, true, 4102, 502, ACK, 0, 1000);
    let mut file = w.into_inner();
    // A record cut 10 bytes into its TCP header (a 44-byte snaplen).
    let mut cut = PcapWriter::new(Vec::new(), 44).unwrap();
    put(&mut cut, true, 4102, 502, ACK, 500, 1000);
    file.extend_from_slice(&cut.into_inner()[24..]);
    file
}

#[test]
fn statistics_where_tcptrace_could_differ_are_the_same_as_tcptrace() {
    let data = capture();
    let opts = Options::default();
    let r = analyze_reader(&data[..], "t", opts).unwrap().report;
    assert_eq!(
        r.skipped.malformed, 1,
        "the record cut inside its TCP header"
    );
    let a = &r.flows[0].a_to_b;
    // (packets, SYN, FIN, data packets, data bytes, unique bytes, rexmt packets, rexmt bytes)
    let ours = (
        a.packets,
        a.syn,
        a.fin,
        a.data_packets,
        a.data_bytes.get(),
        a.unique_bytes.get(),
        a.retransmitted_packets,
        a.retransmitted_bytes.get(),
    );
    // A repeated SYN or FIN is a SYN/FIN packet, not a retransmission (no data bytes); the
    // probe's byte sent again (the repeated probe, then the data after the window opened) is
    // retransmitted data, twice.
    assert_eq!(ours, (12, 2, 2, 6, 4002, 4000, 2, 2));
    assert_eq!(r.flags.zero_window_probe, 2);

    if Command::new("tcptrace").arg("-v").output().is_err() {
        tcptune_testkit::skip_without_tool(
            "the tcptrace comparison",
            "tcptrace is not installed (scripts/deps installs it)",
        );
        return;
    }
    let path = std::env::temp_dir().join(format!("tcptune-stats-{}.pcap", std::process::id()));
    std::fs::write(&path, &data).unwrap();
    let out = Command::new("tcptrace")
        .args(["-l", "-n"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8_lossy(&out.stdout);
    // The a->b column: the first number after each label, on the two-column lines.
    let field = |label: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.matches(label).count() == 2)
            .unwrap_or_else(|| panic!("no {label} in tcptrace's output:\n{text}"));
        let rest = &line[line.find(label).unwrap() + label.len()..];
        rest.split_whitespace()
            .next()
            .and_then(|v| v.split('/').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("unreadable {label}: {line}"))
    };
    let synfin = text
        .lines()
        .find(|l| l.contains("SYN/FIN pkts sent:"))
        .and_then(|l| l.split_whitespace().nth(3))
        .unwrap_or("?/?")
        .to_string();
    let theirs = (
        field("total packets:"),
        synfin.split('/').next().unwrap().parse::<u64>().unwrap(),
        synfin.split('/').nth(1).unwrap().parse::<u64>().unwrap(),
        field("actual data pkts:"),
        field("actual data bytes:"),
        field("unique bytes sent:"),
        field("rexmt data pkts:"),
        field("rexmt data bytes:"),
    );
    assert_eq!(ours, theirs, "tcptrace -l:\n{text}");
}
