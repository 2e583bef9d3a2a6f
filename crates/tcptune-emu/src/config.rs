//! What one direction of the emulated link does to packets: the settings of the pipeline, with
//! netem's names and meanings, and their validation (one sentence per refusal).
//!
//! Serialised as JSON (field names carry units) for lab state files, `lab set` and `--spec`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_model::{Bytes, Dur, Probability, Rate};

/// Random draws for jitter: netem's distributions (all scaled so `jitter` is σ, or the half
/// width for uniform).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Uniform over [delay − jitter, delay + jitter): netem's behaviour without a table.
    #[default]
    Uniform,
    /// Normal (Gaussian) with σ = jitter: netem's `normal` table.
    Normal,
    /// Pareto (shape 3) with σ = jitter: netem's `pareto` table, a heavy tail of late packets.
    Pareto,
    /// iproute2's `paretonormal`: a quarter normal and three quarters Pareto, σ = jitter.
    Paretonormal,
}

impl std::str::FromStr for Distribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(Distribution::Uniform),
            "normal" => Ok(Distribution::Normal),
            "pareto" => Ok(Distribution::Pareto),
            "paretonormal" => Ok(Distribution::Paretonormal),
            _ => Err(format!(
                "'{s}' is not a jitter distribution; use uniform, normal, pareto or paretonormal"
            )),
        }
    }
}

/// Whether jitter may reorder packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JitterOrder {
    /// netem's behaviour: packets leave in order of their drawn send times, so jitter reorders.
    #[default]
    Reorder,
    /// A packet never leaves before the one that arrived before it (what a real path with
    /// variable queueing does).
    Fifo,
}

/// The loss process, decided once per packet at enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum Loss {
    /// No loss.
    #[default]
    None,
    /// Independent (Bernoulli) loss with probability `p`.
    Random {
        /// Loss probability per packet.
        p: Probability,
    },
    /// Gilbert–Elliott, as netem's `gemodel p r 1-h 1-k`: `p` good→bad, `r` bad→good,
    /// `bad_loss` (1−h) the loss probability in the bad state, `good_loss` (1−k) in the good one.
    GilbertElliott {
        /// Per packet in the good state, the chance of moving to the bad one.
        p: Probability,
        /// Per packet in the bad state, the chance of moving back to the good one.
        r: Probability,
        /// Loss probability in the bad state (1−h).
        bad_loss: Probability,
        /// Loss probability in the good state (1−k).
        good_loss: Probability,
    },
    /// Every `n`-th packet is lost (packets n, 2n, 3n, …): deterministic, for periodic-loss
    /// models such as Mathis et al.
    EveryNth {
        /// The period in packets (1: every packet).
        n: u32,
    },
}

impl Loss {
    /// Long-run loss probability of the model.
    pub fn mean(&self) -> f64 {
        match *self {
            Loss::None => 0.0,
            Loss::Random { p } => p.get(),
            Loss::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
            } => {
                let (p, r) = (p.get(), r.get());
                if p + r == 0.0 {
                    return good_loss.get();
                }
                let pi_b = p / (p + r);
                pi_b * bad_loss.get() + (1.0 - pi_b) * good_loss.get()
            }
            Loss::EveryNth { n } => 1.0 / n as f64,
        }
    }
}

fn zero() -> Probability {
    Probability::new(0.0).expect("0 is a probability")
}

fn default_overhead() -> i32 {
    14
}

