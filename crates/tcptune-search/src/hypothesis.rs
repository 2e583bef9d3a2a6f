//! Hypotheses: the changes the diagnosis points to, each a set of sysctl values to try.
//!
//! The diagnosis engine decides what limits the path (`tcptune-diagnose`); this module only
//! turns its class and its recommended knobs into concrete values. Buffer maxima come from the
//! one sizing rule (`tcptune_model::buffers::buffers`), for the path's rate when it is given
//! and otherwise for a rate a few times the measured one (a window-limited flow cannot show the
//! path's capacity, so the search grows the buffer in steps and lets each step prove itself).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_diagnose::advice::Knob;
use tcptune_diagnose::engine::Limit;
use tcptune_diagnose::throughput::TestDiagnosis;
use tcptune_model::buffers::{buffers, BufferQuery, FlowSharing};
use tcptune_model::kernel::{CongestionControl, KernelSource, KernelVersion};
use tcptune_model::{Dur, Rate};

/// The receive buffer sizes (min, default, max).
pub const RMEM: &str = "net.ipv4.tcp_rmem";
/// The send buffer sizes (min, default, max).
pub const WMEM: &str = "net.ipv4.tcp_wmem";
/// The congestion control of new connections.
pub const CC: &str = "net.ipv4.tcp_congestion_control";
/// The congestion controls loaded (read only).
pub const CC_AVAILABLE: &str = "net.ipv4.tcp_available_congestion_control";
/// Selective acknowledgements.
pub const SACK: &str = "net.ipv4.tcp_sack";
/// TCP timestamps.
pub const TIMESTAMPS: &str = "net.ipv4.tcp_timestamps";
/// Window scaling.
pub const WINDOW_SCALING: &str = "net.ipv4.tcp_window_scaling";

/// Every key the search may read; all but `CC_AVAILABLE` it may write.
pub const KEYS: [&str; 7] = [
    RMEM,
    WMEM,
    CC,
    CC_AVAILABLE,
    SACK,
    TIMESTAMPS,
    WINDOW_SCALING,
];

/// The keys the search may write (what a snapshot must hold before the first change).
pub fn writable_keys() -> impl Iterator<Item = &'static str> {
    KEYS.into_iter().filter(|k| *k != CC_AVAILABLE)
}

/// Without the path's rate, a buffer step sizes for this many times the measured rate.
pub const GROWTH: f64 = 4.0;
/// With the path's rate told, a buffer within this factor of the need meets it: the RTT the
/// need is sized from moves between tests, and a step that small is lost in a short test's
/// noise. On 200 Mbit/s × 80 ms BBR's send buffer, set to its need with BBR, was asked to
/// grow by 4 KiB (6008832 → 6012928 B) on the next test's RTT, a trial of four tests.
pub const MET: f64 = 1.1;

/// The share of what the path carries a tuned flow should reach: the search's goal is within 5%
/// of the best. The diagnosis calls a flow "at the path's capacity" from 90% of its payload
/// rate up (what limits it: nothing of the hosts'), which leaves up to twice that goal's room.
pub const GOAL_SHARE: f64 = 0.95;
/// A flow below this share of the path's told rate (or of its payload) is far short of it: it
/// may yet be changed by its sender (see `shrink::floor`), and its test says little about the
/// window the path needs (see [`hypotheses`]).
pub const SHORT_OF_PATH: f64 = 0.8;

/// Sysctl values by key, exactly as the kernel prints them.
pub type Settings = BTreeMap<String, String>;

/// Which end of the test this host is: the one whose settings the search changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// This host sends (the test uploads).
    Sender,
    /// This host receives (`-R`: the server sends).
    Receiver,
}

/// One test's result, as the search uses it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Observation {
    /// Throughput the test achieved, bits per second.
    pub rate_bps: f64,
    /// Loaded RTT: the mean smoothed RTT of the test's streams, seconds.
    pub srtt_s: Option<f64>,
    /// The smallest RTT any stream saw, seconds.
    pub min_rtt_s: Option<f64>,
    /// Socket buffer memory the streams held (receive plus send buffers), bytes.
    pub memory_bytes: Option<u64>,
    /// The diagnosis's limit class.
    pub limit: Limit,
    /// Knobs the diagnosis recommends changing.
    pub knobs: Vec<Knob>,
    /// The diagnosis's one line: the evidence a change is tried on.
    pub verdict: String,
    /// The largest share of a stream's time the receiver's window held the sender back (its
    /// `rwnd_limited` chronograph), when the sender was sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rwnd_limited: Option<f64>,
    /// The same for the sender's send buffer (`sndbuf_limited`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited: Option<f64>,
    /// The payload the path carries (its told rate less the headers), bits per second, when
    /// the path's rate was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_payload_bps: Option<f64>,
    /// The sending socket's congestion control as that end reported it (this host's in the
    /// sender's role, the server's result in the receiver's), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_cc: Option<CongestionControl>,
}

