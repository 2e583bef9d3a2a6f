//! `tcptune model …`: the closed-form models of `tcptune-model`, printed.

use tcptune_model::bdp;

use crate::cli::ModelCommand;
use crate::output::emit;
use crate::Outcome;

pub fn run(cmd: ModelCommand, json: bool) -> anyhow::Result<Outcome> {
    match cmd {
        ModelCommand::Bdp(path) => {
            emit("model bdp", &bdp::bdp(path.rate()?, path.rtt()?), json)?;
        }
        ModelCommand::Window { path, window } => {
            let rtt = path.rtt()?;
            let result = match (window, path.spec().rate_bps) {
                (Some(w), _) => bdp::rate_for_window(w, rtt),
                (None, Some(rate)) => bdp::window_for_rate(rate, rtt),
                (None, None) => anyhow::bail!(
                    "model window needs --window (to get the rate it allows) or --rate (to get \
                     the window it needs)"
                ),
            };
            emit("model window", &result, json)?;
        }
    }
    Ok(Outcome::Ok)
}
