//! Sysctls: the one place that checks a dotted key, turns it into its `/proc/sys` path, reads
//! and writes it, and records the values a change replaces so they can be put back.
//!
//! `/proc/sys/net` follows the calling thread's network namespace: to work inside a named
//! namespace, call these on a thread that has entered it ([`crate::netns::in_netns`], or
//! `tcptune_kernel::sys::in_netns` by name).

use std::io;
use std::path::{Path, PathBuf};

/// Where the kernel shows its sysctls.
pub const ROOT: &str = "/proc/sys";

/// Checks that `key` is a dotted sysctl name (`net.ipv4.tcp_rmem`): ASCII letters, digits,
/// `_` and `-` between single dots, so its path cannot leave `/proc/sys`. Whether the kernel
/// has it is for [`exists`] to say.
pub fn check_key(key: &str) -> io::Result<()> {
    let ok = !key.is_empty()
        && !key.starts_with('.')
        && !key.ends_with('.')
        && !key.contains("..")
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad sysctl key {key:?}"),
        ))
    }
}

/// The `/proc/sys/…` path of a dotted key.
pub fn path(key: &str) -> io::Result<PathBuf> {
    check_key(key)?;
    Ok(Path::new(ROOT).join(key.replace('.', "/")))
}

/// The dotted key of a path relative to `/proc/sys` (`net/ipv4/tcp_rmem`).
pub fn key_of(rel: &str) -> String {
    rel.trim_matches('/').replace('/', ".")
}

/// Collapses the tabs and newline the kernel prints into single spaces, so values compare
/// (and show) as `sysctl` prints them.
pub fn normalize(raw: &str) -> String {
    raw.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The value exactly as the kernel prints it (a restore writes back these bytes).
pub fn read(key: &str) -> io::Result<String> {
    std::fs::read_to_string(path(key)?)
}

/// The value, whitespace-normalised.
pub fn read_value(key: &str) -> io::Result<String> {
    read(key).map(|v| normalize(&v))
}

/// Writes `value` in one write(2): /proc/sys parses each write separately.
pub fn write(key: &str, value: &str) -> io::Result<()> {
    std::fs::write(path(key)?, value.as_bytes())
}

/// Whether the kernel has `key`.
pub fn exists(key: &str) -> bool {
    path(key).is_ok_and(|p| p.is_file())
}

/// Where a sysctl lives, as seen from the calling thread's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Writable here (inside a namespace: one of that namespace's own).
    Writable,
    /// Read-only here (inside a namespace: a global such as net.core.rmem_max).
    ReadOnly,
    /// Not present in this kernel (not built in, or a name from a newer kernel).
    Missing,
}

/// Whether `key` can be written from the calling thread's namespace, only read, or is absent:
/// what a lab or `tune` checks before trying to set it.
pub fn scope(key: &str) -> Scope {
    use std::os::unix::fs::PermissionsExt;
    match path(key).and_then(std::fs::metadata) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o200 != 0 => Scope::Writable,
        Ok(m) if m.is_file() => Scope::ReadOnly,
        _ => Scope::Missing,
    }
}

/// Reads and writes sysctls somewhere: [`Here`], a namespace, or a fake in tests.
pub trait Access {
    /// The value exactly as the kernel prints it.
    fn read(&mut self, key: &str) -> io::Result<String>;
    /// Writes `value` as the kernel parses it (one write).
    fn write(&mut self, key: &str, value: &str) -> io::Result<()>;
}

/// The calling thread's namespace.
pub struct Here;

impl Access for Here {
    fn read(&mut self, key: &str) -> io::Result<String> {
        read(key)
    }
    fn write(&mut self, key: &str, value: &str) -> io::Result<()> {
        write(key, value)
    }
}

/// A sysctl changed: the value it had and the value it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Dotted name, e.g. `net.ipv4.tcp_rmem`.
    pub key: String,
    /// The value before the first change, as the kernel printed it; what a restore writes back.
    pub original: String,
    /// The value last written.
    pub value: String,
}

/// The sysctls a process changed, in the order it first changed them, with their originals:
/// restored newest first.
///
/// This is the lab's way (its global sysctl changes, recorded one at a time in its state and
/// restored at `down` unless changed since). `tune --apply` keeps its own snapshot file
/// (`tcptune_host::tune::Snapshot`), whose module says why: it is taken whole before any write, holds
/// device queue lengths and the namespace's identity, and its rollback is verified and stops
/// at the first failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// One entry per key, in the order each was first changed.
    pub changes: Vec<Change>,
}

