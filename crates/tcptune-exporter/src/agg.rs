//! The aggregator (sans-IO): sock_diag dumps and destroy events in, with the time passed in;
//! per-group counters, gauges and histograms out. State is kept per socket cookie, so every
//! byte and second is counted once: a connection alive at two polls contributes the
//! difference, one that closes contributes its last difference from its destroy event, one
//! that opens and closes between polls contributes its whole life from that event. Groups are
//! admitted until `--max-series` would be passed; later groups' connections are folded into
//! `group="other"` and counted.

use std::collections::HashMap;

use tcptune_diagnose::engine::CpuUse;
use tcptune_diagnose::{Context, Limit, Sample};
use tcptune_kernel::tcp_info::state_name;
use tcptune_kernel::DiagSocket;
use tcptune_model::Dur;

use crate::delta::{between, index, Delta, CLASSES};
use crate::follow::{Conn, ConnKey, Followed, KeyMap, STATES};
use crate::groups::{Dimension, Grouping, Key};
use crate::metrics::{fixed_series, limit_names, series_per_group, Families, GroupMetrics};

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

/// A namespace the aggregator has seen: its name (`None`: the exporter's own), whether the
/// first dump (the baseline) was taken and when the last was.
#[derive(Debug, Clone, Default)]
struct NsState {
    name: Option<String>,
    last_dump: Option<Dur>,
}

/// One dump in progress (see [`Aggregator::begin`]).
#[derive(Debug)]
pub struct Pass {
    ns: u32,
    now: Dur,
    baseline: bool,
    /// Connections already followed that this dump has shown so far.
    shown: usize,
    /// Connections it began to follow (new, or back from the missing).
    added: usize,
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
    /// Namespaces by the number their connections' keys carry (a handful: looked up by name
    /// once a dump and once a destroy event).
    ns: Vec<NsState>,
    pub(crate) conns: Followed,
    /// Connections missing from their namespace's last dump, waiting one poll for their
    /// destroy event.
    missing: KeyMap<Conn>,
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
            ns: Vec::new(),
            conns: Followed::default(),
            missing: KeyMap::default(),
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

    /// The number of namespace `netns`, if it was seen.
    pub(crate) fn ns_number(&self, netns: Option<&str>) -> Option<u32> {
        self.ns
            .iter()
            .position(|n| n.name.as_deref() == netns)
            .map(|i| i as u32)
    }

    /// The number of namespace `netns`, given one the first time it is seen.
    fn ns_id(&mut self, netns: Option<&str>) -> u32 {
        self.ns_number(netns).unwrap_or_else(|| {
            self.ns.push(NsState {
                name: netns.map(str::to_string),
                last_dump: None,
            });
            (self.ns.len() - 1) as u32
        })
    }

    /// The name of namespace number `ns` (`None`: the exporter's own).
    pub(crate) fn ns_name(&self, ns: u32) -> Option<&str> {
        self.ns.get(ns as usize).and_then(|n| n.name.as_deref())
    }

