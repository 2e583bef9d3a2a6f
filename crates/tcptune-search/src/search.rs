//! The search as a state machine fed `(now, event)` and answering with the next action: write
//! these values, run a test, or done. It never touches the host or the network, so the whole
//! search runs in unit tests on a virtual clock against a model of a path.
//!
//! Order: a baseline test; then for each hypothesis an interleaved trial (A B A B …, so drift
//! on the path hits both arms) judged after `min_pairs` pairs and each pair after, up to
//! `max_pairs`; guardrails on every B test (memory) and at every look (loaded RTT, as
//! throughput is judged: `guardrail.rs`); keep or roll back with a
//! reason; new hypotheses from the latest diagnosis until none is left; then shrink each kept
//! buffer while the result stays within `shrink_tolerance` of the best.

use tcptune_model::kernel::CongestionControl;

use crate::duration::{shape, TestShape};
use crate::hypothesis::{
    buffer_max, hypotheses, with_buffer_max, Config, Hypothesis, Kind, NotTried, Observation, Role,
    Settings, CC, RMEM, WMEM,
};
use crate::outcome::{Outcome, Phase, Report, Step};
use crate::stats::{compare_at, mean, shift, Arm, Looks, Verdict};

use crate::guardrail;
use crate::shrink::{self, Shrink, Undo, BRACKET};

/// What the driver reports.
#[derive(Debug, Clone)]
pub enum Event {
    /// The search begins.
    Start,
    /// The values of the last `Write` are in effect.
    Written,
    /// The test asked for ran; its result.
    Test(Box<Observation>),
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Write these sysctl values (a hypothesis, or values put back), then report `Written`.
    Write {
        /// Key and value, as the kernel takes them.
        values: Vec<(String, String)>,
    },
    /// Run one test with the settings in effect (for `Search::test_shape`'s time), then
    /// report `Test`.
    RunTest {
        /// The arm the test belongs to.
        arm: ArmKind,
    },
    /// Finished: the settings in effect are the report's final state.
    Done,
}

/// Which arm a test belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArmKind {
    /// The path as it is, before any trial.
    Baseline,
    /// The settings kept so far.
    A,
    /// The change under trial.
    B,
}

/// What to do once a write is in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Run(ArmKind),
    Hypothesis,
    Finish,
}

struct Trial {
    phase: Phase,
    hyp: Hypothesis,
    /// The values B replaces (A's), for putting back.
    was: Vec<(String, String)>,
    a: Vec<f64>,
    b: Vec<f64>,
    a_rtt: Vec<f64>,
    b_rtt: Vec<f64>,
    b_mem: Option<u64>,
    last_a: Option<Observation>,
    last_b: Option<Observation>,
    evidence: String,
}

/// The search's state.
pub struct Search {
    cfg: Config,
    original: Settings,
    current: Settings,
    b_in_effect: bool,
    start_s: Option<f64>,
    now_s: f64,
    tests: usize,
    last_obs: Option<Observation>,
    baseline_bps: Option<f64>,
    best_bps: f64,
    /// Every test run with the settings kept now (the baseline or the kept change's B tests,
    /// and the A tests since): until a shrink is kept, what a shrink must stay within the
    /// tolerance of (then `unshrunk_rates`). Their mean, not the best arm's: the largest of
    /// several noisy means is biased up.
    kept_rates: Vec<f64>,
    /// The tests of the setting the shrinking started from, frozen when the first shrink is
    /// kept: every shrink stays within the tolerance of that best, not of the last shrink
    /// kept (whose own mean may already sit up to the tolerance lower: on the lossy path three
    /// kept shrinks slid from 47.0 to 43.1 Mbit/s, each within 5% of the one before).
    unshrunk_rates: Option<Vec<f64>>,
    tried: Vec<Vec<(String, String)>>,
    /// The last baseline test, until the first trial begins: that trial's first A test when it
    /// tries a change (the settings in effect, run just before it, as long as the trials'
    /// tests are as long).
    first_a: Option<Observation>,
    trial: Option<Trial>,
    next: Next,
    steps: Vec<Step>,
    /// The kind of each step's change, beside `steps`.
    kinds: Vec<Kind>,
    not_tried: Vec<NotTried>,
    shrink_queue: Vec<&'static str>,
    shrink: Option<Shrink>,
    /// The shrinks of this buffer kept so far, the last on top.
    undo: Vec<Undo>,
    /// Whether a test of the last kept shrink since fell short while its buffer bound.
    slid: bool,
    shape: TestShape,
    stopped: Option<String>,
    done: bool,
}

