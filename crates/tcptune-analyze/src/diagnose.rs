//! What a capture says about one flow: each direction that carried data is judged by the one
//! diagnosis engine (`tcptune_diagnose::engine`, fed what the capture shows: windows, zero
//! windows, retransmissions and how they were repaired, RTT samples), followed by the facts
//! behind it (retransmission breakdown, reordering, capture gaps). The class names and
//! thresholds are the engine's, the same that `conns`, `watch` and `test` use.

use tcptune_diagnose::engine::{classify, CaptureEvidence, Context, Observations, Series, Verdict};

use crate::analysis::{DirStats, FlowReport};

fn pct(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

/// The engine's input for the data sent one way: `d` is that direction, `back` the other one
/// (whose packets carry the receiver's window and zero windows).
fn capture_evidence(d: &DirStats, back: &DirStats, r: &FlowReport) -> CaptureEvidence {
    let f = &d.flags;
    let (min_rtt, mean_rtt) = match (path_rtt_instead(d, r), d.rtt.as_ref()) {
        (Some(irtt), _) => (Some(irtt), Some(irtt)),
        (None, Some(x)) => (Some(x.min_s), Some(x.mean_s)),
        (None, None) => (None, None),
    };
    CaptureEvidence {
        data_packets: d.data_packets,
        window_full: f.window_full,
        zero_window: back.flags.zero_window,
        retransmissions: f.retransmission,
        fast_retransmissions: f.fast_retransmission,
        timeout_retransmissions: f.plain_retransmission,
        spurious_retransmissions: f.spurious_retransmission,
        payload_bytes: d.unique_bytes.get(),
        duration: r.duration_s,
        min_rtt,
        mean_rtt,
        max_window_bytes: back.window.as_ref().map(|w| w.max_bytes.get()),
        mss: (d.max_segment_bytes > 0).then_some(d.max_segment_bytes),
    }
}

/// The handshake's round trip when a direction's own RTT samples cannot be the path's.
/// A data segment's RTT sample is the time from the segment passing the capture point to its
/// ACK passing it: the whole path only where the capture sits at the sender. Captured at the
/// receiver it is the receiver's ACK delay (microseconds). The handshake (SYN to the ACK of
/// the SYN-ACK) crosses the whole path wherever the capture sits, so when the data's samples
/// stay under half of it the capture is at the receiver and the handshake's figure is the
/// path's round trip (idle: without the queue the load adds).
fn path_rtt_instead(d: &DirStats, r: &FlowReport) -> Option<tcptune_model::Dur> {
    let irtt = r.initial_rtt_s?;
    let samples = d.rtt.as_ref()?;
    (samples.mean_s.secs() < irtt.secs() / 2.0).then_some(irtt)
}

fn dir_findings(name: &str, d: &DirStats, out: &mut Vec<String>) {
    let f = &d.flags;
    if f.retransmission > 0 {
        out.push(format!(
            "{name}: {} retransmissions ({:.2}% of data segments): {} fast, {} after a timeout or \
             tail loss, {} spurious; {} bytes retransmitted",
            f.retransmission,
            pct(f.retransmission, d.data_packets),
            f.fast_retransmission,
            f.plain_retransmission,
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
            "{name}: {} zero-window probes sent ({} keep-alives, which is how Wireshark labels \
             Linux's probes)",
            f.zero_window_probe, f.keep_alive
        ));
    }
}

/// What the holes were: the path's losses or reordering (filled later in the capture), or the
/// capture's own drops (never filled, or data acknowledged that the capture never saw).
fn gap_findings(r: &FlowReport, out: &mut Vec<String>) {
    let sum = |f: fn(&crate::analysis::GapCounts) -> u64| f(&r.a_to_b.gaps) + f(&r.b_to_a.gaps);
    let later = sum(|g| g.filled_later);
    let retransmitted = sum(|g| g.filled_by_retransmission);
    let never = sum(|g| g.never_filled);
    if later > 0 {
        out.push(format!(
            "{later} of the {} previous-segment-not-captured holes were filled later in the \
             capture ({retransmitted} by segments flagged as retransmissions): those packets were \
             lost or reordered upstream of the capture point, not dropped by the capture",
            r.flags.lost_segment
        ));
    }
    if never > 0 || r.flags.ack_lost_segment > 0 {
        out.push(format!(
            "the capture missed packets ({never} holes never filled, {} ACKed-unseen): the \
             capture point or its buffer dropped them, or the capture started mid-flow",
            r.flags.ack_lost_segment
        ));
    }
}

/// The engine's verdict on the data sent one way (0: a→b, 1: b→a), from what the capture
/// shows; `None` when that way carried no data.
pub fn direction_verdict(r: &FlowReport, dir: usize) -> Option<Verdict> {
    let (d, back) = if dir == 0 {
        (&r.a_to_b, &r.b_to_a)
    } else {
        (&r.b_to_a, &r.a_to_b)
    };
    if d.data_packets == 0 {
        return None;
    }
    let c = capture_evidence(d, back, r);
    let obs = Observations {
        sender: Series::None,
        receiver: Series::None,
        delivered: None,
        cpu: &[],
        capture: Some(&c),
    };
    Some(classify(&obs, &Context::default(), "of the capture").0)
}

/// Findings for one flow: each data direction's limit first, then the facts.
pub fn diagnose(r: &FlowReport) -> Vec<String> {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for (dir, name, d) in [(0, "a->b", &r.a_to_b), (1, "b->a", &r.b_to_a)] {
        let Some(v) = direction_verdict(r, dir) else {
            continue;
        };
        if let (Some(irtt), Some(x)) = (path_rtt_instead(d, r), d.rtt.as_ref()) {
            notes.push(format!(
                "{name}: captured at its receiver: its ACK round trips (mean {}) are the \
                 receiver's ACK delay, so the path's round trip is the handshake's {irtt}",
                x.mean_s
            ));
        }
        out.push(format!("{name}: {}", v.text));
    }
    out.append(&mut notes);
    dir_findings("a->b", &r.a_to_b, &mut out);
    dir_findings("b->a", &r.b_to_a, &mut out);
    gap_findings(r, &mut out);
    if r.flags.reused_ports > 0 {
        out.push(format!("ports reused {} times", r.flags.reused_ports));
    }
    if out.is_empty() {
        out.push("no data carried".into());
    }
    out
}
