//! The `spec` fuzz target's entry: the lab and experiment spec parsers on arbitrary bytes, and
//! for a spec they accept, its plan and the checks of its first points. It sits above every
//! module it exercises.

use crate::settings::{self, Capabilities};
use crate::spec::parse;
use crate::{lab_runner, plan};

/// A fixed kernel for the fuzz target (the live one would make runs differ by machine).
struct FuzzCaps;

impl Capabilities for FuzzCaps {
    fn congestion_controls(&self) -> Vec<String> {
        vec!["reno".into(), "cubic".into(), "bbr".into()]
    }
    fn sysctl_exists(&self, key: &str) -> bool {
        // (and the per-interface IPv6 switches the two-point-join example turns off)
        key.starts_with("net.ipv4.tcp_")
            || key.starts_with("net.core.")
            || key.starts_with("net.ipv6.conf.")
    }
    fn cpus(&self) -> u32 {
        2
    }
}

/// Runs the spec parsers on arbitrary bytes, as the `spec` fuzz target and its corpus replay
/// do: as a lab spec (`lab up --spec`, JSON) and as an experiment spec (TOML) with, for one it
/// accepts, the plan and the checks of the first points (lab spec, workload). Returns how
/// many points were checked; never panics on any input.
#[doc(hidden)]
pub fn fuzz_one(data: &[u8]) -> usize {
    if let Ok(lab) = serde_json::from_slice::<tcptune_lab::LabSpec>(data) {
        let _ = lab.validate();
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return 0;
    };
    let spec = match parse(text, &FuzzCaps) {
        Ok(s) => s,
        // An error names a line of the text, if any.
        Err(e) => {
            let lines = text.lines().count().max(1) + 1;
            assert!(e.line.is_none_or(|l| l >= 1 && l <= lines), "{e}");
            return 0;
        }
    };
    let points = plan::points(&spec);
    let trials = plan::trials(&spec, &points);
    assert_eq!(
        trials.len(),
        points.len() * (spec.repetitions as usize + usize::from(spec.warmup))
    );
    let mut n = 0;
    for p in points.iter().take(50) {
        let _ = lab_runner::lab_spec(&p.settings, 1);
        let _ = settings::check_point(&p.settings);
        n += 1;
    }
    n
}
