//! `-O` (omit) and retransmissions, as iperf3 counts them: the seconds omitted at the start
//! (slow start, where a lossy path retransmits most) are left out of the final sender total,
//! which is then the sum of the intervals that were not omitted. Privileged: a namespace whose
//! loopback loses 1% of the data segments (nftables), against a real iperf3 3.12 server.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tcptune_testkit::{line_channel, privileged, wait_for_line, Kill, Netns};

fn retrans(v: &Value) -> i64 {
    v["sum"]["retransmits"].as_i64().unwrap_or(0)
}

#[test]
fn omitted_seconds_retransmissions_are_not_in_the_final_total() {
    if !privileged("omitted_seconds_retransmissions_are_not_in_the_final_total") {
        return;
    }
    let ns = Netns::new("omit");
    // 1% of the data segments to the server lost on the way in (nftables: netem may not be
    // built; a drop on the way out would be a local send failure, which TCP sends again
    // without counting a retransmission).
    ns.exec(&[
        "nft",
        "add table inet tt; add chain inet tt in { type filter hook input priority 0; }; \
         add rule inet tt in tcp dport 5201 meta length > 1000 numgen random mod 100 < 1 drop",
    ]);
    let mut srv = Kill(
        ns.command(&["iperf3", "-s", "-p", "5201", "--forceflush"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 is installed (scripts/deps)"),
    );
    let lines = line_channel(srv.0.stdout.take().unwrap());
    wait_for_line(&lines, Duration::from_secs(20), |l| {
        l.contains("Server listening")
    })
    .expect("iperf3 -s ready");
    let o = ns
        .command(&[
            env!("CARGO_BIN_EXE_tcptune"),
            "iperf3",
            "-c",
            "127.0.0.1",
            "-t",
            "2",
            "-O",
            "1",
            "-C",
            "cubic",
            "-J",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let intervals = doc["intervals"].as_array().unwrap();
    let (omitted, counted): (Vec<&Value>, Vec<&Value>) = intervals
        .iter()
        .partition(|i| i["sum"]["omitted"].as_bool() == Some(true));
    let omitted: i64 = omitted.iter().map(|i| retrans(i)).sum();
    let counted: i64 = counted.iter().map(|i| retrans(i)).sum();
    let total = doc["end"]["sum_sent"]["retransmits"].as_i64().unwrap();
    // The total is the counted intervals' (their edges are 20 Hz samples of the same counter,
    // so a few retransmissions may fall on either side), never the omitted ones' too.
    let slack = 2 + counted / 20;
    // The lossy path retransmitted while omitting, so leaving it out is visible.
    assert!(
        omitted > 2 * slack,
        "omitted {omitted}, counted {counted}, total {total}"
    );
    assert!(
        (total - counted).abs() <= slack,
        "final {total} vs the counted intervals' {counted} (omitted {omitted})"
    );
    assert!(
        total < counted + omitted - slack,
        "final {total} includes the omitted {omitted}"
    );
}
