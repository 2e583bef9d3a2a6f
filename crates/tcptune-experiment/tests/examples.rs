//! The examples' "seed vs measured" tables: each `examples/*/seed.toml` with the committed
//! results gives a table; `comparison.md` and the README's copy between the markers must be
//! exactly that table. `TCPTUNE_BLESS=1` rewrites both from the results (after a rerun).

use std::path::{Path, PathBuf};

use tcptune_experiment::compare::{comparison, embed};

fn seed_files() -> Vec<PathBuf> {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&examples)
        .expect("the examples directory")
        .filter_map(|e| Some(e.ok()?.path().join("seed.toml")))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn readme_tables_are_the_generated_comparison() {
    let seeds = seed_files();
    assert!(
        seeds.len() >= 5,
        "every seed reproduction has a seed.toml: {seeds:?}"
    );
    let bless = std::env::var_os("TCPTUNE_BLESS").is_some();
    for seed in seeds {
        let dir = seed.parent().unwrap();
        let table = comparison(&seed).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !table.contains("no summary.csv"),
            "{}: a claim names results that are not there:\n{table}",
            seed.display()
        );
        let md = dir.join("comparison.md");
        let readme_path = dir.join("README.md");
        let readme = std::fs::read_to_string(&readme_path).unwrap();
        let embedded = embed(&readme, &table)
            .unwrap_or_else(|| panic!("{}: no comparison markers", readme_path.display()));
        if bless {
            std::fs::write(&md, &table).unwrap();
            std::fs::write(&readme_path, &embedded).unwrap();
            continue;
        }
        assert_eq!(
            std::fs::read_to_string(&md).unwrap_or_default(),
            table,
            "{} is stale: TCPTUNE_BLESS=1 cargo test -p tcptune-experiment --test examples",
            md.display()
        );
        assert_eq!(
            readme,
            embedded,
            "{}'s table differs from the generated one: TCPTUNE_BLESS=1 cargo test -p tcptune-experiment --test examples",
            readme_path.display()
        );
    }
}

/// Every results directory under `examples/` (a directory with a `summary.csv`).
fn kept_records(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            kept_records(&p, out);
        } else if p.file_name().is_some_and(|n| n == "summary.csv") {
            out.push(dir.to_path_buf());
        }
    }
}

/// Every committed result keeps its trial records (`trials.jsonl`, `plan.json`, the spec
/// copy) and re-derives its `summary.csv` from them alone: the summary is what the data gives.
#[test]
fn kept_trial_records_rederive_the_committed_summary() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut dirs = Vec::new();
    kept_records(&examples, &mut dirs);
    assert!(!dirs.is_empty(), "no example keeps its trial records");
    for dir in dirs {
        let tmp = std::env::temp_dir().join(format!(
            "tcptune-rederive-{}-{}",
            std::process::id(),
            dir.parent().unwrap().file_name().unwrap().to_string_lossy()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        for f in ["trials.jsonl", "plan.json", "spec.toml"] {
            std::fs::copy(dir.join(f), tmp.join(f))
                .unwrap_or_else(|e| panic!("{}: {f}: {e}", dir.display()));
        }
        let made = tcptune_experiment::report::write_report(&tmp);
        let derived = std::fs::read_to_string(tmp.join("summary.csv"));
        let _ = std::fs::remove_dir_all(&tmp);
        made.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let committed = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
        let derived = derived.unwrap();
        assert!(
            same_csv(&derived, &committed),
            "{}: summary.csv is not what its trial records give:\n{derived}\n{committed}",
            dir.display()
        );
    }
}

/// Two CSV texts with the same cells, numbers equal to 12 significant digits: summaries
/// written by builds that read floats back differently (a last bit) are the same summary.
fn same_csv(a: &str, b: &str) -> bool {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    la.len() == lb.len()
        && la.iter().zip(&lb).all(|(x, y)| {
            let (cx, cy): (Vec<&str>, Vec<&str>) = (x.split(',').collect(), y.split(',').collect());
            cx.len() == cy.len()
                && cx.iter().zip(&cy).all(|(p, q)| {
                    p == q
                        || matches!((p.parse::<f64>(), q.parse::<f64>()), (Ok(u), Ok(v))
                            if (u - v).abs() <= 1e-12 * u.abs().max(v.abs()))
                })
        })
}