impl Observation {
    /// The share of the time the buffer `key` (`RMEM`: the receiver's window, `WMEM`: the send
    /// buffer) held the flow back, when the sender was sampled.
    pub fn held_back_by(&self, key: &str) -> Option<f64> {
        if key == RMEM {
            self.rwnd_limited
        } else {
            self.sndbuf_limited
        }
    }

    /// The search's view of a test's diagnosis.
    pub fn from_diagnosis(d: &TestDiagnosis) -> Observation {
        let srtts: Vec<f64> = d
            .streams
            .iter()
            .filter_map(|s| s.evidence.rtt_s.map(Dur::secs))
            .collect();
        let min_rtt = d
            .streams
            .iter()
            .filter_map(|s| s.evidence.min_rtt_s.map(Dur::secs))
            .reduce(f64::min);
        let mems: Vec<u64> = d
            .streams
            .iter()
            .filter_map(|s| {
                let e = &s.evidence;
                match (e.receiver_buffer_bytes, e.send_buffer_bytes) {
                    (None, None) => None,
                    (r, w) => Some(r.unwrap_or(0) + w.unwrap_or(0)),
                }
            })
            .collect();
        let mut knobs: Vec<Knob> = Vec::new();
        let all = d
            .recommendations
            .iter()
            .chain(d.streams.iter().flat_map(|s| s.recommendations.iter()));
        for r in all {
            if !knobs.contains(&r.knob) {
                knobs.push(r.knob);
            }
        }
        let share = |f: fn(&tcptune_diagnose::Shares) -> f64| {
            d.streams
                .iter()
                .filter_map(|s| s.evidence.shares.as_ref().map(f))
                .reduce(f64::max)
        };
        let payloads: Vec<f64> = d
            .streams
            .iter()
            .filter_map(|s| s.evidence.path_goodput_bps.map(Rate::bps))
            .collect();
        Observation {
            // Each stream's figure is its even share of the path.
            path_payload_bps: (!payloads.is_empty()).then(|| payloads.iter().sum()),
            rwnd_limited: share(|s| s.rwnd),
            sndbuf_limited: share(|s| s.sndbuf),
            rate_bps: d.achieved_bps.bps(),
            srtt_s: (!srtts.is_empty()).then(|| srtts.iter().sum::<f64>() / srtts.len() as f64),
            min_rtt_s: min_rtt,
            memory_bytes: (!mems.is_empty()).then(|| mems.iter().sum()),
            limit: d.limit,
            knobs,
            verdict: d.verdict.clone(),
            sender_cc: d
                .streams
                .iter()
                .find_map(|s| s.in_effect.congestion.as_deref()?.parse().ok()),
        }
    }
}

/// What the search is told about the path and the limits it must keep.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Config {
    /// Which end this host is.
    pub role: Role,
    /// Parallel streams per test.
    pub flows: u32,
    /// The path's rate when known, bits per second: buffer steps size for it directly.
    pub path_rate_bps: Option<f64>,
    /// The kernel, for the buffer rule (the window share of a receive buffer).
    pub kernel: KernelVersion,
    /// Largest buffer memory all flows together may be given on this host, bytes.
    pub max_memory_bytes: u64,
    /// Largest growth of the loaded RTT a change may cause (0.5: +50%).
    pub max_rtt_growth: f64,
    /// Smallest gain worth keeping a change for (0.02: 2%).
    pub min_gain: f64,
    /// Pairs (A, B) before a trial is first judged, and the most a trial runs.
    pub min_pairs: usize,
    /// The most pairs a trial runs, but for a second chance.
    pub max_pairs: usize,
    /// Pairs a trial still promising after `max_pairs` (undecided, its shift above
    /// `min_gain`) may run more, when the budget has room: the rank-sum test looks once more
    /// there, with the level its earlier looks left unspent (`stats::compare_at`).
    pub extra_pairs: usize,
    /// The budget: tests in all, and seconds in all.
    pub max_tests: usize,
    /// The budget in seconds.
    pub max_time_s: f64,
    /// Each test's length, seconds (to stop before the budget runs out mid-test).
    pub test_time_s: f64,
    /// A smaller buffer is kept while it holds the result within this share of the best. Half
    /// of the 5% a tuned pair of hosts may lose to smaller buffers: each end's search shrinks its
    /// own buffer against its own best, and the two losses multiply (on 20 Mbit/s × 60 ms at 1%
    /// loss the sender's shrink held 95.4% and the receiver's 97.0%: 92.5% together).
    pub shrink_tolerance: f64,
    /// Pairs a shrink trial runs (judged on the means: it keeps a result, it does not find one).
    pub shrink_pairs: usize,
    /// Run one A/A trial (the settings in effect as both arms) instead of the search: how
    /// often the decision rule calls no difference a difference.
    pub aa_trial: bool,
}

