//! The HTTP edge: the page and its embedded assets, `/api/connections?filter=EXPR` (the table,
//! filtered with `conns`' filter language) and `/api/stream?conn=ID` (Server-Sent Events: the
//! connection's history, then its updates). Read-only: only GET is served, and nothing a
//! request says reaches the host. The listener, the access rules (basic auth from a web
//! configuration file) and the configured headers are `tcptune_http`'s, as for the exporter.
//! The serving loop is this module's: a stream is written on the connection as each message
//! comes (tiny_http would hold a streamed body back in 8 KiB chunks), which `tcptune_http`'s
//! handlers, answering a response, cannot do. TLS is `tcptune_http`'s bridge in front of
//! tiny_http, as for the exporter: it relays each write as it comes, so streams work over it.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use tcptune_http::bridge::Bridge;
use tcptune_http::tiny_http::{Header, Method, Request, Response, Server};

use crate::assets;
use crate::hub::{sse, Hub, Refused};
use crate::update::{Row, Source};

pub use tcptune_http::{bind, exposure_warning, ListenError, WebConfig, WebConfigError};

/// A comment line a stream sends when quiet, so a page that went away is noticed.
const KEEPALIVE: Duration = Duration::from_secs(10);
/// A stream's chunk takes the updates queued behind the first up to about this many bytes.
const BURST_BYTES: usize = 64 * 1024;
/// The longest `for=` a stream honours.
const MAX_FOR_S: f64 = 3600.0;

/// What the request handlers share.
pub struct Shared {
    /// Where updates are published and streams subscribe.
    pub hub: Arc<Hub>,
    /// Access checks and response headers from the web configuration file.
    pub web: WebConfig,
}

/// The server while it runs.
pub struct Serving {
    server: Arc<Server>,
    workers: Vec<JoinHandle<()>>,
    bridge: Option<Bridge>,
    /// The address actually bound (the port chosen when 0 was asked).
    pub addr: SocketAddr,
}

/// Serves on `listener` with `threads` request handlers (each stream gets a thread of its
/// own, at most [`crate::hub::MAX_STREAMS`]).
pub fn serve(listener: TcpListener, shared: Arc<Shared>, threads: usize) -> io::Result<Serving> {
    let addr = listener.local_addr()?;
    let (server, bridge) = match shared.web.tls_config() {
        Some(tls) => {
            let (inner, bridge) = Bridge::start(listener, tls)?;
            (Server::from_listener(inner, None), Some(bridge))
        }
        None => (Server::from_listener(listener, None), None),
    };
    let server = Arc::new(server.map_err(io::Error::other)?);
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
        bridge,
        addr,
    })
}

impl Serving {
    /// The base URL (`http://ADDR` or `https://ADDR`).
    pub fn url(&self) -> String {
        let scheme = if self.bridge.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// Stops serving and waits for the handlers.
    pub fn stop(self) {
        if let Some(b) = self.bridge {
            b.stop();
        }
        for _ in 0..self.workers.len() {
            self.server.unblock();
        }
        for w in self.workers {
            let _ = w.join();
        }
    }
}

fn header(name: &str, value: &str) -> Header {
    // Names and values here are ASCII constants.
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .unwrap_or_else(|_| Header::from_bytes("X-Invalid", "1").expect("ASCII header"))
}

/// Headers every answer carries: nothing from elsewhere runs on the page.
fn guarded<R: io::Read>(r: Response<R>) -> Response<R> {
    r.with_header(header(
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'",
    ))
    .with_header(header("X-Content-Type-Options", "nosniff"))
    .with_header(header("Cache-Control", "no-store"))
}

fn text(code: u16, body: String) -> Response<io::Cursor<Vec<u8>>> {
    guarded(
        Response::from_string(body)
            .with_status_code(code)
            .with_header(header("Content-Type", "text/plain; charset=utf-8")),
    )
}

fn json<T: Serialize>(v: &T) -> Response<io::Cursor<Vec<u8>>> {
    let body = serde_json::to_vec(v).unwrap_or_default();
    guarded(Response::from_data(body).with_header(header("Content-Type", "application/json")))
}

/// `%XX` and `+` decoded (a query value); `None` when the result is not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The value of query parameter `name`, decoded.
pub fn param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| percent_decode(v)).flatten()
    })
}

/// The table, as `/api/connections` answers.
#[derive(Serialize)]
struct Table<'a> {
    source: &'a Source,
    connections: Vec<Row>,
}

fn connections(url: &str, hub: &Hub) -> Response<io::Cursor<Vec<u8>>> {
    let expr = param(url, "filter").unwrap_or_default();
    let filter = match expr.parse::<tcptune_kernel::Filter>() {
        Ok(f) => f,
        Err(e) => return text(400, format!("bad filter '{expr}': {e}\n")),
    };
    hub.with_store(|s| {
        json(&Table {
            source: &s.source,
            connections: s.rows(&filter),
        })
    })
}

