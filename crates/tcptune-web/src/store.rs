//! What the page can ask for: the latest table, and per connection its history rings
//! (polled points, per-ACK points, events), its latest detail and the moments triggers froze
//! it with what led up to them. Filled only by applying [`Update`]s, live or from a recording,
//! so both serve the same answers.

use std::collections::{HashMap, VecDeque};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_kernel::{DiagSocket, Filter};

use crate::ring::Ring;
use crate::update::{AckPoint, Detail, Event, Point, Row, Source, Trigger, Update};

/// Bounds of the history kept (sent to each page before its snapshot, so the page keeps no
/// more than the store does).
#[derive(Debug, Clone, Serialize)]
pub struct Bounds {
    /// Seconds of history per connection.
    pub span_s: f64,
    /// Polled points per connection at most.
    pub points: usize,
    /// Per-ACK points per connection at most.
    pub acks: usize,
    /// Events per connection at most.
    pub events: usize,
    /// Connections with history at most (closed ones are forgotten first).
    pub conns: usize,
    /// Frozen moments kept per connection.
    pub freezes: usize,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            span_s: 300.0,
            points: 3000,
            acks: 20_000,
            events: 1000,
            conns: 128,
            freezes: 4,
        }
    }
}

/// A moment a trigger froze, with the points that led up to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Frozen {
    /// When the trigger fired, seconds since the view started.
    pub t_s: f64,
    /// What fired.
    pub trigger: Trigger,
    /// The polled points up to that moment, oldest first.
    pub points: Vec<Point>,
}

/// Everything kept of one connection: the stream's first message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConnView {
    /// The socket cookie, as a string.
    pub id: String,
    /// The connection's latest table row, while it is in the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<Row>,
    /// Polled points, oldest first.
    pub points: Vec<Point>,
    /// Per-ACK points, oldest first (empty without tracing).
    pub acks: Vec<AckPoint>,
    /// Events, oldest first.
    pub events: Vec<Event>,
    /// The latest diagnosis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Detail>,
    /// The moments triggers froze, oldest first.
    pub frozen: Vec<Frozen>,
    /// When it closed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_s: Option<f64>,
}

struct History {
    points: Ring<Point>,
    acks: Ring<AckPoint>,
    events: Ring<Event>,
    detail: Option<Detail>,
    frozen: VecDeque<Frozen>,
    closed_s: Option<f64>,
    last_s: f64,
}

/// The store.
pub struct Store {
    bounds: Bounds,
    /// Where the data comes from, for the page's banner.
    pub source: Source,
    rows: Vec<Row>,
    conns: HashMap<String, History>,
}

/// A filter's view of a row: the address, port and state conditions `conns` filters by.
fn as_socket(r: &Row) -> DiagSocket {
    DiagSocket::from_addrs(r.state_num, r.local, r.remote)
}

impl Store {
    /// An empty store that keeps at most `bounds` of history.
    pub fn new(bounds: Bounds, source: Source) -> Store {
        Store {
            bounds,
            source,
            rows: Vec::new(),
            conns: HashMap::new(),
        }
    }

    fn history(&mut self, id: &str, t_s: f64) -> &mut History {
        if !self.conns.contains_key(id) && self.conns.len() >= self.bounds.conns {
            self.evict();
        }
        let b = &self.bounds;
        let h = self.conns.entry(id.to_string()).or_insert_with(|| History {
            points: Ring::new(b.span_s, b.points),
            acks: Ring::new(b.span_s, b.acks),
            events: Ring::new(b.span_s, b.events),
            detail: None,
            frozen: VecDeque::new(),
            closed_s: None,
            last_s: t_s,
        });
        h.last_s = h.last_s.max(t_s);
        h
    }

    /// Forgets one connection: the closed one closed longest ago, else the one seen least
    /// recently.
    fn evict(&mut self) {
        let victim = self
            .conns
            .iter()
            .min_by(|a, b| {
                let key = |h: &History| (h.closed_s.is_none(), h.closed_s.unwrap_or(h.last_s));
                let (ka, kb) = (key(a.1), key(b.1));
                ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
            })
            .map(|(k, _)| k.clone());
        if let Some(k) = victim {
            self.conns.remove(&k);
        }
    }

    /// Applies one update.
    pub fn apply(&mut self, u: &Update) {
        match u {
            Update::Rows { rows, .. } => self.rows.clone_from(rows),
            Update::Point { id, point } => self.history(id, point.t_s).points.push(point.clone()),
            Update::Ack { id, ack } => self.history(id, ack.t_s).acks.push(ack.clone()),
            Update::Event { id, event } => self.history(id, event.t_s).events.push(event.clone()),
            Update::Detail { id, detail } => {
                self.history(id, detail.t_s).detail = Some(detail.clone())
            }
            Update::Freeze { id, t_s, trigger } => {
                let keep = self.bounds.freezes;
                let h = self.history(id, *t_s);
                let points = h.points.iter().filter(|p| p.t_s <= *t_s).cloned().collect();
                h.frozen.push_back(Frozen {
                    t_s: *t_s,
                    trigger: *trigger,
                    points,
                });
                while h.frozen.len() > keep {
                    h.frozen.pop_front();
                }
            }
            Update::Closed { id, t_s } => {
                if let Some(h) = self.conns.get_mut(id) {
                    h.closed_s = Some(*t_s);
                }
            }
        }
    }

    /// The table's rows that pass `filter`.
    pub fn rows(&self, filter: &Filter) -> Vec<Row> {
        self.rows
            .iter()
            .filter(|r| filter.matches(&as_socket(r)))
            .cloned()
            .collect()
    }

    /// Everything kept of one connection.
    pub fn view(&self, id: &str) -> Option<ConnView> {
        let h = self.conns.get(id);
        let row = self.rows.iter().find(|r| r.id == id).cloned();
        if h.is_none() && row.is_none() {
            return None;
        }
        Some(ConnView {
            id: id.to_string(),
            row,
            points: h
                .map(|h| h.points.iter().cloned().collect())
                .unwrap_or_default(),
            acks: h
                .map(|h| h.acks.iter().cloned().collect())
                .unwrap_or_default(),
            events: h
                .map(|h| h.events.iter().cloned().collect())
                .unwrap_or_default(),
            detail: h.and_then(|h| h.detail.clone()),
            frozen: h
                .map(|h| h.frozen.iter().cloned().collect())
                .unwrap_or_default(),
            closed_s: h.and_then(|h| h.closed_s),
        })
    }

    /// The bounds of the history kept.
    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    /// How many connections have history (bounded by [`Bounds::conns`]).
    pub fn kept(&self) -> usize {
        self.conns.len()
    }
}
