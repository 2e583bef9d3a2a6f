//! The report's per-point verdict on recorded trials (a real run of seed 000's wmem spec,
//! fixtures/experiment/seed000-wmem): each point's verdict is the class the diagnosis engine
//! gave most of its measured trials, counted here from the raw records, with that count, and
//! the evidence shown beside it is the engine's sentence for a trial of that class.

use std::collections::BTreeMap;
use std::path::Path;

use tcptune_diagnose::Limit;

#[test]
fn each_points_verdict_is_the_class_of_most_of_its_recorded_trials() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/experiment/seed000-wmem");
    let plan = tcptune_experiment::run::load_plan(&dir).unwrap();
    let records = tcptune_experiment::run::load_records(&dir).unwrap();
    let points = tcptune_experiment::report::summarize(&plan, &records);

    // The classes per point, read from the raw JSON lines (not through the crate's types).
    let raw = std::fs::read_to_string(dir.join("trials.jsonl")).unwrap();
    let mut classes: BTreeMap<usize, Vec<Limit>> = BTreeMap::new();
    for line in raw.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["warmup"].as_bool() == Some(true) || v["result"].is_null() {
            continue;
        }
        let class: Limit = serde_json::from_value(v["result"]["limit"].clone()).unwrap();
        classes
            .entry(v["point"].as_u64().unwrap() as usize)
            .or_default()
            .push(class);
    }
    assert_eq!(classes.len(), points.len());
    let mut mixed = 0;
    for p in &points {
        let of_point = &classes[&p.index];
        let count = |l: Limit| of_point.iter().filter(|&&c| c == l).count();
        let most = of_point.iter().map(|&l| count(l)).max().unwrap();
        let leaders: Vec<Limit> = Limit::ALL
            .into_iter()
            .filter(|&l| count(l) == most)
            .collect();
        // No ties in this run: the class of most trials decides alone.
        assert_eq!(leaders.len(), 1, "point {}: {of_point:?}", p.index);
        if most < of_point.len() {
            mixed += 1;
        }
        let verdict = p.verdict.as_deref().unwrap();
        let want = format!(
            "{} ({most} of {} trials",
            leaders[0].label(),
            of_point.len()
        );
        assert!(
            verdict.starts_with(&want),
            "point {}: {verdict:?}, want {want:?}",
            p.index
        );
        let evidence = p.evidence.as_deref().unwrap();
        assert!(
            evidence.starts_with(leaders[0].label()),
            "point {}: evidence {evidence:?} for {verdict:?}",
            p.index
        );
    }
    // The fixture exercises points whose trials disagree.
    assert!(mixed >= 3, "{mixed} mixed points");
}
