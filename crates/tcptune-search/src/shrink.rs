//! The shrink phase's rules: each kept buffer maximum made as small as keeps the result
//! within the tolerance of the unshrunk setting's, by a bisection in ratio from the model's
//! need; keeps near the bisection's end confirmed on a second pair, and a keep whose later
//! tests slid out of the tolerance put back. The search (`search.rs`) runs the trials.

use tcptune_diagnose::engine::Limit;
use tcptune_model::kernel::CongestionControl;

use crate::hypothesis::{
    buffer_need, page_round, Config, Hypothesis, Kind, Observation, Role, Settings, GOAL_SHARE,
    RMEM, SHORT_OF_PATH,
};
use crate::outcome::Outcome;
use crate::stats::mean;

/// Shrinking one buffer: the model's need for the best rate measured first (an oversized start
/// usually holds at it: one trial) when the budget has room for a miss there and a trial after
/// it ([`need_first_tests`]), then a bisection in ratio between the largest maximum known
/// not to hold the result and the smallest known to, ended when they are within
/// [`BRACKET`] of each other (the tolerance's line is then bracketed that closely). From 6 MiB
/// to a 128 KiB need that is the need and at most four more trials.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shrink {
    pub(crate) key: &'static str,
    /// The smallest maximum known to hold the result.
    pub(crate) good: u64,
    /// The largest maximum known not to, or the need (below which nothing is tried).
    pub(crate) bad: u64,
    /// The first candidate is the model's need for the best rate measured.
    pub(crate) first: bool,
}

/// A shrink ends when the kept maximum is within this ratio of one that lost more than the
/// tolerance (so it is at most this much above the smallest sufficient one).
pub const BRACKET: f64 = 1.5;
/// A shrink kept within this ratio of what did not hold (or of the need) ends its bisection
/// there or one step later, so that keep is the final state: it is judged on two pairs, not one.
/// One good test keeps a buffer at its edge about half the time: on 1 Gbit/s × 0.2 ms a
/// 72 KiB send and 88 KiB receive maximum each held in its one test (931–944 Mbit/s), and six
/// tests of the two together gave 908, 784, 815, 927, 930 and 787 against 940 at 4/6 MiB.
pub const CONFIRM_WITHIN: f64 = BRACKET * BRACKET;
/// A shrink that lost more than the tolerance is still kept when the smaller buffer held the
/// flow back for at most this share of the time (the loss was the path's noise).
pub const NOT_BINDING: f64 = 0.05;
/// A shrink whose buffer held the flow back for more than this share of its test is rolled
/// back even when the rate held, with the loaded RTT below [`EDGE_QUEUE`] × the path's: it
/// sits at its edge. On a 1 Gbit/s × 1.5 ms lab path a receive maximum at the model's need
/// (the BDP's window at half the buffer) gave 924 Mbit/s in its one test, window-limited 98%
/// of it, and 570–590 in half of the tests after: the kernel's window share of a buffer moves
/// between about a half and four-fifths with the received packets' layout, and the loaded RTT
/// was 2 ms, not 1.5.
pub const AT_EDGE: f64 = 0.5;
/// A shrink whose buffer held the flow back for more than this share of its test, while the
/// flow carried less than [`GOAL_SHARE`] of the path's told payload, is rolled back even when
/// the rate held: the smaller buffer became a limit on a flow with room left, and a reference
/// lowered by the path's own collapses let it pass. On 1 Gbit/s × 16 ms under CUBIC a receive
/// maximum of 4.5 MiB held the flow back 17–31% of its tests and passed against 6 MiB tests of
/// 740–888 Mbit/s (mean 815); in a side run ten tests of it read 703–853 (median 842), and
/// eight with 6 MiB 772–880 (median 878), the search's tests of 6 MiB held back 0–2%. Unshrunk
/// buffers on the bench's paths held their flows back at most 6%.
pub const BINDS_SHORT: f64 = 0.15;
/// The loaded RTT, as a multiple of the path's, below which a window that held the flow back
/// holds little more than the BDP (see [`AT_EDGE`]). A LAN's flow is held back by the window all the time at any buffer (the window
/// many BDPs deep, the excess queued), with a loaded RTT many times the path's.
pub const EDGE_QUEUE: f64 = 1.5;
/// No buffer maximum below this is tried: two of the 64 KiB packets the stack builds (TSO on
/// the sender, GRO on the receiver), and the kernel's default receive buffer. A buffer that
/// holds one such packet stalls the flow whenever one waits: on 1 Gbit/s × 0.2 ms a 72 KiB
/// send and 88 KiB receive maximum each held in one test, and half the tests of the two
/// together lost 13–17% (908, 784, 815, 927, 930, 787 against 940 Mbit/s at 4/6 MiB; at
/// 128 KiB each, 912–939).
pub const FLOOR: u64 = 128 << 10;

