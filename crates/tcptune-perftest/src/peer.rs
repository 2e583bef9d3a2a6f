//! The other end's sockets when that end runs on this host too (a loopback test against a stock
//! iperf3 server, which sends no samples of its own). They are read through sock_diag by their
//! addresses during the data phase, so the engine judges a reverse test's sender from its own
//! chronographs instead of saying it lacks them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tcptune_diagnose::Sample;
use tcptune_kernel::diag::ext;
use tcptune_kernel::sys::Diag;
use tcptune_model::Dur;

use crate::data::StreamSocket;
use crate::{ServerSamples, ServerStreamSamples};

/// The peer's sockets and what was read of them.
pub struct LocalPeer {
    diag: Diag,
    /// Per stream: id, whether the peer sends on it, the peer's local and remote address.
    streams: Vec<(u32, bool, SocketAddr, SocketAddr)>,
    samples: Vec<Vec<Sample>>,
    every: Duration,
    last: Option<Dur>,
}

/// At most this many samples per stream are kept (the rest thinned, as our own are).
const MAX_PER_STREAM: usize = 4096;

impl LocalPeer {
    /// The peer of `socks` when every stream's peer address is a loopback one and sock_diag
    /// opens; otherwise `None` (the peer is another host, or this one cannot be asked).
    pub fn new(socks: &[StreamSocket], every: Duration) -> Option<LocalPeer> {
        let mut streams = Vec::new();
        for s in socks {
            let (local, remote) = (s.sock.local_addr().ok()?, s.sock.peer_addr().ok()?);
            if !remote.ip().is_loopback() {
                return None;
            }
            streams.push((s.id, !s.sends, remote, local));
        }
        let diag = Diag::open().ok()?;
        let n = streams.len();
        Some(LocalPeer {
            diag,
            streams,
            samples: vec![Vec::new(); n],
            every,
            last: None,
        })
    }

    /// Reads every peer socket, at most once per sampling period (`at` on the test clock).
    pub fn sample(&mut self, at: Dur) {
        if self
            .last
            .is_some_and(|l| at.nanos().saturating_sub(l.nanos()) < self.every.as_nanos() as u64)
        {
            return;
        }
        self.last = Some(at);
        for (k, &(_, _, src, dst)) in self.streams.iter().enumerate() {
            // A socket gone (the peer closed it) or a refused query leaves a gap, not an error:
            // the samples are evidence, not the test.
            if let Ok(Some(s)) = self.diag.query(src, dst, ext::INFO | ext::SKMEMINFO) {
                if let Some(info) = s.info {
                    let v = &mut self.samples[k];
                    v.push(Sample {
                        at_s: at,
                        info,
                        skmem: s.skmem,
                    });
                    if v.len() > MAX_PER_STREAM {
                        let kept: Vec<Sample> = v.iter().step_by(2).cloned().collect();
                        *v = kept;
                    }
                }
            }
        }
    }

    /// What was read, in the form a tcptune server sends its own (streams with no sample left
    /// out).
    pub fn into_samples(self) -> ServerSamples {
        ServerSamples {
            streams: self
                .streams
                .into_iter()
                .zip(self.samples)
                .filter(|(_, s)| !s.is_empty())
                .map(|((id, sender, _, _), samples)| ServerStreamSamples {
                    id,
                    sender,
                    samples,
                })
                .collect(),
        }
    }
}

/// A [`LocalPeer`] read on a thread of its own, so a slow netlink answer never delays the
/// test's control loop (which ends the test on time).
pub struct PeerSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<LocalPeer>>,
}

impl PeerSampler {
    /// Starts sampling `peer` every period of its own, on the test's clock `clock`.
    pub fn start(mut peer: LocalPeer, clock: Instant) -> Option<PeerSampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let every = peer.every;
        let thread = std::thread::Builder::new()
            .name("peer-sampler".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    // This thread paces the reads itself: no period left to wait out.
                    peer.last = None;
                    peer.sample(Dur::from_nanos(clock.elapsed().as_nanos() as u64));
                    // The period paces the reads; stopping waits at most one period.
                    std::thread::sleep(every);
                }
                // One last reading, at the end of the data phase.
                peer.last = None;
                peer.sample(Dur::from_nanos(clock.elapsed().as_nanos() as u64));
                peer
            })
            .ok()?;
        Some(PeerSampler {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops sampling and returns what was read.
    pub fn finish(mut self) -> Option<LocalPeer> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for PeerSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