impl Config {
    /// The defaults for `role` and tests of `test_time_s` seconds.
    pub fn new(role: Role, test_time_s: f64) -> Config {
        Config {
            role,
            flows: 1,
            path_rate_bps: None,
            kernel: KernelVersion::new(6, 6),
            max_memory_bytes: 256 << 20,
            max_rtt_growth: 0.5,
            min_gain: 0.02,
            min_pairs: 3,
            max_pairs: 5,
            extra_pairs: 2,
            max_tests: 25,
            max_time_s: 300.0,
            test_time_s,
            shrink_tolerance: 0.025,
            shrink_pairs: 1,
            aa_trial: false,
        }
    }
}

/// Which setting a hypothesis changes, so the shrink phase knows the buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `tcp_rmem`'s maximum.
    ReceiveBuffer,
    /// `tcp_wmem`'s maximum.
    SendBuffer,
    /// The congestion control.
    CongestionControl,
    /// BBR and the send buffer it needs, together.
    CongestionControlWithSendBuffer,
    /// An on/off option (SACK, timestamps, window scaling).
    Option,
}

/// One change to try.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Hypothesis {
    /// Which setting it changes.
    pub kind: Kind,
    /// The values it writes.
    pub changes: Vec<(String, String)>,
    /// Why the diagnosis points to it.
    pub why: String,
    /// Buffer memory all flows may take with it, bytes (buffer changes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// A change the search does not try, and why.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct NotTried {
    /// The change, in words.
    pub what: String,
    /// Why it is not tried.
    pub why: String,
}

/// The third field of a tcp_rmem/tcp_wmem value.
pub fn buffer_max(v: &str) -> Option<u64> {
    v.split_whitespace().nth(2)?.parse().ok()
}

/// `v` with its third field set to `max` (min and default kept, lowered if above it).
pub fn with_buffer_max(v: &str, max: u64) -> Option<String> {
    let f: Vec<u64> = v
        .split_whitespace()
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let [min, def, _] = f[..] else { return None };
    Some(format!("{} {} {max}", min.min(max), def.min(max)))
}

/// Rounds up to a multiple of 4 KiB (pages: how the values are usually written).
pub(crate) fn page_round(n: u64) -> u64 {
    n.div_ceil(4096) * 4096
}

/// The buffer maximum of `key` (tcp_rmem or tcp_wmem) that `rate_bps` × `rtt_s` needs (one
/// flow's share of it), by the model's one sizing rule: the search's only buffer sizing; `headroom` gives the receive autotuner its 2× (a step up), without
/// it the window is the BDP exactly (the smallest worth trying when shrinking).
pub fn buffer_need(
    key: &str,
    rate_bps: f64,
    rtt_s: f64,
    headroom: bool,
    now: &Settings,
    cfg: &Config,
) -> Option<u64> {
    let cc = now
        .get(CC)
        .and_then(|c| c.parse().ok())
        .unwrap_or(CongestionControl::Cubic);
    let q = BufferQuery {
        rate: Rate::from_bps(rate_bps.max(Rate::MIN_BPS)),
        rtt: Dur::from_secs_f64(rtt_s.max(1e-6)),
        flows: cfg.flows.max(1),
        sharing: FlowSharing::Shared,
        memory_budget: None,
        kernel: cfg.kernel,
        kernel_source: KernelSource::Given,
        scaling_ratio: None,
        adv_win_scale: None,
        cc,
    };
    let b = buffers(&q).ok()?;
    Some(match (key == RMEM, headroom) {
        (true, true) => b.tcp_rmem_headroom_bytes.get(),
        (true, false) => b.tcp_rmem_max_bytes.get(),
        (false, _) => b.tcp_wmem_max_bytes.get(),
    })
}

