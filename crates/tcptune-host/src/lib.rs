//! A host's TCP-relevant settings: read them ([`read`]), judge them against a described path
//! ([`audit`]), turn the judgement into a change ([`tune`]) and apply it with a snapshot that
//! rolls back exactly.
//!
//! The audit is a pure function of a [`state::HostState`], so every rule is tested on recorded
//! host states without root; only `read` and the live sysctl writer touch the system.

#![forbid(unsafe_code)]

pub mod audit;
pub mod read;
pub mod state;
pub mod tune;

pub use state::HostState;
