//! What the models expect for a sweep point's settings: the path's payload rate, the receive
//! window over the RTT and the Mathis bound for the configured loss, the smallest of them being
//! the point's expectation. Read from the point's settings (link, hosts' sysctls, workload).

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_model::goodput::{goodput_ceiling, tcp_ip_header_bytes, NETEM_FRAMING};
use tcptune_model::kernel::{KernelVersion, WindowRule};
use tcptune_model::mathis::{mathis_bps, MathisConstant};
use tcptune_model::{Bytes, Dur, Probability, Rate};

use crate::settings::Settings;

/// What the models expect for a point's settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct Theory {
    /// Rate of the link in the data's direction.
    pub path_rate_bps: Option<f64>,
    /// Round trip of the link (both one-way delays).
    pub rtt_s: Option<f64>,
    /// Receive window / RTT, for a configured receive buffer.
    pub window_bound_bps: Option<f64>,
    /// Mathis et al. (C = √(3/2)) for the configured loss.
    pub mathis_bps: Option<f64>,
    /// The smallest of the payload share of the path rate, the window bound and Mathis: what
    /// the point should reach.
    pub expected_bps: Option<f64>,
    /// The time the bottleneck queue (`link.queue` packets of the MTU plus the link's per-packet
    /// overhead, or `link.queue_bytes`) takes to drain at the link rate: what a full queue adds
    /// to the round trip.
    pub queue_drain_s: Option<f64>,
}

pub(super) fn get<'a>(s: &'a Settings, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| s.get(*k).map(String::as_str))
}

/// Which way the data flows: "upload" (client sends) unless the workload says otherwise; an
/// HTTP workload downloads.
pub(super) fn direction(s: &Settings) -> &str {
    match (
        s.get("workload.direction").map(String::as_str),
        s.get("workload.kind").map(String::as_str),
    ) {
        (Some(d), _) => d,
        (None, Some("http")) => "download",
        _ => "upload",
    }
}

/// The models' expectations for one point.
pub fn theory(s: &Settings) -> Theory {
    let down = direction(s) == "download";
    let (dir, receiver) = if down {
        ("down", "client")
    } else {
        ("up", "server")
    };
    let link = |k: &str| get(s, &[&format!("link.{dir}.{k}"), &format!("link.{k}")]);
    let rate = link("rate")
        .and_then(|v| v.parse::<Rate>().ok())
        .map(Rate::bps);
    // Each direction's one-way delay; a link `rtt` counts half in each direction.
    let delay = |d: &str| {
        get(s, &[&format!("link.{d}.delay"), "link.delay"])
            .and_then(|v| v.parse::<Dur>().ok())
            .or_else(|| {
                get(s, &[&format!("link.{d}.rtt"), "link.rtt"])
                    .and_then(|v| v.parse::<Dur>().ok())
                    .map(|r| Dur::from_nanos(r.nanos() / 2))
            })
            .unwrap_or(Dur::ZERO)
    };
    let rtt = delay("up").secs() + delay("down").secs();
    let rtt_s = (rtt > 0.0).then_some(rtt);
    // The window a receiver can advertise: an explicit SO_RCVBUF v makes a buffer of 2v;
    // autotuning grows one to tcp_rmem[2]. The kernel's window rule makes window of its share:
    // the assumed kernel's (6.6+, its starting ratio of ½, the floor a socket measures up from).
    let share = WindowRule::for_kernel(KernelVersion::ASSUMED, None, None).payload_fraction();
    let buffer = match s.get("workload.window") {
        Some(v) => v.parse::<Bytes>().ok().map(|b| 2.0 * b.get() as f64),
        None => s
            .get(&format!("{receiver}.sysctl.net.ipv4.tcp_rmem"))
            .and_then(|v| v.split_whitespace().nth(2)?.parse::<f64>().ok()),
    };
    let window = buffer.map(|b| b * share);
    let window_bound_bps = window.zip(rtt_s).map(|(w, r)| w * 8.0 / r);
    // The path MTU: the smaller of the hosts' MTUs when set, else Ethernet's 1500.
    let mtu = ["client.mtu", "server.mtu"]
        .iter()
        .filter_map(|k| s.get(*k)?.parse::<f64>().ok())
        .reduce(f64::min)
        .unwrap_or(1500.0);
    let timestamps_off = ["client", "server"].iter().any(|h| {
        s.get(&format!("{h}.sysctl.net.ipv4.tcp_timestamps"))
            .map(String::as_str)
            == Some("0")
    });
    let header = tcp_ip_header_bytes(false, !timestamps_off);
    let mss = mtu - header as f64;
    let loss = link("loss")
        .and_then(|v| v.parse::<Probability>().ok())
        .map(Probability::get)
        .filter(|p| *p > 0.0);
    let mathis_bps = loss.zip(rtt_s).map(|(p, r)| {
        mathis_bps(
            Bytes::new(mss as u64),
            Dur::from_secs_f64(r),
            p,
            MathisConstant::Periodic.value(),
        )
    });
    // TCP payload's share of the wire rate: MSS of every MTU plus the link's per-packet
    // overhead (the emulator counts 14 bytes, an Ethernet header, unless told otherwise).
    let overhead = link("overhead")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(NETEM_FRAMING as f64);
    let payload_rate = rate.map(|r| {
        goodput_ceiling(
            Rate::from_bps(r),
            mss as u32,
            header,
            overhead.max(0.0) as u32,
        )
        .bps()
    });
    let expected_bps = [payload_rate, window_bound_bps, mathis_bps]
        .into_iter()
        .flatten()
        .reduce(f64::min);
    let queue_bytes = link("queue")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|n| n * (mtu + overhead.max(0.0)))
        .or_else(|| {
            link("queue_bytes")
                .and_then(|v| v.parse::<Bytes>().ok())
                .map(|b| b.get() as f64)
        });
    let queue_drain_s = queue_bytes.zip(rate).map(|(q, r)| q * 8.0 / r);
    Theory {
        path_rate_bps: rate,
        rtt_s,
        window_bound_bps,
        mathis_bps,
        expected_bps,
        queue_drain_s,
    }
}
