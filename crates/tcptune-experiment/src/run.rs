//! The runner loop: runs each planned trial through a [`TrialRunner`], appends its record to
//! `trials.jsonl` as soon as it ends (flushed and synced, so a killed run loses at most the
//! trial in progress), reports progress with an ETA, and on a second start with the same spec
//! skips the trials already recorded. With `repetitions = "auto"` it passes over the trials of
//! points the stopping rule has closed, deciding from the recorded trials (so a resumed run
//! re-derives which points are still open).
//!
//! Results directory:
//! - `spec.toml`: the spec as given; `plan.json`: points, trial order, the spec's hash;
//! - `environment.json`: kernel, settings, backend, tool version (from the runner);
//! - `trials.jsonl`: one [`TrialRecord`] per line; `series/<trial>.jsonl`: [`SeriesSample`]s;
//! - `captures/<trial>.pcap` (and `<trial>-server.pcap` when both ends are captured);
//! - `summary.csv`, `report.html`, `plots/*.svg`: written by [`crate::report`].

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::plan::{self, Point, Trial};
pub use crate::record::{LimitShares, Measurement, SeriesSample, StoredPlan, TrialRecord};
use crate::schedule::Tracker;
use crate::spec::Spec;

/// Runs one trial of a point. `dir` is the results directory (for series and captures).
pub trait TrialRunner {
    /// Kernel, settings and backend, recorded once per run.
    fn environment(&mut self) -> serde_json::Value;
    /// Runs `trial` of `point`; the error is one sentence saying why the trial failed.
    fn run(&mut self, point: &Point, trial: &Trial, dir: &Path) -> Result<Measurement, String>;
    /// Whether the run should stop before the next trial (a signal arrived).
    fn should_stop(&self) -> bool {
        false
    }
}

/// Progress after each trial.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    /// Trials done, those of an earlier interrupted run included.
    pub done: usize,
    /// Trials done and still to run (with `repetitions = "auto"`, as far as is known now).
    pub total: usize,
    /// The trial just done.
    pub record: &'a TrialRecord,
    /// Its point's label.
    pub point_label: String,
    /// Estimated seconds left, from the mean wall time of the trials run so far.
    pub eta_s: Option<f64>,
}

/// Why a run could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The results directory holds another spec's run.
    #[error("{dir} holds results of a different spec; give another --out or remove it")]
    DifferentSpec {
        /// The results directory.
        dir: String,
    },
    // The cause is in the message; not chained as a source, or `{:#}` prints it twice.
    /// Reading or writing a results file failed.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: String,
        /// The error from the OS.
        cause: std::io::Error,
    },
    /// A results file is not what a run writes.
    #[error("{path}: {why}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// A results file could not be read.
    #[error(transparent)]
    File(#[from] tcptune_kernel::file::FileError),
}

/// The largest trials.jsonl and plan.json read (100,000 trials make about 200 MB of records).
const RESULTS_FILE_LIMIT: u64 = 1 << 30;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |cause| RunError::Io {
        path: path.display().to_string(),
        cause,
    }
}

/// The spec text's FNV-1a hash, hex: what a resumed run checks against.
pub fn spec_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.as_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// Reads the records of a results directory. A last line cut by a crash is dropped (and cut
/// from the file, so later appends start on a fresh line).
pub fn load_records(dir: &Path) -> Result<Vec<TrialRecord>, RunError> {
    let path = dir.join("trials.jsonl");
    let text =
        match tcptune_kernel::file::read_text_limited(&path, RESULTS_FILE_LIMIT, "trial records") {
            Ok(t) => t,
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    if complete.len() != text.len() {
        std::fs::write(&path, complete).map_err(io_err(&path))?;
    }
    complete
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| RunError::Corrupt {
                path: path.display().to_string(),
                why: format!("line {}: {e}", i + 1),
            })
        })
        .collect()
}

/// Reads `plan.json` of a results directory.
pub fn load_plan(dir: &Path) -> Result<StoredPlan, RunError> {
    let path = dir.join("plan.json");
    let text = tcptune_kernel::file::read_text_limited(&path, RESULTS_FILE_LIMIT, "plan")?;
    serde_json::from_str(&text).map_err(|e| RunError::Corrupt {
        path: path.display().to_string(),
        why: e.to_string(),
    })
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The results directory.
    pub dir: PathBuf,
    /// Trials run this time.
    pub ran: usize,
    /// Trials already recorded by an earlier, interrupted run (resumed past).
    pub skipped: usize,
    /// Trials that failed this time.
    pub failed: usize,
    /// The run stopped early because the runner asked to (a signal); rerun to resume.
    pub interrupted: bool,
}

