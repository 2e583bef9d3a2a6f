//! The Linux TCP mechanics the models depend on, as small reusable pieces: the kernel version
//! (it decides how a socket buffer turns into window), the buffer ↔ window arithmetic before and
//! since Linux 6.6, the send-buffer expansion factor of each congestion control, the SYN-time
//! window scale, and the largest window TCP can advertise.
//!
//! The buffer models (`model buffers`) and the host audit both build on these, so the kernel's
//! rules are written down once. Sources: `include/net/tcp.h` `tcp_win_from_space()` (both
//! versions), commit dfa2f0483360 ("tcp: get rid of sysctl_tcp_adv_win_scale", 6.6),
//! `tcp_sndbuf_expand()` and `bbr_sndbuf_expand()`, `tcp_select_initial_window()`, RFC 7323.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Bytes;

/// The largest window TCP can advertise: 65535 × 2^14 bytes (window scale 14, RFC 7323 §2.3).
pub const MAX_WINDOW_BYTES: u64 = 65535 << 14;

/// The largest window scale shift (RFC 7323; Linux `TCP_MAX_WSCALE`).
pub const MAX_WSCALE: u8 = 14;

/// `tcp_rmem`/`tcp_wmem` are vectors of C `int`: no field can exceed this.
pub const SYSCTL_INT_MAX: u64 = i32::MAX as u64;

/// `tcp_adv_win_scale`'s default (since 2012) before it became a no-op in 6.6.
pub const DEFAULT_ADV_WIN_SCALE: i8 = 1;

/// The conservative `scaling_ratio` assumed since 6.6 unless told otherwise: 50 %, the initial
/// value since commit 697a6c8cec03 (2024); a socket measures its own once data arrives.
pub const DEFAULT_SCALING_RATIO: u8 = 128;

/// A Linux kernel version, major.minor (the patch level never changes TCP buffer semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelVersion {
    /// The major version (6 in 6.18).
    pub major: u16,
    /// The minor version (18 in 6.18).
    pub minor: u16,
}

impl KernelVersion {
    /// The first kernel where the window is `buffer × scaling_ratio / 256`.
    pub const SCALING_RATIO_SINCE: KernelVersion = KernelVersion { major: 6, minor: 6 };

    /// The kernel assumed when neither the user nor the host says which one runs (the one
    /// fallback: `model buffers`, the audit, `test` and the engine all use it): 6.6, the first
    /// with the per-socket scaling_ratio, whose conservative starting ratio of 50% equals the
    /// older rule's half (tcp_adv_win_scale 1), so the window comes out the same either side.
    pub const ASSUMED: KernelVersion = Self::SCALING_RATIO_SINCE;

    /// A kernel read from a host (`Detected`), or [`KernelVersion::ASSUMED`] when none could be.
    pub fn detected_or_assumed(read: Option<KernelVersion>) -> (KernelVersion, KernelSource) {
        match read {
            Some(k) => (k, KernelSource::Detected),
            None => (Self::ASSUMED, KernelSource::Assumed),
        }
    }

    /// The version `major`.`minor`.
    pub const fn new(major: u16, minor: u16) -> Self {
        KernelVersion { major, minor }
    }

    /// Whether this kernel sizes the window with the per-socket `scaling_ratio` (6.6 and later)
    /// rather than `tcp_adv_win_scale`.
    pub fn has_scaling_ratio(self) -> bool {
        self >= Self::SCALING_RATIO_SINCE
    }

    /// Whether this is `major.minor` or later.
    pub fn at_least(self, major: u16, minor: u16) -> bool {
        self >= KernelVersion::new(major, minor)
    }
}

/// Why a kernel version could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a kernel version; write it as major.minor, such as 6.1 or 6.18")]
pub struct KernelVersionError(String);

impl FromStr for KernelVersion {
    type Err = KernelVersionError;
    /// Reads `6.1`, `6.1.0` and `uname -r` / `/proc/sys/kernel/osrelease` forms such as
    /// `6.18.0-1-amd64` or `5.15.0-91-generic`.
    fn from_str(s: &str) -> Result<Self, KernelVersionError> {
        let err = || KernelVersionError(s.trim().into());
        let mut parts = s.trim().splitn(3, '.');
        let major = parts.next().ok_or_else(err)?;
        let minor = parts.next().ok_or_else(err)?;
        // The minor number ends where the first non-digit starts ("18-rc3", "4+").
        let minor_digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
        if minor_digits.len() != minor.len() && parts.next().is_some() {
            return Err(err());
        }
        let major: u16 = major.parse().map_err(|_| err())?;
        let minor: u16 = minor_digits.parse().map_err(|_| err())?;
        if major == 0 {
            return Err(err());
        }
        Ok(KernelVersion { major, minor })
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for KernelVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KernelVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for KernelVersion {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "KernelVersion".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string", "pattern": "^[0-9]+\\.[0-9]+$",
            "description": "A Linux kernel version, major.minor."
        })
    }
}

