//! `lab status`: what each lab is (running, starting or broken), its hosts, link and counters,
//! as data and as text; and what `lab down` removed.

use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_emu::sys::EmuStatus;
use tcptune_emu::LinkSpec;

use crate::backend::{self, QdiscStatus};
use crate::effects::Effects;
use crate::leftovers::{emulator_pid, known_labs, link_up};
use crate::names::{addresses, check_name, netns_name, DEV, HOSTS};
use crate::spec::{Backend, HostSettings};
use crate::state::{read_state, GlobalChange};
use crate::LabError;

/// One host of a lab, as `lab status` shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HostStatus {
    /// `client` or `server`.
    pub name: String,
    /// The host's network namespace.
    pub netns: String,
    /// The host's interface.
    pub device: String,
    /// The host's IPv4 address.
    pub ipv4: String,
    /// The host's IPv6 address.
    pub ipv6: String,
    /// The settings it was brought up with.
    pub settings: HostSettings,
    /// Packets the host's own device queue (txqueuelen) dropped: the NIC queue overflowed.
    pub nic_tx_dropped: Option<u64>,
}

/// The kernel's transmit-drop count of the host's device (its queue overflowing).
fn nic_tx_dropped(fx: &mut dyn Effects, ns: &str) -> Option<u64> {
    let out = fx.ip(&["-n", ns, "-j", "-s", "link", "show", DEV]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    v[0]["stats64"]["tx"]["dropped"].as_u64()
}

/// `lab status` of one lab.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LabStatus {
    /// The lab's name.
    pub name: String,
    /// "running", "starting", or "broken" (a leftover: `lab down` removes it).
    pub state: String,
    /// How the link is made.
    pub backend: Backend,
    /// The emulator's process id (emu backend, while it runs).
    pub emulator_pid: Option<u32>,
    /// Client and server.
    pub hosts: Vec<HostStatus>,
    /// The link's settings.
    pub link: LinkSpec,
    /// Global sysctls changed for this lab (restored at down).
    pub global_changes: Vec<GlobalChange>,
    /// Live counters from the emulator (absent when it does not run).
    pub emulator: Option<EmuStatus>,
    /// The netem backend's qdiscs with their counters (empty on the emu backend).
    pub qdiscs: Vec<QdiscStatus>,
}

/// `lab status`: every lab, or the one named.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LabList {
    /// Every lab found, running or not.
    pub labs: Vec<LabStatus>,
}

pub(crate) fn status_of(fx: &mut dyn Effects, lab: &str) -> Result<LabStatus, LabError> {
    let st = read_state(fx, lab);
    let pid = emulator_pid(fx, lab);
    let spec = st.as_ref().map(|s| s.spec.clone()).unwrap_or_default();
    let state = match &st {
        Some(s) if s.ready && s.tie_holds(fx) && link_up(fx, lab, s) => "running",
        Some(s) if !s.ready && s.owner_alive(fx) && s.tie_holds(fx) => "starting",
        _ => "broken",
    };
    let (emulator, qdiscs) = if state == "running" {
        backend::of(spec.backend).counters(fx, lab)?
    } else {
        (None, Vec::new())
    };
    let mut hosts = Vec::new();
    for h in HOSTS {
        let (v4, v6) = addresses(h);
        let ns = netns_name(lab, h);
        hosts.push(HostStatus {
            name: h.into(),
            nic_tx_dropped: nic_tx_dropped(fx, &ns),
            netns: ns,
            device: DEV.into(),
            ipv4: v4.into(),
            ipv6: v6.into(),
            settings: spec.host(h).cloned().unwrap_or_default(),
        });
    }
    Ok(LabStatus {
        name: lab.into(),
        state: state.into(),
        backend: spec.backend,
        emulator_pid: pid,
        hosts,
        link: spec.link,
        global_changes: st.map(|s| s.globals).unwrap_or_default(),
        emulator,
        qdiscs,
    })
}

/// Every lab on the machine, or the one named (which must exist).
pub(crate) fn list(fx: &mut dyn Effects, lab: Option<&str>) -> Result<LabList, LabError> {
    let labs = match lab {
        Some(l) => {
            check_name(l)?;
            if !known_labs(fx).iter().any(|k| k == l) {
                return Err(LabError::NoSuchLab(l.into()));
            }
            vec![status_of(fx, l)?]
        }
        None => known_labs(fx)
            .iter()
            .map(|l| status_of(fx, l))
            .collect::<Result<_, _>>()?,
    };
    Ok(LabList { labs })
}

