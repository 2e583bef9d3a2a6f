//! The lab's link emulator.
//!
//! - [`pipeline`]: one direction of the link as a sans-IO state machine with netem's stages,
//!   order and arithmetic (duplicate → loss → corrupt → limit/queue → reorder/delay → rate),
//!   fed `(now, packet)` and polled for due packets and the next wakeup;
//! - [`config`]: the settings of a direction and of a link, validated;
//! - [`rng`]: the seeded generator behind every random decision (same seed, same decisions).
//!
//! - `sys`: the TUN I/O edge and the event loop (Linux only).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod pipeline;
pub mod rng;

pub use config::{ConfigError, Distribution, JitterOrder, LinkConfig, LinkSpec, Loss};
pub use pipeline::{Counters, Direction, Nanos, Packet};
pub use rng::Rng;
#[cfg(target_os = "linux")]
pub mod sys;
