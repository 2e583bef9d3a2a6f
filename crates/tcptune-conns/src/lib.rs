//! How `tcptune conns` and `tcptune watch` show connections, beside the diagnosis engine that
//! judges them (`tcptune-diagnose`).
//!
//! The sockets come from sock_diag dumps through `tcptune-kernel` ([`dump`]: a socket per
//! network namespace, or a replayed recording), become rows joined with their figures and
//! verdict ([`conn`]), and are shown as a table ([`conn::ConnTable`], [`conn::TextRows`]), as
//! `conns --json` written by hand ([`json`], byte for byte serde_json's output) or as the JSON
//! lines of `watch --record` ([`conn::RecordLine`]). [`watch`] holds what `watch` decides
//! between samples, with the time passed in, and the text of its detail view; the binary keeps
//! the clock and the screen.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod conn;
pub mod dump;
pub mod json;
mod rows;
pub mod watch;

/// The sockets of the recorded loopback dump (fixtures/kernel/6.18), for unit tests.
#[cfg(test)]
pub(crate) fn recorded_sockets() -> Vec<tcptune_kernel::DiagSocket> {
    let rec = include_bytes!("../../../fixtures/kernel/6.18/dump-loopback.nl");
    let socks: Vec<tcptune_kernel::DiagSocket> = tcptune_kernel::diag::messages(rec)
        .filter_map(|m| m.ok())
        .filter(|m| m.kind == tcptune_kernel::diag::SOCK_DIAG_BY_FAMILY)
        .map(|m| {
            tcptune_kernel::DiagSocket::decode(m.payload, tcptune_kernel::TailLayout::Linux6_18)
        })
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!socks.is_empty());
    socks
}