/// Whether the congestion control in effect backs off only on loss (CUBIC, Reno, and any the
/// models do not know): its window grows until the bottleneck's queue overflows.
fn loss_based(now: &Settings) -> bool {
    !matches!(
        now.get(CC).and_then(|c| c.parse().ok()),
        Some(CongestionControl::Bbr)
    )
}

/// The RTT the window of buffer `key` must span, and whether it is the loaded one. The path's
/// smallest RTT (the BDP's), except for a loss-based sender's send buffer: its window grows
/// until the queue overflows, so at each loss it holds the path's rate × the loaded RTT, and
/// the recovery after it needs the congestion control's factor over that, not over the BDP.
/// On 1 Gbit/s × 16 ms behind a 1000-packet queue CUBIC's loaded RTT read 17–20 ms, and its 4 s
/// tests with the model's 4 MiB (2 × the BDP) carried a median of 874 Mbit/s against 906 with
/// 8 MiB (the receive buffer 6 MiB throughout; both bimodal, 711–908 and 651–919).
fn window_rtt(key: &str, obs: &Observation, now: &Settings) -> Option<(f64, bool)> {
    let min = obs.min_rtt_s.or(obs.srtt_s)?;
    match obs.srtt_s {
        Some(loaded) if key == WMEM && loss_based(now) && loaded > min => Some((loaded, true)),
        _ => Some((min, false)),
    }
}

/// Whether this end's buffer (`key`) could be what limits the flow, whatever class the short
/// test's diagnosis named: the diagnosis says what it saw (slow start on a long fat path, say),
/// the BDP says what the path needs. With the path's rate told: the flow is below 95% of its
/// share and the buffer is below what the window's RTT (`window_rtt`) × that share needs.
/// Without it: the flow used at least half the window the buffer allows (a larger one may let
/// it go faster).
pub fn window_could_limit(key: &str, obs: &Observation, now: &Settings, cfg: &Config) -> bool {
    let Some(cur) = now.get(key).and_then(|v| buffer_max(v)) else {
        return false;
    };
    let Some((rtt, _)) = window_rtt(key, obs, now) else {
        return false;
    };
    match cfg.path_rate_bps {
        Some(path) => {
            obs.rate_bps < GOAL_SHARE * path
                && buffer_need(key, path, rtt, false, now, cfg).is_some_and(|n| n > cur)
        }
        None => buffer_need(key, obs.rate_bps, rtt, false, now, cfg)
            .is_some_and(|n| n as f64 >= 0.5 * cur as f64),
    }
}

fn buffer_hypothesis(
    key: &str,
    obs: &Observation,
    now: &Settings,
    cfg: &Config,
    out: &mut (Vec<Hypothesis>, Vec<NotTried>),
) {
    let Some(cur) = now.get(key).and_then(|v| buffer_max(v)) else {
        return;
    };
    let receive = key == RMEM;
    let rate = cfg
        .path_rate_bps
        .unwrap_or(obs.rate_bps * GROWTH)
        .max(Rate::MIN_BPS);
    let (rtt, loaded) = window_rtt(key, obs, now).unwrap_or((0.001, false));
    let rtt = rtt.max(1e-6);
    let Some(need) = buffer_need(key, rate, rtt, true, now, cfg) else {
        return;
    };
    let flows = u64::from(cfg.flows.max(1));
    let cap = cfg.max_memory_bytes / flows;
    // For a given path rate the need is the target, and a buffer that meets it (within
    // [`MET`]) is left alone; otherwise at least double: a smaller step is lost in the noise
    // of a short test.
    // So is a need from the loaded RTT: measured under a send buffer that caps the window, it
    // understates the window's peak (the cap keeps the queue from filling).
    let target = match cfg.path_rate_bps {
        Some(_) if page_round(need) as f64 <= MET * cur as f64 => return,
        Some(_) if !loaded => page_round(need),
        _ => page_round(need.max(cur.saturating_mul(2))),
    }
    .min(cap);
    if target <= cur {
        out.1.push(NotTried {
            what: format!("{key} max above {cur}"),
            why: format!(
                "the memory limit ({} B for {flows} flow(s)) allows no larger buffer",
                cfg.max_memory_bytes
            ),
        });
        return;
    }
    let Some(value) = with_buffer_max(&now[key], target) else {
        return;
    };
    out.0.push(Hypothesis {
        kind: if receive {
            Kind::ReceiveBuffer
        } else {
            Kind::SendBuffer
        },
        changes: vec![(key.to_string(), value)],
        why: format!(
            "{}: {} max {cur} → {target} B, sized for {:.1} Mbit/s × {:.2} ms{}",
            short_of_the_path(obs).unwrap_or_else(|| obs.limit.label().to_string()),
            if receive {
                "receive buffer"
            } else {
                "send buffer"
            },
            rate / 1e6,
            rtt * 1e3,
            if loaded {
                " (the loaded RTT: a loss-based sender's window fills the queue before it \
                 backs off, and its send buffer must hold that window through the recovery)"
            } else {
                ""
            }
        ),
        memory_bytes: Some(target * flows),
    });
}

