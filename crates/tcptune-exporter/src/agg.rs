//! The aggregator (sans-IO): sock_diag dumps and destroy events in, with the time passed in;
//! per-group counters, gauges and histograms out. State is kept per socket cookie, so every
//! byte and second is counted once: a connection alive at two polls contributes the
//! difference, one that closes contributes its last difference from its destroy event, one
//! that opens and closes between polls contributes its whole life from that event. Groups are
//! admitted until `--max-series` would be passed; later groups' connections are folded into
//! `group="other"` and counted.

use std::collections::HashMap;
use std::net::SocketAddr;

use tcptune_diagnose::engine::CpuUse;
use tcptune_diagnose::{Context, Limit, Sample};
use tcptune_kernel::tcp_info::state_name;
use tcptune_kernel::DiagSocket;
use tcptune_model::Dur;

use crate::delta::{between, index, Delta, CLASSES};
use crate::groups::{Dimension, Grouping, Key};
use crate::metrics::{fixed_series, limit_names, series_per_group, Families, GroupMetrics};

/// TCP states are numbered 1 to 12 (`tcp_info::state_name`); arrays indexed by state.
const STATES: usize = 16;

/// The overflow group's name.
pub const OTHER: &str = "other";

/// What the aggregator is set up with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Which dimensions connections are grouped by, and the operator's names.
    pub grouping: Grouping,
    /// The most series a scrape may hold.
    pub max_series: usize,
    /// What the diagnosis engine knows of the host (kernel, sysctls) for its verdicts.
    pub ctx: Context,
}

/// Why a configuration cannot work.
#[derive(Debug, thiserror::Error)]
#[error("--max-series {given} is too small: the exporter's own series and the overflow group need {fixed}, and each group {per} more; use at least {least}")]
pub struct TooFewSeries {
    /// The `--max-series` given.
    pub given: usize,
    /// Series the exporter always has: its own health and the overflow group.
    pub fixed: usize,
    /// Series each admitted group adds.
    pub per: usize,
    /// The smallest `--max-series` that admits one group.
    pub least: usize,
}

/// One connection the aggregator follows.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub group: usize,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: u8,
    /// The socket's inode (0 when the kernel gave none): how its process is found.
    pub inode: u32,
    /// Its process's CPU figure from the last measurement ([`crate::cpu`]), when measured.
    pub cpu: Option<CpuUse>,
    pub last: Sample,
    /// Seconds per class over the time the exporter followed it.
    pub seconds: [f64; CLASSES],
    /// The class of its last interval.
    pub current: Option<Limit>,
}

/// Adds one socket's interval to its group's series.
fn add(g: &GroupMetrics, d: &Delta, last: &Sample) {
    // Each is an atomic add; most sockets moved nothing since the last poll.
    for (c, n) in [
        (&g.delivered, d.delivered),
        (&g.retransmitted, d.retransmitted),
        (&g.rto, d.rto),
    ] {
        if n > 0 {
            c.inc_by(n);
        }
    }
    for (c, s) in g.limit_seconds.iter().zip(d.seconds) {
        if s > 0.0 {
            c.inc_by(s);
        }
    }
    // Path figures only from connections that moved data in the interval.
    if d.delivered == 0 {
        return;
    }
    let i = &last.info;
    if let Some(rtt) = i.rtt_us.filter(|&r| r > 0) {
        g.rtt.observe(f64::from(rtt) / 1e6);
        if let Some(min) = i.min_rtt_us.filter(|&m| m > 0 && m != u32::MAX) {
            g.inflation
                .observe(f64::from(rtt.saturating_sub(min)) / 1e6);
        }
    }
    // gRFC A80's rule: only samples that were not application-limited.
    if i.delivery_rate_app_limited == Some(false) {
        if let Some(r) = i.delivery_rate_bytes_per_s.filter(|&r| r > 0) {
            g.rate.observe(r as f64);
        }
    }
}