/// Where the kernel version a model used came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KernelSource {
    /// Given on the command line (`--kernel`).
    Given,
    /// Read from the running kernel (`/proc/sys/kernel/osrelease`).
    Detected,
    /// Neither given nor readable: a recent kernel was assumed.
    Assumed,
}

/// How Linux splits a receive buffer between advertised window (payload) and overhead
/// (`struct sk_buff`, page fragments: the "truesize" of each packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum WindowRule {
    /// Before 6.6: window = buf − buf >> tcp_adv_win_scale (scale > 0), or buf >> −scale
    /// (scale ≤ 0). The default scale 1 makes half the buffer window.
    AdvWinScale {
        /// `net.ipv4.tcp_adv_win_scale`.
        adv_win_scale: i8,
    },
    /// Since 6.6: window = buf × scaling_ratio / 256, with a per-socket ratio measured as
    /// payload / truesize of received packets.
    ScalingRatio {
        /// The socket's payload/truesize ratio, out of 256.
        scaling_ratio: u8,
    },
}

impl WindowRule {
    /// The rule of `kernel`, with the per-socket ratio (6.6+) or `tcp_adv_win_scale` (older) if
    /// known, else their defaults (50 % and 1). `adv_win_scale` outside [-31, 31] is clamped, as
    /// the sysctl's range is.
    pub fn for_kernel(
        kernel: KernelVersion,
        scaling_ratio: Option<u8>,
        adv_win_scale: Option<i8>,
    ) -> WindowRule {
        if kernel.has_scaling_ratio() {
            WindowRule::ScalingRatio {
                scaling_ratio: scaling_ratio.unwrap_or(DEFAULT_SCALING_RATIO).max(1),
            }
        } else {
            WindowRule::AdvWinScale {
                adv_win_scale: adv_win_scale
                    .unwrap_or(DEFAULT_ADV_WIN_SCALE)
                    .clamp(-31, 31),
            }
        }
    }

    /// The window a buffer of `space` bytes allows: the kernel's `tcp_win_from_space()`.
    pub fn window_from_space(self, space: u64) -> u64 {
        match self {
            WindowRule::AdvWinScale { adv_win_scale: s } if s > 0 => {
                space - (space >> s.unsigned_abs())
            }
            WindowRule::AdvWinScale { adv_win_scale: s } => space >> s.unsigned_abs(),
            WindowRule::ScalingRatio { scaling_ratio } => {
                ((space as u128 * scaling_ratio as u128) >> 8) as u64
            }
        }
    }

    /// The smallest buffer whose window is at least `window` bytes (saturating at `u64::MAX`).
    pub fn space_from_window(self, window: u64) -> u64 {
        if window == 0 {
            return 0;
        }
        // window_from_space is monotone in space, so bisect; the upper bound holds because
        // every rule keeps at least 1/2^31 (adv_win_scale -31) or 1/256 of the buffer.
        let (mut lo, mut hi) = (0u64, window.saturating_mul(1 << 31));
        if self.window_from_space(hi) < window {
            return u64::MAX;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.window_from_space(mid) >= window {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    /// The share of a large buffer that becomes window.
    pub fn payload_fraction(self) -> f64 {
        match self {
            WindowRule::AdvWinScale { adv_win_scale: s } if s > 0 => {
                1.0 - 1.0 / f64::powi(2.0, s as i32)
            }
            WindowRule::AdvWinScale { adv_win_scale: s } => 1.0 / f64::powi(2.0, -(s as i32)),
            WindowRule::ScalingRatio { scaling_ratio } => scaling_ratio as f64 / 256.0,
        }
    }
}

impl fmt::Display for WindowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WindowRule::AdvWinScale { adv_win_scale: s } if s > 0 => write!(
                f,
                "window = buf − buf>>{s} (tcp_adv_win_scale {s}: {}% of the buffer)",
                crate::units::fmt_sig(self.payload_fraction() * 100.0, 3)
            ),
            WindowRule::AdvWinScale { adv_win_scale: s } => write!(
                f,
                "window = buf>>{} (tcp_adv_win_scale {s}: {}% of the buffer)",
                -(s as i32),
                crate::units::fmt_sig(self.payload_fraction() * 100.0, 3)
            ),
            WindowRule::ScalingRatio { scaling_ratio } => write!(
                f,
                "window = buf × {scaling_ratio}/256 (scaling_ratio {}%)",
                crate::units::fmt_sig(self.payload_fraction() * 100.0, 3)
            ),
        }
    }
}

