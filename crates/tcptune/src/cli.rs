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
    /// Analyse a packet capture (pcap/pcapng): Wireshark's TCP flags, per-flow statistics,
    /// a diagnosis, and graphs.
    Analyze(AnalyzeArgs),
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

/// `tcptune analyze FILE|-`.
#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// Capture file (pcap or pcapng), or `-` for standard input.
    pub file: String,
    /// List every flagged packet with the rule that fired and the numbers it compared.
    #[arg(long)]
    pub packets: bool,
    /// Write SVG graphs (time-sequence, throughput, RTT, window and bytes in flight) of each
    /// flow into this directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub graphs: Option<std::path::PathBuf>,
    /// Graph at most this many flows (the ones with the most data).
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub graph_flows: usize,
}