/// One direction of the link. The defaults are a transparent link (no impairment).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// Serialisation rate, bits/s; none = infinitely fast.
    pub rate_bps: Option<Rate>,
    /// Bytes added to each wire packet's length when charging the rate (netem's
    /// PACKETOVERHEAD). Default 14, the Ethernet header that netem counts on a veth, so our
    /// goodput matches a netem run; use 38 for Ethernet with preamble, FCS and gap.
    pub overhead_bytes: i32,
    /// Fixed one-way delay.
    pub delay_s: Dur,
    /// Jitter: half width (uniform) or σ (other distributions) around `delay_s`.
    pub jitter_s: Dur,
    /// The distribution of the jitter draws.
    pub distribution: Distribution,
    /// Whether jitter may reorder packets (netem) or keeps them in order.
    pub jitter_order: JitterOrder,
    /// How packets are lost.
    pub loss: Loss,
    /// Probability a packet is sent twice (the copy is lost and delayed independently).
    pub duplicate: Probability,
    /// Probability one bit of the packet is flipped so the receiver's checksum rejects it.
    pub corrupt: Probability,
    /// Probability a packet skips the delay (and the rate) and is sent at once.
    pub reorder: Probability,
    /// With `reorder`: only after `gap − 1` delayed packets may one be reordered (netem's
    /// `gap`; 0 means 1).
    pub reorder_gap: u32,
    /// Bottleneck drop-tail queue limit in packets (waiting for or in serialisation at the
    /// rate); only meaningful with a rate. Default with a rate: 1000.
    pub queue_packets: Option<u32>,
    /// Bottleneck queue limit in bytes (both limits apply when both are given).
    pub queue_bytes: Option<Bytes>,
    /// netem's `limit`: packets held anywhere in the emulator, delay line included. Default
    /// none (only the bottleneck queue limits); set it to reproduce a netem run exactly.
    pub limit_packets: Option<u32>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_bps: None,
            overhead_bytes: default_overhead(),
            delay_s: Dur::ZERO,
            jitter_s: Dur::ZERO,
            distribution: Distribution::Uniform,
            jitter_order: JitterOrder::Reorder,
            loss: Loss::None,
            duplicate: zero(),
            corrupt: zero(),
            reorder: zero(),
            reorder_gap: 0,
            queue_packets: None,
            queue_bytes: None,
            limit_packets: None,
        }
    }
}

/// The queue limit used when a rate is set and no limit is given: a common NIC txqueuelen.
pub const DEFAULT_QUEUE_PACKETS: u32 = 1000;
/// Limits that keep the emulator's memory and timers sane.
pub const MAX_RATE_BPS: f64 = 400e9;
/// The slowest rate accepted, bits/s: below it one packet's serialisation takes seconds.
pub const MIN_RATE_BPS: f64 = 1000.0;
/// The longest one-way delay accepted.
pub const MAX_DELAY: Dur = Dur::from_millis(10_000);
/// netem stores jitter as a 32-bit signed ns count.
pub const MAX_JITTER: Dur = Dur::from_nanos(i32::MAX as u64);

/// Why a link setting was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The message names the setting, its value and the allowed range.
    #[error("{0}")]
    Invalid(String),
}

fn check_p(name: &str, p: Probability) -> Result<(), ConfigError> {
    if p.get().is_finite() && (0.0..=1.0).contains(&p.get()) {
        Ok(())
    } else {
        Err(ConfigError::Invalid(format!(
            "{name} {} is not a probability; give a value between 0 and 100%",
            p.get()
        )))
    }
}

impl LinkConfig {
    /// True when some stage needs a decision per wire packet, so offloaded super-packets are
    /// segmented first: loss, duplication, corruption, reordering, and a rate (whose queue
    /// would otherwise drop, and whose serialisation would otherwise send, 64 KB at a time).
    /// A pure delay acts correctly on super-packets.
    pub fn needs_per_packet(&self) -> bool {
        self.loss != Loss::None
            || self.duplicate.get() > 0.0
            || self.corrupt.get() > 0.0
            || self.reorder.get() > 0.0
            || self.rate_bps.is_some()
    }

    /// The effective bottleneck queue limit in packets (None = unbounded, which only happens
    /// without a rate, where nothing queues).
    pub fn effective_queue_packets(&self) -> Option<u32> {
        match (self.queue_packets, self.queue_bytes, self.rate_bps) {
            (Some(n), _, _) => Some(n),
            (None, None, Some(_)) => Some(DEFAULT_QUEUE_PACKETS),
            _ => None,
        }
    }