impl Conn {
    /// Takes an interval `d` that ended with the sample `cur`, in `state`.
    fn took(&mut self, d: &Delta, state: u8, cur: Sample) {
        for (t, s) in self.seconds.iter_mut().zip(d.seconds) {
            *t += s;
        }
        self.current = d.dominant().or(self.current);
        self.state = state;
        self.last = cur;
    }
}

/// Per namespace: whether the first dump (the baseline) was taken and when the last was.
#[derive(Debug, Clone, Default)]
struct NsState {
    last_dump: Option<Dur>,
}

/// The exporter's state: one entry per socket cookie and namespace, the admitted groups and
/// their series. Fed dumps and destroy events by [`crate::poll`]; read by the pages.
pub struct Aggregator {
    cfg: Config,
    pub(crate) families: Families,
    limits: Vec<String>,
    /// Admitted groups' names and handles; index 0 is the overflow group.
    groups: Vec<GroupMetrics>,
    group_index: HashMap<String, usize>,
    max_groups: usize,
    ns: HashMap<Option<String>, NsState>,
    pub(crate) conns: HashMap<(Option<String>, u64), Conn>,
    /// Connections missing from their namespace's last dump, waiting one poll for their
    /// destroy event.
    missing: HashMap<(Option<String>, u64), Conn>,
    /// Sockets without tcp_info (TIME-WAIT, SYN-RECV) counted at the last dump, per group.
    stateless: HashMap<(usize, u8), i64>,
    seen: usize,
}

impl Aggregator {
    /// An aggregator with no connections yet; refuses a `max_series` that cannot hold one group.
    pub fn new(cfg: Config) -> Result<Aggregator, TooFewSeries> {
        let (fixed, per) = (fixed_series() + series_per_group(), series_per_group());
        if cfg.max_series < fixed + per {
            return Err(TooFewSeries {
                given: cfg.max_series,
                fixed,
                per,
                least: fixed + per,
            });
        }
        let max_groups = (cfg.max_series - fixed) / per;
        let families = Families::new();
        let limits = limit_names();
        let other = families.group(OTHER, &limits);
        Ok(Aggregator {
            cfg,
            families,
            limits,
            groups: vec![other],
            group_index: HashMap::from([(OTHER.to_string(), 0)]),
            max_groups,
            ns: HashMap::new(),
            conns: HashMap::new(),
            missing: HashMap::new(),
            stateless: HashMap::new(),
            seen: 0,
        })
    }

    /// Whether groups are made by congestion control (then dumps must ask for its name).
    pub fn needs_congestion(&self) -> bool {
        self.cfg.grouping.by.contains(&Dimension::Cc)
    }

    /// How many groups besides `other` fit under `--max-series`.
    pub fn max_groups(&self) -> usize {
        self.max_groups
    }

    /// The registered metric families, for a scrape and for the poller's health counters.
    pub fn families(&self) -> &Families {
        &self.families
    }

    pub(crate) fn group_name(&self, i: usize) -> &str {
        self.groups.get(i).map(|g| g.name()).unwrap_or(OTHER)
    }

    /// The group of a connection, admitting it while there is room; a connection whose group
    /// does not fit is folded into `other` (counted when `count_overflow`).
    fn group_of(&mut self, netns: Option<&str>, s: &DiagSocket, count_overflow: bool) -> usize {
        let name = self.cfg.grouping.group(&Key {
            local: s.src,
            remote: s.dst,
            congestion: s.congestion.as_ref().map(|c| c.as_str()),
            netns,
        });
        if let Some(&i) = self.group_index.get(&name) {
            return i;
        }
        if self.groups.len() - 1 < self.max_groups {
            let g = self.families.group(&name, &self.limits);
            self.groups.push(g);
            self.group_index.insert(name, self.groups.len() - 1);
            self.families
                .health
                .groups
                .set((self.groups.len() - 1) as i64);
            return self.groups.len() - 1;
        }
        if count_overflow {
            self.families.health.overflow.inc();
        }
        0
    }

