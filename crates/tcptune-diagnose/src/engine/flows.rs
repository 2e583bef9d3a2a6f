//! Flows that share one path judged together (a test's parallel streams): the rules that need
//! every flow's judgement at once. A flow below its even share that nothing of its own held
//! back is at the path's capacity when the flows together fill it; the whole's limit is the
//! limit of most of the bytes; the whole's bounds are the flows' summed; its advice is one
//! change per knob over every flow's needs. Each relabelled flow passes the engine's
//! invariants again ([`super::invariants`]).

use tcptune_model::Rate;

use super::{advice, invariants, pct, Bound, Context, Diagnosis, InEffect, Limit, AT_CAPACITY};

/// The judgement of the flows together.
#[derive(Debug, Clone, PartialEq)]
pub struct Together {
    /// The goodput of every flow together.
    pub achieved_bps: Rate,
    /// The limit of most of the bytes.
    pub limit: Limit,
    /// One line with the numbers.
    pub verdict: String,
    /// The flows' bounds summed (the path's own bound once: it is the whole path's).
    pub bounds: Vec<Bound>,
    /// One per knob: the largest need over the flows.
    pub recommendations: Vec<advice::Recommendation>,
    /// True when something should change.
    pub problem: bool,
}

/// What a flow delivered (0 when the engine had no count of it).
fn achieved(d: &Diagnosis) -> f64 {
    d.evidence.achieved_bps.map(|r| r.bps()).unwrap_or(0.0)
}

