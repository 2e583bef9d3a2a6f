//! From a spec to the list of trials: sweep points (the cross product of every `[sweep]` list
//! and every `[[paired]]` group's rows), repetitions, a warm-up before each point's first
//! measured trial, and the order (shuffled with the spec's seed, or sequential). Every trial
//! gets its own seed derived from the spec's, so a rerun makes the same impairment decisions.
//! With `repetitions = "auto"` the trials go in rounds, one trial of each point per round,
//! up to the maximum; the run passes over the trials of points the stopping rule has closed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use tcptune_model::Dur;

use crate::settings::Settings;
use crate::spec::{Order, Seeds, Spec, LABEL};
use crate::stopping::Auto;

/// One combination of settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The point's number, from 0 in spec order.
    pub index: usize,
    /// All settings of the point (the base with the swept values applied).
    pub settings: Settings,
    /// Only the swept settings and their values here, in spec order: the point's label.
    pub varied: Vec<(String, String)>,
    /// Settings of groups that carry a `label` list (shown by the label, not one by one).
    #[serde(default)]
    pub labelled_keys: Vec<String>,
}

impl Point {
    /// "link.delay=5ms, client.mtu=9000" (or "base" when nothing is swept); a `label` list
    /// stands for the settings of its group.
    pub fn label(&self) -> String {
        if self.varied.is_empty() {
            return "base".into();
        }
        self.varied
            .iter()
            .filter(|(k, _)| !self.labelled(k))
            .map(|(k, v)| {
                if k == LABEL {
                    v.clone()
                } else {
                    format!("{k}={v}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether `key` belongs to a group whose rows have labels (so its value is not shown).
    pub fn labelled(&self, key: &str) -> bool {
        key != LABEL && self.labelled_keys.iter().any(|k| k == key)
    }
}

/// One run of a point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trial {
    /// Stable id: "p003-r02", "p003-warmup".
    pub id: String,
    /// The number of the point it runs.
    pub point: usize,
    /// Repetition number (from 1), `None` for the warm-up.
    pub rep: Option<u32>,
    /// Whether it is the point's unmeasured warm-up.
    pub warmup: bool,
    /// Seed of this trial's random decisions (link impairments).
    pub seed: u64,
}

/// A small, well-mixed generator (SplitMix64): enough for shuffling and deriving seeds, and
/// stable across platforms and versions, which a reproducible order needs.
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0), without modulo bias worth caring about for n ≪ 2^64.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// Every sweep point, in spec order.
pub fn points(spec: &Spec) -> Vec<Point> {
    // Each dimension is a list of alternatives; an alternative sets one or more keys.
    let mut dims: Vec<Vec<Vec<(String, String)>>> = Vec::new();
    for axis in &spec.sweep {
        dims.push(
            axis.values
                .iter()
                .map(|v| vec![(axis.key.clone(), v.clone())])
                .collect(),
        );
    }
    for group in &spec.paired {
        dims.push(
            group
                .rows
                .iter()
                .map(|row| {
                    group
                        .keys
                        .iter()
                        .cloned()
                        .zip(row.iter().cloned())
                        .collect()
                })
                .collect(),
        );
    }
    let labelled: Vec<String> = spec
        .paired
        .iter()
        .filter(|g| g.keys.iter().any(|k| k == LABEL))
        .flat_map(|g| g.keys.iter().filter(|k| *k != LABEL).cloned())
        .collect();
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for dim in &dims {
        combos = combos
            .iter()
            .flat_map(|c| {
                dim.iter()
                    .map(move |alt| c.iter().cloned().chain(alt.iter().cloned()).collect())
            })
            .collect();
    }
    combos
        .into_iter()
        .enumerate()
        .map(|(index, mut varied)| {
            let mut settings = spec.base.clone();
            for (k, v) in varied.iter().filter(|(k, _)| k != LABEL) {
                settings.insert(k.clone(), v.clone());
            }
            // The label leads, so plots use it as the x axis.
            varied.sort_by_key(|(k, _)| k != LABEL);
            let labelled_keys = labelled.clone();
            Point {
                index,
                settings,
                varied,
                labelled_keys,
            }
        })
        .collect()
}

/// Fisher–Yates with the given generator.
fn shuffle<T>(v: &mut [T], rng: &mut SplitMix64) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i + 1);
        v.swap(i, j);
    }
}

/// The seed of the trials' order.
const ORDER_SALT: u64 = 0x5EED_0F0D_E12A_1500;