    /// One dump of `netns` taken at `now` (the sockets are consumed: their `tcp_info` moves
    /// into the state kept per cookie, with no copy).
    pub fn dump(
        &mut self,
        netns: Option<&str>,
        socks: impl IntoIterator<Item = DiagSocket>,
        now: Dur,
    ) {
        let key_ns = netns.map(str::to_string);
        let baseline = self
            .ns
            .entry(key_ns.clone())
            .or_default()
            .last_dump
            .is_none();
        for mut s in socks {
            let unconnected = s.dst.port() == 0 && s.dst.ip().is_unspecified();
            if unconnected {
                continue;
            }
            self.seen += 1;
            let Some(info) = s.info.take() else {
                let g = self.group_of(netns, &s, false);
                *self.stateless.entry((g, s.state)).or_default() += 1;
                continue;
            };
            let key = (key_ns.clone(), s.cookie);
            let cur = Sample {
                at_s: now,
                info,
                skmem: s.skmem,
            };
            if let Some(c) = self.conns.get_mut(&key) {
                // Followed since an earlier poll: the difference.
                let wall = Dur::from_nanos(now.nanos().saturating_sub(c.last.at_s.nanos()));
                let d = between(
                    Some(&c.last),
                    &cur,
                    Some(wall),
                    &self.cfg.ctx,
                    c.cpu.as_slice(),
                );
                add(&self.groups[c.group], &d, &cur);
                c.took(&d, s.state, cur);
                continue;
            }
            let (mut c, from) = match self.missing.remove(&key) {
                Some(c) => {
                    let from = c.last.clone();
                    (c, Some(from))
                }
                None => {
                    let group = self.group_of(netns, &s, true);
                    if !baseline {
                        self.groups[group].opened.inc();
                    }
                    let c = Conn {
                        group,
                        local: s.src,
                        remote: s.dst,
                        state: s.state,
                        inode: s.inode,
                        cpu: None,
                        last: cur.clone(),
                        seconds: [0.0; CLASSES],
                        current: None,
                    };
                    (c, None)
                }
            };
            // A new connection (after the baseline) contributes its whole life so far; one
            // back from the missing, the difference; the baseline nothing.
            if !baseline || from.is_some() {
                let w = from
                    .as_ref()
                    .map(|f| Dur::from_nanos(now.nanos().saturating_sub(f.at_s.nanos())));
                let d = between(from.as_ref(), &cur, w, &self.cfg.ctx, c.cpu.as_slice());
                add(&self.groups[c.group], &d, &cur);
                c.took(&d, s.state, cur);
            }
            self.conns.insert(key, c);
        }
        // Connections of this namespace the dump did not show: their destroy event is due; one
        // still missing a poll later lost it.
        let lost: Vec<_> = self
            .missing
            .keys()
            .filter(|(n, _)| *n == key_ns)
            .cloned()
            .collect();
        for k in lost {
            if let Some(c) = self.missing.remove(&k) {
                self.families.health.destroy_dropped.inc();
                self.groups[c.group].closed.inc();
            }
        }
        // Every connection the dump showed has its last sample from `now`.
        let gone: Vec<_> = self
            .conns
            .iter()
            .filter(|((n, _), c)| *n == key_ns && c.last.at_s < now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            if let Some(c) = self.conns.remove(&k) {
                self.missing.insert(k, c);
            }
        }
        if let Some(ns) = self.ns.get_mut(&key_ns) {
            ns.last_dump = Some(now);
        }
    }

