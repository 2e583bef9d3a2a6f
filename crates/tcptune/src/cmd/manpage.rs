//! The man pages' sections clap does not make: EXIT STATUS and EXAMPLES, per page, inserted by
//! `tcptune _generate man` before the VERSION section clap_mangen writes last.

/// What the exit codes mean for the command a page is about (`tcptune-audit` …).
fn exit_status(page: &str) -> Vec<(&'static str, &'static str)> {
    const USAGE: (&str, &str) = (
        "2",
        "The command line or an input was wrong, or the command could not run; one sentence \
         on standard error says which and what to do.",
    );
    let found: Option<&'static str> = match page {
        "tcptune" => Some("A command found a problem worth acting on (see each command's page)."),
        "tcptune-audit" => Some("The audit recommends changes."),
        "tcptune-test" => Some("The diagnosis found a limit worth acting on."),
        "tcptune-analyze" => {
            Some("The capture shows a problem (retransmissions, zero windows, …).")
        }
        "tcptune-report" => Some("With --against: points differ from the earlier run."),
        "tcptune-lab-run" => Some("Some trials failed (their errors are in trials.jsonl)."),
        _ => None,
    };
    let mut codes = vec![("0", "Success.")];
    match page {
        "tcptune-iperf3" => {
            return vec![
                ("0", "The test or server ran to the end, as iperf3 exits."),
                (
                    "1",
                    "An error, as iperf3 exits (its message on standard error).",
                ),
            ]
        }
        "tcptune-lab-exec" => codes = vec![("N", "The command run in the namespace exited N.")],
        _ => {}
    }
    if let Some(f) = found {
        codes.push(("1", f));
    }
    codes.push(USAGE);
    codes
}

/// Example command lines for a page, each with what it does.
fn examples(page: &str) -> Vec<(&'static str, &'static str)> {
    match page {
        "tcptune" | "tcptune-conns" => vec![
            ("tcptune conns", "Every TCP connection and what limits it."),
            (
                "tcptune conns --over 2s dport 443",
                "Rates and limit shares over two seconds.",
            ),
            (
                "tcptune conns --all --json",
                "Every tcp_info field, for scripts.",
            ),
        ],
        "tcptune-audit" => vec![
            (
                "tcptune audit --path rate=1gbit,rtt=100ms --flows 4",
                "Judge this host's settings.",
            ),
            (
                "tcptune audit --to 198.18.0.2 --rate 1gbit",
                "The RTT measured with ping.",
            ),
        ],
        "tcptune-tune" => vec![
            (
                "tcptune tune --profile lfn",
                "Dry run: the drop-in and ip commands.",
            ),
            (
                "tcptune tune --profile lfn --apply",
                "Apply now, with a snapshot.",
            ),
            ("tcptune tune --rollback", "Restore the snapshot exactly."),
        ],
        "tcptune-test" => vec![
            (
                "tcptune test 198.18.0.2 -t 5",
                "Measure and diagnose against a server.",
            ),
            (
                "tcptune test 198.18.0.2 -P 4 -R --json",
                "Four streams, server sending.",
            ),
        ],
        "tcptune-serve" => vec![
            (
                "tcptune serve",
                "Serve tests on port 5201 (iperf3 clients too).",
            ),
            (
                "tcptune serve -1 --allow 198.18.0.0/15",
                "One test, from one network.",
            ),
        ],
        "tcptune-iperf3" => vec![
            (
                "tcptune iperf3 -c 198.18.0.2 -t 5 -P 4 -R -J",
                "iperf3's command line and JSON.",
            ),
            (
                "tcptune iperf3 -s -D --logfile /var/log/perf.log",
                "A daemon, as iperf3 -s -D.",
            ),
        ],
        "tcptune-analyze" => vec![
            (
                "tcptune analyze capture.pcap",
                "Per-flow statistics and the diagnosis.",
            ),
            (
                "tcptune analyze --same-clock client.pcap server.pcap",
                "Both ends, joined.",
            ),
        ],
        "tcptune-report" => vec![
            (
                "tcptune report results/quickstart",
                "Redraw an experiment's report.",
            ),
            (
                "tcptune report NEW --against OLD",
                "Compare a rerun with an earlier run.",
            ),
        ],
        "tcptune-schema" => vec![
            (
                "tcptune schema --list",
                "The commands with a --json document.",
            ),
            ("tcptune schema test", "The JSON Schema of test --json."),
        ],
        p if p.starts_with("tcptune-model") => vec![
            (
                "tcptune model bdp --rate 10gbit --rtt 1.58ms",
                "Bandwidth-delay product.",
            ),
            (
                "tcptune model buffers --rate 10gbit --rtt 100ms --flows 4",
                "Buffer sizes.",
            ),
            (
                "tcptune model mathis --rtt 100ms --loss 1e-4",
                "Loss-bound throughput.",
            ),
        ],
        p if p.starts_with("tcptune-lab") => vec![
            (
                "tcptune lab up --name demo --rate 100mbit --rtt 20ms",
                "An emulated path.",
            ),
            (
                "tcptune lab exec demo server -- tcptune serve -1",
                "Run in its server.",
            ),
            (
                "tcptune lab run examples/quickstart/spec.toml --out results/q",
                "An experiment.",
            ),
            ("tcptune lab down --name demo", "Remove it."),
        ],
        "tcptune-exporter" => vec![
            (
                "tcptune exporter",
                "Serve /metrics and /connections on 127.0.0.1:19241, one group for every connection.",
            ),
            (
                "tcptune exporter --group-by port,cc --groups /etc/tcptune/groups.toml --max-series 500",
                "Group by the services named in the map file and by congestion control, at most 500 series.",
            ),
        ],
        _ => live_examples(page),
    }
}

