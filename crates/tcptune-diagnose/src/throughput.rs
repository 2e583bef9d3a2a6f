//! The end-of-test diagnosis of a throughput test (`tcptune test`, the lab's runner): each
//! stream judged by the one engine ([`crate::engine::diagnose`]) over the whole test, then the
//! test as a whole by the same engine ([`crate::engine::flows`]: the limit of most of the
//! bytes, the bounds summed over streams, one recommendation per knob). This module holds the
//! test's types, their text, and the bufferbloat finding's place in them.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_model::{Dur, Rate};

use crate::advice::InEffect;
pub use crate::advice::Recommendation;
use crate::engine::{
    self, Bound, Context, CpuUse, Diagnosis, Evidence, Limit, NotShown, Observations, Series,
};

/// What the caller knows about the test and the hosts: the engine's context.
pub type TestContext = Context;

/// One stream's measurements.
#[derive(Debug, Clone, Copy)]
pub struct StreamInput<'a> {
    /// The stream's number.
    pub id: u32,
    /// tcp_info of the sending end, in time order (empty when that end is not ours).
    pub sender: &'a [Sample],
    /// tcp_info of the receiving end, in time order (may be empty).
    pub receiver: &'a [Sample],
    /// Bytes the receiver got.
    pub received_bytes: u64,
    /// How long the test ran.
    pub seconds: Dur,
    /// CPU use of the ends over the test.
    pub cpu: &'a [CpuUse],
}

use crate::Sample;

pub mod record;
pub use record::ContextRecord;

/// The diagnosis of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamDiagnosis {
    /// The stream's number.
    pub id: u32,
    /// The goodput the receiver got.
    pub achieved_bps: Rate,
    /// What limited it.
    pub limit: Limit,
    /// Share of the test time under that limit, where the shares say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// One line with the numbers.
    pub verdict: String,
    /// What would decide the limit, when it is not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The figures the decision was made on.
    pub evidence: Evidence,
    /// The models' bounds for the measured conditions.
    pub bounds: Vec<Bound>,
    /// Models left out of `bounds` because their assumptions do not hold for this stream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bounds_not_shown: Vec<NotShown>,
    #[serde(skip)]
    /// What would help this stream, before merging with the others'.
    pub needs: Vec<crate::advice::Need>,
    /// What to change, one per knob, checked against the settings in effect.
    pub recommendations: Vec<Recommendation>,
    /// What the stream had in effect, against which the recommendations were checked.
    pub in_effect: InEffect,
    /// True when something should change (exit code 1).
    pub problem: bool,
}

impl StreamDiagnosis {
    /// Stream `id` as the engine judged it.
    pub fn of(id: u32, d: Diagnosis) -> StreamDiagnosis {
        StreamDiagnosis {
            id,
            achieved_bps: d.evidence.achieved_bps.unwrap_or(Rate::from_bps(0.0)),
            limit: d.limit,
            share: d.share,
            verdict: d.verdict,
            missing: d.missing,
            evidence: d.evidence,
            bounds: d.bounds,
            bounds_not_shown: d.bounds_not_shown,
            needs: d.needs,
            recommendations: d.recommendations,
            in_effect: d.in_effect,
            problem: d.problem,
        }
    }

    /// The stream's judgement as the engine gives one flow's (for [`engine::invariants`]).
    pub fn diagnosis(&self) -> Diagnosis {
        Diagnosis {
            limit: self.limit,
            share: self.share,
            verdict: self.verdict.clone(),
            missing: self.missing.clone(),
            evidence: self.evidence.clone(),
            bounds: self.bounds.clone(),
            bounds_not_shown: self.bounds_not_shown.clone(),
            needs: self.needs.clone(),
            recommendations: self.recommendations.clone(),
            in_effect: self.in_effect.clone(),
            problem: self.problem,
        }
    }
}

/// The diagnosis of the whole test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TestDiagnosis {
    /// The goodput of every stream together.
    pub achieved_bps: Rate,
    /// The limit of most of the bytes.
    pub limit: Limit,
    /// One line with the numbers.
    pub verdict: String,
    /// Bounds for the whole test (the sums of the streams' bounds, and the path's payload).
    pub bounds: Vec<Bound>,
    /// One per knob: the largest need over the streams.
    pub recommendations: Vec<Recommendation>,
    /// Each stream's own diagnosis.
    pub streams: Vec<StreamDiagnosis>,
    /// The other direction of a bidirectional test, judged and summed on its own (its sender
    /// is the other host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<Box<TestDiagnosis>>,
    /// Latency under the load rose far beyond idle (from the test's latency probes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bufferbloat: Option<crate::latency::BloatFinding>,
    /// True when something should change (exit code 1).
    pub problem: bool,
    /// What the engine knew of this direction besides the samples: a recorded test is judged
    /// again from its samples and this ([`record`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextRecord>,
}

/// The diagnosis of one stream.
pub fn diagnose_stream(input: &StreamInput<'_>, ctx: &Context) -> StreamDiagnosis {
    let obs = Observations {
        sender: Series::of(input.sender),
        receiver: Series::of(input.receiver),
        delivered: Some((input.received_bytes, input.seconds)),
        cpu: input.cpu,
        capture: None,
    };
    StreamDiagnosis::of(input.id, engine::diagnose(&obs, ctx, "of the test"))
}