impl Search {
    /// A search from the settings in effect now (read from the host, keys in
    /// `hypothesis::KEYS`).
    pub fn new(cfg: Config, settings: Settings) -> Search {
        Search {
            shape: TestShape::asked(cfg_time(&cfg)),
            cfg,
            original: settings.clone(),
            current: settings,
            b_in_effect: false,
            start_s: None,
            now_s: 0.0,
            tests: 0,
            last_obs: None,
            baseline_bps: None,
            best_bps: 0.0,
            kept_rates: Vec::new(),
            unshrunk_rates: None,
            tried: Vec::new(),
            first_a: None,
            trial: None,
            next: Next::Run(ArmKind::Baseline),
            steps: Vec::new(),
            kinds: Vec::new(),
            not_tried: Vec::new(),
            shrink_queue: Vec::new(),
            shrink: None,
            undo: Vec::new(),
            slid: false,
            stopped: None,
            done: false,
        }
    }

    /// The next action, given what just happened at `now_s` (seconds on any clock).
    pub fn step(&mut self, now_s: f64, event: Event) -> Action {
        self.now_s = now_s;
        if self.done {
            return Action::Done;
        }
        match event {
            Event::Start => {
                self.start_s = Some(now_s);
                self.run(ArmKind::Baseline)
            }
            Event::Written => match self.next {
                Next::Run(arm) => self.run(arm),
                Next::Hypothesis => self.next_hypothesis(),
                Next::Finish => self.finish_now(),
            },
            Event::Test(obs) => self.on_test(*obs),
        }
    }

    /// The hypotheses the search would try first and those it will not (for `--dry-run`).
    pub fn plan(&self, obs: &Observation) -> (Vec<Hypothesis>, Vec<NotTried>) {
        hypotheses(obs, &self.current, &self.cfg)
    }

    /// How long the next test runs: as asked for the baseline, then long enough for the path's
    /// slow start (`duration::shape`).
    pub fn test_shape(&self) -> &TestShape {
        &self.shape
    }

    /// The settings the search has kept so far (what must stay in effect if it stops now).
    pub fn current(&self) -> &Settings {
        &self.current
    }

    /// The report: steps, the final state and its drop-in.
    pub fn report(&self) -> Report {
        Report::new(
            &self.original,
            &self.current,
            self.steps.clone(),
            self.not_tried.clone(),
            self.baseline_bps,
            self.best_bps,
            self.tests,
            self.now_s - self.start_s.unwrap_or(self.now_s),
            self.stopped
                .clone()
                .unwrap_or_else(|| "no hypothesis left".into()),
            self.shape.clone(),
        )
    }

    fn budget_left(&self) -> Option<String> {
        if self.tests >= self.cfg.max_tests {
            return Some(format!(
                "the budget of {} tests is spent",
                self.cfg.max_tests
            ));
        }
        let elapsed = self.now_s - self.start_s.unwrap_or(self.now_s);
        if elapsed + self.shape.total_s() > self.cfg.max_time_s {
            return Some(format!(
                "the time budget of {:.0} s is spent",
                self.cfg.max_time_s
            ));
        }
        None
    }

    fn run(&mut self, arm: ArmKind) -> Action {
        if let Some(why) = self.budget_left() {
            return self.stop(why);
        }
        self.tests += 1;
        Action::RunTest { arm }
    }

    fn write(&mut self, values: Vec<(String, String)>, next: Next) -> Action {
        self.next = next;
        Action::Write { values }
    }

    /// Stops for `why`: a trial under way ends rolled back and the kept settings are put back.
    fn stop(&mut self, why: String) -> Action {
        self.stopped = Some(why.clone());
        if let Some(t) = self.trial.take() {
            self.record(&t, Outcome::RolledBack, format!("not decided: {why}"));
        }
        if self.b_in_effect {
            self.b_in_effect = false;
            let back = self.put_back();
            return self.write(back, Next::Finish);
        }
        self.finish_now()
    }

