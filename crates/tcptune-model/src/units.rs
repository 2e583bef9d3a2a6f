//! Quantities with units, parsed and printed the way network people write them.
//!
//! Every number that crosses a module boundary carries its unit in its type: [`Rate`] (bits per
//! second), [`Bytes`], [`Bits`], [`Dur`] (a duration, nanosecond resolution) and [`Probability`].
//! Parsing accepts the common spellings (`10gbit`, `1.5mbps`, `MB/s`, `85KB`, `16MiB`, `1.58ms`,
//! `1%`, `1e-4`) and refuses the ambiguous ones (`10m`: megabits or megabytes? `4k`: 4000 or
//! 4096?) with an error that lists the accepted forms, because a silent guess here turns into a
//! wrong recommendation later.
//!
//! Conventions (chosen to match how rates and sizes are written in the field):
//! - rates are bits per second; `k`,`m`,`g`,`t` prefixes are decimal (1000); `Ki`,`Mi`… binary.
//!   `bit`, `bps`, `b/s` mean bits; an upper-case `B` (`MB/s`, `MBps`) means bytes.
//!   Note: tc(8) reads `mbps` as megabytes per second; we follow ordinary usage (megabits).
//! - sizes are bytes; `kB`/`KB`/`MB` are decimal, `KiB`/`MiB` binary; bit sizes (`15.8Mbit`) are
//!   converted to bytes; a bare number is bytes.
//! - durations need a unit (`ns`, `us`/`µs`, `ms`, `s`, `min`).
//! - probabilities are a fraction in [0, 1] (`1e-4`, `0.01`) or a percentage (`1%`).

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a quantity could not be parsed. The message names the input and lists accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a number followed by a unit.
    #[error("'{input}' is not a {kind}: expected a number followed by a unit, such as {examples}")]
    Malformed {
        /// The text given.
        input: String,
        /// What was expected (rate, size, duration, …).
        kind: &'static str,
        /// Accepted forms, as examples.
        examples: &'static str,
    },
    /// Below zero.
    #[error("'{input}' is negative; a {kind} is zero or more, such as {examples}")]
    Negative {
        /// The text given.
        input: String,
        /// What was expected.
        kind: &'static str,
        /// Accepted forms, as examples.
        examples: &'static str,
    },
    /// A unit this kind of quantity does not take.
    #[error("'{input}' has an unknown {kind} unit '{unit}'; accepted: {accepted}")]
    UnknownUnit {
        /// The text given.
        input: String,
        /// What was expected.
        kind: &'static str,
        /// The unit given.
        unit: String,
        /// The units accepted.
        accepted: &'static str,
    },
    /// A form with more than one reading.
    #[error("'{input}' is ambiguous: {why}")]
    Ambiguous {
        /// The text given.
        input: String,
        /// The readings it allows, and how to write the one meant.
        why: String,
    },
    /// A value outside what the quantity takes.
    #[error("'{input}' is out of range: {why}")]
    OutOfRange {
        /// The text given.
        input: String,
        /// The range accepted.
        why: String,
    },
}

const RATE_FORMS: &str = "bits: 625kbit, 100mbit, 1.5mbps, 10gbit, 1Gb/s, 2Mibit; \
bytes: 12MB/s, 1.5GB/s, 100KiB/s, 10MBps; a bare number is bit/s";
const SIZE_FORMS: &str = "4096, 4096B, 85kB or 85KB (x1000), 16KiB or 16MiB (x1024), \
15.8Mbit (bits, converted to bytes)";
const DUR_FORMS: &str = "120ns, 120us (or µs), 1.58ms, 0.2s, 2min";
const PROB_FORMS: &str = "1%, 0.00018%, 1e-4, 0.01";

/// The error of an input that is not a number and a unit: a negative one says so (clap hands
/// `--rate -5mbit` through as a value, so this sentence is what the user sees).
fn malformed(input: &str, kind: &'static str, examples: &'static str) -> UnitError {
    let input = input.to_string();
    if input.trim_start().starts_with('-') {
        UnitError::Negative {
            input,
            kind,
            examples,
        }
    } else {
        UnitError::Malformed {
            input,
            kind,
            examples,
        }
    }
}

