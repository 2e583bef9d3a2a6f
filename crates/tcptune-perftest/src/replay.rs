//! A recorded `tcptune test --json` document judged again: the streams' tcp_info samples
//! (`tcptune.streams`), the bytes each receiver got (`end.streams`), the test's length, each
//! stream's CPU figures (from its recorded evidence) and each direction's engine context
//! (`tcptune.diagnosis.context`) rebuild the inputs the test gave the engine, and the engine
//! judges them as the test did. The diagnosis corpus (fixtures/diagnoses) and `bench/diagnose`
//! replay recorded tests through it, so a change of the engine is judged on traffic recorded once.

use serde::Deserialize;
use serde_json::Value;
use tcptune_diagnose::engine::Context;
use tcptune_diagnose::throughput::{
    diagnose_bidir, diagnose_stream, diagnose_test, StreamDiagnosis, StreamInput, TestDiagnosis,
};
use tcptune_diagnose::Sample;
use tcptune_model::Dur;

use crate::test_report::StreamSamples;

/// Why a document cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A field the replay needs is absent or invalid.
    #[error(
        "the document has no valid {0}; replay reads what `tcptune test --json` prints \
         (TCP tests only)"
    )]
    Missing(&'static str),
    /// The diagnosis was recorded without its context.
    #[error(
        "the recorded diagnosis has no context (it was recorded by an older tcptune); record \
         the test again with `tcptune test --json`"
    )]
    NoContext,
    /// A diagnosed stream has no row in `end.streams`.
    #[error(
        "stream {0} of the recorded diagnosis has no row in end.streams; the document was \
         edited or cut, record the test again"
    )]
    NoEndRow(u32),
}

/// The parts of `end.streams[]` a replay needs.
#[derive(Deserialize)]
struct EndRow {
    receiver: Option<EndSideRow>,
}

#[derive(Deserialize)]
struct EndSideRow {
    bytes: u64,
    seconds: f64,
}

/// The recorded inputs of one test.
struct Recorded {
    samples: Vec<StreamSamples>,
    /// Stream ids in the order the test ran them: the order of `end.streams`.
    order: Vec<u32>,
    ends: Vec<EndRow>,
}

impl Recorded {
    /// The samples taken at the end that sent (`sender`) or received on stream `id`: the first
    /// record of that role, as the test used.
    fn samples(&self, id: u32, sender: bool) -> &[Sample] {
        self.samples
            .iter()
            .find(|s| s.id == id && s.sender == sender)
            .map(|s| s.samples.as_slice())
            .unwrap_or(&[])
    }

    fn input<'a>(&'a self, recorded: &'a StreamDiagnosis) -> Result<StreamInput<'a>, ReplayError> {
        let id = recorded.id;
        let row = self
            .order
            .iter()
            .position(|&x| x == id)
            .and_then(|i| self.ends.get(i))
            .and_then(|e| e.receiver.as_ref())
            .ok_or(ReplayError::NoEndRow(id))?;
        Ok(StreamInput {
            id,
            sender: self.samples(id, true),
            receiver: self.samples(id, false),
            received_bytes: row.bytes,
            seconds: Dur::from_secs_f64(row.seconds),
            cpu: &recorded.evidence.cpu,
        })
    }

    /// One direction judged again with its recorded context.
    fn direction(&self, d: &TestDiagnosis) -> Result<(Vec<StreamDiagnosis>, Context), ReplayError> {
        let ctx = Context::from(d.context.as_ref().ok_or(ReplayError::NoContext)?);
        let streams = d
            .streams
            .iter()
            .map(|s| Ok(diagnose_stream(&self.input(s)?, &ctx)))
            .collect::<Result<Vec<_>, ReplayError>>()?;
        Ok((streams, ctx))
    }
}

/// The diagnosis the engine gives a recorded test now. `doc` is `tcptune test --json`'s output,
/// with or without the `{"result": …}` envelope.
pub fn replay(doc: &Value) -> Result<TestDiagnosis, ReplayError> {
    let doc = doc.get("result").unwrap_or(doc);
    let ext = &doc["tcptune"];
    let samples: Vec<StreamSamples> = serde_json::from_value(ext["streams"].clone())
        .map_err(|_| ReplayError::Missing("tcptune.streams"))?;
    let recorded: TestDiagnosis = serde_json::from_value(ext["diagnosis"].clone())
        .map_err(|_| ReplayError::Missing("tcptune.diagnosis"))?;
    let ends: Vec<EndRow> = serde_json::from_value(doc["end"]["streams"].clone())
        .map_err(|_| ReplayError::Missing("end.streams"))?;
    // The client records every stream it ran, in the order of end.streams.
    let order = samples
        .iter()
        .filter(|s| s.at == crate::test_report::SampledAt::Client)
        .map(|s| s.id)
        .collect();
    let rec = Recorded {
        samples,
        order,
        ends,
    };
    let (forward, ctx) = rec.direction(&recorded)?;
    match &recorded.reverse {
        Some(r) => {
            let (reverse, rev_ctx) = rec.direction(r)?;
            Ok(diagnose_bidir(forward, reverse, &ctx, &rev_ctx))
        }
        None => Ok(diagnose_test(forward, &ctx)),
    }
}
