//! iperf3's command line (`tcptune iperf3 …`, or the binary run as `iperf3`) rewritten into
//! `tcptune test` or `tcptune serve`, and the iperf3 options tcptune does not act on, refused in
//! one sentence before clap sees them.

use std::ffi::OsString;

/// iperf3 options tcptune does not act on, each with the sentence that refuses it. Options
/// tcptune implements are parsed by `test`/`serve` under iperf3's spellings.
const REFUSED: &[(&[&str], &str)] = &[
    (&["-d", "--debug"], "tcptune has no debug output; drop -d"),
    (&["-F", "--file"], "sending or receiving a file (-F) is not supported; drop -F"),
    (&["-A", "--affinity"], "CPU affinity (-A) is not supported; run tcptune under taskset instead"),
    (&["--bind-dev"], "binding to a device (--bind-dev) is not supported; bind to its address with -B"),
    (&["-L", "--flowlabel"], "IPv6 flow labels (-L) are not supported; drop -L"),
    (&["--sctp", "--nstreams", "-X", "--xbind"], "SCTP is not supported; tcptune tests TCP"),
    (
        &[
            "--username",
            "--rsa-public-key-path",
            "--rsa-private-key-path",
            "--authorized-users-path",
            "--time-skew-threshold",
            "--use-pkcs1-padding",
        ],
        "authentication is not supported; restrict clients with tcptune serve --allow CIDR",
    ),
    (&["--fq-rate", "--pacing-timer"], "fair-queue pacing options are not supported; cap the rate with -b"),
    (
        &["--repeating-payload", "--dont-fragment", "--gsro"],
        "this UDP option is not supported; drop it (plain -u works)",
    ),
    (&["--skip-rx-copy"], "--skip-rx-copy is not supported; drop it"),
    (&["--timestamps"], "--timestamps is not supported; the JSON output (-J) has each interval's time"),
    (&["--rcv-timeout", "--snd-timeout", "--cntl-ka"], "this timeout option is not supported; tcptune's own deadlines end a stuck test"),
    (&["--server-bitrate-limit", "--idle-timeout"], "this server limit is not supported; restrict clients with tcptune serve --allow and --max-tests"),
    (&["--dscp"], "--dscp is not supported; give the TOS byte with -S (DSCP × 4)"),
    (&["-m", "--mptcp"], "MPTCP (-m) is not supported; drop -m"),
    (&["--json-stream-full-output"], "--json-stream-full-output is not supported; use -J for the full document"),
];

/// iperf3 options that take a value (so the scan skips it).
const WITH_VALUE: &[&str] = &[
    "-p",
    "--port",
    "-f",
    "--format",
    "-i",
    "--interval",
    "-I",
    "--pidfile",
    "-F",
    "--file",
    "-A",
    "--affinity",
    "-B",
    "--bind",
    "--bind-dev",
    "--logfile",
    "-c",
    "--client",
    "-b",
    "--bitrate",
    "--bandwidth",
    "-t",
    "--time",
    "-n",
    "--bytes",
    "--num",
    "-k",
    "--blockcount",
    "-l",
    "--length",
    "-P",
    "--parallel",
    "-w",
    "--window",
    "-M",
    "--set-mss",
    "-S",
    "--tos",
    "-L",
    "--flowlabel",
    "-O",
    "--omit",
    "-T",
    "--title",
    "-C",
    "--congestion",
    "--linux-congestion",
    "-X",
    "--xbind",
    "--cport",
    "--connect-timeout",
    "--extra-data",
    "--username",
    "--rsa-public-key-path",
    "--rsa-private-key-path",
    "--authorized-users-path",
    "--time-skew-threshold",
    "--fq-rate",
    "--pacing-timer",
    "--server-bitrate-limit",
    "--idle-timeout",
    "--rcv-timeout",
    "--snd-timeout",
    "--dscp",
    "--nstreams",
    "--allow",
    "--max-tests",
];

