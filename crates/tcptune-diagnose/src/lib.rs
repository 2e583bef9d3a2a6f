//! What limits a TCP connection, from the kernel's own counters (sans-IO).
//!
//! Samples of `tcp_info` (and socket memory) go in, with the time each was taken passed in by
//! the caller; figures and a one-line verdict with its evidence come out. The same code serves
//! `tcptune conns`/`watch` (dumps), `tcptune test` (getsockopt on its own sockets) and lab
//! reports (recorded samples), so a verdict means the same thing everywhere. For a socket of
//! one's own, build a [`Sample`] from `tcptune_kernel::sys::tcp_info_of` and `skmem_of`
//! (getsockopt `TCP_INFO` / `SO_MEMINFO`) and a monotonic clock.
//!
//! The limit breakdown is Web100's "triage" rebuilt on the kernel's chronograph counters
//! (4.10+): `busy_time` is the time with data outstanding, of which `rwnd_limited` was spent
//! blocked on the receiver's window and `sndbuf_limited` on the send buffer; the rest of busy is
//! the network's share (cwnd, pacing — the kernel does not separate them); time not busy is the
//! application's (nothing to send). The counters tick in jiffies (1–10 ms), so intervals much
//! shorter than ~50 ms give coarse shares, which [`Interval::coarse`] flags.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod advice;
pub mod engine;
mod figures;
pub mod latency;
pub mod throughput;

pub use engine::{Context, Limit, Verdict};
pub use figures::{interval, size, snapshot, Interval, Negotiated, Sample, Shares, Snapshot};

use tcptune_model::Dur;

/// The verdict over the interval from `a` to `b` (or over the connection's life when `a` is
/// `None`): [`engine::classify`] on this socket alone.
pub fn verdict(a: Option<&Sample>, b: &Sample, ctx: &Context) -> Verdict {
    judge(a, b, ctx, &[])
}

/// [`verdict`] with CPU figures of the socket's ends.
pub fn judge(a: Option<&Sample>, b: &Sample, ctx: &Context, cpu: &[engine::CpuUse]) -> Verdict {
    let (series, over) = match a {
        Some(a) => (
            engine::Series::Two(a, b),
            format!(
                "of the last {}",
                Dur::from_nanos(b.at_s.nanos().saturating_sub(a.at_s.nanos()))
            ),
        ),
        None => (engine::Series::One(b), "of its busy time".to_string()),
    };
    let obs = engine::Observations {
        cpu,
        ..engine::Observations::socket(series)
    };
    engine::classify(&obs, ctx, &over).0
}
