//! A propagation delay between two namespaces, for kernels without netem: a TUN device in
//! each namespace (198.18.N.1 in `a`, 198.18.N.2 in `b`) and two threads that read every IP
//! packet from one and write it into the other `one_way` later. Tests use it where behaviour
//! depends on a real RTT (a small send buffer only limits a sender whose ACKs take time).
//! The devices disappear when the line is dropped (their descriptors close).

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::netns::{Netns, COUNTER};

/// Two TUN devices joined by a fixed delay in each direction.
pub struct DelayLine {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// Opens a TUN device named `name` inside `ns` (the device is created in the namespace of the
/// thread that asks for it, so a helper thread enters the namespace first).
fn tun_in(ns: &Netns, name: &str) -> OwnedFd {
    let path = PathBuf::from(format!("/run/netns/{}", ns.name()));
    tcptune_os::netns::in_netns(&path, || {
        tcptune_os::tun::create(name, tcptune_os::tun::IFF_TUN | tcptune_os::tun::IFF_NO_PI)
    })
    .unwrap_or_else(|e| panic!("entering {}: {e:?}", path.display()))
    .unwrap_or_else(|e| panic!("TUN device {name}: {e:?}"))
}

/// Moves packets from `from` to `to`, each `delay` after it was read, until `stop`.
fn pump(from: Arc<OwnedFd>, to: Arc<OwnedFd>, delay: Duration, stop: Arc<AtomicBool>) {
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while queue.front().is_some_and(|(due, _)| *due <= now) {
            let (_, pkt) = queue.pop_front().unwrap();
            let _ = tcptune_os::fs::write(to.as_fd(), &pkt);
        }
        // Wait for a packet, or until the next one is due (at most 20 ms, to notice `stop`).
        let wait = queue
            .front()
            .map(|(due, _)| due.saturating_duration_since(now))
            .unwrap_or(Duration::from_millis(20))
            .min(Duration::from_millis(20));
        let ms = wait.as_micros().div_ceil(1000) as u64;
        if !tcptune_os::poll::wait_readable(from.as_fd(), Duration::from_millis(ms))
            .unwrap_or(false)
        {
            continue;
        }
        // Non-blocking: until nothing is left.
        while let Ok(n @ 1..) = tcptune_os::fs::read(from.as_fd(), &mut buf) {
            queue.push_back((Instant::now() + delay, buf[..n].to_vec()));
        }
    }
}

impl DelayLine {
    /// Joins `a` and `b` through TUN devices with `one_way` delay each way; returns the line
    /// and the two addresses (198.18.`octet`.1 in `a`, .2 in `b`).
    pub fn new(a: &Netns, b: &Netns, octet: u8, one_way: Duration) -> (DelayLine, String, String) {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let (na, nb) = (
            format!("tda{}x{n}", std::process::id() % 100000),
            format!("tdb{}x{n}", std::process::id() % 100000),
        );
        let fa = Arc::new(tun_in(a, &na));
        let fb = Arc::new(tun_in(b, &nb));
        let (ia, ib) = (format!("198.18.{octet}.1"), format!("198.18.{octet}.2"));
        a.exec(&["ip", "addr", "add", &format!("{ia}/24"), "dev", &na]);
        b.exec(&["ip", "addr", "add", &format!("{ib}/24"), "dev", &nb]);
        a.exec(&["ip", "link", "set", &na, "up"]);
        b.exec(&["ip", "link", "set", &nb, "up"]);
        let stop = Arc::new(AtomicBool::new(false));
        let threads = vec![
            {
                let (f, t, s) = (fa.clone(), fb.clone(), stop.clone());
                std::thread::spawn(move || pump(f, t, one_way, s))
            },
            {
                let (f, t, s) = (fb, fa, stop.clone());
                std::thread::spawn(move || pump(f, t, one_way, s))
            },
        ];
        (DelayLine { stop, threads }, ia, ib)
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