/// Accepted and without effect, because tcptune already does what they ask.
const ALREADY: &[&str] = &[
    // The text output always has the detail -V adds (CPU use, the settings).
    "-V",
    "--verbose",
    // Every line is flushed as it is printed.
    "--forceflush",
];

/// What `main` should parse: argv unchanged, argv rewritten from iperf3's, or a refusal.
pub enum Argv {
    Parse(Vec<OsString>),
    /// Print this and exit 0 (`-v`).
    Print(String),
    /// A refused option: the sentence, and whether iperf3's JSON error form was asked for.
    Refuse(String, bool),
}

/// Whether these arguments ask for iperf3's JSON output, so an error is printed as JSON.
pub fn wants_iperf_json(argv: &[OsString]) -> bool {
    argv.iter().any(|a| a == "-J" || a == "--json-stream")
        || (argv.get(1).is_some_and(|a| a == "iperf3") && argv.iter().any(|a| a == "--json"))
}

/// Rewrites `tcptune iperf3 ARGS` (or ARGS of a binary named `iperf3`) into `tcptune test` or
/// `tcptune serve`, and refuses, in one sentence, the iperf3 options tcptune does not act on
/// (for `test` and `serve` too).
pub fn rewrite_argv(argv: Vec<OsString>) -> Argv {
    let name_is_iperf3 = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == "iperf3");
    let (prog, rest): (OsString, Vec<OsString>) = if name_is_iperf3 {
        ("tcptune".into(), argv[1..].to_vec())
    } else if argv.get(1).is_some_and(|a| a == "iperf3") {
        (argv[0].clone(), argv[2..].to_vec())
    } else if argv.get(1).is_some_and(|a| a == "test" || a == "serve") {
        let json = wants_iperf_json(&argv);
        if let Some(why) = refused(&argv[2..]) {
            return Argv::Refuse(why, json);
        }
        return Argv::Parse(argv);
    } else {
        return Argv::Parse(argv);
    };
    let json = rest
        .iter()
        .any(|a| a == "-J" || a == "--json" || a == "--json-stream");
    if let Some(why) = refused(&rest) {
        return Argv::Refuse(why, json);
    }
    let mut server = false;
    let mut out: Vec<OsString> = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        let s = a.to_string_lossy();
        let opt = s.split_once('=').map(|(o, _)| o).unwrap_or(&s);
        if WITH_VALUE.contains(&opt) && !s.contains('=') {
            out.push(a.clone());
            if let Some(v) = rest.get(i + 1) {
                out.push(v.clone());
            }
            i += 2;
            continue;
        }
        match opt {
            "-s" | "--server" => server = true,
            "--json" => out.push("-J".into()),
            "-h" | "--help" => {
                return Argv::Print(
                    "tcptune iperf3 takes iperf3's command line: -c HOST [options] runs a test \
                     (options: tcptune test --help), -s [options] serves tests (tcptune serve \
                     --help).\n"
                        .into(),
                )
            }
            "-v" | "--version" => {
                return Argv::Print(format!(
                    "tcptune {} (iperf3-compatible: control protocol of iperf 3.x, TCP and UDP tests)\n",
                    env!("CARGO_PKG_VERSION")
                ))
            }
            o if ALREADY.contains(&o) => {}
            _ => out.push(a.clone()),
        }
        i += 1;
    }
    let client = out.iter().any(|a| {
        let s = a.to_string_lossy();
        s == "-c"
            || s == "--client"
            || s.starts_with("--client=")
            || (s.starts_with("-c") && s.len() > 2 && !s.starts_with("--"))
    });
    let verb = match (server, client) {
        (true, true) => {
            return Argv::Refuse(
                "-s and -c together: give -s to serve or -c HOST to test, not both".into(),
                json,
            )
        }
        (true, false) => "serve",
        (false, true) => "test",
        (false, false) => {
            return Argv::Refuse(
                "iperf3 needs -c HOST (run a test) or -s (serve tests); add one".into(),
                json,
            )
        }
    };
    let mut full = vec![prog, verb.into()];
    if verb == "test" {
        // Scripts test iperf3's exit status: 0 for a completed test.
        full.push("--iperf3-exit-codes".into());
    }
    full.extend(out);
    Argv::Parse(full)
}