    fn finish_now(&mut self) -> Action {
        self.done = true;
        Action::Done
    }

    /// The kept values of every key the last trial touched.
    fn put_back(&self) -> Vec<(String, String)> {
        self.tried
            .last()
            .map(|c| {
                c.iter()
                    .filter_map(|(k, _)| self.current.get(k).map(|v| (k.clone(), v.clone())))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn on_test(&mut self, obs: Observation) -> Action {
        let Some(t) = self.trial.as_mut() else {
            return self.on_baseline(obs);
        };
        if self.b_in_effect {
            t.b.push(obs.rate_bps);
            t.b_rtt.extend(obs.srtt_s);
            t.b_mem = t.b_mem.max(obs.memory_bytes);
            t.last_b = Some(obs);
            if let Some((outcome, why)) = self.judge() {
                return self.decide(outcome, why);
            }
            self.b_in_effect = false;
            let back = self.put_back();
            self.write(back, Next::Run(ArmKind::A))
        } else {
            t.a.push(obs.rate_bps);
            self.kept_rates.push(obs.rate_bps);
            t.a_rtt.extend(obs.srtt_s);
            let values = t.hyp.changes.clone();
            self.note_kept_test(&obs);
            if let Some(t) = self.trial.as_mut() {
                t.last_a = Some(obs);
            }
            self.b_in_effect = true;
            self.write(values, Next::Run(ArmKind::B))
        }
    }

    /// A baseline test: the settings as they are. A search that would end on its first test
    /// (nothing the diagnosis points to and no buffer to shrink: a flow at the path's capacity,
    /// say) runs a second and goes on from that one, the baseline being their mean: one short
    /// test can land well above its setting's mean (1 Gbit/s × 16 ms: 878.8 Mbit/s, "at the
    /// path's capacity", from buffers whose 4 s tests average 782 in the sweep).
    fn on_baseline(&mut self, mut obs: Observation) -> Action {
        self.kept_rates.push(obs.rate_bps);
        let as_run = obs.clone();
        let m = mean(&self.kept_rates);
        // The hypotheses see the baseline's mean, for the reason a second test runs.
        obs.rate_bps = m;
        self.baseline_bps = Some(m);
        self.best_bps = m;
        let first = self.kept_rates.len() == 1;
        if first {
            self.shape = self.shape_for(&obs);
        }
        let asked = TestShape::asked(cfg_time(&self.cfg));
        let as_long = (self.shape.time_s, self.shape.omit_s) == (asked.time_s, asked.omit_s);
        self.first_a = as_long.then_some(as_run);
        let nothing_to_try = hypotheses(&obs, &self.current, &self.cfg).0.is_empty();
        self.last_obs = Some(obs);
        let key = self.role_key();
        let shrinks = self
            .current
            .get(key)
            .and_then(|v| buffer_max(v))
            .is_some_and(|max| max as f64 > BRACKET * self.shrink_floor(key) as f64);
        if first && !self.cfg.aa_trial && nothing_to_try && !shrinks {
            return self.run(ArmKind::Baseline);
        }
        self.next_hypothesis()
    }

    /// The buffer of the end this host is.
    fn role_key(&self) -> &'static str {
        match self.cfg.role {
            Role::Receiver => RMEM,
            Role::Sender => WMEM,
        }
    }

    /// The verdict after a B test, if there is one yet.
    fn judge(&self) -> Option<(Outcome, String)> {
        let t = self.trial.as_ref()?;
        let cfg = &self.cfg;
        let (ma, mb) = (mean(&t.a), mean(&t.b));
        if let Some(m) = t.b_mem.filter(|m| *m > cfg.max_memory_bytes) {
            return Some((
                Outcome::RolledBack,
                format!(
                    "guardrail: buffers held {m} B, past the {} B limit",
                    cfg.max_memory_bytes
                ),
            ));
        }
        let pairs = t.b.len();
        let enough = match t.phase {
            Phase::Shrink => cfg.shrink_pairs,
            Phase::Change => cfg.min_pairs,
        };
        if pairs < enough {
            return None;
        }
        if t.phase == Phase::Shrink {
            let key = t.hyp.changes.first().map_or(RMEM, |(k, _)| k.as_str());
            let reference = self.unshrunk_rates.as_ref().unwrap_or(&self.kept_rates);
            let (outcome, why) = shrink::judge(cfg, key, t.last_b.as_ref(), mb, reference);
            if outcome == Outcome::Kept && pairs == cfg.shrink_pairs && self.near_its_end(t) {
                return None;
            }
            return Some((outcome, why));
        }
        // 5% over the looks a trial may take (`compare_at`); kept only when the gain clears the
        // smallest gain worth keeping at 95%.
        let gain = mb / ma - 1.0;
        let looks = Looks {
            first: cfg.min_pairs,
            last: cfg.max_pairs,
            extended: (cfg.extra_pairs > 0).then_some(cfg.max_pairs + cfg.extra_pairs),
        };
        // The loaded-RTT guardrail judges change trials only: a smaller buffer cannot queue
        // more, so on a shrink it would only catch the noise of sub-millisecond RTTs (seen on
        // the LAN path under load).
        let verdict = compare_at(&t.a, &t.b, 0.05, looks, cfg.min_gain);
        let keeping = matches!(verdict, Verdict::Better | Verdict::BetterByEstimate);
        if let Some(why) =
            guardrail::rtt_past_the_limit(cfg, &t.a_rtt, &t.b_rtt, looks, keeping, gain)
        {
            return Some((Outcome::RolledBack, why));
        }
        let s = shift(&t.a, &t.b);
        match verdict {
            Verdict::Better => Some((
                Outcome::Kept,
                format!(
                    "{:+.1}% throughput, above +{:.0}% at 95%",
                    gain * 100.0,
                    cfg.min_gain * 100.0
                ),
            )),
            Verdict::BetterByEstimate => Some((
                Outcome::Kept,
                format!(
                    "{:+.1}% throughput: better at 95% (B ranks above A), and the means' gain is above +{:.0}%",
                    gain * 100.0,
                    cfg.min_gain * 100.0
                ),
            )),
            Verdict::Worse => Some((
                Outcome::RolledBack,
                format!(
                    "{:+.1}% throughput: worse, significant at 95%",
                    gain * 100.0
                ),
            )),
            Verdict::NoDifference if pairs >= cfg.max_pairs => {
                let end = looks.extended.unwrap_or(cfg.max_pairs);
                // Promising: the means' gain is one worth keeping, were the ranks to agree.
                let promising = gain >= cfg.min_gain;
                if pairs < end && promising && self.affords(2 * (end - pairs)) {
                    return None;
                }
                let why = format!(
                    "no gain above +{:.0}% shown after {pairs} pairs ({:+.1}%)",
                    cfg.min_gain * 100.0,
                    gain * 100.0
                );
                Some((
                    Outcome::RolledBack,
                    if pairs < end && promising {
                        format!(
                            "{why}; the budget had no room for the {} more pairs of a promising trial's second chance",
                            end - pairs
                        )
                    } else {
                        why
                    },
                ))
            }
            // Futility: B ranks at or below A (its shift is no gain), so more pairs would
            // rarely show one, and their tests are better spent on the next hypothesis. Stopping
            // for futility only ever calls no difference: the level is not spent.
            Verdict::NoDifference if s <= 0.0 => Some((
                Outcome::RolledBack,
                format!(
                    "no gain after {pairs} pairs ({:+.1}%; B over A {:+.1}% at the median \
                     pair): stopped early",
                    gain * 100.0,
                    s * 100.0
                ),
            )),
            Verdict::NoDifference => None,
        }
    }

    /// Whether the budget has room for `tests` more tests.
    fn affords(&self, tests: usize) -> bool {
        let elapsed = self.now_s - self.start_s.unwrap_or(self.now_s);
        self.tests + tests <= self.cfg.max_tests
            && elapsed + tests as f64 * self.shape.total_s() <= self.cfg.max_time_s
    }

    fn record(&mut self, t: &Trial, outcome: Outcome, why: String) {
        let rtt = |v: &[f64]| (!v.is_empty()).then(|| mean(v) * 1e3);
        self.kinds.push(t.hyp.kind);
        self.steps.push(Step {
            phase: t.phase,
            changes: t.hyp.changes.clone(),
            was: t.was.clone(),
            evidence: t.evidence.clone(),
            hypothesis: t.hyp.why.clone(),
            a: Arm::of(&t.a),
            b: Arm::of(&t.b),
            a_rtt_ms: rtt(&t.a_rtt),
            b_rtt_ms: rtt(&t.b_rtt),
            tests: t.a.len() + t.b.len(),
            outcome,
            why,
            memory_bytes: t.hyp.memory_bytes,
        });
    }

    fn decide(&mut self, outcome: Outcome, why: String) -> Action {
        let Some(t) = self.trial.take() else {
            return self.finish_now();
        };
        self.record(&t, outcome, why);
        if outcome == Outcome::Kept {
            for (k, v) in &t.hyp.changes {
                self.current.insert(k.clone(), v.clone());
            }
            self.best_bps = self.best_bps.max(mean(&t.b));
            let before = self.kept_rates.clone();
            if t.phase == Phase::Shrink && self.unshrunk_rates.is_none() {
                self.unshrunk_rates = Some(std::mem::take(&mut self.kept_rates));
            }
            self.kept_rates = t.b.clone();
            if t.phase == Phase::Shrink {
                self.on_shrink_kept(&t, before);
            }
            self.last_obs = t.last_b.clone();
            if let Some(sh) = self.shrink.as_mut() {
                sh.good = buffer_max(&self.current[sh.key]).unwrap_or(sh.good);
                sh.first = false;
            }
            self.b_in_effect = false;
            return self.next_hypothesis();
        }
        if t.phase == Phase::Shrink {
            if let Some(sh) = self.shrink.as_mut() {
                sh.bad = t
                    .hyp
                    .changes
                    .first()
                    .and_then(|(_, v)| buffer_max(v))
                    .unwrap_or(sh.bad);
                sh.first = false;
            }
        }
        self.last_obs = t.last_a.clone().or(self.last_obs.take());
        self.b_in_effect = false;
        let back = self.put_back();
        self.write(back, Next::Hypothesis)
    }

    fn begin(&mut self, phase: Phase, hyp: Hypothesis) -> Action {
        let was = hyp
            .changes
            .iter()
            .map(|(k, _)| (k.clone(), self.current.get(k).cloned().unwrap_or_default()))
            .collect();
        self.tried.push(hyp.changes.clone());
        let evidence = self
            .last_obs
            .as_ref()
            .map(|o| o.verdict.clone())
            .unwrap_or_default();
        self.trial = Some(Trial {
            phase,
            hyp,
            was,
            a: vec![],
            b: vec![],
            a_rtt: vec![],
            b_rtt: vec![],
            b_mem: None,
            last_a: None,
            last_b: None,
            evidence,
        });
        // Not a shrink's: its reference is every test at the kept setting, and a lossy path's
        // collapses need the extra test (two collapsed tests made a 65 Mbit/s reference that
        // every smaller buffer held).
        let first_a = self.first_a.take().filter(|_| phase == Phase::Change);
        if let (Some(a), Some(t)) = (first_a, self.trial.as_mut()) {
            t.a.push(a.rate_bps);
            t.a_rtt.extend(a.srtt_s);
            t.last_a = Some(a);
            self.b_in_effect = true;
            let values = t.hyp.changes.clone();
            return self.write(values, Next::Run(ArmKind::B));
        }
        self.run(ArmKind::A)
    }

    fn next_hypothesis(&mut self) -> Action {
        if let Some(why) = self.budget_left() {
            return self.stop(why);
        }
        if self.cfg.aa_trial {
            return self.aa_trial();
        }
        if self.shrink.is_none() && self.shrink_queue.is_empty() {
            if let Some(obs) = &self.last_obs {
                let (hyps, not) = hypotheses(obs, &self.current, &self.cfg);
                for n in not {
                    if !self.not_tried.contains(&n) {
                        self.not_tried.push(n);
                    }
                }
                // A kind of change rolled back is not tried again at another size: without the
                // path's rate the next step would be sized from the same noisy measurement.
                let failed = |h: &Hypothesis| {
                    self.steps.iter().zip(&self.kinds).any(|(s, k)| {
                        s.phase == Phase::Change && s.outcome == Outcome::RolledBack && *k == h.kind
                    })
                };
                let next = hyps
                    .into_iter()
                    .find(|h| !self.tried.contains(&h.changes) && !failed(h));
                if let Some(h) = next {
                    return self.begin(Phase::Change, h);
                }
            }
            // No hypothesis left: shrink this end's buffer and any other one kept.
            let role_key = self.role_key();
            self.shrink_queue = [RMEM, WMEM]
                .into_iter()
                .filter(|k| *k == role_key || self.current.get(*k) != self.original.get(*k))
                .filter(|k| self.current.contains_key(*k))
                .collect();
            if self.shrink_queue.is_empty() {
                return self.finish_now();
            }
        }
        self.next_shrink()
    }

    /// The smallest maximum of `key` worth trying (`shrink::floor`), for the best test at the
    /// kept setting, not the mean: one collapse in a lossy path's two confirming tests must not
    /// read as a flow short of the path.
    fn shrink_floor(&self, key: &str) -> u64 {
        let rate = self.best_kept_rate();
        shrink::floor(key, self.last_obs.as_ref(), rate, &self.current, &self.cfg)
    }

    /// The best test at the kept setting (or the best mean): what a shrink sizes for.
    fn best_kept_rate(&self) -> f64 {
        self.kept_rates
            .iter()
            .copied()
            .fold(self.best_bps, f64::max)
    }

    /// The first maximum of `key` worth trying (`shrink::first_candidate`), from the rate
    /// [`Search::shrink_floor`] sizes for.
    fn first_candidate(&self, key: &str, floor: u64) -> u64 {
        let rate = self.best_kept_rate();
        let obs = self.last_obs.as_ref();
        shrink::first_candidate(key, obs, rate, &self.current, &self.cfg, floor)
    }

    /// Whether this shrink trial's keep would be near its bisection's end
    /// ([`shrink::CONFIRM_WITHIN`]).
    fn near_its_end(&self, t: &Trial) -> bool {
        let (Some(sh), Some(c)) = (
            self.shrink,
            t.hyp.changes.first().and_then(|(_, v)| buffer_max(v)),
        ) else {
            return false;
        };
        shrink::near_its_end(&sh, c, self.shrink_floor(sh.key))
    }

    /// The next shrink trial, of this buffer or the next in the queue.
    fn next_shrink(&mut self) -> Action {
        loop {
            if self.shrink.is_none() {
                let Some(key) = self.shrink_queue.pop() else {
                    return self.finish_now();
                };
                let good = buffer_max(&self.current[key]).unwrap_or(0);
                // A kept buffer need not go below the original, which did not suffice.
                let kept = self.current.get(key) != self.original.get(key);
                let bad = match self.original.get(key).and_then(|v| buffer_max(v)) {
                    Some(o) if kept => o,
                    _ => 0,
                };
                self.shrink = Some(Shrink {
                    key,
                    good,
                    bad,
                    first: true,
                });
            }
            if let Some(back) = self.undo_slid() {
                return back;
            }
            let Some(sh) = self.shrink else {
                return self.finish_now();
            };
            let floor = self.shrink_floor(sh.key);
            let first = self.first_candidate(sh.key, floor);
            let room = self.affords(shrink::need_first_tests(&self.cfg));
            let trial = shrink::next_candidate(&sh, floor, first, room).and_then(|c| {
                let v = with_buffer_max(&self.current[sh.key], c)?;
                let untried = !self.tried.contains(&vec![(sh.key.to_string(), v.clone())]);
                let hyp = shrink::hypothesis(&sh, c, (floor, first), v, self.cfg.flows);
                untried.then_some((c, hyp))
            });
            match trial {
                Some((c, hyp)) => {
                    let tests = shrink::near_end_tests(&self.cfg);
                    if shrink::near_its_end(&sh, c, floor) && !self.affords(tests) {
                        return self.stop(format!(
                            "the budget has no room for the {tests} tests a shrink near its end \
                             takes (a keep there is confirmed on a second pair)"
                        ));
                    }
                    return self.begin(Phase::Shrink, hyp);
                }
                None => {
                    self.shrink = None;
                    self.undo.clear();
                }
            }
        }
    }

    /// A shrink was just kept (`before`: the tests of the value it replaced).
    fn on_shrink_kept(&mut self, t: &Trial, before: Vec<f64>) {
        if let Some((_, value)) = t.was.first() {
            self.undo.push(Undo {
                value: value.clone(),
                rates: before,
                step: self.steps.len().saturating_sub(1),
            });
        }
        self.slid = false;
    }

    /// A test of the setting kept (a later trial's A arm): whether a kept shrink's buffer cost
    /// it more than the tolerance.
    fn note_kept_test(&mut self, obs: &Observation) {
        let (Some(sh), Some(unshrunk)) = (self.shrink, self.unshrunk_rates.as_ref()) else {
            return;
        };
        let short = obs.rate_bps < (1.0 - self.cfg.shrink_tolerance) * mean(unshrunk);
        if !self.undo.is_empty() && short && !shrink::the_paths_noise(sh.key, obs) {
            self.slid = true;
        }
    }

    /// Puts the last kept shrink back when the tests of it since (later trials' A arms) fell
    /// short while its buffer bound and all its tests together lost more than the tolerance: it
    /// was kept on a good pair at its edge (on 1 Gbit/s × 0.2 ms half the tests of an 88 KiB
    /// receive maximum lost 13–17%). The bisection goes on between the value before it and it.
    fn undo_slid(&mut self) -> Option<Action> {
        if !self.slid {
            return None;
        }
        let reference = mean(self.unshrunk_rates.as_ref()?);
        let held = mean(&self.kept_rates);
        if held >= (1.0 - self.cfg.shrink_tolerance) * reference {
            return None;
        }
        let undo = self.undo.pop()?;
        let sh = self.shrink.as_mut()?;
        let key = sh.key;
        sh.bad = self
            .current
            .get(key)
            .and_then(|v| buffer_max(v))
            .unwrap_or(sh.bad);
        sh.good = buffer_max(&undo.value).unwrap_or(sh.good);
        sh.first = false;
        let n = self.kept_rates.len();
        if let Some(step) = self.steps.get_mut(undo.step) {
            step.outcome = Outcome::RolledBack;
            step.why = format!(
                "kept first ({}); then its {n} tests in all averaged {:.1}% of the unshrunk setting's {:.1} Mbit/s, one short while {} held the flow back: put back",
                step.why,
                held / reference * 100.0,
                reference / 1e6,
                shrink::what(key)
            );
        }
        self.current.insert(key.to_string(), undo.value.clone());
        self.kept_rates = undo.rates;
        self.slid = false;
        Some(self.write(vec![(key.to_string(), undo.value)], Next::Hypothesis))
    }

    /// The test shape for the path the baseline measured.
    fn shape_for(&self, obs: &Observation) -> TestShape {
        let asked = cfg_time(&self.cfg);
        let Some(rtt) = obs.min_rtt_s.or(obs.srtt_s) else {
            return TestShape::asked(asked);
        };
        let rate =
            self.cfg.path_rate_bps.unwrap_or(obs.rate_bps) / f64::from(self.cfg.flows.max(1));
        let cc = self
            .current
            .get(CC)
            .and_then(|c| c.parse().ok())
            .unwrap_or(CongestionControl::Cubic);
        shape(asked, rate, rtt, cc)
    }

    /// The A/A trial (`Config::aa_trial`): the settings in effect against themselves, once.
    fn aa_trial(&mut self) -> Action {
        if !self.steps.is_empty() {
            self.stopped = Some("the A/A trial is done".into());
            return self.finish_now();
        }
        let key = match self.cfg.role {
            Role::Receiver => RMEM,
            Role::Sender => WMEM,
        };
        let same = self.current.get(key).cloned().unwrap_or_default();
        let hyp = Hypothesis {
            kind: Kind::Option,
            changes: vec![(key.to_string(), same)],
            why: "A/A: the settings in effect against themselves (no difference expected)".into(),
            memory_bytes: None,
        };
        self.begin(Phase::Change, hyp)
    }
}

/// The test time asked for, whole seconds.
fn cfg_time(cfg: &Config) -> u32 {
    cfg.test_time_s.round().max(1.0) as u32
}
