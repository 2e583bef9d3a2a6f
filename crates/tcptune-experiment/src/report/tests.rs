//! The report's tests: theory, statistics, CSV, heatmap, verdicts and failures, a report end
//! to end over a model run, and auto repetitions over a noisy model.

use super::csv::csv_field;
use super::heatmap::goodput_heatmap;
use super::*;
use std::collections::BTreeSet;
use std::path::Path;

use crate::plan::{Point, Trial};
use crate::run::tests::{tempdir, ModelRunner, SPEC};
use crate::run::{load_plan, load_records, run, Measurement, TrialRunner};
use crate::settings::tests::FakeCaps;
use crate::settings::Settings;
use crate::spec::parse;
use tcptune_report::stats::summarize as stats;

#[test]
fn theory_for_a_point() {
    let mut s = Settings::new();
    s.insert("link.rate".into(), "100mbit".into());
    s.insert("link.delay".into(), "10ms".into());
    s.insert(
        "server.sysctl.net.ipv4.tcp_rmem".into(),
        "4096 65536 131072".into(),
    );
    let t = theory(&s);
    assert_eq!(t.rtt_s, Some(0.02));
    // Half of 128 KiB over 20 ms: 26.2 Mbit/s.
    assert!((t.window_bound_bps.unwrap() - 65536.0 * 8.0 / 0.02).abs() < 1e-6);
    assert_eq!(t.expected_bps, t.window_bound_bps);
    s.insert("link.loss".into(), "1%".into());
    s.insert(
        "server.sysctl.net.ipv4.tcp_rmem".into(),
        "4096 65536 67108864".into(),
    );
    let t = theory(&s);
    // Mathis: 1448 B × 8 / 20 ms × 1.2247 / 0.1 = 7.09 Mbit/s.
    assert!((t.mathis_bps.unwrap() - 1448.0 * 8.0 / 0.02 * 1.5f64.sqrt() / 0.1).abs() < 1.0);
    assert_eq!(t.expected_bps, t.mathis_bps);
    // A link rtt splits into both directions; the path's payload rate caps the expectation.
    let mut r = Settings::new();
    r.insert("link.rate".into(), "100mbit".into());
    r.insert("link.rtt".into(), "20ms".into());
    let t = theory(&r);
    assert_eq!(t.rtt_s, Some(0.02));
    assert!((t.expected_bps.unwrap() - 100e6 * 1448.0 / 1514.0).abs() < 1.0);
    // Jumbo frames carry a larger share of payload.
    r.insert("client.mtu".into(), "9000".into());
    r.insert("server.mtu".into(), "9000".into());
    assert!((theory(&r).expected_bps.unwrap() - 100e6 * 8948.0 / 9014.0).abs() < 1.0);
    // An explicit socket buffer (iperf3 -w, both ends) gives a window of about its size.
    s.insert("workload.direction".into(), "download".into());
    s.insert("workload.window".into(), "64KiB".into());
    assert!((theory(&s).window_bound_bps.unwrap() - 65536.0 * 8.0 / 0.02).abs() < 1e-6);
}

#[test]
fn a_report_with_statistics_theory_and_plots() {
    let spec = parse(SPEC, &FakeCaps).unwrap();
    let dir = tempdir("report");
    run(
        &spec,
        &mut ModelRunner {
            fail_seeds: vec![],
            calls: 0,
        },
        &dir,
        &mut |_| {},
    )
    .unwrap();
    let files = write_report(&dir).unwrap();
    assert_eq!(files.points.len(), 5);
    // The model runner's goodput follows window/RTT until the path rate: every point's
    // mean lies within 3% of the expectation (the runner wobbles by ±2%).
    for p in &files.points {
        let g = p.goodput_bps.as_ref().unwrap();
        assert_eq!(g.n, 4, "warm-ups are not counted");
        let want = p.theory.expected_bps.unwrap().min(95e6);
        assert!(
            (g.mean - want).abs() / want < 0.03,
            "{}: {} vs {want}",
            p.label,
            g.mean
        );
    }
    assert_eq!(
        files.points[0].verdict.as_deref(),
        Some("receiver-window limited (4 of 4 trials, mean share 93%)")
    );
    assert_eq!(
        files.points[4].verdict.as_deref(),
        Some("at the path's capacity (4 of 4 trials)")
    );
    let csv = std::fs::read_to_string(&files.summary_csv).unwrap();
    assert_eq!(csv.lines().count(), 6);
    assert!(csv.starts_with("point,server.sysctl.net.ipv4.tcp_rmem,n,mean_bps"));
    // The receive buffer each trial had, averaged per point (the fake runner reports twice
    // the window it was limited by; the first point's buffer is the smallest).
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header
        .iter()
        .position(|h| *h == "rcvbuf_peak_bytes_mean")
        .unwrap();
    let first: f64 = csv
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .nth(col)
        .unwrap()
        .parse()
        .unwrap();
    let last: f64 = csv
        .lines()
        .nth(5)
        .unwrap()
        .split(',')
        .nth(col)
        .unwrap()
        .parse()
        .unwrap();
    assert!(first > 0.0 && first < last, "{first} {last}");
    assert_eq!(files.points[0].rcvbuf_peak_mean, Some(first));
    let html = std::fs::read_to_string(&files.html).unwrap();
    assert!(
        html.contains("<svg")
            && html.contains("95% CI")
            && html.contains("receiver-window limited")
    );
    assert_eq!(
        html.matches("<svg").count(),
        1 + 5 * 3,
        "the goodput chart and three time charts for every point"
    );
    // Every measured trial of a point is a line of its goodput-over-time chart.
    let first = std::fs::read_to_string(dir.join("plots/p000-goodput-time.svg")).unwrap();
    assert_eq!(first.matches("data-series=\"r0").count(), 4);
    for p in &files.plots {
        assert!(std::fs::read_to_string(p).unwrap().starts_with("<svg"));
    }
    let _ = std::fs::remove_dir_all(dir);
}

