//! What a lab is made of: the link (both directions) and the settings of each host, as a JSON
//! document (`--spec FILE`) or built from command-line options; and their validation, which
//! runs before anything is created so bad input never leaves a half-made lab.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_emu::{ConfigError, Distribution, JitterOrder, LinkConfig, LinkSpec, Loss};
use tcptune_model::{Bytes, Dur, Probability, Rate};

use crate::keys;
use crate::LabError;

/// The largest `--spec` file read (a lab spec is a few hundred bytes).
pub const SPEC_FILE_LIMIT: u64 = 1 << 20;

/// Route metrics on the host's route to its peer (`ip route … initcwnd …`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RouteMetrics {
    /// Initial congestion window, segments.
    pub initcwnd: Option<u32>,
    /// Initial receive window advertised, segments.
    pub initrwnd: Option<u32>,
    /// Initial slow-start threshold, segments.
    pub ssthresh: Option<u32>,
    /// Congestion control for connections on this route.
    pub congctl: Option<String>,
}

impl RouteMetrics {
    /// Whether no metric is set (the route is left as the kernel made it).
    pub fn is_empty(&self) -> bool {
        *self == RouteMetrics::default()
    }
}

/// One host's settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct HostSettings {
    /// Sysctls, e.g. `net.ipv4.tcp_rmem` = "4096 131072 6291456". `net.ipv4.*`/`net.ipv6.*`
    /// are set inside the host's namespace; global ones (`net.core.rmem_max`, …) are set
    /// machine-wide and restored when the lab goes down.
    pub sysctls: BTreeMap<String, String>,
    /// Interface MTU, bytes.
    pub mtu: Option<u32>,
    /// Interface transmit queue length, packets (the host's NIC queue).
    pub txqueuelen: Option<u32>,
    /// The host's NIC rate: the emulator drains the host's device no faster than this, so its
    /// queue of `txqueuelen` packets behaves like a NIC queue. None: as fast as possible.
    pub line_rate_bps: Option<Rate>,
    /// Metrics on the host's route to its peer.
    pub route: RouteMetrics,
    /// Keep one CPU of this host busy (a spinning process pinned to `cpu`).
    pub cpu_hog: bool,
    /// The CPU this host's commands (and its hog) run on.
    pub cpu: Option<u32>,
}

pub use crate::names::HOSTS;

/// How the link between the hosts is made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The user-space emulator between two TUN devices (every kernel with TUN).
    #[default]
    Emu,
    /// A veth pair with kernel qdiscs on each end's egress: netem, or tbf for a link that only
    /// limits the rate (tbf exists on kernels without sch_netem).
    Netem,
}

/// A whole lab.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LabSpec {
    /// The link between the hosts, both directions.
    pub link: LinkSpec,
    /// The client host.
    pub client: HostSettings,
    /// The server host.
    pub server: HostSettings,
    /// How the link is made.
    pub backend: Backend,
}

/// Which direction(s) link options change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Which {
    /// Client to server and server to client.
    #[default]
    Both,
    /// Client to server only.
    Up,
    /// Server to client only.
    Down,
}

impl std::str::FromStr for Which {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "both" => Ok(Which::Both),
            "up" => Ok(Which::Up),
            "down" => Ok(Which::Down),
            _ => Err(format!(
                "'{s}' is not a direction; use up (client to server), down or both"
            )),
        }
    }
}

