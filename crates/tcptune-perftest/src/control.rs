//! Reading and writing the control connection with deadlines: the sans-IO sessions say when
//! they must hear something; this turns that into socket timeouts.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tcptune_model::Dur;

/// The test clock: time since the control connection was made.
#[derive(Debug, Clone, Copy)]
pub struct Clock(pub Instant);

impl Clock {
    /// The clock starts now.
    pub fn start() -> Clock {
        Clock(Instant::now())
    }
    /// Time since the clock started.
    pub fn now(&self) -> Dur {
        Dur::from_nanos(self.0.elapsed().as_nanos().min(u64::MAX as u128) as u64)
    }
}

/// What a read brought.
pub enum Got {
    /// This many bytes arrived.
    Data(usize),
    /// The peer closed the connection.
    Eof,
    /// Nothing before the wait ended.
    Nothing,
}

/// The control connection and a read buffer.
pub struct Control {
    /// The connected socket.
    pub sock: TcpStream,
    buf: Vec<u8>,
}

impl Control {
    /// Wraps a connected control socket.
    pub fn new(sock: TcpStream) -> io::Result<Control> {
        sock.set_nodelay(true)?;
        // A peer that stops reading must not block us forever.
        sock.set_write_timeout(Some(Duration::from_secs(10)))?;
        Ok(Control {
            sock,
            buf: vec![0u8; 64 * 1024],
        })
    }

    /// Writes all of `bytes` to the peer.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.sock.write_all(bytes)
    }

    /// Reads what is there, waiting at most until `deadline` (test clock) and at most `max`.
    pub fn read(&mut self, clock: &Clock, deadline: Option<Dur>, max: Duration) -> io::Result<Got> {
        let mut wait = max;
        if let Some(d) = deadline {
            let left = d.nanos().saturating_sub(clock.now().nanos());
            wait = wait.min(Duration::from_nanos(left));
        }
        // A zero timeout would mean "block forever" to the socket layer.
        let wait = wait.max(Duration::from_millis(1));
        self.sock.set_read_timeout(Some(wait))?;
        match self.sock.read(&mut self.buf) {
            Ok(0) => Ok(Got::Eof),
            Ok(n) => Ok(Got::Data(n)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(Got::Nothing)
            }
            Err(e) => Err(e),
        }
    }

    /// The first `n` bytes received and not yet consumed.
    pub fn data(&self, n: usize) -> &[u8] {
        &self.buf[..n]
    }
}
