//! One module per verb; each turns parsed arguments into a library call and prints the result.

use crate::cli::{Cli, Command};
use crate::Outcome;

mod analyze;
mod audit;
mod conns;
mod experiment;
mod lab;
mod model;
pub mod perf;
mod report;
mod schema;
mod watch;

pub use audit::TuneReport;
pub use report::ReportResult;

pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Model { model } => model::run(model, cli.json),
        Command::Audit(args) => audit::audit(&args, cli.json),
        Command::Tune {
            audit,
            write,
            apply,
            rollback,
            snapshot,
        } => audit::tune(
            &audit,
            write.as_deref(),
            apply,
            rollback,
            snapshot.as_deref(),
            cli.json,
        ),
        Command::Report { dir } => report::run(&dir, cli.json),
        Command::Conns(args) => conns::run(args, cli.json),
        Command::Watch(args) => watch::run(args, cli.json),
        Command::Serve(args) => perf::serve(&args),
        Command::Test(args) => perf::test(&args, cli.json),
        // main() rewrites `tcptune iperf3 …` into `test`/`serve` before parsing.
        Command::Iperf3 { .. } => {
            anyhow::bail!("tcptune iperf3 needs -c HOST (a client) or -s (a server)")
        }
        Command::Lab { lab } => lab::run(*lab, cli.json),
        Command::Analyze(args) => analyze::run(args, cli.json),
        Command::Schema { name, list } => schema::run(name.as_deref(), list),
    }
}
