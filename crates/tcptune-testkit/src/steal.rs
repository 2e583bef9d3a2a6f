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
///
/// Only for tests of timing (a rate, a delay, a duration measured on the clock). A test of a
/// verdict, a diagnosis or a count must be right on its first run: a verdict wrong one time in
/// three would pass if it were retried.
pub fn retry_when_starved<T>(what: &str, f: impl Fn() -> T) -> T {
    retry_with(what, &mut cpu_ticks, f)
}

/// [`retry_when_starved`] with the CPU counters read by `ticks` (the tests give their own).
fn retry_with<T>(what: &str, ticks: &mut dyn FnMut() -> (u64, u64), f: impl Fn() -> T) -> T {
    const ATTEMPTS: u32 = 3;
    for attempt in 1.. {
        let since = ticks();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(&f)) {
            Ok(v) => return v,
            Err(e) => {
                let stolen = share(since, ticks());
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

    /// Counters that advance 1000 ticks per reading, `steal` of them stolen.
    fn clock(steal: u64) -> impl FnMut() -> (u64, u64) {
        let mut now = (0, 0);
        move || {
            now = (now.0 + steal, now.1 + 1000);
            now
        }
    }

    /// How many times `retry_with` ran a measurement that always fails, and that it failed.
    fn runs_of_a_failure(steal: u64) -> u32 {
        let runs = std::cell::Cell::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            retry_with("fails", &mut clock(steal), || {
                runs.set(runs.get() + 1);
                panic!("measured wrong")
            })
        }));
        assert!(
            r.is_err(),
            "a failure that is never retried away fails the test"
        );
        runs.get()
    }

    #[test]
    fn a_passing_measurement_runs_once_and_a_failure_with_the_cpu_available_is_final() {
        let runs = std::cell::Cell::new(0);
        retry_when_starved("ok", || runs.set(runs.get() + 1));
        assert_eq!(runs.get(), 1);
        // Nothing stolen, or exactly the threshold (5%): the first failure is the answer.
        assert_eq!(runs_of_a_failure(0), 1);
        assert_eq!(runs_of_a_failure(50), 1);
        // A run the hypervisor starved (6%, 50%) is taken again, three times in all, and the
        // third failure still fails.
        assert_eq!(runs_of_a_failure(60), 3);
        assert_eq!(runs_of_a_failure(500), 3);
    }

    #[test]
    fn a_starved_failure_then_a_pass_passes() {
        let runs = std::cell::Cell::new(0);
        let v = retry_with("flaky", &mut clock(500), || {
            runs.set(runs.get() + 1);
            assert!(runs.get() >= 2, "starved");
            7
        });
        assert_eq!((v, runs.get()), (7, 2));
    }

    /// The measurements the suite retries under steal, each a test of timing (a rate, a delay,
    /// an RTT, shares the emulator drew while it kept pace). A new use must be added here, and
    /// a test of a verdict, a diagnosis or a count must not be.
    const TIMING: &[&str] = &[
        "configured_rtt_matches_ping_and_tcp_min_rtt",
        "tcp_goodput_is_the_payload_share_of_the_rate",
        "window_limited_throughput_is_window_over_rtt",
        "loss_duplication_and_reordering_shares_are_inside_binomial_intervals",
        "queue_limit_bounds_the_delay_under_load",
        "host_line_rate_makes_txqueuelen_the_nic_queue",
        "join_delay",
        "window_limited_goodput_matches_window_over_rtt",
        "reno_under_random_loss_follows_mathis",
    ];

    #[test]
    fn only_timing_tests_are_retried() {
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        for krate in std::fs::read_dir(&crates).unwrap() {
            let Ok(dir) = std::fs::read_dir(krate.unwrap().path().join("tests")) else {
                continue;
            };
            for f in dir {
                let p = f.unwrap().path();
                if p.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, call) in text.match_indices("retry_when_starved(") {
                    // The name is the first string literal after the call.
                    let rest = &text[i + call.len()..];
                    let name = rest.split('"').nth(1).unwrap_or("").to_string();
                    found.push((p.display().to_string(), name));
                }
            }
        }
        assert!(found.len() >= TIMING.len(), "{found:?}");
        let wrong: Vec<_> = found
            .iter()
            .filter(|(_, name)| !TIMING.contains(&name.as_str()))
            .collect();
        assert!(
            wrong.is_empty(),
            "retried under steal but not a test of timing: {wrong:?}"
        );
    }
}