/// A measured or assumed payload share (0.66, 86 %) as the kernel's 8-bit `scaling_ratio`
/// (out of 256), kept within 1..=255 as the kernel's `u8` field is.
pub fn scaling_ratio_from_fraction(fraction: f64) -> u8 {
    (fraction * 256.0).round().clamp(1.0, 255.0) as u8
}

/// The receive window scale Linux picks at SYN time for a buffer space of
/// `max(tcp_rmem[2], rmem_max)`: `clamp(ilog2(space) − 15, 0, 14)`. It cannot change later, so
/// raising buffers does not help connections that already exist.
pub fn rcv_wscale(space: u64) -> u8 {
    let space = space.min(u32::MAX as u64); // the kernel computes in u32
    if space == 0 {
        return 0;
    }
    (space.ilog2() as i64 - 15).clamp(0, MAX_WSCALE as i64) as u8
}

/// The bytes an application must pass to `setsockopt(SO_RCVBUF/SO_SNDBUF)` so that the socket
/// buffer (which the kernel sets to twice the value, after capping it at `rmem_max`/`wmem_max`)
/// is at least `buffer` bytes. `rmem_max`/`wmem_max` must be at least the returned value.
pub fn setsockopt_value_for(buffer: u64) -> u64 {
    buffer.div_ceil(2)
}

/// The congestion controls the models distinguish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CongestionControl {
    /// Reno (NewReno): the Mathis model's congestion control.
    Reno,
    /// CUBIC, Linux's default.
    Cubic,
    /// BBR (v1, Linux's `bbr`).
    Bbr,
}

impl CongestionControl {
    /// `tcp_sndbuf_expand()`'s factor: the send buffer grows to factor × cwnd segments (2:
    /// "Cubic needs 1.7 factor, rounded to 2"; BBR provisions 3 because it may slow-start even
    /// during recovery).
    pub fn sndbuf_expand_factor(self) -> u32 {
        match self {
            CongestionControl::Bbr => 3,
            CongestionControl::Reno | CongestionControl::Cubic => 2,
        }
    }
    /// The name Linux uses (`net.ipv4.tcp_congestion_control`).
    pub fn name(self) -> &'static str {
        match self {
            CongestionControl::Reno => "reno",
            CongestionControl::Cubic => "cubic",
            CongestionControl::Bbr => "bbr",
        }
    }
}

/// Why a congestion control name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a congestion control the models know; use reno, cubic or bbr")]
pub struct CongestionControlError(String);

impl FromStr for CongestionControl {
    type Err = CongestionControlError;
    fn from_str(s: &str) -> Result<Self, CongestionControlError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "reno" | "newreno" => Ok(CongestionControl::Reno),
            "cubic" => Ok(CongestionControl::Cubic),
            "bbr" | "bbr1" | "bbr2" | "bbr3" => Ok(CongestionControl::Bbr),
            _ => Err(CongestionControlError(s.trim().into())),
        }
    }
}

impl fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The receive buffer (`tcp_rmem[2]` for autotuned sockets, 2 × SO_RCVBUF otherwise) whose
/// window is at least `window`.
pub fn receive_buffer_for(window: Bytes, rule: WindowRule) -> Bytes {
    Bytes::new(rule.space_from_window(window.get()))
}