/// Link options from the command line; only the given ones change the link.
#[derive(Debug, Clone, Default)]
pub struct LinkChanges {
    /// Which direction(s) the options change (`--direction`).
    pub direction: Which,
    /// Serialisation rate, bits/s.
    pub rate: Option<Rate>,
    /// One-way delay.
    pub delay: Option<Dur>,
    /// Round-trip time: half of it becomes each direction's delay.
    pub rtt: Option<Dur>,
    /// Jitter around the delay: half width (uniform) or σ.
    pub jitter: Option<Dur>,
    /// The jitter's distribution.
    pub distribution: Option<Distribution>,
    /// Whether jitter may reorder packets.
    pub jitter_order: Option<JitterOrder>,
    /// Independent loss probability per packet.
    pub loss: Option<Probability>,
    /// Gilbert–Elliott "p,r[,1-h[,1-k]]".
    pub loss_ge: Option<String>,
    /// Lose every n-th packet.
    pub loss_every: Option<u32>,
    /// Probability a packet is sent twice.
    pub duplicate: Option<Probability>,
    /// Probability a packet is corrupted.
    pub corrupt: Option<Probability>,
    /// Probability a packet skips the delay.
    pub reorder: Option<Probability>,
    /// With `reorder`: delayed packets between two reordered ones, plus one (netem's `gap`).
    pub reorder_gap: Option<u32>,
    /// Bottleneck queue limit, packets.
    pub queue_packets: Option<u32>,
    /// Bottleneck queue limit, bytes.
    pub queue_bytes: Option<Bytes>,
    /// netem's `limit`: packets held anywhere in the emulator.
    pub limit_packets: Option<u32>,
    /// Bytes added to each packet's length when charging the rate.
    pub overhead_bytes: Option<i32>,
    /// Seed of the link's random decisions.
    pub seed: Option<u64>,
}

fn parse_ge(s: &str) -> Result<Loss, LabError> {
    let ps = keys::parse_ge(s).ok_or_else(|| {
        LabError::Input(format!(
            "--loss-ge '{s}' must be p,r[,1-h[,1-k]] with probabilities, e.g. 1%,30%,100%,0%"
        ))
    })?;
    let p = ps[0];
    // tc's defaults: r = 1 − p, 1−h = 1, 1−k = 0.
    let r = ps
        .get(1)
        .copied()
        .unwrap_or_else(|| Probability::new(1.0 - p.get()).unwrap_or(p));
    let one = Probability::new(1.0).unwrap_or(p);
    let zero = Probability::new(0.0).unwrap_or(p);
    Ok(Loss::GilbertElliott {
        p,
        r,
        bad_loss: ps.get(2).copied().unwrap_or(one),
        good_loss: ps.get(3).copied().unwrap_or(zero),
    })
}

impl LinkChanges {
    /// Whether no option was given (the direction alone changes nothing).
    pub fn is_empty(&self) -> bool {
        let d = LinkChanges {
            direction: self.direction,
            ..Default::default()
        };
        format!("{self:?}") == format!("{d:?}")
    }

    /// Applies the changes to `spec` and validates the result.
    pub fn apply(&self, spec: &mut LinkSpec) -> Result<(), LabError> {
        self.check_bounds().map_err(LabError::Input)?;
        if self.delay.is_some() && self.rtt.is_some() {
            return Err(LabError::Input(
                "give either --delay (one way) or --rtt (both ways), not both".into(),
            ));
        }
        let losses = [
            self.loss.is_some(),
            self.loss_ge.is_some(),
            self.loss_every.is_some(),
        ];
        if losses.iter().filter(|&&x| x).count() > 1 {
            return Err(LabError::Input(
                "give one loss model: --loss, --loss-ge or --loss-every".into(),
            ));
        }
        let loss = match (&self.loss, &self.loss_ge, self.loss_every) {
            (Some(p), _, _) if p.get() == 0.0 => Some(Loss::None),
            (Some(p), _, _) => Some(Loss::Random { p: *p }),
            (_, Some(ge), _) => Some(parse_ge(ge)?),
            (_, _, Some(n)) => Some(Loss::EveryNth { n }),
            _ => None,
        };
        let one = |c: &mut LinkConfig| {
            if let Some(v) = self.rate {
                c.rate_bps = Some(v);
            }
            if let Some(v) = self.delay {
                c.delay_s = v;
            }
            if let Some(v) = self.rtt {
                c.delay_s = Dur::from_nanos(v.nanos() / 2);
            }
            if let Some(v) = self.jitter {
                c.jitter_s = v;
            }
            if let Some(v) = self.distribution {
                c.distribution = v;
            }
            if let Some(v) = self.jitter_order {
                c.jitter_order = v;
            }
            if let Some(v) = loss {
                c.loss = v;
            }
            if let Some(v) = self.duplicate {
                c.duplicate = v;
            }
            if let Some(v) = self.corrupt {
                c.corrupt = v;
            }
            if let Some(v) = self.reorder {
                c.reorder = v;
            }
            if let Some(v) = self.reorder_gap {
                c.reorder_gap = v;
            }
            if let Some(v) = self.queue_packets {
                c.queue_packets = Some(v);
            }
            if let Some(v) = self.queue_bytes {
                c.queue_bytes = Some(v);
            }
            if let Some(v) = self.limit_packets {
                c.limit_packets = Some(v);
            }
            if let Some(v) = self.overhead_bytes {
                c.overhead_bytes = v;
            }
        };
        match self.direction {
            Which::Both => {
                one(&mut spec.up);
                one(&mut spec.down);
            }
            Which::Up => one(&mut spec.up),
            Which::Down => one(&mut spec.down),
        }
        if let Some(s) = self.seed {
            spec.seed = s;
        }
        spec.validate()
            .map_err(|ConfigError::Invalid(s)| LabError::Input(s))
    }
}

