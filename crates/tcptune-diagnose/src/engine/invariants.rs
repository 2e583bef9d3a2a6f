//! The engine's promises about every diagnosis it prints, checked in one place.
//!
//! A verdict never contradicts its own evidence and advice is never harmful. [`check`] lists
//! what a finished [`Diagnosis`] breaks of that, from the diagnosis alone (its evidence,
//! bounds, recommendations and what the flow had in effect), so the same check runs on a
//! diagnosis just made, on one read back from JSON, and over the recorded corpus:
//! - a bound is a bound: the flow did not carry well over it ([`BOUND_SLACK`]);
//! - the verdict's class is not ruled out by its own bound (a window that allows less than
//!   the flow carried is not what held it);
//! - the test's own bulk sender is not application-limited unless something paced it;
//! - an undecided verdict says what is missing;
//! - the verdict and the advice blame the same thing (a slow reader, or a short buffer);
//! - no recommendation names what the flow already had in effect (its congestion control,
//!   socket buffer, write size, zero copy, more streams than cores), lowers a value unasked,
//!   or shares its knob with another.
//!
//! [`crate::engine::diagnose`] repairs what it can before printing (a model whose assumptions
//! fail is moved to `bounds_not_shown` with the reason; a class its bound rules out becomes
//! [`Limit::ConflictingEvidence`]); debug builds then assert that nothing is left, so every
//! diagnosis a test produces is checked.

use super::*;
use crate::advice::{InEffect, LARGE_WRITE_BYTES};

/// A flow may carry up to this multiple of a bound before the bound is wrong: medians of
/// sampled windows and RTTs are not the exact window in flight.
pub const BOUND_SLACK: f64 = 1.25;

/// One broken promise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Violation {
    /// A stable name of the rule: `bound_exceeded`, `verdict_bound`, `bulk_sender_application`,
    /// `undecided_without_missing`, `verdict_advice`, `advice_in_effect`, `advice_lowers`,
    /// `advice_twice`, `not_a_number`.
    pub rule: String,
    /// What broke it, with the numbers.
    pub detail: String,
}

fn v(rule: &str, detail: String) -> Violation {
    Violation {
        rule: rule.into(),
        detail,
    }
}

/// Whether the flow's congestion control is one the loss models describe (Reno, CUBIC; an
/// unknown one is taken as the Linux default family).
pub fn loss_based(congestion: Option<&str>) -> bool {
    !congestion.is_some_and(|c| c.eq_ignore_ascii_case("bbr") || c.starts_with("bbr"))
}

/// The most a flow under `limit` can carry by that class's own numbers, with its name, where
/// the evidence gives one. Not for the send buffer: the kernel lets a writer past `sndbuf` by
/// whole TSO segments (a 4 KiB SO_SNDBUF kept 46 segments in flight over 20 ms on 6.18), so
/// the buffer over the RTT is no bound.
pub fn class_bound(
    limit: Limit,
    e: &Evidence,
    congestion: Option<&str>,
    streams: u32,
) -> Option<(Rate, String)> {
    let rtt = e.min_rtt_s.or(e.rtt_s).filter(|r| *r > Dur::ZERO)?;
    match limit {
        Limit::ReceiverWindow => {
            // The largest window it had, not the median: a window that grew during the flow
            // carried more than its median allows.
            let w = e.peer_window_bytes.filter(|&w| w > 0)?;
            let (w, what) = match e.peer_window_max_bytes.filter(|&m| m > w) {
                Some(m) => (m, "its largest window"),
                None => (w, "its window"),
            };
            Some((
                Rate::from_bytes_per(Bytes::new(w), rtt),
                format!("{what} {} over the minimum RTT {rtt}", size(w)),
            ))
        }
        Limit::Loss if loss_based(congestion) => {
            let (_, b) = loss_bound(e)?;
            Some((
                Rate::from_bps(b.bps() * BEYOND_LOSS_BOUND / BOUND_SLACK),
                format!(
                    "{BEYOND_LOSS_BOUND}× the {b} a loss-based congestion control averages at \
                     its loss rate"
                ),
            ))
        }
        // A stream may take more than its even share, never more than the whole path.
        Limit::PathCapacity => e.path_goodput_bps.map(|g| {
            (
                Rate::from_bps(g.bps() * streams.max(1) as f64),
                "the path's payload rate (from --path-rate)".to_string(),
            )
        }),
        _ => None,
    }
}

