//! Cross-check against tshark 4.0: on every capture under `fixtures/`, each packet's Wireshark
//! analysis flags (and duplicate-ACK number) from tcptune must equal tshark's, so every flag's
//! count is equal flow by flow. tshark is installed by `scripts/deps`; without it (or with
//! another major version, whose rules differ) the test says so and skips, or fails when
//! `TCPTUNE_REQUIRE_PRIVILEGED` is set (CI).

mod common;

#[test]
fn flags_equal_tshark_packet_by_packet_on_every_fixture() {
    if let Some(why) = common::tshark_unusable() {
        tcptune_testkit::skip_without_tool(
            "flags_equal_tshark_packet_by_packet_on_every_fixture",
            &why,
        );
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
    // The same packets in every encapsulation tcptune follows down to TCP
    // (fixtures/tools/encap.py), and the files whose reading had gaps (fixtures/tools/gaps.py):
    // a pre-2.3 pcap, a gzip-compressed one, and pcapng blocks Wireshark numbers as frames.
    let fx = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut encap: Vec<_> = std::fs::read_dir(fx.join("encap"))
        .expect("fixtures/encap exists")
        .map(|e| e.unwrap().path())
        .collect();
    encap.sort();
    assert!(
        encap.len() >= 14,
        "expected the encapsulations, found {encap:?}"
    );
    files.extend(encap);
    for name in [
        "pcap-v2.2.pcap",
        "keepalive.pcap.gz",
        "custom-blocks.pcapng",
    ] {
        files.push(fx.join("gaps").join(name));
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
