//! The command line: verbs as subcommands (clap derive). Option names are shared across
//! commands: `--rate`, `--rtt`, `--loss`, `--mss`, `--window`, `--flows`, `--path`, `--netns`,
//! `--json`. Values are parsed into unit types here, so a bad unit is a usage error (exit 2)
//! naming the option.

use clap::{Args, Parser, Subcommand};
use tcptune_model::kernel::{CongestionControl, KernelVersion};
use tcptune_model::ramp::Ssthresh;
use tcptune_model::{Bytes, Dur, PathSpec, Probability, Rate};

mod exporter;
mod iperf_values;
mod link;
mod search;
mod trace;
mod web;
pub use exporter::ExporterArgs;
use iperf_values::{
    iperf_bytes, iperf_rate, iperf_rate_burst, parse_affinity, parse_dscp, parse_keepalive,
    parse_tos,
};
pub use link::LinkArgs;
pub use search::SearchArgs;
pub use trace::TraceArgs;
pub use web::{AccessArgs, ViewArgs, WebArgs};

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

    /// Indent the --json document (the default when standard output is a terminal; piped or
    /// redirected it is compact, one line, as `ip -j`).
    #[arg(long, global = true, requires = "json")]
    pub pretty: bool,

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
    /// Judge this host's (or a namespace's) TCP settings against a path; exit 1 if any should change.
    Audit(AuditArgs),
    /// Print, write, apply or roll back the changes `audit` recommends (dry run by default).
    Tune {
        #[command(flatten)]
        audit: AuditArgs,
        /// Install the sysctl.d drop-in (default /etc/sysctl.d/90-tcptune.conf) for the next boot.
        #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "/etc/sysctl.d/90-tcptune.conf", conflicts_with = "rollback")]
        write: Option<std::path::PathBuf>,
        /// Apply the changes now, after saving a snapshot of every value they touch.
        #[arg(long, conflicts_with = "rollback")]
        apply: bool,
        /// Restore the values saved by the last --apply, exactly.
        #[arg(long)]
        rollback: bool,
        /// Snapshot file (default /var/lib/tcptune/tune-snapshot[-netns-NAME].json).
        #[arg(long, value_name = "FILE")]
        snapshot: Option<std::path::PathBuf>,
        /// With --apply: apply exactly this sysctl (repeatable) instead of the audit's plan,
        /// under the same snapshot and exact rollback.
        #[arg(
            long,
            value_name = "KEY=VALUE",
            requires = "apply",
            conflicts_with = "write"
        )]
        set: Vec<String>,
        /// With --apply: stay running, and roll back when standard input ends or on SIGHUP,
        /// SIGINT or SIGTERM (over ssh, a lost connection restores the host).
        #[arg(long, requires = "apply", conflicts_with = "write")]
        hold: bool,
        #[command(flatten)]
        search: SearchArgs,
    },
    /// Redraw the HTML report, plots and summary.csv of an experiment's results directory; or
    /// with --against, compare its points with an earlier run's
    Report {
        /// A directory written by `tcptune lab run SPEC --out DIR`.
        dir: std::path::PathBuf,
        /// Compare DIR's goodput point by point with an earlier run of the same spec (its
        /// results directory, or its summary.csv) instead of redrawing: each point's mean and
        /// 95% CI in both, and whether the intervals overlap; exit 1 if a point differs or is
        /// in one run only.
        #[arg(long, value_name = "EARLIER")]
        against: Option<std::path::PathBuf>,
        /// With --against: two means this close (a share of the earlier one: 1% or 0.01) count
        /// as the same even when their intervals are apart (a path at its capacity varies by
        /// kbit/s).
        #[arg(long, value_name = "SHARE", default_value = "1%", requires = "against")]
        tolerance: tcptune_model::Probability,
    },
    /// List TCP connections with what limits each: figures from tcp_info and a verdict.
    Conns(ConnsArgs),
    /// Watch TCP connections live: a refreshing view sorted by throughput, one connection's
    /// history, final statistics of closing connections, JSON-lines recording.
    Watch(WatchArgs),
    /// Serve Prometheus metrics of what limits this host's TCP connections, per group.
    Exporter(ExporterArgs),
    /// Open a recording of `watch --web --record FILE` in the same page, offline.
    View(ViewArgs),
    /// Serve throughput tests: an iperf3-compatible server (`iperf3 -c` and `tcptune test` both
    /// work against it) that also sends its side's tcp_info samples to a tcptune client.
    #[command(disable_version_flag = true)]
    Serve(ServeArgs),
    /// Run a throughput test against an iperf3 or tcptune server, sample TCP's variables while
    /// it runs, and diagnose what limited it; exit 1 if the diagnosis finds a problem.
    #[command(disable_version_flag = true)]
    Test(Box<TestArgs>),
    /// iperf3's own command line: `tcptune iperf3 -c HOST -t 5 -P 4 -R -J` runs `test`,
    /// `tcptune iperf3 -s` runs `serve` (also when tcptune is run under the name `iperf3`).
    #[command(name = "iperf3", disable_help_flag = true)]
    Iperf3 {
        /// iperf3's arguments, exactly as iperf3 takes them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<std::ffi::OsString>,
    },
    /// Emulated network paths: hosts in namespaces joined through a link emulator.
    Lab {
        #[command(subcommand)]
        lab: Box<LabCommand>,
    },
    /// Analyse a packet capture (pcap/pcapng): Wireshark's TCP flags, per-flow statistics,
    /// a diagnosis, and graphs; or join two captures of one path (one-way delay, where losses
    /// happened).
    Analyze(AnalyzeArgs),
    /// Print the JSON Schema of a command's `--json` output (all of them without a name).
    Schema {
        /// Schema name as listed by `tcptune schema --list`, e.g. model-bdp.
        name: Option<String>,
        /// List the schema names.
        #[arg(long, conflicts_with = "name")]
        list: bool,
    },
    /// Write the man pages or the shell completions, generated from this command line, into
    /// DIR (for packaging: scripts/package).
    /// Per-ACK kernel state of chosen sockets from tracepoints, as JSON lines (tracefs).
    #[command(name = "_trace", hide = true)]
    Trace(TraceArgs),
    #[command(name = "_generate", hide = true)]
    Generate {
        /// man: a page per command (tcptune.1, tcptune-test.1, …); completions: bash, zsh
        /// and fish.
        #[arg(value_enum)]
        what: Generate,
        /// Directory to write into (created if missing).
        dir: std::path::PathBuf,
    },
}