fn point(index: usize, varied: &[(&str, &str)], goodput: &[f64]) -> PointSummary {
    PointSummary {
        index,
        label: String::new(),
        varied: varied
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        goodput_bps: stats(goodput),
        retransmits_mean: None,
        rtt_min_s_mean: None,
        rtt_mean_s_mean: None,
        rtt_p99_s_mean: None,
        sndbuf_peak_mean: None,
        rcvbuf_peak_mean: None,
        limits_mean: None,
        verdict: None,
        evidence: None,
        failures: 0,
        stopped: None,
        failure_causes: Vec::new(),
        theory: Theory::default(),
    }
}

#[test]
fn two_categorical_settings_make_a_table_heatmap() {
    // Buffer (2 values) × impairment (3 values), both names: the impairment goes across.
    let mut points = Vec::new();
    for (b, scale) in [("no limit", 1.0), ("rmem 4096", 0.2)] {
        for (i, base) in [("clean", 48e6), ("loss 1%", 40e6), ("rtt 100ms", 1e6)] {
            let g = base * scale;
            points.push(point(
                points.len(),
                &[(crate::spec::LABEL, b), (crate::spec::LABEL, i)],
                &[g * 0.98, g * 1.02],
            ));
        }
    }
    let map = goodput_heatmap(&points, "t").expect("two categorical settings");
    assert_eq!(map.rows, ["no limit", "rmem 4096"]);
    assert_eq!(map.cols, ["clean", "loss 1%", "rtt 100ms"]);
    let cell = map.cells[1][2].as_ref().unwrap();
    assert_eq!(cell.value, 0.2e6);
    assert_eq!(cell.text[0], "0.20 Mbit/s");
    assert!(cell.text[1].contains(" – "), "{:?}", cell.text);
    assert!(map.log_scale(), "48 Mbit/s beside 0.2 Mbit/s spans decades");

    // A numeric sweep, or a single setting, keeps the chart.
    let numeric: Vec<PointSummary> = ["4096 4096 4096", "4096 131072 65536", "4096 131072 1048576"]
        .iter()
        .enumerate()
        .map(|(i, v)| {
            point(
                i,
                &[
                    ("server.sysctl.net.ipv4.tcp_rmem", v),
                    (crate::spec::LABEL, "x"),
                ],
                &[1e6],
            )
        })
        .collect();
    assert!(goodput_heatmap(&numeric, "t").is_none());
    assert!(goodput_heatmap(
        &points[..1]
            .iter()
            .map(|p| {
                let mut q = p.clone();
                q.varied.truncate(1);
                q
            })
            .collect::<Vec<_>>(),
        "t"
    )
    .is_none());
}

#[test]
fn csv_quotes_what_needs_quoting() {
    assert_eq!(csv_field("a,b"), "\"a,b\"");
    assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
    assert_eq!(csv_field("4096 131072 6291456"), "4096 131072 6291456");
}

fn m(limit: tcptune_diagnose::Limit, share: Option<f64>) -> crate::run::Measurement {
    crate::run::Measurement {
        limit: Some(limit),
        limit_share: share,
        ..Default::default()
    }
}