    /// Checks every value against what the pipeline (and netem) accept.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |s: String| Err(ConfigError::Invalid(s));
        if let Some(r) = self.rate_bps {
            if !r.bps().is_finite() || !(MIN_RATE_BPS..=MAX_RATE_BPS).contains(&r.bps()) {
                return bad(format!(
                    "rate {r} is out of range; give a rate between 1kbit and 400gbit"
                ));
            }
        }
        // The emulator charges the IP packet it forwards: there is no link header to take
        // away, so a negative overhead would carry more than the configured rate.
        if !(0..=10_000).contains(&self.overhead_bytes) {
            return bad(format!(
                "overhead {} bytes is out of range; give a value between 0 and 10000",
                self.overhead_bytes
            ));
        }
        if self.delay_s > MAX_DELAY {
            return bad(format!(
                "delay {} is out of range; give a delay of at most 10s",
                self.delay_s
            ));
        }
        if self.jitter_s > MAX_JITTER {
            return bad(format!(
                "jitter {} is out of range; give a jitter of at most 2.147s (netem's limit)",
                self.jitter_s
            ));
        }
        check_p("duplicate", self.duplicate)?;
        check_p("corrupt", self.corrupt)?;
        check_p("reorder", self.reorder)?;
        match self.loss {
            Loss::None => {}
            Loss::Random { p } => check_p("loss", p)?,
            Loss::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
            } => {
                check_p("gilbert-elliott p", p)?;
                check_p("gilbert-elliott r", r)?;
                check_p("gilbert-elliott 1-h", bad_loss)?;
                check_p("gilbert-elliott 1-k", good_loss)?;
            }
            Loss::EveryNth { n } => {
                if n == 0 {
                    return bad(
                        "loss every-nth needs n of at least 1 (1 loses every packet)".into(),
                    );
                }
            }
        }
        if self.reorder.get() > 0.0 && self.delay_s == Dur::ZERO {
            return bad(
                "reorder needs a delay (reordered packets overtake delayed ones); add --delay"
                    .into(),
            );
        }
        if self.reorder_gap > 0 && self.reorder.get() == 0.0 {
            return bad("reorder gap needs a reorder probability; add --reorder".into());
        }
        if self.queue_packets == Some(0) || self.queue_bytes == Some(Bytes::new(0)) {
            return bad("a queue limit of 0 would drop every packet; give at least 1".into());
        }
        if self.limit_packets == Some(0) {
            return bad("limit 0 would drop every packet; give at least 1".into());
        }
        Ok(())
    }
}

/// Both directions of the link and the seed of its random decisions.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LinkSpec {
    /// Client → server.
    pub up: LinkConfig,
    /// Server → client.
    pub down: LinkConfig,
    /// Seed of every random decision; the same seed and packet sequence give the same result.
    pub seed: u64,
}

impl LinkSpec {
    /// Checks both directions against the limits above; the error names the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.up.validate()?;
        self.down.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(x: f64) -> Probability {
        Probability::new(x).unwrap()
    }

    #[test]
    fn validation_refuses_what_netem_refuses() {
        let ok = LinkConfig {
            delay_s: Dur::from_millis(10),
            reorder: p(0.1),
            ..Default::default()
        };
        assert!(ok.validate().is_ok());
        let no_delay = LinkConfig {
            reorder: p(0.1),
            ..Default::default()
        };
        assert!(no_delay
            .validate()
            .unwrap_err()
            .to_string()
            .contains("needs a delay"));
        let slow = LinkConfig {
            rate_bps: Some(Rate::from_bps(10.0)),
            ..Default::default()
        };
        assert!(slow
            .validate()
            .unwrap_err()
            .to_string()
            .contains("out of range"));
        let nth = LinkConfig {
            loss: Loss::EveryNth { n: 0 },
            ..Default::default()
        };
        assert!(nth.validate().is_err());
    }

    #[test]
    fn json_round_trip_and_unknown_fields_refused() {
        let c = LinkConfig {
            rate_bps: Some(Rate::from_bps(1e8)),
            loss: Loss::GilbertElliott {
                p: p(0.01),
                r: p(0.3),
                bad_loss: p(1.0),
                good_loss: p(0.0),
            },
            ..Default::default()
        };
        let s = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<LinkConfig>(&s).unwrap(), c);
        assert!(serde_json::from_str::<LinkConfig>(r#"{"delay":1}"#).is_err());
        // Gilbert–Elliott mean: π_B = p/(p+r).
        assert!((c.loss.mean() - 0.01 / 0.31).abs() < 1e-12);
    }
}
