//! `tcptune analyze` as a user runs it: files and standard input, text and JSON, graphs,
//! flagged packets, exit codes, and damaged or wrong inputs (one clear sentence, exit 2, or a
//! partial result that says what was skipped; never a panic).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcptune-cli-analyze-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn no_panic(o: &Output) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "tcptune panicked: {err}");
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

#[test]
fn lossy_capture_exits_1_and_json_matches_text() {
    let f = fixture("loss.pcap");
    let text = run(&["analyze", f.to_str().unwrap()]);
    no_panic(&text);
    assert_eq!(text.status.code(), Some(1), "retransmissions are a finding");
    let j = run(&["analyze", "--json", f.to_str().unwrap()]);
    assert_eq!(j.status.code(), Some(1));
    let v = json(&j);
    assert_eq!(v["command"], "analyze");
    let r = &v["result"];
    let retrans = r["flags"]["retransmission"].as_u64().unwrap();
    assert!(retrans > 0);
    let out = String::from_utf8(text.stdout).unwrap();
    assert!(
        out.contains(&format!("retransmission {retrans}")),
        "text and JSON disagree: {out}"
    );
    // Totals are the sum over flows.
    let sum: u64 = r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["flags"]["retransmission"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, retrans);
    assert!(!r["flows"][0]["diagnosis"].as_array().unwrap().is_empty());
}

#[test]
fn standard_input_gives_the_same_result_as_the_file() {
    let f = fixture("dup-reorder.pcapng");
    let from_file = json(&run(&["analyze", "--json", f.to_str().unwrap()]));
    let mut child = bin()
        .args(["analyze", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let data = std::fs::read(&f).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    no_panic(&out);
    let from_stdin = json(&out);
    assert_eq!(from_stdin["result"]["input"], "-");
    assert_eq!(from_file["result"]["flows"], from_stdin["result"]["flows"]);
    assert_eq!(from_file["result"]["format"], "pcapng");
}

#[test]
fn clean_capture_exits_0() {
    let f = fixture("keepalive.pcap");
    let o = run(&["analyze", f.to_str().unwrap()]);
    no_panic(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("keep_alive"));
}

#[test]
fn packets_lists_each_flagged_packet_with_a_reason() {
    let f = fixture("zerowin.pcap");
    let v = json(&run(&[
        "analyze",
        "--json",
        "--packets",
        f.to_str().unwrap(),
    ]));
    let r = &v["result"];
    let pk = r["packets"].as_array().unwrap();
    let zero = pk
        .iter()
        .filter(|p| {
            p["flags"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n == "zero_window")
        })
        .count() as u64;
    assert_eq!(zero, r["flags"]["zero_window"].as_u64().unwrap());
    assert!(zero > 0);
    assert!(pk.iter().all(|p| !p["why"].as_str().unwrap().is_empty()));
}

#[test]
fn graphs_are_written_as_svg() {
    let dir = tmp("graphs");
    let _ = std::fs::remove_dir_all(&dir);
    let f = fixture("winfull.pcap");
    let o = run(&[
        "analyze",
        f.to_str().unwrap(),
        "--graphs",
        dir.to_str().unwrap(),
    ]);
    no_panic(&o);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "stream-0-rtt.svg",
            "stream-0-throughput.svg",
            "stream-0-tseq.svg",
            "stream-0-window.svg"
        ]
    );
    for n in names {
        let s = std::fs::read_to_string(dir.join(&n)).unwrap();
        assert!(
            s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
            "{n}"
        );
    }
    let tseq = std::fs::read_to_string(dir.join("stream-0-tseq.svg")).unwrap();
    assert!(tseq.contains("receive window edge") && tseq.contains("ACK"));
}

fn expect_refused(o: &Output, mentions: &str) {
    no_panic(o);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");
    assert!(err.contains(mentions), "{err}");
}

