//! The command line: verbs as subcommands (clap derive). Option names are shared across
//! commands: `--rate`, `--rtt`, `--loss`, `--mss`, `--window`, `--flows`, `--path`, `--netns`,
//! `--json`. Values are parsed into unit types here, so a bad unit is a usage error (exit 2)
//! naming the option.

use clap::{Args, Parser, Subcommand};
use tcptune_model::{Bytes, Dur, PathSpec, Probability, Rate};

#[derive(Parser, Debug)]
#[command(
    name = "tcptune",
    version,
    about = "Find out what limits a TCP connection on Linux, explain it with numbers, and fix it.",
    propagate_version = true
)]
pub struct Cli {
    /// Print one JSON document (schema: `tcptune schema`) instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// TCP performance models: bdp, window, buffers, mathis, pftk, cubic, ramp.
    Model {
        #[command(subcommand)]
        model: ModelCommand,
    },
    /// Emulated network paths: hosts in namespaces joined through a link emulator.
    Lab {
        #[command(subcommand)]
        lab: Box<LabCommand>,
    },
    /// Print the JSON Schema of a command's `--json` output (all of them without a name).
    Schema {
        /// Schema name as listed by `tcptune schema --list`, e.g. model-bdp.
        name: Option<String>,
        /// List the schema names.
        #[arg(long)]
        list: bool,
    },
}

/// A described path: `--path rate=…,rtt=…,loss=…`, overridden by `--rate`/`--rtt`/`--loss`.
#[derive(Args, Debug, Clone)]
pub struct PathArgs {
    /// Bottleneck rate: 10gbit, 100mbit, 1.5mbps, 12MB/s.
    #[arg(long)]
    pub rate: Option<Rate>,
    /// Round-trip time: 1.58ms, 120us, 0.2s.
    #[arg(long)]
    pub rtt: Option<Dur>,
    /// Packet loss probability: 1%, 0.00018%, 1e-4.
    #[arg(long)]
    pub loss: Option<Probability>,
    /// The path in one option: rate=10gbit,rtt=1.58ms,loss=0.01%.
    #[arg(long, value_name = "rate=…,rtt=…,loss=…")]
    pub path: Option<PathSpec>,
}

impl PathArgs {
    pub fn spec(&self) -> PathSpec {
        self.path.unwrap_or_default().overridden_by(PathSpec {
            rate_bps: self.rate,
            rtt_s: self.rtt,
            loss: self.loss,
        })
    }
    pub fn rate(&self) -> anyhow::Result<Rate> {
        self.spec().rate_bps.ok_or_else(|| {
            anyhow::anyhow!(
                "this model needs the path rate; give --rate 100mbit (or --path rate=…)"
            )
        })
    }
    pub fn rtt(&self) -> anyhow::Result<Dur> {
        self.spec().rtt_s.ok_or_else(|| {
            anyhow::anyhow!(
                "this model needs the round-trip time; give --rtt 20ms (or --path rtt=…)"
            )
        })
    }
}

#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Bandwidth-delay product: rate × RTT, in bits and bytes.
    Bdp(PathArgs),
    /// Window bound: the rate a --window allows over --rtt, or the window a --rate needs.
    Window {
        #[command(flatten)]
        path: PathArgs,
        /// Window size: 65535, 64KiB, 4MB. Without it, the window --rate needs is computed.
        #[arg(long)]
        window: Option<Bytes>,
    },
}

