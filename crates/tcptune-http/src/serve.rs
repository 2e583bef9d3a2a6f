//! Serving: a few threads take tiny_http requests off one listener, check access (the web
//! configuration's basic auth) and pass the rest to the caller's [`Handler`], which sees the
//! request and answers a [`Reply`] without knowing the transport (plain TCP, or TLS bridged in
//! by [`crate::bridge`]).
//!
//! tiny_http's accepting thread ends at the first error from `accept` (running out of file
//! descriptors, say), or panics when it cannot duplicate an accepted connection's descriptor,
//! and the server would never accept again. A server must stay available, so the thread that
//! receives that error, or a watcher that sees connections wait in the accept queue, starts a
//! new tiny_http server over the same listening socket (a duplicate of its descriptor),
//! retrying until it can, and the serving threads move to it.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsFd;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

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

/// How long to wait before starting tiny_http again after its accepting thread failed (out of
/// descriptors clears when connections close, not at once).
const RESTART_PAUSE: Duration = Duration::from_millis(200);

/// The listening socket tiny_http serves, kept to start it again.
enum Listening {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listening {
    /// A new tiny_http server over a duplicate of the socket.
    fn server(&self) -> io::Result<Server> {
        match self {
            Listening::Tcp(l) => Server::from_listener(l.try_clone()?, None),
            Listening::Unix(l) => Server::from_listener(l.try_clone()?, None),
        }
        .map_err(io::Error::other)
    }
}

/// How often the watcher looks at the accept queue, and how many looks in a row with
/// connections waiting in it mean that nobody accepts them.
const WATCH_EVERY: Duration = Duration::from_millis(500);
/// A serving thread's longest wait for a request before it looks whether to stop or move.
const LOOK_EVERY: Duration = Duration::from_millis(500);
const STUCK_LOOKS: u32 = 3;

/// Connections a failed server accepted before it failed keep sending it their requests (an
/// HTTP/1.1 client reuses its connection): while such a server is kept, the serving threads
/// look at it this often.
const RETIRED_POLL: Duration = Duration::from_millis(100);

/// The tiny_http server in use, the generation it is (counted from 0) and what is needed to
/// replace it.
struct Current {
    listening: Listening,
    server: RwLock<(u64, Arc<Server>)>,
    /// One restart at a time.
    restarting: Mutex<()>,
    /// Servers whose accepting thread ended. Kept, not dropped: their connections may still
    /// send requests, and dropping one over a Unix socket (the TLS bridge's) removes the
    /// socket's file, which the new server still listens on.
    retired: Mutex<Vec<Arc<Server>>>,
    stopping: AtomicBool,
    workers: usize,
    /// Times the accepting thread failed.
    failures: AtomicU64,
}

impl Current {
    fn get(&self) -> (u64, Arc<Server>) {
        let g = self.server.read().unwrap_or_else(|e| e.into_inner());
        (g.0, g.1.clone())
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Replaces generation `seen`, unless another thread already did: retried until a new
    /// server starts or the server is stopping. `wake`: the serving threads waiting on the old
    /// server (all but the caller when a serving thread calls).
    fn restart(&self, seen: u64, wake: usize) {
        let _one = self.restarting.lock().unwrap_or_else(|e| e.into_inner());
        if self.get().0 != seen {
            return;
        }
        let fresh = loop {
            if self.stopping() {
                return;
            }
            std::thread::sleep(RESTART_PAUSE);
            if let Ok(s) = self.listening.server() {
                break Arc::new(s);
            }
        };
        let old = {
            let mut g = self.server.write().unwrap_or_else(|e| e.into_inner());
            std::mem::replace(&mut *g, (seen + 1, fresh.clone())).1
        };
        // The other threads wait on the old server: wake each to move to the new one.
        for _ in 0..wake {
            old.unblock();
        }
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(old);
        // Stopped while this thread started the new server: wake whoever already waits on it.
        if self.stopping() {
            for _ in 0..self.workers {
                fresh.unblock();
            }
        }
    }

    /// Connections waiting in the listening socket's accept queue (TCP: a listening socket's
    /// tcp_info counts them in `unacked`); `None` behind the TLS bridge's Unix socket.
    fn waiting(&self) -> Option<u32> {
        match &self.listening {
            Listening::Tcp(l) => tcptune_kernel::sys::tcp_info_of(l.as_fd()).ok()?.unacked,
            Listening::Unix(_) => None,
        }
    }

    /// The watcher: tiny_http's accepting thread can end by panicking, which sends no error;
    /// connections still waiting in the accept queue at [`STUCK_LOOKS`] looks in a row mean
    /// nobody accepts them, and a new server is started.
    fn watch(&self) {
        let mut stuck = 0;
        while !self.stopping() {
            std::thread::sleep(WATCH_EVERY);
            let (generation, _) = self.get();
            stuck = if self.waiting().unwrap_or(0) > 0 {
                stuck + 1
            } else {
                0
            };
            if stuck >= STUCK_LOOKS {
                self.failures.fetch_add(1, Ordering::SeqCst);
                self.restart(generation, self.workers);
                stuck = 0;
            }
        }
    }

    /// Requests the retired servers' connections sent, answered.
    fn drain_retired(&self, shared: &(Arc<Access>, impl Handler, String)) -> bool {
        let retired: Vec<Arc<Server>> = self
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for old in &retired {
            while let Ok(Some(req)) = old.try_recv() {
                answer(req, &shared.0, &shared.2, &shared.1);
            }
        }
        !retired.is_empty()
    }

    /// One serving thread: requests until the server stops. It never waits longer than
    /// [`LOOK_EVERY`] (or [`RETIRED_POLL`] while a failed server is kept), so it sees a stop or
    /// a new server without being woken for it.
    fn work(&self, shared: &(Arc<Access>, impl Handler, String)) {
        while !self.stopping() {
            let (generation, server) = self.get();
            let wait = if self.drain_retired(shared) {
                RETIRED_POLL
            } else {
                LOOK_EVERY
            };
            match server.recv_timeout(wait) {
                Ok(Some(req)) => answer(req, &shared.0, &shared.2, &shared.1),
                // Nothing yet, or woken.
                Ok(None) => {}
                Err(_) if self.stopping() || self.get().0 != generation => {}
                // The accepting thread failed (its error is what `recv` returned).
                Err(_) => {
                    self.failures.fetch_add(1, Ordering::SeqCst);
                    self.restart(generation, self.workers - 1)
                }
            }
        }
    }
}

/// The server while it runs.
pub struct Serving {
    current: Arc<Current>,
    workers: Vec<JoinHandle<()>>,
    watcher: JoinHandle<()>,
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
    let (listening, bridge) = match web.current().tls_config() {
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
            (Listening::Unix(inner), Some(bridge))
        }
        None => (Listening::Tcp(listener), None),
    };
    let first = Arc::new(listening.server()?);
    let threads = opts.threads.max(1);
    let current = Arc::new(Current {
        listening,
        server: RwLock::new((0, first)),
        restarting: Mutex::new(()),
        retired: Mutex::new(Vec::new()),
        stopping: AtomicBool::new(false),
        workers: threads,
        failures: AtomicU64::new(0),
    });
    let shared = Arc::new((web, handler, opts.realm));
    let workers = (0..threads)
        .map(|_| {
            let (current, shared) = (current.clone(), shared.clone());
            std::thread::spawn(move || current.work(&shared))
        })
        .collect();
    let watcher = {
        let current = current.clone();
        std::thread::spawn(move || current.watch())
    };
    Ok(Serving {
        current,
        workers,
        watcher,
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
        self.current.stopping.store(true, Ordering::SeqCst);
        let (_, server) = self.current.get();
        for _ in 0..self.workers.len() {
            server.unblock();
        }
        for w in self.workers {
            let _ = w.join();
        }
        let _ = self.watcher.join();
    }

    /// Times the accepting thread failed (out of descriptors, say), each followed by a new
    /// server over the same socket.
    pub fn accept_failures(&self) -> u64 {
        self.current.failures.load(Ordering::SeqCst)
    }

    /// Servers started since the first (one per accepting failure, once it could start).
    pub fn restarts(&self) -> u64 {
        self.current.get().0
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