/// The send buffer (`tcp_wmem[2]`) that lets a sender keep `window` bytes in flight: the
/// autotuner grows the buffer to `factor` × cwnd, so a smaller cap clips cwnd.
pub fn send_buffer_for(window: Bytes, cc: CongestionControl) -> Bytes {
    Bytes::new(
        window
            .get()
            .saturating_mul(cc.sndbuf_expand_factor() as u64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn kernel_versions_from_uname_forms() {
        let k = |s: &str| s.parse::<KernelVersion>().unwrap();
        assert_eq!(k("6.1"), KernelVersion::new(6, 1));
        assert_eq!(k("6.18.0-1-amd64"), KernelVersion::new(6, 18));
        assert_eq!(k("5.15.0-91-generic\n"), KernelVersion::new(5, 15));
        assert_eq!(k("6.6-rc3"), KernelVersion::new(6, 6));
        assert!(!k("6.5.13").has_scaling_ratio());
        assert!(k("6.6.0").has_scaling_ratio());
        assert!(k("7.0").has_scaling_ratio());
        for bad in ["6", "six.one", "", "0.1", ".1", "6.x"] {
            let e = bad.parse::<KernelVersion>().unwrap_err().to_string();
            assert!(e.contains("major.minor"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_unknown_kernel_is_the_assumed_one_whose_window_is_the_older_rules_too() {
        let v = KernelVersion::new(6, 12);
        assert_eq!(
            KernelVersion::detected_or_assumed(Some(v)),
            (v, KernelSource::Detected)
        );
        assert_eq!(
            KernelVersion::detected_or_assumed(None),
            (KernelVersion::ASSUMED, KernelSource::Assumed)
        );
        // Either side of 6.6 a default host advertises half its buffer: assuming 6.6 gives the
        // same window as the older rule would.
        let assumed = WindowRule::for_kernel(KernelVersion::ASSUMED, None, None);
        let older = WindowRule::for_kernel(KernelVersion::new(6, 1), None, None);
        assert!(KernelVersion::ASSUMED.has_scaling_ratio());
        assert_eq!(assumed.payload_fraction(), older.payload_fraction());
        assert_eq!(
            assumed.window_from_space(1 << 20),
            older.window_from_space(1 << 20)
        );
    }

    #[test]
    fn window_rules_match_the_kernel_arithmetic() {
        let old = WindowRule::for_kernel(KernelVersion::new(6, 1), None, None);
        assert_eq!(old, WindowRule::AdvWinScale { adv_win_scale: 1 });
        // tcp_rmem default 131072 "results in initial window of 65535" (ip-sysctl.rst).
        assert_eq!(old.window_from_space(131072), 65536);
        assert_eq!(old.space_from_window(65536), 131071);
        let cloudflare = WindowRule::AdvWinScale { adv_win_scale: -2 };
        assert_eq!(cloudflare.window_from_space(4 << 20), 1 << 20);
        let two = WindowRule::AdvWinScale { adv_win_scale: 2 };
        assert_eq!(two.window_from_space(4096), 3072);

        let new = WindowRule::for_kernel(KernelVersion::new(6, 18), None, None);
        assert_eq!(new, WindowRule::ScalingRatio { scaling_ratio: 128 });
        assert_eq!(new.window_from_space(1_000_000), 500_000);
        let measured = WindowRule::ScalingRatio { scaling_ratio: 219 };
        assert_eq!(measured.window_from_space(256), 219);
        assert!((measured.payload_fraction() - 0.855).abs() < 1e-3);
    }

    #[test]
    fn window_scale_and_limits() {
        assert_eq!(MAX_WINDOW_BYTES, 1_073_725_440);
        assert_eq!(rcv_wscale(65535), 0);
        assert_eq!(rcv_wscale(131072), 2);
        // 6 MiB (old tcp_rmem[2]) → 7; 32 MiB → 10; anything past 2^29 → 14.
        assert_eq!(rcv_wscale(6 << 20), 7);
        assert_eq!(rcv_wscale(32 << 20), 10);
        assert_eq!(rcv_wscale(u64::MAX), 14);
        assert_eq!(scaling_ratio_from_fraction(0.5), 128);
        assert_eq!(scaling_ratio_from_fraction(0.86), 220);
        assert_eq!(scaling_ratio_from_fraction(1.0), 255);
        assert_eq!(scaling_ratio_from_fraction(0.0), 1);
        assert_eq!(setsockopt_value_for(4_000_001), 2_000_001);
        assert_eq!(CongestionControl::Bbr.sndbuf_expand_factor(), 3);
        assert_eq!("CUBIC".parse(), Ok(CongestionControl::Cubic));
        assert!("vegas".parse::<CongestionControl>().is_err());
    }

    proptest! {
        #[test]
        fn space_from_window_is_the_smallest_sufficient_buffer(
            window in 1u64..(1 << 40),
            ratio in 1u8..=255,
            scale in -31i8..=31,
        ) {
            for rule in [
                WindowRule::ScalingRatio { scaling_ratio: ratio },
                WindowRule::AdvWinScale { adv_win_scale: scale },
            ] {
                let space = rule.space_from_window(window);
                if space == u64::MAX {
                    // Beyond what a u64 buffer can give at this rule (scale -31): saturates.
                    prop_assert!(rule.window_from_space(u64::MAX) < window);
                    continue;
                }
                prop_assert!(rule.window_from_space(space) >= window);
                prop_assert!(rule.window_from_space(space - 1) < window);
            }
        }
    }
}
