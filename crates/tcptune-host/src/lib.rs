//! A host's TCP-relevant settings: read them ([`read`]), judge them against a described path
//! ([`audit`], with the path's RTT measured by [`probe`] when asked), turn the judgement into a
//! change ([`tune`]) and apply it with a snapshot that rolls back exactly ([`tune_report`] is
//! what `tune` did).
//!
//! The audit is a pure function of a [`state::HostState`], so every rule is tested on recorded
//! host states without root; only `read` and the live sysctl writer touch the system.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod probe;
pub mod read;
pub mod state;
pub mod tune;
pub mod tune_report;

pub use state::HostState;
