//! Real hosts in a spec: the `[hosts]` table names where the client and the server run,
//! `ssh://[user@]host[:port]` (reached over the system's OpenSSH client) or `local` (this
//! machine). Without `[hosts]` a spec runs on the lab, so the same spec runs on either by
//! changing this table only.
//!
//! ```toml
//! [hosts]
//! client = "ssh://root@client.example.net"
//! server = "ssh://root@server.example.net:2222"   # or "local"
//! identity = "~/.ssh/id_ed25519"                  # optional: ssh -i
//! ssh_config = "~/.ssh/config-lab"                # optional: ssh -F
//! ssh_options = ["ConnectTimeout=5"]              # optional: each as ssh -o
//! tcptune = "/usr/local/bin/tcptune"              # optional: the remote tcptune
//! server_address = "10.0.0.2"                     # optional: where the client reaches the server
//! ```
//!
//! What a real host can take from a point is narrower than the lab: only settings that
//! `tcptune tune` applies with its snapshot and exact rollback (`sysctl.*`, `cc`); the link's
//! impairments only where the sender has `sch_netem` ([`crate::host_runner`] checks); the
//! workload `iperf3` (run as `tcptune serve` and `tcptune test`). [`check_point`] refuses the
//! rest in one sentence before any trial runs.

use std::fmt;
use std::path::PathBuf;

use toml_edit::{Item, Table, Value};

use crate::settings::Settings;

/// Where one end of the experiment runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// This machine, without ssh.
    Local,
    /// A host reached with `ssh [-p port] [user@]host`.
    Ssh {
        /// `ssh user@`; `None`: ssh's default (the config's or the local user).
        user: Option<String>,
        /// Host name or address.
        host: String,
        /// `ssh -p`; `None`: ssh's default.
        port: Option<u16>,
    },
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Local => f.write_str("local"),
            Endpoint::Ssh { user, host, port } => {
                f.write_str("ssh://")?;
                if let Some(u) = user {
                    write!(f, "{u}@")?;
                }
                if host.contains(':') {
                    write!(f, "[{host}]")?;
                } else {
                    f.write_str(host)?;
                }
                if let Some(p) = port {
                    write!(f, ":{p}")?;
                }
                Ok(())
            }
        }
    }
}

impl Endpoint {
    /// `user@host` (or `host`) as ssh takes it.
    pub fn destination(&self) -> Option<String> {
        match self {
            Endpoint::Local => None,
            Endpoint::Ssh { user, host, .. } => Some(match user {
                Some(u) => format!("{u}@{host}"),
                None => host.clone(),
            }),
        }
    }
}

/// Parses `local` or `ssh://[user@]host[:port]` (an IPv6 host in brackets). The error is one
/// sentence naming the value and the fix.
pub fn parse_endpoint(what: &str, s: &str) -> Result<Endpoint, String> {
    let fix = format!(
        "{what} = \"{s}\" is not a host; write \"ssh://user@host\", \"ssh://user@host:port\" or \"local\""
    );
    if s == "local" {
        return Ok(Endpoint::Local);
    }
    let Some(rest) = s.strip_prefix("ssh://") else {
        return Err(fix);
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (user, hostport) = match rest.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, rest),
    };
    if user.is_some_and(|u| {
        u.is_empty()
            || !u
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    }) {
        return Err(fix);
    }
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(|| fix.clone())?;
        match after {
            "" => (h, None),
            p => (h, Some(p.strip_prefix(':').ok_or_else(|| fix.clone())?)),
        }
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let host_ok = !host.is_empty()
        && !host.starts_with('-')
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c));
    if !host_ok {
        return Err(fix);
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                return Err(format!(
                    "{what} = \"{s}\": port '{p}' must be a number from 1 to 65535"
                ))
            }
        },
    };
    Ok(Endpoint::Ssh {
        user: user.map(str::to_string),
        host: host.to_string(),
        port,
    })
}

/// A spec's `[hosts]` table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostsSpec {
    /// Where the client (the sender, unless the workload reverses it) runs.
    pub client: Endpoint,
    /// Where the server runs.
    pub server: Endpoint,
    /// `ssh -i`: the private key.
    pub identity: Option<PathBuf>,
    /// `ssh -F`: a client configuration file.
    pub ssh_config: Option<PathBuf>,
    /// Each passed as `ssh -o OPTION`.
    pub ssh_options: Vec<String>,
    /// The remote hosts' tcptune (default `tcptune` on their PATH).
    pub tcptune: String,
    /// The address the client connects to the server at (default: the address ssh reached
    /// the server at).
    pub server_address: Option<String>,
}

