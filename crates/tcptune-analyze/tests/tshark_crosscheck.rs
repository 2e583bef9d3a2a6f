//! Cross-check against tshark 4.0: on every capture under `fixtures/`, each packet's Wireshark
//! analysis flags (and duplicate-ACK number) from tcptune must equal tshark's, so every flag's
//! count is equal flow by flow. tshark is installed by `scripts/deps`; without it (or with
//! another major version, whose rules differ) the test says so and skips.

mod common;

#[test]
fn flags_equal_tshark_packet_by_packet_on_every_fixture() {
    if let Some(why) = common::tshark_unusable() {
        eprintln!("SKIP flags_equal_tshark_packet_by_packet_on_every_fixture: {why}");
        return;
    }
    let mut files = common::fixtures();
    assert!(files.len() >= 6, "expected the fixtures, found {files:?}");
    // The same packets on every link type and byte order (see fuzz/make-corpus.py).
    let corpus =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/analyze");
    for name in [
        "raw-ipv4",
        "null-loopback",
        "loop",
        "linux-sll",
        "linux-sll2",
        "vlan-qinq",
        "big-endian",
    ] {
        files.push(corpus.join(format!("{name}.pcap")));
    }
    let mut failures = Vec::new();
    let mut compared = 0;
    for path in &files {
        let (mut diffs, n) = common::compare(path);
        compared += n;
        if !diffs.is_empty() {
            diffs.truncate(40);
            failures.push(format!("{}:\n  {}", path.display(), diffs.join("\n  ")));
        }
    }
    assert!(
        failures.is_empty(),
        "differences from tshark:\n{}",
        failures.join("\n")
    );
    assert!(
        compared > 300,
        "the fixtures should carry flagged packets, got {compared}"
    );
}
