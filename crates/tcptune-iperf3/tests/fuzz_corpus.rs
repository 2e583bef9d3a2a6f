//! Replays the iperf3 session fuzz corpus (`fuzz/corpus/iperf3`, seeds for
//! `cargo fuzz run iperf3`: the recorded iperf3 3.12 control streams, hostile variants and UDP
//! datagrams) and a seeded mutation run over the recordings through `tcptune_iperf3::fuzz_one`: no panic, no
//! broken invariant.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn fuzz_corpus_replays_without_panics() {
    let dir = root().join("fuzz/corpus/iperf3");
    let mut n = 0;
    let mut reached_the_end = 0;
    for e in std::fs::read_dir(&dir).expect("fuzz/corpus/iperf3 exists") {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| tcptune_iperf3::fuzz_one(&data));
        let written = r.unwrap_or_else(|_| panic!("panic on corpus file {}", p.display()));
        // The whole recorded sessions drive our side to its last message.
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("whole-")
        {
            assert!(
                written > 100,
                "{}: only {written} bytes written",
                p.display()
            );
            reached_the_end += 1;
        }
        n += 1;
    }
    assert!(n >= 10, "the corpus has only {n} files");
    assert_eq!(reached_the_end, 4);
}

#[test]
fn mutated_recordings_never_panic() {
    // xorshift: deterministic, so a failure names a reproducible (file, iteration).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let dir = root().join("fuzz/corpus/iperf3");
    for name in [
        "whole-server-forward-P2",
        "whole-client-forward-P2",
        "whole-server-bidir",
        "whole-client-bidir",
        "udp-loss-reorder",
    ] {
        let orig = std::fs::read(dir.join(name)).unwrap();
        for i in 0..2000 {
            let mut d = orig.clone();
            for _ in 0..1 + next() % 6 {
                // Byte 0 picks the side: keep it.
                let at = 1 + (next() as usize) % (d.len() - 1);
                match next() % 6 {
                    0 => d[at] ^= 1 << (next() % 8),
                    1 => d[at] = 0xff,
                    2 => d[at] = 0,
                    3 => d[at] = b'"',
                    4 => d.truncate(at.max(2)),
                    _ => d.insert(at, (next() % 256) as u8),
                }
            }
            let r = std::panic::catch_unwind(|| tcptune_iperf3::fuzz_one(&d));
            assert!(r.is_ok(), "panic on {name} mutation {i}");
        }
    }
}