/// The keys of `[hosts]`.
pub const HOSTS_KEYS: [&str; 7] = [
    "client",
    "server",
    "identity",
    "ssh_config",
    "ssh_options",
    "tcptune",
    "server_address",
];

/// Parses the `[hosts]` table; errors name the key (the caller adds the line).
pub fn parse(t: &Table) -> Result<HostsSpec, (String, String)> {
    let fail = |k: &str, m: String| (k.to_string(), m);
    for (k, _) in t.iter() {
        if !HOSTS_KEYS.contains(&k) {
            return Err(fail(
                k,
                format!(
                    "'hosts.{k}' is not a hosts setting; they are: {}",
                    HOSTS_KEYS.join(", ")
                ),
            ));
        }
    }
    let text = |k: &str| -> Result<Option<String>, (String, String)> {
        match t.get(k) {
            None => Ok(None),
            Some(i) => i
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| fail(k, format!("'hosts.{k}' must be a string"))),
        }
    };
    let endpoint = |k: &str| -> Result<Endpoint, (String, String)> {
        let s = text(k)?.ok_or_else(|| {
            fail(
                "hosts",
                format!("[hosts] needs {k} = \"ssh://user@host\" (or \"local\")"),
            )
        })?;
        parse_endpoint(&format!("hosts.{k}"), &s).map_err(|m| fail(k, m))
    };
    let ssh_options = match t.get("ssh_options") {
        None => Vec::new(),
        Some(Item::Value(Value::Array(a))) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .filter(|s| s.contains('=') && !s.starts_with('-'))
                    .map(str::to_string)
                    .ok_or_else(|| {
                        fail(
                            "ssh_options",
                            "each of hosts.ssh_options must be an ssh option as \"Name=value\", e.g. \"ConnectTimeout=5\"".into(),
                        )
                    })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(fail(
                "ssh_options",
                "hosts.ssh_options must be a list, e.g. [\"ConnectTimeout=5\"]".into(),
            ))
        }
    };
    let server_address = text("server_address")?;
    if let Some(a) = &server_address {
        if a.parse::<std::net::IpAddr>().is_err() {
            return Err(fail(
                "server_address",
                format!("hosts.server_address = \"{a}\" is not an IP address; give one like \"10.0.0.2\""),
            ));
        }
    }
    let hosts = HostsSpec {
        client: endpoint("client")?,
        server: endpoint("server")?,
        identity: text("identity")?.map(PathBuf::from),
        ssh_config: text("ssh_config")?.map(PathBuf::from),
        ssh_options,
        tcptune: text("tcptune")?.unwrap_or_else(|| "tcptune".into()),
        server_address,
    };
    if hosts.client == Endpoint::Local && hosts.server == Endpoint::Local {
        return Err(fail(
            "client",
            "hosts.client and hosts.server are both local; make one of them ssh://user@host (or leave out [hosts] to run on the lab)".into(),
        ));
    }
    Ok(hosts)
}

/// The workload keys a real host runs (`tcptune test` takes them as iperf3's options).
const WORKLOAD_KEYS: [&str; 6] = ["kind", "direction", "duration", "parallel", "window", "cc"];