/// Checks a sysctl name looks like one (the kernel decides whether it exists).
pub fn check_sysctl_name(key: &str) -> Result<(), LabError> {
    keys::check_sysctl_name(key).map_err(LabError::Input)
}

impl HostSettings {
    /// Applies one `KEY=VALUE` from `--host HOST.KEY=VALUE` (the keys of [`keys::HOST`]).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), LabError> {
        self.set_key(key, value).map_err(LabError::Input)
    }

    /// Congestion controls this host asks for (sysctl and route), to check they exist.
    pub fn congestion_controls(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .sysctls
            .get("net.ipv4.tcp_congestion_control")
            .map(String::as_str)
            .into_iter()
            .collect();
        v.extend(self.route.congctl.as_deref());
        v
    }

    /// Checks each setting against its key's bounds; the error names the setting.
    pub fn validate(&self) -> Result<(), LabError> {
        self.check_bounds().map_err(LabError::Input)
    }
}

/// Applies `HOST.KEY=VALUE` (HOST: client, server or both) to `spec`.
pub fn apply_host_setting(spec: &mut LabSpec, item: &str) -> Result<(), LabError> {
    let (lhs, value) = item.split_once('=').ok_or_else(|| {
        LabError::Input(format!(
            "--host '{item}' is not HOST.KEY=VALUE; write e.g. --host client.mtu=9000"
        ))
    })?;
    let (host, key) = lhs.split_once('.').ok_or_else(|| {
        LabError::Input(format!(
            "--host '{item}' names no host; write e.g. --host server.txqueuelen=10000"
        ))
    })?;
    match host {
        "client" => spec.client.set(key, value),
        "server" => spec.server.set(key, value),
        "both" => {
            spec.client.set(key, value)?;
            spec.server.set(key, value)
        }
        _ => Err(LabError::UnknownHost(host.to_string())),
    }
}

impl LabSpec {
    /// The settings of host `name`; an error for a host other than client or server.
    pub fn host(&self, name: &str) -> Result<&HostSettings, LabError> {
        match name {
            "client" => Ok(&self.client),
            "server" => Ok(&self.server),
            _ => Err(LabError::UnknownHost(name.to_string())),
        }
    }

    /// Checks the link and both hosts; the error names the setting and the fix.
    pub fn validate(&self) -> Result<(), LabError> {
        self.link
            .validate()
            .map_err(|ConfigError::Invalid(s)| LabError::Input(s))?;
        self.client.validate()?;
        self.server.validate()?;
        for h in [&self.client, &self.server] {
            if let Some(cpu) = h.cpu.filter(|&c| c >= crate::os::cpus()) {
                return Err(LabError::Input(format!(
                    "cpu {cpu} does not exist; this machine has CPUs 0 to {}",
                    crate::os::cpus() - 1
                )));
            }
        }
        // What the backend cannot do is refused by `backend::LinkBackend::check` at `lab up`
        // and `lab set`.
        Ok(())
    }

