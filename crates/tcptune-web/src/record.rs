//! `--record FILE` and `tcptune view FILE`: what the page was shown, as JSON lines. The first
//! line says what the file is and where its data came from; every other line is one
//! [`Update`], in the order the page got them. Replaying applies them to a fresh store, so the
//! offline page serves the same points the live one streamed.

use std::io::{BufRead, Write};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::store::{Bounds, Store};
use crate::update::{Source, Update};

/// What the first line's `record` field holds.
pub const FORMAT: &str = "tcptune-web/1";

/// The first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Header {
    /// Always [`FORMAT`].
    pub record: String,
    /// The tcptune version that wrote it.
    pub tcptune: String,
    /// Where the recorded data came from (per-ACK or polled) and the sampling interval.
    pub source: Source,
}

/// One line of a recording: the header, or an update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RecordLine {
    /// The first line.
    Header(Header),
    /// Every other line.
    Update(Update),
}

/// Why a recording cannot be replayed: one sentence naming the line.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Reading a line failed (line number, 1-based; the error).
    #[error("line {0} of the recording cannot be read: {1}")]
    Io(usize, std::io::Error),
    /// The first line is not a [`Header`].
    #[error("the recording does not start with a tcptune-web header line; record one with `tcptune watch --web --record FILE`")]
    NoHeader,
    /// A line after the first is not an [`Update`].
    #[error("line {line} of the recording is not a tcptune-web update ({why}); was it written by `watch --web --record`?")]
    Line {
        /// Line number, 1-based.
        line: usize,
        /// Why, as the JSON parser said.
        why: String,
    },
}

/// Writes lines as they are shown.
pub struct Recorder<W: Write> {
    out: W,
}

impl<W: Write> Recorder<W> {
    /// Starts a recording with its header.
    pub fn new(mut out: W, source: &Source) -> std::io::Result<Recorder<W>> {
        let h = RecordLine::Header(Header {
            record: FORMAT.to_string(),
            tcptune: env!("CARGO_PKG_VERSION").to_string(),
            source: source.clone(),
        });
        serde_json::to_writer(&mut out, &h)?;
        out.write_all(b"\n")?;
        Ok(Recorder { out })
    }

    /// Appends updates (flushed, so a recording cut short still replays to where it ended).
    pub fn write(&mut self, updates: &[Update]) -> std::io::Result<()> {
        for u in updates {
            serde_json::to_writer(&mut self.out, u)?;
            self.out.write_all(b"\n")?;
        }
        self.out.flush()
    }
}

/// Reads a recording into a store.
pub fn replay(input: impl BufRead, bounds: Bounds) -> Result<Store, ReplayError> {
    let mut store: Option<Store> = None;
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|e| ReplayError::Io(n + 1, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: RecordLine = serde_json::from_str(&line).map_err(|e| ReplayError::Line {
            line: n + 1,
            why: e.to_string(),
        })?;
        match parsed {
            RecordLine::Header(_) if store.is_some() => {
                return Err(ReplayError::Line {
                    line: n + 1,
                    why: "a second header".into(),
                })
            }
            RecordLine::Header(h) if h.record == FORMAT => {
                let mut source = h.source;
                source.reason = Some(match source.reason {
                    Some(r) => format!("a recording ({r})"),
                    None => "a recording".to_string(),
                });
                store = Some(Store::new(bounds.clone(), source));
            }
            RecordLine::Header(_) => return Err(ReplayError::NoHeader),
            RecordLine::Update(u) => match store.as_mut() {
                Some(s) => s.apply(&u),
                None => return Err(ReplayError::NoHeader),
            },
        }
    }
    store.ok_or(ReplayError::NoHeader)
}