/// The sentence refusing the first option in `args` that tcptune does not act on.
fn refused(args: &[OsString]) -> Option<String> {
    let mut i = 0;
    while i < args.len() {
        let s = args[i].to_string_lossy();
        let opt = s.split_once('=').map(|(o, _)| o).unwrap_or(&s);
        if let Some((_, why)) = REFUSED.iter().find(|(names, _)| names.contains(&opt)) {
            return Some(format!("{opt}: {why}"));
        }
        // Attached short forms: -d3 (iperf3's debug level), -A2.
        let short = opt
            .get(..2)
            .filter(|_| opt.len() > 2 && !opt.starts_with("--"));
        if let Some(short) = short {
            if let Some((_, why)) = REFUSED.iter().find(|(names, _)| names.contains(&short)) {
                return Some(format!("{short}: {why}"));
            }
        }
        i += if WITH_VALUE.contains(&opt) && !s.contains('=') {
            2
        } else {
            1
        };
    }
    None
}


#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    fn parsed(a: Argv) -> String {
        match a {
            Argv::Parse(v) => v
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
            Argv::Print(p) => format!("print {p}"),
            Argv::Refuse(r, j) => format!("refuse {r} {j}"),
        }
    }

    #[test]
    fn iperf3_argv_becomes_test_or_serve() {
        assert_eq!(
            parsed(rewrite_argv(argv(
                "tcptune iperf3 -c 198.18.0.2 -t 5 -P 4 -R --json"
            ))),
            "tcptune test --iperf3-exit-codes -c 198.18.0.2 -t 5 -P 4 -R -J"
        );
        assert_eq!(
            parsed(rewrite_argv(argv("/usr/local/bin/iperf3 -s -p 5202 -1 -V"))),
            "tcptune serve -p 5202 -1"
        );
        // A title that looks like -s is a value, not the server flag.
        assert_eq!(
            parsed(rewrite_argv(argv("iperf3 -c h -T -s"))),
            "tcptune test --iperf3-exit-codes -c h -T -s"
        );
        assert!(parsed(rewrite_argv(argv("iperf3 -v"))).starts_with("print tcptune"));
        assert_eq!(
            parsed(rewrite_argv(argv("tcptune model bdp"))),
            "tcptune model bdp"
        );
    }

    #[test]
    fn options_tcptune_does_not_act_on_are_refused_in_one_sentence() {
        for (line, opt) in [
            ("iperf3 -c h -A 2", "-A"),
            ("iperf3 -c h --fq-rate 1G -J", "--fq-rate"),
            ("tcptune test h --username bob", "--username"),
            ("iperf3 -s -d", "-d"),
            ("tcptune serve --idle-timeout=5", "--idle-timeout"),
        ] {
            match rewrite_argv(argv(line)) {
                Argv::Refuse(why, _) => {
                    assert!(why.starts_with(opt), "{line}: {why}");
                    assert_eq!(why.matches(';').count(), 1, "{why}");
                }
                _ => panic!("{line} was not refused"),
            }
        }
        assert!(matches!(
            rewrite_argv(argv("iperf3 -t 5")),
            Argv::Refuse(_, false)
        ));
        assert!(matches!(
            rewrite_argv(argv("iperf3 -s -c h -J")),
            Argv::Refuse(_, true)
        ));
        // Not an option tcptune knows, and no panic on a multibyte character.
        assert!(matches!(
            rewrite_argv(argv("iperf3 -c h -é")),
            Argv::Parse(_)
        ));
        assert!(matches!(
            rewrite_argv(argv("iperf3 -c h -d2")),
            Argv::Refuse(..)
        ));
        assert!(matches!(
            rewrite_argv(argv("iperf3 --help")),
            Argv::Print(_)
        ));
    }

}
