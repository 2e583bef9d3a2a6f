//! The `cpu` class: whether the process behind an application-limited socket had nothing to
//! send or could not keep up. The engine decides it from that process's CPU time and
//! run-queue wait (a host-wide figure alone does not: a busy neighbour is not our limit), and
//! finding a socket's process means walking `/proc/*/fd`, a cost that grows with every
//! descriptor on the host. So the poller measures at a bounded rate: every `every` polls, for
//! at most `cap` sockets the aggregator names (those whose time went to `application` or
//! `cpu`: the only ones the figure can change), walking `/proc` only for sockets whose owner
//! is not cached yet (owners found and not found are both remembered while the socket stays a
//! candidate), and reading each owner's threads' `schedstat`. A process is measured over the
//! time between two refreshes, so its figure appears from the second one on. The I/O is behind
//! [`Procs`], so tests run on a scripted one and a virtual clock.

use std::collections::{HashMap, HashSet};

use tcptune_diagnose::engine::{CpuScope, CpuUse, End};
use tcptune_kernel::cpustat::ThreadTimes;
use tcptune_model::Dur;

/// Polls between two measurements (10 s at the default 1 s interval).
pub const EVERY: u32 = 10;
/// The most sockets whose processes are measured at once.
pub const CAP: usize = 64;
/// A thread that ran or waited to run this share of the time or more is one doing the work.
const WORKING: f64 = 0.1;

/// What the measurement reads from `/proc`.
pub trait Procs {
    /// The processes holding the given socket inodes open (a walk of `/proc/*/fd`).
    fn owners(&mut self, inodes: &HashSet<u32>) -> HashMap<u32, u32>;
    /// The threads' CPU and wait times of process `pid` now (`None`: gone, or no schedstats).
    fn times(&mut self, pid: u32) -> Option<ThreadTimes>;
}

/// The host's `/proc`.
pub struct SysProcs;

impl Procs for SysProcs {
    fn owners(&mut self, inodes: &HashSet<u32>) -> HashMap<u32, u32> {
        tcptune_kernel::procs::owners(inodes)
            .into_iter()
            .map(|(inode, o)| (inode, o.pid))
            .collect()
    }
    fn times(&mut self, pid: u32) -> Option<ThreadTimes> {
        ThreadTimes::of(pid)
    }
}

/// The measurement's state between refreshes.
pub struct CpuWatch {
    every: u32,
    cap: usize,
    /// The host's CPUs: the most cores a process can use.
    ncpu: f64,
    polls: u32,
    /// Socket inode → its process (`None`: not found by the last walk).
    owner: HashMap<u32, Option<u32>>,
    /// Each measured process's last reading and when it was taken.
    last: HashMap<u32, (Dur, ThreadTimes)>,
    walks: u64,
}

impl CpuWatch {
    /// A watch that looks every `every` polls, at up to `cap` sockets a time, on a host with
    /// `ncpu` CPUs (what a process's CPU share is measured against).
    pub fn new(every: u32, cap: usize, ncpu: usize) -> CpuWatch {
        CpuWatch {
            every: every.max(1),
            cap,
            ncpu: ncpu.max(1) as f64,
            polls: 0,
            owner: HashMap::new(),
            last: HashMap::new(),
            walks: 0,
        }
    }

    /// The most sockets to name per measurement.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Counts a poll: whether this one measures (the first, then every `every`th).
    pub fn due(&mut self) -> bool {
        let due = self.polls % self.every == 0;
        self.polls = self.polls.wrapping_add(1);
        due
    }

    /// Walks of `/proc` made so far.
    pub fn walks(&self) -> u64 {
        self.walks
    }

