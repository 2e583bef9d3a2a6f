//! Experiments as files: a TOML spec ([`spec`]) of a path, hosts, a workload and sweeps;
//! a plan of trials ([`plan`]); a runner loop that records each trial and resumes where an
//! interrupted run stopped ([`run`]), with as many trials per point as its answer needs when
//! asked ([`stopping`]); statistics per sweep point and the HTML report
//! ([`report`]).
//!
//! How a trial runs is behind [`run::TrialRunner`]: the lab implements it with namespaces and
//! the link emulator; tests implement it with a deterministic model.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod compare;
mod fuzz;
pub mod host_runner;
pub mod hosts;
pub mod join;
pub mod lab_runner;
pub mod plan;
pub mod record;
pub mod remote;
pub mod report;
pub mod rerun;
pub mod run;
pub mod schedule;
pub mod settings;
pub mod spec;
pub mod stopping;
pub mod workload;

pub use fuzz::fuzz_one;
