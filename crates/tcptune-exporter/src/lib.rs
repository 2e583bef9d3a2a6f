//! `tcptune exporter`: Prometheus metrics of what limits a host's TCP connections.
//!
//! A poller ([`poll`]) reads sock_diag dumps and destroy events through `tcptune-kernel`; the
//! aggregator ([`agg`], sans-IO, time passed in) keeps state per socket cookie, turns each
//! socket's interval into bytes, retransmissions and seconds per limit class ([`delta`]: the
//! kernel's chronographs, and `tcptune-diagnose`'s verdict for the rest of busy time) and adds
//! them to per-group series ([`metrics`], the `prometheus-client` crate), with groups only
//! from dimensions the operator names ([`groups`]) and a hard cap on series; the `cpu` class
//! comes from the processes of application-limited sockets, measured at a bounded rate
//! ([`cpu`]). Its pages
//! ([`http`]: `/metrics` and `/connections`, [`top`]) are served by `tcptune-http`, which
//! binds, checks access (the web configuration file's basic auth and TLS) and runs the threads.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod agg;
pub mod cpu;
pub mod delta;
mod follow;
pub mod groups;
pub mod http;
pub mod metrics;
pub mod poll;
pub mod top;

pub use agg::{Aggregator, Config, OTHER};

/// The default listen address: loopback only, on a port outside the Prometheus exporters'
/// allocation range 9100-9999 (fully allocated since 2023) and below Linux's ephemeral range
/// (32768-60999), so no outgoing connection can be holding it.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:19241";

#[cfg(test)]
mod agg_tests;