/// Checks that real hosts can run a point: each host setting is one `tcptune tune` applies
/// and rolls back (`sysctl.*`, `cc`), the workload is iperf3 with options `tcptune test`
/// takes, and nothing needs the lab (captures). Link settings pass here; whether the sender
/// has netem is asked of the host before the first trial.
pub fn check_point(s: &Settings) -> Result<(), String> {
    for (k, v) in s {
        let (section, rest) = k.split_once('.').unwrap_or((k, ""));
        match section {
            "client" | "server" if rest == "cc" || rest.starts_with("sysctl.") => {}
            "client" | "server" => {
                return Err(format!(
                    "{k} is a lab setting; on real hosts only sysctl.* and cc are applied (with tcptune tune's snapshot and rollback): set it on the host yourself or remove it"
                ))
            }
            "workload" if rest == "kind" && v != "iperf3" && v != "bulk" => {
                return Err(format!(
                    "workload kind {v} runs on the lab only; on real hosts use kind = \"iperf3\" (tcptune serve and tcptune test)"
                ))
            }
            "workload" if !WORKLOAD_KEYS.contains(&rest) => {
                return Err(format!(
                    "{k} runs on the lab only; on real hosts the workload takes {}",
                    WORKLOAD_KEYS.join(", ")
                ))
            }
            "capture" => {
                return Err(format!(
                    "{k}: captures run on the lab only for now; remove [capture] to run on real hosts"
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The sysctls a point sets on `host` ("client" or "server"), `cc` as
/// net.ipv4.tcp_congestion_control (as the lab sets it).
pub fn host_sysctls(s: &Settings, host: &str) -> Vec<(String, String)> {
    let prefix = format!("{host}.");
    s.iter()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix(&prefix)?;
            if rest == "cc" {
                Some(("net.ipv4.tcp_congestion_control".to_string(), v.clone()))
            } else {
                Some((rest.strip_prefix("sysctl.")?.to_string(), v.clone()))
            }
        })
        .collect()
}

/// Whether a point impairs the link (then the sender needs netem).
pub fn impairs_link(s: &Settings) -> bool {
    s.keys().any(|k| k.starts_with("link."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_bad_ones_say_the_fix() {
        assert_eq!(parse_endpoint("hosts.client", "local"), Ok(Endpoint::Local));
        let e = parse_endpoint("hosts.client", "ssh://root@198.18.3.2:2222").unwrap();
        assert_eq!(
            e,
            Endpoint::Ssh {
                user: Some("root".into()),
                host: "198.18.3.2".into(),
                port: Some(2222)
            }
        );
        assert_eq!(e.to_string(), "ssh://root@198.18.3.2:2222");
        assert_eq!(e.destination().as_deref(), Some("root@198.18.3.2"));
        let e = parse_endpoint("hosts.server", "ssh://[2001:2::1]:22").unwrap();
        assert_eq!(e.to_string(), "ssh://[2001:2::1]:22");
        assert_eq!(e.destination().as_deref(), Some("2001:2::1"));
        let e = parse_endpoint("hosts.server", "ssh://server.example.net").unwrap();
        assert_eq!(e.destination().as_deref(), Some("server.example.net"));
        for bad in [
            "root@host",
            "ssh://",
            "ssh://@host",
            "ssh://-oProxyCommand=x",
            "ssh://a b",
            "http://host",
        ] {
            let m = parse_endpoint("hosts.client", bad).unwrap_err();
            assert!(
                m.contains(&format!("hosts.client = \"{bad}\" is not a host"))
                    && m.contains("write \"ssh://user@host\""),
                "{bad}: {m}"
            );
        }
        let m = parse_endpoint("hosts.client", "ssh://h:99999").unwrap_err();
        assert!(
            m.contains("port '99999' must be a number from 1 to 65535"),
            "{m}"
        );
    }

    fn settings(kv: &[(&str, &str)]) -> Settings {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_point_on_real_hosts_takes_only_what_tune_can_roll_back() {
        let ok = settings(&[
            ("server.sysctl.net.ipv4.tcp_rmem", "4096 65536 65536"),
            ("client.cc", "cubic"),
            ("workload.kind", "iperf3"),
            ("workload.duration", "2s"),
            ("label", "x"),
        ]);
        check_point(&ok).unwrap();
        assert_eq!(
            host_sysctls(&ok, "client"),
            vec![(
                "net.ipv4.tcp_congestion_control".to_string(),
                "cubic".to_string()
            )]
        );
        assert_eq!(
            host_sysctls(&ok, "server"),
            vec![(
                "net.ipv4.tcp_rmem".to_string(),
                "4096 65536 65536".to_string()
            )]
        );
        for (k, v, want) in [
            ("client.mtu", "9000", "client.mtu is a lab setting"),
            ("workload.kind", "http", "use kind = \"iperf3\""),
            ("workload.prime_connections", "1", "runs on the lab only"),
            ("capture.snaplen", "128", "remove [capture]"),
        ] {
            let e = check_point(&settings(&[(k, v)])).unwrap_err();
            assert!(e.contains(want), "{k}: {e}");
        }
        assert!(impairs_link(&settings(&[("link.delay", "10ms")])));
        assert!(!impairs_link(&ok));
    }
}
