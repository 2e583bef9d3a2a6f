//! What one socket did between two of its samples: bytes, retransmissions, RTOs and the time
//! in each limit class, from the kernel's cumulative counters (deltas saturate at zero, so a
//! counter can never go backwards) and the engine's verdict on the part of busy time the
//! chronographs do not split, and on the time with nothing outstanding when the socket's own
//! process was measured ([`crate::cpu`]): the application's, or the CPU's when the process
//! could not keep up.

use tcptune_diagnose::engine::CpuUse;
use tcptune_diagnose::{judge, Context, Limit, Sample};
use tcptune_kernel::TcpInfo;
use tcptune_model::Dur;

/// Number of limit classes (the engine's).
pub const CLASSES: usize = Limit::ALL.len();

/// The index of a class in [`Limit::ALL`].
pub fn index(l: Limit) -> usize {
    Limit::ALL
        .iter()
        .position(|&x| x == l)
        .unwrap_or(CLASSES - 1)
}

/// One socket's interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delta {
    /// Bytes the peer acknowledged in the interval (`tcpi_bytes_acked`).
    pub delivered: u64,
    /// Bytes retransmitted in the interval (`tcpi_bytes_retrans`).
    pub retransmitted: u64,
    /// Retransmission timeouts in the interval (`tcpi_total_rto`).
    pub rto: u64,
    /// Seconds per class, in [`Limit::ALL`]'s order.
    pub seconds: [f64; CLASSES],
}

impl Delta {
    /// The class with the most time, when any time was accounted.
    pub fn dominant(&self) -> Option<Limit> {
        let (i, s) = self
            .seconds
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))?;
        (*s > 0.0).then(|| Limit::ALL[i])
    }
}

fn d64(a: Option<u64>, b: Option<u64>) -> u64 {
    b.unwrap_or(0).saturating_sub(a.unwrap_or(0))
}

/// The class of busy time the chronographs do not split (neither receiver-window nor
/// send-buffer limited by the kernel's clock), from the engine's verdict on the interval,
/// which also reads the samples (a full send buffer the clock booked as cwnd-limited, loss,
/// the path's capacity); a verdict that is not a limit of busy time leaves it to the network.
fn rest_of_busy(verdict: Limit) -> Limit {
    match verdict {
        Limit::Application | Limit::Idle | Limit::NotEnoughEvidence => Limit::Network,
        l => l,
    }
}