/// What `tcptune _generate` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Generate {
    Man,
    Completions,
}

/// A described path: `--path rate=…,rtt=…,loss=…`, overridden by `--rate`/`--rtt`/`--loss`.
#[derive(Args, Debug, Clone)]
pub struct PathArgs {
    /// Bottleneck rate: 10gbit, 100mbit, 1.5mbps, 12MB/s.
    #[arg(long, allow_hyphen_values = true)]
    pub rate: Option<Rate>,
    /// Round-trip time: 1.58ms, 120us, 0.2s.
    #[arg(long, allow_hyphen_values = true)]
    pub rtt: Option<Dur>,
    /// Packet loss probability: 1%, 0.00018%, 1e-4.
    #[arg(long, allow_hyphen_values = true)]
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
    pub fn loss(&self) -> anyhow::Result<Probability> {
        self.spec().loss.ok_or_else(|| {
            anyhow::anyhow!("this model needs the loss rate; give --loss 0.01% (or --path loss=…)")
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

/// A named path, for when the numbers are not at hand.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Profile {
    /// 1 Gbit/s, 0.12 ms (seed 000's home LAN)
    Lan,
    /// 10 Gbit/s, 1.58 ms (seed 000's datacenter path)
    Datacenter,
    /// 100 Mbit/s, 20 ms
    Wan,
    /// 1 Gbit/s, 100 ms: a long fat network
    Lfn,
    /// 10 Mbit/s, 20 ms (seed 000's DSL line)
    Dsl,
}

impl Profile {
    pub fn path(self) -> PathSpec {
        let (rate, rtt) = match self {
            Profile::Lan => (1e9, Dur::from_micros(120)),
            Profile::Datacenter => (10e9, Dur::from_micros(1580)),
            Profile::Wan => (100e6, Dur::from_millis(20)),
            Profile::Lfn => (1e9, Dur::from_millis(100)),
            Profile::Dsl => (10e6, Dur::from_millis(20)),
        };
        PathSpec {
            rate_bps: Some(Rate::from_bps(rate)),
            rtt_s: Some(rtt),
            loss: None,
        }
    }
}

/// Which side of the bulk transfers the audited host is.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum RoleArg {
    Sender,
    Receiver,
    Both,
}

/// What `audit` and `tune` judge against, and where.
#[derive(Args, Debug, Clone)]
pub struct AuditArgs {
    #[command(flatten)]
    pub path: PathArgs,
    /// A named path instead of --rate/--rtt.
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// Measure the RTT to this host with ping (the rate still comes from --rate or the profile).
    #[arg(long, value_name = "HOST")]
    pub to: Option<String>,
    /// Concurrent bulk flows sharing the path and this host's memory.
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
    /// Memory all those flows' buffers may take: 1GiB, 512MB.
    #[arg(long, allow_hyphen_values = true)]
    pub memory: Option<Bytes>,
    /// Size the buffer maxima to this path (1.5× the need, at least 128 KiB), lowering maxima
    /// above it and raising those below: for hosts that serve this path only. Uses less
    /// memory and keeps a deep bottleneck queue from being filled. Without it, maxima that
    /// suffice are left alone.
    #[arg(long)]
    pub fit: bool,
    /// Whether this host sends, receives, or both.
    #[arg(long, value_enum, default_value = "both")]
    pub role: RoleArg,
    /// Audit inside this network namespace (`ip netns` name).
    #[arg(long)]
    pub netns: Option<String>,
    /// Audit a host state recorded with --save-state instead of this host.
    #[arg(long, value_name = "FILE", conflicts_with = "netns")]
    pub state: Option<std::path::PathBuf>,
    /// Also write the host state that was read to FILE (JSON), to audit it elsewhere.
    #[arg(long, value_name = "FILE")]
    pub save_state: Option<std::path::PathBuf>,
}

/// Each model reads some of the path: an option it does not read is hidden from its help and
/// refused (cmd/model.rs).
#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Bandwidth-delay product: rate × RTT, in bits and bytes.
    #[command(mut_arg("loss", |a| a.hide(true)))]
    Bdp(PathArgs),
    /// Window bound: the rate a --window allows over --rtt, or the window a --rate needs.
    #[command(mut_arg("loss", |a| a.hide(true)))]
    Window {
        #[command(flatten)]
        path: PathArgs,
        /// Window size: 65535, 64KiB, 4MB. Without it, the window --rate needs is computed.
        #[arg(long, allow_hyphen_values = true)]
        window: Option<Bytes>,
    },
    /// Socket buffers a path needs: tcp_rmem/tcp_wmem maxima, SO_RCVBUF/SO_SNDBUF with
    /// rmem_max/wmem_max, for --flows concurrent flows, and the memory that costs.
    #[command(mut_arg("loss", |a| a.hide(true)))]
    Buffers(BuffersArgs),
    /// Mathis bound (rate ≤ MSS/RTT · C/√p) for --loss, or the largest loss for --target-rate.
    Mathis(MathisArgs),
    /// Padhye (PFTK) throughput with the timeout term and the receive window cap.
    #[command(mut_arg("rate", |a| a.hide(true)))]
    Pftk(PftkArgs),
    /// CUBIC response function (RFC 9438) and its Reno-friendly region, against Reno.
    #[command(mut_arg("rate", |a| a.hide(true)))]
    Cubic(CubicArgs),
    /// cwnd growth through slow start and congestion avoidance, and the time to reach a share
    /// of the path rate.
    #[command(mut_arg("loss", |a| a.hide(true)))]
    Ramp(RampArgs),
}

/// `--mss`, shared by the loss models and the ramp.
#[derive(Args, Debug, Clone)]
pub struct MssArg {
    /// Maximum segment size (TCP payload per packet): 1448 is a 1500-byte MTU with TCP
    /// timestamps, 1460 without.
    #[arg(long, allow_hyphen_values = true, default_value = "1448")]
    pub mss: Bytes,
}

#[derive(Args, Debug, Clone)]
pub struct BuffersArgs {
    #[command(flatten)]
    pub path: PathArgs,
    /// Concurrent bulk flows; they share --rate unless --per-flow is given.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub flows: u32,
    /// --rate is each flow's own rate (a server with N clients), not shared by the flows.
    #[arg(long)]
    pub per_flow: bool,
    /// Memory the host may spend on these buffers (per role): 512MiB, 2GB.
    #[arg(long, allow_hyphen_values = true)]
    pub memory: Option<Bytes>,
    /// Kernel to model (6.1, 6.18); default: the running kernel.
    #[arg(long)]
    pub kernel: Option<KernelVersion>,
    /// Measured payload share of receive buffers, 6.6+ (0.66, 86%); default 50%.
    #[arg(long, allow_hyphen_values = true)]
    pub scaling_ratio: Option<Probability>,
    /// net.ipv4.tcp_adv_win_scale, before 6.6 (default 1: half the buffer is window).
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i8).range(-31..=31))]
    pub adv_win_scale: Option<i8>,
    /// Congestion control of the sender: reno, cubic or bbr (bbr needs 3× in the send buffer).
    #[arg(long, default_value = "cubic")]
    pub cc: CongestionControl,
}

