//! Bandwidth-delay product and the window-limited throughput bound (window / RTT).

use schemars::JsonSchema;
use serde::Serialize;

use crate::units::{Bits, Bytes, Dur, Rate};

/// The bandwidth-delay product: how much data must be in flight to keep a path busy.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Bdp {
    /// Path rate, bits per second.
    pub rate_bps: Rate,
    /// Round-trip time, seconds.
    pub rtt_s: Dur,
    /// rate × RTT, bits.
    pub bdp_bits: Bits,
    /// rate × RTT, bytes (rounded up).
    pub bdp_bytes: Bytes,
    /// The formula in words.
    pub formula: String,
    /// When the number misleads.
    pub caveats: Vec<String>,
}

/// The bandwidth-delay product of `rate` × `rtt`: the data in flight that keeps the path busy.
pub fn bdp(rate: Rate, rtt: Dur) -> Bdp {
    let bits = rate.times(rtt);
    Bdp {
        rate_bps: rate,
        rtt_s: rtt,
        bdp_bits: bits,
        bdp_bytes: bits.to_bytes_ceil(),
        formula: "BDP = rate × RTT".into(),
        caveats: vec![
            "Use the bottleneck rate and the minimum RTT; queueing delay inflates the RTT but \
             not the data the path itself holds."
                .into(),
            "This is payload the sender must keep in flight; socket buffers must be larger \
             because Linux counts per-packet overhead against them (see `model buffers`)."
                .into(),
        ],
    }
}

/// Which way the window bound was asked.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WindowDirection {
    /// Given a window, the rate it allows.
    RateForWindow,
    /// Given a rate, the window it needs.
    WindowForRate,
}

/// The window bound: at most one window of data per round trip.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WindowBound {
    /// Whether the window gives the rate, or the rate the window.
    pub direction: WindowDirection,
    /// Window (the smaller of cwnd, receive window and send buffer), bytes.
    pub window_bytes: Bytes,
    /// Round-trip time, seconds.
    pub rtt_s: Dur,
    /// Throughput bound, bits per second.
    pub rate_bps: Rate,
    /// The formula, in words.
    pub formula: String,
    /// When the number misleads.
    pub caveats: Vec<String>,
}

fn window_caveats(window: Bytes) -> Vec<String> {
    let mut c = vec![
        "An upper bound: the path rate, loss and the sender's cwnd can hold throughput lower."
            .into(),
        "The window counts payload; headers make the wire rate a few percent higher.".into(),
    ];
    if window.get() > 65535 {
        c.push(
            "A window above 64 KiB needs window scaling (RFC 7323) negotiated on both sides."
                .into(),
        );
    }
    if window.get() > 1_073_725_440 {
        c.push(
            "No single TCP connection can advertise more than 1 GiB (65535 × 2^14); use \
             parallel flows."
                .into(),
        );
    }
    c
}

/// The rate a window allows over an RTT: rate ≤ window / RTT.
pub fn rate_for_window(window: Bytes, rtt: Dur) -> WindowBound {
    WindowBound {
        direction: WindowDirection::RateForWindow,
        window_bytes: window,
        rtt_s: rtt,
        rate_bps: Rate::from_bytes_per(window, rtt),
        formula: "rate ≤ window / RTT".into(),
        caveats: window_caveats(window),
    }
}

/// The window a rate needs over an RTT: window ≥ rate × RTT.
pub fn window_for_rate(rate: Rate, rtt: Dur) -> WindowBound {
    let window = rate.times(rtt).to_bytes_ceil();
    WindowBound {
        direction: WindowDirection::WindowForRate,
        window_bytes: window,
        rtt_s: rtt,
        rate_bps: rate,
        formula: "window ≥ rate × RTT".into(),
        caveats: window_caveats(window),
    }
}

impl std::fmt::Display for Bdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::render::write_model(
            f,
            &format!(
                "Bandwidth-delay product of {} × {}",
                self.rate_bps, self.rtt_s
            ),
            &[
                ("rate", self.rate_bps.to_string()),
                ("rtt", self.rtt_s.to_string()),
                ("bdp", format!("{} = {}", self.bdp_bits, self.bdp_bytes)),
            ],
            &self.formula,
            &self.caveats,
        )
    }
}