    /// Reads a `--spec` file (JSON with the fields of [`LabSpec`]), at most
    /// [`SPEC_FILE_LIMIT`] bytes.
    pub fn from_file(path: &std::path::Path) -> Result<LabSpec, LabError> {
        let text = tcptune_kernel::file::read_text_limited(path, SPEC_FILE_LIMIT, "spec file")
            .map_err(|e| LabError::Input(e.to_string()))?;
        let spec: LabSpec = serde_json::from_str(&text).map_err(|e| {
            LabError::Input(format!(
                "spec file {} is not a lab spec: {e}",
                path.display()
            ))
        })?;
        spec.validate()?;
        Ok(spec)
    }
}

impl LinkChanges {
    /// Sets the link key `key` (a name of [`keys::LINK`]) from its text.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let k = keys::link_key(key).ok_or_else(|| keys::unknown_link_key(key))?;
        let v = k.kind.parse(key, value)?;
        let w = v.word();
        match (k.name, v) {
            ("rate", keys::Value::Rate(r)) => self.rate = Some(r),
            ("delay", keys::Value::Duration(d)) => self.delay = Some(d),
            ("rtt", keys::Value::Duration(d)) => self.rtt = Some(d),
            ("jitter", keys::Value::Duration(d)) => self.jitter = Some(d),
            ("distribution", _) => {
                self.distribution = w.and_then(|w| w.parse::<Distribution>().ok())
            }
            ("jitter_order", _) => {
                self.jitter_order = Some(if w.as_deref() == Some("fifo") {
                    JitterOrder::Fifo
                } else {
                    JitterOrder::Reorder
                })
            }
            ("loss", keys::Value::Probability(p)) => self.loss = Some(p),
            ("loss_ge", _) => self.loss_ge = w,
            ("loss_every", v) => self.loss_every = v.count(),
            ("duplicate", keys::Value::Probability(p)) => self.duplicate = Some(p),
            ("corrupt", keys::Value::Probability(p)) => self.corrupt = Some(p),
            ("reorder", keys::Value::Probability(p)) => self.reorder = Some(p),
            ("reorder_gap", v) => self.reorder_gap = v.count(),
            ("queue", v) => self.queue_packets = v.count(),
            ("queue_bytes", keys::Value::Bytes(b)) => self.queue_bytes = Some(b),
            ("limit", v) => self.limit_packets = v.count(),
            ("overhead", v) => self.overhead_bytes = v.count(),
            _ => return Err(keys::unknown_link_key(key)),
        }
        Ok(())
    }

    /// Checks the whole-number options given (typed, from the command line) against the
    /// table's bounds, as [`LinkChanges::set`] checks them from text.
    pub fn check_bounds(&self) -> Result<(), String> {
        let counts = [
            ("loss_every", self.loss_every.map(i64::from)),
            ("reorder_gap", self.reorder_gap.map(i64::from)),
            ("queue", self.queue_packets.map(i64::from)),
            ("limit", self.limit_packets.map(i64::from)),
            ("overhead", self.overhead_bytes.map(i64::from)),
        ];
        for (name, n) in counts {
            if let (Some(n), Some(k)) = (n, keys::link_key(name)) {
                k.kind.check_count(name, n)?;
            }
        }
        Ok(())
    }
}

impl HostSettings {
    /// Checks the typed values (as a spec file gives them) against the table's bounds, as
    /// [`HostSettings::set_key`] checks them from text.
    pub fn check_bounds(&self) -> Result<(), String> {
        let kind = |name: &str| keys::host_key(name).map(|k| k.kind);
        let counts = [
            ("mtu", self.mtu),
            ("txqueuelen", self.txqueuelen),
            ("initcwnd", self.route.initcwnd),
            ("initrwnd", self.route.initrwnd),
            ("ssthresh", self.route.ssthresh),
            ("cpu", self.cpu),
        ];
        for (name, n) in counts {
            if let (Some(n), Some(k)) = (n, kind(name)) {
                k.check_count(name, i64::from(n))?;
            }
        }
        if let (Some(r), Some(k)) = (self.line_rate_bps, kind("line_rate")) {
            k.check("line_rate", &keys::Value::Rate(r))?;
        }
        for (name, v) in &self.sysctls {
            if v.contains('\n') {
                return Err(format!("sysctl {name}: a value must be one line"));
            }
            keys::Kind::Sysctl.parse(&format!("sysctl.{name}"), v)?;
        }
        for cc in self.congestion_controls() {
            keys::Kind::CongestionControl.parse("cc", cc)?;
        }
        Ok(())
    }

