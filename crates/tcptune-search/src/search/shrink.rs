//! The shrink phase: each kept buffer maximum made as small as keeps the result within the
//! tolerance of the unshrunk setting's, by a bisection in ratio from the model's need; keeps
//! near the bisection's end confirmed on a second pair, and a keep whose later tests slid out
//! of the tolerance put back.

use tcptune_diagnose::engine::Limit;

use super::{Action, Next, Search, Trial};
use crate::hypothesis::{
    buffer_max, buffer_need, with_buffer_max, Hypothesis, Kind, Observation, RMEM,
};
use crate::outcome::{Outcome, Phase};
use crate::stats::mean;

/// Shrinking one buffer: the model's need for the best rate measured first (an oversized start
/// usually holds at it: one trial), then a bisection in ratio between the largest maximum known
/// not to hold the result and the smallest known to, ended when they are within
/// [`BRACKET`] of each other (the tolerance's line is then bracketed that closely). From 6 MiB
/// to a 128 KiB need that is the need and at most four more trials.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shrink {
    pub(super) key: &'static str,
    /// The smallest maximum known to hold the result.
    pub(super) good: u64,
    /// The largest maximum known not to, or the need (below which nothing is tried).
    pub(super) bad: u64,
    /// The first candidate is the model's need for the best rate measured.
    pub(super) first: bool,
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
/// The loaded RTT, as a multiple of the path's, below which a window that held the flow back
/// holds little more than the BDP (see [`AT_EDGE`]). A LAN's flow is held back by the window all the time at any buffer (the window
/// many BDPs deep, the excess queued), with a loaded RTT many times the path's.
pub const EDGE_QUEUE: f64 = 1.5;
/// A flow below this share of the path's told rate may yet be changed by its sender (see
/// `Search::shrink_floor`).
pub const SHORT_OF_PATH: f64 = 0.8;
/// No buffer maximum below this is tried: two of the 64 KiB packets the stack builds (TSO on
/// the sender, GRO on the receiver), and the kernel's default receive buffer. A buffer that
/// holds one such packet stalls the flow whenever one waits: on 1 Gbit/s × 0.2 ms a 72 KiB
/// send and 88 KiB receive maximum each held in one test, and half the tests of the two
/// together lost 13–17% (908, 784, 815, 927, 930, 787 against 940 Mbit/s at 4/6 MiB; at
/// 128 KiB each, 912–939).
pub const FLOOR: u64 = 128 << 10;

/// A shrink kept, and what putting it back needs.
pub(super) struct Undo {
    /// The value the shrink replaced.
    value: String,
    /// The tests of that value (`Search::kept_rates` then).
    rates: Vec<f64>,
    /// The step that kept it.
    step: usize,
}

/// Whether a test that fell short was the path's noise, not the buffer's: the buffer held the
/// flow back at most [`NOT_BINDING`] of the time. The send buffer's chronograph can stay quiet
/// while the buffer holds a steady flow back (BBR at 20 Mbit/s × 60 ms, 1% loss: 16.8 against
/// 18.0–18.3 Mbit/s with a 400 KiB send buffer, the queue 12 ms shorter, `sndbuf_limited`
/// 0.5%), so for a send buffer only a loss-limited test is taken for the path's noise. The
/// receiver's `rwnd_limited` counts every stall at the window.
fn the_paths_noise(key: &str, obs: &Observation) -> bool {
    let trusted = key == RMEM || obs.limit == Limit::Loss;
    trusted && obs.held_back_by(key).is_some_and(|h| h <= NOT_BINDING)
}

fn what(key: &str) -> &'static str {
    if key == RMEM {
        "the receiver's window"
    } else {
        "the send buffer"
    }
}

impl Search {
    /// Whether keeping this shrink leaves its buffer within [`CONFIRM_WITHIN`] of the largest
    /// maximum known not to hold the result (or of the need): a keep there is likely the final
    /// state, so it is confirmed on one more pair before it is kept.
    pub(super) fn near_its_end(&self, t: &Trial) -> bool {
        let Some(sh) = self.shrink else {
            return false;
        };
        let candidate = t.hyp.changes.first().and_then(|(_, v)| buffer_max(v));
        let lo = sh.bad.max(self.shrink_floor(sh.key));
        candidate.is_some_and(|c| c as f64 <= CONFIRM_WITHIN * lo as f64)
    }

