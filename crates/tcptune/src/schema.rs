//! The registry of output schemas: one entry per command that prints `--json`. The result
//! types live in the library crates that make them; this module only names them.
//!
//! The schemas are generated from the Rust types, written to `schema/<name>.json` in the
//! repository, and compared by a test (`tests/schema.rs`), so the documented schema cannot drift
//! from what the code prints. Adding a command with `--json` means adding its entry here.

use schemars::{schema_for, JsonSchema, Schema};

use crate::output::Envelope;

pub struct SchemaEntry {
    /// File stem under `schema/` and the name `tcptune schema NAME` takes.
    pub name: &'static str,
    /// The command whose output it describes.
    pub command: &'static str,
    pub schema: Schema,
}

fn entry<T: JsonSchema>(name: &'static str, command: &'static str) -> SchemaEntry {
    SchemaEntry {
        name,
        command,
        schema: schema_for!(Envelope<T>),
    }
}

/// A schema of output that is not wrapped in the envelope (JSON lines, one object per line).
fn line_entry<T: JsonSchema>(name: &'static str, command: &'static str) -> SchemaEntry {
    SchemaEntry {
        name,
        command,
        schema: schema_for!(T),
    }
}

pub fn all() -> Vec<SchemaEntry> {
    use tcptune_model::{bdp, buffers, cubic, mathis, pftk, ramp};
    vec![
        entry::<bdp::Bdp>("model-bdp", "model bdp"),
        entry::<bdp::WindowBound>("model-window", "model window"),
        entry::<buffers::Buffers>("model-buffers", "model buffers"),
        entry::<mathis::Mathis>("model-mathis", "model mathis"),
        entry::<pftk::Pftk>("model-pftk", "model pftk"),
        entry::<cubic::Cubic>("model-cubic", "model cubic"),
        entry::<ramp::Ramp>("model-ramp", "model ramp"),
        entry::<tcptune_host::audit::Audit>("audit", "audit"),
        entry::<tcptune_host::tune_report::TuneReport>("tune", "tune"),
        entry::<tcptune_search::SearchOutput>("tune-search", "tune --search"),
        entry::<tcptune_experiment::report::ReportResult>("report", "report"),
        entry::<tcptune_experiment::rerun::Rerun>("report-against", "report --against"),
        entry::<tcptune_conns::conn::ConnTable>("conns", "conns"),
        line_entry::<tcptune_conns::conn::RecordLine>("watch-record", "watch"),
        entry::<tcptune_perftest::test_report::TestOutput>("test", "test"),
        entry::<tcptune_lab::LabStatus>("lab-up", "lab up"),
        entry::<tcptune_lab::LabList>("lab-status", "lab status"),
        entry::<tcptune_lab::LabStatus>("lab-set", "lab set"),
        entry::<tcptune_lab::Removed>("lab-down", "lab down"),
        entry::<tcptune_experiment::plan::CheckedPlan>("lab-run-check", "lab run --check"),
        entry::<tcptune_analyze::AnalyzeReport>("analyze", "analyze"),
        entry::<tcptune_analyze::join::JoinReport>("analyze-join", "analyze A B"),
        // Served over HTTP as it is, without the envelope.
        line_entry::<tcptune_exporter::top::Connections>(
            "exporter-connections",
            "exporter (GET /connections)",
        ),
        line_entry::<tcptune_web::record::RecordLine>("watch-web-record", "watch --web --record"),
    ]
}
