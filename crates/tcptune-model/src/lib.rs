//! Units and the closed-form TCP performance models every tuning guide starts from.
//!
//! Each model is a pure function from typed inputs to a result struct that carries its inputs,
//! its outputs, the formula in words, and the conditions under which it does not apply
//! (`caveats`). The binary prints these; the diagnosis and the lab reuse the same functions to
//! draw theory beside measurements, so there is one implementation of each formula.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bdp;
pub mod buffers;
pub mod cubic;
pub mod goodput;
pub mod kernel;
pub mod mathis;
pub mod path;
pub mod pftk;
pub mod ramp;
pub mod render;
pub mod sizing;
pub mod units;

pub use path::{PathError, PathSpec};
pub use units::{Bits, Bytes, Dur, Probability, Rate, UnitError};

/// Why a model's inputs were refused (not a unit error: the units were fine, the values are not).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The inputs, with what is wrong and the fix, in one sentence.
    #[error("{0}")]
    Invalid(String),
}

/// Refuses an MSS of zero or a zero RTT, which every per-flow model divides by.
pub(crate) fn check_mss_rtt(mss: Bytes, rtt: Dur) -> Result<(), ModelError> {
    if mss.get() == 0 {
        return Err(ModelError::Invalid(
            "the MSS must be at least 1 byte; give --mss 1448".into(),
        ));
    }
    if rtt == Dur::ZERO {
        return Err(ModelError::Invalid(
            "the round-trip time must be above zero; give --rtt 20ms".into(),
        ));
    }
    Ok(())
}
