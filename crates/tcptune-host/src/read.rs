//! Reading a live host's state: `/proc/sys/net`, interfaces and routes (from `ip -j`, whose
//! JSON is a stable interface), `/proc/net/sockstat`, `/proc/meminfo`, and the sysctl.d files.
//!
//! Inside a named network namespace, `/proc/sys/net` is read from a thread that has entered the
//! namespace (sysctl lookups follow the calling thread's namespace), so the rest of the process
//! stays where it is; `ip -n NAME` does the same for links and routes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::state::{
    key_from_proc_path, normalize_value, HostState, Interface, LockedSocket, Route, SysctlFileLine,
};
use tcptune_kernel::sys::{in_netns, KernelError};

/// Why the host could not be read. A cause is chained as the `source`, not repeated in the
/// message: the binary prints the chain (`{:#}`) once.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The namespace could not be entered.
    #[error(transparent)]
    Netns(#[from] KernelError),
    /// A command (`ip`) could not be run or failed.
    #[error("cannot run `{cmd}`: {why}")]
    Command {
        /// The command line.
        cmd: String,
        /// Why, as it said.
        why: String,
    },
    /// A file under /proc or /sys could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The sysctl subtrees the audit looks at. Per-interface (`conf/`, `neigh/`) trees are skipped:
/// they are large and carry nothing that limits a TCP connection's throughput.
const SYSCTL_DIRS: [&str; 2] = ["net/core", "net/ipv4"];

/// Where systemd-sysctl and procps read configuration, in precedence order.
pub const SYSCTL_CONF_DIRS: [&str; 5] = [
    "/etc/sysctl.d",
    "/run/sysctl.d",
    "/usr/local/lib/sysctl.d",
    "/usr/lib/sysctl.d",
    "/lib/sysctl.d",
];

/// Reads the state of the host, or of the named network namespace.
pub fn read_host(netns_name: Option<&str>) -> Result<HostState, ReadError> {
    let sysctls = match netns_name {
        Some(name) => in_netns(name, || read_sysctls(Path::new(tcptune_os::sysctl::ROOT)))??,
        None => read_sysctls(Path::new(tcptune_os::sysctl::ROOT))?,
    };
    let kernel = tcptune_kernel::sys::kernel_version();
    Ok(HostState {
        netns: netns_name.map(str::to_string),
        kernel,
        interfaces: parse_links(&ip_json(netns_name, &["-d", "link", "show"])?),
        routes: parse_routes(&ip_json(netns_name, &["route", "show", "table", "all"])?),
        page_size: tcptune_os::process::page_size(),
        mem_total_bytes: fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| parse_meminfo(&m)),
        tcp_mem_used_pages: match netns_name {
            Some(name) => in_netns(name, || fs::read_to_string("/proc/net/sockstat"))?,
            None => fs::read_to_string("/proc/net/sockstat"),
        }
        .ok()
        .and_then(|s| parse_sockstat_tcp_mem(&s)),
        sysctl_files: read_sysctl_files(&SYSCTL_CONF_DIRS, Path::new("/etc/sysctl.conf")),
        locked_sockets: locked_sockets(netns_name, &sysctls),
        sysctls,
    })
}

/// Connections whose application fixed a buffer size (SO_RCVBUF/SO_SNDBUF), as far as
/// sock_diag shows it. The kernel does not report the lock itself (`SOCK_RCVBUF_LOCK` stays
/// inside the socket), so the sign used is a buffer below the default of `tcp_rmem`/`tcp_wmem`:
/// autotuning starts a connection's buffers at the default and only grows them, so an
/// established socket holding less had its size set by the application (or was shrunk under
/// TCP memory pressure, which the audit reports separately). A locked buffer at or above the
/// default cannot be told from an autotuned one and is not reported. Nothing is reported
/// when the sockets cannot be dumped.
fn locked_sockets(
    netns: Option<&str>,
    sysctls: &std::collections::BTreeMap<String, String>,
) -> Vec<LockedSocket> {
    let default =
        |key: &str| -> Option<u64> { sysctls.get(key)?.split_whitespace().nth(1)?.parse().ok() };
    let (Some(rmem_default), Some(wmem_default)) =
        (default("net.ipv4.tcp_rmem"), default("net.ipv4.tcp_wmem"))
    else {
        return Vec::new();
    };
    let Ok(filter) = "state established".parse::<tcptune_kernel::Filter>() else {
        return Vec::new();
    };
    let Ok(mut diag) = tcptune_kernel::Diag::open_maybe_in(netns) else {
        return Vec::new();
    };
    let Ok(socks) = diag.dump(&filter, tcptune_kernel::diag::ext::SKMEMINFO) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, LockedSocket)> = socks
        .iter()
        .filter_map(|s| {
            let m = s.skmem?;
            let rcv = (u64::from(m.rcvbuf) < rmem_default).then_some(u64::from(m.rcvbuf));
            let snd = (u64::from(m.sndbuf) < wmem_default).then_some(u64::from(m.sndbuf));
            (rcv.is_some() || snd.is_some()).then(|| {
                (
                    s.inode,
                    LockedSocket {
                        local: s.src.to_string(),
                        remote: s.dst.to_string(),
                        process: None,
                        rcvbuf_locked: rcv,
                        sndbuf_locked: snd,
                    },
                )
            })
        })
        .collect();
    let inodes = found.iter().map(|(i, _)| *i).filter(|&i| i != 0).collect();
    let owners = tcptune_kernel::procs::owners(&inodes);
    for (inode, s) in &mut found {
        s.process = owners
            .get(inode)
            .map(|o| format!("{} (pid {})", o.comm, o.pid));
    }
    found.into_iter().map(|(_, s)| s).collect()
}