#[derive(Args, Debug, Clone)]
pub struct MathisArgs {
    #[command(flatten)]
    pub path: PathArgs,
    #[command(flatten)]
    pub mss: MssArg,
    /// Compute the largest loss rate that still allows this rate (instead of the bound).
    #[arg(long, allow_hyphen_values = true, conflicts_with = "loss")]
    pub target_rate: Option<Rate>,
    /// Use C = √(3/4) for delayed ACKs (default √(3/2)).
    #[arg(long)]
    pub delayed_ack: bool,
    /// Use this constant C instead (the Web100 paper uses 1).
    #[arg(long, conflicts_with = "delayed_ack")]
    pub constant: Option<f64>,
}

#[derive(Args, Debug, Clone)]
pub struct PftkArgs {
    #[command(flatten)]
    pub path: PathArgs,
    #[command(flatten)]
    pub mss: MssArg,
    /// Retransmission timeout T0.
    #[arg(long, allow_hyphen_values = true, default_value = "200ms")]
    pub rto: Dur,
    /// Packets acknowledged per ACK (2 with delayed ACKs).
    #[arg(long = "b", default_value_t = 2)]
    pub packets_per_ack: u32,
    /// Receive window cap Wmax: 65535, 4MiB.
    #[arg(long, allow_hyphen_values = true)]
    pub window: Option<Bytes>,
}

