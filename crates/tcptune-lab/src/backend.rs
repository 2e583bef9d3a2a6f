//! How the link between the hosts is made, one [`LinkBackend`] per [`Backend`]: the user-space
//! emulator between two TUN devices, or a veth pair with tc qdiscs (netem, tbf). Everything
//! that differs between them is here, so the lifecycle in `lab.rs` never asks which it has;
//! and `--backend auto`'s choice between them ([`auto`]).

use schemars::JsonSchema;
use serde::Serialize;
use tcptune_emu::sys::{EmuStatus, Request};
use tcptune_emu::LinkSpec;

use crate::effects::Effects;
use crate::names::{netns_name, DEV, HOSTS};
use crate::netem;
use crate::spec::{Backend, LabSpec};
use crate::LabError;

/// One way of making the link.
pub trait LinkBackend {
    /// Shown by `lab status`.
    fn describe(&self) -> &'static str;
    /// Refuses what this backend cannot do (before anything is created).
    fn check(&self, spec: &LabSpec) -> Result<(), LabError>;
    /// Joins the two (existing, empty) namespaces; the emulator's PID if there is one. Runs
    /// before the hosts are configured: their devices come from here.
    fn create(&self, fx: &mut dyn Effects, lab: &str) -> Result<Option<u32>, LabError>;
    /// Gives a new lab's link its settings, once its hosts are configured.
    fn finish(&self, fx: &mut dyn Effects, lab: &str, link: &LinkSpec) -> Result<(), LabError>;
    /// Changes a running lab's link.
    fn set_link(&self, fx: &mut dyn Effects, lab: &str, link: &LinkSpec) -> Result<(), LabError>;
    /// Whether a set-up lab's link still works.
    fn link_up(&self, fx: &mut dyn Effects, lab: &str) -> bool;
    /// Live counters of a running lab.
    fn counters(
        &self,
        fx: &mut dyn Effects,
        lab: &str,
    ) -> Result<(Option<EmuStatus>, Vec<QdiscStatus>), LabError>;
}

/// The implementation of `b`.
pub fn of(b: Backend) -> &'static dyn LinkBackend {
    match b {
        Backend::Emu => &Emu,
        Backend::Netem => &Netem,
    }
}

/// The backend of `lab up`: `--backend WORD` (emu, netem or auto) if given, else the spec
/// file's (`from_file`), else auto.
pub fn choose(
    word: Option<&str>,
    from_file: Option<Backend>,
    link: &LinkSpec,
) -> Result<Backend, LabError> {
    match (word, from_file) {
        (Some("emu"), _) => Ok(Backend::Emu),
        (Some("netem"), _) => Ok(Backend::Netem),
        (Some("auto"), _) | (None, None) => Ok(auto(link)),
        (None, Some(b)) => Ok(b),
        (Some(other), _) => Err(LabError::Input(format!(
            "--backend '{other}' is unknown; use emu, netem or auto"
        ))),
    }
}

/// `--backend auto`: netem where the kernel has it and tc can express the link; else the
/// user-space emulator.
pub fn auto(link: &LinkSpec) -> Backend {
    auto_with(link, netem::netem_available())
}

/// [`auto`] given whether the kernel has sch_netem: what [`Netem::check`] accepts there.
fn auto_with(link: &LinkSpec, netem_available: bool) -> Backend {
    let fits = |c: &tcptune_emu::LinkConfig| {
        if netem::needs_netem(c) {
            netem::tc_commands(DEV, c, link.seed).is_ok()
        } else {
            c.validate().is_ok()
        }
    };
    if netem_available && fits(&link.up) && fits(&link.down) {
        Backend::Netem
    } else {
        Backend::Emu
    }
}

/// The user-space emulator: a background process holding a TUN device in each namespace.
pub struct Emu;

