//! The one rule for the `tcp_rmem`/`tcp_wmem` maxima tcptune recommends. `test` (the engine's
//! needs), `audit` and `tune` (which plans from the audit) all size a path's buffers here, so
//! every command names the same value for the same path and flow count.
//!
//! Three steps, each a separate, named figure:
//! 1. the *need*: the smallest maximum whose window covers one flow's share of the path's BDP
//!    (the kernel's arithmetic in [`crate::kernel`]: [`WindowRule`] for the receive side,
//!    `tcp_sndbuf_expand()`'s factor for the send side);
//! 2. the *recommended* maximum: the need rounded up to a value people write
//!    ([`round_buffer`]: 64 KiB steps up to 4 MiB, whole MiB above), never below the need;
//! 3. under `--fit` only, the *fitted* maximum ([`FIT`]): headroom over the recommended value,
//!    the one case in which a current, larger maximum may be lowered.

use crate::kernel::{receive_buffer_for, send_buffer_for, CongestionControl, WindowRule};
use crate::units::{Bytes, Dur, Rate};

/// What a recommendation is sized for: the path, how many flows share it, and the kernel's
/// rules at the two ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizingQuery {
    /// The path's bottleneck rate (all flows together).
    pub rate: Rate,
    /// The round-trip time the window must cover.
    pub rtt: Dur,
    /// Concurrent bulk flows sharing the rate (0 is taken as 1).
    pub flows: u32,
    /// The sender's congestion control (the send buffer's expand factor).
    pub cc: CongestionControl,
    /// How the receiver's kernel splits a buffer into window and overhead.
    pub rule: WindowRule,
}

/// The buffer maxima one flow of a [`SizingQuery`] needs, and the values to recommend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sizing {
    /// Each flow's share of the rate.
    pub flow_rate: Rate,
    /// The window each flow needs: its share of the rate × the RTT, bytes.
    pub window: Bytes,
    /// The smallest `tcp_rmem` maximum whose window is `window`.
    pub rmem_need: Bytes,
    /// The smallest `tcp_wmem` maximum that keeps `window` in flight.
    pub wmem_need: Bytes,
    /// The `tcp_rmem` maximum to recommend: `rmem_need` rounded up ([`round_buffer`]).
    pub rmem_max: Bytes,
    /// The `tcp_wmem` maximum to recommend: `wmem_need` rounded up ([`round_buffer`]).
    pub wmem_max: Bytes,
}

/// Sizes the buffer maxima for `q`.
pub fn size(q: &SizingQuery) -> Sizing {
    let flows = q.flows.max(1);
    let flow_rate = Rate::from_bps(q.rate.bps() / flows as f64);
    let window = flow_rate.times(q.rtt).to_bytes_ceil();
    let rmem_need = receive_buffer_for(window, q.rule);
    let wmem_need = send_buffer_for(window, q.cc);
    Sizing {
        flow_rate,
        window,
        rmem_need,
        wmem_need,
        rmem_max: round_buffer(rmem_need),
        wmem_max: round_buffer(wmem_need),
    }
}

/// Rounds a buffer size up to a value people write: a multiple of 64 KiB up to 4 MiB, a whole
/// MiB above (a sysctl.d line of `… 25165824` reads as 24 MiB; `… 24999999` reads as a typo).
/// Never below `b`, and rounding a rounded value changes nothing.
pub fn round_buffer(b: Bytes) -> Bytes {
    const KIB64: u64 = 64 * 1024;
    const MIB: u64 = 1024 * 1024;
    let unit = if b.get() > 4 * MIB { MIB } else { KIB64 };
    Bytes::new(b.get().div_ceil(unit).saturating_mul(unit))
}

/// What `--fit` gives a buffer maximum: headroom over the recommended value, and a floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitPolicy {
    /// The fitted maximum is this multiple of the recommended one, rounded up.
    pub headroom: f64,
    /// ... and at least this many bytes.
    pub floor: Bytes,
}

/// `--fit`'s policy: 1.5× the recommended maximum (headroom for an RTT that grows with
/// queueing, and for delayed and stretched ACKs; the need itself already counts the kernel's
/// overhead, twice the window or more), rounded up like every recommended buffer, and at least
/// 128 KiB: two of the largest (64 KiB) TSO bursts, so a sender can fill one while the other
/// is in flight, whatever the BDP.
///
/// Chosen with the tuning evaluation (examples/tuning-evaluation): a 256 KiB floor used 3.4×
/// the smallest sufficient buffer on a 1 Gbit/s × 0.2 ms LAN; twice the need would let the
/// scaled 10 Gbit/s × 1.6 ms path's buffers grow to 8 + 8 MiB, twice the 4 + 4 MiB that
/// suffice there.
pub const FIT: FitPolicy = FitPolicy {
    headroom: 1.5,
    floor: Bytes::new(128 * 1024),
};