/// Every trial, in the order they run.
pub fn trials(spec: &Spec, points: &[Point]) -> Vec<Trial> {
    if spec.auto.is_some() {
        return rounds(spec, points);
    }
    let mut seeds = SplitMix64::new(spec.seed);
    // Common seeds: one per repetition, shared by every point.
    let common: Vec<u64> = match spec.seeds {
        Seeds::Common => (0..spec.repetitions).map(|_| seeds.next_u64()).collect(),
        Seeds::PerTrial => Vec::new(),
    };
    let mut measured: Vec<Trial> = Vec::new();
    for p in points {
        for rep in 1..=spec.repetitions {
            let seed = match spec.seeds {
                Seeds::Common => common[rep as usize - 1],
                Seeds::PerTrial => seeds.next_u64(),
            };
            measured.push(Trial {
                id: format!("p{:03}-r{rep:02}", p.index),
                point: p.index,
                rep: Some(rep),
                warmup: false,
                seed,
            });
        }
    }
    let warmup_seeds: Vec<u64> = points.iter().map(|_| seeds.next_u64()).collect();
    if spec.order == Order::Random {
        shuffle(&mut measured, &mut SplitMix64::new(spec.seed ^ ORDER_SALT));
    }
    with_warmups(spec, points.len(), measured, &warmup_seeds)
}

/// With `repetitions = "auto"`: round r holds trial r of every point, the rounds in turn, each
/// in an order of its own (shuffled with the spec's seed unless sequential), up to the
/// maximum. The run passes over the trials of a point the stopping rule has closed, so the
/// points still open meet in a random order each round too (a uniform shuffle keeps being
/// one when some of its items are skipped). Seeds are drawn per round and point whatever the
/// outcome, so no trial's seed depends on another point's results.
fn rounds(spec: &Spec, points: &[Point]) -> Vec<Trial> {
    let mut seeds = SplitMix64::new(spec.seed ^ 0xA070_0000_0000_0001);
    let mut order = SplitMix64::new(spec.seed ^ ORDER_SALT);
    let warmup_seeds: Vec<u64> = points.iter().map(|_| seeds.next_u64()).collect();
    let mut measured = Vec::with_capacity(points.len() * spec.repetitions as usize);
    for rep in 1..=spec.repetitions {
        // Common random numbers: the round's one seed, shared by every point.
        let common = seeds.next_u64();
        let mut round: Vec<Trial> = points
            .iter()
            .map(|p| Trial {
                id: format!("p{:03}-r{rep:02}", p.index),
                point: p.index,
                rep: Some(rep),
                warmup: false,
                seed: match spec.seeds {
                    Seeds::Common => common,
                    Seeds::PerTrial => seeds.next_u64(),
                },
            })
            .collect();
        if spec.order == Order::Random {
            shuffle(&mut round, &mut order);
        }
        measured.extend(round);
    }
    with_warmups(spec, points.len(), measured, &warmup_seeds)
}

/// The measured trials with each point's warm-up (when the spec has them) right before its
/// first.
fn with_warmups(spec: &Spec, points: usize, measured: Vec<Trial>, seeds: &[u64]) -> Vec<Trial> {
    if !spec.warmup {
        return measured;
    }
    // The warm-up of a point runs right before its first measured trial.
    let mut out = Vec::with_capacity(measured.len() + points);
    let mut warmed = vec![false; points];
    for t in measured {
        if !warmed[t.point] {
            warmed[t.point] = true;
            out.push(Trial {
                id: format!("p{:03}-warmup", t.point),
                point: t.point,
                rep: None,
                warmup: true,
                seed: seeds[t.point],
            });
        }
        out.push(t);
    }
    out
}

/// How long a smoke trial's workload runs at most.
pub const SMOKE_DURATION: Dur = Dur::from_millis(1000);