/// Splits "1.58ms" into (1.58, "ms"). The number may use exponent notation.
fn split_number(input: &str) -> Option<(f64, &str)> {
    let s = input.trim();
    let bytes = s.as_bytes();
    let mut end = 0;
    let mut seen_digit = false;
    while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'.') {
        seen_digit |= bytes[end].is_ascii_digit();
        end += 1;
    }
    if !seen_digit {
        return None;
    }
    // An exponent only when 'e' is followed by digits (so "1e-4" parses but "1exabit" would not
    // be mistaken for one).
    if end < bytes.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
        let mut j = end + 1;
        if j < bytes.len() && (bytes[j] == b'-' || bytes[j] == b'+') {
            j += 1;
        }
        let digits_start = j;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        if j > digits_start {
            end = j;
        }
    }
    let value: f64 = s[..end].parse().ok()?;
    if !value.is_finite() {
        return None;
    }
    Some((value, s[end..].trim()))
}

/// Splits a unit like "Mibit" into its multiplier and the rest ("bit").
fn split_prefix(unit: &str) -> (f64, &str, &str) {
    const BINARY: [(&str, f64); 8] = [
        ("Ki", 1024.0),
        ("ki", 1024.0),
        ("Mi", 1048576.0),
        ("mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("ti", 1099511627776.0),
    ];
    for (p, m) in BINARY {
        if let Some(rest) = unit.strip_prefix(p) {
            return (m, p, rest);
        }
    }
    match unit.chars().next() {
        Some('k' | 'K') => (1e3, &unit[..1], &unit[1..]),
        Some('m' | 'M') => (1e6, &unit[..1], &unit[1..]),
        Some('g' | 'G') => (1e9, &unit[..1], &unit[1..]),
        Some('t' | 'T') => (1e12, &unit[..1], &unit[1..]),
        _ => (1.0, "", unit),
    }
}

/// Formats a value with an SI prefix and three significant digits: 15800000 -> "15.8 M".
fn si(value: f64) -> (f64, &'static str) {
    let a = value.abs();
    if a >= 1e12 {
        (value / 1e12, "T")
    } else if a >= 1e9 {
        (value / 1e9, "G")
    } else if a >= 1e6 {
        (value / 1e6, "M")
    } else if a >= 1e3 {
        (value / 1e3, "k")
    } else {
        (value, "")
    }
}

/// Prints a number with at most `sig` significant digits and no trailing zeros.
pub fn fmt_sig(value: f64, sig: usize) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (sig as i32 - 1 - magnitude).max(0) as usize;
    let s = format!("{value:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A data rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
#[schemars(description = "A rate in bits per second.")]
pub struct Rate(f64);

impl Rate {
    /// A rate of `bps` bits per second.
    /// The smallest rate a parser accepts.
    pub const MIN_BPS: f64 = 1.0;
    /// The largest rate a parser accepts (1 Pbit/s): beyond any link, and small enough that
    /// rates times durations stay finite and fit in 64-bit counters.
    pub const MAX_BPS: f64 = 1e15;

    /// A rate of `bps` bits per second.
    pub const fn from_bps(bps: f64) -> Self {
        Rate(bps)
    }
    /// Bits per second.
    pub fn bps(self) -> f64 {
        self.0
    }
    /// Bytes per second.
    pub fn bytes_per_sec(self) -> f64 {
        self.0 / 8.0
    }
    /// The rate at which `bytes` pass in `dur`.
    pub fn from_bytes_per(bytes: Bytes, dur: Dur) -> Self {
        Rate(bytes.get() as f64 * 8.0 / dur.secs())
    }
    /// Bits that pass in `dur` at this rate: the rate–delay product.
    pub fn times(self, dur: Dur) -> Bits {
        Bits(self.0 * dur.secs())
    }
}

impl FromStr for Rate {
    type Err = UnitError;
    fn from_str(input: &str) -> Result<Self, UnitError> {
        let (value, unit) =
            split_number(input).ok_or_else(|| malformed(input, "rate", "100mbit or 12MB/s"))?;
        let unknown = || UnitError::UnknownUnit {
            input: input.into(),
            kind: "rate",
            unit: unit.into(),
            accepted: RATE_FORMS,
        };
        let (mult, prefix, base) = split_prefix(unit);
        let lower = base.to_ascii_lowercase();
        let per_bit = if base.is_empty() {
            if prefix.is_empty() {
                1.0 // a bare number is bit/s, as in tc(8)
            } else {
                return Err(UnitError::Ambiguous {
                    input: input.into(),
                    why: format!(
                        "write {v}{prefix}bit for bits per second or {v}{}B/s for bytes per second",
                        prefix.to_ascii_uppercase(),
                        v = fmt_sig(value, 6)
                    ),
                });
            }
        } else if matches!(lower.as_str(), "bit" | "bits" | "bit/s" | "bits/s") {
            1.0
        } else if matches!(lower.as_str(), "byte/s" | "bytes/s") {
            8.0
        } else if lower == "bps" || lower == "b/s" {
            // Case of the 'b' decides: b = bits, B = bytes.
            if base.starts_with('B') {
                8.0
            } else {
                1.0
            }
        } else {
            return Err(unknown());
        };
        let bps = value * mult * per_bit;
        if bps <= 0.0 {
            return Err(UnitError::OutOfRange {
                input: input.into(),
                why: "a rate must be greater than zero".into(),
            });
        }
        // NaN and infinity fail the range test too (a product can overflow to inf).
        if !(Rate::MIN_BPS..=Rate::MAX_BPS).contains(&bps) {
            return Err(UnitError::OutOfRange {
                input: input.into(),
                why: "a rate must be from 1 bit/s to 1 Pbit/s".into(),
            });
        }
        Ok(Rate(bps))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (v, p) = si(self.0);
        write!(f, "{} {p}bit/s", fmt_sig(v, 4))
    }
}

/// An amount of data in bytes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(u64);

impl JsonSchema for Bytes {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Bytes".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "integer", "minimum": 0, "description": "An amount of data in bytes."
        })
    }
}