impl fmt::Display for LabStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backend = backend::of(self.backend).describe();
        writeln!(f, "lab {} ({}, {backend})", self.name, self.state)?;
        for h in &self.hosts {
            writeln!(
                f,
                "  {:<7} {} {} {} netns {}",
                h.name, h.device, h.ipv4, h.ipv6, h.netns
            )?;
            let s = &h.settings;
            let mut extra = Vec::new();
            if let Some(m) = s.mtu {
                extra.push(format!("mtu {m}"));
            }
            if let Some(q) = s.txqueuelen {
                extra.push(format!("txqueuelen {q}"));
            }
            if let Some(r) = s.line_rate_bps {
                extra.push(format!("line rate {r}"));
            }
            for (k, v) in &s.sysctls {
                extra.push(format!("{k}={v}"));
            }
            if !s.route.is_empty() {
                extra.push(format!("route {:?}", s.route));
            }
            if s.cpu_hog {
                extra.push("cpu hog".into());
            }
            if let Some(d) = h.nic_tx_dropped.filter(|&d| d > 0) {
                extra.push(format!("NIC queue dropped {d}"));
            }
            if !extra.is_empty() {
                writeln!(f, "          {}", extra.join(", "))?;
            }
        }
        for (dir, c) in [("up", &self.link.up), ("down", &self.link.down)] {
            writeln!(f, "  link {dir:<4} {}", crate::netem::describe(c))?;
        }
        writeln!(f, "  seed {}", self.link.seed)?;
        if let Some(e) = &self.emulator {
            // The PID is what `taskset`/`chrt` need to give the emulator a core of its own.
            if let Some(pid) = self.emulator_pid {
                write!(f, "  emulator pid {pid}, ")?;
            } else {
                write!(f, "  ")?;
            }
            writeln!(
                f,
                "offloads {}",
                if e.offloads {
                    "on (TSO)"
                } else {
                    "off (per packet)"
                }
            )?;
            let l = &e.lateness;
            if let (Some(p50), Some(p99), Some(max)) = (l.p50_us, l.p99_us, l.max_us) {
                writeln!(
                    f,
                    "  emulator lateness against the schedule: p50 {p50} µs, p99 {p99} µs, \
                     max {max} µs"
                )?;
            }
            for (dir, c) in [("up", &e.up), ("down", &e.down)] {
                writeln!(
                    f,
                    "  {dir:<4} in {} pkts {} B, out {} pkts {} B; dropped loss {} queue {} \
                     limit {}; dup {} corrupt {} reorder {}; queue {} pkts (max {})",
                    c.packets_in,
                    c.bytes_in,
                    c.packets_out,
                    c.bytes_out,
                    c.dropped_loss,
                    c.dropped_queue,
                    c.dropped_limit,
                    c.duplicated,
                    c.corrupted,
                    c.reordered,
                    c.queue_packets,
                    c.max_queue_packets
                )?;
            }
        }
        for q in &self.qdiscs {
            writeln!(
                f,
                "  {:<4} {} on the {}'s egress: {} pkts {} B, dropped {}, overlimits {}; queue \
                 {} pkts {} B",
                if q.host == "client" { "up" } else { "down" },
                q.kind,
                q.host,
                q.packets,
                q.bytes,
                q.drops,
                q.overlimits,
                q.backlog_packets,
                q.backlog_bytes
            )?;
        }
        for g in &self.global_changes {
            writeln!(f, "  global {}={} (was {})", g.key, g.value, g.original)?;
        }
        Ok(())
    }
}

impl fmt::Display for LabList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.labs.is_empty() {
            return writeln!(f, "no labs");
        }
        for l in &self.labs {
            write!(f, "{l}")?;
        }
        Ok(())
    }
}

/// What `lab down` removed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Removed {
    /// What was removed or restored, one line each (processes, namespaces, sysctls, files).
    pub removed: Vec<String>,
}

impl fmt::Display for Removed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.removed.is_empty() {
            return writeln!(f, "nothing to remove");
        }
        for r in &self.removed {
            writeln!(f, "removed {r}")?;
        }
        Ok(())
    }
}
