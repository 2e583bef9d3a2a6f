//! `tcptune model …`: the closed-form models of `tcptune-model`, printed.

use anyhow::Context;
use tcptune_model::kernel::{self, KernelSource};
use tcptune_model::{bdp, buffers, cubic, mathis, pftk, ramp};

use crate::cli::{BuffersArgs, MathisArgs, ModelCommand, PathArgs, PftkArgs, RampArgs};
use crate::outcome::Outcome;
use crate::output::emit;

/// The path components a model reads.
#[derive(Clone, Copy)]
struct Uses {
    rate: bool,
    loss: bool,
}

/// Refuses a path component the model does not read, whether given as an option or in
/// `--path`: an option that is accepted must change the result.
fn refuse_unused(model: &str, path: &PathArgs, uses: Uses) -> anyhow::Result<()> {
    let spec = path.spec();
    if spec.rate_bps.is_some() && !uses.rate {
        anyhow::bail!(
            "model {model} does not use a path rate; leave out --rate (and rate= in --path)"
        );
    }
    if spec.loss.is_some() && !uses.loss {
        anyhow::bail!(
            "model {model} does not use a loss rate; leave out --loss (and loss= in --path)"
        );
    }
    Ok(())
}

const RATE: Uses = Uses {
    rate: true,
    loss: false,
};
const LOSS: Uses = Uses {
    rate: false,
    loss: true,
};

pub fn run(cmd: ModelCommand, json: bool) -> anyhow::Result<Outcome> {
    match cmd {
        ModelCommand::Bdp(path) => {
            refuse_unused("bdp", &path, RATE)?;
            emit("model bdp", &bdp::bdp(path.rate()?, path.rtt()?), json)?;
        }
        ModelCommand::Window { path, window } => {
            refuse_unused("window", &path, RATE)?;
            if window.is_some() && path.spec().rate_bps.is_some() {
                anyhow::bail!(
                    "model window takes --window (for the rate it allows) or --rate (for the \
                     window it needs), not both"
                );
            }
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
        ModelCommand::Buffers(args) => emit("model buffers", &run_buffers(&args)?, json)?,
        ModelCommand::Mathis(args) => emit("model mathis", &run_mathis(&args)?, json)?,
        ModelCommand::Pftk(args) => emit("model pftk", &run_pftk(&args)?, json)?,
        ModelCommand::Cubic(args) => {
            refuse_unused("cubic", &args.path, LOSS)?;
            let result = cubic::cubic(args.mss.mss, args.path.rtt()?, args.path.loss()?)?;
            emit("model cubic", &result, json)?;
        }
        ModelCommand::Ramp(args) => emit("model ramp", &run_ramp(&args)?, json)?,
    }
    Ok(Outcome::Ok)
}

fn run_buffers(a: &BuffersArgs) -> anyhow::Result<buffers::Buffers> {
    refuse_unused("buffers", &a.path, RATE)?;
    let (kernel, kernel_source) = match a.kernel {
        Some(k) => (k, KernelSource::Given),
        None => tcptune_kernel::sys::kernel_version_or_assumed(),
    };
    // Each kernel has one window rule: the other rule's input would be ignored.
    if a.scaling_ratio.is_some() && !kernel.has_scaling_ratio() {
        anyhow::bail!(
            "--scaling-ratio applies to kernels 6.6 and later; kernel {kernel} uses tcp_adv_win_scale (--adv-win-scale)"
        );
    }
    if a.adv_win_scale.is_some() && kernel.has_scaling_ratio() {
        anyhow::bail!(
            "--adv-win-scale applies to kernels before 6.6; kernel {kernel} uses the per-socket scaling ratio (--scaling-ratio)"
        );
    }
    let query = buffers::BufferQuery {
        rate: a.path.rate()?,
        rtt: a.path.rtt()?,
        flows: a.flows,
        sharing: if a.per_flow {
            buffers::FlowSharing::PerFlow
        } else {
            buffers::FlowSharing::Shared
        },
        memory_budget: a.memory,
        kernel,
        kernel_source,
        scaling_ratio: a
            .scaling_ratio
            .map(|r| kernel::scaling_ratio_from_fraction(r.get())),
        adv_win_scale: a.adv_win_scale,
        cc: a.cc,
    };
    if a.scaling_ratio.is_some_and(|r| r.get() == 0.0) {
        anyhow::bail!("--scaling-ratio must be above zero; measured values are 0.5 to 0.86");
    }
    Ok(buffers::buffers(&query)?)
}

fn run_mathis(a: &MathisArgs) -> anyhow::Result<mathis::Mathis> {
    let constant = match (a.constant, a.delayed_ack) {
        (Some(c), _) => mathis::MathisConstant::Given(c),
        (None, true) => mathis::MathisConstant::DelayedAck,
        (None, false) => mathis::MathisConstant::Periodic,
    };
    let rtt = a.path.rtt()?;
    let spec = a.path.spec();
    if a.target_rate.is_some() {
        // The largest loss for a rate: the path's rate and a loss rate are not inputs.
        refuse_unused(
            "mathis --target-rate",
            &a.path,
            Uses {
                rate: false,
                loss: false,
            },
        )?;
    }
    let result = match (a.target_rate, spec.loss) {
        (Some(target), _) => mathis::loss_for_rate(a.mss.mss, rtt, target, constant)?,
        (None, Some(loss)) => mathis::rate_for_loss(a.mss.mss, rtt, loss, constant, spec.rate_bps)?,
        (None, None) => anyhow::bail!(
            "model mathis needs --loss (for the throughput bound) or --target-rate (for the \
             largest loss rate that allows it)"
        ),
    };
    Ok(result)
}

fn run_pftk(a: &PftkArgs) -> anyhow::Result<pftk::Pftk> {
    refuse_unused("pftk", &a.path, LOSS)?;
    Ok(pftk::pftk(&pftk::PftkQuery {
        mss: a.mss.mss,
        rtt: a.path.rtt()?,
        loss: a.path.loss()?,
        rto: a.rto,
        packets_per_ack: a.packets_per_ack,
        window: a.window,
    })?)
}

fn run_ramp(a: &RampArgs) -> anyhow::Result<ramp::Ramp> {
    refuse_unused("ramp", &a.path, RATE)?;
    let first = *a
        .ssthresh
        .first()
        .context("--ssthresh needs at least one value, such as 65535 or inf")?;
    Ok(ramp::ramp(
        ramp::RampQuery {
            rate: a.path.rate()?,
            rtt: a.path.rtt()?,
            mss: a.mss.mss,
            initcwnd: a.initcwnd,
            ssthresh: first,
            cc: a.cc,
            target: a.target,
            window: a.window,
        },
        &a.ssthresh,
    )?)
}
