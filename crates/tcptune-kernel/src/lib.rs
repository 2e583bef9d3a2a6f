//! The kernel's view of TCP sockets, and the only netlink I/O in tcptune.
//!
//! - [`tcp_info`]: a length-aware decoder of `struct tcp_info` (every field up to 6.18).
//! - [`diag`]: sock_diag requests and answers as bytes (sans-IO).
//! - [`filter`]: `ss`-like filters, compiled to the kernel's bytecode.
//! - [`sys`]: the sockets — dumps, exact queries, destroy events, netns entry, TCP_INFO.
//! - [`procs`]: which process owns a socket (only when asked).
//! - [`file`](mod@file): reading a user's file with a size limit, refusing FIFOs and devices.
//! - [`trace`]: per-ACK state from the tcp tracepoints through a tracefs instance of our own.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cpustat;
pub mod diag;
pub mod file;
pub mod filter;
pub mod procs;
pub mod sys;
pub mod tcp_info;
pub mod trace;

pub use diag::{BbrInfo, CongName, DiagSocket, SkMemInfo};
pub use filter::{Filter, FilterError};
pub use sys::{DestroyEvents, Diag, KernelError};
pub use tcp_info::{TailLayout, TcpInfo};

/// Runs the decoders on arbitrary bytes, as the `sock_diag` fuzz target and its corpus replay
/// do: the bytes as a datagram of netlink messages (each sock_diag answer decoded with both
/// `tcp_info` tail layouts and matched against filters), and as a bare `tcp_info` from
/// getsockopt. Returns a count of what was decoded (so the work is not optimised away); never
/// panics on any input.
#[doc(hidden)]
pub fn fuzz_one(data: &[u8]) -> usize {
    let filters: Vec<Filter> = ["", "state established", "sport :5201", "dst 198.18.0.0/15"]
        .iter()
        .filter_map(|f| f.parse().ok())
        .collect();
    let mut n = 0;
    for m in diag::messages(data) {
        let Ok(m) = m else {
            n += 1;
            continue;
        };
        n += diag::error_code(m.payload).unsigned_abs() as usize % 7;
        if m.kind != diag::SOCK_DIAG_BY_FAMILY {
            continue;
        }
        for tail in [TailLayout::Linux6_18, TailLayout::Linux7_0] {
            if let Ok(s) = DiagSocket::decode(m.payload, tail) {
                n += filters.iter().filter(|f| f.matches(&s)).count();
                n += s.info.map_or(0, |i| usize::from(i.len));
            }
        }
    }
    for tail in [TailLayout::Linux6_18, TailLayout::Linux7_0] {
        n += usize::from(TcpInfo::decode(data, tail).len);
    }
    n
}
