//! iperf3's command line (`tcptune iperf3 …`, or the binary run as `iperf3`) rewritten into
//! `tcptune test` or `tcptune serve`, and the iperf3 options tcptune does not act on, refused in
//! one sentence before clap sees them.

use std::ffi::OsString;

/// iperf3 options tcptune does not act on, each with the sentence that refuses it. Options
/// tcptune implements are parsed by `test`/`serve` under iperf3's spellings.
const REFUSED: &[(&[&str], &str)] = &[
    (
        &["-L", "--flowlabel"],
        "IPv6 flow labels are not set by tcptune; drop -L",
    ),
    (
        &["--sctp", "--nstreams", "-X", "--xbind"],
        "tcptune tests TCP and UDP; drop the SCTP options",
    ),
    (
        &[
            "--username",
            "--rsa-public-key-path",
            "--rsa-private-key-path",
            "--authorized-users-path",
            "--time-skew-threshold",
            "--use-pkcs1-padding",
        ],
        "tcptune has no authentication; restrict clients with tcptune serve --allow CIDR",
    ),
    (
        &["--pacing-timer"],
        "tcptune paces -b with its own timer; drop --pacing-timer",
    ),
    (
        &["--gsro"],
        "tcptune's UDP sends are its own; drop it (plain -u works)",
    ),
    (
        &["--skip-rx-copy"],
        "tcptune's receiver always reads the data; drop --skip-rx-copy",
    ),
    (
        &["--server-bitrate-limit", "--idle-timeout"],
        "tcptune serve has no such limit; restrict clients with --allow and --max-tests",
    ),
    (
        &["-m", "--mptcp"],
        "tcptune opens plain TCP connections; drop -m",
    ),
    (
        &["--json-stream-full", "--json-stream-full-output"],
        "tcptune streams no full document; use --json-stream for the events or -J for the document",
    ),
];

/// Options iperf3's client takes that `tcptune serve` does not (iperf3 refuses the first ones
/// on a server too, in these words).
const CLIENT_ONLY: &[(&[&str], &str)] = &[
    (
        &[
            "--dscp",
            "--fq-rate",
            "--snd-timeout",
            "--cntl-ka",
            "--dont-fragment",
        ],
        "some option you are trying to set is client only; give it to the client",
    ),
    (
        &[
            "-A",
            "--affinity",
            "--bind-dev",
            "--timestamps",
            "--json-stream",
            "--rcv-timeout",
        ],
        "tcptune serve logs one line per test and does not take this server option; drop it",
    ),
];

/// iperf3 options that take a value (so the scan skips it).
const WITH_VALUE: &[&str] = &[
    "--server-max-duration",
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
    // There is no debug output; iperf3's debug lines are for its developers.
    "-d",
    "--debug",
    // Every line is flushed as it is printed.
    "--forceflush",
];

/// iperf3 3.12's `--help` (its `usage_longstr`), printed for `-h` and after the error when
/// neither `-c` nor `-s` is given, as iperf3 prints it: scripts and people read the same text.
pub const HELP: &str = include_str!("iperf3_help.txt");

/// What `main` should parse: argv unchanged, argv rewritten from iperf3's, or a refusal.
pub enum Argv {
    /// Parse these arguments.
    Parse(Vec<OsString>),
    /// Print this and exit 0 (`-v`).
    Print(String),
    /// iperf3's parameter error (this sentence, then an empty line, on standard error) with its
    /// whole `--help` on standard output, exit 1: what iperf3 prints without `-c` or `-s`.
    Usage(String),
    /// A refused option: the sentence, and whether iperf3's JSON error form was asked for.
    Refuse(String, bool),
}

/// Whether these arguments ask for iperf3's JSON output, so an error is printed as JSON.
pub fn wants_iperf_json(argv: &[OsString]) -> bool {
    argv.iter().any(|a| a == "-J" || a == "--json-stream")
        || (argv.get(1).is_some_and(|a| a == "iperf3") && argv.iter().any(|a| a == "--json"))
}

/// Whether `argv` is iperf3's front end (`tcptune iperf3 …`, or the binary run as `iperf3`),
/// whose errors are iperf3's: "iperf3: error - …" and exit status 1.
pub fn is_iperf3_front(argv: &[OsString]) -> bool {
    argv.first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == "iperf3")
        || argv.get(1).is_some_and(|a| a == "iperf3")
}

/// Rewrites `tcptune iperf3 ARGS` (or ARGS of a binary named `iperf3`) into `tcptune test` or
/// `tcptune serve`, and refuses, in one sentence, the iperf3 options tcptune does not act on
/// (for `test` and `serve` too).
pub fn rewrite_argv(argv: Vec<OsString>) -> Argv {
    let name_is_iperf3 = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == "iperf3");
    debug_assert_eq!(
        is_iperf3_front(&argv),
        name_is_iperf3 || argv.get(1).is_some_and(|a| a == "iperf3")
    );
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
            "-h" | "--help" => return Argv::Print(HELP.into()),
            "-v" | "--version" => {
                return Argv::Print(format!(
                    "tcptune {} (iperf3-compatible: control protocol of iperf 3.x, TCP and UDP tests)\n",
                    env!("CARGO_PKG_VERSION")
                ))
            }
            o if ALREADY.contains(&o) => {}
            // Newer iperf3's debug level attached (-d3): no debug output either.
            o if o.len() > 2
                && o.starts_with("-d")
                && o[2..].bytes().all(|b| b.is_ascii_digit()) => {}
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
                "parameter error - cannot be both server and client; give -s or -c HOST".into(),
                json,
            )
        }
        (true, false) => "serve",
        (false, true) => "test",
        (false, false) => {
            // iperf3's words; its help after them says what to do.
            let why = "parameter error - must either be a client (-c) or server (-s)";
            if json {
                return Argv::Refuse(why.into(), json);
            }
            return Argv::Usage(why.into());
        }
    };
    if verb == "serve" {
        if let Some(why) = refused_by(&out, CLIENT_ONLY) {
            return Argv::Refuse(why, json);
        }
    }
    let mut full = vec![prog, verb.into()];
    if verb == "test" {
        // Scripts test iperf3's exit status: 0 for a completed test.
        full.push("--iperf3-exit-codes".into());
    }
    // Scripts read iperf3's text: print it line for line.
    full.push("--iperf3-text".into());
    full.extend(out);
    Argv::Parse(full)
}

