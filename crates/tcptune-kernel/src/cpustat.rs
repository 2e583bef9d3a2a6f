//! The machine's CPU time counters (the aggregate `cpu` line of `/proc/stat`): how busy every
//! CPU was between two readings, softirq and hypervisor steal included. The test reads it around
//! a loopback run (both ends on this host), benchmarks and timing tests for steal.
//!
//! Also this process's run-queue wait ([`RunDelays`]): the time its threads were runnable but
//! waited for a CPU (`/proc/self/task/*/schedstat`, the scheduler's `run_delay`). A busy
//! neighbour turns a CPU-bound process's running time into waiting time, so running plus
//! waiting says whether it wanted the CPU, where running alone would say "92%, not bound".
//! [`ThreadTimes`] reads both, running and waiting, for any process (the exporter's `cpu`
//! class: the process behind an application-limited socket).

use std::collections::HashMap;
use std::time::Duration;

/// Clock ticks since boot, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// Not idle: user, nice, system, irq, softirq (guest time is already inside user).
    pub busy: u64,
    /// Softirq time (packet processing, much of it network receive), also inside `busy`.
    pub softirq: u64,
    /// Time a hypervisor ran someone else on our virtual CPUs.
    pub steal: u64,
    /// Everything up to steal (the fields after it repeat user time).
    pub total: u64,
}

impl CpuTicks {
    /// Reads `/proc/stat` now.
    pub fn now() -> Option<CpuTicks> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        CpuTicks::parse(stat.lines().next()?)
    }

    /// Parses the aggregate line: `cpu user nice system idle iowait irq softirq steal …`.
    pub fn parse(line: &str) -> Option<CpuTicks> {
        let mut it = line.split_whitespace();
        if it.next()? != "cpu" {
            return None;
        }
        let f: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
        let at = |i: usize| f.get(i).copied().unwrap_or(0);
        let (idle, iowait, steal) = (at(3), at(4), at(7));
        let total: u64 = f.iter().take(8).sum();
        Some(CpuTicks {
            busy: total.saturating_sub(idle + iowait + steal),
            softirq: at(6),
            steal,
            total,
        })
    }

    /// Shares of all CPU time between `self` (earlier) and `later`: (busy, softirq, steal);
    /// `None` when no time passed.
    pub fn shares_until(&self, later: &CpuTicks) -> Option<(f64, f64, f64)> {
        let total = later.total.checked_sub(self.total).filter(|&t| t > 0)? as f64;
        let d = |a: u64, b: u64| b.saturating_sub(a) as f64 / total;
        Some((
            d(self.busy, later.busy),
            d(self.softirq, later.softirq),
            d(self.steal, later.steal),
        ))
    }
}

/// `f` of each thread's `schedstat` in a `/proc/…/task` directory, by thread id; `None` when
/// there is none (no such process, or a kernel without schedstats).
fn each_thread<T>(dir: &str, f: impl Fn(&str) -> Option<T>) -> Option<HashMap<u32, T>> {
    let mut m = HashMap::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        // A thread that ended between the listing and the read has nothing to add.
        if let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) {
            if let Some(v) = f(&text) {
                m.insert(tid, v);
            }
        }
    }
    (!m.is_empty()).then_some(m)
}

/// Each thread's time on a CPU and time waiting for one (ns, `schedstat`'s first two fields)
/// of one process, by thread id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadTimes(HashMap<u32, (u64, u64)>);

impl ThreadTimes {
    /// Reads process `pid`'s threads now; `None` when it is gone or the kernel has no
    /// schedstats.
    pub fn of(pid: u32) -> Option<ThreadTimes> {
        let m = each_thread(&format!("/proc/{pid}/task"), ThreadTimes::parse)?;
        Some(ThreadTimes(m))
    }

    /// Times given by thread id (tests, recorded readings).
    pub fn new(threads: HashMap<u32, (u64, u64)>) -> ThreadTimes {
        ThreadTimes(threads)
    }

    /// (running, waiting) ns of one `schedstat` line: `runtime_ns run_delay_ns timeslices`.
    pub fn parse(line: &str) -> Option<(u64, u64)> {
        let mut f = line.split_whitespace().map(|x| x.parse::<u64>().ok());
        Some((f.next()??, f.next()??))
    }

    /// Threads read.
    pub fn threads(&self) -> usize {
        self.0.len()
    }