/// The congestion control change `cc` together with the send buffer its sender needs (sized
/// with that congestion control in effect), when that buffer is larger than the one in effect.
fn with_send_buffer(
    cc: &Hypothesis,
    obs: &Observation,
    now: &Settings,
    cfg: &Config,
) -> Option<Hypothesis> {
    let mut after = now.clone();
    after.extend(cc.changes.iter().cloned());
    let mut sized = (Vec::new(), Vec::new());
    buffer_hypothesis(WMEM, obs, &after, cfg, &mut sized);
    let buffer = sized.0.pop()?;
    let mut changes = cc.changes.clone();
    changes.extend(buffer.changes);
    Some(Hypothesis {
        kind: Kind::CongestionControlWithSendBuffer,
        changes,
        why: format!(
            "{}, with the send buffer it needs ({})",
            cc.why,
            buffer
                .why
                .split_once(": ")
                .map_or(buffer.why.as_str(), |(_, b)| b)
        ),
        memory_bytes: buffer.memory_bytes,
    })
}

/// Why a flow the diagnosis calls at the path's capacity may still gain: it carries less than
/// [`GOAL_SHARE`] of the path's payload (1 Gbit/s × 16 ms under CUBIC: 877–895 of 941.5 Mbit/s,
/// "at capacity", where BBR carried 910–918). `None` when it carries more, or the path's rate
/// was not told.
fn short_of_the_path(obs: &Observation) -> Option<String> {
    let payload = obs.path_payload_bps?;
    (obs.limit == Limit::PathCapacity && obs.rate_bps < GOAL_SHARE * payload).then(|| {
        format!(
            "at the path's capacity, but {:.1} Mbit/s is {:.1}% of the {:.1} Mbit/s of payload \
             it carries",
            obs.rate_bps / 1e6,
            100.0 * obs.rate_bps / payload,
            payload / 1e6
        )
    })
}