#[derive(Args, Debug, Clone)]
pub struct CubicArgs {
    #[command(flatten)]
    pub path: PathArgs,
    #[command(flatten)]
    pub mss: MssArg,
}

#[derive(Args, Debug, Clone)]
pub struct RampArgs {
    #[command(flatten)]
    pub path: PathArgs,
    #[command(flatten)]
    pub mss: MssArg,
    /// Initial congestion window, segments.
    #[arg(long, default_value_t = 10)]
    pub initcwnd: u32,
    /// Initial slow-start threshold(s): bytes or inf; several compare: 65535,inf.
    #[arg(long, value_delimiter = ',', default_value = "inf")]
    pub ssthresh: Vec<Ssthresh>,
    /// Congestion avoidance: reno or cubic.
    #[arg(long, default_value = "cubic")]
    pub cc: CongestionControl,
    /// Share of the path rate to reach: 90%, 0.5.
    #[arg(long, allow_hyphen_values = true, default_value = "90%")]
    pub target: Probability,
    /// Receive window cap: 65535, 4MiB.
    #[arg(long, allow_hyphen_values = true)]
    pub window: Option<Bytes>,
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
    #[arg(long, allow_hyphen_values = true)]
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
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION")]
    pub over: Option<Dur>,
}

#[derive(Args, Debug, Clone)]
pub struct WatchArgs {
    #[command(flatten)]
    pub sock: SockArgs,
    /// Time between samples: 1s, 100ms; down to 1ms when watching one connection.
    #[arg(
        long,
        allow_hyphen_values = true,
        default_value = "1s",
        conflicts_with = "closed"
    )]
    pub interval: Dur,
    /// Stop after this many samples (default: until interrupted).
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this long (default: until interrupted).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION")]
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
    #[arg(long, default_value_t = 20, conflicts_with_all = ["detail", "cookie", "closed"])]
    pub top: usize,
    #[command(flatten)]
    pub web: WebArgs,
}

