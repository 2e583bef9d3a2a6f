//! The report's tables beside the statistics: what the link did (the emulator's counters
//! against the configured impairments), the two-capture join, and the failed trials.

use tcptune_report::html::Block;

use super::summary::mbit;
use super::theory::{direction, get};
use crate::plan::Point;
use crate::run::{StoredPlan, TrialRecord};

/// What the link did to a trial's data direction, from the emulator's counters
/// (`Measurement.link`): shares of the packets that entered the link.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Realised {
    /// Packets that entered the link.
    pub packets: f64,
    /// Share lost by the loss model.
    pub lost: f64,
    /// Share duplicated.
    pub duplicated: f64,
    /// Share corrupted.
    pub corrupted: f64,
    /// Share reordered.
    pub reordered: f64,
    /// Drops at the queue (its packet or byte limit, or netem's `limit`), packets.
    pub queue_drops: f64,
    /// Bytes that left the link over the transfer's duration, bit/s.
    pub rate_bps: f64,
}

/// The data direction's counters of one trial; `None` where the backend keeps none (netem's
/// qdiscs count differently) or nothing crossed.
pub fn realised(m: &crate::run::Measurement, download: bool) -> Option<Realised> {
    let d = m.link.as_ref()?.get(if download { "down" } else { "up" })?;
    let n = |k: &str| d.get(k).and_then(serde_json::Value::as_f64);
    let packets = n("packets_in").filter(|p| *p > 0.0)?;
    Some(Realised {
        packets,
        lost: n("dropped_loss")? / packets,
        duplicated: n("duplicated")? / packets,
        corrupted: n("corrupted")? / packets,
        reordered: n("reordered")? / packets,
        queue_drops: n("dropped_queue")? + n("dropped_limit").unwrap_or(0.0),
        rate_bps: n("bytes_out")? * 8.0 / m.duration_s.max(1e-9),
    })
}

/// The realised-impairment table: per point, the configured value of each impairment in the
/// data's direction beside the mean of what the link did in the point's trials.
pub(super) fn realised_table(plan: &StoredPlan, records: &[TrialRecord]) -> Option<Block> {
    let mut rows = Vec::new();
    for p in &plan.points {
        let s = &p.settings;
        let down = direction(s) == "download";
        let dir = if down { "down" } else { "up" };
        let set =
            |k: &str| get(s, &[&format!("link.{dir}.{k}"), &format!("link.{k}")]).unwrap_or("0");
        let r: Vec<Realised> = records
            .iter()
            .filter(|r| r.point == p.index && !r.warmup)
            .filter_map(|r| realised(r.result.as_ref()?, down))
            .collect();
        if r.is_empty() {
            continue;
        }
        let mean = |f: fn(&Realised) -> f64| r.iter().map(f).sum::<f64>() / r.len() as f64;
        let pct =
            |f: fn(&Realised) -> f64, k: &str| format!("{:.2}% (set {})", mean(f) * 100.0, set(k));
        rows.push(vec![
            p.label(),
            r.len().to_string(),
            format!("{:.0}", mean(|r| r.packets)),
            pct(|r| r.lost, "loss"),
            pct(|r| r.duplicated, "duplicate"),
            pct(|r| r.corrupted, "corrupt"),
            pct(|r| r.reordered, "reorder"),
            format!("{:.0}", mean(|r| r.queue_drops)),
            format!("{} (set {})", mbit(mean(|r| r.rate_bps)), set("rate")),
        ]);
    }
    (!rows.is_empty()).then(|| Block::Table {
        header: [
            "point",
            "trials",
            "packets",
            "lost",
            "duplicated",
            "corrupted",
            "reordered",
            "queue drops",
            "Mbit/s out",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

/// The two-point join's table (trials captured at both ends): the data direction's
/// impairments as configured, as the emulator counted them and as the join found them.
pub(super) fn join_table(plan: &StoredPlan, records: &[TrialRecord]) -> Option<Block> {
    crate::join::table(plan, records, |p| {
        let s = &p.settings;
        let down = direction(s) == "download";
        let dir = if down { "down" } else { "up" };
        let set = |k: &str| get(s, &[&format!("link.{dir}.{k}"), &format!("link.{k}")]);
        let delay = match (set("delay"), set("jitter")) {
            (Some(d), Some(j)) => format!(
                "{d} ± {j} ({}, {})",
                set("distribution").unwrap_or("uniform"),
                set("jitter_order").unwrap_or("reorder")
            ),
            (Some(d), None) => d.to_string(),
            (None, _) => set("rtt").map_or("0".into(), |r| format!("rtt {r} / 2")),
        };
        (
            down,
            [
                set("loss").unwrap_or("0").to_string(),
                set("duplicate").unwrap_or("0").to_string(),
                set("reorder").unwrap_or("0").to_string(),
                delay,
            ],
        )
    })
}

/// One row per failed trial: which, where, after how long, and why.
pub(super) fn failures_table(plan: &StoredPlan, records: &[TrialRecord]) -> Option<Block> {
    let rows: Vec<Vec<String>> = records
        .iter()
        .filter_map(|r| {
            let e = r.error.as_ref()?;
            let label = plan
                .points
                .get(r.point)
                .map(Point::label)
                .unwrap_or_default();
            let retried = records.iter().any(|o| o.id == r.id && o.result.is_some());
            Some(vec![
                r.id.clone(),
                label,
                format!("{:.1}", r.wall_s),
                if retried { "yes" } else { "no" }.into(),
                e.chars().take(400).collect(),
            ])
        })
        .collect();
    (!rows.is_empty()).then(|| Block::Table {
        header: ["trial", "point", "after s", "a retry succeeded", "error"]
            .map(String::from)
            .to_vec(),
        rows,
    })
}