/// A bidirectional test: each direction judged and summed on its own, with its own context
/// (the sender of the reverse direction is the other host).
pub fn diagnose_bidir(
    forward: Vec<StreamDiagnosis>,
    reverse: Vec<StreamDiagnosis>,
    ctx: &Context,
    reverse_ctx: &Context,
) -> TestDiagnosis {
    let mut t = diagnose_test(forward, ctx);
    let r = diagnose_test(reverse, reverse_ctx);
    t.problem |= r.problem;
    t.reverse = Some(Box::new(r));
    t
}

/// The diagnosis of a whole test from its streams' diagnoses (in one direction or both): the
/// engine judges the streams together ([`engine::flows::together`]).
pub fn diagnose_test(streams: Vec<StreamDiagnosis>, ctx: &Context) -> TestDiagnosis {
    let ids: Vec<u32> = streams.iter().map(|s| s.id).collect();
    let mut flows: Vec<Diagnosis> = streams.iter().map(StreamDiagnosis::diagnosis).collect();
    let whole = engine::flows::together(&mut flows, ctx);
    TestDiagnosis {
        achieved_bps: whole.achieved_bps,
        limit: whole.limit,
        verdict: whole.verdict,
        bounds: whole.bounds,
        recommendations: whole.recommendations,
        streams: ids
            .into_iter()
            .zip(flows)
            .map(|(id, d)| StreamDiagnosis::of(id, d))
            .collect(),
        reverse: None,
        bufferbloat: None,
        problem: whole.problem,
        context: Some(ContextRecord::from(ctx)),
    }
}

/// Adds a bufferbloat finding: its fixes join the test's recommendations (one per knob,
/// checked against what is in effect), and it is a problem.
pub fn add_bloat(t: &mut TestDiagnosis, finding: crate::latency::BloatFinding, ctx: &Context) {
    let mut needs: Vec<crate::advice::Need> = t
        .streams
        .iter()
        .flat_map(|s| s.needs.iter().cloned())
        .collect();
    needs.extend(finding.needs.iter().cloned());
    t.recommendations = crate::advice::advise(&needs, &InEffect::of(ctx));
    t.problem = true;
    t.bufferbloat = Some(finding);
}

fn write_bounds(f: &mut fmt::Formatter<'_>, bounds: &[Bound], indent: &str) -> fmt::Result {
    for b in bounds {
        writeln!(
            f,
            "{indent}{:<12} {:>14}  ({}); this test reached {}",
            b.model,
            b.rate_bps.to_string(),
            b.inputs,
            engine::pct(b.achieved_fraction)
        )?;
    }
    Ok(())
}

impl TestDiagnosis {
    fn write_direction(&self, f: &mut fmt::Formatter<'_>, title: &str) -> fmt::Result {
        writeln!(f, "{title}: {}", self.verdict)?;
        if self.streams.len() > 1 {
            for s in &self.streams {
                writeln!(f, "  [{:>3}] {}", s.id, s.verdict)?;
            }
        }
        let (bounds, not_shown): (&[Bound], Vec<&NotShown>) = match self.streams.as_slice() {
            [one] => (&one.bounds, one.bounds_not_shown.iter().collect()),
            _ => (&self.bounds, Vec::new()),
        };
        if !bounds.is_empty() {
            writeln!(f, "Bounds:")?;
            write_bounds(f, bounds, "  ")?;
        }
        for n in not_shown {
            writeln!(f, "  {:<12} not shown: {}", n.model, n.why)?;
        }
        if let Some(b) = &self.bufferbloat {
            writeln!(f, "Finding: {}", b.text)?;
        }
        if !self.recommendations.is_empty() {
            writeln!(f, "What would help:")?;
            for r in &self.recommendations {
                writeln!(f, "  on {}: {}", r.on, r.change)?;
                if let Some(c) = &r.command {
                    writeln!(f, "    {c}")?;
                }
            }
        }
        let undecided = matches!(
            self.limit,
            Limit::NotEnoughEvidence | Limit::ConflictingEvidence
        );
        if undecided && self.streams.len() > 1 {
            let mut seen: Vec<&String> = Vec::new();
            for m in self.streams.iter().flat_map(|s| &s.missing) {
                if !seen.contains(&m) {
                    seen.push(m);
                }
            }
            writeln!(f, "Not enough evidence to name the limit. Missing:")?;
            for m in seen {
                writeln!(f, "  {m}")?;
            }
        } else if !self.problem && !undecided {
            writeln!(f, "No problem found.")?;
        }
        Ok(())
    }
}

impl fmt::Display for TestDiagnosis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reverse {
            None => self.write_direction(f, "Diagnosis"),
            Some(r) => {
                self.write_direction(f, "Diagnosis (this host sending)")?;
                writeln!(f)?;
                r.write_direction(f, "Diagnosis (the server sending)")
            }
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod wave3_tests;