/// The tests the model's need may take as a shrink's first candidate before it is rolled back
/// (a keep there is near its end, so it is confirmed on a second pair), and the bisection's next
/// trial after such a miss: the need goes first only when the budget has room for both. With
/// room for one trial, the middle of the bracket is the likelier keep: on 50 Mbit/s × 50 ms at
/// 0.1% loss the sender's search had four tests left after BBR's trial, and BBR's send buffer
/// at the model's 850 KiB need held in one pair and lost 3% over two (44.7 and 43.3 against
/// 45.6 and 45.5 Mbit/s) in two runs of three, which left the 4 MiB maximum in effect.
pub(crate) fn need_first_tests(cfg: &Config) -> usize {
    near_end_tests(cfg) + 2 * cfg.shrink_pairs
}

/// The tests a shrink trial near its bisection's end takes to a keep ([`CONFIRM_WITHIN`]): one
/// more pair than the others. With room for fewer, such a trial can only roll back or go
/// undecided, changing nothing, so it is not begun.
pub(crate) fn near_end_tests(cfg: &Config) -> usize {
    2 * (cfg.shrink_pairs + 1)
}

/// A shrink kept, and what putting it back needs.
pub(crate) struct Undo {
    /// The value the shrink replaced.
    pub(crate) value: String,
    /// The tests of that value (`Search::kept_rates` then).
    pub(crate) rates: Vec<f64>,
    /// The step that kept it.
    pub(crate) step: usize,
}

/// Whether a test that fell short was the path's noise, not the buffer's: the buffer held the
/// flow back at most [`NOT_BINDING`] of the time. The send buffer's chronograph can stay quiet
/// while the buffer holds a steady flow back (BBR at 20 Mbit/s × 60 ms, 1% loss: 16.8 against
/// 18.0–18.3 Mbit/s with a 400 KiB send buffer, the queue 12 ms shorter, `sndbuf_limited`
/// 0.5%), so for a send buffer only a loss-limited test is taken for the path's noise. The
/// receiver's `rwnd_limited` counts every stall at the window.
pub(crate) fn the_paths_noise(key: &str, obs: &Observation) -> bool {
    let trusted = key == RMEM || obs.limit == Limit::Loss;
    trusted && obs.held_back_by(key).is_some_and(|h| h <= NOT_BINDING)
}

/// The buffer `key` in words.
pub(crate) fn what(key: &str) -> &'static str {
    if key == RMEM {
        "the receiver's window"
    } else {
        "the send buffer"
    }
}

