//! Headless Chromium driven over the DevTools protocol: a page opened, then a script's result
//! read from it (`Runtime.evaluate`, awaiting a promise). `--dump-dom` needs
//! `--virtual-time-budget` to wait for a page's streams, and virtual time moves the page's
//! clocks away from the wall clock, so figures the page measures against the server's clock
//! (its update latency) are read this way instead. The WebSocket client is the least the
//! protocol needs: text frames, masked one way, unmasked the other.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{line_channel, wait_for_line, Kill};

/// Debian's Chromium, when installed.
pub fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A page in a headless Chromium of its own (killed on drop).
pub struct Page {
    ws: TcpStream,
    next_id: u64,
    _browser: Kill,
}

fn other(what: String) -> io::Error {
    io::Error::other(what)
}

/// One GET to the DevTools endpoint: the body. It speaks HTTP/1.1 only (an HTTP/1.0 request
/// is closed unanswered) and keeps the connection open, so the body is read by its length.
fn get(addr: SocketAddr, path: &str) -> io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n")?;
    let mut r = BufReader::new(s);
    let mut len = 0;
    loop {
        let mut l = String::new();
        if r.read_line(&mut l)? == 0 || l == "\r\n" {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The value of `"key": "value"` in a JSON object's text.
fn field<'a>(obj: &'a str, key: &str) -> Option<&'a str> {
    let at = obj.find(&format!("\"{key}\""))?;
    let rest = &obj[at + key.len() + 2..];
    let rest = &rest[rest.find('"')? + 1..];
    Some(&rest[..rest.find('"')?])
}

/// A JSON string literal of `s`.
pub fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Headless Chromium as the tests run it: no sandbox (root), no GPU, no first-run or
/// background traffic, a 1200×1700 window, its profile in `profile`.
pub fn headless(exe: &Path, profile: &Path) -> Command {
    let mut c = Command::new(exe);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,1700",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

impl Page {
    /// Starts Chromium on `url` (profile in `profile`) and connects to the page once it has
    /// navigated there, within `within`.
    pub fn open(exe: &Path, profile: &Path, url: &str, within: Duration) -> io::Result<Page> {
        let mut child = headless(exe, profile)
            .args([
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(url)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let err = line_channel(child.stderr.take().expect("piped"));
        let browser = Kill(child);
        let lines = wait_for_line(&err, within, |l| l.starts_with("DevTools listening on "))
            .map_err(|e| other(format!("chromium did not open its DevTools port: {e:?}")))?;
        // Chromium goes on writing to stderr: keep reading it so it never blocks.
        std::thread::spawn(move || for _ in err {});
        let line = lines.last().cloned().unwrap_or_default();
        let host = line
            .split("ws://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .ok_or_else(|| other(format!("no DevTools address in {line:?}")))?;
        let devtools: SocketAddr = host.parse().map_err(|_| other(format!("{host:?}")))?;
        let end = Instant::now() + within;
        let target = loop {
            // The page's target, once it shows the URL asked for (its first document is
            // about:blank): the page's DevTools list, asked again until then.
            let list = get(devtools, "/json/list")?;
            let found = list.split('{').find_map(|obj| {
                let shown = field(obj, "url").map(|u| u.replace("\\u0026", "&"));
                (field(obj, "type") == Some("page") && shown.as_deref() == Some(url))
                    .then(|| field(obj, "webSocketDebuggerUrl").map(str::to_string))
                    .flatten()
            });
            if let Some(t) = found {
                break t;
            }
            if Instant::now() > end {
                return Err(other(format!(
                    "chromium did not open {url} within {within:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50)); // pacing the DevTools probe
        };
        let path = target
            .split_once("ws://")
            .and_then(|(_, r)| r.split_once('/'))
            .map(|(_, p)| format!("/{p}"))
            .ok_or_else(|| other(format!("a page target without a path: {target}")))?;
        let mut ws = TcpStream::connect(devtools)?;
        write!(
            ws,
            "GET {path} HTTP/1.1\r\nHost: {devtools}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )?;
        let mut r = BufReader::new(ws.try_clone()?);
        let mut status = String::new();
        r.read_line(&mut status)?;
        if !status.contains(" 101 ") {
            return Err(other(format!("DevTools refused the WebSocket: {status}")));
        }
        loop {
            let mut l = String::new();
            if r.read_line(&mut l)? == 0 || l == "\r\n" {
                break;
            }
        }
        Ok(Page {
            ws,
            next_id: 0,
            _browser: browser,
        })
    }

    fn send(&mut self, text: &str) -> io::Result<()> {
        let data = text.as_bytes();
        let mask = [0x5a, 0x17, 0xc3, 0x81];
        let mut frame = vec![0x81u8];
        match data.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n < 65536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&mask);
        frame.extend(data.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.ws.write_all(&frame)
    }

    /// One message (continuation frames joined); pings and other control frames skipped.
    fn recv(&mut self) -> io::Result<String> {
        let mut msg = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.ws.read_exact(&mut head)?;
            let len = match head[1] & 0x7f {
                126 => {
                    let mut b = [0u8; 2];
                    self.ws.read_exact(&mut b)?;
                    u64::from(u16::from_be_bytes(b))
                }
                127 => {
                    let mut b = [0u8; 8];
                    self.ws.read_exact(&mut b)?;
                    u64::from_be_bytes(b)
                }
                n => u64::from(n),
            };
            let mut payload = vec![0u8; len as usize];
            self.ws.read_exact(&mut payload)?;
            let opcode = head[0] & 0x0f;
            if opcode == 0x8 {
                return Err(other("DevTools closed the WebSocket".into()));
            }
            if opcode >= 0x8 {
                continue;
            }
            msg.extend_from_slice(&payload);
            if head[0] & 0x80 != 0 {
                return String::from_utf8(msg).map_err(|e| other(e.to_string()));
            }
        }
    }

    /// Evaluates `expr` in the page, awaiting it when it is a promise, within `within`: the
    /// protocol's answer as JSON text (`{"id":…,"result":{"result":{"type":…,"value":…}}}`).
    /// Evaluated again when the page's document was replaced meanwhile (the first navigation
    /// commits after the target shows its URL).
    pub fn evaluate(&mut self, expr: &str, within: Duration) -> io::Result<String> {
        let end = Instant::now() + within;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let answer = self.evaluate_once(expr, left.max(Duration::from_millis(1)))?;
            if !answer.contains("Execution context was destroyed") || Instant::now() >= end {
                return Ok(answer);
            }
        }
    }

    fn evaluate_once(&mut self, expr: &str, within: Duration) -> io::Result<String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&format!(
            "{{\"id\":{id},\"method\":\"Runtime.evaluate\",\"params\":{{\"expression\":{},\"awaitPromise\":true,\"returnByValue\":true}}}}",
            json_string(expr)
        ))?;
        self.ws.set_read_timeout(Some(within))?;
        let tag = format!("\"id\":{id},");
        loop {
            let m = self.recv()?;
            if m.starts_with(&format!("{{{tag}")) {
                return Ok(m);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_fields() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        let obj = "\n   \"type\": \"page\",\n   \"url\": \"http://x/?a=1\",\n   \"webSocketDebuggerUrl\": \"ws://127.0.0.1:9/devtools/page/AB\"\n";
        assert_eq!(field(obj, "type"), Some("page"));
        assert_eq!(field(obj, "url"), Some("http://x/?a=1"));
        assert_eq!(
            field(obj, "webSocketDebuggerUrl"),
            Some("ws://127.0.0.1:9/devtools/page/AB")
        );
    }
}