fn read_sysctls(root: &Path) -> Result<std::collections::BTreeMap<String, String>, ReadError> {
    let mut out = std::collections::BTreeMap::new();
    for dir in SYSCTL_DIRS {
        let path = root.join(dir);
        let entries = fs::read_dir(&path).map_err(|source| ReadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        for entry in entries.flatten() {
            let p = entry.path();
            if !p.is_file() {
                continue;
            }
            // Write-only or permission-restricted entries are skipped, not fatal.
            if let Ok(v) = fs::read_to_string(&p) {
                let rel = p
                    .strip_prefix(root)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .to_string();
                out.insert(key_from_proc_path(&rel), normalize_value(&v));
            }
        }
    }
    Ok(out)
}

/// One sysctl of the current network namespace, whitespace-normalised as the audit keeps
/// values, or `None` where it cannot be read (through [`crate::tune::LiveHost`], the one
/// /proc/sys accessor).
pub fn read_sysctl(key: &str) -> Option<String> {
    use crate::tune::HostIo;
    crate::tune::LiveHost { netns: None }
        .read_sysctl(key)
        .ok()
        .map(|v| normalize_value(&v))
}

fn ip_json(netns_name: Option<&str>, args: &[&str]) -> Result<serde_json::Value, ReadError> {
    let mut cmd = Command::new("ip");
    if let Some(n) = netns_name {
        cmd.args(["-n", n]);
    }
    cmd.arg("-j").args(args);
    let line = format!("{cmd:?}").replace('"', "");
    let out = cmd.output().map_err(|e| ReadError::Command {
        cmd: line.clone(),
        why: format!("{e} (install iproute2)"),
    })?;
    if !out.status.success() {
        return Err(ReadError::Command {
            cmd: line,
            why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    serde_json::from_slice(&out.stdout).map_err(|e| ReadError::Command {
        cmd: line,
        why: format!("unexpected output: {e}"),
    })
}

/// Interfaces from `ip -j -d link show`.
pub fn parse_links(v: &serde_json::Value) -> Vec<Interface> {
    let Some(links) = v.as_array() else {
        return Vec::new();
    };
    links
        .iter()
        .filter_map(|l| {
            Some(Interface {
                name: l.get("ifname")?.as_str()?.to_string(),
                mtu: l.get("mtu").and_then(|m| m.as_u64()).unwrap_or(0) as u32,
                txqueuelen: l.get("txqlen").and_then(|m| m.as_u64()).unwrap_or(0) as u32,
                qdisc: l
                    .get("qdisc")
                    .and_then(|q| q.as_str())
                    .unwrap_or("")
                    .to_string(),
                link_type: l
                    .get("link_type")
                    .and_then(|q| q.as_str())
                    .unwrap_or("")
                    .to_string(),
                kind: l
                    .get("linkinfo")
                    .and_then(|i| i.get("info_kind"))
                    .and_then(|k| k.as_str())
                    .map(str::to_string),
                up: l
                    .get("flags")
                    .and_then(|f| f.as_array())
                    .is_some_and(|f| f.iter().any(|x| x.as_str() == Some("UP"))),
            })
        })
        .collect()
}

/// Routes with their metrics from `ip -j route show table all`. Local and broadcast routes of
/// the `local` table are left out: they carry no TCP metrics anyone sets.
pub fn parse_routes(v: &serde_json::Value) -> Vec<Route> {
    let Some(routes) = v.as_array() else {
        return Vec::new();
    };
    routes
        .iter()
        .filter(|r| r.get("table").and_then(|t| t.as_str()) != Some("local"))
        .filter_map(|r| {
            let mut route = Route {
                dst: r.get("dst")?.as_str()?.to_string(),
                dev: r.get("dev").and_then(|d| d.as_str()).map(str::to_string),
                table: r.get("table").and_then(|d| d.as_str()).map(str::to_string),
                ..Route::default()
            };
            let metrics = r.get("metrics").and_then(|m| m.as_array());
            for m in metrics.into_iter().flatten().filter_map(|m| m.as_object()) {
                for (k, val) in m {
                    let n = val.as_u64().map(|n| n as u32);
                    match k.as_str() {
                        "mtu" => route.mtu = n,
                        "advmss" => route.advmss = n,
                        "window" => route.window = n,
                        "initcwnd" => route.initcwnd = n,
                        "initrwnd" => route.initrwnd = n,
                        "ssthresh" => route.ssthresh = n,
                        "congestion" | "congctl" => {
                            route.congctl = val.as_str().map(str::to_string)
                        }
                        _ => {}
                    }
                }
            }
            Some(route)
        })
        .collect()
}

fn parse_meminfo(s: &str) -> Option<u64> {
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// "TCP: inuse 1 orphan 0 tw 0 alloc 1 mem 200" → 200 (pages).
pub fn parse_sockstat_tcp_mem(s: &str) -> Option<u64> {
    let line = s.lines().find(|l| l.starts_with("TCP:"))?;
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == "mem" {
            return words.next()?.parse().ok();
        }
    }
    None
}

/// Every `key = value` line of the sysctl configuration files, in the order systemd-sysctl
/// applies them (files sorted by name across the directories; the first directory wins a name).
pub fn read_sysctl_files(dirs: &[&str], legacy: &Path) -> Vec<SysctlFileLine> {
    let mut by_name: std::collections::BTreeMap<String, PathBuf> = Default::default();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".conf") {
                by_name.entry(name).or_insert_with(|| e.path());
            }
        }
    }
    let mut files: Vec<PathBuf> = by_name.into_values().collect();
    files.push(legacy.to_path_buf());
    let mut out = Vec::new();
    for f in files {
        if let Ok(text) = fs::read_to_string(&f) {
            out.extend(parse_sysctl_conf(&f.display().to_string(), &text));
        }
    }
    out
}

/// Parses one sysctl.conf(5) file. `-key = v` (ignore failures) counts as setting `key`.
pub fn parse_sysctl_conf(path: &str, text: &str) -> Vec<SysctlFileLine> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                return None;
            }
            let (k, v) = line.split_once('=')?;
            let key = k.trim().trim_start_matches('-').replace('/', ".");
            Some(SysctlFileLine {
                path: path.to_string(),
                line: i as u32 + 1,
                key,
                value: normalize_value(v),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_routes_from_ip_json() {
        let links: serde_json::Value = serde_json::from_str(
            r#"[{"ifname":"lo","flags":["LOOPBACK","UP"],"mtu":65536,"qdisc":"noqueue","txqlen":1000,"link_type":"loopback"},
                {"ifname":"eth0","flags":["BROADCAST","UP","LOWER_UP"],"mtu":9000,"qdisc":"pfifo_fast","txqlen":16000,"link_type":"ether","linkinfo":{"info_kind":"veth"}}]"#,
        )
        .unwrap();
        let l = parse_links(&links);
        assert_eq!(l.len(), 2);
        assert!(!l[0].carries_traffic());
        assert_eq!(
            (l[1].mtu, l[1].txqueuelen, l[1].qdisc.as_str()),
            (9000, 16000, "pfifo_fast")
        );
        assert_eq!(l[1].kind.as_deref(), Some("veth"));
        let routes: serde_json::Value = serde_json::from_str(
            r#"[{"dst":"198.18.0.0/15","dev":"lo","metrics":[{"mtu":1400,"ssthresh":100,"initcwnd":20,"congestion":"bbr"}]},
                {"type":"local","dst":"127.0.0.1","dev":"lo","table":"local"}]"#,
        )
        .unwrap();
        let r = parse_routes(&routes);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].initcwnd, r[0].ssthresh, r[0].mtu),
            (Some(20), Some(100), Some(1400))
        );
        assert_eq!(r[0].congctl.as_deref(), Some("bbr"));
    }

    #[test]
    fn sysctl_conf_lines() {
        let l = parse_sysctl_conf(
            "/etc/sysctl.d/99-x.conf",
            "# comment\n; other\nnet.ipv4.tcp_rmem = 4096\t87380  16777216\n-net/ipv4/tcp_tw_recycle=1\nbogus\n",
        );
        assert_eq!(l.len(), 2);
        assert_eq!(
            (l[0].line, l[0].key.as_str(), l[0].value.as_str()),
            (3, "net.ipv4.tcp_rmem", "4096 87380 16777216")
        );
        assert_eq!(l[1].key, "net.ipv4.tcp_tw_recycle");
    }

    #[test]
    fn sockstat() {
        let s =
            "sockets: used 15\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 200\nUDP: inuse 0 mem 0\n";
        assert_eq!(parse_sockstat_tcp_mem(s), Some(200));
    }
}
