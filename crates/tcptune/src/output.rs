//! How every command prints: human text by default, or one JSON document with `--json`.
//!
//! JSON output is wrapped in an [`Envelope`] that names the command and the schema version, so
//! a consumer can check what it is reading. The schema of each command's envelope is generated
//! from these Rust types (see `schema.rs`) and checked in under `schema/`.
//!
//! The document is indented for a person (standard output is a terminal, or `--pretty`) and
//! compact for a program (piped or redirected), as `ip -j` and `ip -j -p`: the same values,
//! only the whitespace differs, and `jq` reads both. Compact is what makes `conns --json` as
//! fast as its text (20,000 rows are 18.5 MB indented, 11.8 MB compact).

use std::fmt::Display;
use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use schemars::JsonSchema;
use serde::Serialize;

/// Bumped when a JSON field changes meaning or disappears (adding fields does not bump it).
pub const SCHEMA_VERSION: u32 = 1;

/// The JSON document every command prints with `--json`.
#[derive(Serialize, JsonSchema)]
pub struct Envelope<T> {
    /// The tool's version.
    pub tcptune: String,
    /// Version of the output schema.
    pub schema_version: u32,
    /// The command that produced this, e.g. "model bdp".
    pub command: String,
    /// The command's result.
    pub result: T,
}

impl<T> Envelope<T> {
    pub fn new(command: &str, result: T) -> Self {
        Envelope {
            tcptune: env!("CARGO_PKG_VERSION").into(),
            schema_version: SCHEMA_VERSION,
            command: command.into(),
            result,
        }
    }
}

/// Whether `--json` documents are indented (see the module's comment); set once by `main`.
static PRETTY: AtomicBool = AtomicBool::new(true);

/// Decides the JSON layout for this run: indented with `--pretty` or on a terminal.
pub fn choose_layout(pretty_flag: bool) {
    PRETTY.store(pretty_flag || io::stdout().is_terminal(), Ordering::Relaxed);
}

/// Whether `--json` documents are indented in this run.
pub fn pretty() -> bool {
    PRETTY.load(Ordering::Relaxed)
}

/// Prints plain text; a closed pipe (`| head`) ends the output quietly instead of panicking as
/// `println!` would.
pub fn text(s: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    closed_pipe_is_ok(out.write_all(s.as_bytes()).and_then(|()| out.flush()))
}

/// A closed pipe (`| head`) ends the output quietly, as for every command.
fn closed_pipe_is_ok(written: io::Result<()>) -> anyhow::Result<()> {
    match written {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Prints what `write` writes, unbuffered, for writers that hand over large pieces at a time
/// (`conns`'s sorted rows go to the kernel in place with writev). Nothing may have been printed
/// through `io::stdout()`'s buffer before.
pub fn with_stdout(write: impl FnOnce(&mut std::fs::File) -> io::Result<()>) -> anyhow::Result<()> {
    use std::os::fd::AsFd;
    let mut out = std::fs::File::from(io::stdout().as_fd().try_clone_to_owned()?);
    closed_pipe_is_ok(write(&mut out))
}

/// The `--json` document of a command that renders its result itself (`conns`, fast): the
/// envelope's text before the result and after it, as serde_json prints them (indented or
/// compact, as `pretty`). An indented result must be written as a value one level deep.
pub fn envelope_around(command: &str, pretty: bool) -> anyhow::Result<(String, String)> {
    const MARK: &str = "\"result placeholder\"";
    let envelope = Envelope::new(command, "result placeholder");
    let whole = if pretty {
        serde_json::to_string_pretty(&envelope)?
    } else {
        serde_json::to_string(&envelope)?
    };
    let (before, after) = whole
        .split_once(MARK)
        .ok_or_else(|| anyhow::anyhow!("the JSON envelope lost its result"))?;
    Ok((before.to_string(), format!("{after}\n")))
}

/// Prints `result` as JSON (in its envelope) or as text. A closed pipe (`| head`) is not an error.
pub fn emit<T: Serialize + Display>(command: &str, result: &T, json: bool) -> anyhow::Result<()> {
    // Buffered: a table of thousands of connections would otherwise cost a write per line.
    let mut out = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let written = if json {
        let envelope = Envelope::new(command, result);
        if pretty() {
            serde_json::to_writer_pretty(&mut out, &envelope)
        } else {
            serde_json::to_writer(&mut out, &envelope)
        }
        .map_err(io::Error::from)
        .and_then(|()| writeln!(out))
    } else {
        write!(out, "{result}")
    };
    closed_pipe_is_ok(written.and_then(|()| out.flush()))
}

/// Refuses the global `--json` for a command that has no result document to print, in one
/// sentence: `what` says why, and the fix (drop --json) is added.
pub fn no_json(json: bool, what: &str) -> anyhow::Result<()> {
    if json {
        anyhow::bail!("--json does not apply: {what}; run it without --json");
    }
    Ok(())
}