/// The interval from `prev` (none: the connection is new since the last poll, so its counters
/// started at zero) to `cur`. `wall` is the time between the samples when both were polled;
/// without it (a new connection, or a closed one's destroy event) only busy time is accounted,
/// since when the connection opened or closed within the interval is not known. `cpu` is the
/// socket's own process's CPU figure when it was measured (the engine then decides whether
/// time with nothing to send was the application's choice or a CPU that could not keep up).
pub fn between(
    prev: Option<&Sample>,
    cur: &Sample,
    wall: Option<Dur>,
    ctx: &Context,
    cpu: &[CpuUse],
) -> Delta {
    let empty = TcpInfo::default();
    let (a, b) = (prev.map_or(&empty, |s| &s.info), &cur.info);
    let us = |x: u64| x as f64 / 1e6;
    let busy = d64(a.busy_time_us, b.busy_time_us);
    let rwnd = d64(a.rwnd_limited_us, b.rwnd_limited_us).min(busy);
    let sndbuf = d64(a.sndbuf_limited_us, b.sndbuf_limited_us).min(busy - rwnd);
    let rest = busy - rwnd - sndbuf;
    let delivered = d64(a.bytes_acked, b.bytes_acked);
    let mut d = Delta {
        delivered,
        retransmitted: d64(a.bytes_retrans, b.bytes_retrans),
        rto: u64::from(b.total_rto.unwrap_or(0))
            .saturating_sub(u64::from(a.total_rto.unwrap_or(0))),
        seconds: [0.0; CLASSES],
    };
    d.seconds[index(Limit::ReceiverWindow)] = us(rwnd);
    d.seconds[index(Limit::SendBuffer)] = us(sndbuf);
    // The engine runs only where its verdict is used: most sockets are idle between polls.
    let judged =
        (rest > 0 || (delivered > 0 && !cpu.is_empty())).then(|| judge(prev, cur, ctx, cpu).limit);
    if rest > 0 {
        d.seconds[index(rest_of_busy(judged.unwrap_or(Limit::Network)))] += us(rest);
    }
    if let Some(w) = wall {
        // The chronographs tick in jiffies, so busy can exceed the wall time by a tick.
        let idle = (w.nanos() / 1000).saturating_sub(busy);
        // Time with nothing outstanding is the application's when it moved data at all,
        // unless the engine found its process CPU bound.
        let class = match (delivered > 0, judged) {
            (true, Some(Limit::Cpu)) => Limit::Cpu,
            (true, _) => Limit::Application,
            (false, _) => Limit::Idle,
        };
        d.seconds[index(class)] += us(idle);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_ms: u64, acked: u64, busy: u64, rwnd: u64, sndbuf: u64) -> Sample {
        Sample {
            at_s: Dur::from_millis(t_ms),
            info: TcpInfo {
                bytes_acked: Some(acked),
                busy_time_us: Some(busy),
                rwnd_limited_us: Some(rwnd),
                sndbuf_limited_us: Some(sndbuf),
                bytes_retrans: Some(0),
                ..TcpInfo::default()
            },
            skmem: None,
        }
    }

    #[test]
    fn busy_time_splits_by_the_chronographs_and_idle_time_by_delivery() {
        let ctx = Context::default();
        let a = sample(0, 1000, 100_000, 50_000, 0);
        let b = sample(1000, 901_000, 700_000, 550_000, 100_000);
        let d = between(Some(&a), &b, Some(Dur::from_millis(1000)), &ctx, &[]);
        assert_eq!(d.delivered, 900_000);
        assert!((d.seconds[index(Limit::ReceiverWindow)] - 0.5).abs() < 1e-9);
        assert!((d.seconds[index(Limit::SendBuffer)] - 0.1).abs() < 1e-9);
        assert!((d.seconds[index(Limit::Application)] - 0.4).abs() < 1e-9);
        let total: f64 = d.seconds.iter().sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        assert_eq!(d.dominant(), Some(Limit::ReceiverWindow));
    }

    #[test]
    fn counters_that_went_backwards_give_nothing() {
        let ctx = Context::default();
        let a = sample(0, 5000, 900, 0, 0);
        let b = sample(1000, 10, 100, 0, 0);
        let d = between(Some(&a), &b, Some(Dur::from_millis(1000)), &ctx, &[]);
        assert_eq!(d.delivered, 0);
        // Nothing delivered and nothing busy: the whole second was idle.
        assert!((d.seconds[index(Limit::Idle)] - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_new_or_closed_connection_counts_busy_time_only() {
        let ctx = Context::default();
        let b = sample(1000, 5000, 20_000, 20_000, 0);
        let d = between(None, &b, None, &ctx, &[]);
        assert_eq!(d.delivered, 5000);
        let total: f64 = d.seconds.iter().sum();
        assert!((total - 0.02).abs() < 1e-9);
    }

    #[test]
    fn time_with_nothing_to_send_is_the_cpu_s_when_the_engine_finds_the_process_bound() {
        use tcptune_diagnose::engine::{CpuScope, CpuUse, End};
        // 1 MB delivered in the second, 0.1 s of it busy: 0.9 s with nothing to send.
        let sent = |t: u64| Sample {
            info: TcpInfo {
                bytes_sent: Some(t * 1_000_000),
                ..sample(t * 1000, t * 1_000_000, t * 100_000, 0, 0).info
            },
            ..sample(t * 1000, 0, 0, 0, 0)
        };
        let (a, b) = (sent(2), sent(3));
        let process = |percent: f64| CpuUse {
            end: End::Sender,
            scope: CpuScope::Process,
            percent,
            cores: 1.0,
            softirq_percent: None,
            wait_percent: Some(0.0),
        };
        let ctx = Context::default();
        let wall = Some(Dur::from_millis(1000));
        let unmeasured = between(Some(&a), &b, wall, &ctx, &[]);
        assert!((unmeasured.seconds[index(Limit::Application)] - 0.9).abs() < 1e-9);
        assert_eq!(unmeasured.seconds[index(Limit::Cpu)], 0.0);
        // Its process used 95% of its one core: the engine calls the interval CPU limited.
        let bound = between(Some(&a), &b, wall, &ctx, &[process(95.0)]);
        assert!((bound.seconds[index(Limit::Cpu)] - 1.0).abs() < 1e-9);
        assert_eq!(bound.seconds[index(Limit::Application)], 0.0);
        // 30%: the application's own choice.
        let light = between(Some(&a), &b, wall, &ctx, &[process(30.0)]);
        assert_eq!(light, unmeasured);
    }
}