/// Smoke mode, a quick check that a spec still runs: at most `max_points` of its points,
/// chosen evenly (the first and the last among them), renumbered; one repetition each, no
/// warm-up, in spec order, and every workload capped at [`SMOKE_DURATION`].
pub fn smoke(spec: &Spec, max_points: usize) -> (Vec<Point>, Vec<Trial>) {
    let all = points(spec);
    let n = all.len();
    let keep = max_points.clamp(1, n.max(1)).min(n);
    let chosen: Vec<usize> = if keep <= 1 {
        (0..keep).collect()
    } else {
        let mut v: Vec<usize> = (0..keep)
            .map(|i| ((i * (n - 1)) as f64 / (keep - 1) as f64).round() as usize)
            .collect();
        v.dedup();
        v
    };
    let picked: Vec<Point> = chosen
        .into_iter()
        .enumerate()
        .map(|(index, i)| {
            let mut p = all[i].clone();
            p.index = index;
            let capped = p
                .settings
                .get("workload.duration")
                .and_then(|d| d.parse::<Dur>().ok())
                .map_or(SMOKE_DURATION, |d| d.min(SMOKE_DURATION));
            p.settings.insert(
                "workload.duration".into(),
                format!("{}ms", capped.nanos() / 1_000_000),
            );
            p
        })
        .collect();
    let quick = Spec {
        repetitions: 1,
        auto: None,
        warmup: false,
        order: Order::Sequential,
        ..spec.clone()
    };
    let trials = trials(&quick, &picked);
    (picked, trials)
}

/// What `lab run --check` found: the plan of a valid spec, nothing run.
#[derive(Serialize, JsonSchema)]
pub struct CheckedPlan {
    /// The experiment's name.
    pub name: String,
    /// Each sweep point, in spec order.
    pub points: Vec<PlannedPoint>,
    /// Measured trials per point (with `auto`, the most a point may take).
    pub repetitions: u32,
    /// `repetitions = "auto"`: the stopping rule (trials per point until the 95% CI
    /// half-width is within `precision` of the mean, from `min` to `max`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<Auto>,
    /// Whether each point's first trial is an extra, unmeasured warm-up.
    pub warmup: bool,
    /// Trials in all, warm-ups included (with `auto`, at most).
    pub trials: usize,
    /// "random" (shuffled with the spec's seed) or "sequential".
    pub order: String,
    /// The results directory a run writes.
    pub out: String,
    /// It holds an earlier run of this command, which a run resumes.
    pub resumes: bool,
    /// Name of the labs the trials use.
    pub lab: String,
}

/// One sweep point of a plan.
#[derive(Serialize, JsonSchema)]
pub struct PlannedPoint {
    /// The point's number, from 0.
    pub index: usize,
    /// The settings that vary, as "link.delay=5ms, client.mtu=9000" ("base" when none do).
    pub label: String,
}

impl std::fmt::Display for CheckedPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (reps, most) = match &self.auto {
            Some(a) => (
                format!(
                    "{} to {} repetitions (until the 95% CI is within {} of the mean)",
                    a.min,
                    a.max,
                    crate::stopping::percent(a.precision)
                ),
                "at most ",
            ),
            None => (format!("{} repetition(s)", self.repetitions), ""),
        };
        writeln!(
            f,
            "{}: {} point(s) × {reps}{} = {most}{} trials, order {}",
            self.name,
            self.points.len(),
            if self.warmup { " + 1 warm-up" } else { "" },
            self.trials,
            self.order
        )?;
        for p in &self.points {
            writeln!(f, "  p{:03}  {}", p.index, p.label)?;
        }
        writeln!(
            f,
            "results into {}{}, on labs named {}",
            self.out,
            if self.resumes {
                " (holds an earlier run: a run resumes it)"
            } else {
                ""
            },
            self.lab
        )
    }
}

