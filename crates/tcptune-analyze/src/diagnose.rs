//! A short diagnosis of one flow from the capture alone: what the flags and statistics say
//! about what limited it (receive window, zero-window stalls, loss and how it was repaired,
//! reordering, capture gaps). Thresholds are deliberately low: these are findings to look at,
//! with their numbers, not verdicts.

use crate::report::{DirStats, FlowReport};

fn pct(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

fn dir_findings(name: &str, peer: &str, d: &DirStats, out: &mut Vec<String>) {
    let f = &d.flags;
    if d.data_packets == 0 {
        return;
    }
    if f.window_full > 0 {
        out.push(format!(
            "{name}: the receiver's window was full for {:.1}% of the data segments ({} of {}): \
             receive-window limited; a larger receive buffer at {peer} would help",
            pct(f.window_full, d.data_packets),
            f.window_full,
            d.data_packets
        ));
    }
    if f.retransmission > 0 {
        let timeouts = f.plain_retransmission;
        out.push(format!(
            "{name}: {} retransmissions ({:.2}% of data segments): {} fast, {} after a timeout or \
             tail loss, {} spurious; {} bytes retransmitted",
            f.retransmission,
            pct(f.retransmission, d.data_packets),
            f.fast_retransmission,
            timeouts,
            f.spurious_retransmission,
            d.retransmitted_bytes.get()
        ));
    }
    if f.out_of_order > 0 {
        out.push(format!(
            "{name}: {} segments out of order (within the iRTT of the highest one): reordering on \
             the path, or loss repaired quickly",
            f.out_of_order
        ));
    }
    if f.zero_window_probe > 0 {
        out.push(format!(
            "{name}: {} zero-window probes sent",
            f.zero_window_probe
        ));
    }
}

/// Findings for one flow, most important first.
pub fn diagnose(r: &FlowReport) -> Vec<String> {
    let mut out = Vec::new();
    for (name, d, other, peer) in [
        ("a->b", &r.a_to_b, &r.b_to_a, r.b.as_str()),
        ("b->a", &r.b_to_a, &r.a_to_b, r.a.as_str()),
    ] {
        if d.flags.zero_window > 0 && other.data_packets > 0 {
            let who = if name == "a->b" { &r.a } else { &r.b };
            out.push(format!(
                "{who} advertised a zero window {} times: its application did not read fast \
                 enough and the sender stalled ({} zero-window probes, {} keep-alives, which \
                 is how Wireshark labels Linux's probes)",
                d.flags.zero_window, other.flags.zero_window_probe, other.flags.keep_alive
            ));
        }
        let _ = peer;
    }
    dir_findings("a->b", &r.b, &r.a_to_b, &mut out);
    dir_findings("b->a", &r.a, &r.b_to_a, &mut out);
    let gaps = r.flags.lost_segment + r.flags.ack_lost_segment;
    if gaps > 0 {
        out.push(format!(
            "the capture missed packets ({} previous-segment-not-captured, {} ACKed-unseen): \
             the capture point or its buffer dropped them, or the capture started mid-flow",
            r.flags.lost_segment, r.flags.ack_lost_segment
        ));
    }
    if r.flags.reused_ports > 0 {
        out.push(format!("ports reused {} times", r.flags.reused_ports));
    }
    if out.is_empty() {
        out.push("no loss, window or reordering problems visible in the capture".into());
    }
    out
}