#[test]
fn point_verdict_is_the_class_of_most_trials_ties_by_share() {
    use tcptune_diagnose::Limit;
    let trials = [
        m(Limit::Loss, Some(0.9)),
        m(Limit::ReceiverWindow, Some(0.6)),
        m(Limit::ReceiverWindow, Some(0.7)),
        m(Limit::Loss, Some(0.95)),
        m(Limit::ReceiverWindow, Some(0.5)),
    ];
    let refs: Vec<&crate::run::Measurement> = trials.iter().collect();
    assert_eq!(
        point_verdict(&refs).as_deref(),
        Some("receiver-window limited (3 of 5 trials, mean share 60%)")
    );
    // Two against two: the class with the larger summed share of time wins.
    let tie: Vec<&crate::run::Measurement> = trials[..4].iter().collect();
    assert!(point_verdict(&tie)
        .unwrap()
        .starts_with("loss limited (2 of 4"));
    assert_eq!(point_verdict(&[]), None);
}

#[test]
fn point_evidence_is_a_sentence_of_the_dominant_class() {
    use tcptune_diagnose::Limit;
    let said = |l, v: &str| crate::run::Measurement {
        verdict: Some(v.into()),
        ..m(l, None)
    };
    let trials = [
        said(Limit::Loss, "loss limited at 9 Mbit/s: 1.2% retransmitted"),
        said(
            Limit::SendBuffer,
            "send-buffer limited at 31 Mbit/s: send buffer 64 KiB full in 90% of samples",
        ),
        said(
            Limit::SendBuffer,
            "send-buffer limited at 32 Mbit/s: send buffer 64 KiB full in 88% of samples",
        ),
    ];
    let refs: Vec<&crate::run::Measurement> = trials.iter().collect();
    assert_eq!(
        point_evidence(&refs).as_deref(),
        Some("send-buffer limited at 31 Mbit/s: send buffer 64 KiB full in 90% of samples")
    );
    assert_eq!(point_evidence(&refs[..1]), trials[0].verdict);
    assert_eq!(point_evidence(&[]), None);
}