/// How [`Snapshot::restore`] treats a sysctl whose value is no longer the one set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// Write the original back whatever the sysctl holds now.
    Always,
    /// Only where the sysctl still holds the value set: someone else may have changed it since,
    /// and theirs is kept.
    IfUnchanged,
}

impl Snapshot {
    /// Records that `key` is about to be set to `value`: its current value becomes the original
    /// the first time (a later change keeps the first original). Returns false, recording
    /// nothing, when `key` already holds `value`. The caller writes the value after saving the
    /// snapshot where a crash cannot lose it.
    pub fn record(&mut self, io: &mut dyn Access, key: &str, value: &str) -> io::Result<bool> {
        let now = io.read(key)?;
        if normalize(&now) == normalize(value) {
            return Ok(false);
        }
        match self.changes.iter_mut().find(|c| c.key == key) {
            Some(c) => c.value = value.into(),
            None => self.changes.push(Change {
                key: key.into(),
                original: now,
                value: value.into(),
            }),
        }
        Ok(true)
    }

    /// Writes the originals back, newest first; returns the changes restored.
    pub fn restore(&self, io: &mut dyn Access, how: Restore) -> Vec<&Change> {
        let mut restored = Vec::new();
        for c in self.changes.iter().rev() {
            let ours = how == Restore::Always
                || io
                    .read(&c.key)
                    .is_ok_and(|v| normalize(&v) == normalize(&c.value));
            if ours && io.write(&c.key, &c.original).is_ok() {
                restored.push(c);
            }
        }
        restored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn keys_stay_inside_proc_sys() {
        assert_eq!(
            path("net.ipv4.tcp_rmem").unwrap(),
            Path::new("/proc/sys/net/ipv4/tcp_rmem")
        );
        for bad in [
            "",
            ".",
            "net..core",
            "../../etc/passwd",
            "net/ipv4/tcp_rmem",
            ".net.core",
            "net.core.",
            "net.core.rmem max",
            "net.core\0",
        ] {
            assert!(path(bad).is_err(), "{bad:?} was accepted");
            assert!(!exists(bad));
        }
        assert_eq!(key_of("/net/ipv4/tcp_rmem"), "net.ipv4.tcp_rmem");
        assert_eq!(normalize("4096\t131072\t6291456\n"), "4096 131072 6291456");
    }

    #[test]
    fn this_kernel_has_what_every_linux_has() {
        assert!(exists("kernel.osrelease"));
        assert!(!exists("net.ipv4.no_such_sysctl"));
        assert!(!read_value("kernel.osrelease").unwrap().is_empty());
        assert_eq!(scope("net.ipv4.no_such_sysctl"), Scope::Missing);
        assert_eq!(scope("kernel.osrelease"), Scope::ReadOnly);
    }

    struct Fake(BTreeMap<String, String>);
    impl Access for Fake {
        fn read(&mut self, key: &str) -> io::Result<String> {
            self.0
                .get(key)
                .cloned()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        }
        fn write(&mut self, key: &str, value: &str) -> io::Result<()> {
            self.0.insert(key.into(), value.into());
            Ok(())
        }
    }

    #[test]
    fn a_snapshot_keeps_the_first_original_and_restores_what_is_still_ours() {
        let mut io = Fake(BTreeMap::from([
            ("a".to_string(), "1\n".to_string()),
            ("b".to_string(), "4096\t8192\n".to_string()),
        ]));
        let before = io.0.clone();
        let mut s = Snapshot::default();
        assert!(!s.record(&mut io, "b", "4096 8192").unwrap(), "same value");
        for (k, v) in [("a", "2"), ("b", "1 2"), ("a", "3")] {
            assert!(s.record(&mut io, k, v).unwrap());
            io.write(k, v).unwrap();
        }
        assert_eq!(s.changes.len(), 2);
        assert_eq!(s.changes[0].original, "1\n");
        assert_eq!(s.changes[0].value, "3");
        assert!(s.record(&mut io, "missing", "1").is_err());
        // Someone else changed b since: theirs stays.
        io.write("b", "7").unwrap();
        let restored = s.restore(&mut io, Restore::IfUnchanged);
        assert_eq!(restored.len(), 1);
        assert_eq!(io.0["a"], before["a"]);
        assert_eq!(io.0["b"], "7");
        s.restore(&mut io, Restore::Always);
        assert_eq!(io.0, before);
    }
}
