//! `tcptune watch --web` and `tcptune view`: the TCP oscilloscope in a browser.
//!
//! A sans-IO core ([`scope`]: time passed in) turns sock_diag dumps and, where tracing works,
//! the kernel's per-ACK trace events (`tcptune_kernel::trace`) into [`update::Update`]s: the
//! connection table with the diagnosis engine's verdicts, per-connection points (rates,
//! windows, RTTs, the triage shares), events and triggers. A [`store`] keeps them in bounded
//! rings ([`ring`]); the [`hub`] hands them to the pages streaming now, each with a bounded
//! queue; [`record`] writes them as JSON lines and reads them back for `view`. The HTTP edge
//! ([`http`]) serves the embedded page ([`assets`]) and its API; [`live`] is the polling loop.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod assets;
pub mod http;
pub mod hub;
pub mod live;
pub mod record;
pub mod ring;
pub mod scope;
pub mod store;
pub mod update;

/// The default address of `watch --web` and `view`: loopback, the port after the exporter's.
pub const DEFAULT_WEB: &str = "127.0.0.1:19242";