impl LinkBackend for Emu {
    fn describe(&self) -> &'static str {
        "user-space emulator"
    }

    fn check(&self, _spec: &LabSpec) -> Result<(), LabError> {
        Ok(())
    }

    fn create(&self, fx: &mut dyn Effects, lab: &str) -> Result<Option<u32>, LabError> {
        // The emulator reads the link from the lab's state.
        fx.spawn_emulator(lab).map(Some)
    }

    fn finish(&self, _: &mut dyn Effects, _: &str, _: &LinkSpec) -> Result<(), LabError> {
        Ok(())
    }

    fn set_link(&self, fx: &mut dyn Effects, lab: &str, link: &LinkSpec) -> Result<(), LabError> {
        fx.control(
            lab,
            &Request::SetLink {
                link: Box::new(link.clone()),
            },
        )
        .map(drop)
    }

    fn link_up(&self, fx: &mut dyn Effects, lab: &str) -> bool {
        fx.lab_processes()
            .iter()
            .any(|p| p.lab == lab && p.role == "_emulator")
    }

    fn counters(
        &self,
        fx: &mut dyn Effects,
        lab: &str,
    ) -> Result<(Option<EmuStatus>, Vec<QdiscStatus>), LabError> {
        Ok((fx.control(lab, &Request::Status)?, Vec::new()))
    }
}

/// A veth pair, an end in each namespace, with kernel qdiscs on each end's egress.
pub struct Netem;

impl LinkBackend for Netem {
    fn describe(&self) -> &'static str {
        "veth + tc qdiscs"
    }

    fn check(&self, spec: &LabSpec) -> Result<(), LabError> {
        for (h, s) in [("client", &spec.client), ("server", &spec.server)] {
            if s.line_rate_bps.is_some() {
                return Err(LabError::Input(format!(
                    "{h}.line_rate needs the user-space emulator (--backend emu): on the \
                     netem backend the host's device is a veth"
                )));
            }
        }
        // Refuses what tc cannot express, and netem where this kernel lacks it.
        netem::qdisc_commands(&spec.link.up, spec.link.seed)?;
        netem::qdisc_commands(&spec.link.down, spec.link.seed)?;
        Ok(())
    }

    fn create(&self, fx: &mut dyn Effects, lab: &str) -> Result<Option<u32>, LabError> {
        let (c, s) = (netns_name(lab, "client"), netns_name(lab, "server"));
        fx.ip(&[
            "link", "add", DEV, "netns", &c, "type", "veth", "peer", "name", DEV, "netns", &s,
        ])?;
        Ok(None)
    }

    fn finish(&self, fx: &mut dyn Effects, lab: &str, link: &LinkSpec) -> Result<(), LabError> {
        self.set_link(fx, lab, link)
    }

    /// Puts each direction of `link` on the egress of the veth end that sends it: up on the
    /// client's, down on the server's (`tc qdisc replace`, so a running lab changes in place).
    fn set_link(&self, fx: &mut dyn Effects, lab: &str, link: &LinkSpec) -> Result<(), LabError> {
        for (h, cfg) in [("client", &link.up), ("server", &link.down)] {
            let ns = netns_name(lab, h);
            let cmds = netem::qdisc_commands(cfg, link.seed)?;
            if cmds.is_empty() {
                // No limits: back to the veth's own noqueue (fails harmlessly if already there).
                let del = ["qdisc", "del", "dev", DEV, "root"].map(String::from);
                let _ = fx.tc(&ns, &del);
            }
            for cmd in cmds {
                fx.tc(&ns, &cmd)?;
            }
        }
        Ok(())
    }

    fn link_up(&self, fx: &mut dyn Effects, lab: &str) -> bool {
        HOSTS.iter().all(|h| {
            fx.ip(&["-n", &netns_name(lab, h), "link", "show", DEV])
                .is_ok()
        })
    }

    fn counters(
        &self,
        fx: &mut dyn Effects,
        lab: &str,
    ) -> Result<(Option<EmuStatus>, Vec<QdiscStatus>), LabError> {
        let qdiscs = HOSTS
            .iter()
            .filter_map(|&h| {
                let ns = netns_name(lab, h);
                let show = ["-s", "-j", "qdisc", "show", "dev", DEV].map(String::from);
                let out = fx.tc(&ns, &show).ok()?;
                qdisc_status(h, &out)
            })
            .collect();
        Ok((None, qdiscs))
    }
}

/// One direction's qdisc on the netem backend, from `tc -s -j qdisc show`.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct QdiscStatus {
    /// The host whose egress it shapes (client: the up direction).
    pub host: String,
    /// netem, tbf, or noqueue (no limits).
    pub kind: String,
    /// Packets the qdisc sent.
    pub packets: u64,
    /// Bytes the qdisc sent.
    pub bytes: u64,
    /// Packets it dropped (loss, queue limit).
    pub drops: u64,
    /// Times a packet had to wait for the rate (tbf) or the limit was reached.
    pub overlimits: u64,
    /// Queued now.
    pub backlog_bytes: u64,
    /// Packets queued now.
    pub backlog_packets: u64,
}