impl Bytes {
    /// `n` bytes.
    pub const fn new(n: u64) -> Self {
        Bytes(n)
    }
    /// The number of bytes.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// The same size in bits.
    pub fn bits(self) -> Bits {
        Bits(self.0 as f64 * 8.0)
    }

    /// A short form for prose: binary units when the size is a whole number of KiB/MiB/GiB
    /// (buffer sizes usually are), decimal otherwise: "24 MiB", "12.5 MB", "4096 B".
    pub fn short(self) -> String {
        let n = self.0;
        for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
            if n >= unit && n % unit == 0 {
                return format!("{} {name}", n / unit);
            }
        }
        if n < 10_000 {
            return format!("{n} B");
        }
        let (v, p) = si(n as f64);
        format!("{} {p}B", fmt_sig(v, 3))
    }

    /// The binary prefix a size is read in: the largest of GiB, MiB and KiB it reaches, as
    /// (bytes per unit, prefix), or (1, "") below 1 KiB. Every binary size tcptune prints
    /// chooses its unit here.
    pub const fn binary_unit(self) -> (u64, &'static str) {
        let n = self.0;
        if n >= 1 << 30 {
            (1 << 30, "Gi")
        } else if n >= 1 << 20 {
            (1 << 20, "Mi")
        } else if n >= 1 << 10 {
            (1 << 10, "Ki")
        } else {
            (1, "")
        }
    }

    /// Binary prefixes with at most `sig` significant digits, the way windows and buffers are
    /// talked about: "64 KiB", "1.5 MiB", "900 B".
    pub fn binary(self, sig: usize) -> String {
        match self.binary_unit() {
            (1, _) => format!("{} B", self.0),
            (unit, p) => format!("{} {p}B", fmt_sig(self.0 as f64 / unit as f64, sig)),
        }
    }

    /// Decimal prefixes with at most `sig` significant digits, the way amounts of traffic are
    /// counted: "41.45 kB", "900 B".
    pub fn decimal(self, sig: usize) -> String {
        if self.0 < 1000 {
            return format!("{} B", self.0);
        }
        let (v, p) = si(self.0 as f64);
        format!("{} {p}B", fmt_sig(v, sig))
    }
}