    /// Time on a CPU and time waiting for one since `self`, of the threads alive at `later`
    /// (a thread started in between counts whole; one that ended is lost, as with
    /// [`RunDelays`]).
    pub fn until(&self, later: &ThreadTimes) -> (Duration, Duration) {
        self.each_until(later)
            .fold((Duration::ZERO, Duration::ZERO), |(r, w), (r1, w1)| {
                (r + r1, w + w1)
            })
    }

    /// [`ThreadTimes::until`] of each thread alive at `later`.
    pub fn each_until<'a>(
        &'a self,
        later: &'a ThreadTimes,
    ) -> impl Iterator<Item = (Duration, Duration)> + 'a {
        later.0.iter().map(|(tid, &(r, w))| {
            let (r0, w0) = self.0.get(tid).copied().unwrap_or((0, 0));
            (
                Duration::from_nanos(r.saturating_sub(r0)),
                Duration::from_nanos(w.saturating_sub(w0)),
            )
        })
    }
}

/// The run-queue wait of each of this process's threads, by thread id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunDelays(HashMap<u32, u64>);

impl RunDelays {
    /// Reads every thread's `schedstat` now; `None` where the kernel has no schedstats.
    pub fn now() -> Option<RunDelays> {
        let m = each_thread("/proc/self/task", RunDelays::parse)?;
        Some(RunDelays(m))
    }

    /// The run delay (ns) of one `schedstat` line: `runtime_ns run_delay_ns timeslices`.
    pub fn parse(line: &str) -> Option<u64> {
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// The wait of the threads alive at `later` since `self`; a thread started in between
    /// counts whole. (Threads that ended in between are lost: read `later` before joining.)
    pub fn waited_until(&self, later: &RunDelays) -> Duration {
        let ns: u64 = later
            .0
            .iter()
            .map(|(tid, &d)| d.saturating_sub(self.0.get(tid).copied().unwrap_or(0)))
            .sum();
        Duration::from_nanos(ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_delay_is_the_second_field_and_new_threads_count_whole() {
        assert_eq!(RunDelays::parse("123456 7890 42\n"), Some(7890));
        assert_eq!(RunDelays::parse("123456"), None);
        let a = RunDelays(HashMap::from([(1, 100), (2, 50)]));
        let b = RunDelays(HashMap::from([(1, 400), (3, 25)]));
        // Thread 1 waited 300 more, thread 3 (new) 25; thread 2 ended and is not counted.
        assert_eq!(a.waited_until(&b), Duration::from_nanos(325));
        // This process has at least its own thread, and its run delay never goes down.
        let x = RunDelays::now().expect("schedstat");
        let y = RunDelays::now().expect("schedstat");
        assert!(x.waited_until(&y) < Duration::from_secs(1));
    }

    #[test]
    fn thread_times_of_a_process() {
        assert_eq!(ThreadTimes::parse("123456 7890 42\n"), Some((123456, 7890)));
        assert_eq!(ThreadTimes::parse("123456"), None);
        let a = ThreadTimes::new(HashMap::from([(1, (1000, 100)), (2, (500, 50))]));
        let b = ThreadTimes::new(HashMap::from([(1, (4000, 400)), (3, (250, 25))]));
        // Thread 1 ran 3000 and waited 300 more, thread 3 (new) 250 and 25; 2 ended.
        let (ran, waited) = a.until(&b);
        assert_eq!(ran, Duration::from_nanos(3250));
        assert_eq!(waited, Duration::from_nanos(325));
        // This process, read by its pid as any other.
        let me = ThreadTimes::of(std::process::id()).expect("schedstat");
        assert!(me.threads() >= 1);
        let later = ThreadTimes::of(std::process::id()).expect("schedstat");
        assert!(me.until(&later).0 < Duration::from_secs(1));
        assert_eq!(ThreadTimes::of(u32::MAX), None);
    }

    #[test]
    fn busy_softirq_and_steal_shares() {
        let a = CpuTicks::parse("cpu  100 0 50 800 10 0 20 20 0 0").unwrap();
        let b = CpuTicks::parse("cpu  200 0 100 850 10 0 70 70 5 0").unwrap();
        assert_eq!(a.total, 1000);
        assert_eq!(a.busy, 170);
        let (busy, soft, steal) = a.shares_until(&b).unwrap();
        // 300 ticks passed: 200 busy (100 user, 50 system, 50 softirq), 50 idle, 50 steal.
        assert!((busy - 200.0 / 300.0).abs() < 1e-9);
        assert!((soft - 50.0 / 300.0).abs() < 1e-9);
        assert!((steal - 50.0 / 300.0).abs() < 1e-9);
        assert_eq!(a.shares_until(&a), None);
        assert_eq!(CpuTicks::parse("cpu0 1 2 3"), None);
    }
}
