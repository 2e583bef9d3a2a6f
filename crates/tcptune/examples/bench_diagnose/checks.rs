//! What the benchmark checks besides the class: contradictions (the engine's own invariants,
//! `engine::invariants::check`, on every stream of both directions) and harmful
//! recommendations — every recommendation of the test, of each direction and of each stream,
//! checked against what the namespaces really have (every sysctl knob at the end it names, both
//! ends for "both ends"), against the flow's own congestion control (the test's `-C`, else the
//! sending namespace's default) and against the test's own options (`-w`, `-l`, `-Z`, `-P`). A
//! sysctl that cannot be read fails the case: an unchecked recommendation is not a safe one.

use std::process::Command;

use tcptune_diagnose::advice::{InEffect, Recommendation};
use tcptune_diagnose::engine::{invariants, Context};
use tcptune_diagnose::throughput::TestDiagnosis;

use crate::cases::Case;

/// A sysctl's value in a namespace, whitespace normalised; an error when it cannot be read.
pub fn sysctl(netns: &str, key: &str) -> Result<String, String> {
    let out = Command::new("ip")
        .args(["netns", "exec", netns, "sysctl", "-n", key])
        .output()
        .map_err(|e| format!("cannot run ip netns exec {netns} sysctl {key}: {e}"))?;
    let v = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if !out.status.success() || v.is_empty() {
        return Err(format!(
            "sysctl {key} could not be read in {netns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(v)
}

/// Every invariant the diagnosis breaks, in both directions, stream by stream and the merged
/// advice of each direction.
pub fn contradictions(t: &TestDiagnosis) -> Vec<String> {
    let mut out = Vec::new();
    for s in &t.streams {
        for v in invariants::check(&s.diagnosis()) {
            out.push(format!("[{}] {}: {}", s.id, v.rule, v.detail));
        }
    }
    if let Some(c) = &t.context {
        let in_effect = InEffect::of(&Context::from(c));
        for v in invariants::check_advice(&t.recommendations, &in_effect) {
            out.push(format!("test: {}: {}", v.rule, v.detail));
        }
    }
    if let Some(r) = &t.reverse {
        out.extend(contradictions(r));
    }
    out
}

/// Each recommendation with the direction it is for (true: the server sends).
fn all_recommendations(t: &TestDiagnosis, reverse: bool) -> Vec<(bool, &Recommendation)> {
    let mut v: Vec<(bool, &Recommendation)> =
        t.recommendations.iter().map(|r| (reverse, r)).collect();
    for s in &t.streams {
        v.extend(s.recommendations.iter().map(|r| (reverse, r)));
    }
    if let Some(r) = &t.reverse {
        v.extend(all_recommendations(r, !reverse));
    }
    v
}

/// The value of a test option (`-w`, `-P`, …), if the case gives it.
fn opt<'a>(case: &'a Case, flag: &str) -> Option<&'a str> {
    let i = case.test.iter().position(|a| *a == flag)?;
    case.test.get(i + 1).copied()
}

/// The checks of one case: where each end is, and what its test asked for.
pub struct Ends<'a> {
    pub case: &'a Case,
    /// Namespace name of a lab host ("client"/"server").
    pub ns: &'a dyn Fn(&str) -> String,
}

impl Ends<'_> {
    /// The lab hosts a recommendation's "on" names, for a direction.
    fn hosts(&self, on: &str, reverse: bool) -> Vec<&'static str> {
        if self.case.loopback {
            return vec!["client"];
        }
        let (snd, rcv) = if reverse {
            ("server", "client")
        } else {
            ("client", "server")
        };
        match on {
            "the sender" => vec![snd],
            "the receiver" => vec![rcv],
            "both ends" => vec![snd, rcv],
            _ => Vec::new(),
        }
    }

    /// The congestion control the flow of a direction ran: the test's -C, else the sending
    /// namespace's default.
    fn flow_cc(&self, reverse: bool) -> Result<String, String> {
        if let Some(c) = opt(self.case, "-C") {
            return Ok(c.to_string());
        }
        let host = self.hosts("the sender", reverse)[0];
        sysctl(&(self.ns)(host), "net.ipv4.tcp_congestion_control")
    }

    /// What is harmful in the recommendations; an error when a setting could not be read.
    pub fn harmful(&self, t: &TestDiagnosis, main_reverse: bool) -> Result<Vec<String>, String> {
        let mut bad = Vec::new();
        let recs = all_recommendations(t, main_reverse);
        for (reverse, r) in &recs {
            bad.extend(self.options(r));
            let knob = serde_json::to_value(r.knob)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            if knob == "congestion_control" {
                let cc = self.flow_cc(*reverse)?;
                if r.proposed.as_deref() == Some(cc.as_str()) {
                    bad.push(format!("proposes {cc}, which the flow already ran"));
                }
                if r.change.contains("already in effect") {
                    bad.push(format!("says {cc} is already in effect: {}", r.change));
                }
                continue;
            }
            let Some(key) = r.knob.sysctl() else {
                continue;
            };
            for host in self.hosts(&r.on, *reverse) {
                let actual = sysctl(&(self.ns)(host), key)?;
                let Some(proposed) = r.proposed.as_deref() else {
                    continue;
                };
                let now: u64 = actual
                    .split_whitespace()
                    .last()
                    .and_then(|x| x.parse().ok())
                    .ok_or_else(|| format!("{key} on {host} reads '{actual}', not a number"))?;
                let want: u64 = proposed.parse().unwrap_or(0);
                if want <= now {
                    bad.push(format!(
                        "{key} on {host}: proposes {want}, the namespace has {now} (lower or \
                         in effect)"
                    ));
                }
            }
        }
        Ok(bad)
    }

    /// Advice that names one of the test's own options at the value it already had.
    fn options(&self, r: &Recommendation) -> Vec<String> {
        let mut bad = Vec::new();
        let c = &r.change;
        if c.contains("(-Z)") && self.case.test.contains(&"-Z") {
            bad.push("advises -Z, which the test used".into());
        }
        // -l is 128 KiB unless the test asks less: larger writes then save little.
        let small_writes = opt(self.case, "-l").is_some_and(|l| {
            l.parse::<tcptune_model::Bytes>()
                .is_ok_and(|b| b.get() < 128 * 1024)
        });
        if c.contains("(-l)") && !small_writes {
            bad.push("advises larger writes (-l) with 128 KiB writes already".into());
        }
        // On loopback both ends already take the 2 cores; more streams cannot add one.
        if c.contains("(-P)") && self.case.loopback {
            bad.push(format!(
                "advises more streams (-P) with both ends on this host (-P {})",
                opt(self.case, "-P").unwrap_or("1")
            ));
        }
        if let (Some(w), Some(p)) = (opt(self.case, "-w"), r.proposed.as_deref()) {
            let w = w.parse::<tcptune_model::Bytes>().map(|b| b.get());
            if r.command.as_deref().is_some_and(|x| x.starts_with("-w"))
                && w.is_ok_and(|w| p.parse::<u64>().is_ok_and(|p| p <= w))
            {
                bad.push(format!("advises -w {p}, not above the test's -w"));
            }
        }
        bad
    }
}

/// The required recommendation, when the case names one and it is missing.
pub fn missing_knob(case: &Case, t: &TestDiagnosis, main_reverse: bool) -> Option<String> {
    let want = case.require_knob?;
    let have = all_recommendations(t, main_reverse).iter().any(|(_, r)| {
        serde_json::to_value(r.knob)
            .ok()
            .is_some_and(|v| v.as_str() == Some(want))
    });
    (!have).then(|| format!("no {want} recommendation"))
}
