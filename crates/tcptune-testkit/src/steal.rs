//! CPU steal: on a VM, time the hypervisor ran something else while a vCPU wanted to run. No
//! process in the guest runs then, whatever its priority, so a timing figure taken while much
//! was stolen says more about the host than about the code. Benchmarks print it beside their
//! figures; timing tests print it when they fail and measure again when the machine starved
//! them ([`retry_when_starved`]), so a failure under heavy steal is told apart from a
//! regression.

/// The machine's CPU time counters from `/proc/stat` (the kernel crate's one reader):
/// (steal, total) in clock ticks.
pub fn cpu_ticks() -> (u64, u64) {
    let t = tcptune_kernel::cpustat::CpuTicks::now().unwrap_or_default();
    (t.steal, t.total)
}

/// Steal as a share of all CPU time between two [`cpu_ticks`] readings (0 when no time passed).
pub fn share(before: (u64, u64), after: (u64, u64)) -> f64 {
    let total = after.1.saturating_sub(before.1);
    if total == 0 {
        return 0.0;
    }
    after.0.saturating_sub(before.0) as f64 / total as f64
}

/// Share of CPU time stolen above which a failed timing measurement is taken again.
pub const STARVED: f64 = 0.05;

/// Runs a timing test's measurement `f`; if it panics while the hypervisor stole more than
/// [`STARVED`] of the CPU time, runs it again, up to three times in all. A failure with the CPU
/// available, or the third failure, is the test's failure. The assertion itself is never
/// loosened: only a run the machine demonstrably starved is not taken as evidence.
pub fn retry_when_starved<T>(what: &str, f: impl Fn() -> T) -> T {
    const ATTEMPTS: u32 = 3;
    for attempt in 1.. {
        let since = cpu_ticks();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(&f)) {
            Ok(v) => return v,
            Err(e) => {
                let stolen = share(since, cpu_ticks());
                eprintln!(
                    "{what}: attempt {attempt} failed while the hypervisor stole {:.1}% of CPU time",
                    100.0 * stolen
                );
                if stolen <= STARVED || attempt == ATTEMPTS {
                    std::panic::resume_unwind(e);
                }
            }
        }
    }
    unreachable!("the loop returns or unwinds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_share() {
        assert_eq!(share((0, 0), (35, 1000)), 0.035);
        assert_eq!(share((5, 10), (5, 10)), 0.0);
    }

    #[test]
    fn a_passing_measurement_runs_once_and_a_failure_with_the_cpu_available_is_final() {
        let runs = std::cell::Cell::new(0);
        retry_when_starved("ok", || runs.set(runs.get() + 1));
        assert_eq!(runs.get(), 1);
        // An immediate failure: no CPU time passes, so nothing was stolen and it is final.
        let runs = std::cell::Cell::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            retry_when_starved("fails", || {
                runs.set(runs.get() + 1);
                panic!("measured wrong")
            })
        }));
        assert!(r.is_err());
        assert!((1..=3).contains(&runs.get()), "{}", runs.get());
    }
}
