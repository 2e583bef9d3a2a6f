//! A described network path (`--path rate=10gbit,rtt=1.58ms,loss=0.01%`), shared by every
//! command that judges something against a path.

use std::str::FromStr;

use schemars::JsonSchema;
use serde::Serialize;

use crate::units::{Dur, Probability, Rate, UnitError};

/// Rate, RTT and loss of a path; any of them may be unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, JsonSchema)]
pub struct PathSpec {
    /// Bottleneck rate, bits per second.
    pub rate_bps: Option<Rate>,
    /// Round-trip time, seconds.
    pub rtt_s: Option<Dur>,
    /// Packet loss probability.
    pub loss: Option<Probability>,
}

/// Why a `--path` value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// An item without `=`.
    #[error("path item '{0}' is not key=value; write --path rate=100mbit,rtt=20ms,loss=0.1%")]
    NotKeyValue(String),
    /// A key other than rate, rtt and loss.
    #[error("path key '{0}' is unknown; the keys are rate, rtt and loss")]
    UnknownKey(String),
    /// A key given twice.
    #[error("path key '{0}' is given twice")]
    Repeated(String),
    /// A value that is not a quantity of its key's unit.
    #[error(transparent)]
    Unit(#[from] UnitError),
}

impl FromStr for PathSpec {
    type Err = PathError;
    fn from_str(s: &str) -> Result<Self, PathError> {
        let mut p = PathSpec::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| PathError::NotKeyValue(item.into()))?;
            let k = k.trim();
            let repeated = match k {
                "rate" => p.rate_bps.replace(v.parse()?).is_some(),
                "rtt" => p.rtt_s.replace(v.parse()?).is_some(),
                "loss" => p.loss.replace(v.parse()?).is_some(),
                _ => return Err(PathError::UnknownKey(k.into())),
            };
            if repeated {
                return Err(PathError::Repeated(k.into()));
            }
        }
        Ok(p)
    }
}

impl PathSpec {
    /// This path with the values of `other` filled in where `other` has them (explicit
    /// `--rate`/`--rtt`/`--loss` override `--path`).
    pub fn overridden_by(self, other: PathSpec) -> PathSpec {
        PathSpec {
            rate_bps: other.rate_bps.or(self.rate_bps),
            rtt_s: other.rtt_s.or(self.rtt_s),
            loss: other.loss.or(self.loss),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let p: PathSpec = "rate=10gbit, rtt=1.58ms,loss=0.01%".parse().unwrap();
        assert_eq!(p.rate_bps.unwrap().bps(), 10e9);
        assert_eq!(p.rtt_s.unwrap().nanos(), 1_580_000);
        assert!((p.loss.unwrap().get() - 1e-4).abs() < 1e-15);
        assert!(matches!(
            "rate".parse::<PathSpec>(),
            Err(PathError::NotKeyValue(_))
        ));
        assert!(matches!(
            "speed=1".parse::<PathSpec>(),
            Err(PathError::UnknownKey(_))
        ));
        assert!(matches!(
            "rtt=1ms,rtt=2ms".parse::<PathSpec>(),
            Err(PathError::Repeated(_))
        ));
        assert!(matches!(
            "rtt=1".parse::<PathSpec>(),
            Err(PathError::Unit(_))
        ));
    }
}
