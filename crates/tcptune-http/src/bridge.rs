//! TLS in front of tiny_http. tiny_http's own TLS (its `ssl-rustls` feature) pins rustls 0.20
//! with fixed defaults, no client certificates and a panic on a bad key, so TLS ends here
//! instead: each connection on the public listener is a rustls session whose plaintext is
//! relayed to tiny_http over a Unix socket in a directory only this user can enter (mode 0700,
//! removed at stop), so nothing reaches the handlers around TLS. A client that speaks plain
//! HTTP to the TLS port gets Go's answer (400, "Client sent an HTTP request to an HTTPS
//! server") and nothing else.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::{ServerConfig, ServerConnection};

/// A client has this long to finish its handshake, and a connection may idle this long
/// (longer than any usual scrape interval) before it is closed.
const HANDSHAKE: Duration = Duration::from_secs(10);
const IDLE: Duration = Duration::from_secs(300);
/// TLS connections served at once (two threads each); more wait in the listen queue.
const MAX_CONNECTIONS: usize = 64;
/// The TLS record type of a handshake: the first byte a TLS client sends.
const HANDSHAKE_RECORD: u8 = 0x16;
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// The TLS side while it runs.
pub struct Bridge {
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    /// Where to connect to wake the accepting thread.
    wake: SocketAddr,
    dir: PathBuf,
}

/// A private directory for the inner socket (created, never reused: no one can plant it).
fn private_dir() -> io::Result<PathBuf> {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let base = std::env::temp_dir();
    loop {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("tcptune-http-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The TLS configuration for the next handshake (the web configuration's, re-read when it
/// changed).
pub type TlsSource = Arc<dyn Fn() -> Arc<ServerConfig> + Send + Sync>;

impl Bridge {
    /// Starts accepting TLS on `public`; returns the inner listener for tiny_http.
    pub fn start(
        public: TcpListener,
        cfg: Arc<ServerConfig>,
    ) -> io::Result<(UnixListener, Bridge)> {
        Bridge::start_with(public, Arc::new(move || cfg.clone()))
    }

    /// [`Bridge::start`] with each handshake's configuration from `cfg`.
    pub fn start_with(public: TcpListener, cfg: TlsSource) -> io::Result<(UnixListener, Bridge)> {
        let dir = private_dir()?;
        let path = dir.join("http.sock");
        let inner = match UnixListener::bind(&path) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        let mut wake = public.local_addr()?;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let stop = stop.clone();
            std::thread::spawn(move || accept_loop(public, cfg, path, &stop))
        };
        Ok((
            inner,
            Bridge {
                stop,
                accept: Some(accept),
                wake,
                dir,
            },
        ))
    }

    /// Stops accepting (connections being served finish on their own).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // accept(2) has no timeout: a connection of our own wakes it to see the flag.
        let _ = TcpStream::connect_timeout(&self.wake, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::fs::remove_file(self.dir.join("http.sock"));
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn accept_loop(public: TcpListener, cfg: TlsSource, inner: PathBuf, stop: &AtomicBool) {
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        let tcp = match public.accept() {
            Ok((tcp, _)) => tcp,
            // Out of descriptors or a connection reset before it was accepted: the listener
            // still works, so wait a little (not a busy loop) and go on.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if stop.load(Ordering::SeqCst) || active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            continue;
        }
        active.fetch_add(1, Ordering::SeqCst);
        // Taken on the relay's thread: a reload's file reads do not hold up accepting.
        let (cfg, inner, active) = (cfg.clone(), inner.clone(), active.clone());
        std::thread::spawn(move || {
            let _ = relay(tcp, cfg(), &inner);
            active.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Whether the client began with something other than a TLS handshake; if it looks like
/// plain HTTP it is told so.
fn plain_http(tcp: &mut TcpStream) -> io::Result<bool> {
    let mut first = [0u8; 1];
    if tcp.peek(&mut first)? == 0 || first[0] == HANDSHAKE_RECORD {
        return Ok(false);
    }
    if first[0].is_ascii_uppercase() {
        tcp.write_all(PLAIN_HTTP_ANSWER)?;
    }
    Ok(true)
}

/// One connection: handshake, then plaintext both ways until either side closes.
fn relay(mut tcp: TcpStream, cfg: Arc<ServerConfig>, inner: &Path) -> io::Result<()> {
    tcp.set_read_timeout(Some(HANDSHAKE))?;
    if plain_http(&mut tcp)? {
        return tcp.shutdown(Shutdown::Both);
    }
    let mut tls = ServerConnection::new(cfg).map_err(io::Error::other)?;
    while tls.is_handshaking() {
        // Errors (a refused client certificate, a timeout) end the connection; rustls has
        // queued the alert, which complete_io has written.
        tls.complete_io(&mut tcp)?;
    }
    tcp.set_read_timeout(Some(IDLE))?;
    let plain = UnixStream::connect(inner)?;
    let tls = Arc::new(Mutex::new(tls));
    let back = {
        let (tls, plain, tcp) = (tls.clone(), plain.try_clone()?, tcp.try_clone()?);
        std::thread::spawn(move || to_client(tls, plain, tcp))
    };
    let result = to_server(&tls, &tcp, &plain);
    // The server side sees the end of the request stream and closes; to_client then ends.
    let _ = plain.shutdown(Shutdown::Write);
    let _ = back.join();
    result
}

/// Client → tiny_http: TLS records in, plaintext out. The first round reads nothing: the
/// request may have come with the handshake's last flight and wait in the session already.
fn to_server(
    tls: &Mutex<ServerConnection>,
    mut tcp: &TcpStream,
    mut plain: &UnixStream,
) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut n = 0;
    let mut clear = Vec::new();
    loop {
        let closed = {
            let mut tls = tls
                .lock()
                .map_err(|_| io::Error::other("TLS state poisoned"))?;
            let mut rd = &buf[..n];
            let mut closed = false;
            loop {
                if !rd.is_empty() {
                    tls.read_tls(&mut rd)?;
                }
                let state = tls.process_new_packets();
                // An alert (on a bad record) is queued either way: send it.
                while tls.wants_write() {
                    tls.write_tls(&mut tcp)?;
                }
                let state = state.map_err(io::Error::other)?;
                let at = clear.len();
                clear.resize(at + state.plaintext_bytes_to_read(), 0);
                tls.reader().read_exact(&mut clear[at..])?;
                closed |= state.peer_has_closed();
                if rd.is_empty() {
                    break closed;
                }
            }
        };
        plain.write_all(&clear)?;
        clear.clear();
        if closed {
            return Ok(());
        }
        // Read without the lock, so the other direction can write meanwhile.
        n = tcp.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
    }
}

/// tiny_http → client: plaintext in, TLS records out; close_notify at the end.
fn to_client(tls: Arc<Mutex<ServerConnection>>, mut plain: UnixStream, mut tcp: TcpStream) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = plain.read(&mut buf).unwrap_or(0);
        let Ok(mut tls) = tls.lock() else { return };
        if n == 0 {
            tls.send_close_notify();
        } else if tls.writer().write_all(&buf[..n]).is_err() {
            return;
        }
        while tls.wants_write() {
            if tls.write_tls(&mut tcp).is_err() {
                return;
            }
        }
        if n == 0 {
            let _ = tcp.shutdown(Shutdown::Write);
            return;
        }
    }
}
