//! Replays the `snapshot` fuzz corpus (fuzz/corpus/snapshot, seeds for
//! `cargo fuzz run snapshot`) and a seeded mutation run over a real snapshot through the
//! snapshot reader: nothing may panic, and what it accepts reads back as written.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn snapshot_fuzz_corpus_replays_without_panics() {
    let dir = root().join("fuzz/corpus/snapshot");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("fuzz/corpus/snapshot exists") {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| tcptune_host::tune::fuzz_one(&data));
        assert!(r.is_ok(), "panic on corpus file {}", p.display());
        n += 1;
    }
    assert!(n >= 8, "the corpus has only {n} files");
    // The hostile ones are refused, the real one accepted.
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    assert!(tcptune_host::tune::parse_snapshot(&read("host.json")).is_ok());
    for bad in [
        "path-in-key.json",
        "bad-netns.json",
        "bad-device.json",
        "wrong-types.json",
    ] {
        let e = tcptune_host::tune::parse_snapshot(&read(bad)).unwrap_err();
        assert!(e.starts_with("not a tcptune snapshot"), "{bad}: {e}");
    }
}

#[test]
fn mutated_snapshots_never_panic() {
    let orig = std::fs::read(root().join("fuzz/corpus/snapshot/host.json")).unwrap();
    assert_eq!(tcptune_host::tune::fuzz_one(&orig), 3);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Byte damage and JSON-shaped replacements (values that are valid JSON but not sane).
    let words: [&[u8]; 8] = [
        b"null",
        b"-1",
        b"18446744073709551616",
        b"\"../\"",
        b"[]",
        b"{}",
        b"\"\\u0000\"",
        b"1e400",
    ];
    for i in 0..3000 {
        let mut d = orig.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() as usize) % d.len();
            match next() % 4 {
                0 => d[at] ^= 1 << (next() % 8),
                1 => d.truncate(at.max(1)),
                2 if d.len() > 1 => {
                    d.remove(at);
                }
                2 => d[at] = b'"',
                _ => {
                    let w = words[(next() % words.len() as u64) as usize];
                    let end = (at + 1 + (next() as usize) % 12).min(d.len());
                    d.splice(at..end, w.iter().copied());
                    if d.is_empty() {
                        d.push(b'{');
                    }
                }
            }
        }
        let r = std::panic::catch_unwind(|| tcptune_host::tune::fuzz_one(&d));
        assert!(
            r.is_ok(),
            "panic on mutation {i}: {}",
            String::from_utf8_lossy(&d)
        );
    }
}