    /// A shrink's verdict, on its one pair (two near its end, see [`CONFIRM_WITHIN`]): kept when the smaller buffer held the result within
    /// the tolerance of the unshrunk setting's mean (see `unshrunk_rates`) without holding the
    /// flow back for more than [`AT_EDGE`] of the time at a loaded RTT near the path's ([`EDGE_QUEUE`]), or when it
    /// did not hold the result but the sender's chronographs show the smaller buffer held the
    /// flow back for at most [`NOT_BINDING`] of the time (for a send buffer, in a loss-limited
    /// test: its chronograph misses a buffer that holds a steady flow back). On a lossy
    /// path one test under CUBIC can carry a third of the next (9 against 28 Mbit/s at 0.1%
    /// loss, both limited by the loss): the buffer did not cost that, so it is not the
    /// buffer's to pay for.
    pub(super) fn judge_shrink(&self, t: &Trial, mb: f64) -> (Outcome, String) {
        let cfg = &self.cfg;
        let reference_rates = self.unshrunk_rates.as_ref().unwrap_or(&self.kept_rates);
        let reference = mean(reference_rates);
        let share = mb / reference * 100.0;
        let key = t.hyp.changes.first().map_or(RMEM, |(k, _)| k.as_str());
        let what = what(key);
        let held_back = t.last_b.as_ref().and_then(|o| o.held_back_by(key));
        if mb >= (1.0 - cfg.shrink_tolerance) * reference {
            // Held back with the loaded RTT near the path's: the window hardly exceeds the
            // BDP. With a queue behind it (a LAN's window many BDPs deep) it is not the edge.
            let shallow = t
                .last_b
                .as_ref()
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
        let noise = t.last_b.as_ref().is_some_and(|o| the_paths_noise(key, o));
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

    /// The smallest maximum of `key` worth trying: the model's need for the best rate measured
    /// over the path's RTT, at least [`FLOOR`]. With the path's rate told and the flow below
    /// [`SHORT_OF_PATH`] of it, neither buffer is shrunk below what the path's rate needs (a
    /// receive buffer with the 2× headroom: the window a BBR sender keeps in flight): the other
    /// end may still lift what limits the flow. A receiver sized for a loss-limited CUBIC held
    /// BBR to 40 of 46 Mbit/s at 50 ms and 0.1% loss where the headroom carries it; a sender's
    /// buffer shrunk while the receiver's window held the flow at 345 Mbit/s on 1 Gbit/s ×
    /// 100 ms (100% of the time) became the limit once that window grew. A flow already at the
    /// path's rate needs no more buffer than it uses.
    pub(super) fn shrink_floor(&self, key: &str) -> u64 {
        self.last_obs
            .as_ref()
            .and_then(|o| {
                let rtt = o.min_rtt_s.or(o.srtt_s)?;
                // The best test at the kept setting, not the mean: one collapse in a lossy
                // path's two confirming tests must not read as a flow short of the path.
                let rate = self
                    .kept_rates
                    .iter()
                    .copied()
                    .fold(self.best_bps, f64::max);
                let measured = buffer_need(key, rate, rtt, false, &self.current, &self.cfg);
                let told = self
                    .cfg
                    .path_rate_bps
                    .filter(|p| rate < SHORT_OF_PATH * p)
                    .and_then(|p| buffer_need(key, p, rtt, true, &self.current, &self.cfg));
                measured.max(told)
            })
            .map_or(FLOOR, |n| n.div_ceil(4096) * 4096)
            .max(FLOOR)
    }

    /// The next shrink trial: the model's need first, then the geometric middle of what held
    /// and what did not (or the need), until they are within [`BRACKET`].
    pub(super) fn next_shrink(&mut self) -> Action {
        loop {
            if self.shrink.is_none() {
                let Some(key) = self.shrink_queue.pop() else {
                    return self.finish_now();
                };
                let good = buffer_max(&self.current[key]).unwrap_or(0);
                // A kept buffer need not go below the original, which did not suffice.
                let kept = self.current.get(key) != self.original.get(key);
                let bad = match self.original.get(key).and_then(|v| buffer_max(v)) {
                    Some(o) if kept => o,
                    _ => 0,
                };
                self.shrink = Some(Shrink {
                    key,
                    good,
                    bad,
                    first: true,
                });
            }
            if let Some(back) = self.undo_slid() {
                return back;
            }
            let Some(sh) = self.shrink else {
                return self.finish_now();
            };
            let floor = self.shrink_floor(sh.key);
            let lo = sh.bad.max(floor);
            let candidate = if sh.first && floor > sh.bad && floor < sh.good {
                floor
            } else {
                ((sh.good as f64 * lo as f64).sqrt() as u64).div_ceil(4096) * 4096
            };
            let worth = sh.good as f64 > BRACKET * lo as f64 && candidate < sh.good;
            let value = with_buffer_max(&self.current[sh.key], candidate);
            match value {
                Some(v)
                    if worth && !self.tried.contains(&vec![(sh.key.to_string(), v.clone())]) =>
                {
                    let kind = if sh.key == RMEM {
                        Kind::ReceiveBuffer
                    } else {
                        Kind::SendBuffer
                    };
                    let hyp = Hypothesis {
                        kind,
                        changes: vec![(sh.key.to_string(), v)],
                        why: format!(
                            "shrink {} max {} → {candidate} B ({})",
                            sh.key,
                            sh.good,
                            if candidate == floor {
                                "the model's need for the best rate"
                            } else {
                                "between what held and what did not"
                            }
                        ),
                        memory_bytes: Some(candidate * u64::from(self.cfg.flows.max(1))),
                    };
                    return self.begin(Phase::Shrink, hyp);
                }
                _ => {
                    self.shrink = None;
                    self.undo.clear();
                }
            }
        }
    }

    /// A shrink was just kept (`before`: the tests of the value it replaced).
    pub(super) fn on_shrink_kept(&mut self, t: &Trial, before: Vec<f64>) {
        if let Some((_, value)) = t.was.first() {
            self.undo.push(Undo {
                value: value.clone(),
                rates: before,
                step: self.steps.len().saturating_sub(1),
            });
        }
        self.slid = false;
    }

    /// A test of the setting kept (a later trial's A arm): whether a kept shrink's buffer cost
    /// it more than the tolerance.
    pub(super) fn note_kept_test(&mut self, obs: &Observation) {
        let (Some(sh), Some(unshrunk)) = (self.shrink, self.unshrunk_rates.as_ref()) else {
            return;
        };
        let short = obs.rate_bps < (1.0 - self.cfg.shrink_tolerance) * mean(unshrunk);
        if !self.undo.is_empty() && short && !the_paths_noise(sh.key, obs) {
            self.slid = true;
        }
    }

    /// Puts the last kept shrink back when the tests of it since (later trials' A arms) fell
    /// short while its buffer bound and all its tests together lost more than the tolerance: it
    /// was kept on a good pair at its edge (on 1 Gbit/s × 0.2 ms half the tests of an 88 KiB
    /// receive maximum lost 13–17%). The bisection goes on between the value before it and it.
    fn undo_slid(&mut self) -> Option<Action> {
        if !self.slid {
            return None;
        }
        let reference = mean(self.unshrunk_rates.as_ref()?);
        let held = mean(&self.kept_rates);
        if held >= (1.0 - self.cfg.shrink_tolerance) * reference {
            return None;
        }
        let undo = self.undo.pop()?;
        let sh = self.shrink.as_mut()?;
        let key = sh.key;
        sh.bad = self
            .current
            .get(key)
            .and_then(|v| buffer_max(v))
            .unwrap_or(sh.bad);
        sh.good = buffer_max(&undo.value).unwrap_or(sh.good);
        sh.first = false;
        let n = self.kept_rates.len();
        if let Some(step) = self.steps.get_mut(undo.step) {
            step.outcome = Outcome::RolledBack;
            step.why = format!(
                "kept first ({}); then its {n} tests in all averaged {:.1}% of the unshrunk setting's {:.1} Mbit/s, one short while {} held the flow back: put back",
                step.why,
                held / reference * 100.0,
                reference / 1e6,
                what(key)
            );
        }
        self.current.insert(key.to_string(), undo.value.clone());
        self.kept_rates = undo.rates;
        self.slid = false;
        Some(self.write(vec![(key.to_string(), undo.value)], Next::Hypothesis))
    }
}
