//! How long each test runs: long enough that slow start is not what it measures.
//!
//! A test whose ramp (slow start from the initial window to the path's BDP,
//! `tcptune_model::ramp`) takes a large share of its time measures the ramp, not the buffer:
//! on 1 Gbit/s × 100 ms CUBIC needs about a second to reach the rate, a quarter of a 4 s test,
//! and a larger buffer cannot show what it does. So the test is first lengthened, up to
//! [`MAX_TEST_S`] (the evaluation's rule: tests of at most 5 s); if the ramp still takes more
//! than [`MAX_RAMP_SHARE`] of it, the ramp's whole seconds are omitted from the result (as
//! iperf3 `-O`), within the same 5 s. Lengthening comes first because it keeps what the
//! application sees; omitting comes second because a 5 s test whose first 1.5 s are slow start
//! would otherwise discount every buffer change by the same ramp and hide the difference.

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_model::kernel::CongestionControl;
use tcptune_model::ramp::{ramp_run, RampQuery, Ssthresh};
use tcptune_model::units::{Bytes, Dur, Probability, Rate};

/// The longest test the search runs (with any omitted seconds), seconds.
pub const MAX_TEST_S: u32 = 5;
/// The largest share of a test the ramp may take before the test is lengthened or the ramp
/// omitted.
pub const MAX_RAMP_SHARE: f64 = 0.2;

/// The shape of each test the search asks for.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct TestShape {
    /// Seconds measured.
    pub time_s: u32,
    /// Seconds run before the measurement and not counted (iperf3 `-O`).
    pub omit_s: u32,
    /// The model's time for slow start to reach 95% of the rate, seconds (absent: not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_s: Option<f64>,
    /// Why this shape.
    pub why: String,
}

impl TestShape {
    /// The shape as asked for, before the path is known.
    pub fn asked(time_s: u32) -> TestShape {
        TestShape {
            time_s,
            omit_s: 0,
            ramp_s: None,
            why: format!("{time_s} s as asked"),
        }
    }

    /// Seconds the test takes in all.
    pub fn total_s(&self) -> f64 {
        f64::from(self.time_s + self.omit_s)
    }
}

/// The model's time for one flow's slow start (initial window 10, no ssthresh) to reach 95% of
/// `rate_bps` over `rtt_s`; BBR's startup is taken as CUBIC's (both double per round).
pub fn ramp_seconds(rate_bps: f64, rtt_s: f64, cc: CongestionControl) -> Option<f64> {
    let q = RampQuery {
        rate: Rate::from_bps(rate_bps.max(Rate::MIN_BPS)),
        rtt: Dur::from_secs_f64(rtt_s.max(1e-6)),
        mss: Bytes::new(1448),
        initcwnd: 10,
        ssthresh: Ssthresh::Infinite,
        cc: match cc {
            CongestionControl::Reno => CongestionControl::Reno,
            _ => CongestionControl::Cubic,
        },
        target: Probability::new(0.95)?,
        window: None,
    };
    ramp_run(q).ok()?.time_to_target_s.map(Dur::secs)
}

/// The test for a path of `rate_bps` (one flow's share) and `rtt_s`, given the time asked for.
pub fn shape(asked_s: u32, rate_bps: f64, rtt_s: f64, cc: CongestionControl) -> TestShape {
    let Some(ramp) = ramp_seconds(rate_bps, rtt_s, cc) else {
        return TestShape::asked(asked_s);
    };
    let share = |t: u32| ramp / f64::from(t.max(1));
    if share(asked_s) <= MAX_RAMP_SHARE {
        return TestShape {
            ramp_s: Some(ramp),
            why: format!(
                "{asked_s} s as asked: slow start takes {ramp:.2} s ({:.0}%)",
                share(asked_s) * 100.0
            ),
            ..TestShape::asked(asked_s)
        };
    }
    // Lengthen to where the ramp is a small share, up to the longest test (or the time asked
    // for, when that is longer).
    let cap = MAX_TEST_S.max(asked_s);
    let longer = ((ramp / MAX_RAMP_SHARE).ceil() as u32).clamp(asked_s, cap);
    if share(longer) <= MAX_RAMP_SHARE {
        return TestShape {
            time_s: longer,
            omit_s: 0,
            ramp_s: Some(ramp),
            why: format!(
                "lengthened to {longer} s: slow start takes {ramp:.2} s, {:.0}% of {asked_s} s",
                share(asked_s) * 100.0
            ),
        };
    }
    // Still too large a share: omit the ramp's whole seconds, keeping at least 2 s measured.
    let omit = (ramp.ceil() as u32).min(cap - 2);
    TestShape {
        time_s: cap - omit,
        omit_s: omit,
        ramp_s: Some(ramp),
        why: format!(
            "{omit} s of {cap} s omitted (iperf3 -O): slow start takes {ramp:.2} s, more than {:.0}% even of {cap} s",
            MAX_RAMP_SHARE * 100.0
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_path_keeps_the_asked_time_a_long_fat_one_is_lengthened_or_omits_the_ramp() {
        let lan = shape(4, 1e9, 0.0002, CongestionControl::Cubic);
        assert_eq!((lan.time_s, lan.omit_s), (4, 0), "{lan:?}");
        // 100 Mbit/s × 20 ms: a ramp of about 0.15 s.
        let wan = shape(2, 100e6, 0.020, CongestionControl::Cubic);
        assert_eq!((wan.time_s, wan.omit_s), (2, 0), "{wan:?}");
        // 1 Gbit/s × 100 ms: about a second of slow start, 25% of 4 s: lengthened to 5 s.
        let lfn = shape(4, 1e9, 0.100, CongestionControl::Cubic);
        let ramp = lfn.ramp_s.unwrap();
        assert!((0.5..=1.0).contains(&ramp), "{lfn:?}");
        assert_eq!((lfn.time_s, lfn.omit_s), (5, 0), "{lfn:?}");
        // 1 Gbit/s × 200 ms: over a second, more than 20% even of 5 s: the ramp is omitted.
        let lfn = shape(4, 1e9, 0.200, CongestionControl::Cubic);
        assert!(
            lfn.omit_s >= 1 && lfn.total_s() <= f64::from(MAX_TEST_S),
            "{lfn:?}"
        );
        assert!(lfn.why.contains("omitted"), "{}", lfn.why);
        // 1 Gbit/s × 16 ms: about 0.13 s (slow start doubles per round): 2 s suffice.
        let dc = shape(2, 1e9, 0.016, CongestionControl::Cubic);
        assert_eq!((dc.time_s, dc.omit_s), (2, 0), "{dc:?}");
        assert!(dc.ramp_s.unwrap() < 0.2, "{dc:?}");
    }
}
