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
    pub name: String,
    pub mtu: u32,
    pub txqueuelen: u32,
    /// Root qdisc kind (`noqueue`, `pfifo_fast`, `fq`, `fq_codel`, `mq`, …).
    pub qdisc: String,
    /// `loopback`, `ether`, `none` (tun), … from the link type.
    pub link_type: String,
    /// Device kind for virtual devices (`veth`, `tun`, `bridge`), when the kernel says.
    pub kind: Option<String>,
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
    pub dev: Option<String>,
    pub table: Option<String>,
    pub mtu: Option<u32>,
    pub advmss: Option<u32>,
    pub window: Option<u32>,
    pub initcwnd: Option<u32>,
    pub initrwnd: Option<u32>,
    pub ssthresh: Option<u32>,
    pub congctl: Option<String>,
}

/// A line of a sysctl configuration file that sets a key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SysctlFileLine {
    pub path: String,
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
    pub local: String,
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
    pub kernel: Option<KernelVersion>,
    /// `net.*` sysctls, dotted keys, values with whitespace collapsed to single spaces.
    pub sysctls: BTreeMap<String, String>,
    pub interfaces: Vec<Interface>,
    pub routes: Vec<Route>,
    pub page_size: u64,
    pub mem_total_bytes: Option<u64>,
    /// Pages TCP uses now (`/proc/net/sockstat`, "TCP: … mem N").
    pub tcp_mem_used_pages: Option<u64>,
    pub sysctl_files: Vec<SysctlFileLine>,
    pub locked_sockets: Vec<LockedSocket>,
}

impl HostState {
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
