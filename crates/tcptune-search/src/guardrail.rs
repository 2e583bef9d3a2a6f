//! The change trials' loaded-RTT guardrail: a change whose tests queue more than the limit
//! allows is rolled back, whatever throughput it wins. Judged like throughput, at the trial's
//! looks: one pair is not evidence. On 100 Mbit/s × 20 ms with 2 ms of jitter and a competing
//! upload, an A/A trial's first pair read 53.6 against 84.0 ms (the upload's swing), which a
//! guardrail on one pair's means took for a change that grew the RTT by 57%.

use crate::hypothesis::Config;
use crate::stats::{compare_at, mean, Looks, Verdict};

/// Why the change under trial is rolled back for its loaded RTT, if it is: at any look when
/// B's RTT (`b_rtt`, one per test) ranks above A's grown by the limit at 95% over the looks;
/// and, when the throughput verdict would keep the change (`keeping`), when the means grew past
/// the limit at all, shown or not: a change is kept only on evidence that it stays within it.
/// `gain`: the trial's throughput gain, for the reason.
pub(crate) fn rtt_past_the_limit(
    cfg: &Config,
    a_rtt: &[f64],
    b_rtt: &[f64],
    looks: Looks,
    keeping: bool,
    gain: f64,
) -> Option<String> {
    if a_rtt.is_empty() || b_rtt.is_empty() {
        return None;
    }
    let (ra, rb) = (mean(a_rtt), mean(b_rtt));
    let limit = cfg.max_rtt_growth;
    let shown = matches!(
        compare_at(a_rtt, b_rtt, 0.05, looks, limit),
        Verdict::Better | Verdict::BetterByEstimate
    );
    let pct = limit * 100.0;
    let how = if shown {
        format!("past the +{pct:.0}% limit at 95%")
    } else if keeping && rb > ra * (1.0 + limit) {
        format!(
            "past the +{pct:.0}% limit on the means (not shown at 95%, but a change is kept only within it)"
        )
    } else {
        return None;
    };
    Some(format!(
        "guardrail: loaded RTT grew from {:.2} ms to {:.2} ms, {how} (throughput {:+.1}%)",
        ra * 1e3,
        rb * 1e3,
        gain * 100.0
    ))
}