#[test]
fn point_verdicts_match_the_dominant_class_of_the_recorded_trials() {
    let spec = parse(SPEC, &FakeCaps).unwrap();
    let dir = tempdir("verdicts");
    run(
        &spec,
        &mut ModelRunner {
            fail_seeds: vec![],
            calls: 0,
        },
        &dir,
        &mut |_| {},
    )
    .unwrap();
    let files = write_report(&dir).unwrap();
    // Read the classes back from trials.jsonl and count them independently.
    let records = load_records(&dir).unwrap();
    for p in &files.points {
        let mut counts: Vec<(tcptune_diagnose::Limit, usize)> = Vec::new();
        for r in records.iter().filter(|r| r.point == p.index && !r.warmup) {
            let l = r.result.as_ref().and_then(|m| m.limit).unwrap();
            match counts.iter_mut().find(|c| c.0 == l) {
                Some(c) => c.1 += 1,
                None => counts.push((l, 1)),
            }
        }
        let (dominant, n) = counts.iter().max_by_key(|c| c.1).copied().unwrap();
        let verdict = p.verdict.as_deref().unwrap();
        assert!(
            verdict.starts_with(&format!("{} ({n} of 4 trials", dominant.label())),
            "{}: {verdict}",
            p.label
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn failures_are_recorded_counted_and_explained() {
    let spec = parse(SPEC, &FakeCaps).unwrap();
    let dir = tempdir("failures");
    let trials = crate::plan::trials(&spec, &crate::plan::points(&spec));
    let bad = trials.iter().find(|t| !t.warmup).unwrap().clone();
    run(
        &spec,
        &mut ModelRunner {
            fail_seeds: vec![bad.seed],
            calls: 0,
        },
        &dir,
        &mut |_| {},
    )
    .unwrap();
    let files = write_report(&dir).unwrap();
    let p = &files.points[bad.point];
    assert_eq!((p.failures, p.goodput_bps.as_ref().unwrap().n), (1, 3));
    assert_eq!(p.failure_causes, ["1× emulator crashed"]);
    let csv = std::fs::read_to_string(&files.summary_csv).unwrap();
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .ends_with(",failure_causes,stopped"));
    assert_eq!(csv.matches("1× emulator crashed").count(), 1);
    let html = std::fs::read_to_string(&files.html).unwrap();
    assert!(html.contains("1 failed)"), "the summary counts it");
    assert!(html.contains("1× emulator crashed"), "and says why");
    assert!(html.contains("<h2>Failed trials</h2>"));
    assert!(html.contains(&format!("<td>{}</td>", bad.id)));
    let _ = std::fs::remove_dir_all(dir);
}

/// The model with point 1's goodput scattered over ±50% by the trial's seed: a noisy point
/// beside steady ones (the model wobbles by ±2%); stops once it has run `stop_after` trials.
struct Noisy {
    inner: ModelRunner,
    stop_after: usize,
}

impl TrialRunner for Noisy {
    fn environment(&mut self) -> serde_json::Value {
        self.inner.environment()
    }
    fn run(&mut self, point: &Point, trial: &Trial, dir: &Path) -> Result<Measurement, String> {
        let mut m = self.inner.run(point, trial, dir)?;
        if point.index == 1 {
            m.goodput_bps *= 0.5 + (trial.seed % 1000) as f64 / 1000.0;
        }
        Ok(m)
    }
    fn should_stop(&self) -> bool {
        self.inner.calls >= self.stop_after
    }
}

fn measured_per_point(dir: &Path) -> Vec<usize> {
    let mut n = vec![0; 5];
    for r in load_records(dir).unwrap() {
        if !r.warmup && r.result.is_some() {
            n[r.point] += 1;
        }
    }
    n
}

#[test]
fn auto_repetitions_give_a_noisy_point_more_trials_and_resume_from_the_records() {
    let text = SPEC.replace(
        "repetitions = 4",
        "repetitions = \"auto\"\nmax_repetitions = 10",
    );
    let spec = parse(&text, &FakeCaps).unwrap();
    let noisy = |stop_after| Noisy {
        inner: ModelRunner {
            fail_seeds: vec![],
            calls: 0,
        },
        stop_after,
    };
    // In one go.
    let whole = tempdir("auto-whole");
    let mut totals = Vec::new();
    let out = run(&spec, &mut noisy(usize::MAX), &whole, &mut |p| {
        totals.push((p.done, p.total))
    })
    .unwrap();
    let n = measured_per_point(&whole);
    assert_eq!(n[1], 10, "the noisy point takes the maximum: {n:?}");
    for (i, k) in n.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert!((3..10).contains(k), "steady point {i} took {k}: {n:?}");
    }
    assert_eq!(
        out.ran,
        n.iter().sum::<usize>() + 5,
        "measured and warm-ups"
    );
    // The total falls as points close, and ends at what ran.
    assert_eq!(totals.first().unwrap().1, 5 * 11);
    assert_eq!(*totals.last().unwrap(), (out.ran, out.ran));
    assert!(totals.windows(2).all(|w| w[1].1 <= w[0].1));
    // The report says which stopped where.
    let stops: Vec<_> = summarize(&load_plan(&whole).unwrap(), &load_records(&whole).unwrap())
        .iter()
        .map(|p| p.stopped)
        .collect();
    use crate::stopping::Stop;
    assert_eq!(stops[1], Some(Stop::Maximum));
    assert!(stops
        .iter()
        .enumerate()
        .all(|(i, s)| i == 1 || *s == Some(Stop::Precise)));
    let files = write_report(&whole).unwrap();
    let html = std::fs::read_to_string(&files.html).unwrap();
    assert!(
        html.contains("up to 55 planned trials"),
        "the plan's maximum"
    );
    assert!(html.contains("within 5% of the mean, at least 3 and at most 10"));
    assert!(html.contains("4 point(s) met it"), "the steady ones");
    assert!(html.contains("1 stopped at the maximum without"));
    assert!(html.contains("<td>10 (at the maximum)</td>"));
    let csv = std::fs::read_to_string(&files.summary_csv).unwrap();
    let stopped: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().unwrap())
        .collect();
    assert_eq!(
        stopped,
        ["precise", "maximum", "precise", "precise", "precise"]
    );
    let text = ReportResult::from(files).to_string();
    assert!(
        text.contains("1 stopped at the maximum without: server.sysctl"),
        "{text}"
    );

    // Interrupted after 12 trials, then resumed: the same trials in the end.
    let parts = tempdir("auto-parts");
    let out = run(&spec, &mut noisy(12), &parts, &mut |_| {}).unwrap();
    assert!(out.interrupted);
    let stops: Vec<_> = summarize(&load_plan(&parts).unwrap(), &load_records(&parts).unwrap())
        .iter()
        .map(|p| p.stopped)
        .collect();
    assert!(stops.contains(&Some(Stop::Unfinished)), "{stops:?}");
    run(&spec, &mut noisy(usize::MAX), &parts, &mut |_| {}).unwrap();
    let ids = |d: &Path| -> BTreeSet<String> {
        load_records(d).unwrap().into_iter().map(|r| r.id).collect()
    };
    assert_eq!(ids(&parts), ids(&whole));
    // A third run finds nothing left to do.
    let mut again = noisy(usize::MAX);
    let out = run(&spec, &mut again, &parts, &mut |_| {}).unwrap();
    assert_eq!((out.ran, again.inner.calls), (0, 0));
    let _ = std::fs::remove_dir_all(whole);
    let _ = std::fs::remove_dir_all(parts);
}
