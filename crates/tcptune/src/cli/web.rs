//! The browser view's arguments: `watch --web [ADDR]` and `tcptune view FILE`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

/// Who may open the page: loopback unless `--listen` widens it, with the exporter's access
/// rules.
#[derive(Args, Debug, Clone)]
pub struct AccessArgs {
    /// Serve the page on this address even when it is not loopback (whoever reaches it sees
    /// this host's connections: protect it with --web-config).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Web configuration in the Prometheus exporters' format (tls_server_config for TLS,
    /// basic_auth_users with bcrypt hashes), as `tcptune exporter` reads it.
    #[arg(long, value_name = "FILE")]
    pub web_config: Option<PathBuf>,
}

/// `watch --web`: the live view as a web page.
#[derive(Args, Debug, Clone)]
pub struct WebArgs {
    /// Serve the live view as a web page on ADDR (loopback; default 127.0.0.1:19242, port 0
    /// picks a free one) instead of drawing on the terminal; the URL is printed. `--record`
    /// then keeps what the page was shown, for `tcptune view`.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = tcptune_web::DEFAULT_WEB, conflicts_with_all = ["closed", "detail", "cookie"])]
    pub web: Option<SocketAddr>,
    #[command(flatten)]
    pub access: AccessArgs,
}

/// `tcptune view`.
#[derive(Args, Debug, Clone)]
pub struct ViewArgs {
    /// A recording made with `tcptune watch --web --record FILE`, an experiment's results
    /// directory (or one trial's `series/<trial>.jsonl`), or a pcap/pcapng capture.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Address to serve the page on (loopback; port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = tcptune_web::DEFAULT_WEB)]
    pub web: SocketAddr,
    #[command(flatten)]
    pub access: AccessArgs,
}
