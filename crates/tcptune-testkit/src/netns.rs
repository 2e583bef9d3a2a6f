//! Uniquely named network namespaces removed when their guard drops, veth pairs joining two
//! of them, and the command runner they use; the namespace layer the rest of the kit builds on.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) static COUNTER: AtomicU32 = AtomicU32::new(0);

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
    /// Creates `tt-<purpose>-<pid>-<n>`; panics if it cannot (use [`crate::privileged`] first).
    pub fn new(purpose: &str) -> Netns {
        Self::try_new(purpose).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Netns::new`], but says why the namespace cannot be made (`ip` missing, no
    /// privilege) instead of panicking: [`crate::privileged`] probes with it.
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

    /// The namespace's name, for `ip netns exec NAME` and `setns` by name.
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