/// `tcptune serve`. iperf3's server options are accepted in iperf3's spelling; those that
/// cannot apply are refused with a sentence (`cmd::perf`).
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Port to listen on (control and data connections alike, as iperf3).
    #[arg(short = 'p', long, default_value_t = 5201)]
    pub port: u16,
    /// Accept clients only from these networks (repeatable): 198.18.0.0/15, 2001:db8::/32.
    #[arg(long, value_name = "CIDR")]
    pub allow: Vec<String>,
    /// Tests that may run at the same time; more clients are told the server is busy.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_tests: u32,
    /// Serve one test, then exit (iperf3's -1).
    #[arg(short = '1', long = "one-off")]
    pub one_off: bool,
    /// iperf3's -V/--verbose: accepted (the log already has what it adds).
    #[arg(short = 'V', long = "verbose", hide = true)]
    pub verbose: bool,
    /// iperf3's --forceflush: accepted (every line is flushed).
    #[arg(long = "forceflush", hide = true)]
    pub forceflush: bool,
    /// iperf3's -s: accepted (this is the server).
    #[arg(short = 's', long = "server", hide = true)]
    pub server: bool,
    /// Listen on this address only (iperf3's -B).
    #[arg(short = 'B', long = "bind", value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
    /// IPv4 only (iperf3's -4).
    #[arg(short = '4', long = "version4", conflicts_with = "v6")]
    pub v4: bool,
    /// IPv6 only (iperf3's -6).
    #[arg(short = '6', long = "version6")]
    pub v6: bool,
    /// Run in the background, detached from the terminal (iperf3's -D); log to --logfile.
    #[arg(short = 'D', long = "daemon")]
    pub daemon: bool,
    /// Write the server's process id to this file (iperf3's -I).
    #[arg(short = 'I', long = "pidfile", value_name = "FILE")]
    pub pidfile: Option<std::path::PathBuf>,
    /// Append the log to this file instead of standard output (iperf3's --logfile).
    #[arg(long, value_name = "FILE")]
    pub logfile: Option<std::path::PathBuf>,
    /// iperf3's -J on the server: refused (the client's -J document has both sides).
    #[arg(short = 'J', hide = true)]
    pub iperf_json: bool,
    /// iperf3's --json-stream on the server: refused, as -J.
    #[arg(long = "json-stream", hide = true)]
    pub json_stream: bool,
    /// iperf3's -i on the server: refused (the server logs one line per test).
    #[arg(short = 'i', long = "interval", hide = true, value_name = "SECS")]
    pub interval: Option<String>,
    /// iperf3's -f on the server: refused (the client's -f sets the units it prints).
    #[arg(short = 'f', long = "format", hide = true, value_name = "UNIT")]
    pub format: Option<String>,
    /// End any test that runs longer than this many seconds (iperf3's --server-max-duration).
    #[arg(long = "server-max-duration", value_name = "SECS",
          value_parser = clap::value_parser!(u32).range(1..=86_400))]
    pub server_max_duration: Option<u32>,
    /// Write what the receiving streams read to this file, and send its bytes where the
    /// server sends (iperf3's -F).
    #[arg(short = 'F', long = "file", value_name = "PATH")]
    pub file: Option<std::path::PathBuf>,
    /// iperf3's -d/--debug: accepted (tcptune prints no debug output).
    #[arg(short = 'd', long = "debug", hide = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "1")]
    pub debug: Option<String>,
    /// Log as iperf3's server prints, line for line (set by `tcptune iperf3 -s`).
    #[arg(long = "iperf3-text", hide = true)]
    pub iperf3_text: bool,
}