    /// The group of a connection of namespace number `ns`, admitting it while there is room;
    /// a connection whose group does not fit is folded into `other` (counted when
    /// `count_overflow`).
    fn group_of(&mut self, ns: u32, s: &DiagSocket, count_overflow: bool) -> usize {
        let name = self.cfg.grouping.group(&Key {
            local: s.src,
            remote: s.dst,
            congestion: s.congestion.as_ref().map(|c| c.as_str()),
            netns: self.ns_name(ns),
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

    /// One whole dump of `netns` taken at `now`: [`Aggregator::begin`], each socket, then
    /// [`Aggregator::end`].
    pub fn dump(
        &mut self,
        netns: Option<&str>,
        socks: impl IntoIterator<Item = DiagSocket>,
        now: Dur,
    ) {
        let mut pass = self.begin(netns, now);
        for s in socks {
            self.socket(&mut pass, s);
        }
        self.end(pass);
    }

    /// Starts a dump of `netns` taken at `now`. Its sockets are handed over one at a time as
    /// the kernel gives them (the poller holds the lock for a few dozen at a time, so a scrape
    /// never waits for a whole dump); a dump that fails part way is simply not ended.
    pub fn begin(&mut self, netns: Option<&str>, now: Dur) -> Pass {
        let ns = self.ns_id(netns);
        Pass {
            ns,
            now,
            baseline: self.ns[ns as usize].last_dump.is_none(),
            shown: 0,
            added: 0,
        }
    }

    /// One socket of the dump `pass` (consumed: its `tcp_info` moves into the state kept per
    /// cookie).
    pub fn socket(&mut self, pass: &mut Pass, mut s: DiagSocket) {
        let unconnected = s.dst.port() == 0 && s.dst.ip().is_unspecified();
        if unconnected {
            return;
        }
        self.seen += 1;
        let Some(info) = s.info.take() else {
            let g = self.group_of(pass.ns, &s, false);
            *self.stateless.entry((g, s.state)).or_default() += 1;
            return;
        };
        let now = pass.now;
        let key = ConnKey {
            ns: pass.ns,
            cookie: s.cookie,
        };
        let cur = Sample {
            at_s: now,
            info,
            skmem: s.skmem,
        };
        let (groups, ctx) = (&self.groups, &self.cfg.ctx);
        let mut cur = Some(cur);
        let followed = self.conns.update(&key, |c| {
            // Followed since an earlier poll: the difference. (A socket a dump repeats is
            // shown once: its second interval is empty.)
            let Some(cur) = cur.take() else { return false };
            let first = c.last.at_s < now;
            let wall = Dur::from_nanos(now.nanos().saturating_sub(c.last.at_s.nanos()));
            let d = between(Some(&c.last), &cur, Some(wall), ctx, c.cpu.as_slice());
            add(&groups[c.group], &d, &cur);
            c.took(&d, s.state, cur);
            first
        });
        if let Some(first) = followed {
            pass.shown += usize::from(first);
            return;
        }
        let Some(cur) = cur else { return };
        self.follow(pass, key, &s, cur);
    }

    /// A socket the dump shows that is not followed yet: new, or back from the missing.
    fn follow(&mut self, pass: &mut Pass, key: ConnKey, s: &DiagSocket, cur: Sample) {
        let (mut c, from) = match self.missing.remove(&key) {
            Some(c) => {
                let from = (*c.last).clone();
                (c, Some(from))
            }
            None => {
                let group = self.group_of(pass.ns, s, true);
                if !pass.baseline {
                    self.groups[group].opened.inc();
                }
                let c = Conn {
                    group,
                    local: s.src,
                    remote: s.dst,
                    state: s.state,
                    inode: s.inode,
                    cpu: None,
                    last: Box::new(cur.clone()),
                    seconds: [0.0; CLASSES],
                    current: None,
                };
                (c, None)
            }
        };
        // A new connection (after the baseline) contributes its whole life so far; one back
        // from the missing, the difference; the baseline nothing.
        if !pass.baseline || from.is_some() {
            let w = from
                .as_ref()
                .map(|f| Dur::from_nanos(pass.now.nanos().saturating_sub(f.at_s.nanos())));
            let d = between(from.as_ref(), &cur, w, &self.cfg.ctx, c.cpu.as_slice());
            add(&self.groups[c.group], &d, &cur);
            c.took(&d, s.state, cur);
        }
        self.conns.insert(key, c);
        pass.added += 1;
    }

    /// Ends the dump `pass`: connections of its namespace it did not show are missing (their
    /// destroy event is due); those missing since the dump before lost theirs.
    pub fn end(&mut self, pass: Pass) {
        let lost: Vec<_> = self
            .missing
            .keys()
            .filter(|k| k.ns == pass.ns)
            .copied()
            .collect();
        for k in lost {
            if let Some(c) = self.missing.remove(&k) {
                self.families.health.destroy_dropped.inc();
                self.groups[c.group].closed.inc();
            }
        }
        // Every connection the dump showed has its last sample from `now`; when it showed all
        // that were followed before it (the usual poll), none is looked at again.
        let before = self.conns.in_ns(pass.ns).saturating_sub(pass.added);
        if pass.shown < before {
            for k in self.conns.older_in(pass.ns, pass.now) {
                if let Some(c) = self.conns.remove(&k) {
                    self.missing.insert(k, c);
                }
            }
        }
        self.ns[pass.ns as usize].last_dump = Some(pass.now);
    }

    /// A destroy event from `netns`, received at `now`: the connection's final counters.
    pub fn destroyed(&mut self, netns: Option<&str>, s: &DiagSocket, now: Dur) {
        let unconnected = s.dst.port() == 0 && s.dst.ip().is_unspecified();
        let Some(info) = s.info.clone().filter(|_| !unconnected) else {
            return;
        };
        let ns = self.ns_id(netns);
        let key = ConnKey {
            ns,
            cookie: s.cookie,
        };
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
            Some(c) => (c.group, Some(*c.last), c.cpu),
            None => {
                // Before the namespace's first dump, a connection may predate the exporter.
                if self.ns[ns as usize].last_dump.is_none() {
                    return;
                }
                let g = self.group_of(ns, s, true);
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
        // The followed connections' counts are kept as they change; the sockets without
        // tcp_info were counted by this poll's dumps.
        let mut by_state: Vec<[i64; STATES]> = (0..self.groups.len())
            .map(|g| self.conns.by_state(g))
            .collect();
        for ((g, state), n) in self.stateless.drain() {
            by_state[g][usize::from(state) % STATES] += n;
        }
        for (gi, g) in self.groups.iter().enumerate() {
            for (gauge, n) in g.by_limit.iter().zip(self.conns.by_limit(gi)) {
                gauge.set(n);
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
            .iter()
            .map(|(_, c)| c)
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
        self.conns.set_cpu(figures);
    }

    /// The scrape body (see [`Families::encode`]).
    pub fn encode(&self, openmetrics: bool) -> String {
        self.families.encode(openmetrics)
    }

    pub(crate) fn context(&self) -> &Context {
        &self.cfg.ctx
    }
}