/// Link options of `lab up` and `lab set`; they apply to both directions unless --direction.
#[derive(Args, Debug, Clone, Default)]
pub struct LinkArgs {
    /// Which direction the link options change: up (client to server), down, or both.
    #[arg(long, default_value = "both")]
    pub direction: tcptune_lab::Which,
    /// Link rate: 100mbit, 1gbit.
    #[arg(long)]
    pub rate: Option<Rate>,
    /// One-way delay per direction: 10ms.
    #[arg(long)]
    pub delay: Option<Dur>,
    /// Round-trip time: half of it becomes each direction's delay.
    #[arg(long)]
    pub rtt: Option<Dur>,
    /// Jitter around the delay (half width for uniform, σ otherwise).
    #[arg(long)]
    pub jitter: Option<Dur>,
    /// Jitter distribution: uniform, normal, pareto, paretonormal.
    #[arg(long)]
    pub distribution: Option<tcptune_emu::Distribution>,
    /// Keep packet order under jitter (netem reorders).
    #[arg(long)]
    pub jitter_fifo: bool,
    /// Random loss probability: 1%, 1e-3.
    #[arg(long)]
    pub loss: Option<Probability>,
    /// Gilbert-Elliott loss: p,r[,1-h[,1-k]] as in netem's gemodel.
    #[arg(long, value_name = "p,r[,1-h[,1-k]]")]
    pub loss_ge: Option<String>,
    /// Lose every Nth packet.
    #[arg(long, value_name = "N")]
    pub loss_every: Option<u32>,
    /// Duplication probability.
    #[arg(long)]
    pub duplicate: Option<Probability>,
    /// Corruption probability (a bit flip the receiver's checksum rejects).
    #[arg(long)]
    pub corrupt: Option<Probability>,
    /// Reordering probability (reordered packets skip the delay).
    #[arg(long)]
    pub reorder: Option<Probability>,
    /// Reorder only after gap-1 delayed packets (netem's gap).
    #[arg(long)]
    pub reorder_gap: Option<u32>,
    /// Bottleneck queue limit in packets (default 1000 with a rate).
    #[arg(long, value_name = "PACKETS")]
    pub queue: Option<u32>,
    /// Bottleneck queue limit in bytes.
    #[arg(long)]
    pub queue_bytes: Option<Bytes>,
    /// netem's limit: packets held anywhere, delay line included.
    #[arg(long)]
    pub limit: Option<u32>,
    /// Bytes added per packet when charging the rate (default 14, as netem on a veth).
    #[arg(long, allow_negative_numbers = true)]
    pub overhead: Option<i32>,
    /// Seed of the random decisions (same seed, same decisions).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl LinkArgs {
    pub fn changes(&self) -> tcptune_lab::LinkChanges {
        tcptune_lab::LinkChanges {
            direction: self.direction,
            rate: self.rate,
            delay: self.delay,
            rtt: self.rtt,
            jitter: self.jitter,
            distribution: self.distribution,
            jitter_order: self.jitter_fifo.then_some(tcptune_emu::JitterOrder::Fifo),
            loss: self.loss,
            loss_ge: self.loss_ge.clone(),
            loss_every: self.loss_every,
            duplicate: self.duplicate,
            corrupt: self.corrupt,
            reorder: self.reorder,
            reorder_gap: self.reorder_gap,
            queue_packets: self.queue,
            queue_bytes: self.queue_bytes,
            limit_packets: self.limit,
            overhead_bytes: self.overhead,
            seed: self.seed,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// Create a lab: client and server namespaces joined through the emulated link.
    Up {
        /// Lab name (namespaces are tcptune-NAME-client and tcptune-NAME-server).
        #[arg(long, default_value = "lab")]
        name: String,
        #[command(flatten)]
        link: LinkArgs,
        /// Host setting HOST.KEY=VALUE (HOST: client, server, both; KEY: mtu, txqueuelen,
        /// line_rate, cc, initcwnd, initrwnd, ssthresh, congctl, cpu_hog, cpu, sysctl.NAME).
        #[arg(long, value_name = "HOST.KEY=VALUE")]
        host: Vec<String>,
        /// A JSON lab spec (link and hosts); options given as well override it.
        #[arg(long, value_name = "FILE")]
        spec: Option<std::path::PathBuf>,
        /// Link backend: emu (user-space emulator over TUN), netem, or auto (netem where the
        /// kernel has sch_netem).
        #[arg(long, default_value = "auto")]
        backend: String,
    },
    /// Run a command in a host of a lab: lab exec NAME HOST -- CMD...
    Exec {
        name: String,
        host: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Show labs: hosts, addresses, link settings and live counters.
    Status {
        #[arg(long)]
        name: Option<String>,
    },
    /// Change the link or host settings of a running lab.
    Set {
        #[arg(long, default_value = "lab")]
        name: String,
        #[command(flatten)]
        link: LinkArgs,
        #[arg(long, value_name = "HOST.KEY=VALUE")]
        host: Vec<String>,
    },
    /// Remove a lab (or all labs, including leftovers of killed ones).
    Down {
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        #[arg(long)]
        all: bool,
    },
    #[command(name = "_emulator", hide = true)]
    Emulator {
        #[arg(long)]
        name: String,
    },
    #[command(name = "_hog", hide = true)]
    Hog {
        #[arg(long)]
        name: String,
        #[arg(long)]
        host: String,
        #[arg(long)]
        cpu: u32,
    },
}