/// `tcptune test HOST` (or `-c HOST`). Options use iperf3's letters and long names; those
/// that cannot apply are refused with a sentence (`cmd::perf`).
#[derive(Args, Debug, Clone)]
pub struct TestArgs {
    /// The server: a host name or address running `tcptune serve` or `iperf3 -s`.
    #[arg(required_unless_present = "client", conflicts_with = "client")]
    pub host: Option<String>,
    /// The server, as iperf3 spells it (-c HOST).
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    pub client: Option<String>,
    /// The server's port.
    #[arg(short = 'p', long, default_value_t = 5201)]
    pub port: u16,
    /// Test length in seconds (0: until interrupted, as iperf3's -t 0).
    #[arg(short = 't', long = "time", value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(0..=86_400))]
    pub time: u32,
    /// Send this many bytes instead of running for a time: 100MB, 1GiB.
    #[arg(short = 'n', long = "bytes", visible_alias = "num", value_name = "BYTES",
          conflicts_with = "blocks", value_parser = iperf_bytes)]
    pub bytes: Option<Bytes>,
    /// Send this many blocks (of -l bytes) instead of running for a time.
    #[arg(short = 'k', long = "blockcount", value_name = "BLOCKS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub blocks: Option<u64>,
    /// Bytes per write (block length): 128KiB by default, as iperf3.
    #[arg(short = 'l', long = "length", value_name = "BYTES", value_parser = iperf_bytes)]
    pub length: Option<Bytes>,
    /// Parallel streams.
    #[arg(short = 'P', long = "parallel", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=128))]
    pub parallel: u32,
    /// Reverse: the server sends, we receive.
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once.
    #[arg(long)]
    pub bidir: bool,
    /// Socket buffer size on both ends (SO_SNDBUF and SO_RCVBUF; turns autotuning off): 64KiB.
    #[arg(short = 'w', long = "window", value_name = "SIZE", value_parser = iperf_bytes)]
    pub window: Option<Bytes>,
    /// Congestion control on both ends: cubic, bbr, reno.
    #[arg(
        short = 'C',
        long = "congestion",
        visible_alias = "linux-congestion",
        value_name = "CC"
    )]
    pub congestion: Option<String>,
    /// Maximum segment size of our data connections, bytes.
    #[arg(short = 'M', long = "set-mss", value_name = "MSS",
          value_parser = clap::value_parser!(u32).range(88..=32767))]
    pub mss: Option<u32>,
    /// Disable Nagle's algorithm on the data connections (TCP_NODELAY).
    #[arg(short = 'N', long = "no-delay")]
    pub no_delay: bool,
    /// Rate cap per stream: 100mbit, 1gbit (iperf3's 100M also works); RATE/BURST sends the
    /// burst size to the server, as iperf3 does (tcptune's sender paces evenly at RATE).
    #[arg(short = 'b', long = "bitrate", visible_alias = "bandwidth", value_name = "RATE[/BURST]",
          value_parser = iperf_rate_burst)]
    pub bitrate: Option<(Rate, Option<u32>)>,
    /// Seconds between interval reports (0 for none).
    #[arg(
        short = 'i',
        long = "interval",
        value_name = "SECS",
        default_value_t = 1.0
    )]
    pub interval: f64,
    /// Omit the first SECS seconds from the results (reported as omitted), as iperf3's -O.
    #[arg(short = 'O', long = "omit", value_name = "SECS", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=600))]
    pub omit: u32,
    /// A title printed with the results (and sent to the server).
    #[arg(short = 'T', long = "title")]
    pub title: Option<String>,
    /// A string sent to the server and printed in the JSON results.
    #[arg(long = "extra-data", value_name = "STR")]
    pub extra_data: Option<String>,
    /// The IP type-of-service byte of the data connections: 0x10, 184.
    #[arg(short = 'S', long = "tos", value_name = "TOS", value_parser = parse_tos)]
    pub tos: Option<u8>,
    /// Send with sendfile() from memory (zero copy), as iperf3's -Z.
    #[arg(short = 'Z', long = "zerocopy")]
    pub zerocopy: bool,
    /// Fill the payload with a repeating "0123456789" pattern (iperf2's) instead of tcptune's
    /// scrambled bytes; a tcptune or iperf3 server sends the same in a reverse test.
    #[arg(long = "repeating-payload")]
    pub repeating_payload: bool,
    /// Send this file's bytes instead of memory (the test ends at the file's end), or, with
    /// -R, write what arrives to it (iperf3's -F).
    #[arg(short = 'F', long = "file", value_name = "PATH")]
    pub file: Option<std::path::PathBuf>,
    /// Give up with iperf3's "idle timeout for receiving data" when a test that only receives
    /// (-R) gets no data for this many milliseconds.
    #[arg(long = "rcv-timeout", value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub rcv_timeout: Option<u64>,
    /// Print iperf3's JSON document at the top level (tcptune's additions under "tcptune");
    /// errors as {"error": …}.
    #[arg(short = 'J')]
    pub iperf_json: bool,
    /// Print iperf3 3.17's line-delimited JSON events (start, interval, end, error), then a
    /// "tcptune" event with the samples and the diagnosis.
    #[arg(long = "json-stream", conflicts_with = "iperf_json")]
    pub json_stream: bool,
    /// Rate units of the text output: k, m, g, t (bits/s) or K, M, G, T (bytes/s).
    #[arg(short = 'f', long = "format", value_name = "UNIT")]
    pub format: Option<String>,
    /// Ask the server for its own report of the test and print it.
    #[arg(long = "get-server-output")]
    pub get_server_output: bool,
    /// Local address of every connection (iperf3's -B).
    #[arg(short = 'B', long = "bind", value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
    /// Local port of the data connections (the next streams count up from it).
    #[arg(long = "cport", value_name = "PORT",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub cport: Option<u16>,
    /// IPv4 only.
    #[arg(short = '4', long = "version4", conflicts_with = "v6")]
    pub v4: bool,
    /// IPv6 only.
    #[arg(short = '6', long = "version6")]
    pub v6: bool,
    /// How long connecting may take, milliseconds.
    #[arg(long = "connect-timeout", value_name = "MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub connect_timeout: u64,
    /// Write the output to this file instead of standard output (appended).
    #[arg(long, value_name = "FILE")]
    pub logfile: Option<std::path::PathBuf>,
    /// iperf3's -V/--verbose: under `tcptune iperf3`, iperf3's extra lines (version, host,
    /// settings, CPU use, congestion control); tcptune's own text already has them.
    #[arg(short = 'V', long = "verbose", hide = true)]
    pub verbose: bool,
    /// iperf3's --forceflush: accepted (every line is flushed).
    #[arg(long = "forceflush", hide = true)]
    pub forceflush: bool,
    /// Exit 0 after a completed test whatever the diagnosis, as iperf3 does (set by
    /// `tcptune iperf3`).
    #[arg(long = "iperf3-exit-codes", hide = true)]
    pub iperf3_exit_codes: bool,
    /// Print iperf3's text output line for line instead of tcptune's (set by `tcptune iperf3`).
    #[arg(long = "iperf3-text", hide = true)]
    pub iperf3_text: bool,
    /// UDP datagrams at -b (1 Mbit/s by default) instead of TCP, with iperf3's loss and
    /// jitter accounting.
    #[arg(short = 'u', long = "udp")]
    pub udp: bool,
    /// 64-bit datagram counters (UDP).
    #[arg(long = "udp-counters-64bit")]
    pub udp_counters_64bit: bool,
    /// The path's bottleneck rate, when known: the diagnosis compares the result with it and
    /// sizes buffers for it.
    #[arg(long, allow_hyphen_values = true, value_name = "RATE")]
    pub path_rate: Option<Rate>,
    /// Skip the latency probes (the idle round trips before the load and the handshakes
    /// during it): no responsiveness (RPM), bufferbloat grade or finding.
    #[arg(long)]
    pub no_latency: bool,
    /// The DSCP of the data connections, a number (46, 0x2e) or a name (EF, AF41, CS1); the
    /// TOS byte is DSCP × 4 (iperf3's --dscp).
    #[arg(long = "dscp", value_name = "DSCP", value_parser = parse_dscp, conflicts_with = "tos")]
    pub dscp: Option<u8>,
    /// Cap each data connection's pacing rate (SO_MAX_PACING_RATE, used by the fq qdisc and by
    /// TCP's own pacing): 100M, 1gbit.
    #[arg(long = "fq-rate", value_name = "RATE", value_parser = iperf_rate)]
    pub fq_rate: Option<Rate>,
    /// Bind every connection to this network device (SO_BINDTODEVICE).
    #[arg(long = "bind-dev", value_name = "DEV")]
    pub bind_dev: Option<String>,
    /// Give up a data connection whose sent data stays unacknowledged this many milliseconds
    /// (TCP_USER_TIMEOUT).
    #[arg(long = "snd-timeout", value_name = "MS")]
    pub snd_timeout: Option<u32>,
    /// TCP keepalive on the control connection, optionally IDLE/INTERVAL/COUNT (seconds,
    /// seconds, probes; an empty field keeps the system's value).
    #[arg(long = "cntl-ka", value_name = "IDLE/INTERVAL/COUNT", num_args = 0..=1,
          require_equals = true, default_missing_value = "", value_parser = parse_keepalive)]
    pub cntl_ka: Option<(u32, u32, u32)>,
    /// UDP: set the IPv4 don't-fragment bit (a datagram above the path MTU is then an error).
    #[arg(long = "dont-fragment")]
    pub dont_fragment: bool,
    /// Pin tcptune to CPU N; with N,M the server is asked to pin itself to CPU M (iperf3 -A).
    #[arg(short = 'A', long = "affinity", value_name = "N[,M]", value_parser = parse_affinity)]
    pub affinity: Option<(u32, Option<u32>)>,
    /// Prefix each line of text output with the time, formatted as strftime's FORMAT
    /// (default "%c ", as iperf3's --timestamps).
    #[arg(long = "timestamps", value_name = "FORMAT", num_args = 0..=1, require_equals = true,
          default_missing_value = "%c ")]
    pub timestamps: Option<String>,
    /// iperf3's -d/--debug: accepted (tcptune prints no debug output).
    #[arg(short = 'd', long = "debug", hide = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "1")]
    pub debug: Option<String>,
}

