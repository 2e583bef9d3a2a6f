//! `tcptune _trace` (hidden): the tracer's events as JSON lines, to see it work and to
//! measure its cost (`bench/trace`).

use clap::Args;
use tcptune_model::Dur;

#[derive(Args, Debug, Clone)]
pub struct TraceArgs {
    /// Trace the sockets with this port at either end (repeatable).
    #[arg(
        long = "port",
        value_name = "PORT",
        required_unless_present = "cookies"
    )]
    pub ports: Vec<u16>,
    /// Trace the socket with this cookie (repeatable; cookies as `conns --all` shows them).
    #[arg(long = "cookie", value_name = "COOKIE")]
    pub cookies: Vec<u64>,
    /// Stop after this long (default: until interrupted).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION")]
    pub duration: Option<Dur>,
    /// Events of one connection per second beyond which they are dropped and counted (0: no
    /// cap).
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_per_sec: u32,
    /// Decode the events but print only the closing counts (for benchmarks).
    #[arg(long)]
    pub count_only: bool,
}
