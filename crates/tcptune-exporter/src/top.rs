//! `/connections?top=K`: the connections that lost the most time to a limit a setting can fix
//! (the receiver's window, the send buffer), each with the engine's verdict over its life —
//! the page an operator opens after an alert. Peer addresses live here, never in labels.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_diagnose::{judge, Limit, Verdict};
use tcptune_kernel::tcp_info::state_name;

use crate::agg::Aggregator;
use crate::delta::index;
use crate::metrics::limit_names;

/// The limit classes counted as fixable by a setting.
pub const FIXABLE: [Limit; 2] = [Limit::ReceiverWindow, Limit::SendBuffer];

/// What `/connections` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Connections {
    /// Connections the exporter follows now.
    pub followed: usize,
    /// The `top` connections by fixable time, most first (those with none left out).
    pub connections: Vec<TopConnection>,
}

/// One connection of `/connections`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TopConnection {
    /// Network namespace (none: the exporter's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// The kernel's socket cookie.
    pub cookie: u64,
    /// The metrics group it is counted in.
    pub group: String,
    /// The socket's local address and port.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
    /// The TCP state's name, e.g. `established`.
    pub state: String,
    /// Seconds under receiver-window and send-buffer limits since the exporter followed it.
    pub fixable_s: f64,
    /// Seconds in each limit class since the exporter followed it (classes with none left out).
    pub limit_s: BTreeMap<String, f64>,
    /// The engine's verdict over the connection's life.
    pub verdict: Verdict,
}

impl Aggregator {
    /// The `top` connections that lost the most time to a fixable limit.
    pub fn top(&self, top: usize) -> Connections {
        let fixable = |s: &[f64]| FIXABLE.iter().map(|&l| s[index(l)]).sum::<f64>();
        let mut ranked: Vec<_> = self
            .conns
            .iter()
            .map(|(k, c)| (fixable(&c.seconds), k, c))
            .filter(|(f, _, _)| *f > 0.0)
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cookie.cmp(&b.1.cookie)));
        ranked.truncate(top);
        let names = limit_names();
        Connections {
            followed: self.conns.len(),
            connections: ranked
                .into_iter()
                .map(|(f, k, c)| TopConnection {
                    netns: self.ns_name(k.ns).map(str::to_string),
                    cookie: k.cookie,
                    group: self.group_name(c.group).to_string(),
                    local: c.local,
                    remote: c.remote,
                    state: state_name(c.state).to_string(),
                    fixable_s: f,
                    limit_s: names
                        .iter()
                        .zip(c.seconds)
                        .filter(|(_, s)| *s > 0.0)
                        .map(|(n, s)| (n.clone(), s))
                        .collect(),
                    verdict: judge(None, &c.last, self.context(), c.cpu.as_slice()),
                })
                .collect(),
        }
    }
}
