//! The `tcptune` binary: parse the command line, run one verb, map the outcome to an exit code.
//! All logic lives in the library crates; this crate is glue and presentation.

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
    // clap prints usage errors itself and exits with 2.
    let cli = cli::Cli::parse();
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
