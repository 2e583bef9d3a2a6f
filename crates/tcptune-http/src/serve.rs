//! Serving: a few threads take tiny_http requests off one listener, check access (the web
//! configuration's basic auth) and pass the rest to the caller's [`Handler`], which sees the
//! request and answers a [`Reply`] without knowing the transport (plain TCP, or TLS bridged in
//! by [`crate::bridge`]). Small helpers build the usual replies.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Header, Request, Response, ResponseBox, Server};

use crate::webconfig::WebConfig;

/// What a handler answers: any tiny_http response, boxed (a body may be a stream).
pub type Reply = ResponseBox;

/// Answers requests that passed the access check.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: &Request) -> Reply;
}

impl<F: Fn(&Request) -> Reply + Send + Sync + 'static> Handler for F {
    fn handle(&self, req: &Request) -> Reply {
        self(req)
    }
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct Options {
    /// Request-handling threads (at least one). Each request holds one while its handler runs
    /// and its body is written, so a streaming page needs one of its own.
    pub threads: usize,
    /// The realm a 401 names (the browser shows it when asking for a password).
    pub realm: String,
}

/// The server while it runs.
pub struct Serving {
    server: Arc<Server>,
    workers: Vec<JoinHandle<()>>,
    bridge: Option<crate::bridge::Bridge>,
    /// The address it listens on (the port the system chose for port 0).
    pub addr: SocketAddr,
    /// Whether it speaks TLS (then `https://` URLs).
    pub tls: bool,
}

/// A header; names and values that are not valid header text become `X-Invalid: 1` (callers
/// pass ASCII constants and formatted numbers).
pub fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .unwrap_or_else(|_| Header::from_bytes("X-Invalid", "1").expect("ASCII header"))
}

/// A body with its content type and status.
pub fn body(code: u16, content_type: &str, bytes: Vec<u8>) -> Reply {
    Response::from_data(bytes)
        .with_status_code(code)
        .with_header(header("Content-Type", content_type))
        .boxed()
}

/// A plain-text reply.
pub fn text(code: u16, body: impl Into<String>) -> Reply {
    self::body(code, "text/plain; charset=utf-8", body.into().into_bytes())
}

/// A request header's value (the first of that name, case-insensitive).
pub fn request_header<'r>(req: &'r Request, name: &str) -> Option<&'r str> {
    req.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// A query parameter's raw value (`None` when absent; not percent-decoded).
pub fn query<'u>(url: &'u str, name: &str) -> Option<&'u str> {
    let query = url.split_once('?').map(|(_, q)| q)?;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then_some(v)
    })
}

/// The URL's path, without its query.
pub fn path(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or("")
}

fn answer(req: Request, web: &WebConfig, realm: &str, handler: &dyn Handler) {
    let resp = if web.allows(request_header(&req, "Authorization")) {
        handler.handle(&req)
    } else {
        text(401, "authentication required\n").with_header(header(
            "WWW-Authenticate",
            &format!("Basic realm=\"{realm}\""),
        ))
    };
    let _ = req.respond(web.with_headers(resp));
}

/// Serves on `listener` (made by [`crate::bind`]): TLS when the web configuration has it,
/// basic auth when it has users, the rest to `handler`.
pub fn serve(
    listener: TcpListener,
    web: WebConfig,
    handler: impl Handler,
    opts: Options,
) -> io::Result<Serving> {
    let addr = listener.local_addr()?;
    let (server, bridge) = match web.tls_config() {
        Some(tls) => {
            let (inner, bridge) = crate::bridge::Bridge::start(listener, tls)?;
            (Server::from_listener(inner, None), Some(bridge))
        }
        None => (Server::from_listener(listener, None), None),
    };
    let server = Arc::new(server.map_err(io::Error::other)?);
    let shared = Arc::new((web, handler, opts.realm));
    let workers = (0..opts.threads.max(1))
        .map(|_| {
            let (server, shared) = (server.clone(), shared.clone());
            std::thread::spawn(move || {
                // recv fails only once the server is unblocked (shut down).
                while let Ok(req) = server.recv() {
                    answer(req, &shared.0, &shared.2, &shared.1);
                }
            })
        })
        .collect();
    Ok(Serving {
        server,
        workers,
        tls: bridge.is_some(),
        bridge,
        addr,
    })
}

impl Serving {
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

    /// The base URL (`http://ADDR` or `https://ADDR`).
    pub fn url(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.addr
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    #[test]
    fn query_and_path_are_split() {
        assert_eq!(query("/c", "top"), None);
        assert_eq!(query("/c?top=3", "top"), Some("3"));
        assert_eq!(query("/c?x=1&top=1000", "top"), Some("1000"));
        assert_eq!(query("/c?top", "top"), Some(""));
        assert_eq!(path("/c?top=3"), "/c");
        assert_eq!(path("/"), "/");
    }

    fn get(addr: SocketAddr, path: &str, auth: Option<&str>) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        let auth = auth
            .map(|a| format!("Authorization: Basic {a}\r\n"))
            .unwrap_or_default();
        write!(s, "GET {path} HTTP/1.0\r\nHost: t\r\n{auth}\r\n").unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        resp
    }

    #[test]
    fn the_handler_sees_only_requests_that_passed_the_access_check() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let web = WebConfig::parse(&format!("basic_auth_users:\n  alice: '{hash}'\n")).unwrap();
        let l = crate::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let handler = |req: &Request| text(200, format!("hello {}\n", path(req.url())));
        let opts = Options {
            threads: 2,
            realm: "test realm".into(),
        };
        let s = serve(l, web, handler, opts).unwrap();
        assert!(s.url().starts_with("http://127.0.0.1:"));
        let denied = get(s.addr, "/x", None);
        assert!(denied.starts_with("HTTP/1.0 401"), "{denied}");
        assert!(
            denied.contains("WWW-Authenticate: Basic realm=\"test realm\""),
            "{denied}"
        );
        assert!(!denied.contains("hello"), "{denied}");
        // "alice:s3cret"
        let ok = get(s.addr, "/x?y=1", Some("YWxpY2U6czNjcmV0"));
        assert!(ok.starts_with("HTTP/1.0 200"), "{ok}");
        assert!(ok.ends_with("hello /x\n"), "{ok}");
        s.stop();
    }
}
