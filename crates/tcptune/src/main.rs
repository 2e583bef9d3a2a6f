//! The `tcptune` binary: parse the command line, run one verb, map the outcome to an exit code.
//! All logic lives in the library crates; this crate is glue and presentation.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod cmd;
mod output;
mod schema;

/// What a command found, when it ran to completion.
pub enum Outcome {
    /// Nothing to report beyond the result (exit 0).
    Ok,
    /// The command ran and found a problem worth acting on (exit 1), so scripts can branch.
    Problem,
    /// Pass on a command's exit code (`lab exec`).
    Exit(u8),
}

fn main() -> ExitCode {
    // iperf3's command line (`tcptune iperf3 …`, or this binary named iperf3) becomes test or
    // serve; iperf3 options tcptune does not act on are refused here.
    let argv = match cmd::perf::rewrite_argv(std::env::args_os().collect()) {
        cmd::perf::Argv::Parse(argv) => argv,
        cmd::perf::Argv::Print(text) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        cmd::perf::Argv::Refuse(why, json) => {
            if json {
                print!("{}", cmd::perf::json_error(&why, false));
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
            eprintln!("tcptune: error: {sentence}");
            return ExitCode::from(2);
        }
    };
    match cmd::run(cli) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Problem) => ExitCode::from(1),
        Ok(Outcome::Exit(code)) => ExitCode::from(code),
        Err(e) => {
            // `{:#}` prints the context chain on one line: "reading X: cause".
            eprintln!("tcptune: error: {e:#}");
            ExitCode::from(2)
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