/// Judges `flows` (each already diagnosed on its own by [`super::diagnose`]) as one test over
/// one path; flows whose limit changes because of the others are rewritten in place.
pub fn together(flows: &mut [Diagnosis], ctx: &Context) -> Together {
    let achieved_bps = Rate::from_bps(flows.iter().map(achieved).sum());
    share_the_path(flows, achieved_bps, ctx);
    let by_limit = bytes_by_limit(flows);
    let limit = by_limit
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|x| x.0)
        .unwrap_or(Limit::NotEnoughEvidence);
    let needs: Vec<advice::Need> = flows.iter().flat_map(|d| d.needs.iter().cloned()).collect();
    let recommendations = advice::advise(&needs, &InEffect::of(ctx));
    let verdict = match &*flows {
        [one] => one.verdict.clone(),
        _ => format!(
            "{} at {achieved_bps} over {} streams ({})",
            limit.label(),
            flows.len(),
            by_limit
                .iter()
                .map(|(l, _)| format!(
                    "{} {}",
                    flows.iter().filter(|d| d.limit == *l).count(),
                    l.label()
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Together {
        achieved_bps,
        limit,
        verdict,
        bounds: summed_bounds(flows, achieved_bps),
        recommendations,
        problem: flows.iter().any(|d| d.problem),
    }
}

/// Streams share the path unequally (congestion control is not perfectly fair): when together
/// they carry the path's payload, a stream below its even share that nothing of its own held
/// back (cwnd/pacing, or the loss of a full queue) is at the capacity too.
fn share_the_path(flows: &mut [Diagnosis], total: Rate, ctx: &Context) {
    let path_payload: f64 = flows
        .iter()
        .filter_map(|d| d.evidence.path_goodput_bps)
        .map(|r| r.bps())
        .sum();
    let all_streams = ctx.streams.max(1) as usize;
    if flows.len() < 2
        || path_payload <= 0.0
        || flows.len() != all_streams
        || total.bps() < AT_CAPACITY * path_payload
    {
        return;
    }
    let n = flows.len();
    for d in flows.iter_mut() {
        if !matches!(d.limit, Limit::Network | Limit::Loss) {
            continue;
        }
        d.limit = Limit::PathCapacity;
        d.share = None;
        d.problem = !d.evidence.missing_options.is_empty();
        d.needs.retain(|need| {
            !matches!(
                need.knob,
                advice::Knob::FindLoss | advice::Knob::CongestionControl
            )
        });
        d.recommendations = advice::advise(&d.needs, &d.in_effect);
        d.verdict = format!(
            "{} at {}: the {n} streams together carry {} of the {} of payload the path carries",
            Limit::PathCapacity.label(),
            Rate::from_bps(achieved(d)),
            pct(total.bps() / path_payload),
            Rate::from_bps(path_payload)
        );
        invariants::enforce(d);
    }
}

/// Bytes (as goodput) under each limit, in the order the limits first appear; a flow that
/// delivered nothing still counts, so its limit is named.
fn bytes_by_limit(flows: &[Diagnosis]) -> Vec<(Limit, f64)> {
    let mut by_limit: Vec<(Limit, f64)> = Vec::new();
    for d in flows {
        let bytes = achieved(d).max(1.0);
        match by_limit.iter_mut().find(|(l, _)| *l == d.limit) {
            Some((_, b)) => *b += bytes,
            None => by_limit.push((d.limit, bytes)),
        }
    }
    by_limit
}

/// Each model's bound summed over the flows, where every flow has it; the path's payload is
/// the whole path's bound, not a sum.
fn summed_bounds(flows: &[Diagnosis], achieved: Rate) -> Vec<Bound> {
    let mut bounds = Vec::new();
    for model in ["window/RTT", "Mathis", "PFTK", "path payload"] {
        let per: Vec<&Bound> = flows
            .iter()
            .filter_map(|d| d.bounds.iter().find(|b| b.model == model))
            .collect();
        if per.is_empty() || per.len() != flows.len() {
            continue;
        }
        let whole_path = model == "path payload";
        let rate_bps = if whole_path {
            per[0].rate_bps
        } else {
            Rate::from_bps(per.iter().map(|b| b.rate_bps.bps()).sum())
        };
        bounds.push(Bound {
            model: model.into(),
            rate_bps,
            inputs: if whole_path {
                per[0].inputs.clone()
            } else {
                format!("sum over {} streams", per.len())
            },
            achieved_fraction: if rate_bps.bps() > 0.0 {
                achieved.bps() / rate_bps.bps()
            } else {
                0.0
            },
        });
    }
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Evidence;

    fn flow(limit: Limit, mbit: f64, path_share_mbit: f64) -> Diagnosis {
        Diagnosis {
            limit,
            share: Some(1.0),
            verdict: limit.label().to_string(),
            missing: Vec::new(),
            evidence: Evidence {
                achieved_bps: Some(Rate::from_bps(mbit * 1e6)),
                path_goodput_bps: Some(Rate::from_bps(path_share_mbit * 1e6)),
                ..Evidence::default()
            },
            bounds: Vec::new(),
            bounds_not_shown: Vec::new(),
            needs: Vec::new(),
            recommendations: Vec::new(),
            in_effect: InEffect::default(),
            problem: true,
        }
    }

    fn ctx(streams: u32) -> Context {
        Context {
            streams,
            ..Context::default()
        }
    }

    #[test]
    fn streams_that_fill_the_path_together_are_at_its_capacity_and_keep_the_invariants() {
        // 60 + 30 of the 95 Mbit/s the path carries: the slower stream held nothing back.
        let mut flows = vec![
            flow(Limit::Network, 60.0, 47.5),
            flow(Limit::Loss, 30.0, 47.5),
        ];
        let t = together(&mut flows, &ctx(2));
        assert_eq!(t.limit, Limit::PathCapacity, "{}", t.verdict);
        assert!(!t.problem, "{}", t.verdict);
        for d in &flows {
            assert_eq!(d.limit, Limit::PathCapacity, "{}", d.verdict);
            assert_eq!(invariants::check(d), Vec::new(), "{}", d.verdict);
            assert!(
                d.verdict.contains("the 2 streams together carry 95%"),
                "{}",
                d.verdict
            );
        }
    }

    #[test]
    fn streams_below_the_path_keep_their_limits_and_the_most_bytes_name_the_whole() {
        let mut flows = vec![
            flow(Limit::ReceiverWindow, 10.0, 33.3),
            flow(Limit::ReceiverWindow, 10.0, 33.3),
            flow(Limit::Loss, 30.0, 33.3),
        ];
        let t = together(&mut flows, &ctx(3));
        assert_eq!(t.limit, Limit::Loss, "{}", t.verdict);
        assert!(t.problem);
        assert_eq!(flows[0].limit, Limit::ReceiverWindow);
        let counts = format!(
            "(2 {}, 1 {})",
            Limit::ReceiverWindow.label(),
            Limit::Loss.label()
        );
        assert!(t.verdict.contains(&counts), "{}", t.verdict);
        assert!(t.verdict.contains("over 3 streams"), "{}", t.verdict);
    }

    #[test]
    fn a_test_that_lost_a_stream_is_not_judged_as_filling_the_path() {
        // Two of the three streams reported: their sum says nothing of the path's fill.
        let mut flows = vec![
            flow(Limit::Network, 60.0, 47.5),
            flow(Limit::Loss, 30.0, 47.5),
        ];
        let t = together(&mut flows, &ctx(3));
        assert_eq!(flows[1].limit, Limit::Loss, "{}", t.verdict);
    }
}
