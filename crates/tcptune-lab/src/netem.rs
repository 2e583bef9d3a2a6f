//! The link spec in tc's words: a one-line description for `lab status`, and the translation
//! to `tc qdisc … netem` (+ `ethtool`) commands for the netem backend on kernels that have
//! `sch_netem`, or to `tc qdisc … tbf` for a link that only limits the rate (which runs on
//! kernels without sch_netem, this one included).
//!
//! Translation notes (netem semantics from the source,
//! <https://elixir.bootlin.com/linux/v6.18/source/net/sched/sch_netem.c>):
//! - netem charges `qdisc_pkt_len`, which on a veth already includes the 14-byte Ethernet
//!   header; our `overhead_bytes` counts from the IP packet, so netem's PACKETOVERHEAD is
//!   `overhead_bytes − 14`.
//! - netem's `limit` also counts packets in the delay line, so the bottleneck queue becomes
//!   `limit = queue + packets in flight over delay + jitter at the rate` (full-size 1514-byte
//!   packets assumed), unless `limit_packets` is given, which is passed as is.
//! - Every-Nth loss, `jitter_order = fifo` and a byte-limited queue have no netem equivalent:
//!   they are refused with a sentence saying so.
//! - The distribution is always written out: older man pages claim normal is the default, the
//!   kernel's is uniform.

use tcptune_emu::{Distribution, JitterOrder, LinkConfig, Loss};

use crate::LabError;

fn pct(p: f64) -> String {
    format!("{}%", tcptune_model::units::fmt_sig(p * 100.0, 6))
}

fn us(ns: u64) -> String {
    // tc reads "us"; whole nanoseconds below 1 µs are rounded (netem's tables are µs-scale).
    format!("{}us", (ns as f64 / 1000.0).round() as u64)
}

/// One line: "100 Mbit/s, delay 10 ms ± 1 ms normal, loss 1%, queue 1000 pkts".
pub fn describe(c: &LinkConfig) -> String {
    let mut parts = Vec::new();
    match c.rate_bps {
        Some(r) => parts.push(format!("{r} (+{} B/pkt)", c.overhead_bytes)),
        None => parts.push("no rate limit".into()),
    }
    if c.delay_s.nanos() > 0 || c.jitter_s.nanos() > 0 {
        let mut d = format!("delay {}", c.delay_s);
        if c.jitter_s.nanos() > 0 {
            d.push_str(&format!(
                " ± {} {:?}{}",
                c.jitter_s,
                c.distribution,
                if c.jitter_order == JitterOrder::Fifo {
                    " fifo"
                } else {
                    ""
                }
            ));
        }
        parts.push(d);
    }
    match c.loss {
        Loss::None => {}
        Loss::Random { p } => parts.push(format!("loss {p}")),
        Loss::GilbertElliott {
            p,
            r,
            bad_loss,
            good_loss,
        } => parts.push(format!(
            "loss gilbert-elliott p {p} r {r} 1-h {bad_loss} 1-k {good_loss}"
        )),
        Loss::EveryNth { n } => parts.push(format!("loss every {n}th")),
    }
    for (name, p) in [
        ("duplicate", c.duplicate),
        ("corrupt", c.corrupt),
        ("reorder", c.reorder),
    ] {
        if p.get() > 0.0 {
            parts.push(format!("{name} {p}"));
        }
    }
    if c.reorder_gap > 0 {
        parts.push(format!("gap {}", c.reorder_gap));
    }
    if let Some(q) = c.effective_queue_packets() {
        parts.push(format!("queue {q} pkts"));
    }
    if let Some(b) = c.queue_bytes {
        parts.push(format!("queue {} B", b.get()));
    }
    if let Some(l) = c.limit_packets {
        parts.push(format!("limit {l} pkts"));
    }
    parts.join(", ")
}

/// The netem `limit` for `c` (see the module notes).
pub fn netem_limit(c: &LinkConfig) -> u32 {
    if let Some(l) = c.limit_packets {
        return l;
    }
    let queue = c.effective_queue_packets().unwrap_or(1000);
    let in_flight = match c.rate_bps {
        Some(r) => {
            let secs = (c.delay_s.nanos() + c.jitter_s.nanos()) as f64 / 1e9;
            (r.bps() * secs / (1514.0 * 8.0)).ceil() as u32
        }
        // Without a rate netem holds whatever arrives within the delay: keep tc's default
        // headroom on top of the queue.
        None => 1000,
    };
    queue.saturating_add(in_flight)
}

