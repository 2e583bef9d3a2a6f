//! The exporter's pages, served by `tcptune-http` (which binds, checks access and runs the
//! threads): `/metrics` (text format, or OpenMetrics when the Accept header asks),
//! `/connections?top=K` (JSON) and a small index.

use std::sync::{Arc, Mutex};

use tcptune_http::tiny_http::{Method, Request};
use tcptune_http::{body, path, query, request_header, text, Handler, Reply};

use crate::agg::Aggregator;
use crate::metrics::{wants_openmetrics, OPENMETRICS_TYPE, TEXT_TYPE};

/// The most connections `/connections` lists.
pub const MAX_TOP: usize = 1000;

/// The realm a 401 names.
pub const REALM: &str = "tcptune exporter";

/// The pages over the aggregator the poller fills.
pub struct Pages {
    /// The state the poller updates and the pages read.
    pub agg: Arc<Mutex<Aggregator>>,
}

/// The `top` query parameter: 10 when absent.
fn top_param(url: &str) -> Result<usize, String> {
    match query(url, "top") {
        None => Ok(10),
        Some(v) => match v.parse::<usize>() {
            Ok(k) if (1..=MAX_TOP).contains(&k) => Ok(k),
            _ => Err(format!(
                "top={v} is not a number from 1 to {MAX_TOP}; ask e.g. /connections?top=10\n"
            )),
        },
    }
}

const INDEX: &str = "tcptune exporter\n/metrics: what limits this host's TCP connections, per group\n/connections?top=10: the connections that lost the most time to a fixable limit, with the diagnosis\n";

impl Handler for Pages {
    fn handle(&self, req: &Request) -> Reply {
        if !matches!(req.method(), Method::Get | Method::Head) {
            return text(405, "only GET is served\n");
        }
        let Ok(agg) = self.agg.lock() else {
            return text(500, "the exporter's poller failed; restart it\n");
        };
        match path(req.url()) {
            "/metrics" => {
                let om = wants_openmetrics(request_header(req, "Accept"));
                let ty = if om { OPENMETRICS_TYPE } else { TEXT_TYPE };
                body(200, ty, agg.encode(om).into_bytes())
            }
            "/connections" => match top_param(req.url()) {
                Ok(k) => {
                    let report = agg.top(k);
                    drop(agg);
                    let json = serde_json::to_string_pretty(&report).unwrap_or_default() + "\n";
                    body(200, "application/json", json.into_bytes())
                }
                Err(why) => text(400, why),
            },
            "/" => text(200, INDEX),
            p => text(404, format!("no page {p}; try /metrics or /connections\n")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_parameter_is_checked() {
        assert_eq!(top_param("/connections"), Ok(10));
        assert_eq!(top_param("/connections?top=3"), Ok(3));
        assert_eq!(top_param("/connections?x=1&top=1000"), Ok(1000));
        assert!(top_param("/connections?top=0").is_err());
        assert!(top_param("/connections?top=abc").is_err());
    }
}
