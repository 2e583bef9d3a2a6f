//! The socket layer of `tcptune serve` and `tcptune test`: iperf3's control protocol (the
//! sans-IO sessions of `tcptune-iperf3`) driven over real sockets, data streams on the same port,
//! tcp_info sampled on every data socket, interval and final reports in iperf3's JSON shape,
//! and the end-of-test diagnosis (`tcptune_diagnose::throughput`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cjson;
pub mod client;
pub mod control;
pub mod data;
pub mod document;
pub mod iperf3_text;
pub mod iperf3_verbose;
pub mod peer;
pub mod probe;
pub mod replay;
mod send;
pub mod server;
pub mod server_conn;
pub mod server_json;
pub mod server_text;
pub mod sock;
mod stream;
pub mod test_report;
pub mod udp;

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tcptune_diagnose::Sample;
use tcptune_iperf3::session::SessionError;

/// Why a test could not run. The OS error is part of each message (not a `source`), so a
/// context chain prints it once.
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// The host name did not resolve.
    #[error("cannot resolve '{0}'; give a host name or an IP address")]
    Resolve(String),
    /// iperf3's words ("address family for hostname not supported") with what to change.
    #[error("unable to connect to server: address family for hostname not supported ('{host}' has no {asked} address; leave out {flag} or give an {asked} address)")]
    Family {
        /// The host given.
        host: String,
        /// The family asked for ("IPv4", "IPv6").
        asked: &'static str,
        /// The option that asked for it (`-4`, `-6`).
        flag: &'static str,
    },
    /// The control connection could not be made.
    #[error("cannot connect to {addr}: {error}; is a server (tcptune serve or iperf3 -s) listening there?")]
    Connect {
        /// The server's address.
        addr: SocketAddr,
        /// Why not.
        error: std::io::Error,
    },
    /// The server could not listen.
    #[error("cannot listen on {addr}: {error}; choose another port with -p")]
    Bind {
        /// Where it was to listen.
        addr: SocketAddr,
        /// Why not.
        error: std::io::Error,
    },
    /// An OS error on a socket or a file.
    #[error("{context}: {error}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The OS error.
        error: std::io::Error,
    },
    /// The control protocol failed (the peer's error, a broken message); the callers' context
    /// says it was the test.
    #[error("{0}")]
    Session(SessionError),
    /// Something this end does not do, in one sentence.
    #[error("{0}")]
    Unsupported(&'static str),
    /// iperf3's words (`IENOMSG`), then the limit and what to change.
    #[error("idle timeout for receiving data: none arrived for {0} ms (--rcv-timeout); check the server, or give a larger --rcv-timeout")]
    RcvTimeout(u128),
}

impl TestError {
    /// An OS error while doing `context`.
    pub fn io(context: &'static str, error: std::io::Error) -> TestError {
        TestError::Io { context, error }
    }
}

/// A network in CIDR notation (`--allow 198.18.0.0/15`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The network's address.
    pub addr: IpAddr,
    /// The prefix length, bits.
    pub prefix: u8,
}

impl FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Cidr, String> {
        let bad =
            || format!("'{s}' is not a network; write it as ADDRESS/PREFIX, e.g. 198.18.0.0/15");
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p.trim().parse::<u8>().map_err(|_| bad())?,
        };
        if prefix > max {
            return Err(bad());
        }
        Ok(Cidr { addr, prefix })
    }
}

/// One stream's samples as a tcptune server sends them in its results (the extension).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerStreamSamples {
    /// iperf3's stream id.
    pub id: u32,
    /// True when the server sent on this stream.
    pub sender: bool,
    /// tcp_info samples, oldest first.
    pub samples: Vec<Sample>,
}

/// The server's results extension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerSamples {
    /// Each stream's figures.
    pub streams: Vec<ServerStreamSamples>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_and_match() {
        let c: Cidr = "198.18.0.0/15".parse().unwrap();
        assert!(c.contains("198.19.4.2".parse().unwrap()));
        assert!(!c.contains("198.20.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:198.18.1.1".parse().unwrap()));
        let one: Cidr = "127.0.0.1".parse().unwrap();
        assert_eq!(one.prefix, 32);
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        let any: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(any.contains("8.8.8.8".parse().unwrap()));
        let v6: Cidr = "2001:2::/48".parse().unwrap();
        assert!(v6.contains("2001:2:0:1::5".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("nonsense".parse::<Cidr>().is_err());
    }
}
