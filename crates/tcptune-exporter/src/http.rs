//! The HTTP edge: `/metrics` (text format, or OpenMetrics when the Accept header asks),
//! `/connections?top=K` (JSON) and a small index, behind basic auth when the web
//! configuration has users. One small HTTP/1.1 server (tiny_http) on a listener bound here, so
//! a port in use is one clear sentence before anything is served.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tiny_http::{Header, Method, Request, Response, Server};

use crate::agg::Aggregator;
use crate::metrics::{wants_openmetrics, OPENMETRICS_TYPE, TEXT_TYPE};
use crate::webconfig::WebConfig;

/// Why the listener could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on {0}: the port is in use; pick another with --listen ADDR:PORT")]
    InUse(SocketAddr),
    #[error("cannot listen on {0}: the address is not one of this host's; use 127.0.0.1:PORT or an address `ip -br addr` lists")]
    NotHere(SocketAddr),
    #[error("cannot listen on {0}: {1}")]
    Other(SocketAddr, io::Error),
}

/// Binds the listener.
pub fn bind(addr: SocketAddr) -> Result<TcpListener, ListenError> {
    TcpListener::bind(addr).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => ListenError::InUse(addr),
        io::ErrorKind::AddrNotAvailable => ListenError::NotHere(addr),
        _ => ListenError::Other(addr, e),
    })
}

/// What the request handlers share.
pub struct Shared {
    pub agg: Arc<Mutex<Aggregator>>,
    pub web: WebConfig,
}

/// The server while it runs.
pub struct Serving {
    server: Arc<Server>,
    workers: Vec<JoinHandle<()>>,
    pub addr: SocketAddr,
}

/// The most connections `/connections` lists.
pub const MAX_TOP: usize = 1000;

/// Serves on `listener` with `threads` request handlers.
pub fn serve(listener: TcpListener, shared: Arc<Shared>, threads: usize) -> io::Result<Serving> {
    let addr = listener.local_addr()?;
    let server = Server::from_listener(listener, None).map_err(io::Error::other)?;
    let server = Arc::new(server);
    let workers = (0..threads.max(1))
        .map(|_| {
            let (server, shared) = (server.clone(), shared.clone());
            std::thread::spawn(move || {
                // recv fails only once the server is unblocked (shut down).
                while let Ok(req) = server.recv() {
                    handle(req, &shared);
                }
            })
        })
        .collect();
    Ok(Serving {
        server,
        workers,
        addr,
    })
}

impl Serving {
    /// Stops serving and waits for the handlers.
    pub fn stop(self) {
        self.server.unblock();
        for _ in 1..self.workers.len() {
            self.server.unblock();
        }
        for w in self.workers {
            let _ = w.join();
        }
    }
}

fn header(name: &str, value: &str) -> Header {
    // Names and values here are ASCII constants or formatted numbers.
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .unwrap_or_else(|_| Header::from_bytes("X-Invalid", "1").expect("ASCII header"))
}

fn text(code: u16, body: String) -> Response<io::Cursor<Vec<u8>>> {
    Response::from_string(body)
        .with_status_code(code)
        .with_header(header("Content-Type", "text/plain; charset=utf-8"))
}

/// The `top` query parameter: 10 when absent.
fn top_param(url: &str) -> Result<usize, String> {
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    for pair in query.split('&') {
        if let Some(v) = pair.strip_prefix("top=") {
            return match v.parse::<usize>() {
                Ok(k) if (1..=MAX_TOP).contains(&k) => Ok(k),
                _ => Err(format!(
                    "top={v} is not a number from 1 to {MAX_TOP}; ask e.g. /connections?top=10\n"
                )),
            };
        }
    }
    Ok(10)
}

fn handle(req: Request, shared: &Shared) {
    let get = |name: &'static str| {
        req.headers()
            .iter()
            .find(|h| h.field.equiv(name))
            .map(|h| h.value.as_str().to_string())
    };
    if !matches!(req.method(), Method::Get | Method::Head) {
        let _ = req.respond(text(405, "only GET is served\n".into()));
        return;
    }
    if !shared.web.allows(get("Authorization").as_deref()) {
        let resp = text(401, "authentication required\n".into()).with_header(header(
            "WWW-Authenticate",
            "Basic realm=\"tcptune exporter\"",
        ));
        let _ = req.respond(resp);
        return;
    }
    let path = req.url().split('?').next().unwrap_or("").to_string();
    let resp = match path.as_str() {
        "/metrics" => {
            let om = wants_openmetrics(get("Accept").as_deref());
            let body = match shared.agg.lock() {
                Ok(a) => a.encode(om),
                Err(_) => return,
            };
            let ty = if om { OPENMETRICS_TYPE } else { TEXT_TYPE };
            Response::from_string(body).with_header(header("Content-Type", ty))
        }
        "/connections" => match top_param(req.url()) {
            Ok(k) => {
                let report = match shared.agg.lock() {
                    Ok(a) => a.top(k),
                    Err(_) => return,
                };
                let body = serde_json::to_string_pretty(&report).unwrap_or_default() + "\n";
                Response::from_string(body).with_header(header("Content-Type", "application/json"))
            }
            Err(why) => text(400, why),
        },
        "/" => text(
            200,
            "tcptune exporter\n/metrics: what limits this host's TCP connections, per group\n/connections?top=10: the connections that lost the most time to a fixable limit, with the diagnosis\n".into(),
        ),
        _ => text(404, format!("no page {path}; try /metrics or /connections\n")),
    };
    let _ = req.respond(resp);
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

    #[test]
    fn a_port_in_use_is_one_sentence() {
        let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        let e = bind(addr).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot listen on {addr}: the port is in use; pick another with --listen ADDR:PORT"
            )
        );
    }
}
