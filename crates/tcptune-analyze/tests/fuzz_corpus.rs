//! Replays the fuzz corpus (`fuzz/corpus/analyze`, seeds for `cargo fuzz run analyze`) and a
//! seeded mutation run over the fixtures (every encapsulation, gzip, pcapng records) through
//! every stage, the two-capture join included: nothing may panic.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn fuzz_corpus_replays_without_panics() {
    let dir = root().join("fuzz/corpus/analyze");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("fuzz/corpus/analyze exists") {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| tcptune_analyze::fuzz_one(&data));
        assert!(r.is_ok(), "panic on corpus file {}", p.display());
        n += 1;
    }
    assert!(n >= 10, "the corpus has only {n} files");
}

#[test]
fn mutated_fixtures_never_panic() {
    // xorshift: deterministic, so a failure names a reproducible (fixture, iteration).
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for name in [
        "keepalive.pcap",
        "reuse-v6.pcap",
        "zerowin.pcap",
        "dup-reorder.pcapng",
        "encap/l2tp.pcap",
        "encap/geneve.pcap",
        "encap/vxlan.pcap",
        "encap/gre.pcap",
        "encap/mpls.pcap",
        "encap/pppoe.pcap",
        "encap/ppp-with-dir.pcap",
        "encap/juniper-ether.pcap",
        "encap/ipoib.pcap",
        "encap/fddi.pcap",
        "gaps/custom-blocks.pcapng",
        "gaps/keepalive.pcap.gz",
    ] {
        let orig = std::fs::read(root().join("fixtures").join(name)).unwrap();
        let orig = &orig[..orig.len().min(6000)];
        for i in 0..300 {
            let mut d = orig.to_vec();
            for _ in 0..1 + next() % 8 {
                let at = (next() as usize) % d.len();
                match next() % 4 {
                    0 => d[at] ^= 1 << (next() % 8),
                    1 => d[at] = 0xff,
                    2 => d[at] = 0,
                    _ => d.truncate(at.max(1)),
                }
            }
            let r = std::panic::catch_unwind(|| tcptune_analyze::fuzz_one(&d));
            assert!(r.is_ok(), "panic on {name} mutation {i}");
            let r = std::panic::catch_unwind(|| {
                let clock = tcptune_analyze::join::Clock::Estimate;
                tcptune_analyze::join::join_readers(orig, &d[..], ["a", "b"], clock)
                    .map(|j| j.to_string().len())
            });
            assert!(r.is_ok(), "join panicked on {name} mutation {i}");
        }
    }
}
