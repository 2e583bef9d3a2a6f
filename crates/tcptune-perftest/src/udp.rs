//! The UDP data phase of `tcptune serve` (iperf3's `-u`): a thread per stream, receiving with
//! iperf3's loss and jitter accounting (`tcptune_iperf3::udp`) or sending datagrams with iperf3's
//! header, paced at the test's rate. Blocking calls time out every 100 ms so a stop request
//! ends a thread within that time.

use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tcptune_iperf3::udp::{encode_header, header_len, UdpReceiver};
use tcptune_iperf3::StreamResult;

const POLL: Duration = Duration::from_millis(100);

/// One UDP stream and its role.
pub struct UdpStream {
    /// iperf3's stream id.
    pub id: u32,
    /// Whether this end sends on it.
    pub sends: bool,
    /// The connected socket.
    pub sock: UdpSocket,
}

/// What one stream did.
#[derive(Debug, Clone, PartialEq)]
pub struct UdpOutcome {
    /// iperf3's stream id.
    pub id: u32,
    /// Whether this end sends on it.
    pub sends: bool,
    /// The receiver's accounting, or for a sender its bytes and datagrams (`packet_count`).
    pub counts: UdpReceiver,
}

impl UdpOutcome {
    /// The stream's entry in iperf3's results: a sender's datagrams, a receiver's count,
    /// loss and jitter. `omitted`: the counts when `-O`'s seconds ended; bytes are reported
    /// after them, datagrams and losses whole with the omitted part beside them (the peer
    /// subtracts it, as iperf3's `get_results` does).
    pub fn result(&self, secs: f64, omitted: Option<&UdpReceiver>) -> StreamResult {
        let o = omitted.cloned().unwrap_or_default();
        StreamResult {
            id: self.id as i64,
            bytes: self.counts.bytes.saturating_sub(o.bytes),
            retransmits: -1,
            jitter: self.counts.jitter,
            errors: self.counts.cnt_error as i64,
            omitted_errors: Some(o.cnt_error as i64),
            packets: self.counts.packet_count as i64,
            omitted_packets: Some(o.packet_count as i64),
            start_time: Some(0.0),
            end_time: Some(secs),
        }
    }
}

/// Running UDP streams.
pub struct UdpPhase {
    stop: Arc<AtomicBool>,
    workers: Vec<(u32, bool, Live, JoinHandle<UdpReceiver>)>,
}

/// A stream's counts as they stand, for interval reports.
type Live = Arc<Mutex<UdpReceiver>>;

fn publish(live: &Live, now: &UdpReceiver) {
    if let Ok(mut l) = live.lock() {
        l.clone_from(now);
    }
}

/// Seconds since the epoch: the clock of iperf3's datagram timestamps.
fn wall() -> (f64, u32, u32) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs_f64(), d.as_secs() as u32, d.subsec_micros())
}

impl UdpPhase {
    /// Starts a thread per stream. Senders write `len`-byte datagrams at `rate_bps` each (0:
    /// unpaced, iperf3's `-b 0`); `wide`: 64-bit counters; `repeating`: iperf3's
    /// `--repeating-payload` after each datagram's header.
    pub fn start(
        streams: Vec<UdpStream>,
        len: u32,
        rate_bps: u64,
        wide: bool,
        repeating: bool,
    ) -> io::Result<UdpPhase> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for s in streams {
            s.sock.set_read_timeout(Some(POLL))?;
            s.sock.set_write_timeout(Some(POLL))?;
            let stop = stop.clone();
            let shared: Live = Arc::default();
            let live = shared.clone();
            let sock = s.sock;
            let len = (len as usize).max(header_len(wide));
            let h = if s.sends {
                std::thread::Builder::new()
                    .name(format!("udp-send-{}", s.id))
                    .spawn(move || {
                        send_loop(&sock, (len, rate_bps), wide, repeating, &stop, &live)
                    })?
            } else {
                std::thread::Builder::new()
                    .name(format!("udp-recv-{}", s.id))
                    .spawn(move || recv_loop(&sock, len, wide, &stop, &live))?
            };
            workers.push((s.id, s.sends, shared, h));
        }
        Ok(UdpPhase { stop, workers })
    }

    /// Each stream's counts so far (its bytes, datagrams, and for a receiver loss and jitter).
    pub fn counts(&self) -> Vec<UdpReceiver> {
        self.workers
            .iter()
            .map(|w| w.2.lock().map(|c| c.clone()).unwrap_or_default())
            .collect()
    }

    /// The streams' ids and whether this end sends on each.
    pub fn ids(&self) -> Vec<(u32, bool)> {
        self.workers.iter().map(|w| (w.0, w.1)).collect()
    }

    /// Asks every stream to stop (each ends within the 100 ms of its blocking call); `finish`
    /// then collects what each did.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops every stream and returns what each did.
    pub fn finish(mut self) -> Vec<UdpOutcome> {
        self.stop.store(true, Ordering::Relaxed);
        std::mem::take(&mut self.workers)
            .into_iter()
            .map(|(id, sends, _, h)| UdpOutcome {
                id,
                sends,
                counts: h.join().unwrap_or_default(),
            })
            .collect()
    }
}

impl Drop for UdpPhase {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn send_loop(
    sock: &UdpSocket,
    (len, rate_bps): (usize, u64),
    wide: bool,
    repeating: bool,
    stop: &AtomicBool,
    live: &Live,
) -> UdpReceiver {
    let mut buf = vec![0u8; len];
    // The header is written over the first bytes of each datagram.
    crate::data::fill_payload(&mut buf, repeating);
    let mut done = UdpReceiver::default();
    let start = Instant::now();
    let rate = rate_bps as f64;
    while !stop.load(Ordering::Relaxed) {
        // Pace: the bytes sent so far are due at bytes × 8 / rate (iperf3's -b; 0: as fast as
        // the socket takes them).
        if rate_bps > 0 {
            let due = done.bytes as f64 * 8.0 / rate;
            let el = start.elapsed().as_secs_f64();
            if due > el {
                std::thread::sleep(Duration::from_secs_f64((due - el).min(0.1)));
                continue;
            }
        }
        let (_, sec, usec) = wall();
        encode_header(&mut buf, sec, usec, done.packet_count + 1, wide);
        match sock.send(&buf) {
            Ok(n) => {
                done.packet_count += 1;
                done.bytes += n as u64;
                publish(live, &done);
            }
            // A full socket buffer or a refused datagram (no one there yet): try again.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                        | io::ErrorKind::ConnectionRefused
                ) => {}
            Err(_) => break,
        }
    }
    done
}

fn recv_loop(
    sock: &UdpSocket,
    len: usize,
    wide: bool,
    stop: &AtomicBool,
    live: &Live,
) -> UdpReceiver {
    // Room for a datagram longer than announced: it is counted whole, as it arrived.
    let mut buf = vec![0u8; len + 1024];
    let mut acct = UdpReceiver::default();
    while !stop.load(Ordering::Relaxed) {
        match sock.recv(&mut buf) {
            Ok(n) => {
                acct.on_datagram(&buf[..n], wall().0, wide);
                publish(live, &acct);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                        | io::ErrorKind::ConnectionRefused
                ) => {}
            Err(_) => break,
        }
    }
    acct
}
