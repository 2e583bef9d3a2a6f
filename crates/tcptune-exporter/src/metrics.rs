//! The exporter's metrics: their names, help, buckets and labels in one place, registered with
//! the Prometheus project's Rust client, and the scrape body in OpenMetrics or in the classic
//! text format (0.0.4).
//!
//! Each group's series are made once, when the group is admitted, and updated through cloned
//! handles (the client's metrics are shared atomics), so a poll updates counters without
//! looking labels up and a scrape's size depends on the number of groups only.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tcptune_diagnose::Limit;

/// Label sets.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabel {
    /// The group's name (`group="…"`).
    pub group: String,
}

/// Labels of the per-limit families: the group and a limit class.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// The group's name.
    pub group: String,
    /// A limit class of the diagnosis engine, e.g. `receiver_window`.
    pub limit: String,
}

/// Labels of `tcptune_connections`: the group and a TCP state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// The group's name.
    pub group: String,
    /// The TCP state's name, e.g. `established`.
    pub state: String,
}

type Seconds = Counter<f64, AtomicU64>;
type HistFamily = Family<GroupLabel, Histogram, fn() -> Histogram>;

/// RTT and RTT inflation: 25 µs to ~3.3 s, doubling.
fn rtt_buckets() -> Histogram {
    Histogram::new(exponential_buckets(25e-6, 2.0, 18))
}
/// Delivery rate: 1 kB/s to ~4 GB/s (34 Gbit/s), ×4.
fn rate_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1e3, 4.0, 12))
}
/// Poll duration: 100 µs to ~6.6 s, doubling.
fn poll_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1e-4, 2.0, 17))
}
const RTT_BUCKETS: usize = 18;
const RATE_BUCKETS: usize = 12;
const POLL_BUCKETS: usize = 17;
/// TCP states a group's connection gauge can show (every state but LISTEN).
pub const STATES: usize = 11;

/// The engine's classes as label values: its own JSON names (`receiver_window`, …).
pub fn limit_names() -> Vec<String> {
    Limit::ALL
        .iter()
        .map(|l| {
            serde_json::to_value(l)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{l:?}"))
        })
        .collect()
}

/// Series one group adds to a scrape (the same for every group).
pub fn series_per_group() -> usize {
    let classes = Limit::ALL.len();
    // Seconds and current connections per class; delivered, retransmitted, RTOs, opened,
    // closed; connections per state; three histograms (buckets, +Inf, sum, count).
    2 * classes + 5 + STATES + 2 * (RTT_BUCKETS + 3) + (RATE_BUCKETS + 3)
}

/// Series that do not depend on the groups (the exporter's own health).
pub fn fixed_series() -> usize {
    POLL_BUCKETS + 3 + 6
}

/// Every family, registered once.
pub struct Families {
    /// Where every family is registered; a scrape encodes it.
    pub registry: Registry,
    limit_seconds: Family<LimitLabels, Seconds>,
    delivered: Family<GroupLabel, Counter>,
    retransmitted: Family<GroupLabel, Counter>,
    rto: Family<GroupLabel, Counter>,
    opened: Family<GroupLabel, Counter>,
    closed: Family<GroupLabel, Counter>,
    by_state: Family<StateLabels, Gauge>,
    by_limit: Family<LimitLabels, Gauge>,
    rtt: HistFamily,
    inflation: HistFamily,
    rate: HistFamily,
    /// The exporter's own health series.
    pub health: Health,
}

/// The exporter's own health.
#[derive(Clone)]
pub struct Health {
    /// `tcptune_exporter_poll_duration_seconds`: time one poll took.
    pub poll_seconds: Histogram,
    /// `tcptune_exporter_sockets`: sockets seen in the last poll.
    pub sockets: Gauge,
    /// `tcptune_exporter_groups`: groups admitted, the overflow group not included.
    pub groups: Gauge,
    /// `tcptune_exporter_overflow_connections`: connections counted in `other` for lack of series.
    pub overflow: Counter,
    /// `tcptune_exporter_destroy_events_dropped`: connections gone without a destroy event.
    pub destroy_dropped: Counter,
    /// `tcptune_exporter_dump_errors`: sock_diag dumps that failed.
    pub dump_errors: Counter,
    /// `tcptune_exporter_polls`: polls done.
    pub polls: Counter,
}

