//! Serving: a few threads take tiny_http requests off one listener, check access (the web
//! configuration's basic auth) and pass the rest to the caller's [`Handler`], which sees the
//! request and answers a [`Reply`] without knowing the transport (plain TCP, or TLS bridged in
//! by [`crate::bridge`]).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Request, Server};

use crate::reload::Access;
use crate::reply::{header, request_header, text, Reply};
use crate::webconfig::WebConfig;

/// Answers requests that passed the access check.
pub trait Handler: Send + Sync + 'static {
    /// The reply to one request; called on a serving thread, so it must not block for long.
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

fn answer(req: Request, access: &Access, realm: &str, handler: &dyn Handler) {
    let web: Arc<WebConfig> = access.current();
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
/// basic auth when it has users, the rest to `handler`. `web` is a [`WebConfig`] fixed at
/// start or a [`crate::WebConfigFile`] re-read when it changes (each request and TLS
/// handshake then uses the configuration in force).
pub fn serve(
    listener: TcpListener,
    web: impl Into<Access>,
    handler: impl Handler,
    opts: Options,
) -> io::Result<Serving> {
    let addr = listener.local_addr()?;
    let web = Arc::new(web.into());
    let (server, bridge) = match web.current().tls_config() {
        Some(first) => {
            let access = web.clone();
            // A reload never turns TLS off (refused), so the fallback is for form's sake.
            let tls = move || {
                access
                    .current()
                    .tls_config()
                    .unwrap_or_else(|| first.clone())
            };
            let (inner, bridge) = crate::bridge::Bridge::start_with(listener, Arc::new(tls))?;
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
    use crate::reply::path;
    use std::io::{Read, Write};
    use std::net::TcpStream;

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
