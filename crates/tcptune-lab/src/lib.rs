//! The lab: a client and a server host, each in its own network namespace, joined through the
//! user-space link emulator (`tcptune-emu`) running as a background process the lab owns, or
//! through a veth pair with kernel qdiscs.
//!
//! Layers, each using only those above it (no module cycles):
//! - `error.rs`: [`LabError`], the one error type of every layer;
//! - [`names`]: what everything a lab makes is called (namespaces, device, addresses, state
//!   directory); pure;
//! - [`keys`]: the one table of link and host setting keys, their types, bounds and backends;
//! - [`spec`]: what a lab is (link + host settings), from options, a JSON file or an
//!   experiment's settings, validated by [`keys`] before anything is created;
//! - [`os`]: the OS edge: `ip`, sysctls inside a namespace, processes, signals;
//! - [`netem`]: a link as `tc` commands (netem, tbf), and whether this kernel has sch_netem;
//! - [`effects`]: the lab's effects on the machine behind a trait, live or recorded by a fake;
//! - [`backend`]: the emulator and netem backends behind one trait, and `--backend auto`;
//! - [`state`]: what a lab records about itself (`state.json`);
//! - [`leftovers`]: which labs are alive and which are leftovers of killed ones, and removing a
//!   lab;
//! - [`status`]: `lab status` as data and text;
//! - [`lab`]: the lifecycle (`up`, `exec`, `status`, `set`, `down`), each over [`effects`];
//! - [`background`]: the emulator and CPU hog processes;
//! - [`linkcheck`]: the delay error of a link against an ideal one, from captures at both ends
//!   (the benchmark's and the accuracy tests' oracle).
//!
//! Everything a lab makes is named after it, so it can be found again after a `kill -9`:
//! namespaces `tcptune-<lab>-client|server`, `/etc/netns/<namespace>/`, state under
//! `/run/tcptune/<lab>/` (settings, emulator pid, global sysctl changes to restore, control
//! socket), and processes whose command line is `tcptune lab _emulator|_hog --name <lab>`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod backend;
pub mod background;
pub mod effects;
mod error;
pub mod keys;
pub mod lab;
pub mod leftovers;
pub mod linkcheck;
pub mod names;
pub mod netem;
pub mod os;
pub mod spec;
pub mod state;
pub mod status;

pub use error::LabError;
pub use lab::{HostStatus, LabList, LabStatus, QdiscStatus, Removed};
pub use spec::{Backend, HostSettings, LabSpec, LinkChanges, RouteMetrics, Which};
