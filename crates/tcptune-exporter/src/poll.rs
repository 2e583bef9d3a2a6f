//! The poller: the kernel crate's sock_diag dumps every interval and its destroy events in
//! between (read as they come, so a short connection's final counters are not left queued),
//! fed to the aggregator with the time since the exporter started. The only I/O of the
//! exporter besides HTTP, and all of it through `tcptune-kernel`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tcptune_kernel::diag::ext;
use tcptune_kernel::filter::state;
use tcptune_kernel::{DestroyEvents, Diag, Filter, KernelError};
use tcptune_model::Dur;

use crate::agg::Aggregator;
use crate::cpu::{CpuWatch, Procs, SysProcs, CAP, EVERY};

/// A namespace the exporter looks into (`None`: its own).
pub struct Target {
    /// The namespace's name; `None`: the exporter's own.
    pub netns: Option<String>,
    diag: Diag,
    events: DestroyEvents,
}

/// Opens a sock_diag socket and a destroy-event subscription in each namespace.
pub fn open(names: &[Option<String>]) -> Result<Vec<Target>, KernelError> {
    names
        .iter()
        .map(|n| {
            let diag = Diag::open_maybe_in(n.as_deref())?;
            let events = diag.destroy_events(n.as_deref())?;
            Ok(Target {
                netns: n.clone(),
                diag,
                events,
            })
        })
        .collect()
}

/// Every socket but listeners (TIME-WAIT and SYN-RECV ones count in the state gauge).
pub fn filter() -> Filter {
    let mut f = Filter::default();
    f.states = state::ALL & !(1 << state::LISTEN);
    f
}

/// The extensions a poll asks for: tcp_info and socket memory (the engine's evidence), and
/// the congestion control's name only when groups are made by it. Every attribute left out
/// is one the kernel neither fills nor copies for each socket.
pub fn extensions(congestion: bool) -> u8 {
    ext::INFO | ext::SKMEMINFO | if congestion { ext::CONG } else { 0 }
}

/// Sockets taken per hold of the lock during a dump: a lock per socket cost more than
/// decoding it, and 64 take well under a millisecond.
const BATCH: usize = 64;

fn since(start: Instant) -> Dur {
    Dur::from(start.elapsed())
}

/// Polls every `interval` until `stop` says so.
pub fn run(
    mut targets: Vec<Target>,
    agg: &Arc<Mutex<Aggregator>>,
    interval: Duration,
    stop: &dyn Fn() -> bool,
) {
    let filter = filter();
    let ext = match agg.lock() {
        Ok(a) => extensions(a.needs_congestion()),
        Err(_) => return,
    };
    let start = Instant::now();
    let mut next = start;
    // Destroy events are read in slices short enough to notice a stop signal promptly.
    let slice = Duration::from_millis(100) / targets.len().max(1) as u32;
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cpu = CpuWatch::new(EVERY, CAP, ncpu);
    while !stop() {
        let t0 = Instant::now();
        for t in targets.iter_mut() {
            let Ok(mut pass) = agg
                .lock()
                .map(|mut a| a.begin(t.netns.as_deref(), since(start)))
            else {
                return;
            };
            // Each socket is taken as the kernel gives it (no socket's record is staged),
            // under a lock held for `BATCH` sockets at a time: a scrape waits at most for
            // those (and the kernel's next datagram), not for a whole dump.
            let mut held = None;
            let mut taken = 0usize;
            let dumped = t.diag.dump_each(&filter, ext, |s| {
                if held.is_none() {
                    held = agg.lock().ok();
                }
                if let Some(a) = held.as_mut() {
                    a.socket(&mut pass, s);
                }
                taken += 1;
                if taken % BATCH == 0 {
                    held = None;
                }
            });
            drop(held);
            let Ok(mut a) = agg.lock() else { return };
            match dumped {
                Ok(_) => a.end(pass),
                Err(_) => {
                    a.families().health.dump_errors.inc();
                }
            }
        }
        if let Ok(mut a) = agg.lock() {
            a.finish(Dur::from(t0.elapsed()));
        }
        if cpu.due() {
            measure_cpu(&mut cpu, &mut SysProcs, agg, since(start));
        }
        next += interval;
        let now = Instant::now();
        if next < now {
            next = now; // fell behind: poll again now, no burst of catch-up polls
        }
        while Instant::now() < next && !stop() {
            for t in targets.iter_mut() {
                let wait = slice.min(next.saturating_duration_since(Instant::now()));
                let events = match t.events.next(wait) {
                    Ok(e) => e,
                    Err(_) => {
                        if let Ok(a) = agg.lock() {
                            a.families().health.dump_errors.inc();
                        }
                        // Not a busy loop on a socket that keeps failing: wait out the slice.
                        std::thread::sleep(wait);
                        continue;
                    }
                };
                if events.is_empty() {
                    continue;
                }
                let now = since(start);
                let Ok(mut a) = agg.lock() else { return };
                for s in &events {
                    a.destroyed(t.netns.as_deref(), s, now);
                }
            }
        }
    }
}

/// One CPU measurement: the candidates are taken under the lock, `/proc` is read outside it
/// (a walk must not hold up a scrape), and the figures handed back.
pub(crate) fn measure_cpu(
    cpu: &mut CpuWatch,
    procs: &mut dyn Procs,
    agg: &Mutex<Aggregator>,
    now: Dur,
) {
    let Ok(inodes) = agg.lock().map(|a| a.cpu_candidates(cpu.cap())) else {
        return;
    };
    let figures = cpu.measure(procs, &inodes, now);
    if let Ok(mut a) = agg.lock() {
        a.set_cpu(&figures);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_ask_only_for_what_the_aggregator_reads() {
        assert_eq!(extensions(false), ext::INFO | ext::SKMEMINFO);
        assert_eq!(extensions(true), ext::INFO | ext::SKMEMINFO | ext::CONG);
        // Never the congestion control's own info (BBR's, filled for every socket asked).
        assert_eq!(extensions(true) & ext::VEGASINFO, 0);
    }
}