fn handle(req: Request, shared: &Arc<Shared>) {
    if req.method() != &Method::Get {
        let _ = req.respond(
            shared.web.with_headers(
                text(
                    405,
                    "only GET is served: this page cannot change the host\n".into(),
                )
                .boxed(),
            ),
        );
        return;
    }
    let auth = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str().to_string());
    if !shared.web.allows(auth.as_deref()) {
        let resp = text(401, "authentication required\n".into())
            .with_header(header("WWW-Authenticate", "Basic realm=\"tcptune watch\""));
        let _ = req.respond(shared.web.with_headers(resp.boxed()));
        return;
    }
    let url = req.url().to_string();
    let path = url.split('?').next().unwrap_or("");
    let resp = match path {
        "/api/connections" => connections(&url, &shared.hub),
        "/api/stream" => {
            let Some(id) = param(&url, "conn") else {
                let _ = req.respond(
                    shared.web.with_headers(
                        text(
                            400,
                            "name the connection: /api/stream?conn=COOKIE (the table's id)\n"
                                .into(),
                        )
                        .boxed(),
                    ),
                );
                return;
            };
            // `for=SECONDS` ends the stream after that long (a page that must finish loading,
            // such as a headless browser's dump, asks for it; a person's page streams on).
            let until = param(&url, "for")
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(|s| Instant::now() + Duration::from_secs_f64(s.min(MAX_FOR_S)));
            match shared.hub.subscribe(&id) {
                Ok((view, rx, token)) => {
                    let hub = shared.hub.clone();
                    // A stream holds its connection open: it gets a thread of its own.
                    std::thread::spawn(move || {
                        // The store's bounds first: the page keeps no more history than the
                        // store does, so its redraws cost the same at the first minute as at
                        // the hundredth.
                        let bounds = hub
                            .with_store(|s| serde_json::to_string(s.bounds()))
                            .unwrap_or_default();
                        let first = sse("bounds", &bounds)
                            + &sse(
                                "snapshot",
                                &serde_json::to_string(&view).unwrap_or_default(),
                            );
                        let _ = stream(req.into_writer(), &first, &rx, until);
                        hub.unsubscribe(token);
                    });
                    return;
                }
                Err(Refused::TooMany) => text(
                    503,
                    "too many pages are streaming; close one and reload\n".into(),
                ),
                Err(Refused::NoSuchConn) => text(
                    404,
                    format!("no connection {id} is shown; pick one from /api/connections\n"),
                ),
            }
        }
        p => match assets::find(p) {
            Some((body, ty)) => {
                guarded(Response::from_data(body.to_vec()).with_header(header("Content-Type", ty)))
            }
            None => text(404, format!("no page {p}\n")),
        },
    };
    let _ = req.respond(shared.web.with_headers(resp.boxed()));
}

/// Writes a Server-Sent Events response by hand (tiny_http would buffer a streamed body in
/// 8 KiB chunks): the head, the first message, then each queued one as it comes, each an HTTP
/// chunk of its own so the browser gets it at once.
fn stream(
    mut w: Box<dyn Write + Send>,
    first: &str,
    rx: &std::sync::mpsc::Receiver<String>,
    until: Option<Instant>,
) -> io::Result<()> {
    let chunk = |w: &mut Box<dyn Write + Send>, data: &[u8]| -> io::Result<()> {
        write!(w, "{:x}\r\n", data.len())?;
        w.write_all(data)?;
        w.write_all(b"\r\n")?;
        w.flush()
    };
    w.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )?;
    chunk(&mut w, first.as_bytes())?;
    loop {
        let wait = match until {
            Some(u) => u.saturating_duration_since(Instant::now()).min(KEEPALIVE),
            None => KEEPALIVE,
        };
        match rx.recv_timeout(wait) {
            Ok(msg) => {
                // What queued meanwhile goes in the same chunk: one write and one flush for
                // a burst of per-ACK updates rather than one each.
                let mut burst = msg;
                while burst.len() < BURST_BYTES {
                    match rx.try_recv() {
                        Ok(more) => burst.push_str(&more),
                        Err(_) => break,
                    }
                }
                chunk(&mut w, burst.as_bytes())?
            }
            Err(RecvTimeoutError::Timeout) if until.is_some_and(|u| Instant::now() >= u) => {
                chunk(&mut w, sse("end", "{}").as_bytes())?;
                break;
            }
            Err(RecvTimeoutError::Timeout) => chunk(&mut w, b": keepalive\n\n")?,
            // Dropped for being slow: end the response; the page reconnects.
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    w.write_all(b"0\r\n\r\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_decoded() {
        assert_eq!(
            param("/api/connections?filter=dport+443", "filter").as_deref(),
            Some("dport 443")
        );
        assert_eq!(
            param("/x?a=1&filter=sport%20%3A5201", "filter").as_deref(),
            Some("sport :5201")
        );
        assert_eq!(param("/x?a=1", "filter"), None);
        assert_eq!(param("/x?filter=%zz", "filter"), None);
        assert_eq!(param("/x?filter=%4", "filter").as_deref(), Some("%4"));
    }
}