impl FromStr for Bytes {
    type Err = UnitError;
    fn from_str(input: &str) -> Result<Self, UnitError> {
        let (value, unit) =
            split_number(input).ok_or_else(|| malformed(input, "size", "4096, 85KB or 16MiB"))?;
        let (mult, prefix, base) = split_prefix(unit);
        let lower = base.to_ascii_lowercase();
        let per_unit = if base.is_empty() {
            if prefix.is_empty() {
                1.0
            } else {
                let v = fmt_sig(value, 6);
                return Err(UnitError::Ambiguous {
                    input: input.into(),
                    why: format!(
                        "write {v}{}B for x1000 or {v}{}iB for x1024",
                        prefix.to_ascii_uppercase(),
                        prefix.to_ascii_uppercase()
                    ),
                });
            }
        } else if base == "B" || matches!(lower.as_str(), "byte" | "bytes") {
            1.0
        } else if matches!(lower.as_str(), "bit" | "bits") {
            0.125
        } else if base == "b" {
            return Err(UnitError::Ambiguous {
                input: input.into(),
                why: "lower-case 'b' could mean bits; write B for bytes or 'bit' for bits".into(),
            });
        } else {
            return Err(UnitError::UnknownUnit {
                input: input.into(),
                kind: "size",
                unit: unit.into(),
                accepted: SIZE_FORMS,
            });
        };
        let bytes = value * mult * per_unit;
        if !(0.0..=u64::MAX as f64).contains(&bytes) {
            return Err(UnitError::OutOfRange {
                input: input.into(),
                why: "a size must be between 0 and 2^64 bytes".into(),
            });
        }
        Ok(Bytes(bytes.round() as u64))
    }
}

impl fmt::Display for Bytes {
    /// "1975000 B (1.975 MB, 1.884 MiB)" — both prefixes, since guides mix them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0 as f64;
        if self.0 < 1000 {
            return write!(f, "{} B", self.0);
        }
        let (v, p) = si(n);
        // 1000 to 1023 bytes are shown as a fraction of a KiB.
        let (unit, bp) = match self.binary_unit() {
            (1, _) => (1 << 10, "Ki"),
            u => u,
        };
        let bv = n / unit as f64;
        write!(
            f,
            "{} B ({} {p}B, {} {bp}B)",
            self.0,
            fmt_sig(v, 4),
            fmt_sig(bv, 4)
        )
    }
}

/// An amount of data in bits (a rate–delay product before it is rounded to bytes).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
#[schemars(description = "An amount of data in bits.")]
pub struct Bits(f64);

impl Bits {
    /// `bits` bits.
    pub const fn new(bits: f64) -> Self {
        Bits(bits)
    }
    /// The number of bits.
    pub fn get(self) -> f64 {
        self.0
    }
    /// Whole bytes, rounding up: a window must hold the last partial byte too.
    pub fn to_bytes_ceil(self) -> Bytes {
        // A value within floating-point noise of a whole byte is that byte, so that
        // 165000.00000000003 does not become an extra byte (relative tolerance: the noise of
        // a product grows with its size).
        let b = self.0 / 8.0;
        let nearest = b.round();
        if (b - nearest).abs() <= 1e-6_f64.max(nearest.abs() * 1e-12) {
            Bytes(nearest as u64)
        } else {
            Bytes(b.ceil() as u64)
        }
    }
}

impl fmt::Display for Bits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (v, p) = si(self.0);
        write!(f, "{} {p}bit", fmt_sig(v, 4))
    }
}

/// A duration (RTT, delay, interval), with nanosecond resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(u64);

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.secs())
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let secs = f64::deserialize(d)?;
        if !(0.0..1e9).contains(&secs) {
            return Err(serde::de::Error::custom("duration out of range"));
        }
        Ok(Dur::from_secs_f64(secs))
    }
}

impl JsonSchema for Dur {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Seconds".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "number", "minimum": 0, "description": "A duration in seconds."
        })
    }
}

impl Dur {
    /// No time at all.
    pub const ZERO: Dur = Dur(0);
    /// The longest duration a parser accepts: one day.
    pub const MAX_PARSED: Dur = Dur(86_400_000_000_000);
    /// `ns` nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Dur(ns)
    }
    /// `us` microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Dur(us * 1000)
    }
    /// `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Dur(ms * 1_000_000)
    }
    /// `s` seconds, to the nearest nanosecond (negative: zero).
    pub fn from_secs_f64(s: f64) -> Self {
        Dur((s * 1e9).round().max(0.0) as u64)
    }
    /// Whole nanoseconds.
    pub const fn nanos(self) -> u64 {
        self.0
    }
    /// Seconds, with a fraction.
    pub fn secs(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// The same duration as a `std::time::Duration`.
    pub fn std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
}

