//! One module per verb; each turns parsed arguments into a library call and prints the result.

use crate::cli::{Cli, Command};
use crate::outcome::Outcome;
use crate::output::no_json;

mod analyze;
mod audit;
mod conns;
mod experiment;
mod exporter;
mod generate;
mod hold;
mod iperf3_argv;
mod lab;
mod manpage;
mod model;
pub mod perf;
mod report;
mod schema;
mod trace;
mod tune_search;
mod view_open;
mod watch;
mod web;

pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Model { model } => model::run(model, cli.json),
        Command::Audit(args) => audit::audit(&args, cli.json),
        Command::Tune {
            audit,
            snapshot,
            search,
            ..
        } if search.search => tune_search::run(&audit, &search, snapshot.as_deref(), cli.json),
        Command::Tune {
            audit,
            write,
            apply,
            rollback,
            snapshot,
            set,
            hold,
            ..
        } => audit::tune(
            &audit,
            write.as_deref(),
            apply,
            rollback,
            snapshot.as_deref(),
            (&set, hold),
            cli.json,
        ),
        Command::Report {
            dir,
            against,
            tolerance,
        } => match against {
            Some(earlier) => report::against(&dir, &earlier, tolerance.get(), cli.json),
            None => report::run(&dir, cli.json),
        },
        Command::Conns(args) => conns::run(args, cli.json),
        Command::Watch(args) => {
            if cli.pretty {
                anyhow::bail!(
                    "--pretty does not apply: watch --json writes one JSON object per line; run it without --pretty"
                );
            }
            watch::run(args, cli.json)
        }
        Command::Exporter(args) => {
            no_json(
                cli.json,
                "the exporter serves its results over HTTP (/connections is JSON)",
            )?;
            exporter::run(&args)
        }
        Command::View(args) => {
            no_json(cli.json, "view serves a recording as a web page")?;
            web::view(&args)
        }
        Command::Serve(args) => {
            no_json(
                cli.json,
                "serve logs its tests as text (each client gets its results, in JSON with `test --json`)",
            )?;
            perf::serve(&args)
        }
        Command::Test(args) => perf::test(&args, cli.json),
        // main() rewrites `tcptune iperf3 …` into `test`/`serve` before parsing.
        Command::Iperf3 { .. } => {
            anyhow::bail!("tcptune iperf3 needs -c HOST (a client) or -s (a server)")
        }
        Command::Lab { lab } => lab::run(*lab, cli.json),
        Command::Analyze(args) => analyze::run(args, cli.json),
        Command::Schema { name, list } => {
            if list {
                no_json(
                    cli.json,
                    "schema --list prints names, and `tcptune schema` prints every schema as one JSON document",
                )?;
            }
            schema::run(name.as_deref(), list)
        }
        Command::Trace(args) => {
            no_json(cli.json, "_trace always writes JSON lines")?;
            trace::run(&args)
        }
        Command::Generate { what, dir } => {
            no_json(cli.json, "_generate writes files, not a result")?;
            generate::run(what, &dir)
        }
    }
}