    /// Applies one `KEY=VALUE` (a name of [`keys::HOST`], or `sysctl.NAME`).
    pub fn set_key(&mut self, key: &str, value: &str) -> Result<(), String> {
        let k = keys::host_key(key).ok_or_else(|| keys::unknown_host_key(key))?;
        let v = k.kind.parse(key, value)?;
        let w = v.word();
        match (k.name, v) {
            ("mtu", v) => self.mtu = v.count(),
            ("txqueuelen", v) => self.txqueuelen = v.count(),
            ("line_rate", keys::Value::Rate(r)) => self.line_rate_bps = Some(r),
            ("cc", _) => {
                if let Some(cc) = w {
                    self.sysctls
                        .insert("net.ipv4.tcp_congestion_control".into(), cc);
                }
            }
            ("initcwnd", v) => self.route.initcwnd = v.count(),
            ("initrwnd", v) => self.route.initrwnd = v.count(),
            // inf: no route metric, the kernel's own (infinite) initial ssthresh.
            ("ssthresh", v) => self.route.ssthresh = v.count(),
            ("congctl", _) => self.route.congctl = w,
            ("cpu_hog", keys::Value::Switch(b)) => self.cpu_hog = b,
            ("cpu", v) => self.cpu = v.count(),
            ("sysctl.NAME", _) => {
                let name = key.strip_prefix("sysctl.").unwrap_or(key);
                self.sysctls
                    .insert(name.to_string(), value.trim().to_string());
            }
            _ => return Err(keys::unknown_host_key(key)),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_changes_apply_to_the_chosen_direction_and_validate() {
        let mut spec = LinkSpec::default();
        LinkChanges {
            rate: Some("100mbit".parse().unwrap()),
            rtt: Some("20ms".parse().unwrap()),
            loss: Some("1%".parse().unwrap()),
            ..Default::default()
        }
        .apply(&mut spec)
        .unwrap();
        assert_eq!(spec.up.delay_s, Dur::from_millis(10));
        assert_eq!(spec.down.delay_s, Dur::from_millis(10));
        assert_eq!(spec.down.rate_bps.unwrap().bps(), 100e6);
        LinkChanges {
            direction: Which::Up,
            loss_ge: Some("1%,30%".into()),
            ..Default::default()
        }
        .apply(&mut spec)
        .unwrap();
        assert!(matches!(spec.up.loss, Loss::GilbertElliott { .. }));
        assert!(matches!(spec.down.loss, Loss::Random { .. }));
        let err = LinkChanges {
            delay: Some(Dur::from_millis(20_000)),
            ..Default::default()
        }
        .apply(&mut spec)
        .unwrap_err();
        assert!(err.to_string().contains("at most 10s"), "{err}");
    }

    #[test]
    fn host_settings_parse_and_refuse() {
        let mut spec = LabSpec::default();
        apply_host_setting(&mut spec, "both.mtu=9000").unwrap();
        apply_host_setting(&mut spec, "server.sysctl.net.ipv4.tcp_rmem=4096 4096 4096").unwrap();
        apply_host_setting(&mut spec, "client.cc=cubic").unwrap();
        assert_eq!(spec.client.mtu, Some(9000));
        assert_eq!(spec.server.sysctls["net.ipv4.tcp_rmem"], "4096 4096 4096");
        assert_eq!(spec.client.congestion_controls(), vec!["cubic"]);
        let e = apply_host_setting(&mut spec, "router.mtu=1500").unwrap_err();
        assert!(e.to_string().contains("router"), "{e}");
        assert!(apply_host_setting(&mut spec, "client.mtu=10").is_err());
        assert!(apply_host_setting(&mut spec, "client.sysctl.kernel.panic=1").is_err());
        assert!(apply_host_setting(&mut spec, "client.color=red").is_err());
    }
    #[test]
    fn every_key_has_a_setter_and_a_description() {
        // A sample value of each kind, so a key added to the table without a setter fails.
        let sample = |k: &keys::Kind| match k {
            keys::Kind::Count { min, .. } | keys::Kind::CountOrInf { min, .. } => min.to_string(),
            keys::Kind::Rate { .. } => "10mbit".into(),
            keys::Kind::Duration { .. } => "10ms".into(),
            keys::Kind::Probability => "1%".into(),
            keys::Kind::Bytes => "64KiB".into(),
            keys::Kind::Switch => "true".into(),
            keys::Kind::OneOf(w) => w[0].into(),
            keys::Kind::LossModel => "1%,30%".into(),
            keys::Kind::CongestionControl => "cubic".into(),
            keys::Kind::Sysctl => "1".into(),
        };
        for k in keys::LINK {
            assert!(!k.what.is_empty() && !k.kind.describe().is_empty());
            let mut c = LinkChanges::default();
            c.set(k.name, &sample(&k.kind))
                .unwrap_or_else(|e| panic!("{}: {e}", k.name));
            assert!(!c.is_empty(), "link key {} changes nothing", k.name);
        }
        for k in keys::HOST {
            let mut h = HostSettings::default();
            let name = k.name.replace("NAME", "net.ipv4.tcp_sack");
            h.set_key(&name, &sample(&k.kind))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_ne!(
                h,
                HostSettings::default(),
                "host key {name} changes nothing"
            );
        }
    }

    #[test]
    fn the_stricter_rules_hold() {
        let mut h = HostSettings::default();
        // ssthresh: inf is the kernel's default (no metric); numbers up to 10^9.
        h.set_key("ssthresh", "45").unwrap();
        h.set_key("ssthresh", "inf").unwrap();
        assert_eq!(h.route.ssthresh, None);
        assert!(h.set_key("ssthresh", "4000000000").is_err());
        assert!(h.set_key("ssthresh", "1").is_err());
        // cpu_hog is a switch: true or false, as a TOML boolean prints.
        for bad in ["1", "on", "yes", "maybe"] {
            let e = h.set_key("cpu_hog", bad).unwrap_err();
            assert!(e.contains("true or false"), "{e}");
        }
        let mut c = LinkChanges::default();
        assert!(c.set("overhead", "-1").is_err());
        assert!(c.set("reorder_gap", "0").is_err());
        let typed = LinkChanges {
            overhead_bytes: Some(-100),
            ..Default::default()
        };
        assert!(typed
            .check_bounds()
            .unwrap_err()
            .contains("from 0 to 10000"));
    }

    /// The command line gives whole numbers typed (`--overhead -5`, `--queue 0`): they meet the
    /// same bounds as the same numbers written in a spec.
    #[test]
    fn typed_and_written_numbers_meet_the_same_bounds() {
        for n in [
            i64::from(i32::MIN),
            -1,
            0,
            1,
            2,
            10_000,
            10_001,
            1_000_000,
            1_000_001,
            10_000_000,
            10_000_001,
            i64::from(u32::MAX),
        ] {
            for key in ["loss_every", "reorder_gap", "queue", "limit", "overhead"] {
                let written = LinkChanges::default().set(key, &n.to_string()).is_ok();
                let mut typed = LinkChanges::default();
                let fits_u32 = u32::try_from(n).ok();
                match key {
                    "loss_every" => typed.loss_every = fits_u32,
                    "reorder_gap" => typed.reorder_gap = fits_u32,
                    "queue" => typed.queue_packets = fits_u32,
                    "limit" => typed.limit_packets = fits_u32,
                    _ => typed.overhead_bytes = i32::try_from(n).ok(),
                }
                if typed.is_empty() {
                    // Not representable on the command line (clap refuses it).
                    assert!(!written || n > i64::from(i32::MAX), "{key}={n}");
                    continue;
                }
                assert_eq!(typed.check_bounds().is_ok(), written, "{key}={n}");
            }
        }
    }
}