impl FitPolicy {
    /// The fitted maximum for a `recommended` one (a [`Sizing`]'s `rmem_max` or `wmem_max`).
    pub fn fitted(&self, recommended: Bytes) -> Bytes {
        let grown = (recommended.get() as f64 * self.headroom).ceil() as u64;
        round_buffer(Bytes::new(grown)).max(self.floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::KernelVersion;

    fn q(rate: &str, rtt: &str, flows: u32, cc: CongestionControl, kernel: &str) -> SizingQuery {
        SizingQuery {
            rate: rate.parse().unwrap(),
            rtt: rtt.parse().unwrap(),
            flows,
            cc,
            rule: WindowRule::for_kernel(kernel.parse::<KernelVersion>().unwrap(), None, None),
        }
    }

    #[test]
    fn a_wan_flow_needs_twice_its_bdp_rounded_to_whole_mib() {
        // 1 Gbit/s × 100 ms = 12.5 MB; 6.6+ assumes half the buffer is window: 25 MB, which is
        // written as 24 MiB (25165824 B); cubic's send buffer is 2 × 12.5 MB as well.
        let s = size(&q("1gbit", "100ms", 1, CongestionControl::Cubic, "6.18"));
        assert_eq!(s.window.get(), 12_500_000);
        assert_eq!(s.rmem_need.get(), 25_000_000);
        assert_eq!(s.rmem_max.get(), 24 << 20);
        assert_eq!(s.wmem_max.get(), 24 << 20);
        // BBR's send buffer is 3 × the window.
        let s = size(&q("1gbit", "100ms", 1, CongestionControl::Bbr, "6.18"));
        assert_eq!(s.wmem_need.get(), 37_500_000);
        assert_eq!(s.wmem_max.get(), 36 << 20);
    }

    #[test]
    fn flows_share_the_rate_and_small_needs_round_to_64_kib() {
        // 1 Gbit/s × 0.2 ms over 4 flows: 6250 B each; 12500 B of buffer → 64 KiB.
        let s = size(&q("1gbit", "0.2ms", 4, CongestionControl::Cubic, "6.1"));
        assert_eq!(s.window.get(), 6_250);
        assert_eq!(s.rmem_need.get(), 12_499); // adv_win_scale 1: 2 × window − 1
        assert_eq!(s.rmem_max.get(), 65_536);
        assert_eq!(round_buffer(Bytes::new(4 << 20)).get(), 4 << 20);
        assert_eq!(round_buffer(Bytes::new((4 << 20) + 1)).get(), 5 << 20);
        assert_eq!(round_buffer(Bytes::new(0)).get(), 0);
    }

    #[test]
    fn fit_gives_half_again_and_at_least_128_kib() {
        assert_eq!(FIT.fitted(Bytes::new(24 << 20)).get(), 36 << 20);
        assert_eq!(FIT.fitted(Bytes::new(65_536)).get(), 128 * 1024);
        assert_eq!(FIT.fitted(Bytes::new(4 << 20)).get(), 6 << 20);
    }

    proptest::proptest! {
        #[test]
        fn recommendations_cover_the_need_and_grow_with_the_path(
            bps in 1e5f64..1e11, rtt_us in 10u64..1_000_000, flows in 1u32..16,
            more in 1.0f64..4.0, bbr: bool, old: bool,
        ) {
            let cc = if bbr { CongestionControl::Bbr } else { CongestionControl::Cubic };
            let mut a = q("1gbit", "1ms", flows, cc, if old { "5.15" } else { "6.18" });
            a.rate = Rate::from_bps(bps);
            a.rtt = Dur::from_micros(rtt_us);
            let s = size(&a);
            // Never below the need; rounding is idempotent.
            proptest::prop_assert!(s.rmem_max >= s.rmem_need && s.wmem_max >= s.wmem_need);
            proptest::prop_assert_eq!(round_buffer(s.rmem_max), s.rmem_max);
            proptest::prop_assert_eq!(round_buffer(s.wmem_max), s.wmem_max);
            proptest::prop_assert!(FIT.fitted(s.rmem_max) >= s.rmem_max);
            // Monotone in the rate and in the RTT.
            let faster = size(&SizingQuery { rate: Rate::from_bps(bps * more), ..a });
            let longer = size(&SizingQuery {
                rtt: Dur::from_micros((rtt_us as f64 * more) as u64),
                ..a
            });
            for t in [faster, longer] {
                proptest::prop_assert!(t.rmem_max >= s.rmem_max && t.wmem_max >= s.wmem_max);
                proptest::prop_assert!(t.rmem_need >= s.rmem_need);
            }
        }
    }
}
