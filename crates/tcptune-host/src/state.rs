//! A snapshot of everything on a host (or in one network namespace) that decides TCP
//! throughput: sysctls, interfaces, routes with their metrics, congestion controls, memory, the
//! sysctl.d files that will set values at boot, and sockets whose buffers are fixed by the
//! application. It is plain data (serde), so a recorded host state is a test fixture and the
//! audit rules are pure functions of it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use tcptune_model::kernel::KernelVersion;

/// One network interface as the audit needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Interface {
    /// The interface's name (`eth0`).
    pub name: String,
    /// Its MTU, bytes.
    pub mtu: u32,
    /// Its transmit queue length, packets.
    pub txqueuelen: u32,
    /// Root qdisc kind (`noqueue`, `pfifo_fast`, `fq`, `fq_codel`, `mq`, …).
    pub qdisc: String,
    /// `loopback`, `ether`, `none` (tun), … from the link type.
    pub link_type: String,
    /// Device kind for virtual devices (`veth`, `tun`, `bridge`), when the kernel says.
    pub kind: Option<String>,
    /// Whether it is up.
    pub up: bool,
}

impl Interface {
    /// Loopback and devices that never leave the host do not carry the path being audited.
    pub fn carries_traffic(&self) -> bool {
        self.up && self.link_type != "loopback"
    }
}

/// A route and the TCP metrics set on it (`ip route … initcwnd 10 ssthresh 100`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Route {
    /// Destination as `ip` prints it (`default`, `198.18.0.0/15`).
    pub dst: String,
    /// The device it leaves by.
    pub dev: Option<String>,
    /// The routing table, when not `main`.
    pub table: Option<String>,
    /// The `mtu` metric, bytes.
    pub mtu: Option<u32>,
    /// The `advmss` metric, bytes.
    pub advmss: Option<u32>,
    /// The `window` metric (the largest window advertised), bytes.
    pub window: Option<u32>,
    /// The `initcwnd` metric, segments.
    pub initcwnd: Option<u32>,
    /// The `initrwnd` metric, segments.
    pub initrwnd: Option<u32>,
    /// The `ssthresh` metric, segments (often a cached value the kernel saved).
    pub ssthresh: Option<u32>,
    /// The `congctl` metric: a congestion control for this route.
    pub congctl: Option<String>,
}

/// A line of a sysctl configuration file that sets a key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SysctlFileLine {
    /// The file.
    pub path: String,
    /// The line number in it, from 1.
    pub line: u32,
    /// The key in dotted form (`net.ipv4.tcp_rmem`).
    pub key: String,
    /// The value as written, whitespace collapsed.
    pub value: String,
}

/// A socket whose application fixed its buffer sizes (SO_RCVBUF/SO_SNDBUF), which turns
/// autotuning off for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LockedSocket {
    /// The local address and port.
    pub local: String,
    /// The remote address and port.
    pub remote: String,
    /// The process that owns it, when it could be found.
    pub process: Option<String>,
    /// sk_rcvbuf in bytes (the doubled value) when the receive buffer is locked.
    pub rcvbuf_locked: Option<u64>,
    /// sk_sndbuf in bytes when the send buffer is locked.
    pub sndbuf_locked: Option<u64>,
}

/// Everything the audit reads. Missing pieces are empty/None, never invented.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostState {
    /// The network namespace this was read in (`None` = the caller's own).
    pub netns: Option<String>,
    /// The kernel's version, when it could be read.
    pub kernel: Option<KernelVersion>,
    /// `net.*` sysctls, dotted keys, values with whitespace collapsed to single spaces.
    pub sysctls: BTreeMap<String, String>,
    /// Network interfaces.
    pub interfaces: Vec<Interface>,
    /// Routes, with the TCP metrics set on them.
    pub routes: Vec<Route>,
    /// The page size, bytes (tcp_mem counts pages).
    pub page_size: u64,
    /// Physical memory, bytes, when read.
    pub mem_total_bytes: Option<u64>,
    /// Pages TCP uses now (`/proc/net/sockstat`, "TCP: … mem N").
    pub tcp_mem_used_pages: Option<u64>,
    /// Lines of sysctl configuration files that will set these keys at boot.
    pub sysctl_files: Vec<SysctlFileLine>,
    /// Sockets whose application fixed their buffers.
    pub locked_sockets: Vec<LockedSocket>,
}

impl HostState {
    /// The value of a sysctl, as /proc/sys prints it (whitespace collapsed).
    pub fn sysctl(&self, key: &str) -> Option<&str> {
        self.sysctls.get(key).map(String::as_str)
    }

    /// An integer sysctl.
    pub fn sysctl_u64(&self, key: &str) -> Option<u64> {
        self.sysctl(key)?.trim().parse().ok()
    }

    /// The `i`-th field of a vector sysctl such as `tcp_rmem` (`min default max`).
    pub fn sysctl_field(&self, key: &str, i: usize) -> Option<u64> {
        self.sysctl(key)?.split_whitespace().nth(i)?.parse().ok()
    }

    /// The congestion controls the kernel has loaded (`tcp_available_congestion_control`).
    pub fn congestion_controls_available(&self) -> Vec<&str> {
        self.sysctl("net.ipv4.tcp_available_congestion_control")
            .map(|s| s.split_whitespace().collect())
            .unwrap_or_default()
    }

    /// The interfaces that carry traffic (not loopback, up).
    pub fn traffic_interfaces(&self) -> impl Iterator<Item = &Interface> {
        self.interfaces.iter().filter(|i| i.carries_traffic())
    }
}

/// Turns `/proc/sys` relative paths into dotted keys: `net/ipv4/tcp_rmem` → `net.ipv4.tcp_rmem`.
pub fn key_from_proc_path(rel: &str) -> String {
    tcptune_os::sysctl::key_of(rel)
}

/// Collapses the tabs /proc/sys prints between vector fields into single spaces.
pub fn normalize_value(raw: &str) -> String {
    tcptune_os::sysctl::normalize(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_sysctls() {
        let mut s = HostState::default();
        s.sysctls.insert(
            "net.ipv4.tcp_rmem".into(),
            normalize_value("4096\t131072\t33554432\n"),
        );
        assert_eq!(s.sysctl("net.ipv4.tcp_rmem"), Some("4096 131072 33554432"));
        assert_eq!(s.sysctl_field("net.ipv4.tcp_rmem", 2), Some(33554432));
        assert_eq!(s.sysctl_field("net.ipv4.tcp_rmem", 3), None);
        assert_eq!(key_from_proc_path("net/ipv4/tcp_rmem"), "net.ipv4.tcp_rmem");
    }
}