    /// A destroy event from `netns`, received at `now`: the connection's final counters.
    pub fn destroyed(&mut self, netns: Option<&str>, s: &DiagSocket, now: Dur) {
        let unconnected = s.dst.port() == 0 && s.dst.ip().is_unspecified();
        let Some(info) = s.info.clone().filter(|_| !unconnected) else {
            return;
        };
        let key_ns = netns.map(str::to_string);
        let key = (key_ns.clone(), s.cookie);
        let last = Sample {
            at_s: now,
            info,
            skmem: s.skmem,
        };
        let known = self
            .conns
            .remove(&key)
            .or_else(|| self.missing.remove(&key));
        let (group, from, cpu) = match known {
            Some(c) => (c.group, Some(c.last), c.cpu),
            None => {
                // Before the namespace's first dump, a connection may predate the exporter.
                if self.ns.get(&key_ns).is_none_or(|n| n.last_dump.is_none()) {
                    return;
                }
                let g = self.group_of(netns, s, true);
                self.groups[g].opened.inc();
                (g, None, None)
            }
        };
        let d = between(from.as_ref(), &last, None, &self.cfg.ctx, cpu.as_slice());
        add(&self.groups[group], &d, &last);
        self.groups[group].closed.inc();
    }

    /// Ends a poll that took `took`: the current-connection gauges and the exporter's health.
    pub fn finish(&mut self, took: Dur) {
        let h = &self.families.health;
        h.poll_seconds.observe(took.secs());
        h.polls.inc();
        h.sockets.set(self.seen as i64);
        self.seen = 0;
        // Counted in arrays (group × state, group × class), not a map: this runs over every
        // connection each poll.
        let mut by_state = vec![[0i64; STATES]; self.groups.len()];
        for ((g, state), n) in self.stateless.drain() {
            by_state[g][usize::from(state) % STATES] += n;
        }
        let mut by_limit = vec![[0i64; CLASSES]; self.groups.len()];
        for c in self.conns.values() {
            by_state[c.group][usize::from(c.state) % STATES] += 1;
            let l = c.current.unwrap_or(Limit::NotEnoughEvidence);
            by_limit[c.group][index(l)] += 1;
        }
        for (g, counts) in self.groups.iter().zip(&by_limit) {
            for (gauge, n) in g.by_limit.iter().zip(counts) {
                gauge.set(*n);
            }
        }
        // Every state gauge a group has shown is set, so one that emptied reads 0.
        for (g, counts) in self.groups.iter_mut().zip(by_state.iter_mut()) {
            for (state, gauge) in g.states.iter() {
                gauge.set(std::mem::take(&mut counts[usize::from(*state) % STATES]));
            }
        }
        for (gi, counts) in by_state.iter().enumerate() {
            for (state, &n) in counts.iter().enumerate().filter(|(_, n)| **n != 0) {
                let state = state as u8;
                let gauge = self
                    .families
                    .state_gauge(&self.groups[gi], state_name(state));
                gauge.set(n);
                self.groups[gi].states.push((state, gauge));
            }
        }
    }

    /// The sockets whose process's CPU figure could change their class (their last interval
    /// went to `application` or `cpu`), those with the most such time first, at most `cap`:
    /// what [`crate::cpu::CpuWatch::measure`] is given.
    pub fn cpu_candidates(&self, cap: usize) -> Vec<u32> {
        let (app, cpu) = (index(Limit::Application), index(Limit::Cpu));
        let mut c: Vec<(f64, u32)> = self
            .conns
            .values()
            .filter(|c| c.inode != 0)
            .filter(|c| matches!(c.current, Some(Limit::Application | Limit::Cpu)))
            .map(|c| (c.seconds[app] + c.seconds[cpu], c.inode))
            .collect();
        c.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        c.into_iter().take(cap).map(|(_, i)| i).collect()
    }

    /// Takes a measurement's figures by socket inode; connections without one are judged
    /// without a CPU figure from now on.
    pub fn set_cpu(&mut self, figures: &HashMap<u32, CpuUse>) {
        for c in self.conns.values_mut() {
            c.cpu = figures.get(&c.inode).copied();
        }
    }

    /// The scrape body (see [`Families::encode`]).
    pub fn encode(&self, openmetrics: bool) -> String {
        self.families.encode(openmetrics)
    }

    pub(crate) fn context(&self) -> &Context {
        &self.cfg.ctx
    }
}
