//! One module per verb; each turns parsed arguments into a library call and prints the result.

use crate::cli::{Cli, Command};
use crate::Outcome;

mod analyze;
mod model;
mod schema;

pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Model { model } => model::run(model, cli.json),
        Command::Analyze(args) => analyze::run(args, cli.json),
        Command::Schema { name, list } => schema::run(name.as_deref(), list),
    }
}
