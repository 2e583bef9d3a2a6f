//! Test support for privileged tests: uniquely named network namespaces that are removed when
//! the guard drops (also when the test panics), and a check that says clearly why a test skips.
//!
//! Names start with `tt-` and carry the process id and a counter, so parallel tests and
//! parallel test binaries never collide, and leftovers are recognisable.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod lines;
pub use lines::{line_channel, wait_for_line, NoLine};
pub mod cdp;
pub mod certs;
mod netns;
pub mod sock;
pub mod steal;
pub use netns::{run, veth_pair, Netns};
pub mod delay;
pub use delay::DelayLine;
mod tempdir;
use std::time::{Duration, Instant};
pub use tempdir::TempDir;

pub use tcptune_os::process::Signal;

/// Takes this test binary's one turn for tests that measure time or throughput: on a two-core
/// machine, two transfers (or two labs' emulators) at once starve each other and blur what
/// each test measures. A test that panicked while holding the turn does not block the others.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// True when the process can create network namespaces (root with CAP_SYS_ADMIN).
/// Prints why not, so a skipped test says so in the test log.
///
/// With `TCPTUNE_REQUIRE_PRIVILEGED` set (as `scripts/test` does when run as root), a missing
/// capability panics instead of skipping, so CI cannot pass by skipping.
pub fn privileged(test: &str) -> bool {
    let why = match privilege_problem() {
        None => return true,
        Some(why) => why,
    };
    if std::env::var_os("TCPTUNE_REQUIRE_PRIVILEGED").is_some() {
        panic!(
            "{test}: {why} (TCPTUNE_REQUIRE_PRIVILEGED is set, so this fails instead of skipping)"
        );
    }
    eprintln!("SKIP {test}: {why}");
    false
}

/// A cross-check cannot run because its reference tool (tshark, tcptrace, chromium) is
/// missing or not the version whose rules it compares against: prints SKIP, or, with
/// `TCPTUNE_REQUIRE_PRIVILEGED` set (as `scripts/test` does as root, and so CI), panics, so the
/// suite cannot pass without the check. `scripts/deps` installs every such tool.
pub fn skip_without_tool(test: &str, why: &str) {
    if std::env::var_os("TCPTUNE_REQUIRE_PRIVILEGED").is_some() {
        panic!(
            "{test}: {why} (TCPTUNE_REQUIRE_PRIVILEGED is set, so this fails instead of skipping)"
        );
    }
    eprintln!("SKIP {test}: {why}");
}

fn privilege_problem() -> Option<String> {
    if !is_root() {
        return Some("needs root to create network namespaces (CI runs as root)".into());
    }
    Netns::try_new("probe")
        .err()
        .map(|e| format!("cannot create a network namespace: {e}"))
}

/// Whether the tests run as root (the effective user id is 0).
pub fn is_root() -> bool {
    tcptune_os::process::geteuid() == 0
}

/// Sends `sig` to process `pid` (a child or a process of something the test started); a
/// process that has exited already is not an error.
pub fn signal(pid: u32, sig: Signal) {
    let _ = tcptune_os::process::kill(pid, sig);
}

/// Polls `cond` until true, for events without a notification; the deadline only bounds a
/// failure (it panics naming `what`).
pub fn wait_for(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + deadline;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

/// A child process killed and reaped when dropped, so a failing test leaves no server behind.
pub struct Kill(pub std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_is_removed_on_drop_even_after_a_panic() {
        if !privileged("namespace_is_removed_on_drop_even_after_a_panic") {
            return;
        }
        let name = std::panic::catch_unwind(|| {
            let ns = Netns::new("drop");
            let name = ns.name().to_string();
            assert!(std::path::Path::new("/run/netns").join(&name).exists());
            panic!("{name}");
        })
        .unwrap_err();
        let name = name.downcast_ref::<String>().unwrap();
        assert!(!std::path::Path::new("/run/netns").join(name).exists());
    }
}
