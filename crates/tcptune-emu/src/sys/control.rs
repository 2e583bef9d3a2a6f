//! The emulator's control socket, served without ever blocking the link: a client is accepted
//! at once, and its request line is read piece by piece as it arrives, in the same event loop
//! as the packets, so a client that connects and is then descheduled (a loaded machine) still
//! gets its answer, while a client that never writes costs only a descriptor (at most
//! `MAX_CLIENTS` of them) until the loop is next woken by the control socket past its
//! deadline, or the client hangs up.
//!
//! Time is passed in, so the deadline rules are tested without waiting.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use serde::Serialize;

/// How long a client may take to send its request line after connecting: as long as
/// [`super::request`] waits for the answer, so a client never gives up before the emulator
/// does.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(5);

/// Clients waiting at once; a further one replaces the oldest.
const MAX_CLIENTS: usize = 8;

/// The longest request line read (a request is a few kilobytes).
const MAX_LINE: usize = 1 << 20;

struct Client {
    stream: UnixStream,
    line: Vec<u8>,
    since: Instant,
}

/// The clients connected and not yet answered.
#[derive(Default)]
pub struct Control {
    clients: Vec<Client>,
}

impl Control {
    /// The waiting clients' descriptors, for the loop to wake when one of them writes.
    pub fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.clients.iter().map(|c| c.stream.as_fd())
    }

    /// How many clients wait for an answer.
    pub fn waiting(&self) -> usize {
        self.clients.len()
    }

    /// Accepts every pending connection on `listener` (which must be non-blocking), reads what
    /// the waiting clients sent, and answers each complete line with `handle` (its reply, and
    /// whether it asks the emulator to stop). Clients past their deadline, or that hung up,
    /// are dropped. Returns true when a handled request asked to stop. Never blocks.
    pub fn serve<R: Serialize>(
        &mut self,
        listener: &UnixListener,
        now: Instant,
        mut handle: impl FnMut(&str) -> (R, bool),
    ) -> bool {
        while let Ok((stream, _)) = listener.accept() {
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            if self.clients.len() == MAX_CLIENTS {
                self.clients.remove(0);
            }
            self.clients.push(Client {
                stream,
                line: Vec::new(),
                since: now,
            });
        }
        let mut stop = false;
        self.clients.retain_mut(|c| match read_line(c) {
            Ok(true) => {
                let text = String::from_utf8_lossy(&c.line);
                let (reply, s) = handle(text.trim_end_matches('\n'));
                stop |= s;
                if let Ok(mut out) = serde_json::to_string(&reply) {
                    out.push('\n');
                    // A reply is small and the socket's buffer empty: one write takes it.
                    let _ = (&c.stream).write_all(out.as_bytes());
                }
                false
            }
            Ok(false) => now.saturating_duration_since(c.since) < CLIENT_DEADLINE,
            Err(_) => false,
        });
        stop
    }
}

/// Reads what `c` sent so far; Ok(true) once it holds a whole line (or [`MAX_LINE`] bytes),
/// an error when the client hung up before that.
fn read_line(c: &mut Client) -> io::Result<bool> {
    let mut buf = [0u8; 4096];
    loop {
        if c.line.contains(&b'\n') || c.line.len() >= MAX_LINE {
            if let Some(end) = c.line.iter().position(|&b| b == b'\n') {
                c.line.truncate(end + 1);
            }
            return Ok(true);
        }
        match c.stream.read(&mut buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => c.line.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    fn listener(name: &str) -> (UnixListener, std::path::PathBuf) {
        let path =
            std::env::temp_dir().join(format!("tcptune-control-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path).unwrap();
        l.set_nonblocking(true).unwrap();
        (l, path)
    }

    /// The reply a test handler gives: the line it got back.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Echo {
        got: String,
    }

    fn echo(line: &str) -> (Echo, bool) {
        (
            Echo {
                got: line.to_string(),
            },
            line == "stop",
        )
    }

    #[test]
    fn a_client_that_writes_late_is_still_answered_and_a_silent_one_is_dropped() {
        let (l, path) = listener("late");
        let t0 = Instant::now();
        let late = UnixStream::connect(&path).unwrap();
        let silent = UnixStream::connect(&path).unwrap();
        silent
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        // Both connected, neither wrote: accepted without waiting for them.
        let mut c = Control::default();
        assert!(!c.serve(&l, t0, echo));
        assert_eq!(c.waiting(), 2);
        // The first writes a second later (it was descheduled): answered.
        (&late).write_all(b"status\n").unwrap();
        assert!(!c.serve(&l, t0 + Duration::from_secs(1), echo));
        let mut answer = String::new();
        BufReader::new(&late).read_line(&mut answer).unwrap();
        let reply: Echo = serde_json::from_str(&answer).unwrap();
        assert_eq!(reply.got, "status");
        assert_eq!(c.waiting(), 1);
        // The silent one is dropped at its deadline, and sees the connection closed.
        assert!(!c.serve(&l, t0 + CLIENT_DEADLINE, echo));
        assert_eq!(c.waiting(), 0);
        let mut rest = Vec::new();
        assert_eq!((&silent).read_to_end(&mut rest).unwrap(), 0);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_line_in_pieces_is_answered_once_whole_and_stop_is_reported() {
        let (l, path) = listener("pieces");
        let t0 = Instant::now();
        let client = UnixStream::connect(&path).unwrap();
        let mut c = Control::default();
        (&client).write_all(b"st").unwrap();
        assert!(!c.serve(&l, t0, echo));
        assert_eq!(c.waiting(), 1, "half a line waits for the rest");
        (&client).write_all(b"op\n").unwrap();
        assert!(c.serve(&l, t0, echo), "the stop request is reported");
        assert_eq!(c.waiting(), 0);
        let mut answer = String::new();
        BufReader::new(&client).read_line(&mut answer).unwrap();
        assert!(answer.contains("\"stop\""), "{answer}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn clients_past_the_limit_replace_the_oldest() {
        let (l, path) = listener("limit");
        let t0 = Instant::now();
        let clients: Vec<UnixStream> = (0..MAX_CLIENTS + 2)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        clients[0]
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut c = Control::default();
        c.serve(&l, t0, echo);
        assert_eq!(c.waiting(), MAX_CLIENTS);
        let mut rest = Vec::new();
        assert_eq!((&clients[0]).read_to_end(&mut rest).unwrap(), 0);
        let _ = std::fs::remove_file(&path);
    }
}