/// The root qdisc of `tc -s -j qdisc show` output.
fn qdisc_status(host: &str, json: &str) -> Option<QdiscStatus> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let q = v
        .as_array()?
        .iter()
        .find(|q| q["root"].as_bool() == Some(true))
        .or(v.get(0))?;
    let n = |k: &str| q[k].as_u64().unwrap_or(0);
    Some(QdiscStatus {
        host: host.into(),
        kind: q["kind"].as_str().unwrap_or("").into(),
        packets: n("packets"),
        bytes: n("bytes"),
        drops: n("drops"),
        overlimits: n("overlimits"),
        backlog_bytes: n("backlog"),
        backlog_packets: n("qlen"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::Fake;
    use crate::spec::LinkChanges;

    fn link(changes: &[(&str, &str)]) -> LinkSpec {
        let mut c = LinkChanges::default();
        for (k, v) in changes {
            c.set(k, v).unwrap();
        }
        let mut l = LinkSpec::default();
        c.apply(&mut l).unwrap();
        l
    }

    #[test]
    fn auto_takes_netem_only_where_it_has_it_and_tc_can_say_the_link() {
        let plain = link(&[("rate", "100mbit"), ("delay", "10ms")]);
        assert_eq!(auto_with(&plain, true), Backend::Netem);
        assert_eq!(auto_with(&plain, false), Backend::Emu);
        // A rate alone is tbf's, whatever its queue.
        let tbf = link(&[("queue_bytes", "64KiB"), ("rate", "10mbit")]);
        assert_eq!(auto_with(&tbf, true), Backend::Netem);
        for emu_only in [
            link(&[("loss_every", "10")]),
            link(&[("queue_bytes", "64KiB"), ("delay", "10ms")]),
            link(&[
                ("delay", "10ms"),
                ("jitter", "1ms"),
                ("jitter_order", "fifo"),
            ]),
        ] {
            assert_eq!(auto_with(&emu_only, true), Backend::Emu, "{emu_only:?}");
        }
    }

    #[test]
    fn the_option_wins_over_the_spec_file_and_auto_is_the_default() {
        let l = LinkSpec::default();
        assert_eq!(
            choose(Some("emu"), Some(Backend::Netem), &l).unwrap(),
            Backend::Emu
        );
        assert_eq!(choose(Some("netem"), None, &l).unwrap(), Backend::Netem);
        assert_eq!(
            choose(None, Some(Backend::Netem), &l).unwrap(),
            Backend::Netem
        );
        assert_eq!(choose(None, None, &l).unwrap(), auto(&l));
        let e = choose(Some("tc"), None, &l).unwrap_err().to_string();
        assert_eq!(e, "--backend 'tc' is unknown; use emu, netem or auto");
    }

    #[test]
    fn set_link_goes_to_the_emulator_or_to_tc() {
        let l = link(&[("rate", "100mbit")]);
        let mut fx = Fake::default();
        of(Backend::Emu).set_link(&mut fx, "t", &l).unwrap();
        assert_eq!(fx.log, ["control t set-link"]);
        let mut fx = Fake::default();
        of(Backend::Netem).set_link(&mut fx, "t", &l).unwrap();
        // tbf on each sending end: up on the client's, down on the server's.
        assert_eq!(fx.log.len(), 2, "{:?}", fx.log);
        assert!(fx.log[0].starts_with("tc tcptune-t-client qdisc replace dev eth0 root tbf"));
        assert!(fx.log[1].starts_with("tc tcptune-t-server qdisc replace dev eth0 root tbf"));
        // No limits: the qdiscs are removed.
        let mut fx = Fake::default();
        of(Backend::Netem)
            .set_link(&mut fx, "t", &LinkSpec::default())
            .unwrap();
        assert_eq!(
            fx.log,
            [
                "tc tcptune-t-client qdisc del dev eth0 root",
                "tc tcptune-t-server qdisc del dev eth0 root"
            ]
        );
    }

    #[test]
    fn netem_refuses_a_line_rate() {
        let mut spec = LabSpec::default();
        spec.server.set("line_rate", "1gbit").unwrap();
        let e = of(Backend::Netem).check(&spec).unwrap_err();
        assert!(e.to_string().contains("server.line_rate needs"), "{e}");
        of(Backend::Emu).check(&spec).unwrap();
    }
}