impl From<std::time::Duration> for Dur {
    fn from(d: std::time::Duration) -> Self {
        Dur(d.as_nanos().min(u64::MAX as u128) as u64)
    }
}

impl FromStr for Dur {
    type Err = UnitError;
    fn from_str(input: &str) -> Result<Self, UnitError> {
        let (value, unit) =
            split_number(input).ok_or_else(|| malformed(input, "duration", "1.58ms or 0.2s"))?;
        let ns_per = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" | "usec" => 1e3,
            "ms" | "msec" => 1e6,
            "s" | "sec" | "secs" => 1e9,
            "min" => 60e9,
            "" => {
                return Err(UnitError::Ambiguous {
                    input: input.into(),
                    why: format!("a duration needs a unit; accepted: {DUR_FORMS}"),
                })
            }
            _ => {
                return Err(UnitError::UnknownUnit {
                    input: input.into(),
                    kind: "duration",
                    unit: unit.into(),
                    accepted: DUR_FORMS,
                })
            }
        };
        let ns = value * ns_per;
        // At most a day: no RTT, delay or test length is longer, and a day times the largest
        // rate still fits a byte count in 64 bits.
        if ns.is_nan() || ns > Dur::MAX_PARSED.0 as f64 {
            return Err(UnitError::OutOfRange {
                input: input.into(),
                why: "a duration must be at most 1 day (1440min)".into(),
            });
        }
        if ns > 0.0 && ns.round() == 0.0 {
            // Counted in whole nanoseconds: 1e-12s would silently become 0 s.
            return Err(UnitError::OutOfRange {
                input: input.into(),
                why: "a duration other than zero must be at least 1ns".into(),
            });
        }
        Ok(Dur(ns.round() as u64))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0 as f64;
        if self.0 == 0 {
            write!(f, "0 s")
        } else if ns < 1e3 {
            write!(f, "{} ns", self.0)
        } else if ns < 1e6 {
            write!(f, "{} µs", fmt_sig(ns / 1e3, 4))
        } else if ns < 1e9 {
            write!(f, "{} ms", fmt_sig(ns / 1e6, 4))
        } else {
            write!(f, "{} s", fmt_sig(ns / 1e9, 4))
        }
    }
}

/// A probability (loss rate) in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
#[schemars(description = "A probability as a fraction in [0, 1].")]
pub struct Probability(f64);

impl Probability {
    /// A probability from a fraction; `None` outside [0, 1].
    pub fn new(p: f64) -> Option<Self> {
        (0.0..=1.0).contains(&p).then_some(Probability(p))
    }
    /// The probability as a fraction in [0, 1].
    pub fn get(self) -> f64 {
        self.0
    }
    /// The probability in percent.
    pub fn percent(self) -> f64 {
        self.0 * 100.0
    }
}

impl FromStr for Probability {
    type Err = UnitError;
    fn from_str(input: &str) -> Result<Self, UnitError> {
        let (value, unit) =
            split_number(input).ok_or_else(|| malformed(input, "probability", PROB_FORMS))?;
        let p = match unit {
            "%" => value / 100.0,
            "" if value <= 1.0 => value,
            "" => {
                return Err(UnitError::OutOfRange {
                    input: input.into(),
                    why: format!(
                        "a probability is at most 1; write {}% for a percentage",
                        fmt_sig(value, 6)
                    ),
                })
            }
            _ => {
                return Err(UnitError::UnknownUnit {
                    input: input.into(),
                    kind: "probability",
                    unit: unit.into(),
                    accepted: PROB_FORMS,
                })
            }
        };
        Probability::new(p).ok_or_else(|| UnitError::OutOfRange {
            input: input.into(),
            why: "a probability must be between 0 and 100%".into(),
        })
    }
}