    /// Measures the processes of the sockets `inodes` at `now`: each socket's process's CPU
    /// figure (as the sending end: the chronographs the exporter reads are of the local
    /// socket's sending side), for processes read at the previous measurement too.
    pub fn measure(
        &mut self,
        procs: &mut dyn Procs,
        inodes: &[u32],
        now: Dur,
    ) -> HashMap<u32, CpuUse> {
        let wanted: HashSet<u32> = inodes
            .iter()
            .copied()
            .filter(|&i| i != 0)
            .take(self.cap)
            .collect();
        self.owner.retain(|i, _| wanted.contains(i));
        let unknown: HashSet<u32> = wanted
            .iter()
            .copied()
            .filter(|i| !self.owner.contains_key(i))
            .collect();
        if !unknown.is_empty() {
            self.walks += 1;
            let found = procs.owners(&unknown);
            for i in unknown {
                self.owner.insert(i, found.get(&i).copied());
            }
        }
        let pids: HashSet<u32> = self.owner.values().flatten().copied().collect();
        self.last.retain(|p, _| pids.contains(p));
        let mut by_pid = HashMap::new();
        for pid in pids {
            let Some(cur) = procs.times(pid) else {
                self.last.remove(&pid);
                continue;
            };
            if let Some(c) = self
                .last
                .get(&pid)
                .and_then(|prev| self.figure(prev, &cur, now))
            {
                by_pid.insert(pid, c);
            }
            self.last.insert(pid, (now, cur));
        }
        self.owner
            .iter()
            .filter_map(|(&i, p)| Some((i, *by_pid.get(&(*p)?)?)))
            .collect()
    }