/// The examples of the live views: `watch` and `view`.
fn live_examples(page: &str) -> Vec<(&'static str, &'static str)> {
    match page {
        "tcptune-watch" => vec![
            ("tcptune watch", "The live table, sorted by rate; q quits."),
            (
                "tcptune watch --detail --interval 10ms dport 5201",
                "One connection's history.",
            ),
            (
                "tcptune watch --closed --record closed.jsonl",
                "Each connection as it closes.",
            ),
            (
                "tcptune watch --web --record session.jsonl",
                "The live view as a web page on 127.0.0.1:19242 (charts per connection), kept for tcptune view.",
            ),
        ],
        "tcptune-view" => vec![(
            "tcptune view session.jsonl",
            "Open a recording of watch --web in the same page, offline.",
        )],
        _ => vec![],
    }
}

/// Roff-escapes text for a man page (hyphens as minus signs, so they copy as `-`).
fn roff(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-")
}

/// The page `name` (`tcptune-audit.1`'s stem) with EXIT STATUS and EXAMPLES before VERSION
/// (appended when clap wrote no VERSION section).
pub fn with_sections(name: &str, page: &str) -> String {
    let mut extra = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in exit_status(name) {
        extra += &format!(".TP\n\\fB{code}\\fR\n{}\n", roff(meaning));
    }
    let ex = examples(name);
    if !ex.is_empty() {
        extra += ".SH EXAMPLES\n";
        for (cmd, what) in ex {
            extra += &format!(".TP\n\\fB{}\\fR\n{}\n", roff(cmd), roff(what));
        }
    }
    match page.find("\n.SH VERSION") {
        Some(i) => format!("{}\n{extra}{}", &page[..i], &page[i + 1..]),
        None => format!("{page}{extra}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_go_before_version_with_each_code() {
        let page = ".TH x 1\n.SH NAME\nx\n.SH VERSION\nv0.1.0\n";
        let out = with_sections("tcptune-audit", page);
        let exit = out.find(".SH \"EXIT STATUS\"").unwrap();
        let examples = out.find(".SH EXAMPLES").unwrap();
        let version = out.find(".SH VERSION").unwrap();
        assert!(exit < examples && examples < version, "{out}");
        for code in ["\\fB0\\fR", "\\fB1\\fR", "\\fB2\\fR"] {
            assert!(out.contains(code), "{out}");
        }
        assert!(out.contains("tcptune tune") || out.contains("tcptune audit \\-\\-path"));
        // Commands that never report a problem have no exit 1.
        let conns = with_sections("tcptune-conns", page);
        assert!(!conns.contains("\\fB1\\fR"), "{conns}");
    }
}