/// `tc` and `ethtool` argument lists that give `dev`'s egress the behaviour of `c`.
pub fn tc_commands(dev: &str, c: &LinkConfig, seed: u64) -> Result<Vec<Vec<String>>, LabError> {
    let refuse = |what: &str| {
        Err(LabError::Input(format!(
            "{what} has no netem equivalent; use the user-space emulator (--backend emu)"
        )))
    };
    if matches!(c.loss, Loss::EveryNth { .. }) {
        return refuse("every-Nth loss");
    }
    if c.jitter_order == JitterOrder::Fifo && c.jitter_s.nanos() > 0 {
        return refuse("jitter that keeps packet order");
    }
    if c.queue_bytes.is_some() {
        return refuse("a queue limited in bytes");
    }
    c.validate().map_err(|e| LabError::Input(e.to_string()))?;
    let mut a: Vec<String> = ["qdisc", "replace", "dev", dev, "root", "netem"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut push = |xs: &[&str]| a.extend(xs.iter().map(|s| s.to_string()));
    push(&["limit", &netem_limit(c).to_string()]);
    if c.delay_s.nanos() > 0 || c.jitter_s.nanos() > 0 {
        push(&["delay", &us(c.delay_s.nanos())]);
        if c.jitter_s.nanos() > 0 {
            let dist = match c.distribution {
                Distribution::Uniform => None,
                Distribution::Normal => Some("normal"),
                Distribution::Pareto => Some("pareto"),
                Distribution::Paretonormal => Some("paretonormal"),
            };
            push(&[&us(c.jitter_s.nanos())]);
            // No table means uniform in the kernel; tc has no "uniform" table to name.
            if let Some(d) = dist {
                push(&["distribution", d]);
            }
        }
    }
    match c.loss {
        Loss::None | Loss::EveryNth { .. } => {}
        Loss::Random { p } => push(&["loss", "random", &pct(p.get())]),
        Loss::GilbertElliott {
            p,
            r,
            bad_loss,
            good_loss,
        } => push(&[
            "loss",
            "gemodel",
            &pct(p.get()),
            &pct(r.get()),
            &pct(bad_loss.get()),
            &pct(good_loss.get()),
        ]),
    }
    if c.duplicate.get() > 0.0 {
        push(&["duplicate", &pct(c.duplicate.get())]);
    }
    if c.corrupt.get() > 0.0 {
        push(&["corrupt", &pct(c.corrupt.get())]);
    }
    if c.reorder.get() > 0.0 {
        push(&["reorder", &pct(c.reorder.get())]);
        push(&["gap", &c.reorder_gap.max(1).to_string()]);
    }
    if let Some(r) = c.rate_bps {
        push(&[
            "rate",
            &format!("{}bit", r.bps().round() as u64),
            &(c.overhead_bytes - 14).to_string(),
        ]);
    }
    push(&["seed", &seed.to_string()]);
    let mut cmds = vec![a];
    // netem decides per skb: per-packet impairments need wire-sized skbs.
    let onoff = if c.needs_per_packet() { "off" } else { "on" };
    cmds.push(
        ["-K", dev, "gso", onoff, "tso", onoff, "gro", onoff]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    Ok(cmds)
}

/// True when `c` needs netem itself: anything beyond a rate limit and its queue.
pub fn needs_netem(c: &LinkConfig) -> bool {
    c.delay_s.nanos() > 0
        || c.jitter_s.nanos() > 0
        || !matches!(c.loss, Loss::None)
        || c.duplicate.get() > 0.0
        || c.corrupt.get() > 0.0
        || c.reorder.get() > 0.0
        || c.limit_packets.is_some()
}

/// A rate limit and its drop-tail queue as tbf: the queue in bytes (`queue_bytes`, or the
/// packet queue counted as full-size 1514-byte frames, 1000 by default), a bucket of 1 ms at
/// the rate but at least ten full frames (tbf segments a GSO packet larger than the bucket),
/// and the overhead beyond the 14-byte Ethernet header a veth already counts.
pub fn tbf_command(dev: &str, c: &LinkConfig) -> Option<Vec<String>> {
    let rate = c.rate_bps?;
    let limit = match c.queue_bytes {
        Some(b) => b.get(),
        None => u64::from(c.effective_queue_packets().unwrap_or(1000)) * 1514,
    };
    let burst = ((rate.bps() / 8.0 / 1000.0) as u64).max(10 * 1514);
    Some(
        [
            "qdisc",
            "replace",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            &format!("{}bit", rate.bps().round() as u64),
            "burst",
            &burst.to_string(),
            "limit",
            &limit.max(1514).to_string(),
            "overhead",
            &(i64::from(c.overhead_bytes) - 14).to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    )
}

/// The `tc` (and `ethtool`, `["-K", …]`) commands that give one veth end's egress the
/// behaviour of `c` on the netem backend, for the lab's device: tbf for a link that only
/// limits the rate, netem for anything more (refused, in one sentence, where this kernel lacks
/// sch_netem), and nothing at all for a link without limits (the veth's own noqueue).
pub fn qdisc_commands(c: &LinkConfig, seed: u64) -> Result<Vec<Vec<String>>, LabError> {
    let dev = crate::names::DEV;
    if !needs_netem(c) {
        c.validate().map_err(|e| LabError::Input(e.to_string()))?;
        return Ok(tbf_command(dev, c).into_iter().collect());
    }
    let cmds = tc_commands(dev, c, seed)?;
    if !netem_available() {
        return Err(LabError::Input(format!(
            "a link with {} needs the sch_netem qdisc, which this kernel lacks; use the \
             user-space emulator (--backend emu)",
            describe(c)
        )));
    }
    Ok(cmds)
}

/// True when this kernel has the netem qdisc: a loaded or loadable module, else a netem tried
/// on the loopback of a scratch namespace (built-in netem shows in neither file). Asked once.
pub fn netem_available() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        if std::path::Path::new("/sys/module/sch_netem").exists() {
            return true;
        }
        let release = tcptune_kernel::sys::kernel_release().unwrap_or_default();
        let dir = std::path::Path::new("/lib/modules").join(release);
        if ["modules.dep", "modules.builtin"]
            .iter()
            .any(|f| std::fs::read_to_string(dir.join(f)).is_ok_and(|t| t.contains("sch_netem.ko")))
        {
            return true;
        }
        // Named like a lab's host, so a probe killed midway is found and removed as a leftover.
        let ns = crate::names::netns_name(&format!("netem-probe-{}", std::process::id()), "client");
        if crate::os::ip(&["netns", "add", &ns]).is_err() {
            return false;
        }
        let ok = std::process::Command::new("tc")
            .args(["-n", &ns, "qdisc", "add", "dev", "lo", "root", "netem"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let _ = crate::os::ip(&["netns", "del", &ns]);
        ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcptune_model::{Bytes, Dur, Probability, Rate};

    fn p(x: f64) -> Probability {
        Probability::new(x).unwrap()
    }

    #[test]
    fn a_rate_only_link_is_tbf_and_an_unlimited_one_needs_no_qdisc() {
        let c = LinkConfig {
            rate_bps: Some(Rate::from_bps(1e9)),
            ..Default::default()
        };
        assert!(!needs_netem(&c));
        // Bucket: 1 ms at 1 Gbit/s = 125000 B; queue: 1000 full frames.
        assert_eq!(
            qdisc_commands(&c, 1).unwrap(),
            vec![tbf_command("eth0", &c).unwrap()]
        );
        assert_eq!(
            tbf_command("eth0", &c).unwrap().join(" "),
            "qdisc replace dev eth0 root tbf rate 1000000000bit burst 125000 limit 1514000 \
             overhead 0"
        );
        // A slow link still gets ten frames of bucket; a byte queue is tbf's own limit.
        let slow = LinkConfig {
            rate_bps: Some(Rate::from_bps(1e6)),
            queue_bytes: Some(Bytes::new(30_000)),
            overhead_bytes: 38,
            ..Default::default()
        };
        assert_eq!(
            tbf_command("eth0", &slow).unwrap().join(" "),
            "qdisc replace dev eth0 root tbf rate 1000000bit burst 15140 limit 30000 overhead 24"
        );
        assert!(qdisc_commands(&LinkConfig::default(), 1)
            .unwrap()
            .is_empty());
        // Anything more needs netem itself.
        let delayed = LinkConfig {
            delay_s: Dur::from_millis(5),
            ..c
        };
        assert!(needs_netem(&delayed));
        match qdisc_commands(&delayed, 1) {
            Ok(cmds) => assert!(netem_available() && cmds[0].contains(&"netem".to_string())),
            Err(e) => assert!(
                !netem_available() && e.to_string().contains("needs the sch_netem qdisc"),
                "{e}"
            ),
        }
    }

    #[test]
    fn full_spec_translates_to_one_netem_line() {
        let c = LinkConfig {
            rate_bps: Some(Rate::from_bps(100e6)),
            delay_s: Dur::from_millis(10),
            jitter_s: Dur::from_micros(500),
            distribution: Distribution::Normal,
            loss: Loss::Random { p: p(0.01) },
            duplicate: p(0.001),
            corrupt: p(0.0001),
            reorder: p(0.25),
            reorder_gap: 5,
            queue_packets: Some(100),
            ..Default::default()
        };
        let cmds = tc_commands("veth0", &c, 7).unwrap();
        // in flight: 100e6 × 0.0105 s / 12112 bit = 86.7 → 87; + queue 100.
        assert_eq!(
            cmds[0].join(" "),
            "qdisc replace dev veth0 root netem limit 187 delay 10000us 500us distribution \
             normal loss random 1% duplicate 0.1% corrupt 0.01% reorder 25% gap 5 rate \
             100000000bit 0 seed 7"
        );
        assert_eq!(cmds[1].join(" "), "-K veth0 gso off tso off gro off");
    }

    #[test]
    fn delay_only_keeps_offloads_and_gemodel_is_spelled_out() {
        let c = LinkConfig {
            delay_s: Dur::from_millis(5),
            ..Default::default()
        };
        let cmds = tc_commands("v", &c, 1).unwrap();
        assert_eq!(
            cmds[0].join(" "),
            "qdisc replace dev v root netem limit 2000 delay 5000us seed 1"
        );
        assert_eq!(cmds[1].join(" "), "-K v gso on tso on gro on");
        let ge = LinkConfig {
            loss: Loss::GilbertElliott {
                p: p(0.01),
                r: p(0.3),
                bad_loss: p(1.0),
                good_loss: p(0.0),
            },
            limit_packets: Some(50),
            ..Default::default()
        };
        let line = tc_commands("v", &ge, 1).unwrap()[0].join(" ");
        assert!(
            line.contains("limit 50 loss gemodel 1% 30% 100% 0%"),
            "{line}"
        );
    }

    #[test]
    fn what_netem_cannot_do_is_refused() {
        for c in [
            LinkConfig {
                loss: Loss::EveryNth { n: 100 },
                ..Default::default()
            },
            LinkConfig {
                delay_s: Dur::from_millis(5),
                jitter_s: Dur::from_millis(1),
                jitter_order: JitterOrder::Fifo,
                ..Default::default()
            },
            LinkConfig {
                rate_bps: Some(Rate::from_bps(1e6)),
                queue_bytes: Some(Bytes::new(10_000)),
                ..Default::default()
            },
        ] {
            let e = tc_commands("v", &c, 1).unwrap_err().to_string();
            assert!(e.contains("no netem equivalent"), "{e}");
        }
    }

    #[test]
    fn description_names_every_setting() {
        let c = LinkConfig {
            rate_bps: Some(Rate::from_bps(1e9)),
            delay_s: Dur::from_millis(1),
            loss: Loss::Random { p: p(0.001) },
            ..Default::default()
        };
        let d = describe(&c);
        assert!(
            d.contains("1 Gbit/s") && d.contains("delay 1 ms") && d.contains("loss 0.1%"),
            "{d}"
        );
    }
}
