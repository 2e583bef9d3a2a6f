//! The rules on the path: the congestion control against the kernel and the path's loss
//! (R10, R11, R13), the interfaces' queues and MTU, and the routes' window settings.

use super::*;

impl Ctx<'_> {
    /// R10, R11, R13: the congestion control against the kernel and the path's loss.
    pub(super) fn congestion_control(&mut self) {
        let key = "net.ipv4.tcp_congestion_control";
        if self.cc.is_empty() {
            return;
        }
        let available = self.state.congestion_controls_available();
        let kernel = self.state.kernel;
        if self.cc == "bbr" {
            let fq = self.state.traffic_interfaces().any(|i| i.qdisc == "fq");
            if kernel.is_some_and(|k| !k.at_least(4, 13)) && !fq {
                self.push(
                    "R10",
                    key,
                    self.cc.clone(),
                    Some("fq qdisc on the egress interface".into()),
                    Verdict::Warning,
                    "BBR before 4.13 has no internal pacing and needs the fq qdisc.".into(),
                    "pacing commit 218af599fa63; tcp_bbr.c",
                    None,
                );
                return;
            }
            if kernel.is_some_and(|k| !k.at_least(4, 20)) && !fq {
                self.push(
                    "R11",
                    key,
                    self.cc.clone(),
                    Some("fq qdisc on the egress interface".into()),
                    Verdict::Warning,
                    "BBR's internal pacing works well only from 4.20; use fq before that.".into(),
                    "google/bbr quick-start",
                    None,
                );
                return;
            }
        }
        if let Some((p, bound)) = self.loss_limit() {
            let mss = self.mss();
            let flow_rate = self.input.rate_bps.bps() / self.flows as f64;
            let bbr = available.contains(&"bbr");
            self.push(
                "R13",
                key,
                self.cc.clone(),
                bbr.then(|| "bbr".to_string()),
                if bbr {
                    Verdict::Change
                } else {
                    Verdict::Warning
                },
                format!(
                    "with {p} loss over {} a loss-based control reaches about {bound} \
                     (Mathis, MSS {mss}), below the {} a flow could have; {}",
                    self.input.rtt_s,
                    Rate::from_bps(flow_rate),
                    if bbr {
                        "BBR's rate does not collapse under random loss."
                    } else {
                        "BBR would not collapse, but this kernel does not offer it."
                    }
                ),
                "Mathis et al. 1997; BBR (Cardwell et al. 2016)",
                bbr.then(|| self.sysctl_change(key, "bbr".into())).flatten(),
            );
            return;
        }
        self.push(
            "R14",
            key,
            self.cc.clone(),
            None,
            Verdict::Fine,
            format!("available here: {}.", available.join(", ")),
            "ip-sysctl.rst tcp_congestion_control",
            None,
        );
    }

    /// The MSS of the widest interface that carries traffic (IPv4 + TCP with timestamps).
    /// The path's loss and the Mathis bound of a loss-based control on it, when this host runs
    /// one and the bound is below a flow's share of the path (R13).
    pub(super) fn loss_limit(&self) -> Option<(Probability, Rate)> {
        let loss_based = matches!(self.cc.as_str(), "cubic" | "reno" | "htcp");
        let p = self.input.loss.filter(|p| p.get() > 0.0 && loss_based)?;
        // Mathis et al. with C = sqrt(3/2): the loss-limited bound of Reno-style AIMD.
        let bound = Rate::from_bps(tcptune_model::mathis::mathis_bps(
            tcptune_model::Bytes::new(self.mss()),
            self.input.rtt_s,
            p.get(),
            tcptune_model::mathis::MathisConstant::Periodic.value(),
        ));
        let flow_rate = self.input.rate_bps.bps() / self.flows as f64;
        (bound.bps() < flow_rate).then_some((p, bound))
    }

    /// Whether R13 switches this host to BBR (loss-limited, and the kernel offers BBR).
    pub(super) fn switches_to_bbr(&self) -> bool {
        self.loss_limit().is_some() && self.state.congestion_controls_available().contains(&"bbr")
    }

    pub(super) fn mss(&self) -> u64 {
        let mtu = self
            .state
            .traffic_interfaces()
            .map(|i| i.mtu)
            .max()
            .unwrap_or(1500);
        u64::from(mtu.saturating_sub(52).max(536))
    }

    /// R15, R24: MTU probing for jumbo frames, and queues that add too much delay.
    pub(super) fn interfaces(&mut self) {
        let ifaces: Vec<_> = self.state.traffic_interfaces().cloned().collect();
        let probing = self.state.sysctl_u64("net.ipv4.tcp_mtu_probing");
        if let Some(jumbo) = ifaces.iter().find(|i| i.mtu > 1500) {
            if probing == Some(0) {
                self.push(
                    "R15",
                    "net.ipv4.tcp_mtu_probing",
                    "0".into(),
                    Some("1".into()),
                    Verdict::Change,
                    format!(
                        "{} has MTU {}: if any hop on the way is 1500 and ICMP is filtered, \
                         connections stall; probing (1, not 2) recovers from such black holes.",
                        jumbo.name, jumbo.mtu
                    ),
                    "ip-sysctl.rst tcp_mtu_probing; ESnet fasterdata (use 1)",
                    self.sysctl_change("net.ipv4.tcp_mtu_probing", "1".into()),
                );
            }
        }
        for i in &ifaces {
            // Only FIFO qdiscs take their length from txqueuelen; fq/fq_codel have own limits.
            if !matches!(i.qdisc.as_str(), "pfifo_fast" | "pfifo" | "bfifo") {
                continue;
            }
            let drain = Dur::from_secs_f64(
                i.txqueuelen as f64 * i.mtu as f64 * 8.0 / self.input.rate_bps.bps(),
            );
            let limit = self.input.rtt_s.nanos().max(Dur::from_millis(20).nanos());
            let setting = format!("dev:{} txqueuelen", i.name);
            if i.txqueuelen > 1000 && drain.nanos() > 2 * limit {
                // The largest queue that still drains in one RTT (at least the default 1000).
                let fits = ((self.input.rate_bps.bytes_per_sec() * (limit as f64 / 1e9))
                    / i.mtu as f64) as u32;
                let value = fits.max(1000);
                self.push(
                    "R24",
                    &setting,
                    i.txqueuelen.to_string(),
                    Some(value.to_string()),
                    Verdict::Change,
                    format!(
                        "a full {}-packet queue of {}-byte packets takes {drain} to drain at \
                         {}, queueing delay that every flow through {} pays (bufferbloat).",
                        i.txqueuelen, i.mtu, self.input.rate_bps, i.name
                    ),
                    "ip-sysctl.rst tcp_limit_output_bytes (TSQ); ESnet fasterdata",
                    Some(Action::Txqueuelen {
                        dev: i.name.clone(),
                        value,
                    }),
                );
            } else {
                self.push(
                    "R24",
                    &setting,
                    i.txqueuelen.to_string(),
                    None,
                    Verdict::Fine,
                    format!("a full queue drains in {drain} at {}.", self.input.rate_bps),
                    "ip-sysctl.rst tcp_limit_output_bytes (TSQ)",
                    None,
                );
            }
        }
    }

    /// R21: route ssthresh that the kernel ignores.
    pub(super) fn routes(&mut self) {
        let ignored = self
            .state
            .sysctl_u64("net.ipv4.tcp_no_ssthresh_metrics_save")
            == Some(1);
        for r in self.state.routes.clone() {
            if let (Some(ss), true) = (r.ssthresh, ignored) {
                self.push(
                    "R21",
                    &format!("route {} ssthresh", r.dst),
                    ss.to_string(),
                    None,
                    Verdict::Warning,
                    "with tcp_no_ssthresh_metrics_save=1 (the default) kernels without the 2025 \
                     tcp_metrics fixes ignore a route's ssthresh; check `ss -ti` shows it."
                        .into(),
                    "tcp_init_metrics(); P. Tesarik, tcp_metrics patches (2025)",
                    None,
                );
            }
        }
    }
}
