//! The registry of output schemas: one entry per command that prints `--json`.
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

pub fn all() -> Vec<SchemaEntry> {
    use tcptune_model::bdp;
    vec![
        entry::<bdp::Bdp>("model-bdp", "model bdp"),
        entry::<bdp::WindowBound>("model-window", "model window"),
        entry::<tcptune_analyze::AnalyzeReport>("analyze", "analyze"),
    ]
}
