//! One module per verb; each turns parsed arguments into a library call and prints the result.

use crate::cli::{Cli, Command};
use crate::Outcome;

mod conns;
mod model;
mod schema;
mod watch;

pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Model { model } => model::run(model, cli.json),
        Command::Conns(args) => conns::run(args, cli.json),
        Command::Watch(args) => watch::run(args, cli.json),
        Command::Schema { name, list } => schema::run(name.as_deref(), list),
    }
}