/// One group's handles.
#[derive(Clone)]
pub struct GroupMetrics {
    /// `tcptune_limit_seconds`, one per limit class in [`limit_names`] order.
    pub limit_seconds: Vec<Seconds>,
    /// `tcptune_delivered_bytes`.
    pub delivered: Counter,
    /// `tcptune_retransmitted_bytes`.
    pub retransmitted: Counter,
    /// `tcptune_rto_events`.
    pub rto: Counter,
    /// `tcptune_connections_opened`.
    pub opened: Counter,
    /// `tcptune_connections_closed`.
    pub closed: Counter,
    /// `tcptune_connections_limited`, one per limit class in [`limit_names`] order.
    pub by_limit: Vec<Gauge>,
    /// `tcptune_rtt_seconds`.
    pub rtt: Histogram,
    /// `tcptune_rtt_inflation_seconds`: smoothed minus minimum RTT.
    pub inflation: Histogram,
    /// `tcptune_delivery_rate_bytes_per_second`.
    pub rate: Histogram,
    /// Connections-by-state gauges the group has shown, by state number.
    pub states: Vec<(u8, Gauge)>,
    name: String,
}

impl GroupMetrics {
    /// The group's name, as its `group` label shows it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Families {
    /// Every family registered, with no groups yet.
    pub fn new() -> Families {
        let mut r = Registry::default();
        let f = Families {
            limit_seconds: Family::default(),
            delivered: Family::default(),
            retransmitted: Family::default(),
            rto: Family::default(),
            opened: Family::default(),
            closed: Family::default(),
            by_state: Family::default(),
            by_limit: Family::default(),
            rtt: Family::new_with_constructor(rtt_buckets as fn() -> Histogram),
            inflation: Family::new_with_constructor(rtt_buckets as fn() -> Histogram),
            rate: Family::new_with_constructor(rate_buckets as fn() -> Histogram),
            health: Health {
                poll_seconds: poll_buckets(),
                sockets: Gauge::default(),
                groups: Gauge::default(),
                overflow: Counter::default(),
                destroy_dropped: Counter::default(),
                dump_errors: Counter::default(),
                polls: Counter::default(),
            },
            registry: Registry::default(),
        };
        r.register("tcptune_limit_seconds", "Time connections spent under each limit class of tcptune's diagnosis engine (busy time split by the kernel's chronographs, the rest of busy time classified by the engine, idle time as application or idle)", f.limit_seconds.clone());
        r.register(
            "tcptune_delivered_bytes",
            "Bytes the peers acknowledged (tcpi_bytes_acked)",
            f.delivered.clone(),
        );
        r.register(
            "tcptune_retransmitted_bytes",
            "Bytes retransmitted (tcpi_bytes_retrans)",
            f.retransmitted.clone(),
        );
        r.register(
            "tcptune_rto_events",
            "Retransmission timeouts (tcpi_total_rto, Linux 6.7 and later)",
            f.rto.clone(),
        );
        r.register(
            "tcptune_connections_opened",
            "Connections first seen since the exporter started (in a dump or by their destroy event)",
            f.opened.clone(),
        );
        r.register(
            "tcptune_connections_closed",
            "Connections closed since the exporter started",
            f.closed.clone(),
        );
        r.register(
            "tcptune_connections",
            "Connections now, by TCP state",
            f.by_state.clone(),
        );
        r.register(
            "tcptune_connections_limited",
            "Connections now, by the limit class of their last interval",
            f.by_limit.clone(),
        );
        r.register(
            "tcptune_rtt_seconds",
            "Smoothed RTT of connections that delivered data in a poll interval",
            f.rtt.clone(),
        );
        r.register(
            "tcptune_rtt_inflation_seconds",
            "Smoothed RTT minus minimum RTT (the queue) of connections that delivered data in a poll interval",
            f.inflation.clone(),
        );
        r.register(
            "tcptune_delivery_rate_bytes_per_second",
            "Delivery-rate samples that were not application-limited",
            f.rate.clone(),
        );
        let h = &f.health;
        r.register(
            "tcptune_exporter_poll_duration_seconds",
            "Time one poll (dumps of every namespace) took",
            h.poll_seconds.clone(),
        );
        r.register(
            "tcptune_exporter_sockets",
            "Sockets seen in the last poll",
            h.sockets.clone(),
        );
        r.register(
            "tcptune_exporter_groups",
            "Groups admitted (the overflow group not included)",
            h.groups.clone(),
        );
        r.register(
            "tcptune_exporter_overflow_connections",
            "Connections counted in group=\"other\" because --max-series admitted no more groups",
            h.overflow.clone(),
        );
        r.register(
            "tcptune_exporter_destroy_events_dropped",
            "Connections that disappeared without a destroy event (their last interval is lost)",
            h.destroy_dropped.clone(),
        );
        r.register(
            "tcptune_exporter_dump_errors",
            "sock_diag dumps that failed",
            h.dump_errors.clone(),
        );
        r.register("tcptune_exporter_polls", "Polls done", h.polls.clone());
        Families { registry: r, ..f }
    }

