//! Replays the `sock_diag` fuzz corpus (fuzz/corpus/sock_diag, seeds for
//! `cargo fuzz run sock_diag`) and a seeded mutation run over the recorded kernel answers
//! through the decoders: nothing may panic.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn sock_diag_fuzz_corpus_replays_without_panics() {
    let dir = root().join("fuzz/corpus/sock_diag");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("fuzz/corpus/sock_diag exists") {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| tcptune_kernel::fuzz_one(&data));
        assert!(r.is_ok(), "panic on corpus file {}", p.display());
        n += 1;
    }
    assert!(n >= 10, "the corpus has only {n} files");
}

#[test]
fn mutated_kernel_answers_never_panic() {
    // xorshift: deterministic, so a failure names a reproducible (fixture, iteration).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for name in [
        "dump-loopback.nl",
        "destroy-events.nl",
        "getsockopt-client.bin",
    ] {
        let orig = std::fs::read(root().join("fixtures/kernel/6.18").join(name)).unwrap();
        // The fixture itself decodes to something (the target is not a no-op).
        assert!(tcptune_kernel::fuzz_one(&orig) > tcptune_kernel::fuzz_one(&[]));
        for i in 0..1000 {
            let mut d = orig.clone();
            for _ in 0..1 + next() % 6 {
                let at = (next() as usize) % d.len();
                match next() % 6 {
                    0 => d[at] ^= 1 << (next() % 8),
                    1 => d[at] = 0xff,
                    2 => d[at] = 0,
                    // A length field (netlink header or attribute) made small or huge.
                    3 if d.len() >= 2 => {
                        let v = (next() % 0x1_0000) as u16;
                        let at = at.min(d.len().saturating_sub(2));
                        d[at..at + 2].copy_from_slice(&v.to_ne_bytes());
                    }
                    3 | 4 => d.truncate(at.max(1)),
                    _ => {
                        let dup = d[at..].to_vec();
                        d.extend_from_slice(&dup[..dup.len().min(64)]);
                    }
                }
            }
            let r = std::panic::catch_unwind(|| tcptune_kernel::fuzz_one(&d));
            assert!(r.is_ok(), "panic on {name} mutation {i}");
        }
    }
}
