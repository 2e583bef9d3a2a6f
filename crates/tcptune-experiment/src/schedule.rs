//! Which points still take trials as a run goes: each point's measured values, whether the
//! stopping rule ([`crate::stopping`]) has closed it, and how many planned trials are left to
//! run. Built from the recorded trials, so a resumed run re-derives the open points from
//! `trials.jsonl`; no I/O. With fixed repetitions every point stays open.

use crate::plan::Trial;
use crate::record::{StoredPlan, TrialRecord};
use crate::stopping::{decide, Auto, Decision};

/// A run's state: each point's measured values, whether it is still open, and how many of
/// the plan's trials are left to run (those of open points). With fixed repetitions every
/// point stays open, so every planned trial runs.
#[derive(Debug, Clone)]
pub struct Tracker {
    rule: Option<Auto>,
    values: Vec<Vec<f64>>,
    /// Planned trials of each point not yet recorded nor passed.
    left: Vec<usize>,
    open: Vec<bool>,
    remaining: usize,
}

impl Tracker {
    /// The state after the recorded trials; `pending` says which planned trials a run would
    /// still run (not recorded, or failed and to be retried).
    pub fn new(
        plan: &StoredPlan,
        records: &[TrialRecord],
        pending: &dyn Fn(&Trial) -> bool,
    ) -> Tracker {
        let n = plan
            .trials
            .iter()
            .map(|t| t.point + 1)
            .chain([plan.points.len()])
            .max()
            .unwrap_or(0);
        let mut values = vec![Vec::new(); n];
        for r in records.iter().filter(|r| !r.warmup) {
            if let (Some(m), Some(v)) = (&r.result, values.get_mut(r.point)) {
                v.push(m.goodput_bps);
            }
        }
        let mut left = vec![0usize; n];
        for t in plan.trials.iter().filter(|t| pending(t)) {
            left[t.point] += 1;
        }
        let open: Vec<bool> = values
            .iter()
            .map(|v| {
                plan.auto
                    .is_none_or(|r| decide(v, &r) == Decision::Continue)
            })
            .collect();
        let remaining = (0..n).filter(|&p| open[p]).map(|p| left[p]).sum();
        Tracker {
            rule: plan.auto,
            values,
            left,
            open,
            remaining,
        }
    }

    /// The trial comes up: whether its point still takes trials (if not, it is passed over).
    pub fn take(&mut self, t: &Trial) -> bool {
        let Some(open) = self.open.get(t.point).copied() else {
            return false;
        };
        self.left[t.point] = self.left[t.point].saturating_sub(1);
        if open {
            self.remaining = self.remaining.saturating_sub(1);
        }
        open
    }

    /// A taken trial ended, with its goodput when it measured one.
    pub fn ended(&mut self, t: &Trial, goodput: Option<f64>) {
        let (Some(rule), Some(values)) = (self.rule, self.values.get_mut(t.point)) else {
            return;
        };
        if let (false, Some(g)) = (t.warmup, goodput) {
            values.push(g);
        }
        if self.open[t.point] && decide(values, &rule) != Decision::Continue {
            self.open[t.point] = false;
            self.remaining = self.remaining.saturating_sub(self.left[t.point]);
        }
    }

    /// Trials still to run, as far as is known now (open points' planned trials).
    pub fn remaining(&self) -> usize {
        self.remaining
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Recorded goodputs (Mbit/s) of fixtures/experiment/seed000-wmem/trials.jsonl, r01 to r03,
    // whose 95% CI half-widths are 5.19% (p000), 8.8% (p001), 24.6% (p002) of the mean, and
    // more for the rest (see stopping's tests for the arithmetic).
    #[test]
    fn the_tracker_rederives_open_points_from_recorded_trials() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/experiment/seed000-wmem");
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let mut plan: StoredPlan = serde_json::from_str(&read("plan.json")).unwrap();
        let records: Vec<TrialRecord> = read("trials.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // Every trial of the fixture is recorded: with fixed repetitions nothing is left.
        let all = Tracker::new(&plan, &records, &|_: &Trial| false);
        assert_eq!(all.remaining(), 0);
        // Within 6%, 3 to 5 trials: of its 10 points only p000 (5.19%) is precise. Three more
        // rounds planned for every point leave 9 open points × 2 rounds to run.
        plan.auto = Some(Auto {
            precision: 0.06,
            min: 3,
            max: 5,
        });
        let more: Vec<Trial> = (0..10)
            .flat_map(|p| {
                (4..=5).map(move |rep| Trial {
                    id: format!("p{p:03}-r{rep:02}"),
                    point: p,
                    rep: Some(rep),
                    warmup: false,
                    seed: 0,
                })
            })
            .collect();
        plan.trials.extend(more.iter().cloned());
        let ids: Vec<String> = more.iter().map(|t| t.id.clone()).collect();
        let mut t = Tracker::new(&plan, &records, &|t: &Trial| ids.contains(&t.id));
        assert_eq!(t.remaining(), 9 * 2);
        assert!(
            !t.take(&more[0]),
            "p000 is precise: its round 4 is passed over"
        );
        assert_eq!(t.remaining(), 18);
        // p002 (24.6% after 3) measured once more at its mean: 12.9%, still open, one trial
        // fewer left; one that narrows p001 (8.8%) to 4.6% closes it and drops its last round.
        let p002 = &more[4];
        assert!(t.take(p002));
        t.ended(p002, Some(335.248e6));
        assert_eq!(t.remaining(), 17);
        let p001 = &more[2];
        assert!(t.take(p001));
        t.ended(p001, Some(110.464e6));
        assert_eq!(t.remaining(), 15, "its round 5 is no longer needed");
        assert!(!t.take(&more[3]));
    }
}
