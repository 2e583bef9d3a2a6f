//! Replays the `spec` fuzz corpus (fuzz/corpus/spec, seeds for `cargo fuzz run spec`) and a
//! seeded mutation run over the example specs through the spec parser, the plan and the point
//! checks: nothing may panic, and errors name a line of the text.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn spec_fuzz_corpus_replays_without_panics() {
    let dir = root().join("fuzz/corpus/spec");
    let mut n = 0;
    let mut accepted = 0;
    for e in std::fs::read_dir(&dir).expect("fuzz/corpus/spec exists") {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| tcptune_experiment::fuzz_one(&data));
        assert!(r.is_ok(), "panic on corpus file {}", p.display());
        accepted += usize::from(r.unwrap() > 0);
        n += 1;
    }
    assert!(n >= 10, "the corpus has only {n} files");
    assert!(accepted >= 10, "only {accepted} corpus specs were accepted");
    // The lab specs in it: the real one is a lab spec, the hostile one is refused.
    let lab = |f: &str| {
        serde_json::from_slice::<tcptune_lab::LabSpec>(&std::fs::read(dir.join(f)).unwrap())
    };
    lab("lab-spec.json").unwrap().validate().unwrap();
    let e = match lab("lab-spec-hostile.json") {
        Ok(s) => s.validate().unwrap_err().to_string(),
        Err(e) => e.to_string(),
    };
    assert!(!e.is_empty());
}

#[test]
fn mutated_example_specs_never_panic() {
    let mut x: u64 = 0x5851_f42d_4c95_7f2d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let hostile = [
        "\"1e300tbit\"",
        "\"1e-12s\"",
        "-100",
        "99",
        "\"0s\"",
        "[\"a\", [\"b\"]]",
        "{ x = 1 }",
        "\"",
        "[[paired]]",
        "99999999999999999999",
        "nan",
        "\"../x\"",
    ];
    let mut specs = 0;
    for d in std::fs::read_dir(root().join("examples")).unwrap() {
        let d = d.unwrap().path();
        let Ok(files) = std::fs::read_dir(&d) else {
            continue;
        };
        for f in files {
            let f = f.unwrap().path();
            // seed.toml beside a spec holds the seed's published figures, not a spec.
            if f.extension().is_none_or(|e| e != "toml")
                || f.file_name().is_some_and(|n| n == "seed.toml")
            {
                continue;
            }
            let orig = std::fs::read_to_string(&f).unwrap();
            assert!(
                tcptune_experiment::fuzz_one(orig.as_bytes()) > 0,
                "{} is accepted",
                f.display()
            );
            specs += 1;
            for i in 0..150 {
                let mut lines: Vec<String> = orig.lines().map(str::to_string).collect();
                for _ in 0..1 + next() % 3 {
                    let at = (next() as usize) % lines.len();
                    match next() % 5 {
                        0 => {
                            lines.remove(at);
                            if lines.is_empty() {
                                lines.push(String::new());
                            }
                        }
                        1 => {
                            let l = lines[at].clone();
                            lines.insert(at, l);
                        }
                        // A value replaced by a hostile one.
                        2 | 3 => {
                            if let Some(eq) = lines[at].find('=') {
                                let v = hostile[(next() % hostile.len() as u64) as usize];
                                lines[at] = format!("{}= {v}", &lines[at][..eq]);
                            }
                        }
                        _ => {
                            let mut b = lines[at].clone().into_bytes();
                            if !b.is_empty() {
                                let j = (next() as usize) % b.len();
                                b[j] ^= 1 << (next() % 7);
                            }
                            lines[at] = String::from_utf8_lossy(&b).into_owned();
                        }
                    }
                }
                let text = lines.join("\n");
                let r = std::panic::catch_unwind(|| tcptune_experiment::fuzz_one(text.as_bytes()));
                assert!(r.is_ok(), "panic on {} mutation {i}:\n{text}", f.display());
            }
        }
    }
    assert!(specs >= 10, "only {specs} example specs");
}
