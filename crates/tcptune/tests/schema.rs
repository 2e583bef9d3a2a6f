//! The checked-in JSON Schemas under `schema/` must equal what the code generates.
//! Regenerate after an intended change with: `TCPTUNE_BLESS=1 cargo test -p tcptune --test schema`.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn checked_in_schemas_match_the_code() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schema");
    let bin = env!("CARGO_BIN_EXE_tcptune");
    let list = Command::new(bin)
        .args(["schema", "--list"])
        .output()
        .unwrap();
    assert!(list.status.success());
    let names: Vec<String> = String::from_utf8(list.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert!(!names.is_empty());
    let bless = std::env::var_os("TCPTUNE_BLESS").is_some();
    let mut stale = Vec::new();
    for name in &names {
        let out = Command::new(bin).args(["schema", name]).output().unwrap();
        assert!(out.status.success(), "tcptune schema {name} failed");
        let path = dir.join(format!("{name}.json"));
        if bless {
            std::fs::write(&path, &out.stdout).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(&out.stdout[..]) {
            stale.push(path.display().to_string());
        }
    }
    // A schema file without a command is stale too.
    for f in std::fs::read_dir(&dir).unwrap() {
        let p = f.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.extension().is_some_and(|e| e == "json") && !names.contains(&stem) {
            if bless {
                std::fs::remove_file(&p).unwrap();
            } else {
                stale.push(format!("{} (no such command)", p.display()));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "schema files out of date: {stale:?}; run TCPTUNE_BLESS=1 cargo test -p tcptune --test schema"
    );
}