#[test]
fn unreadable_or_wrong_inputs_are_one_sentence_and_exit_2() {
    expect_refused(
        &run(&["analyze", "/nonexistent/x.pcap"]),
        "/nonexistent/x.pcap",
    );
    let empty = tmp("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    expect_refused(&run(&["analyze", empty.to_str().unwrap()]), "empty");
    let garbage = tmp("garbage.pcap");
    std::fs::write(&garbage, b"GET / HTTP/1.1\r\nHost: example\r\n\r\n").unwrap();
    expect_refused(&run(&["analyze", garbage.to_str().unwrap()]), "not a pcap");
    let dir = std::env::temp_dir();
    expect_refused(&run(&["analyze", dir.to_str().unwrap()]), "cannot");
}

#[test]
fn damaged_captures_give_a_partial_result_that_says_so() {
    let data = std::fs::read(fixture("loss.pcap")).unwrap();
    // Cut in the middle of a record.
    let cut = tmp("cut.pcap");
    std::fs::write(&cut, &data[..data.len() / 2 + 7]).unwrap();
    let o = run(&["analyze", "--json", cut.to_str().unwrap()]);
    no_panic(&o);
    assert!(o.status.code().unwrap() <= 1);
    let r = &json(&o)["result"];
    let problem = r["capture_problem"].as_str().unwrap();
    assert!(problem.contains("ends in the middle"), "{problem}");
    let frames = r["frames"].as_u64().unwrap();
    assert!(frames > 100 && problem.contains(&format!("{frames} complete frames")));
    // A record claiming a huge length: stop there, keep what came before.
    let mut huge = data.clone();
    let second = 24 + 16 + u32::from_le_bytes(data[32..36].try_into().unwrap()) as usize;
    huge[second + 8..second + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let p = tmp("huge.pcap");
    std::fs::write(&p, &huge).unwrap();
    let r = json(&run(&["analyze", "--json", p.to_str().unwrap()]))["result"].clone();
    assert_eq!(r["frames"], 1);
    assert!(r["capture_problem"].as_str().unwrap().contains("corrupt"));
    // Zero snaplen in the header: the records are still read.
    let mut zero = data.clone();
    zero[16..20].copy_from_slice(&0u32.to_le_bytes());
    let p = tmp("zero-snaplen.pcap");
    std::fs::write(&p, &zero).unwrap();
    let full = json(&run(&[
        "analyze",
        "--json",
        fixture("loss.pcap").to_str().unwrap(),
    ]));
    let z = json(&run(&["analyze", "--json", p.to_str().unwrap()]));
    assert_eq!(z["result"]["flows"], full["result"]["flows"]);
}

/// One exit-code rule for pcap and pcapng alike (README, "Capture analysis"): a file whose
/// header is unusable, or none of whose frames could be decoded, exits 2 with one sentence; a
/// damaged file with frames before the damage gives a partial result that says where it
/// stopped. The fixtures are made by fixtures/tools/gaps.py.
#[test]
fn unusable_captures_exit_2_and_partial_ones_say_what_was_skipped() {
    for (rel, mentions) in [
        ("gaps/pcap-header-cut.pcap", "pcap file header is cut short"),
        (
            "gaps/pcapng-header-cut.pcapng",
            "section header is cut short",
        ),
        ("gaps/pcapng-bad-bom.pcapng", "byte-order magic"),
        ("gaps/user0.pcap", "link type 147"),
    ] {
        expect_refused(&run(&["analyze", fixture(rel).to_str().unwrap()]), mentions);
    }
    let o = run(&[
        "analyze",
        fixture("gaps/bad-trailer.pcapng").to_str().unwrap(),
    ]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "keep-alives only: no finding");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("5 frames") && out.contains("warning: corrupt capture"),
        "{out}"
    );
}

#[test]
fn gzip_captures_are_read_directly() {
    let plain = json(&run(&[
        "analyze",
        "--json",
        fixture("keepalive.pcap").to_str().unwrap(),
    ]));
    let o = run(&[
        "analyze",
        "--json",
        fixture("gaps/keepalive.pcap.gz").to_str().unwrap(),
    ]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0));
    let gz = json(&o);
    assert_eq!(gz["result"]["flows"], plain["result"]["flows"]);
    assert_eq!(gz["result"]["capture_notes"][0], "decompressed from gzip");
}

/// Two captures of one path: `dup-reorder.pcapng` is `loss.pcap` after
/// `fixtures/tools/rewrite.py --seed 7 --dup 2 --swap 2`, which reports "swapped 21,
/// duplicated 25" (fixtures/README.md): the join must find exactly those, lose nothing, and
/// match every original packet.
#[test]
fn two_captures_of_one_path_are_joined() {
    let (a, b) = (fixture("loss.pcap"), fixture("dup-reorder.pcapng"));
    let o = run(&[
        "analyze",
        "--json",
        "--same-clock",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    no_panic(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "duplication and reordering are findings"
    );
    let v = json(&o);
    assert_eq!(v["command"], "analyze");
    let r = &v["result"];
    let t = &r["totals"];
    assert_eq!(t["duplicated"], 25);
    assert_eq!(t["reordered"], 21);
    assert_eq!(t["lost_between"], 0);
    assert_eq!(t["not_seen_upstream"], 0);
    assert_eq!(t["matched"], r["packets"][0]);
    assert_eq!(r["clock"]["method"], "same-clock");
    let text = run(&["analyze", a.to_str().unwrap(), b.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(out.contains("duplicated 25, reordered 21"), "{out}");
    assert!(out.contains("clock offset"), "the estimate is said: {out}");
}

#[test]
fn joining_unrelated_or_unreadable_captures_is_refused() {
    let (a, ka) = (fixture("loss.pcap"), fixture("keepalive.pcap"));
    expect_refused(
        &run(&["analyze", a.to_str().unwrap(), ka.to_str().unwrap()]),
        "no packet was seen in both",
    );
    expect_refused(
        &run(&[
            "analyze",
            a.to_str().unwrap(),
            fixture("gaps/pcap-header-cut.pcap").to_str().unwrap(),
        ]),
        "pcap-header-cut.pcap",
    );
    expect_refused(
        &run(&[
            "analyze",
            "--packets",
            a.to_str().unwrap(),
            ka.to_str().unwrap(),
        ]),
        "--packets",
    );
}

/// `loss.pcap` is a receiver's capture of a path that dropped 3% of data packets before it (see
/// fixtures/README.md): every hole the capture shows is filled later by the sender's repair, so
/// the verdict blames the path, not the capture, and compares the loss with its bound.
#[test]
fn holes_filled_later_are_upstream_loss_not_capture_drops() {
    let f = fixture("loss.pcap");
    let j = run(&["analyze", "--json", f.to_str().unwrap()]);
    no_panic(&j);
    let v = json(&j);
    let flow = &v["result"]["flows"][0];
    let holes = flow["flags"]["lost_segment"].as_u64().unwrap();
    assert!(holes > 0);
    assert_eq!(flow["a_to_b"]["gaps"]["filled_later"].as_u64(), Some(holes));
    assert_eq!(flow["a_to_b"]["gaps"]["never_filled"].as_u64(), Some(0));
    let findings: Vec<&str> = flow["diagnosis"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x.as_str())
        .collect();
    assert!(
        findings
            .iter()
            .any(|x| x.contains("not dropped by the capture")),
        "{findings:?}"
    );
    assert!(
        !findings
            .iter()
            .any(|x| x.contains("the capture missed packets")),
        "{findings:?}"
    );
    // The loss was compared with the loss bound, as `test` does.
    assert!(
        findings.iter().any(|x| x.contains("Mathis bound")),
        "{findings:?}"
    );
}
