//! The kernel's view of TCP sockets, and the only netlink I/O in tcptune.
//!
//! - [`tcp_info`]: a length-aware decoder of `struct tcp_info` (every field up to 6.18).
//! - [`diag`]: sock_diag requests and answers as bytes (sans-IO).
//! - [`filter`]: `ss`-like filters, compiled to the kernel's bytecode.
//! - [`sys`]: the sockets — dumps, exact queries, destroy events, netns entry, TCP_INFO.
//! - [`procs`]: which process owns a socket (only when asked).
//! - [`file`]: reading a user's file with a size limit, refusing FIFOs and devices.

pub mod diag;
pub mod file;
pub mod filter;
pub mod procs;
pub mod sys;
pub mod tcp_info;

pub use diag::{BbrInfo, CongName, DiagSocket, SkMemInfo};
pub use filter::{Filter, FilterError};
pub use sys::{DestroyEvents, Diag, KernelError};
pub use tcp_info::{TailLayout, TcpInfo};
