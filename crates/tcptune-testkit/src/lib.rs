//! Test support for privileged tests: uniquely named network namespaces that are removed when
//! the guard drops (also when the test panics), and a check that says clearly why a test skips.
//!
//! Names start with `tt-` and carry the process id and a counter, so parallel tests and
//! parallel test binaries never collide, and leftovers are recognisable.

#![forbid(unsafe_code)]

use std::process::{Command, Output};

mod lines;
pub use lines::{line_channel, wait_for_line, NoLine};
pub mod sock;
pub mod steal;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub use tcptune_os::process::Signal;

pub(crate) static COUNTER: AtomicU32 = AtomicU32::new(0);

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

/// Runs a command and returns its output, panicking with the command line and stderr on failure.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    out
}

/// A network namespace that exists for the guard's lifetime. Loopback is up.
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates `tt-<purpose>-<pid>-<n>`; panics if it cannot (use [`privileged`] first).
    pub fn new(purpose: &str) -> Netns {
        Self::try_new(purpose).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_new(purpose: &str) -> Result<Netns, String> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let purpose: String = purpose
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(12)
            .collect();
        let name = format!("tt-{purpose}-{}-{n}", std::process::id());
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .map_err(|e| format!("cannot run ip: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ip netns add {name}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let ns = Netns { name };
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A `Command` that runs `argv` inside the namespace.
    pub fn command(&self, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).args(argv);
        c
    }

    /// Runs `argv` inside the namespace; panics with stderr if it fails.
    pub fn exec(&self, argv: &[&str]) -> Output {
        run(&mut self.command(argv))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace also deletes the devices inside it and their veth peers.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// A veth pair joining two namespaces with addresses from 198.18.0.0/15 (RFC 2544).
/// Returns the two addresses. The pair disappears with either namespace.
pub fn veth_pair(a: &Netns, b: &Netns, subnet_octet: u8) -> (String, String) {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let (va, vb) = (
        format!("tta{}x{n}", std::process::id() % 100000),
        format!("ttb{}x{n}", std::process::id() % 100000),
    );
    run(Command::new("ip").args([
        "link",
        "add",
        &va,
        "netns",
        a.name(),
        "type",
        "veth",
        "peer",
        "name",
        &vb,
        "netns",
        b.name(),
    ]));
    let (ia, ib) = (
        format!("198.18.{subnet_octet}.1"),
        format!("198.18.{subnet_octet}.2"),
    );
    a.exec(&["ip", "addr", "add", &format!("{ia}/24"), "dev", &va]);
    b.exec(&["ip", "addr", "add", &format!("{ib}/24"), "dev", &vb]);
    a.exec(&["ip", "link", "set", &va, "up"]);
    b.exec(&["ip", "link", "set", &vb, "up"]);
    (ia, ib)
}

pub mod delay;
pub use delay::DelayLine;

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