impl fmt::Display for Probability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", fmt_sig(self.percent(), 3))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_negative_quantity_is_named_as_such() {
        use super::*;
        let e = "-5mbit".parse::<Rate>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "'-5mbit' is negative; a rate is zero or more, such as 100mbit or 12MB/s"
        );
        assert!(matches!(
            "-3ms".parse::<Dur>(),
            Err(UnitError::Negative { .. })
        ));
        assert!(matches!(
            "-1KiB".parse::<Bytes>(),
            Err(UnitError::Negative { .. })
        ));
        assert!(matches!(
            "-1%".parse::<Probability>(),
            Err(UnitError::Negative { .. })
        ));
        assert!(matches!(
            "x".parse::<Rate>(),
            Err(UnitError::Malformed { .. })
        ));
    }

    use super::*;

    fn rate(s: &str) -> f64 {
        s.parse::<Rate>().unwrap().bps()
    }

    #[test]
    fn rates_as_people_write_them() {
        assert_eq!(rate("10gbit"), 10e9);
        assert_eq!(rate("100mbit"), 100e6);
        assert_eq!(rate("1.5mbps"), 1.5e6);
        assert_eq!(rate("625kbit"), 625e3);
        assert_eq!(rate("1gbps"), 1e9);
        assert_eq!(rate("1Gb/s"), 1e9);
        assert_eq!(rate("12MB/s"), 96e6);
        assert_eq!(rate("10MBps"), 80e6);
        assert_eq!(rate("1Mibit"), 1048576.0);
        assert_eq!(rate("1000"), 1000.0);
        assert_eq!(rate("1 Gbit/s"), 1e9);
    }

    #[test]
    fn ambiguous_and_unknown_rates_are_refused_with_the_forms() {
        let e = "10m".parse::<Rate>().unwrap_err().to_string();
        assert!(e.contains("10mbit") && e.contains("10MB/s"), "{e}");
        let e = "10furlongs".parse::<Rate>().unwrap_err().to_string();
        assert!(
            e.contains("unknown rate unit 'furlongs'") && e.contains("100mbit"),
            "{e}"
        );
        assert!("0mbit".parse::<Rate>().is_err());
        assert!("".parse::<Rate>().is_err());
        assert!("mbit".parse::<Rate>().is_err());
    }

    #[test]
    fn sizes() {
        let b = |s: &str| s.parse::<Bytes>().unwrap().get();
        assert_eq!(b("4096"), 4096);
        assert_eq!(b("85KB"), 85_000);
        assert_eq!(b("85kB"), 85_000);
        assert_eq!(b("16MiB"), 16 << 20);
        assert_eq!(b("15.8Mbit"), 1_975_000);
        assert_eq!(b("2 bytes"), 2);
        let e = "4k".parse::<Bytes>().unwrap_err().to_string();
        assert!(e.contains("4KB") && e.contains("4KiB"), "{e}");
        assert!("4kb".parse::<Bytes>().is_err());
    }

    #[test]
    fn sizes_print_in_binary_or_decimal_prefixes() {
        let b = Bytes::new;
        assert_eq!(b(900).binary(3), "900 B");
        assert_eq!(b(65536).binary(3), "64 KiB");
        assert_eq!(b(1_572_864).binary(3), "1.5 MiB");
        assert_eq!(b(14_438).binary(3), "14.1 KiB");
        assert_eq!(b(3 << 30).binary(3), "3 GiB");
        assert_eq!(b(1023).binary_unit(), (1, ""));
        assert_eq!(b(1024).binary_unit(), (1024, "Ki"));
        assert_eq!(b(999).decimal(4), "999 B");
        assert_eq!(b(41_450).decimal(4), "41.45 kB");
        assert_eq!(b(2_500_000_000).decimal(4), "2.5 GB");
        assert_eq!(b(1000).to_string(), "1000 B (1 kB, 0.9766 KiB)");
        assert_eq!(b(1_975_000).to_string(), "1975000 B (1.975 MB, 1.884 MiB)");
    }

    #[test]
    fn durations() {
        let d = |s: &str| s.parse::<Dur>().unwrap().nanos();
        assert_eq!(d("1.58ms"), 1_580_000);
        assert_eq!(d("120us"), 120_000);
        assert_eq!(d("120µs"), 120_000);
        assert_eq!(d("0.2s"), 200_000_000);
        assert_eq!(d("2min"), 120_000_000_000);
        assert!("20"
            .parse::<Dur>()
            .unwrap_err()
            .to_string()
            .contains("needs a unit"));
        assert!("20h".parse::<Dur>().is_err());
    }

    #[test]
    fn probabilities() {
        let p = |s: &str| s.parse::<Probability>().unwrap().get();
        assert_eq!(p("1%"), 0.01);
        assert!((p("0.00018%") - 1.8e-6).abs() < 1e-18);
        assert_eq!(p("1e-4"), 1e-4);
        assert_eq!(p("0.5"), 0.5);
        assert!("2"
            .parse::<Probability>()
            .unwrap_err()
            .to_string()
            .contains("2%"));
        assert!("101%".parse::<Probability>().is_err());
    }

    #[test]
    fn non_finite_and_out_of_range_values_are_refused_in_one_sentence() {
        for bad in [
            "1e300tbit",
            "1e16bit",
            "2Pbit",
            "0.5bit",
            "1e-300bit",
            "1e400",
            "inf",
            "NaN",
        ] {
            let e = bad.parse::<Rate>().unwrap_err();
            let msg = e.to_string();
            assert!(!msg.contains('\n') && msg.contains(bad), "{bad}: {msg}");
        }
        assert!(matches!(
            "1e300tbit".parse::<Rate>(),
            Err(UnitError::OutOfRange { .. })
        ));
        assert_eq!("1000tbit".parse::<Rate>().unwrap().bps(), 1e15);
        assert_eq!("1bit".parse::<Rate>().unwrap().bps(), 1.0);
        assert_eq!("1440min".parse::<Dur>().unwrap(), Dur::MAX_PARSED);
        for bad in ["1e-12s", "0.4ns", "1e300s", "1441min", "1e20min", "infs"] {
            let e = bad.parse::<Dur>().unwrap_err();
            assert!(e.to_string().contains(bad), "{bad}: {e}");
        }
        assert!("1e-12s"
            .parse::<Dur>()
            .unwrap_err()
            .to_string()
            .contains("at least 1ns"));
        assert_eq!("0.6ns".parse::<Dur>().unwrap(), Dur::from_nanos(1));
        assert_eq!("0s".parse::<Dur>().unwrap(), Dur::ZERO);
        for bad in ["1e300TB", "1e20EB", "infB", "1e30"] {
            assert!(bad.parse::<Bytes>().is_err(), "{bad}");
        }
        for bad in ["1e300%", "-1%", "nan", "2"] {
            assert!(bad.parse::<Probability>().is_err(), "{bad}");
        }
    }

    #[test]
    fn display() {
        assert_eq!(Rate::from_bps(10e9).to_string(), "10 Gbit/s");
        assert_eq!(Rate::from_bps(1.5e6).to_string(), "1.5 Mbit/s");
        assert_eq!(Bits::new(15.8e6).to_string(), "15.8 Mbit");
        assert_eq!(Dur::from_micros(1580).to_string(), "1.58 ms");
        assert_eq!(
            Bytes::new(1_975_000).to_string(),
            "1975000 B (1.975 MB, 1.884 MiB)"
        );
        assert_eq!(
            "0.00018%".parse::<Probability>().unwrap().to_string(),
            "0.00018%"
        );
    }

    proptest::proptest! {
        #[test]
        fn rate_display_round_trips(bps in 1.0f64..1e13) {
            let r = Rate::from_bps(bps);
            let back: Rate = r.to_string().replace(' ', "").replace("/s", "").parse().unwrap();
            // Display keeps four significant digits.
            proptest::prop_assert!((back.bps() - bps).abs() / bps < 1e-3);
        }

        #[test]
        fn duration_display_round_trips(ns in 1u64..10_000_000_000_000) {
            let d = Dur::from_nanos(ns);
            let back: Dur = d.to_string().replace(' ', "").parse().unwrap();
            proptest::prop_assert!((back.nanos() as f64 - ns as f64).abs() / ns as f64 <= 1e-3);
        }

        #[test]
        fn size_parse_is_exact_for_integers(n in 0u64..(1 << 50)) {
            proptest::prop_assert_eq!(n.to_string().parse::<Bytes>().unwrap().get(), n);
            proptest::prop_assert_eq!(format!("{n}B").parse::<Bytes>().unwrap().get(), n);
        }

        #[test]
        fn parsing_never_panics(s in "\\PC{0,12}") {
            let _ = s.parse::<Rate>();
            let _ = s.parse::<Bytes>();
            let _ = s.parse::<Dur>();
            let _ = s.parse::<Probability>();
        }
    }
}