/// The sentence refusing the first option in `args` that tcptune does not act on.
fn refused(args: &[OsString]) -> Option<String> {
    refused_by(args, REFUSED)
}

/// The first option of `args` in `table`, refused in iperf3's words ("parameter error - …")
/// with what to do instead.
fn refused_by(args: &[OsString], table: &[(&[&str], &str)]) -> Option<String> {
    let find = |opt: &str| {
        table
            .iter()
            .find(|(names, _)| names.contains(&opt))
            .map(|(_, why)| format!("{opt}: parameter error - {why}"))
    };
    let mut i = 0;
    while i < args.len() {
        let s = args[i].to_string_lossy();
        let opt = s.split_once('=').map(|(o, _)| o).unwrap_or(&s);
        if let Some(why) = find(opt) {
            return Some(why);
        }
        // Attached short forms: -F/tmp/x, -L5.
        let short = opt
            .get(..2)
            .filter(|_| opt.len() > 2 && !opt.starts_with("--"));
        if let Some(why) = short.and_then(find) {
            return Some(why);
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
            Argv::Usage(r) => format!("usage {r}"),
        }
    }

    #[test]
    fn iperf3_argv_becomes_test_or_serve() {
        assert_eq!(
            parsed(rewrite_argv(argv(
                "tcptune iperf3 -c 198.18.0.2 -t 5 -P 4 -R --json"
            ))),
            "tcptune test --iperf3-exit-codes --iperf3-text -c 198.18.0.2 -t 5 -P 4 -R -J"
        );
        assert_eq!(
            parsed(rewrite_argv(argv("/usr/local/bin/iperf3 -s -p 5202 -1 -V"))),
            "tcptune serve --iperf3-text -p 5202 -1 -V"
        );
        // A title that looks like -s is a value, not the server flag.
        assert_eq!(
            parsed(rewrite_argv(argv("iperf3 -c h -T -s"))),
            "tcptune test --iperf3-exit-codes --iperf3-text -c h -T -s"
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
            ("iperf3 -c h -m -J", "-m"),
            ("tcptune test h --username bob", "--username"),
            ("iperf3 -s --dscp EF", "--dscp"),
            ("iperf3 -s --json-stream", "--json-stream"),
            ("tcptune serve --idle-timeout=5", "--idle-timeout"),
            ("iperf3 -c h --json-stream-full", "--json-stream-full"),
        ] {
            match rewrite_argv(argv(line)) {
                Argv::Refuse(why, _) => {
                    assert!(why.starts_with(opt), "{line}: {why}");
                    assert!(why.contains(": parameter error - "), "{line}: {why}");
                    assert_eq!(why.matches(';').count(), 1, "{why}");
                }
                _ => panic!("{line} was not refused"),
            }
        }
        match rewrite_argv(argv("iperf3 -t 5")) {
            Argv::Usage(why) => assert!(why.starts_with("parameter error - must either")),
            _ => panic!("iperf3 -t 5 was not refused with the help"),
        }
        assert!(matches!(
            rewrite_argv(argv("iperf3 -s -c h -J")),
            Argv::Refuse(_, true)
        ));
        // Not an option tcptune knows, and no panic on a multibyte character.
        assert!(matches!(
            rewrite_argv(argv("iperf3 -c h -é")),
            Argv::Parse(_)
        ));
        // -F is iperf3's and acts (a file to send or to write), attached value and all.
        assert_eq!(
            parsed(rewrite_argv(argv("iperf3 -c h -F/tmp/x"))),
            "tcptune test --iperf3-exit-codes --iperf3-text -c h -F/tmp/x"
        );
        assert_eq!(
            parsed(rewrite_argv(argv("iperf3 -c h -d3"))),
            "tcptune test --iperf3-exit-codes --iperf3-text -c h"
        );
        // What tcptune implements now passes through to test (or is accepted without effect).
        assert_eq!(
            parsed(rewrite_argv(argv(
                "iperf3 -c h -d --dscp EF --fq-rate 1G -A 0,1 --timestamps --cntl-ka=5/1/3"
            ))),
            "tcptune test --iperf3-exit-codes --iperf3-text -c h --dscp EF --fq-rate 1G -A 0,1 --timestamps \
             --cntl-ka=5/1/3"
        );
        assert_eq!(
            parsed(rewrite_argv(argv("iperf3 -s -d -i 10 -f m"))),
            "tcptune serve --iperf3-text -i 10 -f m"
        );
        assert!(matches!(
            rewrite_argv(argv("iperf3 --help")),
            Argv::Print(h) if h.starts_with("Usage: iperf3 [-s|-c host] [options]")
        ));
    }
}
