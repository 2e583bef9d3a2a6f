//! iperf3's `-V` lines on the client, line for line: the version, host, control MSS and time
//! before "Connecting", the cookie and MSS after it, "Starting Test" after the connections,
//! "Test Complete" above the final block and the CPU use and congestion control below it
//! (iperf3 3.12's `iperf_api.c`, `iperf_locale.c`). Sans-IO, beside `iperf3_text`.

use crate::test_report::{End, Start};

/// The iperf3 release whose text and protocol `tcptune iperf3` follows, as `-V` names it
/// first (`-v` names tcptune itself).
pub const VERBOSE_VERSION: &str = "iperf 3.12";

/// `-V`'s lines before "Connecting to host": the version, the host, the control connection's
/// MSS, a UDP test's block size when `-l` was not given (`udp_default_len`), the time.
pub fn verbose_head(s: &Start, udp_default_len: Option<u32>) -> Vec<String> {
    let mut out = vec![VERBOSE_VERSION.to_string(), s.system_info.clone()];
    if let Some(mss) = s.tcp_mss_default.or(s.tcp_mss) {
        out.push(format!("Control connection MSS {mss}"));
    }
    if let Some(len) = udp_default_len {
        out.push(format!("Setting UDP block size to {len}"));
    }
    out.push(format!("Time: {}", s.timestamp.time));
    out
}

/// `-V`'s lines after "Connecting to host" (and "Reverse mode"): the cookie, a TCP test's MSS,
/// the `-b` rate.
pub fn verbose_connect(s: &Start, udp: bool) -> Vec<String> {
    let mut out = vec![format!("      Cookie: {}", s.cookie)];
    if !udp {
        out.push(match (s.tcp_mss, s.tcp_mss_default) {
            (Some(m), _) => format!("      TCP MSS: {m}"),
            (None, d) => format!("      TCP MSS: {} (default)", d.unwrap_or(0)),
        });
    }
    if s.target_bitrate > 0 {
        out.push(format!("      Target Bitrate: {}", s.target_bitrate));
    }
    out
}

/// `-V`'s "Starting Test" line after the connections: the test's end condition in iperf3's
/// words (`test_start_time`, `_bytes`, `_blocks`).
pub fn starting_test(s: &Start) -> String {
    let t = &s.test_start;
    let end = if t.bytes > 0 {
        format!("{} bytes to send", t.bytes)
    } else if t.blocks > 0 {
        format!("{} blocks to send", t.blocks)
    } else {
        format!("{} second test", t.duration)
    };
    format!(
        "Starting Test: protocol: {}, {} streams, {} byte blocks, omitting {} seconds, {end}, tos {}",
        t.protocol, t.num_streams, t.blksize, t.omit, t.tos
    )
}

/// What `-V` puts after the final block's separator.
pub const SUMMARY: &str = "Test Complete. Summary Results:";

/// `-V`'s lines after the final rows: each direction's CPU use (this end's, the other's)
/// and, in a TCP test, the congestion control of each end. `sends`: whether the client sends
/// (its main direction); `bidir`: both directions are printed, the other after.
pub fn verbose_end(end: &End, udp: bool, sends: bool, bidir: bool) -> Vec<String> {
    let c = &end.cpu_utilization_percent;
    let role = |tx: bool| if tx { "sender" } else { "receiver" };
    let cpu = |tx: bool| {
        format!(
            "CPU Utilization: local/{} {:.1}% ({:.1}%u/{:.1}%s), remote/{} {:.1}% ({:.1}%u/{:.1}%s)",
            role(tx),
            c.host_total,
            c.host_user,
            c.host_system,
            role(!tx),
            c.remote_total,
            c.remote_user,
            c.remote_system
        )
    };
    let dirs: &[bool] = if bidir { &[true, false] } else { &[sends] };
    // iperf3 3.12 prints no CPU line for a UDP test it receives.
    let mut out: Vec<String> = dirs
        .iter()
        .filter(|&&tx| !(udp && !tx && !bidir))
        .map(|&tx| cpu(tx))
        .collect();
    if !udp {
        for _ in dirs {
            if let Some(cc) = &end.sender_tcp_congestion {
                out.push(format!("snd_tcp_congestion {cc}"));
            }
            if let Some(cc) = &end.receiver_tcp_congestion {
                out.push(format!("rcv_tcp_congestion {cc}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// -V's lines as iperf3 3.12 printed them on this host (`iperf3 -c … -V`).
    #[test]
    fn verbose_lines_as_iperf3_prints_them() {
        let cpu = |v: f64| crate::test_report::CpuUtilization {
            host_total: v,
            host_user: 0.0,
            host_system: v,
            remote_total: 68.0,
            remote_user: 2.3,
            remote_system: 65.7,
        };
        let sum = crate::test_report::EndSum {
            start: 0.0,
            end: 1.0,
            seconds: 1.0,
            bytes: 0,
            bits_per_second: 0.0,
            retransmits: None,
            udp: None,
            sender: true,
        };
        let end = End {
            streams: Vec::new(),
            sum: None,
            sum_bidir_reverse: None,
            sum_sent: sum.clone(),
            sum_received: sum,
            sum_sent_bidir_reverse: None,
            sum_received_bidir_reverse: None,
            cpu_utilization_percent: cpu(24.4),
            sender_tcp_congestion: Some("bbr".into()),
            receiver_tcp_congestion: Some("cubic".into()),
        };
        assert_eq!(
            verbose_end(&end, false, true, false),
            [
                "CPU Utilization: local/sender 24.4% (0.0%u/24.4%s), remote/receiver 68.0% (2.3%u/65.7%s)",
                "snd_tcp_congestion bbr",
                "rcv_tcp_congestion cubic",
            ]
        );
        // A UDP test the client receives: no CPU line, no congestion lines.
        assert!(verbose_end(&end, true, false, false).is_empty());
        assert_eq!(verbose_end(&end, false, true, true).len(), 6);
    }
}
