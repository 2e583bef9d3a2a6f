//! The sending side of the data phase (memory or `-Z` payload; `-F`'s file sends in
//! `data`): streams grouped onto no more threads than the CPUs the process may run on, each
//! thread writing a block to each of its streams in turn with non-blocking writes and waiting
//! in poll only when none takes one (as iperf3 3.12 sends, with one thread for all).
//!
//! Why not a thread per stream: with `-P 4` and the sender pinned to one core (bench/perf),
//! four blocking writers took turns filling one socket's whole buffer each, the ACK-driven
//! sending moved to the receiver's core, and into `iperf3 -s` tcptune carried 21–23 Gbit/s
//! where iperf3's one thread carried 36–38; one thread for the four carried 35–36.

use std::io::{self, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tcptune_os::poll::{poll, PollFd};

use crate::sock::ZeroCopySource;
use crate::stream::{is_timeout, Marker, POLL};

/// How the sending streams send.
#[derive(Debug, Clone)]
pub struct SendPlan {
    /// Bytes per write (iperf3's `-l`).
    pub block: u32,
    /// Per-stream rate cap, bits per second (iperf3's `-b`).
    pub rate_bps: Option<u64>,
    /// Total bytes all sending streams together send (iperf3's `-n`); none = until stopped.
    pub bytes_total: Option<u64>,
    /// `sendfile` from a memory file instead of `write` (iperf3's `-Z`).
    pub zerocopy: bool,
    /// The payload is "0123456789" repeated (iperf3's `--repeating-payload`).
    pub repeating: bool,
    /// iperf3's `-F`: sending streams send this file's bytes (the stream ends at its end),
    /// receiving streams write what they read to it (each stream opens it itself, as iperf3).
    pub file: Option<std::path::PathBuf>,
}

/// One sending stream's socket and counters.
pub(crate) struct Sender {
    pub sock: Arc<TcpStream>,
    pub bytes: Arc<AtomicU64>,
    pub marker: Marker,
}

/// How many sending threads for `streams` sending streams: one per CPU this process may run
/// on, at most one per stream.
pub(crate) fn threads_for(streams: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    streams.min(cpus).max(1)
}

/// Splits `senders` into `n` groups, stream i into group i mod n (so each thread's streams
/// are spread over the test's ids).
pub(crate) fn groups(senders: Vec<Sender>, n: usize) -> Vec<Vec<Sender>> {
    let mut out: Vec<Vec<Sender>> = (0..n.max(1)).map(|_| Vec::new()).collect();
    let k = out.len();
    for (i, s) in senders.into_iter().enumerate() {
        out[i % k].push(s);
    }
    out.retain(|g| !g.is_empty());
    out
}

/// How long until a stream paced at `-b` may send again (`None`: it may now).
pub(crate) fn pacing_wait(plan: &SendPlan, mine: u64, start: Instant) -> Option<Duration> {
    let rate = plan.rate_bps?;
    let due = mine as f64 * 8.0 / rate.max(1) as f64;
    let el = start.elapsed().as_secs_f64();
    (due > el).then(|| Duration::from_secs_f64(due - el))
}

/// What one pass over a group did.
enum Pass {
    /// Some stream took bytes.
    Wrote,
    /// None did: the soonest a paced stream may send again, and the streams whose socket was
    /// full (only those are waited on: a paced stream's socket is writable, and polling it
    /// would return at once and spin until its turn).
    Idle {
        wait: Option<Duration>,
        blocked: Vec<usize>,
    },
}

/// Sends on every stream of `group` until `stop`, `-n`'s total, or every stream failed.
pub(crate) fn send_group(
    group: &[Sender],
    block: &[u8],
    zc: Option<&ZeroCopySource>,
    plan: &SendPlan,
    stop: &AtomicBool,
    total: &AtomicU64,
) {
    if group.iter().any(|s| s.sock.set_nonblocking(true).is_err()) {
        return;
    }
    let start = Instant::now();
    let mut mine = vec![0u64; group.len()];
    let mut done = vec![false; group.len()];
    while !stop.load(Ordering::Relaxed) && done.contains(&false) {
        let Some(pass) = one_pass(group, block, zc, plan, total, (&mut mine, &mut done), start)
        else {
            return;
        };
        match pass {
            Pass::Wrote => {}
            // Every open stream is ahead of its `-b` rate: a rate limiter's wait.
            Pass::Idle {
                wait: Some(wait),
                blocked,
            } if blocked.is_empty() => std::thread::sleep(wait.min(POLL)),
            Pass::Idle { wait, blocked } => {
                let mut fds: Vec<PollFd<'_>> = blocked
                    .iter()
                    .map(|&i| PollFd::writable(group[i].sock.as_fd()))
                    .collect();
                let _ = poll(&mut fds, Some(wait.map_or(POLL, |w| w.min(POLL))));
            }
        }
    }
}

/// A block offered to each stream of the group in turn; `None` once `-n`'s total is sent.
fn one_pass(
    group: &[Sender],
    block: &[u8],
    zc: Option<&ZeroCopySource>,
    plan: &SendPlan,
    total: &AtomicU64,
    (mine, done): (&mut [u64], &mut [bool]),
    start: Instant,
) -> Option<Pass> {
    let mut wrote = false;
    let mut soonest: Option<Duration> = None;
    let mut blocked = Vec::new();
    for (i, s) in group.iter().enumerate() {
        if done[i] {
            continue;
        }
        s.marker.check(mine[i]);
        let mut len = block.len();
        if let Some(limit) = plan.bytes_total {
            let so_far = total.load(Ordering::Relaxed);
            if so_far >= limit {
                return None;
            }
            len = len.min((limit - so_far) as usize);
        }
        if let Some(w) = pacing_wait(plan, mine[i], start) {
            soonest = Some(soonest.map_or(w, |x: Duration| x.min(w)));
            continue;
        }
        let r = match zc {
            Some(z) if len == block.len() => z.send(&s.sock),
            _ => (&*s.sock).write(&block[..len]),
        };
        match r {
            Ok(0) => done[i] = true,
            Ok(n) => {
                wrote = true;
                mine[i] += n as u64;
                s.bytes.fetch_add(n as u64, Ordering::Relaxed);
                total.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => blocked.push(i),
            Err(e) if is_timeout(&e) => {}
            Err(_) => done[i] = true,
        }
    }
    // A full socket is waited for in poll, but no longer than a paced stream's turn.
    Some(if wrote {
        Pass::Wrote
    } else {
        Pass::Idle {
            wait: soonest,
            blocked,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_more_threads_than_streams_and_at_least_one() {
        assert_eq!(threads_for(1), 1);
        assert!(threads_for(4) >= 1 && threads_for(4) <= 4);
        assert_eq!(threads_for(0), 1);
    }

    #[test]
    fn one_thread_sends_on_every_stream_and_stops_at_the_total() {
        use std::io::Read;
        use std::net::TcpListener;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut readers = Vec::new();
        let mut group = Vec::new();
        for _ in 0..3 {
            let sock = TcpStream::connect(addr).unwrap();
            let (mut peer, _) = l.accept().unwrap();
            readers.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                let mut n = 0u64;
                while let Ok(k) = peer.read(&mut buf) {
                    if k == 0 {
                        break;
                    }
                    n += k as u64;
                }
                n
            }));
            group.push(Sender {
                sock: Arc::new(sock),
                bytes: Arc::new(AtomicU64::new(0)),
                marker: Marker {
                    clock: Instant::now(),
                    mark: Arc::new(AtomicU64::new(u64::MAX)),
                    at_mark: Arc::new(AtomicU64::new(u64::MAX)),
                },
            });
        }
        let plan = SendPlan {
            block: 100_000,
            rate_bps: None,
            bytes_total: Some(3_000_001),
            zerocopy: false,
            repeating: false,
            file: None,
        };
        let (stop, total) = (AtomicBool::new(false), AtomicU64::new(0));
        send_group(&group, &[7u8; 100_000], None, &plan, &stop, &total);
        assert_eq!(total.load(Ordering::Relaxed), 3_000_001);
        let counted: Vec<u64> = group
            .iter()
            .map(|s| s.bytes.load(Ordering::Relaxed))
            .collect();
        assert!(
            counted.iter().all(|b| *b > 0),
            "every stream sent: {counted:?}"
        );
        drop(group);
        let read: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        assert_eq!(read, 3_000_001);
    }

    #[test]
    fn a_stream_ahead_of_its_rate_waits_for_its_due_time() {
        let plan = SendPlan {
            block: 1000,
            rate_bps: Some(8_000),
            bytes_total: None,
            zerocopy: false,
            repeating: false,
            file: None,
        };
        let start = Instant::now();
        // 1000 bytes at 8 kbit/s are due after 1 s.
        let w = pacing_wait(&plan, 1000, start).expect("ahead of its rate");
        assert!(w > Duration::from_millis(900) && w <= Duration::from_secs(1));
        assert!(pacing_wait(&plan, 0, start).is_none());
    }
}