/// How a run goes beyond the spec.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Smoke mode with at most this many points ([`plan::smoke`]): a quick check that the
    /// spec runs, recorded as a plan of its own (a results directory holds one or the other).
    pub smoke: Option<usize>,
    /// Run the trials that failed before once more. Without it a resumed run leaves them
    /// failed: a failure is a result, kept in `trials.jsonl` and counted in the report.
    pub retry_failed: bool,
}

/// Runs every trial of `spec` not yet recorded in `dir`.
pub fn run(
    spec: &Spec,
    runner: &mut dyn TrialRunner,
    dir: &Path,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RunOutcome, RunError> {
    run_with(spec, &RunOptions::default(), runner, dir, progress)
}

/// [`run`] with options.
pub fn run_with(
    spec: &Spec,
    options: &RunOptions,
    runner: &mut dyn TrialRunner,
    dir: &Path,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RunOutcome, RunError> {
    std::fs::create_dir_all(dir.join("series")).map_err(io_err(dir))?;
    let hash = match options.smoke {
        Some(n) => spec_hash(&format!("{}\n# smoke {n}", spec.text)),
        None => spec_hash(&spec.text),
    };
    let plan_path = dir.join("plan.json");
    let stored = if plan_path.exists() {
        let p = load_plan(dir)?;
        if p.spec_hash != hash {
            return Err(RunError::DifferentSpec {
                dir: dir.display().to_string(),
            });
        }
        p
    } else {
        let (points, trials) = match options.smoke {
            Some(n) => plan::smoke(spec, n),
            None => {
                let points = plan::points(spec);
                let trials = plan::trials(spec, &points);
                (points, trials)
            }
        };
        let p = StoredPlan {
            name: spec.name.clone(),
            spec_hash: hash,
            points,
            trials,
            auto: spec.auto.filter(|_| options.smoke.is_none()),
        };
        let spec_path = dir.join("spec.toml");
        std::fs::write(&spec_path, &spec.text).map_err(io_err(&spec_path))?;
        let json = serde_json::to_vec_pretty(&p).map_err(|e| RunError::Corrupt {
            path: plan_path.display().to_string(),
            why: e.to_string(),
        })?;
        std::fs::write(&plan_path, json).map_err(io_err(&plan_path))?;
        p
    };
    let env_path = dir.join("environment.json");
    if !env_path.exists() {
        let env = serde_json::to_vec_pretty(&runner.environment()).unwrap_or_default();
        std::fs::write(&env_path, env).map_err(io_err(&env_path))?;
    }
    // A resumed run skips what is recorded: successes always, failures unless asked to retry
    // them (a retry appends a new record; the failed one stays in the file and the report).
    let records = load_records(dir)?;
    let done: BTreeSet<String> = records
        .iter()
        .filter(|r| r.result.is_some() || !options.retry_failed)
        .map(|r| r.id.clone())
        .collect();
    // Which points still take trials (every point, with fixed repetitions).
    let mut tracker = Tracker::new(&stored, &records, &|t: &Trial| !done.contains(&t.id));
    let records_path = dir.join("trials.jsonl");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&records_path)
        .map_err(io_err(&records_path))?;
    let skipped = stored
        .trials
        .iter()
        .filter(|t| done.contains(&t.id))
        .count();
    let (mut ran, mut failed, mut wall_sum) = (0usize, 0usize, 0.0f64);
    for trial in stored.trials.iter().filter(|t| !done.contains(&t.id)) {
        if runner.should_stop() {
            return Ok(RunOutcome {
                dir: dir.to_path_buf(),
                ran,
                skipped,
                failed,
                interrupted: true,
            });
        }
        if !tracker.take(trial) {
            continue; // its point is precise enough, or at its maximum
        }
        let point = &stored.points[trial.point];
        let started = std::time::Instant::now();
        let started_unix_s = now_unix();
        let cpu_before = tcptune_kernel::cpustat::CpuTicks::now();
        let result = runner.run(point, trial, dir);
        let wall_s = started.elapsed().as_secs_f64();
        let cpu = cpu_before
            .zip(tcptune_kernel::cpustat::CpuTicks::now())
            .and_then(|(a, b)| a.shares_until(&b));
        if result.is_err() && runner.should_stop() {
            // Cut by the stop signal, not failed: left unrecorded, so a resume runs it.
            return Ok(RunOutcome {
                dir: dir.to_path_buf(),
                ran,
                skipped,
                failed,
                interrupted: true,
            });
        }
        tracker.ended(trial, result.as_ref().ok().map(|m| m.goodput_bps));
        let (result, error) = match result {
            Ok(m) => (Some(m), None),
            Err(e) => (None, Some(e)),
        };
        failed += usize::from(error.is_some());
        let record = TrialRecord {
            id: trial.id.clone(),
            point: trial.point,
            rep: trial.rep,
            warmup: trial.warmup,
            seed: trial.seed,
            started_unix_s,
            wall_s,
            host_busy: cpu.map(|c| c.0),
            host_steal: cpu.map(|c| c.2),
            result,
            error,
        };
        let mut line = serde_json::to_string(&record).unwrap_or_default();
        line.push('\n');
        file.write_all(line.as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(io_err(&records_path))?;
        ran += 1;
        wall_sum += wall_s;
        let left = tracker.remaining();
        progress(&Progress {
            done: skipped + ran,
            total: skipped + ran + left,
            record: &record,
            point_label: point.label(),
            eta_s: Some(wall_sum / ran as f64 * left as f64),
        });
    }
    Ok(RunOutcome {
        dir: dir.to_path_buf(),
        ran,
        skipped,
        failed,
        interrupted: runner.should_stop(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::settings::tests::FakeCaps;
    use crate::spec::parse;
    use tcptune_model::{Bytes, Dur, Rate};

    /// A deterministic "lab": goodput = min(path rate × 0.95, window / RTT) with a
    /// seed-dependent ±2% wobble, failing trials whose seed the test names.
    pub struct ModelRunner {
        pub fail_seeds: Vec<u64>,
        pub calls: usize,
    }

    impl TrialRunner for ModelRunner {
        fn environment(&mut self) -> serde_json::Value {
            serde_json::json!({"kernel": "model", "backend": "test"})
        }
        fn run(&mut self, point: &Point, trial: &Trial, dir: &Path) -> Result<Measurement, String> {
            self.calls += 1;
            if self.fail_seeds.contains(&trial.seed) {
                return Err("emulator crashed".into());
            }
            let s = &point.settings;
            let rate: Rate = s["link.rate"].parse().unwrap();
            let rtt = Dur::from_nanos(2 * s["link.delay"].parse::<Dur>().unwrap().nanos());
            let rmem: Bytes = s["server.sysctl.net.ipv4.tcp_rmem"]
                .split(' ')
                .nth(2)
                .unwrap()
                .parse()
                .unwrap();
            let window = rmem.get() as f64 / 2.0;
            let wobble = 1.0 + ((trial.seed % 41) as f64 - 20.0) / 1000.0;
            let goodput = (rate.bps() * 0.95).min(window * 8.0 / rtt.secs()) * wobble;
            let series = format!("series/{}.jsonl", trial.id);
            let samples: String = (0..5)
                .map(|i| {
                    serde_json::to_string(&SeriesSample {
                        t_s: i as f64,
                        goodput_bps: Some(goodput),
                        snd_cwnd_bytes: Some(100_000),
                        rwnd_bytes: Some(window as u64),
                        rtt_s: Some(rtt.secs()),
                        retransmits: Some(0),
                        ..Default::default()
                    })
                    .unwrap()
                        + "\n"
                })
                .collect();
            std::fs::write(dir.join(&series), samples).map_err(|e| e.to_string())?;
            let limited = window * 8.0 / rtt.secs() < rate.bps() * 0.95;
            Ok(Measurement {
                goodput_bps: goodput,
                bytes: (goodput / 8.0 * 5.0) as u64,
                duration_s: 5.0,
                retransmits: Some(0),
                rtt_min_s: Some(rtt.secs()),
                rtt_mean_s: Some(rtt.secs() * 1.1),
                rtt_p99_s: Some(rtt.secs() * 1.3),
                limits: Some(if limited {
                    LimitShares {
                        rwnd: 0.93,
                        cwnd: 0.07,
                        ..Default::default()
                    }
                } else {
                    LimitShares {
                        cwnd: 1.0,
                        ..Default::default()
                    }
                }),
                verdict: Some(if limited {
                    "receiver-window limited".into()
                } else {
                    "at the path's capacity".into()
                }),
                limit: Some(if limited {
                    tcptune_diagnose::Limit::ReceiverWindow
                } else {
                    tcptune_diagnose::Limit::PathCapacity
                }),
                limit_share: limited.then_some(0.93),
                link: None,
                series: Some(series),
                receiver_series: None,
                capture: None,
                capture_server: None,
                join: None,
                sndbuf_peak_bytes: None,
                rcvbuf_peak_bytes: Some((window * 2.0) as u64),
            })
        }
    }

    pub const SPEC: &str = r#"
name = "model-buffers"
seed = 11
repetitions = 4
[link]
rate = "100mbit"
delay = "10ms"
[server.sysctl]
"net.ipv4.tcp_rmem" = "4096 131072 6291456"
[sweep]
"server.sysctl.net.ipv4.tcp_rmem" = ["4096 16384 16384", "4096 65536 65536", "4096 131072 262144", "4096 131072 1048576", "4096 131072 6291456"]
"#;

    pub fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tcptune-exp-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn runs_every_trial_then_resumes_without_repeating() {
        let spec = parse(SPEC, &FakeCaps).unwrap();
        let dir = tempdir("resume");
        let total = 5 * (4 + 1);
        // First run: two trials fail.
        let plan_trials = plan::trials(&spec, &plan::points(&spec));
        let fail: Vec<u64> = plan_trials.iter().skip(3).take(2).map(|t| t.seed).collect();
        let mut r = ModelRunner {
            fail_seeds: fail,
            calls: 0,
        };
        let mut seen = Vec::new();
        let out = run(&spec, &mut r, &dir, &mut |p| {
            seen.push((p.done, p.eta_s.unwrap()))
        })
        .unwrap();
        assert_eq!((out.ran, out.skipped, out.failed), (total, 0, 2));
        assert_eq!(seen.last().unwrap().0, total);
        assert_eq!(seen.last().unwrap().1, 0.0, "nothing left at the end");
        assert_eq!(load_records(&dir).unwrap().len(), total);
        // Resume: nothing runs again, the failures stand (no silent retry).
        let mut r2 = ModelRunner {
            fail_seeds: vec![],
            calls: 0,
        };
        let out = run(&spec, &mut r2, &dir, &mut |_| {}).unwrap();
        assert_eq!((out.ran, out.skipped, r2.calls), (0, total, 0));
        // Asked to retry: only the two failed trials run again, and both attempts are kept.
        let retry = RunOptions {
            retry_failed: true,
            ..Default::default()
        };
        let out = run_with(&spec, &retry, &mut r2, &dir, &mut |_| {}).unwrap();
        assert_eq!((out.ran, out.skipped, r2.calls), (2, total - 2, 2));
        let recs = load_records(&dir).unwrap();
        assert_eq!(recs.len(), total + 2);
        assert_eq!(recs.iter().filter(|r| r.error.is_some()).count(), 2);
        // A different spec in the same directory is refused.
        let other = parse(&SPEC.replace("seed = 11", "seed = 12"), &FakeCaps).unwrap();
        assert!(matches!(
            run(&other, &mut r2, &dir, &mut |_| {}),
            Err(RunError::DifferentSpec { .. })
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Fails its `n`-th trial as a signal arrives (the workload killed by Ctrl-C).
    struct Interrupted {
        inner: ModelRunner,
        at: usize,
        stopped: bool,
    }

    impl TrialRunner for Interrupted {
        fn environment(&mut self) -> serde_json::Value {
            self.inner.environment()
        }
        fn run(&mut self, point: &Point, trial: &Trial, dir: &Path) -> Result<Measurement, String> {
            if self.inner.calls + 1 == self.at {
                self.inner.calls += 1;
                self.stopped = true;
                return Err("iperf3 killed by signal 2".into());
            }
            self.inner.run(point, trial, dir)
        }
        fn should_stop(&self) -> bool {
            self.stopped
        }
    }

    #[test]
    fn a_trial_cut_by_the_stop_signal_is_not_a_failure_and_runs_on_resume() {
        let spec = parse(SPEC, &FakeCaps).unwrap();
        let dir = tempdir("interrupted");
        let mut r = Interrupted {
            inner: ModelRunner {
                fail_seeds: vec![],
                calls: 0,
            },
            at: 3,
            stopped: false,
        };
        let out = run(&spec, &mut r, &dir, &mut |_| {}).unwrap();
        assert!(out.interrupted);
        assert_eq!((out.ran, out.failed), (2, 0));
        let recs = load_records(&dir).unwrap();
        assert_eq!(recs.len(), 2, "the cut trial is not recorded");
        assert!(recs.iter().all(|r| r.error.is_none()));
        let mut again = ModelRunner {
            fail_seeds: vec![],
            calls: 0,
        };
        let out = run(&spec, &mut again, &dir, &mut |_| {}).unwrap();
        assert_eq!((out.ran, out.skipped, out.failed), (23, 2, 0));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_record_cut_by_a_crash_is_dropped_and_rerun() {
        let spec = parse(SPEC, &FakeCaps).unwrap();
        let dir = tempdir("cut");
        let mut r = ModelRunner {
            fail_seeds: vec![],
            calls: 0,
        };
        run(&spec, &mut r, &dir, &mut |_| {}).unwrap();
        // Simulate a crash while writing: drop the last record and leave half of it.
        let path = dir.join("trials.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        let last = lines.pop().unwrap().to_string();
        let cut = format!("{}\n{}", lines.join("\n"), &last[..last.len() / 2]);
        std::fs::write(&path, cut).unwrap();
        let mut r2 = ModelRunner {
            fail_seeds: vec![],
            calls: 0,
        };
        let out = run(&spec, &mut r2, &dir, &mut |_| {}).unwrap();
        assert_eq!(out.ran, 1);
        let recs = load_records(&dir).unwrap();
        assert_eq!(recs.len(), 25);
        assert_eq!(
            recs.iter().map(|r| &r.id).collect::<BTreeSet<_>>().len(),
            25
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
