//! CPU steal: on a VM, time the hypervisor ran something else while a vCPU wanted to run. No
//! process in the guest runs then, whatever its priority, so a timing figure taken while much
//! was stolen says more about the host than about the code. Benchmarks print it beside their
//! figures; timing tests print it when they fail, so a failure under heavy steal is told apart
//! from a regression.

/// The machine's CPU time counters from `/proc/stat`: (steal, total) in clock ticks.
pub fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    parse_cpu_line(stat.lines().next().unwrap_or(""))
}

/// (steal, total) from the aggregate `cpu` line of `/proc/stat`.
fn parse_cpu_line(line: &str) -> (u64, u64) {
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal guest guest_nice: guest time is already
    // counted in user, so the total stops at steal.
    let total = fields.iter().take(8).sum();
    (fields.get(7).copied().unwrap_or(0), total)
}

/// Steal as a share of all CPU time between two [`cpu_ticks`] readings (0 when no time passed).
pub fn share(before: (u64, u64), after: (u64, u64)) -> f64 {
    let total = after.1.saturating_sub(before.1);
    if total == 0 {
        return 0.0;
    }
    after.0.saturating_sub(before.0) as f64 / total as f64
}

/// Held for a timing test's measurement: if the test panics while it is held, prints the share
/// of CPU time stolen since it was made.
pub struct Watch {
    what: &'static str,
    since: (u64, u64),
}

impl Watch {
    pub fn new(what: &'static str) -> Watch {
        Watch {
            what,
            since: cpu_ticks(),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{}: the hypervisor stole {:.1}% of CPU time while it ran",
                self.what,
                100.0 * share(self.since, cpu_ticks())
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_counter_and_guest_time_is_not_counted_twice() {
        let (steal, total) = parse_cpu_line("cpu  100 0 50 800 10 0 5 35 7 0");
        assert_eq!(steal, 35);
        assert_eq!(total, 100 + 50 + 800 + 10 + 5 + 35);
        assert_eq!(share((0, 0), (35, 1000)), 0.035);
        assert_eq!(share((5, 10), (5, 10)), 0.0);
        assert_eq!(parse_cpu_line(""), (0, 0));
    }
}
