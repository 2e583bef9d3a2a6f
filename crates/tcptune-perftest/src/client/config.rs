//! What `tcptune test` was asked to do: the client's configuration, read by the driver, the
//! transports and the engine's input alike.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tcptune_diagnose::advice::HostSettings;
use tcptune_iperf3::Params;
use tcptune_model::Rate;

use crate::sock::{self, Family};

/// What `tcptune test` was asked to do.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server's host name or address.
    pub host: String,
    /// The server's TCP port.
    pub port: u16,
    /// The test's parameters, as sent to the server.
    pub params: Params,
    /// Interval reports every this long; none = no interval reports.
    pub interval: Option<Duration>,
    /// tcp_info sampling period (100 ms or less).
    pub sample_every: Duration,
    /// The path's bottleneck rate, when known.
    pub path_rate: Option<Rate>,
    /// How long to wait for the control connection.
    pub connect_timeout: Duration,
    /// Set (by a signal handler) to end the test early: CLIENT_TERMINATE is sent, as iperf3
    /// does on Ctrl-C, so the server ends its side at once.
    pub interrupt: Option<&'static AtomicBool>,
    /// This host's TCP settings (read by the caller), so recommendations are checked against
    /// the values in effect; empty when unknown.
    pub host_settings: HostSettings,
    /// Local address of every connection (`-B`).
    pub bind: Option<std::net::IpAddr>,
    /// Local port of the first data connection, the next ones counting up (`--cport`).
    pub cport: Option<u16>,
    /// Only this address family (`-4`, `-6`).
    pub family: Option<Family>,
    /// Probe latency: round trips before the load and under it (`crate::probe`).
    pub latency: bool,
    /// Socket options of the data connections (`--bind-dev`, `--fq-rate`, `--snd-timeout`).
    pub data_extra: sock::Extra,
    /// Socket options of the control connection (`--bind-dev`, `--cntl-ka`).
    pub control_extra: sock::Extra,
    /// UDP datagrams with the don't-fragment bit (`--dont-fragment`).
    pub dont_fragment: bool,
    /// A test that only receives fails when no data arrives for this long (`--rcv-timeout`).
    pub rcv_timeout: Option<Duration>,
    /// iperf3's `-F`: send this file's bytes (the test ends at its end), or, receiving, write
    /// what arrives to it. A local choice: the server is not told.
    pub diskfile: Option<std::path::PathBuf>,
}

impl ClientConfig {
    /// The local port of data stream `i` (`--cport`: the streams take consecutive ports from
    /// it; 0: any).
    pub(crate) fn data_port(&self, i: u32) -> u16 {
        self.cport
            .map(|c| c.saturating_add(i.min(u16::MAX as u32) as u16))
            .unwrap_or(0)
    }
}