/// A shrink's verdict on B's mean `mb` and its last test `last_b` against the unshrunk
/// setting's tests (`reference_rates`): kept when the smaller buffer held the result within
/// the tolerance without holding the flow back for more than [`AT_EDGE`] of the time at a
/// loaded RTT near the path's ([`EDGE_QUEUE`]) nor for more than [`BINDS_SHORT`] of it on a
/// flow short of the path's told payload, or when it did not hold the result but the
/// sender's chronographs show the smaller buffer held the flow back for at most
/// [`NOT_BINDING`] of the time (for a send buffer, in a loss-limited test: its chronograph
/// misses a buffer that holds a steady flow back). On a lossy path one test under CUBIC can
/// carry a third of the next (9 against 28 Mbit/s at 0.1% loss, both limited by the loss): the
/// buffer did not cost that, so it is not the buffer's to pay for.
pub(crate) fn judge(
    cfg: &Config,
    key: &str,
    last_b: Option<&Observation>,
    mb: f64,
    reference_rates: &[f64],
) -> (Outcome, String) {
    let reference = mean(reference_rates);
    let share = mb / reference * 100.0;
    let what = what(key);
    let held_back = last_b.and_then(|o| o.held_back_by(key));
    if mb >= (1.0 - cfg.shrink_tolerance) * reference {
        // Held back with the loaded RTT near the path's: the window hardly exceeds the
        // BDP. With a queue behind it (a LAN's window many BDPs deep) it is not the edge.
        let shallow = last_b
            .and_then(|o| Some(o.srtt_s? < EDGE_QUEUE * o.min_rtt_s?))
            .unwrap_or(true);
        if let Some(held) = held_back.filter(|h| *h > AT_EDGE && shallow) {
            return (
                Outcome::RolledBack,
                format!(
                    "{share:.1}% of the unshrunk setting's {:.1} Mbit/s, but {what} held the flow back {:.0}% of the time (over {:.0}%): a buffer at its edge, which a little more RTT or a smaller window share of the buffer costs the rate",
                    reference / 1e6,
                    held * 100.0,
                    AT_EDGE * 100.0
                ),
            );
        }
        if let Some((held, carried)) = binds_short(key, last_b) {
            return (
                Outcome::RolledBack,
                format!(
                    "{share:.1}% of the unshrunk setting's {:.1} Mbit/s, but {what} held the flow back {:.0}% of the time (over {:.0}%) while it carried {:.0}% of the path's payload: the smaller buffer became a limit on a flow with room left",
                    reference / 1e6,
                    held * 100.0,
                    BINDS_SHORT * 100.0,
                    carried * 100.0
                ),
            );
        }
        return (
            Outcome::Kept,
            format!(
                "{share:.1}% of the unshrunk setting's {:.1} Mbit/s (mean of {} tests), within {:.1}%",
                reference / 1e6,
                reference_rates.len(),
                cfg.shrink_tolerance * 100.0
            ),
        );
    }
    let noise = last_b.is_some_and(|o| the_paths_noise(key, o));
    match held_back {
        Some(held) if noise => (
            Outcome::Kept,
            format!(
                "{share:.1}% of the unshrunk setting's {:.1} Mbit/s, but {what} held the flow back {:.1}% of the time (at most {:.0}%): the difference is the path's, not the buffer's",
                reference / 1e6,
                held * 100.0,
                NOT_BINDING * 100.0
            ),
        ),
        held => (
            Outcome::RolledBack,
            format!(
                "{share:.1}% of the unshrunk setting's {:.1} Mbit/s: more than {:.1}% lost{}",
                reference / 1e6,
                cfg.shrink_tolerance * 100.0,
                held.map_or(String::new(), |h| format!(
                    ", {what} holding the flow back {:.1}% of the time",
                    h * 100.0
                ))
            ),
        ),
    }
}

/// The share of the time buffer `key` held the flow of test `b` back and the share of the
/// path's told payload it carried, when the first is over [`BINDS_SHORT`] and the second under
/// [`GOAL_SHARE`] (see [`BINDS_SHORT`]).
fn binds_short(key: &str, b: Option<&Observation>) -> Option<(f64, f64)> {
    let b = b?;
    let held = b.held_back_by(key)?;
    let carried = b.rate_bps / b.path_payload_bps?;
    (held > BINDS_SHORT && carried < GOAL_SHARE).then_some((held, carried))
}

/// The smallest maximum of `key` worth trying: the model's need for the best rate measured
/// over the path's RTT (`rate`: the best test at the kept setting), at least [`FLOOR`]. With the path's rate told and the flow below
/// [`SHORT_OF_PATH`] of it, neither buffer is shrunk below what the path's rate needs (a
/// receive buffer with the 2× headroom: the window a BBR sender keeps in flight): the other
/// end may still lift what limits the flow. A receiver sized for a loss-limited CUBIC held
/// BBR to 40 of 46 Mbit/s at 50 ms and 0.1% loss where the headroom carries it; a sender's
/// buffer shrunk while the receiver's window held the flow at 345 Mbit/s on 1 Gbit/s ×
/// 100 ms (100% of the time) became the limit once that window grew. A flow already at the
/// path's rate needs no more buffer than it uses.
pub(crate) fn floor(
    key: &str,
    last_obs: Option<&Observation>,
    rate: f64,
    current: &Settings,
    cfg: &Config,
) -> u64 {
    last_obs
        .and_then(|o| {
            let rtt = o.min_rtt_s.or(o.srtt_s)?;
            let measured = buffer_need(key, rate, rtt, false, current, cfg);
            let told = cfg
                .path_rate_bps
                .filter(|p| rate < SHORT_OF_PATH * p)
                .and_then(|p| buffer_need(key, p, rtt, true, current, cfg));
            measured.max(told)
        })
        .map_or(FLOOR, page_round)
        .max(FLOOR)
}