    /// Makes (or finds) a group's series and returns their handles.
    pub fn group(&self, name: &str, limits: &[String]) -> GroupMetrics {
        let g = GroupLabel {
            group: name.to_string(),
        };
        let ll = |l: &String| LimitLabels {
            group: name.to_string(),
            limit: l.clone(),
        };
        GroupMetrics {
            limit_seconds: limits
                .iter()
                .map(|l| self.limit_seconds.get_or_create_owned(&ll(l)))
                .collect(),
            delivered: self.delivered.get_or_create_owned(&g),
            retransmitted: self.retransmitted.get_or_create_owned(&g),
            rto: self.rto.get_or_create_owned(&g),
            opened: self.opened.get_or_create_owned(&g),
            closed: self.closed.get_or_create_owned(&g),
            by_limit: limits
                .iter()
                .map(|l| self.by_limit.get_or_create_owned(&ll(l)))
                .collect(),
            rtt: self.rtt.get_or_create_owned(&g),
            inflation: self.inflation.get_or_create_owned(&g),
            rate: self.rate.get_or_create_owned(&g),
            states: Vec::new(),
            name: name.to_string(),
        }
    }

    /// The gauge of a group's connections in `state`.
    pub fn state_gauge(&self, g: &GroupMetrics, state: &str) -> Gauge {
        self.by_state.get_or_create_owned(&StateLabels {
            group: g.name.clone(),
            state: state.to_string(),
        })
    }

    /// The scrape body: OpenMetrics 1.0 when `openmetrics`, else the text format 0.0.4.
    pub fn encode(&self, openmetrics: bool) -> String {
        let mut om = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut om, &self.registry);
        if openmetrics {
            om
        } else {
            to_text_format(&om)
        }
    }
}

impl Default for Families {
    fn default() -> Self {
        Families::new()
    }
}

/// Content types of the two formats.
pub const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The classic Prometheus text format's (0.0.4).
pub const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether an Accept header asks for OpenMetrics (as Prometheus's scrape header does first).
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|part| {
            let mut it = part.split(';');
            let ty = it.next().unwrap_or("").trim();
            let q_zero = it.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    == Some(0.0)
            });
            ty.eq_ignore_ascii_case("application/openmetrics-text") && !q_zero
        })
    })
}

/// OpenMetrics as the client writes it, rewritten to the text format 0.0.4: counters' HELP and
/// TYPE name the `_total` series, and `# UNIT` and `# EOF` go (the sample lines are the same).
pub fn to_text_format(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut help: Option<&str> = None;
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let suffix = if ty == "counter" { "_total" } else { "" };
            if let Some(h) = help.take() {
                let text = h.split_once(' ').map(|(_, t)| t).unwrap_or("");
                out.push_str(&format!("# HELP {name}{suffix} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name}{suffix} {ty}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_format_names_counters_by_their_series() {
        let f = Families::new();
        let g = f.group("web", &limit_names());
        g.delivered.inc_by(1234);
        g.limit_seconds[0].inc_by(1.5);
        let text = f.encode(false);
        assert!(text.contains("# TYPE tcptune_delivered_bytes_total counter\n"));
        assert!(text.contains("tcptune_delivered_bytes_total{group=\"web\"} 1234\n"));
        assert!(text.contains(
            "tcptune_limit_seconds_total{group=\"web\",limit=\"receiver_window\"} 1.5\n"
        ));
        assert!(!text.contains("# EOF"));
        let om = f.encode(true);
        assert!(om.contains("# TYPE tcptune_delivered_bytes counter\n"));
        assert!(om.ends_with("# EOF\n"));
    }

    #[test]
    fn the_series_count_is_what_a_group_adds() {
        let f = Families::new();
        let names = limit_names();
        let samples = |t: &str| t.lines().filter(|l| !l.starts_with('#')).count();
        let before = samples(&f.encode(false));
        let g = f.group("a", &names);
        for s in 0..STATES {
            f.state_gauge(&g, &format!("s{s}"));
        }
        let after = samples(&f.encode(false));
        assert_eq!(after - before, series_per_group());
        assert_eq!(before, fixed_series());
    }

    #[test]
    fn accept_header_chooses_the_format() {
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        )));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
        assert!(!wants_openmetrics(None));
    }
}
