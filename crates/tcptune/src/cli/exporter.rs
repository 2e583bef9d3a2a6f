//! `tcptune exporter`'s arguments.

use clap::Args;
use tcptune_model::Dur;

/// `tcptune exporter`: see tcptune_exporter for the metrics.
#[derive(Args, Debug)]
pub struct ExporterArgs {
    /// Address to serve /metrics and /connections on (loopback unless asked).
    #[arg(long, value_name = "ADDR", default_value = tcptune_exporter::DEFAULT_LISTEN)]
    pub listen: std::net::SocketAddr,
    /// Look into these named network namespaces (`ip netns list`) instead of this one.
    #[arg(long, value_name = "NAME", num_args = 1.., conflicts_with = "all_netns")]
    pub netns: Vec<String>,
    /// Look into this namespace and every named one that exists at start.
    #[arg(long)]
    pub all_netns: bool,
    /// Group connections by: port (services named in --groups), cidr (peer networks named in
    /// --groups), cc, netns; comma-separated. Default: one group, `all`.
    #[arg(long, value_name = "DIM,...", value_delimiter = ',')]
    pub group_by: Vec<String>,
    /// The group map: a TOML file with [ports] (name = [80, "8000-8080"]) and [cidrs]
    /// (name = ["198.18.0.0/15"]) tables.
    #[arg(long, value_name = "FILE")]
    pub groups: Option<std::path::PathBuf>,
    /// Time between polls of the kernel's socket tables.
    #[arg(long, default_value = "1s")]
    pub interval: Dur,
    /// The most series a scrape holds; groups past it are counted in group="other".
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub max_series: usize,
    /// Web configuration in the Prometheus exporters' format: tls_server_config (TLS),
    /// basic_auth_users (bcrypt), http_server_config (response headers). Re-read when it or a
    /// file it names changes; a broken new one is reported and the previous one kept.
    #[arg(long, value_name = "FILE")]
    pub web_config: Option<std::path::PathBuf>,
}