impl TestArgs {
    /// The server, from the positional HOST or -c HOST (clap requires exactly one).
    pub fn server(&self) -> &str {
        self.client
            .as_deref()
            .or(self.host.as_deref())
            .unwrap_or("")
    }
}

/// `--host`'s short help, from the lab's table of host keys.
fn host_help() -> String {
    format!(
        "Host setting HOST.KEY=VALUE (HOST: client, server, both; KEY: {})",
        tcptune_lab::keys::names(tcptune_lab::keys::HOST)
    )
}

/// `--host`'s long help: every host key with its bounds and meaning, from the lab's table.
fn host_long_help() -> String {
    let mut s = host_help();
    s.push_str(".\n");
    for k in tcptune_lab::keys::HOST {
        let emu = match k.backends {
            tcptune_lab::keys::Backends::EmuOnly => " (emu backend only)",
            tcptune_lab::keys::Backends::Both => "",
        };
        s.push_str(&format!(
            "\n  {}: {}{emu} [{}]",
            k.name,
            k.what,
            k.kind.describe()
        ));
    }
    s
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
        #[arg(long, value_name = "HOST.KEY=VALUE", help = host_help(), long_help = host_long_help())]
        host: Vec<String>,
        /// A JSON lab spec (link and hosts); options given as well override it.
        #[arg(long, value_name = "FILE")]
        spec: Option<std::path::PathBuf>,
        /// Link backend: emu (the user-space emulator over TUN), netem (a veth pair with tc
        /// qdiscs: netem, or tbf for a link that only limits the rate), or auto (netem where
        /// the kernel has sch_netem and can express the link, else emu). Default: the spec
        /// file's, else auto.
        #[arg(long)]
        backend: Option<String>,
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
        #[arg(long, value_name = "HOST.KEY=VALUE", help = host_help(), long_help = host_long_help())]
        host: Vec<String>,
    },
    /// Run an experiment: every trial of a TOML spec on fresh labs, then the report.
    /// An interrupted run resumes where it stopped when run again with the same --out.
    Run {
        /// The experiment spec (TOML; see examples/).
        spec: std::path::PathBuf,
        /// Results directory (trials.jsonl, series/, summary.csv, report.html, plots/).
        #[arg(long)]
        out: std::path::PathBuf,
        /// Stem of the labs' names: each trial runs on a lab of its own, NAME-0001, NAME-0002, …
        #[arg(long, default_value = "exp")]
        name: String,
        /// Only check the spec and print the plan; run nothing.
        #[arg(long)]
        check: bool,
        /// Smoke mode: a quick check that the spec runs: at most 6 of its points (chosen
        /// evenly), one trial each, no warm-up, workloads cut to 1 s.
        #[arg(long)]
        smoke: bool,
        /// Run the trials that failed in an earlier run again (without it a resumed run keeps
        /// the failures as they are).
        #[arg(long)]
        retry_failed: bool,
        /// Repetitions "auto" at this precision, whatever the spec says: trials per point until
        /// the 95% CI half-width of its mean goodput is within P of the mean (a fraction or a
        /// percentage: 0.05, 5%), from the spec's min_repetitions to max_repetitions (3 and 20
        /// by default). The results' spec.toml records it.
        #[arg(long, value_name = "P")]
        precision: Option<String>,
    },
    /// Remove a lab, or with --all the leftovers of every lab whose owner is gone.
    Down {
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Remove every leftover lab (whose emulator, `lab up` or `lab run` is gone).
        #[arg(long)]
        all: bool,
        /// With --all: remove running labs too, other users' included.
        #[arg(long)]
        force: bool,
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

/// `tcptune analyze FILE|-`, or `tcptune analyze A B` to join two captures of one path.
#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// Capture file (pcap or pcapng, gzip-compressed or not), or `-` for standard input.
    pub file: String,
    /// A second capture of the same path (the other end, or another point): the two are
    /// joined packet by packet for one-way delay, where losses happened, duplication and
    /// reordering by the path, and which retransmissions were needed.
    pub second: Option<String>,
    /// With two captures: both were stamped by one clock (taken on one host), so no clock
    /// offset is estimated.
    #[arg(long, requires = "second")]
    pub same_clock: bool,
    /// List every flagged packet with the rule that fired and the numbers it compared.
    #[arg(long)]
    pub packets: bool,
    /// Write SVG graphs (time-sequence, throughput, RTT, window and bytes in flight) of each
    /// flow into this directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub graphs: Option<std::path::PathBuf>,
    /// Graph at most this many flows (the ones with the most data).
    #[arg(long, default_value_t = 8, value_name = "N", requires = "graphs")]
    pub graph_flows: usize,
}