/// The changes to try next, from the latest observation and the settings in effect, and the
/// ones the search will not try (with why).
pub fn hypotheses(
    obs: &Observation,
    now: &Settings,
    cfg: &Config,
) -> (Vec<Hypothesis>, Vec<NotTried>) {
    let mut out = (Vec::new(), Vec::new());
    let wants = |k: Knob| obs.knobs.contains(&k);
    match cfg.role {
        Role::Receiver
            if obs.limit == Limit::ReceiverWindow
                || wants(Knob::TcpRmemMax)
                || window_could_limit(RMEM, obs, now, cfg) =>
        {
            buffer_hypothesis(RMEM, obs, now, cfg, &mut out)
        }
        Role::Sender
            if obs.limit == Limit::SendBuffer
                || wants(Knob::TcpWmemMax)
                || window_could_limit(WMEM, obs, now, cfg) =>
        {
            buffer_hypothesis(WMEM, obs, now, cfg, &mut out)
        }
        _ => {}
    }
    let short = short_of_the_path(obs);
    let cc_matters = matches!(obs.limit, Limit::Loss | Limit::Network)
        || wants(Knob::CongestionControl)
        || short.is_some();
    // A sender held back by loss or its cwnd tries the congestion control before a send buffer
    // the diagnosis did not name (only the BDP asks for it): that is what the evidence points
    // to, and a bigger buffer under a loss-based sender mostly buys a deeper slow-start
    // overshoot. Where both are wanted it first tries them together: each alone can show
    // nothing. On the long fat path (1 Gbit/s × 100 ms, a 1000-packet queue) CUBIC's 5 s
    // tests with a 25 MB send buffer collapsed in 4 of 5 (142–165 against 156–194 Mbit/s with
    // 4 MiB), and BBR held to the 4 MiB buffer ran at 193–197 against CUBIC's 152–199.
    //
    // A flow at the path's capacity but short of its payload goes the same way: a loss-based
    // sender leaves the capacity its backoffs give up unused, so the congestion control is
    // what the shortfall points to, and the plan does not hang on whether the first test
    // happened to collapse. On 1 Gbit/s × 16 ms behind a 1000-packet queue, CUBIC's 4 s tests
    // with 4 MiB read 711–908 Mbit/s (71 tests, a mean of 838, a third below 810), with the
    // loaded window's 8 MiB 651–919 (50 tests, a mean of 884: bimodal as well), and BBR with
    // the 6 MiB it needs 872–902 (19 tests, a mean of 890); the send buffer alone first spent
    // the sender's budget before BBR was decided (`tests::measured`).
    let buffer_first = obs.limit == Limit::SendBuffer || wants(Knob::TcpWmemMax);
    let cc_first = cfg.role == Role::Sender && cc_matters && !buffer_first;
    let buffers_tried = out.0.len();
    if cfg.role == Role::Sender && cc_matters {
        let available = now.get(CC_AVAILABLE).map(String::as_str).unwrap_or("");
        let current = now.get(CC).map(String::as_str).unwrap_or("");
        if current != "bbr" {
            if available.split_whitespace().any(|c| c == "bbr") {
                out.0.push(Hypothesis {
                    kind: Kind::CongestionControl,
                    changes: vec![(CC.to_string(), "bbr".to_string())],
                    why: match &short {
                        Some(short) => format!(
                            "{short}: a loss-based sender backs off at each of the queue's \
                             overflows, and BBR does not take loss for congestion"
                        ),
                        None => format!(
                            "{}: BBR does not take loss for congestion",
                            obs.limit.label()
                        ),
                    },
                    memory_bytes: None,
                });
            } else {
                out.1.push(NotTried {
                    what: format!("{CC} = bbr"),
                    why: "bbr is not available here (modprobe tcp_bbr)".into(),
                });
            }
        }
    }
    // A flow far short of the told path's payload (a test that collapsed before a queue
    // formed) says little about the window the path needs, so BBR also goes with the send
    // buffer it needs for the told rate when only BBR needs a larger one: its send buffer
    // holds 3 windows where CUBIC's holds 2. On 200 Mbit/s × 80 ms at 0.01% loss a first test
    // at 59 Mbit/s left the 4 MiB maximum meeting CUBIC's need; BBR alone at it ran 135–138
    // Mbit/s against CUBIC's 95–153 and stopped for futility, and BBR with 6 MiB ran 155–159
    // but had too few tests left to be decided.
    let far_short = obs
        .path_payload_bps
        .is_some_and(|p| obs.rate_bps < SHORT_OF_PATH * p);
    let joint_wanted = buffers_tried > 0 || (far_short && cfg.path_rate_bps.is_some());
    if cc_first && joint_wanted && out.0.len() > buffers_tried {
        out.0.rotate_left(buffers_tried);
        if let Some(joint) = with_send_buffer(&out.0[0], obs, now, cfg) {
            out.0.insert(0, joint);
        }
    }
    for (knob, key) in [
        (Knob::Sack, SACK),
        (Knob::Timestamps, TIMESTAMPS),
        (Knob::WindowScaling, WINDOW_SCALING),
    ] {
        if wants(knob) && now.get(key).map(String::as_str) == Some("0") {
            out.0.push(Hypothesis {
                kind: Kind::Option,
                changes: vec![(key.to_string(), "1".to_string())],
                why: format!("the diagnosis finds {key} off, and it costs this path throughput"),
                memory_bytes: None,
            });
        }
    }
    out.1.push(NotTried {
        what: "initcwnd/initrwnd per route".into(),
        why: "a route change, which the tune snapshot does not hold yet; bulk tests of seconds hardly depend on it".into(),
    });
    out.1.push(NotTried {
        what: "net.ipv4.tcp_notsent_lowat".into(),
        why: "a latency setting for interactive senders; the search measures bulk throughput"
            .into(),
    });
    out
}
