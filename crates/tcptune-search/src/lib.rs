//! Closed-loop tuning: measure the path, take the change the diagnosis points to as a
//! hypothesis, test it against the settings in effect in interleaved A/B trials, keep it or
//! roll it back with the reason, repeat, then shrink the buffers kept.
//!
//! Everything here is sans-IO ([`search::Search`] is fed `(now, event)` and answers with an
//! action), so the search is tested on a virtual clock against a model of a path; the binary
//! (`tcptune tune --search`) runs the tests and writes the values, under tune's snapshot.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod duration;
mod guardrail;
pub mod hypothesis;
pub mod outcome;
pub mod search;
pub mod shrink;
pub mod stats;

#[cfg(test)]
mod tests;

pub use hypothesis::{Config, Observation, Role, Settings};
pub use outcome::{DryRun, Report, SearchOutput};
pub use search::{Action, ArmKind, Event, Search};
