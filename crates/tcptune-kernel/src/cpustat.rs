//! The machine's CPU time counters (the aggregate `cpu` line of `/proc/stat`): how busy every
//! CPU was between two readings, softirq and hypervisor steal included. The test reads it around
//! a loopback run (both ends on this host), benchmarks and timing tests for steal.

/// Clock ticks since boot, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// Not idle: user, nice, system, irq, softirq (guest time is already inside user).
    pub busy: u64,
    pub softirq: u64,
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

#[cfg(test)]
mod tests {
    use super::*;

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
