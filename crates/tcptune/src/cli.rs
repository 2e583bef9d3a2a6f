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
    /// List TCP connections with what limits each: figures from tcp_info and a verdict.
    Conns(ConnsArgs),
    /// Watch TCP connections live: a refreshing view sorted by throughput, one connection's
    /// history, final statistics of closing connections, JSON-lines recording.
    Watch(WatchArgs),
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

/// Which sockets, where: shared by `conns` and `watch`.
#[derive(Args, Debug, Clone)]
pub struct SockArgs {
    /// Filter in the spirit of ss: `state established`, `dport 443`, `sport :5201`,
    /// `port 1000-2000`, `dst 198.18.0.0/24`, `src [2001:2::1]:80`, `addr 198.18.0.2`, `ipv4`.
    /// Different keys must all hold; a key given twice means either.
    #[arg(value_name = "FILTER")]
    pub filter: Vec<String>,
    /// Look inside this named network namespace (`ip netns list`).
    #[arg(long, value_name = "NAME", conflicts_with = "all_netns")]
    pub netns: Option<String>,
    /// Look in the current and every named network namespace.
    #[arg(long)]
    pub all_netns: bool,
    /// Find the process owning each socket (scans /proc; slower).
    #[arg(long, short = 'p')]
    pub processes: bool,
    /// The path's bottleneck rate, when known: verdicts then compare windows with the BDP.
    #[arg(long)]
    pub rate: Option<Rate>,
}

#[derive(Args, Debug, Clone)]
pub struct ConnsArgs {
    #[command(flatten)]
    pub sock: SockArgs,
    /// Show every tcp_info field and socket memory.
    #[arg(long)]
    pub all: bool,
    /// Take a second sample after this long and report rates and limit shares over it.
    #[arg(long, value_name = "DURATION")]
    pub over: Option<Dur>,
}

#[derive(Args, Debug, Clone)]
pub struct WatchArgs {
    #[command(flatten)]
    pub sock: SockArgs,
    /// Time between samples: 1s, 100ms; down to 1ms when watching one connection.
    #[arg(long, default_value = "1s")]
    pub interval: Dur,
    /// Stop after this many samples (default: until interrupted).
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this long (default: until interrupted).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<Dur>,
    /// Show one connection in detail with its history (the filter must match exactly one, or
    /// give its cookie with --cookie).
    #[arg(long)]
    pub detail: bool,
    /// The connection to show in detail, by socket cookie (from `conns --all`).
    #[arg(long)]
    pub cookie: Option<u64>,
    /// Append every sample as a JSON line to FILE (read by the report tools).
    #[arg(long, value_name = "FILE")]
    pub record: Option<std::path::PathBuf>,
    /// Print the final statistics of each connection as it closes (kernel destroy events),
    /// instead of the refreshing view.
    #[arg(long)]
    pub closed: bool,
    /// How many rows the live view shows.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
}