/// The shrink's first candidate for `key`: the model's need for the flow's sender. That is the
/// floor, except for the receive buffer of a BBR sender: BBR keeps twice the BDP in flight
/// (its cwnd gain) and sends on through a loss's recovery while the hole holds the window's
/// left edge, so the window must hold that (the need with the autotuner's 2× headroom). In
/// the bench's runs a receive maximum at the BDP's window lost 10–31% in all 13 trials behind
/// a BBR sender, the window holding the flow back: seven on 50 Mbit/s × 50 ms at 0.1% loss
/// (85–90%, a third of the time held back), and two each on the shallow-queue, the 1%-loss
/// and the long lossy path; on the first, 1.0–1.07 MiB (1.8× that window) kept 97.0–100.7%
/// of the rate in six runs. The floor stays the BDP's window: the bisection may still go below.
pub(crate) fn first_candidate(
    key: &str,
    last_obs: Option<&Observation>,
    rate: f64,
    current: &Settings,
    cfg: &Config,
    floor: u64,
) -> u64 {
    let bbr_sender = |o: &&Observation| o.sender_cc == Some(CongestionControl::Bbr);
    last_obs
        .filter(bbr_sender)
        .filter(|_| key == RMEM && cfg.role == Role::Receiver)
        .and_then(|o| {
            let rtt = o.min_rtt_s.or(o.srtt_s)?;
            buffer_need(key, rate, rtt, true, current, cfg)
        })
        .map_or(floor, page_round)
        .max(floor)
}

/// The next maximum to try for `sh`, if one is worth a trial: the model's need (`first`, at
/// least `floor`) first when the budget has room for [`need_first_tests`] more (`room`), then
/// the geometric middle of what held and what did not (or the floor), until they are within
/// [`BRACKET`].
pub(crate) fn next_candidate(sh: &Shrink, floor: u64, first: u64, room: bool) -> Option<u64> {
    let lo = sh.bad.max(floor);
    let candidate = if sh.first && room && first > sh.bad && first < sh.good {
        first
    } else {
        page_round((sh.good as f64 * lo as f64).sqrt() as u64)
    };
    (sh.good as f64 > BRACKET * lo as f64 && candidate < sh.good).then_some(candidate)
}

/// Whether keeping `candidate` leaves the buffer within [`CONFIRM_WITHIN`] of the largest
/// maximum known not to hold the result (or of the need): a keep there is likely the final
/// state, so it is confirmed on one more pair before it is kept.
pub(crate) fn near_its_end(sh: &Shrink, candidate: u64, floor: u64) -> bool {
    candidate as f64 <= CONFIRM_WITHIN * sh.bad.max(floor) as f64
}

/// The trial of `candidate` for `sh` (`value`: the sysctl's value with that maximum).
pub(crate) fn hypothesis(
    sh: &Shrink,
    candidate: u64,
    (floor, first): (u64, u64),
    value: String,
    flows: u32,
) -> Hypothesis {
    Hypothesis {
        kind: if sh.key == RMEM {
            Kind::ReceiveBuffer
        } else {
            Kind::SendBuffer
        },
        changes: vec![(sh.key.to_string(), value)],
        why: format!(
            "shrink {} max {} → {candidate} B ({})",
            sh.key,
            sh.good,
            if candidate == floor {
                "the model's need for the best rate"
            } else if sh.first && candidate == first {
                "the model's need for the best rate behind a BBR sender: twice the BDP's window"
            } else if sh.bad >= floor {
                "between what held and what did not"
            } else if sh.first {
                "between what held and the model's need: the budget has room for one trial, \
                 and a miss at the need would leave none for the next"
            } else {
                "between what held and the model's need"
            }
        ),
        memory_bytes: Some(candidate * u64::from(flows.max(1))),
    }
}