impl CheckedPlan {
    /// The plan of `spec` over `points` (its whole plan, or the smoke run's), writing into
    /// `out` (`resumes` when that holds an earlier run) on labs named `lab`.
    pub fn new(
        spec: &Spec,
        points: &[Point],
        trials: usize,
        out: String,
        resumes: bool,
        lab: &str,
    ) -> CheckedPlan {
        CheckedPlan {
            name: spec.name.clone(),
            points: points
                .iter()
                .map(|p| PlannedPoint {
                    index: p.index,
                    label: p.label(),
                })
                .collect(),
            repetitions: spec.repetitions,
            auto: spec.auto,
            warmup: spec.warmup,
            trials,
            order: format!("{:?}", spec.order).to_lowercase(),
            out,
            resumes,
            lab: lab.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::tests::FakeCaps;
    use crate::spec::parse;

    fn spec(extra: &str) -> Spec {
        spec_with("3", extra)
    }

    fn spec_with(repetitions: &str, extra: &str) -> Spec {
        let text = format!(
            "name = \"t\"\nseed = 3\nrepetitions = {repetitions}\n{extra}\n[link]\nrate = \"100mbit\"\n[sweep]\n\"link.delay\" = [\"5ms\", \"50ms\"]\n\"client.mtu\" = [1500, 9000, 4000]\n[[paired]]\n\"link.rate\" = [\"1gbit\", \"10gbit\"]\n\"client.txqueuelen\" = [1000, 8000]\n"
        );
        parse(&text, &FakeCaps).unwrap()
    }

    #[test]
    fn a_sweep_at_the_point_limit_is_accepted_and_planned_in_full() {
        // (the counts over the limit are refused in spec.rs, before expansion)
        let values = (0..10_000)
            .map(|i| format!("\"{}ms\"", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let text =
            format!("name = \"ok\"\nrepetitions = 9\n[sweep]\n\"link.delay\" = [{values}]\n");
        let spec = parse(&text, &FakeCaps).unwrap();
        assert_eq!(points(&spec).len(), 10_000);
    }

    #[test]
    fn cross_product_with_paired_rows() {
        let s = spec("");
        let ps = points(&s);
        assert_eq!(ps.len(), 2 * 3 * 2);
        // Paired values always go together and override the base.
        for p in &ps {
            let pair = (
                p.settings["link.rate"].as_str(),
                p.settings["client.txqueuelen"].as_str(),
            );
            assert!(
                pair == ("1gbit", "1000") || pair == ("10gbit", "8000"),
                "{pair:?}"
            );
        }
        let labels: std::collections::BTreeSet<String> = ps.iter().map(Point::label).collect();
        assert_eq!(labels.len(), ps.len(), "every point is distinct");
        assert_eq!(
            ps[0].label(),
            "link.delay=5ms, client.mtu=1500, link.rate=1gbit, client.txqueuelen=1000"
        );
    }

    #[test]
    fn random_order_is_reproducible_and_warmups_come_first() {
        let s = spec("");
        let ps = points(&s);
        let a = trials(&s, &ps);
        assert_eq!(a, trials(&s, &ps), "same seed, same order and seeds");
        assert_eq!(a.len(), ps.len() * (3 + 1));
        let mut seen = vec![false; ps.len()];
        for t in &a {
            if t.warmup {
                assert!(
                    !seen[t.point],
                    "one warm-up per point, before its measured trials"
                );
            } else {
                assert!(
                    seen[t.point],
                    "a measured trial ran before its warm-up: {}",
                    t.id
                );
            }
            seen[t.point] = true;
        }
        // Shuffled: not all of a point's trials are adjacent.
        let sequential: Vec<usize> = a.iter().map(|t| t.point).collect();
        let mut sorted = sequential.clone();
        sorted.sort();
        assert_ne!(sequential, sorted);
        // A different seed gives a different order; ids and seeds are unique.
        let mut s2 = s.clone();
        s2.seed = 4;
        assert_ne!(trials(&s2, &ps), a);
        let ids: std::collections::BTreeSet<&str> = a.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids.len(), a.len());
    }

    #[test]
    fn common_seeds_are_shared_by_a_repetition() {
        let s = spec("seeds = \"common\"");
        let ps = points(&s);
        let all = trials(&s, &ps);
        let measured: Vec<&Trial> = all.iter().filter(|t| !t.warmup).collect();
        for t in &measured {
            let first = measured
                .iter()
                .find(|u| u.rep == t.rep)
                .expect("its own repetition");
            assert_eq!(t.seed, first.seed, "{} and {} differ", t.id, first.id);
        }
        let per_rep: std::collections::BTreeSet<u64> = measured.iter().map(|t| t.seed).collect();
        assert_eq!(per_rep.len(), 3, "one seed per repetition");
        // Per-trial (the default) gives every measured trial its own.
        let d = spec("");
        let own: std::collections::BTreeSet<u64> = trials(&d, &ps)
            .iter()
            .filter(|t| !t.warmup)
            .map(|t| t.seed)
            .collect();
        assert_eq!(own.len(), ps.len() * 3);
    }

    #[test]
    fn labels_name_paired_rows() {
        let s = parse(
            "name = \"t\"\n[[paired]]\nlabel = [\"untuned\", \"tuned\"]\n\"client.mtu\" = [576, 1500]\n[sweep]\n\"link.delay\" = [\"1ms\", \"5ms\"]\n",
            &FakeCaps,
        )
        .unwrap();
        let ps = points(&s);
        assert_eq!(ps[0].label(), "untuned, link.delay=1ms");
        assert_eq!(
            ps[0].varied[0],
            ("label".to_string(), "untuned".to_string())
        );
        assert!(!ps[0].settings.contains_key("label"));
        assert_eq!(ps[0].settings["client.mtu"], "576");
        // Two labelled groups: both labels name the point.
        let s = parse(
            "name = \"t\"\n[[paired]]\nlabel = [\"a\", \"b\"]\n\"client.mtu\" = [576, 1500]\n[[paired]]\nlabel = [\"x\", \"y\"]\n\"link.delay\" = [\"1ms\", \"5ms\"]\n",
            &FakeCaps,
        )
        .unwrap();
        let labels: Vec<String> = points(&s).iter().map(Point::label).collect();
        assert_eq!(labels, ["a, x", "a, y", "b, x", "b, y"]);
    }

    #[test]
    fn sequential_order_without_warmup() {
        let s = spec("order = \"sequential\"\nwarmup = false");
        let ps = points(&s);
        let t = trials(&s, &ps);
        assert_eq!(t.len(), ps.len() * 3);
        assert!(t.windows(2).all(|w| w[0].point <= w[1].point));
        assert!(t.iter().all(|t| !t.warmup));
    }

    #[test]
    fn smoke_keeps_evenly_chosen_points_one_short_trial_each() {
        let s = spec("[workload]\nduration = \"30s\"");
        let all = points(&s);
        let (ps, ts) = smoke(&s, 4);
        assert_eq!(ps.len(), 4);
        // The first and the last point are among them, renumbered in order.
        assert_eq!(ps[0].label(), all[0].label());
        assert_eq!(ps[3].label(), all[all.len() - 1].label());
        assert_eq!(ps.iter().map(|p| p.index).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(ts.len(), 4, "one trial per point, no warm-up");
        assert!(ts.iter().all(|t| !t.warmup && t.rep == Some(1)));
        assert!(ts.windows(2).all(|w| w[0].point < w[1].point));
        for p in &ps {
            assert_eq!(p.settings["workload.duration"], "1000ms");
        }
        // A shorter workload is kept; a spec smaller than the limit keeps every point.
        let (ps, _) = smoke(&s, 100);
        assert_eq!(ps.len(), all.len());
    }

    #[test]
    fn auto_plans_rounds_each_in_an_order_of_its_own() {
        let s = spec_with("\"auto\"", "min_repetitions = 2\nmax_repetitions = 4");
        let ps = points(&s);
        let all = trials(&s, &ps);
        assert_eq!(all, trials(&s, &ps), "reproducible");
        assert_eq!(
            all.len(),
            ps.len() * (4 + 1),
            "every round up to the maximum"
        );
        let measured: Vec<&Trial> = all.iter().filter(|t| !t.warmup).collect();
        let mut orders = Vec::new();
        for (r, round) in measured.chunks(ps.len()).enumerate() {
            assert!(
                round.iter().all(|t| t.rep == Some(r as u32 + 1)),
                "rounds in turn"
            );
            let mut pts: Vec<usize> = round.iter().map(|t| t.point).collect();
            orders.push(pts.clone());
            pts.sort();
            assert_eq!(
                pts,
                (0..ps.len()).collect::<Vec<_>>(),
                "each point once a round"
            );
        }
        assert!(
            orders.windows(2).all(|w| w[0] != w[1]),
            "a new order each round"
        );
        // Warm-ups come right before a point's first trial, all in the first round.
        let first_round_end = all.iter().position(|t| t.rep == Some(2)).unwrap();
        assert_eq!(
            all[..first_round_end].iter().filter(|t| t.warmup).count(),
            ps.len()
        );
        let seeds: std::collections::BTreeSet<u64> = measured.iter().map(|t| t.seed).collect();
        assert_eq!(seeds.len(), measured.len(), "per-trial seeds");
        // Common seeds: one per round.
        let c = spec_with("\"auto\"", "max_repetitions = 5\nseeds = \"common\"");
        let per_round: std::collections::BTreeSet<(u32, u64)> = trials(&c, &ps)
            .iter()
            .filter_map(|t| Some((t.rep?, t.seed)))
            .collect();
        assert_eq!(per_round.len(), 5);
        // Sequential: points in order within each round.
        let q = spec_with("\"auto\"", "order = \"sequential\"\nwarmup = false");
        let t = trials(&q, &ps);
        assert!(t[..ps.len()].windows(2).all(|w| w[0].point < w[1].point));
        assert_eq!(t.len(), ps.len() * 20);
    }
}
