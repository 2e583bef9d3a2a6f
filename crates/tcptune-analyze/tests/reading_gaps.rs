//! Captures that tcptune once read wrongly or not at all (issue 18's gaps), each a small
//! fixture made by `fixtures/tools/encap.py` or `fixtures/tools/gaps.py` from the packets of
//! `fixtures/keepalive.pcap`: the analysis of each must be the original's (same flows, same
//! flags, same statistics), or the damage must be reported where tshark stops too.
//! (`tshark_crosscheck.rs` compares the same files with tshark packet by packet.)

use std::fs::File;
use std::path::PathBuf;

use tcptune_analyze::{analyze_reader, AnalyzeReport, Options};
use tcptune_wire::CaptureError;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn analyze(rel: &str) -> Result<AnalyzeReport, CaptureError> {
    let opts = Options {
        packets: true,
        series: false,
    };
    analyze_reader(File::open(fixture(rel)).unwrap(), rel, opts).map(|d| d.report)
}

/// The flows as JSON without what legitimately differs between encapsulations.
fn flows(r: &AnalyzeReport) -> serde_json::Value {
    serde_json::to_value(&r.flows).unwrap()
}

#[test]
fn every_encapsulation_gives_the_original_analysis() {
    let orig = analyze("keepalive.pcap").unwrap();
    assert!(orig.flags.keep_alive > 0 && orig.tcp_segments > 20);
    let mut names: Vec<String> = std::fs::read_dir(fixture("encap"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for want in [
        "ppp.pcap",
        "ppp-hdlc.pcap",
        "ppp-with-dir.pcap",
        "c-hdlc.pcap",
        "pppoe.pcap",
        "mpls.pcap",
        "ipip.pcap",
        "gre.pcap",
        "l2tp.pcap",
        "geneve.pcap",
        "vxlan.pcap",
        "ipoib.pcap",
        "juniper-ether.pcap",
        "fddi.pcap",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    for n in &names {
        let r = analyze(&format!("encap/{n}")).unwrap();
        assert_eq!(r.tcp_segments, orig.tcp_segments, "{n}: TCP segments");
        assert_eq!(r.skipped.not_tcp, 0, "{n}");
        assert_eq!(flows(&r), flows(&orig), "{n}: flows differ");
    }
}

#[test]
fn pcap_before_2_3_and_gzip_read_as_the_original() {
    let orig = analyze("keepalive.pcap").unwrap();
    let old = analyze("gaps/pcap-v2.2.pcap").unwrap();
    assert_eq!(old.frames, orig.frames);
    assert!(old.capture_problem.is_none());
    assert_eq!(flows(&old), flows(&orig));
    assert!(
        old.capture_notes.iter().any(|n| n.contains("version 2.2")),
        "{:?}",
        old.capture_notes
    );
    let gz = analyze("gaps/keepalive.pcap.gz").unwrap();
    assert_eq!(flows(&gz), flows(&orig));
    assert_eq!(gz.capture_notes, vec!["decompressed from gzip".to_string()]);
}

#[test]
fn pcapng_records_without_packets_take_frame_numbers_as_in_wireshark() {
    let orig = analyze("keepalive.pcap").unwrap();
    let ng = analyze("gaps/custom-blocks.pcapng").unwrap();
    assert_eq!(ng.frames, orig.frames);
    assert_eq!(flows(&ng), flows(&orig));
    // Records after packet 3, 6 and 10 (see gaps.py): frame n of the original is frame
    // n + (records before it) here.
    let shift = |n: u64| n + u64::from(n > 3) + u64::from(n > 6) + u64::from(n > 10);
    let frames = |r: &AnalyzeReport| -> Vec<u64> {
        r.packets
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| p.frame)
            .collect()
    };
    let want: Vec<u64> = frames(&orig).into_iter().map(shift).collect();
    assert!(
        want.iter().any(|&n| n > 11),
        "flags after the records: {want:?}"
    );
    assert_eq!(frames(&ng), want);
    assert!(ng
        .capture_notes
        .iter()
        .any(|n| n.contains("3 pcapng records")));
}

#[test]
fn pcapng_damage_stops_where_wireshark_stops_and_says_so() {
    let r = analyze("gaps/bad-trailer.pcapng").unwrap();
    assert_eq!(r.frames, 5, "the 6th block's lengths disagree");
    let p = r.capture_problem.unwrap();
    assert!(p.contains("not repeated at the block's end"), "{p}");
    let r = analyze("gaps/section-v2.pcapng").unwrap();
    let orig = analyze("keepalive.pcap").unwrap();
    assert_eq!(r.frames, orig.frames / 2);
    let p = r.capture_problem.unwrap();
    assert!(p.contains("version 2.0"), "{p}");
}

#[test]
fn unusable_headers_and_undecodable_links_are_errors_not_empty_results() {
    for rel in [
        "gaps/pcap-header-cut.pcap",
        "gaps/pcapng-header-cut.pcapng",
        "gaps/pcapng-bad-bom.pcapng",
    ] {
        match analyze(rel) {
            Err(CaptureError::BadHeader(why)) => assert!(!why.is_empty()),
            other => panic!("{rel}: expected an unusable header, got {other:?}"),
        }
    }
    let r = analyze("gaps/user0.pcap").unwrap();
    let why = r.unusable().expect("nothing decodable");
    assert!(why.contains("link type 147"), "{why}");
    assert_eq!(r.skipped.unsupported_link_types[0].frames, r.frames);
    assert!(r
        .to_string()
        .contains("user-defined (DLT_USER) (link type 147)"));
    // A readable capture is never unusable, even one with a single TCP segment.
    assert!(analyze("keepalive.pcap").unwrap().unusable().is_none());
}
