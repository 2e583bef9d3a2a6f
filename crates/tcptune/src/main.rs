//! The `tcptune` binary: parse the command line, run one verb, map the outcome to an exit code.
//! All logic lives in the library crates; this crate is glue and presentation.

#![forbid(unsafe_code)]
// The CLI's doc comments are its --help text (clap): brackets there are literal (`[ports]`,
// `HOST[:PORT]`), not links for rustdoc.
#![allow(rustdoc::broken_intra_doc_links)]

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod cmd;
mod outcome;
mod output;
mod schema;

use outcome::Outcome;

fn main() -> ExitCode {
    // iperf3's command line (`tcptune iperf3 …`, or this binary named iperf3) becomes test or
    // serve; iperf3 options tcptune does not act on are refused here.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // iperf3's front end reports errors as iperf3 does: "iperf3: error - …", exit status 1.
    let iperf3 = cmd::perf::is_iperf3_front(&raw);
    let (prefix, failed) = if iperf3 {
        ("iperf3: error - ", 1)
    } else {
        ("tcptune: error: ", 2)
    };
    let argv = match cmd::perf::rewrite_argv(raw) {
        cmd::perf::Argv::Parse(argv) => argv,
        cmd::perf::Argv::Print(text) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        cmd::perf::Argv::Usage(why) => {
            // iperf3's order: the error and an empty line, then the help.
            eprintln!("iperf3: {why}\n");
            print!("{}", cmd::perf::HELP);
            return ExitCode::from(1);
        }
        cmd::perf::Argv::Refuse(why, json) => {
            if json {
                print!("{}", cmd::perf::json_error(&why, false));
            }
            if iperf3 {
                // iperf3's parameter errors: "iperf3: [OPTION: ]parameter error - …".
                eprintln!("iperf3: {why}");
                return ExitCode::from(1);
            }
            eprintln!("tcptune: error: {why}");
            return ExitCode::from(2);
        }
    };
    let iperf_json = cmd::perf::wants_iperf_json(&argv);
    let cli = match cli::Cli::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: printed as clap formats them, exit 0.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `tcptune model` alone: the list of subcommands is the useful answer.
            let _ = e.print();
            return ExitCode::from(2);
        }
        Err(e) => {
            let sentence = usage_error_sentence(&e);
            if iperf_json {
                // iperf3's -J and --json-stream report errors as JSON too.
                let stream = argv.iter().any(|a| a == "--json-stream");
                print!("{}", cmd::perf::json_error(&sentence, stream));
            }
            eprintln!("{prefix}{sentence}");
            return ExitCode::from(failed);
        }
    };
    output::choose_layout(cli.pretty);
    match cmd::run(cli) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Problem) => ExitCode::from(1),
        Ok(Outcome::Exit(code)) => ExitCode::from(code),
        Err(e) => {
            // `{:#}` prints the context chain on one line: "reading X: cause".
            eprintln!("{prefix}{e:#}");
            ExitCode::from(failed)
        }
    }
}

/// A clap usage error as one line: its message and, when clap has one, its tip (usage and the
/// "try --help" footer are left out, so every error reads the same way as the others).
fn usage_error_sentence(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines
        .next()
        .map(str::trim)
        .unwrap_or("invalid usage; see --help");
    let mut first = first.strip_prefix("error: ").unwrap_or(first).to_string();
    // "the following required arguments were not provided:" lists them on indented lines.
    if first.ends_with(':') {
        let listed: Vec<&str> = lines
            .clone()
            .take_while(|l| l.starts_with(' '))
            .map(str::trim)
            .collect();
        first = format!("{} {}", first, listed.join(", "));
    }
    match lines.map(str::trim).find(|l| l.starts_with("tip:")) {
        Some(tip) => format!("{first} ({tip})"),
        None => first,
    }
}