/// What `d` breaks of the engine's promises (empty when nothing).
pub fn check(d: &Diagnosis) -> Vec<Violation> {
    let mut out = Vec::new();
    let e = &d.evidence;
    let achieved = e.achieved_bps.map(|a| a.bps());
    if achieved.is_some_and(|a| !a.is_finite() || a < 0.0) {
        out.push(v("not_a_number", format!("achieved {achieved:?}")));
    }
    if let Some(s) = &e.shares {
        let parts = [s.rwnd, s.sndbuf, s.network, s.application.unwrap_or(0.0)];
        if parts
            .iter()
            .any(|x| !x.is_finite() || *x < -1e-9 || *x > 1.0 + 1e-6)
        {
            out.push(v("not_a_number", format!("shares {parts:?}")));
        }
    }
    for b in &d.bounds {
        if b.achieved_fraction > BOUND_SLACK {
            out.push(v(
                "bound_exceeded",
                format!(
                    "{} {} was reached {:.0}%: not a bound",
                    b.model,
                    b.rate_bps,
                    b.achieved_fraction * 100.0
                ),
            ));
        }
    }
    let ie = &d.in_effect;
    let bound = class_bound(d.limit, e, ie.congestion.as_deref(), ie.streams);
    if let (Some(a), Some((b, what))) = (achieved, bound) {
        if a > BOUND_SLACK * b.bps() {
            out.push(v(
                "verdict_bound",
                format!(
                    "{}: {what} allows {b}, below the {} it carried",
                    d.limit,
                    Rate::from_bps(a)
                ),
            ));
        }
    }
    let paced = d.in_effect.rate_cap_bps.is_some() || e.max_pacing_rate_bps.is_some();
    if d.limit == Limit::Application && d.in_effect.bulk_sender && !paced {
        out.push(v(
            "bulk_sender_application",
            "application limited, but the sender is a bulk writer nothing paced".into(),
        ));
    }
    if matches!(
        d.limit,
        Limit::NotEnoughEvidence | Limit::ConflictingEvidence
    ) && d.missing.is_empty()
    {
        out.push(v(
            "undecided_without_missing",
            format!("{} without saying what is missing", d.limit),
        ));
    }
    out.extend(verdict_against_advice(d));
    out.extend(check_advice(&d.recommendations, &d.in_effect));
    out
}

/// The verdict and the advice answer "the buffer or the reader?" the same way: a verdict that
/// blames a slow reader comes with no larger receive buffer, and reader advice under a
/// receiver-window verdict comes with the verdict's words for it.
fn verdict_against_advice(d: &Diagnosis) -> Option<Violation> {
    use crate::advice::Knob;
    let says_reader = d.verdict.contains("reads slowly");
    let knobs: Vec<Knob> = d.recommendations.iter().map(|r| r.knob).collect();
    let buffer = knobs
        .iter()
        .find(|k| matches!(k, Knob::TcpRmemMax | Knob::RmemMax));
    if let (true, Some(k)) = (says_reader, buffer) {
        return Some(v(
            "verdict_advice",
            format!("the verdict blames a slow reader, the advice raises {k:?}"),
        ));
    }
    if d.limit == Limit::ReceiverWindow && !says_reader && knobs.contains(&Knob::ReceiverReads) {
        return Some(v(
            "verdict_advice",
            "the advice blames the reader, the verdict does not".into(),
        ));
    }
    None
}

/// What the recommendations break: advice in effect, lowered unasked, a knob twice.
pub fn check_advice(recs: &[Recommendation], in_effect: &InEffect) -> Vec<Violation> {
    let mut out = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        if recs[..i].iter().any(|o| o.knob == r.knob && o.on == r.on) {
            out.push(v(
                "advice_twice",
                format!("{:?} on {} recommended twice", r.knob, r.on),
            ));
        }
        let num = |s: &Option<String>| s.as_deref().and_then(|x| x.parse::<u64>().ok());
        if let (Some(c), Some(p)) = (num(&r.current), num(&r.proposed)) {
            if p < c && !in_effect.fit {
                out.push(v(
                    "advice_lowers",
                    format!("{}: {c} → {p} unasked", r.change),
                ));
            }
            if p <= c && !in_effect.fit && r.command.is_some() {
                out.push(v(
                    "advice_in_effect",
                    format!("{}: {p} is in effect", r.change),
                ));
            }
        }
        if let Some(msg) = names_in_effect(r, in_effect) {
            out.push(v("advice_in_effect", msg));
        }
    }
    out
}

/// A recommendation that names what the flow already had.
fn names_in_effect(r: &Recommendation, e: &InEffect) -> Option<String> {
    match r.knob {
        Knob::CongestionControl => {
            let (flow, proposed) = (e.congestion.as_deref()?, r.proposed.as_deref()?);
            (flow == proposed).then(|| format!("{proposed}: the flow already ran it"))
        }
        Knob::SocketBuffer => {
            let (w, p) = (
                e.socket_buffer_bytes?,
                r.proposed.as_deref()?.parse::<u64>().ok()?,
            );
            (p <= w).then(|| format!("-w {p}: the flow already had -w {w}"))
        }
        Knob::Cpu => {
            let text = &r.change;
            if e.zerocopy && text.contains("(-Z)") {
                return Some("-Z: the sender already sent with zero copy".into());
            }
            if e.write_bytes.is_some_and(|w| w >= LARGE_WRITE_BYTES) && text.contains("(-l)") {
                return Some(format!(
                    "-l: the sender already wrote {} at a time",
                    size(e.write_bytes.unwrap_or(0))
                ));
            }
            let at_cores = e.cores.is_some_and(|c| e.streams >= c);
            (at_cores && text.contains("(-P)")).then(|| {
                format!(
                    "-P: {} streams already on {} cores",
                    e.streams,
                    e.cores.unwrap_or(0)
                )
            })
        }
        _ => None,
    }
}

