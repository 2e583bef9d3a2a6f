//! iperf3's control protocol without I/O: the wire format (cookie, state bytes, length-prefixed
//! JSON), the test parameters and results typed and checked, and the client and server session
//! state machines that a socket layer drives with bytes and the current time.
//!
//! `tcptune serve` and `tcptune test` (issue 5) put sockets around these; keeping the protocol
//! here makes every message boundary, limit and timeout testable without a network, and makes
//! hostile input a unit-test matter: lengths are bounded before allocation (CVE-2023-38403),
//! every field is type-checked before use (CVE-2024-53580), unknown states are errors, and every
//! phase has a deadline.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[doc(hidden)]
pub mod fuzz;
pub mod params;
pub mod results;
pub mod session;
pub mod udp;
pub mod wire;

pub use fuzz::fuzz_one;
pub use params::{Direction, ParamError, Params, Protocol};
pub use results::{Results, ResultsError, StreamResult};
pub use wire::{Cookie, ServerError, State, WireError, COOKIE_LEN};

/// iperf3's default port.
pub const DEFAULT_PORT: u16 = 5201;
