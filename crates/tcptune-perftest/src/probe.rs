//! Latency probes against the test's server (the I/O half of `tcptune_diagnose::latency`): a
//! new TCP connection to the server's port, timed from connect() to its answer (the SYN-ACK,
//! or the RST of a port no longer listening: either is one round trip through every queue on
//! the path), then closed at once. Any iperf3 server answers it without its test noticing: the
//! kernel completes the handshake, and a busy iperf3 answers an extra control connection with
//! "access denied" (or has closed its listener for the test).
//!
//! Idle round trips are the handshakes of the test's own connections (control and data), made
//! before any data flows: a probe connection of its own before the test would be taken by a
//! one-shot `iperf3 -s -1` for its one test. Loaded probes run on a thread of their own during
//! the data phase (a busy iperf3 answers them "access denied"), at a fixed rate far below the
//! draft's 100 probes per second cap.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tcptune_diagnose::latency::{Phase, Probe, ProbeKind};
use tcptune_model::Dur;

/// A probe with no answer in this long is lost (a loaded deep queue can hold a SYN for over a
/// second).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Loaded probes per second.
pub const LOADED_RATE_HZ: u32 = 10;

/// One handshake's round trip; `None` when nothing answered within the timeout, or when the
/// SYN had to be sent again (a full queue dropped it: the time then holds the kernel's 1 s
/// retransmission timer, not a round trip). A refusal (RST) is an answer: the round trip is
/// the same.
pub fn handshake(addr: SocketAddr, timeout: Duration) -> Option<Duration> {
    let t = Instant::now();
    match TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => {
            let rtt = t.elapsed();
            let resent = tcptune_kernel::sys::tcp_info_of(s.as_fd())
                .ok()
                .and_then(|i| i.total_retrans)
                .is_some_and(|r| r > 0);
            // No cookie follows: a tcptune server frees the slot at once, iperf3 too.
            drop(s);
            (!resent).then_some(rtt)
        }
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Some(t.elapsed()),
        Err(_) => None,
    }
}

fn at(clock: Instant) -> Dur {
    Dur::from_nanos(clock.elapsed().as_nanos().min(u64::MAX as u128) as u64)
}

/// The idle round trip one of the test's own connections measured: its connect() took one
/// handshake, before any data flowed.
pub fn idle_handshake(clock: Instant, took: Duration) -> Probe {
    Probe {
        at_s: at(clock),
        kind: ProbeKind::ForeignHandshake,
        phase: Phase::Idle,
        rtt_s: Some(Dur::from_nanos(took.as_nanos() as u64)),
    }
}

/// Handshakes during the load: a pacing thread starts one every period, each on a thread of
/// its own, so a probe held in a deep queue does not delay the next (at most
/// [`MAX_IN_FLIGHT`] at once; a start skipped over that is not a probe).
pub struct Loaded {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Probe>>>,
}

/// Probes waiting for an answer at once (10 per second × a 3 s timeout).
pub const MAX_IN_FLIGHT: usize = 32;

impl Loaded {
    /// Starts probing `addr` every 1/`hz` seconds.
    pub fn start(addr: SocketAddr, hz: u32, clock: Instant) -> io::Result<Loaded> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let every = Duration::from_secs(1) / hz.max(1);
        let thread = std::thread::Builder::new()
            .name("latency-probe".into())
            .spawn(move || {
                let (tx, rx) = std::sync::mpsc::channel::<Probe>();
                let mut running: Vec<JoinHandle<()>> = Vec::new();
                let mut next = Instant::now();
                while !flag.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if now < next {
                        // Short naps, so stopping never waits a whole period.
                        std::thread::sleep((next - now).min(Duration::from_millis(20)));
                        continue;
                    }
                    next += every;
                    running.retain(|h| !h.is_finished());
                    if running.len() >= MAX_IN_FLIGHT {
                        continue;
                    }
                    let tx = tx.clone();
                    let at_s = at(clock);
                    let spawned = std::thread::Builder::new()
                        .name("latency-probe-1".into())
                        .spawn(move || {
                            let rtt = handshake(addr, PROBE_TIMEOUT);
                            let _ = tx.send(Probe {
                                at_s,
                                kind: ProbeKind::ForeignHandshake,
                                phase: Phase::Loaded,
                                rtt_s: rtt.map(|d| Dur::from_nanos(d.as_nanos() as u64)),
                            });
                        });
                    running.extend(spawned.ok());
                }
                // Probes started under the load are waited for: their answers are part of it.
                drop(tx);
                for h in running {
                    let _ = h.join();
                }
                let mut out: Vec<Probe> = rx.into_iter().collect();
                out.sort_by_key(|p| p.at_s);
                out
            })?;
        Ok(Loaded {
            stop,
            thread: Some(thread),
        })
    }

    /// Starts no more probes, without waiting: the test ends its load at once (a probe held
    /// in a deep queue must not keep the senders sending past `-t`).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops probing (waiting for the probes under way, each at most its timeout) and returns
    /// the probes.
    pub fn finish(mut self) -> Vec<Probe> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_listening_port_and_a_closed_one_both_answer_in_one_round_trip() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let open = l.local_addr().unwrap();
        assert!(handshake(open, PROBE_TIMEOUT).is_some());
        drop(l);
        // The port is closed now: the RST is the answer.
        assert!(handshake(open, PROBE_TIMEOUT).is_some());
        let p = idle_handshake(Instant::now(), Duration::from_micros(20_350));
        assert_eq!(p.rtt_s, Some(Dur::from_micros(20_350)));
        assert_eq!(p.phase, Phase::Idle);
    }
}