    /// A process's figure from its reading `prev` to `cur`, taken at `now`.
    fn figure(&self, prev: &(Dur, ThreadTimes), cur: &ThreadTimes, now: Dur) -> Option<CpuUse> {
        let wall = now.secs() - prev.0.secs();
        if wall <= 0.0 {
            return None;
        }
        let (ran, waited) = prev.1.until(cur);
        // The cores it could use are its threads doing the work (running or waiting to run a
        // tenth of the time or more), not every thread it has: most servers keep idle ones.
        let working = prev
            .1
            .each_until(cur)
            .filter(|(r, w)| (*r + *w).as_secs_f64() >= WORKING * wall)
            .count();
        Some(CpuUse {
            end: End::Sender,
            scope: CpuScope::Process,
            percent: ran.as_secs_f64() / wall * 100.0,
            cores: (working as f64).clamp(1.0, self.ncpu),
            softirq_percent: None,
            wait_percent: Some(waited.as_secs_f64() / wall * 100.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted `/proc`: owners by inode, and each process's one thread's (run, wait) ns,
    /// which the test advances.
    #[derive(Default)]
    struct Script {
        owners: HashMap<u32, u32>,
        times: HashMap<u32, (u64, u64)>,
        walked: Vec<HashSet<u32>>,
    }

    impl Procs for Script {
        fn owners(&mut self, inodes: &HashSet<u32>) -> HashMap<u32, u32> {
            self.walked.push(inodes.clone());
            inodes
                .iter()
                .filter_map(|i| Some((*i, *self.owners.get(i)?)))
                .collect()
        }
        fn times(&mut self, pid: u32) -> Option<ThreadTimes> {
            let t = *self.times.get(&pid)?;
            Some(ThreadTimes::new(HashMap::from([(pid, t)])))
        }
    }

    fn s(secs: u64) -> Dur {
        Dur::from_millis(secs * 1000)
    }

    #[test]
    fn measures_every_nth_poll() {
        let mut w = CpuWatch::new(10, CAP, 2);
        let due: Vec<bool> = (0..21).map(|_| w.due()).collect();
        let at: Vec<usize> = (0..21).filter(|&i| due[i]).collect();
        assert_eq!(at, [0, 10, 20]);
    }

    #[test]
    fn a_busy_owner_is_measured_from_the_second_reading_and_walks_are_cached() {
        // Sockets 11 and 12 belong to process 100, 13 to 200; 14 to no process we can see.
        let mut p = Script {
            owners: HashMap::from([(11, 100), (12, 100), (13, 200)]),
            times: HashMap::from([(100, (0, 0)), (200, (0, 0))]),
            ..Script::default()
        };
        let mut w = CpuWatch::new(10, CAP, 2);
        assert!(w.measure(&mut p, &[11, 12, 13, 14], s(10)).is_empty());
        assert_eq!(w.walks(), 1);
        // Over the next 10 s: process 100 ran 8 s and waited 1.5 s (one thread), 200 ran 1 s.
        p.times = HashMap::from([
            (100, (8_000_000_000, 1_500_000_000)),
            (200, (1_000_000_000, 0)),
        ]);
        let got = w.measure(&mut p, &[11, 12, 13, 14], s(20));
        assert_eq!(w.walks(), 1, "every owner was cached, found or not");
        assert_eq!(got.len(), 3);
        assert_eq!(got[&11], got[&12]);
        let busy = got[&11];
        assert!((busy.percent - 80.0).abs() < 1e-9, "{busy:?}");
        assert_eq!(
            busy.wait_percent.map(|w| (w * 1e6).round() / 1e6),
            Some(15.0)
        );
        assert_eq!(
            (busy.end, busy.scope, busy.cores),
            (End::Sender, CpuScope::Process, 1.0)
        );
        assert!((got[&13].percent - 10.0).abs() < 1e-9);
        // A new socket is walked for alone; one no longer named is forgotten.
        p.owners.insert(15, 200);
        let got = w.measure(&mut p, &[13, 15], s(30));
        assert_eq!(w.walks(), 2);
        assert_eq!(p.walked.last(), Some(&HashSet::from([15])));
        assert_eq!(
            got.keys().copied().collect::<HashSet<_>>(),
            HashSet::from([13, 15])
        );
        // Process 200 did nothing in those 10 s.
        assert_eq!(got[&15].percent, 0.0);
    }

    #[test]
    fn the_cores_a_process_could_use_are_its_working_threads() {
        /// Threads by id: (run, wait) ns.
        struct Threads(HashMap<u32, (u64, u64)>);
        impl Procs for Threads {
            fn owners(&mut self, inodes: &HashSet<u32>) -> HashMap<u32, u32> {
                inodes.iter().map(|&i| (i, 1)).collect()
            }
            fn times(&mut self, _: u32) -> Option<ThreadTimes> {
                Some(ThreadTimes::new(self.0.clone()))
            }
        }
        let mut p = Threads((1..=8).map(|t| (t, (0, 0))).collect());
        let mut w = CpuWatch::new(10, CAP, 4);
        w.measure(&mut p, &[5], s(0));
        // Over 10 s: one thread ran 9.5 s, one 0.5 s, six were idle (a server's pool).
        p.0.insert(1, (9_500_000_000, 0));
        p.0.insert(2, (500_000_000, 0));
        let one = w.measure(&mut p, &[5], s(10))[&5];
        assert_eq!(one.cores, 1.0);
        assert!((one.percent - 100.0).abs() < 1e-9);
        // Then all eight ran 2 s and waited 3 s each: capped at the host's 4 CPUs.
        for t in 1..=8 {
            let (r, w0) = p.0[&t];
            p.0.insert(t, (r + 2_000_000_000, w0 + 3_000_000_000));
        }
        let all = w.measure(&mut p, &[5], s(20))[&5];
        assert_eq!(all.cores, 4.0);
        assert!((all.percent - 160.0).abs() < 1e-9);
    }

    #[test]
    fn at_most_cap_sockets_and_a_vanished_process_gives_no_figure() {
        let mut p = Script {
            owners: (1..=10).map(|i| (i, 300)).collect(),
            times: HashMap::from([(300, (0, 0))]),
            ..Script::default()
        };
        let mut w = CpuWatch::new(10, 4, 2);
        let all: Vec<u32> = (1..=10).collect();
        w.measure(&mut p, &all, s(10));
        assert_eq!(p.walked[0].len(), 4);
        p.times.clear();
        assert!(w.measure(&mut p, &all, s(20)).is_empty());
        // Back (a reading again): a baseline first, not a figure against the old reading.
        p.times = HashMap::from([(300, (5_000_000_000, 0))]);
        assert!(w.measure(&mut p, &all, s(30)).is_empty());
    }
}