/// Why a model's figure is not a bound for this flow, when it is not.
pub(super) fn not_a_bound(b: &Bound) -> Option<NotShown> {
    if b.achieved_fraction <= BOUND_SLACK {
        return None;
    }
    let reached = format!(
        "the flow carried {} of its {}",
        pct(b.achieved_fraction),
        b.rate_bps
    );
    let why = match b.model.as_str() {
        "window/RTT" => format!(
            "{reached}: the window sampled (a median) is not the window in flight over the \
             test (it grew, or was read under load)"
        ),
        "Mathis" => format!(
            "{reached}: its losses were too few or too bunched for the model's steady random \
             loss"
        ),
        "PFTK" => format!(
            "{reached}: the model's timeout term assumes losses repaired by timeouts; this \
             flow repaired its losses faster, or they came bunched"
        ),
        "path payload" => format!("{reached}: the path rate given is below what the path carried"),
        _ => reached,
    };
    Some(NotShown {
        model: b.model.clone(),
        why,
    })
}

/// A class its own bound rules out, in words.
pub(super) struct Conflict {
    pub(super) verdict: String,
    pub(super) missing: String,
}

/// The conflict when `limit`'s own bound allows well under what the flow carried.
pub(super) fn ruled_out(
    limit: Limit,
    achieved: Option<Rate>,
    bound: Option<(Rate, String)>,
) -> Option<Conflict> {
    let (a, (b, what)) = (achieved?, bound?);
    (a.bps() > BOUND_SLACK * b.bps()).then(|| Conflict {
        verdict: format!(
            "{} at {a}: {} by the kernel's counters, but {what} allows {b}",
            Limit::ConflictingEvidence.label(),
            limit.label()
        ),
        missing: format!(
            "what held the flow: the signs pointed to {limit}, but {what} allows only {b}, \
             below the {a} it carried; samples over the whole transfer from both ends would \
             decide"
        ),
    })
}

/// The decision with the class its own bound rules out turned into conflicting evidence (for
/// `classify` as for `diagnose`: a conns row says what a test would).
pub(super) fn checked(mut d: Decision, e: &Evidence, ctx: &Context) -> Decision {
    let cc = ctx.congestion.map(|c| c.to_string());
    let bound = class_bound(d.limit, e, cc.as_deref(), ctx.streams);
    if let Some(conflict) = ruled_out(d.limit, e.achieved_bps, bound) {
        let text = conflict.verdict;
        // The verdict text is built from the decision: keep only the reason after the class.
        let why = text
            .split_once(": ")
            .map(|(_, w)| w.to_string())
            .unwrap_or(text);
        d = Decision {
            limit: Limit::ConflictingEvidence,
            share: None,
            why,
            missing: vec![conflict.missing],
        };
    }
    d
}

/// Makes `d` keep the promises it can be made to keep: bounds that are not bounds move to
/// `bounds_not_shown`; a class its own bound rules out becomes conflicting evidence (its
/// needs then are only the handshake options); advice that breaks a rule is dropped.
pub(super) fn enforce(d: &mut Diagnosis) {
    let (kept, moved): (Vec<Bound>, Vec<Bound>) = std::mem::take(&mut d.bounds)
        .into_iter()
        .partition(|b| not_a_bound(b).is_none());
    d.bounds = kept;
    d.bounds_not_shown
        .extend(moved.iter().filter_map(not_a_bound));
    let ie = &d.in_effect;
    let bound = class_bound(d.limit, &d.evidence, ie.congestion.as_deref(), ie.streams);
    if let Some(conflict) = ruled_out(d.limit, d.evidence.achieved_bps, bound) {
        d.limit = Limit::ConflictingEvidence;
        d.share = None;
        d.verdict = conflict.verdict;
        d.missing.push(conflict.missing);
        d.needs
            .retain(|n| matches!(n.knob, Knob::Sack | Knob::Timestamps | Knob::WindowScaling));
        d.recommendations = advice::advise(&d.needs, &d.in_effect);
        d.problem = !d.evidence.missing_options.is_empty();
    }
    // Advice is safe by construction (advice::advise); what still breaks a rule is dropped
    // rather than printed.
    let mut kept: Vec<Recommendation> = Vec::new();
    for r in std::mem::take(&mut d.recommendations) {
        let twice = kept.iter().any(|k| k.knob == r.knob && k.on == r.on);
        if !twice && check_advice(std::slice::from_ref(&r), &d.in_effect).is_empty() {
            kept.push(r);
        }
    }
    d.recommendations = kept;
}
