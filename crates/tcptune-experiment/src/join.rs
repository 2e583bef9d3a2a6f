//! A trial captured at both ends of the link (`capture.at = "both"`): the two captures joined
//! by the analyze library's two-point join ([`tcptune_analyze::join`]), summarised per link
//! direction for `trials.jsonl`, and the report's table that sets what the join found beside
//! the configured impairments and the emulator's own counters.
//!
//! The lab's namespaces share this machine's clock, so the captures are joined as stamped by
//! one clock: no offset is estimated (an estimate would be biased by reordered packets, which
//! skip the delay and make one direction's minimum delay ~0).

use std::net::IpAddr;
use std::path::Path;

use tcptune_analyze::join::{Clock, JoinDirection, JoinReport};
use tcptune_report::html::Block;

use crate::plan::Point;
pub use crate::record::{JoinDirectionSummary, JoinSummary};
use crate::record::{Measurement, StoredPlan, TrialRecord};

/// The host part of an "address:port" endpoint as the join names it.
fn host_of(endpoint: &str) -> Option<IpAddr> {
    let (host, _port) = endpoint.rsplit_once(':')?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// Sums a join's directions into the link's two: packets from `client` went up.
pub fn summarize(report: &JoinReport, client: IpAddr) -> JoinSummary {
    let mut out = JoinSummary {
        clock: if report.clock.method == "same-clock" {
            "both captures were stamped by this machine's clock (the lab's hosts share it): no offset to remove".into()
        } else {
            report.clock.note.clone()
        },
        problems: report.capture_problems.clone(),
        ..Default::default()
    };
    let mut busiest: [Option<&JoinDirection>; 2] = [None, None];
    for d in report.flows.iter().flat_map(|f| &f.directions) {
        let up = host_of(&d.from) == Some(client);
        let s = if up { &mut out.up } else { &mut out.down };
        s.packets += d.upstream_packets;
        s.counts.add(d);
        let b = &mut busiest[usize::from(!up)];
        if d.delay.is_some() && b.is_none_or(|b| d.matched > b.matched) {
            *b = Some(d);
        }
    }
    for (s, b) in [(&mut out.up, busiest[0]), (&mut out.down, busiest[1])] {
        if let Some(delay) = b.and_then(|b| b.delay.as_ref()) {
            s.delay_mean_s = Some(delay.mean_s.secs());
            s.delay_p50_s = Some(delay.p50_s.secs());
            s.delay_p99_s = Some(delay.p99_s.secs());
            s.delay_samples = delay.samples;
        }
    }
    out
}

/// Joins a trial's captures (paths relative to the results directory `dir`; `client` is the
/// client's address). A join that cannot be made is a summary with its reason in `problems`,
/// not a failed trial: the workload's measurement stands.
pub fn join_trial(
    dir: &Path,
    [client_rel, server_rel]: [&str; 2],
    client: IpAddr,
    link_before: Option<serde_json::Value>,
    mut problems: Vec<String>,
) -> JoinSummary {
    let open = |rel: &str| std::fs::File::open(dir.join(rel)).map_err(|e| format!("{rel}: {e}"));
    let joined = open(client_rel).and_then(|a| {
        let b = open(server_rel)?;
        tcptune_analyze::join::join_readers(
            std::io::BufReader::new(a),
            std::io::BufReader::new(b),
            [client_rel, server_rel],
            Clock::Same,
        )
        .map_err(|e| e.to_string())
    });
    let mut summary = match joined {
        Ok(report) => summarize(&report, client),
        Err(e) => JoinSummary {
            problems: vec![format!("the captures could not be joined: {e}")],
            ..Default::default()
        },
    };
    problems.append(&mut summary.problems);
    summary.problems = problems;
    summary.link_before = link_before;
    summary
}

/// The report's table, per point with captures at both ends: each impairment of the data's
/// direction as configured, as the emulator counted it and as the join found it (packet
/// counts, mean per trial), and the one-way delay the join measured.
pub fn table(
    plan: &StoredPlan,
    records: &[TrialRecord],
    direction_of: impl Fn(&Point) -> (bool, [String; 4]),
) -> Option<Block> {
    let mut rows = Vec::new();
    for p in &plan.points {
        // (configured loss, duplicate, reorder, delay ± jitter) of the data's direction.
        let (download, set) = direction_of(p);
        let trials: Vec<(&Measurement, &JoinSummary)> = records
            .iter()
            .filter(|r| r.point == p.index && !r.warmup)
            .filter_map(|r| {
                let m = r.result.as_ref()?;
                Some((m, m.join.as_ref()?))
            })
            .collect();
        if trials.is_empty() {
            continue;
        }
        let n = trials.len() as f64;
        // The emulator's counters `keys` summed over the trial's captures, mean per trial; with
        // `less_copies`, less the copies it duplicated and then dropped (the far side got one
        // packet, as if neither had happened). An absent counter counts 0.
        let emu = |keys: &[&str], less_copies: bool| {
            let dir = if download { "down" } else { "up" };
            let v: Vec<f64> = trials
                .iter()
                .filter_map(|(m, j)| {
                    let c = m.link.as_ref()?.get(dir)?;
                    c.get(keys[0])?;
                    let before = j.link_before.as_ref().and_then(|b| b.get(dir));
                    let n = |k: &str| {
                        let at = |c: Option<&serde_json::Value>| {
                            c.and_then(|c| c.get(k)?.as_f64()).unwrap_or(0.0)
                        };
                        at(Some(c)) - at(before)
                    };
                    let copies = if less_copies {
                        n("copies_dropped")
                    } else {
                        0.0
                    };
                    Some(keys.iter().map(|k| n(k)).sum::<f64>() - copies)
                })
                .collect();
            if v.len() == trials.len() {
                format!("{:.1}", v.iter().sum::<f64>() / n)
            } else {
                "-".into()
            }
        };
        let join = |f: fn(&JoinDirectionSummary) -> u64| {
            format!(
                "{:.1}",
                trials
                    .iter()
                    .map(|(_, j)| f(j.data(download)) as f64)
                    .sum::<f64>()
                    / n
            )
        };
        let ms = |f: fn(&JoinDirectionSummary) -> Option<f64>| {
            let v: Vec<f64> = trials
                .iter()
                .filter_map(|(_, j)| f(j.data(download)))
                .collect();
            if v.is_empty() {
                "-".to_string()
            } else {
                format!("{:.3}", v.iter().sum::<f64>() / v.len() as f64 * 1e3)
            }
        };
        let problems: Vec<&str> = trials
            .iter()
            .flat_map(|(_, j)| j.problems.iter().map(String::as_str))
            .collect();
        let [loss, dup, reorder, delay] = set;
        for (what, configured, emulator, found) in [
            // The join cannot tell a loss from a drop at the queue: both are packets that never
            // arrived.
            (
                "lost (loss model and queue drops)",
                loss,
                emu(&["dropped_loss", "dropped_queue", "dropped_limit"], true),
                join(|d| d.counts.lost_between),
            ),
            (
                "duplicated",
                dup,
                emu(&["duplicated"], true),
                join(|d| d.counts.duplicated),
            ),
            (
                "reordered",
                reorder,
                emu(&["reordered"], false),
                join(|d| d.counts.reordered),
            ),
            (
                "one-way delay mean / p50 / p99 (ms)",
                delay,
                "-".into(),
                format!(
                    "{} / {} / {}",
                    ms(|d| d.delay_mean_s),
                    ms(|d| d.delay_p50_s),
                    ms(|d| d.delay_p99_s)
                ),
            ),
            (
                "lost before the link / needed retransmissions / not seen upstream",
                "-".into(),
                "-".into(),
                format!(
                    "{} / {} / {}",
                    join(|d| d.counts.lost_before_first),
                    join(|d| d.counts.retransmissions_needed),
                    join(|d| d.counts.not_seen_upstream)
                ),
            ),
            (
                "capture problems",
                "-".into(),
                "-".into(),
                problems.join("; ").chars().take(400).collect(),
            ),
        ] {
            if what == "capture problems" && problems.is_empty() {
                continue;
            }
            rows.push(vec![
                p.label(),
                trials.len().to_string(),
                what.to_string(),
                configured,
                emulator,
                found,
            ]);
        }
    }
    (!rows.is_empty()).then(|| Block::Table {
        header: [
            "point",
            "trials",
            "data direction",
            "configured",
            "emulator counted",
            "join found",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcptune_analyze::join::JoinTotals;

    #[test]
    fn endpoints_give_their_host() {
        assert_eq!(host_of("198.18.0.1:5201"), Some([198, 18, 0, 1].into()));
        assert_eq!(
            host_of("[2001:2::1]:5201"),
            Some("2001:2::1".parse().unwrap())
        );
        assert_eq!(host_of("nonsense"), None);
    }

    #[test]
    fn the_table_compares_the_join_with_the_emulators_counts_over_the_captures() {
        let point = Point {
            index: 0,
            settings: [("link.loss", "1%"), ("workload.kind", "http")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            varied: Vec::new(),
            labelled_keys: Vec::new(),
        };
        let plan = StoredPlan {
            name: "t".into(),
            spec_hash: String::new(),
            points: vec![point],
            trials: Vec::new(),
            auto: None,
        };
        let counters = |loss: u64, dup: u64, copies: u64, reordered: u64| {
            serde_json::json!({"down": {
                "dropped_loss": loss,
                "dropped_queue": 0,
                "duplicated": dup,
                "copies_dropped": copies,
                "reordered": reordered,
            }})
        };
        let record = |join: Option<JoinSummary>| TrialRecord {
            id: "p000-r00".into(),
            point: 0,
            rep: Some(0),
            warmup: false,
            seed: 1,
            started_unix_s: 0,
            wall_s: 1.0,
            host_busy: None,
            host_steal: None,
            result: Some(Measurement {
                // 12 drops and 5 copies in all: 1 drop before the captures, 2 drops that were
                // copies (the far side saw 9 losses and 3 extra copies).
                link: Some(counters(12, 5, 2, 3)),
                join,
                ..Default::default()
            }),
            error: None,
        };
        let join = JoinSummary {
            down: JoinDirectionSummary {
                counts: JoinTotals {
                    lost_between: 9,
                    duplicated: 3,
                    reordered: 3,
                    ..Default::default()
                },
                delay_mean_s: Some(0.0051),
                ..Default::default()
            },
            link_before: Some(counters(1, 0, 0, 0)),
            ..Default::default()
        };
        assert!(table(&plan, &[record(None)], |_| (true, Default::default())).is_none());
        let Some(Block::Table { rows, .. }) = table(&plan, &[record(Some(join))], |_| {
            (true, ["1%".into(), "0".into(), "0".into(), "5ms".into()])
        }) else {
            panic!("no table");
        };
        let row = |what: &str| {
            rows.iter()
                .find(|r| r[2].starts_with(what))
                .unwrap()
                .clone()
        };
        assert_eq!(row("lost")[3..], ["1%", "9.0", "9.0"]);
        assert_eq!(row("duplicated")[3..], ["0", "3.0", "3.0"]);
        assert_eq!(row("reordered")[4..], ["3.0", "3.0"]);
        assert!(row("one-way delay")[5].starts_with("5.100 / "));
    }
}
