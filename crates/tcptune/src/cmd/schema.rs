//! `tcptune schema [NAME]`: the JSON Schema of each command's `--json` output.

use crate::outcome::Outcome;
use crate::schema::{all, SchemaEntry};

pub fn run(name: Option<&str>, list: bool) -> anyhow::Result<Outcome> {
    let entries = all();
    if list {
        for SchemaEntry { name, command, .. } in &entries {
            crate::output::text(&format!("{name:<24} tcptune {command} --json\n"))?;
        }
        return Ok(Outcome::Ok);
    }
    let doc = match name {
        Some(n) => {
            let e = entries.iter().find(|e| e.name == n).ok_or_else(|| {
                anyhow::anyhow!("no schema named '{n}'; `tcptune schema --list` shows the names")
            })?;
            serde_json::to_value(&e.schema)?
        }
        None => serde_json::Value::Object(
            entries
                .iter()
                .map(|e| Ok((e.name.to_string(), serde_json::to_value(&e.schema)?)))
                .collect::<anyhow::Result<_>>()?,
        ),
    };
    crate::output::text(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
    Ok(Outcome::Ok)
}