impl std::fmt::Display for WindowBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (title, rows) = match self.direction {
            WindowDirection::RateForWindow => (
                format!(
                    "Throughput bound of a {} B window over {}",
                    self.window_bytes.get(),
                    self.rtt_s
                ),
                vec![
                    ("window", self.window_bytes.to_string()),
                    ("rtt", self.rtt_s.to_string()),
                    ("max rate", self.rate_bps.to_string()),
                ],
            ),
            WindowDirection::WindowForRate => (
                format!("Window needed for {} over {}", self.rate_bps, self.rtt_s),
                vec![
                    ("rate", self.rate_bps.to_string()),
                    ("rtt", self.rtt_s.to_string()),
                    ("window", self.window_bytes.to_string()),
                ],
            ),
        };
        crate::render::write_model(f, &title, &rows, &self.formula, &self.caveats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bdp_of(rate: &str, rtt: &str) -> Bdp {
        bdp(rate.parse().unwrap(), rtt.parse().unwrap())
    }

    #[test]
    fn seed_000_datacenter_and_home_paths() {
        // Seed 000: 10 Gbps × 1.58 ms = 15.8 Mbit; 1 Gbps × 1.49 ms = 1.49 Mbit;
        // 1 Gbps × 0.12 ms = 120 kbit.
        assert_eq!(bdp_of("10gbit", "1.58ms").bdp_bits.to_string(), "15.8 Mbit");
        assert_eq!(bdp_of("10gbit", "1.58ms").bdp_bytes.get(), 1_975_000);
        assert_eq!(bdp_of("1gbit", "1.49ms").bdp_bits.to_string(), "1.49 Mbit");
        assert_eq!(bdp_of("1gbit", "0.12ms").bdp_bits.to_string(), "120 kbit");
        assert_eq!(bdp_of("1gbit", "0.12ms").bdp_bytes.get(), 15_000);
    }

    #[test]
    fn seed_002_dsl_line() {
        // Seed 002: 1.5 Mbps × 110 ms ≈ 20.6 KB; its 21.12 KB reads 1.5 Mbps as 1536 kbit/s.
        assert_eq!(bdp_of("1.5mbit", "110ms").bdp_bytes.get(), 20_625);
        assert_eq!(bdp_of("1536kbit", "110ms").bdp_bytes.get(), 21_120);
    }

    #[test]
    fn window_and_rate_are_inverses() {
        for (rate, rtt) in [
            ("100mbit", "20ms"),
            ("10gbit", "1.58ms"),
            ("1.5mbit", "110ms"),
        ] {
            let w = window_for_rate(rate.parse().unwrap(), rtt.parse().unwrap());
            let r = rate_for_window(w.window_bytes, w.rtt_s);
            let want: Rate = rate.parse().unwrap();
            // Rounding the window up to whole bytes moves the rate by at most one byte per RTT.
            assert!(r.rate_bps.bps() >= want.bps());
            assert!(r.rate_bps.bps() - want.bps() <= 8.0 / w.rtt_s.secs() + 1e-6);
        }
        let r = rate_for_window(Bytes::new(65535), "20ms".parse().unwrap());
        assert!((r.rate_bps.bps() - 26_214_000.0).abs() < 1e-3);
    }

    proptest::proptest! {
        #[test]
        fn window_for_rate_inverts_rate_for_window(bps in 1e3f64..1e12, rtt_us in 1u64..10_000_000) {
            let (rate, rtt) = (Rate::from_bps(bps), Dur::from_micros(rtt_us));
            let w = window_for_rate(rate, rtt);
            let back = rate_for_window(w.window_bytes, rtt);
            // Rounding the window up to whole bytes adds less than one byte per RTT.
            proptest::prop_assert!(back.rate_bps.bps() >= bps * (1.0 - 1e-12));
            proptest::prop_assert!(back.rate_bps.bps() - bps <= 8.0 / rtt.secs() * (1.0 + 1e-9) + bps * 1e-12);
            // And the other way: the window a window's rate needs is that window.
            let again = window_for_rate(back.rate_bps, rtt);
            proptest::prop_assert_eq!(again.window_bytes, w.window_bytes);
        }
    }
}
