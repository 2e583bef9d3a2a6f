//! Turning an audit into a change: a [`Plan`] printed as a sysctl.d drop-in and `ip` commands,
//! applied with a [`Snapshot`] of every value it touches, and rolled back exactly.
//!
//! All writes go through [`HostIo`], so the apply/rollback logic (including the rollback of a
//! failure midway) is tested with a fake, and the live implementation is small.
//!
//! Apply and rollback hold an exclusive lock (`flock` on `<snapshot>.lock`) for their whole
//! run, so two of them on one snapshot cannot interleave: a second apply sees the first one's
//! snapshot and refuses. The snapshot is written to a temporary file, synced and renamed into
//! place before the first change. It records the namespace it was taken in (name and inode),
//! and a rollback restores only there.
//!
//! Why [`Snapshot`] is not [`tcptune_os::sysctl::Snapshot`] (the lab's), although both put
//! sysctls back (reading and writing them, and checking their keys, is `tcptune_os::sysctl` for
//! both): a tune snapshot is taken whole, of every value the plan touches, before the first
//! write, and kept on disk under a lock as a file whose format is published (`schema/`); it
//! also holds device queue lengths and the identity of the namespace it was taken in. Its
//! rollback is exact and verified: every original is written back whatever holds now, each must
//! read back byte for byte, and the first failure stops it with the file kept. The lab's
//! snapshot records lazily, one change at a time with the value it set, inside the lab's state,
//! and its `down` restores only values nobody changed since, best effort, because it must still
//! remove the rest of the lab.

use std::io;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_kernel::sys::NetnsSysctls;
use tcptune_os::sysctl::Access;

use crate::audit::{Action, Audit};

/// One change of the plan, with the value it replaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PlannedChange {
    /// The change.
    pub action: Action,
    /// The value now, as the audit read it.
    pub current: String,
    /// Why (the audit finding's sentence).
    pub why: String,
}

/// What `tune` will do.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Plan {
    /// The network namespace it applies in (`None`: the caller's own).
    pub netns: Option<String>,
    /// Changes this host (or namespace) can make.
    pub changes: Vec<PlannedChange>,
    /// Global settings a namespace cannot change: to be set on the host itself.
    pub host_only: Vec<PlannedChange>,
    /// The sysctl.d drop-in text.
    pub dropin: String,
    /// The `ip` commands for interface changes.
    pub ip_commands: Vec<String>,
}

/// A value the plan refuses, with the range it accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refusing {what} = {value}: {why}")]
pub struct Refused {
    /// The setting.
    pub what: String,
    /// The value refused.
    pub value: String,
    /// Why, with the range accepted.
    pub why: String,
}

/// Checks a change against sane ranges before anything is written.
pub fn validate(action: &Action) -> Result<(), Refused> {
    let refuse = |what: &str, value: &str, why: &str| {
        Err(Refused {
            what: what.into(),
            value: value.into(),
            why: why.into(),
        })
    };
    match action {
        Action::Sysctl { key, value, .. } => {
            let nums: Vec<Option<u64>> = value.split_whitespace().map(|v| v.parse().ok()).collect();
            let short = key.rsplit('.').next().unwrap_or(key);
            match short {
                "tcp_rmem" | "tcp_wmem" => {
                    let [Some(min), Some(def), Some(max)] = nums[..] else {
                        return refuse(key, value, "give three byte counts: min default max");
                    };
                    if !(min <= def && def <= max) || min < 4096 || max > i32::MAX as u64 {
                        return refuse(key, value, "need 4096 ≤ min ≤ default ≤ max ≤ 2147483647");
                    }
                }
                "rmem_max" | "wmem_max" => match nums[..] {
                    [Some(v)] if (4096..=i32::MAX as u64).contains(&v) => {}
                    _ => return refuse(key, value, "need one byte count from 4096 to 2147483647"),
                },
                "tcp_congestion_control" => {
                    if value.is_empty()
                        || !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        return refuse(key, value, "need the name of a congestion control");
                    }
                }
                "tcp_retries2" => match nums[..] {
                    [Some(v)] if (8..=30).contains(&v) => {}
                    _ => return refuse(key, value, "need 8 to 30"),
                },
                _ => match nums[..] {
                    [Some(0..=2)] => {}
                    _ => return refuse(key, value, "this setting takes 0, 1 or 2"),
                },
            }
        }
        Action::Txqueuelen { dev, value } => {
            if !(1..=100_000).contains(value) {
                return refuse(
                    &format!("dev:{dev} txqueuelen"),
                    &value.to_string(),
                    "need 1 to 100000",
                );
            }
        }
    }
    Ok(())
}

/// Builds the plan from an audit's `change` findings.
pub fn plan(audit: &Audit) -> Result<Plan, Refused> {
    let mut changes = Vec::new();
    let mut host_only = Vec::new();
    for f in audit.changes() {
        let Some(action) = f.action.clone() else {
            continue;
        };
        validate(&action)?;
        let c = PlannedChange {
            action: action.clone(),
            current: f.current.clone(),
            why: f.why.clone(),
        };
        match action {
            Action::Sysctl { global: true, .. } if audit.netns.is_some() => host_only.push(c),
            _ => changes.push(c),
        }
    }
    let mut dropin = format!(
        "# Written by tcptune {} for a path of {} × {}, {} flow(s).\n# Roll back with `tcptune tune --rollback`; remove this file to drop the change at boot.\n",
        env!("CARGO_PKG_VERSION"),
        audit.input.rate_bps,
        audit.input.rtt_s,
        audit.input.flows
    );
    let mut ip_commands = Vec::new();
    let ip = match &audit.netns {
        Some(n) => format!("ip -n {n}"),
        None => "ip".into(),
    };
    for c in &changes {
        match &c.action {
            Action::Sysctl { key, value, .. } => {
                dropin.push_str(&format!("# was {}\n{key} = {value}\n", c.current));
            }
            Action::Txqueuelen { dev, value } => {
                ip_commands.push(format!("{ip} link set dev {dev} txqueuelen {value}"));
            }
        }
    }
    Ok(Plan {
        netns: audit.netns.clone(),
        changes,
        host_only,
        dropin,
        ip_commands,
    })
}

/// Reads and writes the values a plan touches. Values are kept exactly as the kernel prints
/// them, so a rollback writes back the same bytes it read.
pub trait HostIo {
    /// The named network namespace this works in (None: the caller's own).
    fn netns(&self) -> Option<&str>;
    /// The inode of that namespace (`/proc/self/ns/net` inside it): tells a namespace from one
    /// deleted and created again under the same name.
    fn netns_inode(&mut self) -> io::Result<u64>;
    /// Reads a sysctl, as /proc/sys prints it.
    fn read_sysctl(&mut self, key: &str) -> io::Result<String>;
    /// Writes a sysctl.
    fn write_sysctl(&mut self, key: &str, value: &str) -> io::Result<()>;
    /// Reads an interface's txqueuelen.
    fn read_txqueuelen(&mut self, dev: &str) -> io::Result<u32>;
    /// Sets an interface's txqueuelen.
    fn write_txqueuelen(&mut self, dev: &str, value: u32) -> io::Result<()>;
}

/// The values a change replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Snapshot {
    /// The named namespace it was taken in (None: the host's own).
    pub netns: Option<String>,
    /// That namespace's inode when the snapshot was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns_inode: Option<u64>,
    /// Seconds since the Unix epoch when it was taken.
    pub taken_unix_s: u64,
    /// Sysctl keys and their exact previous contents (as /proc/sys printed them).
    pub sysctls: Vec<(String, String)>,
    /// Interfaces and their previous txqueuelen.
    pub txqueuelen: Vec<(String, u32)>,
}

/// Why applying or rolling back failed. An I/O cause is chained as the `source`, not repeated
/// in the message: the binary prints the chain (`{:#}`) once, after the message.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(
        "a snapshot already exists at {0}: roll it back first (`tcptune tune --rollback`) so the original values are not lost"
    )]
    /// A snapshot from an earlier apply is still there.
    SnapshotExists(String),
    /// No snapshot to roll back.
    #[error("no snapshot at {0}: nothing to roll back")]
    NoSnapshot(String),
    /// A value could not be read before changing it.
    #[error("cannot read {what}")]
    Read {
        /// The value.
        what: String,
        /// Why.
        source: io::Error,
    },
    /// Applying a value failed; those already changed were restored.
    #[error("the {restored} value(s) already changed were restored after applying {what} failed")]
    Midway {
        /// The value that failed.
        what: String,
        /// Why.
        source: io::Error,
        /// How many values were restored.
        restored: usize,
    },
    /// Applying a value failed, and so did restoring those already changed.
    #[error("the snapshot is kept at {snapshot}: restoring failed ({restore}) after applying {what} failed")]
    RestoreFailed {
        /// The value that failed.
        what: String,
        /// Why.
        source: io::Error,
        /// Why restoring failed.
        restore: String,
        /// The snapshot kept, to roll back by hand.
        snapshot: String,
    },
    /// Restoring a value from the snapshot failed.
    #[error("rolling back {what} failed (the snapshot is kept)")]
    Rollback {
        /// The value.
        what: String,
        /// Why.
        source: io::Error,
    },
    /// The snapshot file could not be written, or is not a snapshot.
    #[error("snapshot file {path}: {why}")]
    SnapshotFile {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The snapshot file could not be read.
    #[error(transparent)]
    File(#[from] tcptune_kernel::file::FileError),
    #[error(
        "another `tcptune tune --apply` or `--rollback` is working on {0}; wait for it to finish"
    )]
    /// Another apply or rollback holds the snapshot's lock.
    Busy(String),
    /// The snapshot was taken in another namespace.
    #[error("the snapshot {path} was taken in {taken}, not in {here}; roll it back with {fix}")]
    WrongNetns {
        /// The snapshot file.
        path: String,
        /// Where it was taken.
        taken: String,
        /// Where this run works.
        here: String,
        /// The command that rolls it back.
        fix: String,
    },
    /// The namespace was deleted and made again since the snapshot was taken.
    #[error(
        "{netns} is not the namespace the snapshot {path} was taken in (it was deleted and made again, so the tuned values are gone with it); remove the stale snapshot"
    )]
    NetnsRecreated {
        /// The namespace.
        netns: String,
        /// The snapshot file.
        path: String,
    },
}

/// The largest snapshot file read (a snapshot holds a few dozen values).
pub const SNAPSHOT_LIMIT: u64 = 1 << 20;

/// An exclusive `flock` on `<snapshot>.lock`, released when dropped (and by the kernel if the
/// process dies, so a killed apply never leaves it held).
struct SnapshotLock {
    _file: std::fs::File,
}

fn lock_path(snapshot_path: &Path) -> std::path::PathBuf {
    let mut p = snapshot_path.as_os_str().to_owned();
    p.push(".lock");
    p.into()
}

fn lock(snapshot_path: &Path) -> Result<SnapshotLock, ApplyError> {
    use std::os::fd::AsFd;
    let err = |why: String| ApplyError::SnapshotFile {
        path: snapshot_path.display().to_string(),
        why,
    };
    if let Some(dir) = snapshot_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| err(format!("cannot create its directory: {e}")))?;
    }
    let lp = lock_path(snapshot_path);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lp)
        .map_err(|e| err(format!("cannot open the lock file {}: {e}", lp.display())))?;
    if let Err(e) = tcptune_os::fs::lock_exclusive_nonblocking(file.as_fd()) {
        return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            ApplyError::Busy(snapshot_path.display().to_string())
        } else {
            err(format!("cannot lock {}: {e}", lp.display()))
        });
    }
    Ok(SnapshotLock { _file: file })
}

fn place(netns: Option<&str>) -> String {
    match netns {
        Some(n) => format!("namespace {n}"),
        None => "the host's own namespace".into(),
    }
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Applies the plan's changes: snapshot first (written to `snapshot_path` before any change),
/// then each change; a failure midway restores what was already changed and removes the
/// snapshot, so the host is left as it was.
pub fn apply(
    plan: &Plan,
    io: &mut dyn HostIo,
    snapshot_path: &Path,
) -> Result<Snapshot, ApplyError> {
    let _lock = lock(snapshot_path)?;
    if snapshot_path.exists() {
        return Err(ApplyError::SnapshotExists(
            snapshot_path.display().to_string(),
        ));
    }
    let netns_inode = io.netns_inode().map_err(|source| ApplyError::Read {
        what: place(io.netns()),
        source,
    })?;
    let mut snap = Snapshot {
        netns: io.netns().map(str::to_string),
        netns_inode: Some(netns_inode),
        taken_unix_s: now_unix(),
        sysctls: vec![],
        txqueuelen: vec![],
    };
    for c in &plan.changes {
        match &c.action {
            Action::Sysctl { key, .. } => {
                let v = io.read_sysctl(key).map_err(|source| ApplyError::Read {
                    what: key.clone(),
                    source,
                })?;
                snap.sysctls.push((key.clone(), v));
            }
            Action::Txqueuelen { dev, .. } => {
                let v = io.read_txqueuelen(dev).map_err(|source| ApplyError::Read {
                    what: format!("dev:{dev} txqueuelen"),
                    source,
                })?;
                snap.txqueuelen.push((dev.clone(), v));
            }
        }
    }
    write_snapshot(&snap, snapshot_path)?;
    let mut done: Vec<&Action> = Vec::new();
    for c in &plan.changes {
        let r = match &c.action {
            Action::Sysctl { key, value, .. } => io.write_sysctl(key, value),
            Action::Txqueuelen { dev, value } => io.write_txqueuelen(dev, *value),
        };
        if let Err(source) = r {
            let what = describe(&c.action);
            let restored = done.len();
            return match restore(&snap, &done, io) {
                Ok(()) => {
                    let _ = std::fs::remove_file(snapshot_path);
                    Err(ApplyError::Midway {
                        what,
                        source,
                        restored,
                    })
                }
                Err(restore) => Err(ApplyError::RestoreFailed {
                    what,
                    source,
                    restore,
                    snapshot: snapshot_path.display().to_string(),
                }),
            };
        }
        done.push(&c.action);
    }
    Ok(snap)
}

fn describe(a: &Action) -> String {
    match a {
        Action::Sysctl { key, value, .. } => format!("{key} = {value}"),
        Action::Txqueuelen { dev, value } => format!("dev:{dev} txqueuelen {value}"),
    }
}

/// Writes back the snapshot's values for the actions in `done` (most recent first).
fn restore(snap: &Snapshot, done: &[&Action], io: &mut dyn HostIo) -> Result<(), String> {
    for a in done.iter().rev() {
        let r = match a {
            Action::Sysctl { key, .. } => {
                let old = snap
                    .sysctls
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v.as_str());
                old.map(|v| io.write_sysctl(key, v))
            }
            Action::Txqueuelen { dev, .. } => {
                let old = snap
                    .txqueuelen
                    .iter()
                    .find(|(d, _)| d == dev)
                    .map(|(_, v)| *v);
                old.map(|v| io.write_txqueuelen(dev, v))
            }
        };
        if let Some(Err(e)) = r {
            return Err(format!("{}: {e}", describe(a)));
        }
    }
    Ok(())
}

/// Restores every value of the snapshot at `snapshot_path`, checks each reads back identically,
/// then removes the snapshot.
pub fn rollback(io: &mut dyn HostIo, snapshot_path: &Path) -> Result<Snapshot, ApplyError> {
    let path = snapshot_path.display().to_string();
    let read =
        || match tcptune_kernel::file::read_text_limited(snapshot_path, SNAPSHOT_LIMIT, "snapshot")
        {
            Ok(t) => Ok(t),
            Err(e) if e.is_not_found() => Err(ApplyError::NoSnapshot(path.clone())),
            Err(e) => Err(e.into()),
        };
    // Refuse a missing file, a FIFO or a device before making a lock file beside it; then read
    // again under the lock, since an apply may have just replaced it.
    read()?;
    let _lock = lock(snapshot_path)?;
    let text = read()?;
    let snap = parse_snapshot(&text).map_err(|why| ApplyError::SnapshotFile {
        path: path.clone(),
        why,
    })?;
    if snap.netns.as_deref() != io.netns() {
        return Err(ApplyError::WrongNetns {
            path,
            taken: place(snap.netns.as_deref()),
            here: place(io.netns()),
            fix: match &snap.netns {
                Some(n) => format!("--netns {n}"),
                None => "no --netns".into(),
            },
        });
    }
    if let Some(want) = snap.netns_inode {
        let now = io.netns_inode().map_err(|source| ApplyError::Read {
            what: place(io.netns()),
            source,
        })?;
        if now != want {
            return Err(ApplyError::NetnsRecreated {
                netns: place(snap.netns.as_deref()),
                path,
            });
        }
    }
    for (key, old) in &snap.sysctls {
        io.write_sysctl(key, old)
            .map_err(|source| ApplyError::Rollback {
                what: key.clone(),
                source,
            })?;
        let now = io.read_sysctl(key).map_err(|source| ApplyError::Rollback {
            what: key.clone(),
            source,
        })?;
        if &now != old {
            return Err(ApplyError::Rollback {
                what: key.clone(),
                source: io::Error::other(format!("reads back {now:?}, expected {old:?}")),
            });
        }
    }
    for (dev, old) in &snap.txqueuelen {
        io.write_txqueuelen(dev, *old)
            .map_err(|source| ApplyError::Rollback {
                what: format!("dev:{dev} txqueuelen"),
                source,
            })?;
    }
    std::fs::remove_file(snapshot_path).map_err(|e| ApplyError::SnapshotFile {
        path,
        why: e.to_string(),
    })?;
    Ok(snap)
}

/// Parses a snapshot file's text; the error says why it is not one. Every value is checked
/// the way `apply` would write it, so a damaged snapshot is refused before any write.
pub fn parse_snapshot(text: &str) -> Result<Snapshot, String> {
    let snap: Snapshot =
        serde_json::from_str(text).map_err(|e| format!("not a tcptune snapshot ({e})"))?;
    for (key, value) in &snap.sysctls {
        tcptune_os::sysctl::check_key(key).map_err(|e| format!("not a tcptune snapshot ({e})"))?;
        if value.len() > 4096 || value.contains('\0') {
            return Err(format!(
                "not a tcptune snapshot (the value of {key} is not a sysctl value)"
            ));
        }
    }
    if let Some(n) = &snap.netns {
        if n.is_empty() || n.contains('/') || n == "." || n == ".." {
            return Err(format!("not a tcptune snapshot (bad namespace name {n:?})"));
        }
    }
    for (dev, _) in &snap.txqueuelen {
        if dev.is_empty() || dev.len() > 15 || dev.contains(['/', ' ', '\0']) {
            return Err(format!(
                "not a tcptune snapshot (bad interface name {dev:?})"
            ));
        }
    }
    Ok(snap)
}

/// Writes the snapshot to a temporary file, syncs it, renames it into place and syncs the
/// directory, so after a crash the snapshot is either absent (nothing was changed yet) or whole.
fn write_snapshot(snap: &Snapshot, path: &Path) -> Result<(), ApplyError> {
    use std::io::Write;
    let err = |why: String| ApplyError::SnapshotFile {
        path: path.display().to_string(),
        why,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let json = serde_json::to_vec_pretty(snap).map_err(|e| err(e.to_string()))?;
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&json).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e.to_string()));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| err(format!("cannot sync its directory: {e}")))?;
    }
    Ok(())
}

/// The live host (or a namespace of it): /proc/sys and `ip link`.
pub struct LiveHost {
    /// The named network namespace to work in (`None`: the caller's own).
    pub netns: Option<String>,
}

impl LiveHost {
    fn ip(&self) -> std::process::Command {
        let mut c = std::process::Command::new("ip");
        if let Some(n) = &self.netns {
            c.args(["-n", n]);
        }
        c
    }
}

impl HostIo for LiveHost {
    fn netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    fn netns_inode(&mut self) -> io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        match &self.netns {
            // The bind mount `ip netns add` made is the namespace file itself.
            Some(n) => std::fs::metadata(Path::new("/run/netns").join(n)).map(|m| m.ino()),
            None => std::fs::metadata("/proc/self/ns/net").map(|m| m.ino()),
        }
    }

    fn read_sysctl(&mut self, key: &str) -> io::Result<String> {
        NetnsSysctls(self.netns.as_deref()).read(key)
    }

    fn write_sysctl(&mut self, key: &str, value: &str) -> io::Result<()> {
        NetnsSysctls(self.netns.as_deref()).write(key, value)
    }

    fn read_txqueuelen(&mut self, dev: &str) -> io::Result<u32> {
        let out = self
            .ip()
            .args(["-j", "link", "show", "dev", dev])
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        let links: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(io::Error::other)?;
        links[0]["txqlen"]
            .as_u64()
            .map(|v| v as u32)
            .ok_or_else(|| io::Error::other(format!("ip did not report txqlen for {dev}")))
    }

    fn write_txqueuelen(&mut self, dev: &str, value: u32) -> io::Result<()> {
        let out = self
            .ip()
            .args(["link", "set", "dev", dev, "txqueuelen", &value.to_string()])
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        Ok(())
    }
}

/// The heading of a plan that has not been carried out.
pub const DRY_RUN_HEADING: &str =
    "# sysctl.d drop-in (dry run; --write installs it, --apply applies it now)";

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write_headed(f, DRY_RUN_HEADING)
    }
}

impl Plan {
    /// The plan as text under `heading`, which says what was done with it (a dry run, written,
    /// applied).
    pub fn write_headed(&self, f: &mut impl std::fmt::Write, heading: &str) -> std::fmt::Result {
        if self.changes.is_empty() && self.host_only.is_empty() {
            return writeln!(f, "Nothing to change.");
        }
        writeln!(f, "{heading}")?;
        write!(f, "{}", self.dropin)?;
        if !self.ip_commands.is_empty() {
            writeln!(f, "\n# ip commands")?;
            for c in &self.ip_commands {
                writeln!(f, "{c}")?;
            }
        }
        if !self.host_only.is_empty() {
            writeln!(
                f,
                "\n# global settings a namespace cannot change; set them on the host:"
            )?;
            for c in &self.host_only {
                writeln!(f, "#   {}", describe(&c.action))?;
            }
        }
        Ok(())
    }
}

/// Runs the snapshot reader on arbitrary bytes, as the `snapshot` fuzz target and its corpus
/// replay do: a snapshot it accepts must write back to the same snapshot. Returns the number of
/// values it holds; never panics on any input (other than a broken round trip, which is a bug).
#[doc(hidden)]
pub fn fuzz_one(data: &[u8]) -> usize {
    let Ok(text) = std::str::from_utf8(data) else {
        return 0;
    };
    let Ok(snap) = parse_snapshot(text) else {
        return 0;
    };
    let again = serde_json::to_string(&snap)
        .ok()
        .and_then(|t| parse_snapshot(&t).ok());
    assert_eq!(
        again.as_ref(),
        Some(&snap),
        "a snapshot reads back as written"
    );
    snap.sysctls.len() + snap.txqueuelen.len()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A host in memory that can be told to fail a given write.
    #[derive(Default)]
    struct FakeHost {
        sysctls: BTreeMap<String, String>,
        txq: BTreeMap<String, u32>,
        fail_on: Option<String>,
        netns: Option<String>,
        inode: u64,
    }

    impl HostIo for FakeHost {
        fn netns(&self) -> Option<&str> {
            self.netns.as_deref()
        }
        fn netns_inode(&mut self) -> io::Result<u64> {
            Ok(self.inode)
        }
        fn read_sysctl(&mut self, key: &str) -> io::Result<String> {
            self.sysctls
                .get(key)
                .cloned()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        }
        fn write_sysctl(&mut self, key: &str, value: &str) -> io::Result<()> {
            if self.fail_on.as_deref() == Some(key) {
                return Err(io::Error::from(io::ErrorKind::PermissionDenied));
            }
            self.sysctls.insert(key.into(), value.into());
            Ok(())
        }
        fn read_txqueuelen(&mut self, dev: &str) -> io::Result<u32> {
            self.txq
                .get(dev)
                .copied()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        }
        fn write_txqueuelen(&mut self, dev: &str, value: u32) -> io::Result<()> {
            self.txq.insert(dev.into(), value);
            Ok(())
        }
    }

    fn sysctl(key: &str, value: &str) -> PlannedChange {
        PlannedChange {
            action: Action::Sysctl {
                key: key.into(),
                value: value.into(),
                global: false,
            },
            current: String::new(),
            why: String::new(),
        }
    }

    fn plan_of(changes: Vec<PlannedChange>) -> Plan {
        Plan {
            netns: None,
            changes,
            host_only: vec![],
            dropin: String::new(),
            ip_commands: vec![],
        }
    }

    fn fake() -> FakeHost {
        let mut h = FakeHost::default();
        h.sysctls
            .insert("net.ipv4.tcp_rmem".into(), "4096\t131072\t6291456\n".into());
        h.sysctls.insert("net.ipv4.tcp_sack".into(), "0\n".into());
        h.sysctls
            .insert("net.ipv4.tcp_wmem".into(), "4096\t16384\t4194304\n".into());
        h.txq.insert("eth0".into(), 16000);
        h
    }

    #[test]
    fn apply_then_rollback_restores_byte_for_byte() {
        let dir = std::env::temp_dir().join(format!("tcptune-tune-{}-a", std::process::id()));
        let snap = dir.join("snap.json");
        let mut h = fake();
        let before = h.sysctls.clone();
        let mut p = plan_of(vec![
            sysctl("net.ipv4.tcp_rmem", "4096 131072 33554432"),
            sysctl("net.ipv4.tcp_sack", "1"),
        ]);
        p.changes.push(PlannedChange {
            action: Action::Txqueuelen {
                dev: "eth0".into(),
                value: 1000,
            },
            current: String::new(),
            why: String::new(),
        });
        apply(&p, &mut h, &snap).unwrap();
        assert_eq!(h.sysctls["net.ipv4.tcp_rmem"], "4096 131072 33554432");
        assert_eq!(h.txq["eth0"], 1000);
        assert!(snap.exists());
        // A second apply must not overwrite the snapshot of the original values.
        assert!(matches!(
            apply(&p, &mut h, &snap),
            Err(ApplyError::SnapshotExists(_))
        ));
        rollback(&mut h, &snap).unwrap();
        assert_eq!(h.sysctls, before);
        assert_eq!(h.txq["eth0"], 16000);
        assert!(!snap.exists());
        assert!(matches!(
            rollback(&mut h, &snap),
            Err(ApplyError::NoSnapshot(_))
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_failure_midway_restores_what_was_done_and_leaves_no_snapshot() {
        let dir = std::env::temp_dir().join(format!("tcptune-tune-{}-b", std::process::id()));
        let snap = dir.join("snap.json");
        let mut h = fake();
        h.fail_on = Some("net.ipv4.tcp_wmem".into());
        let before = h.sysctls.clone();
        let p = plan_of(vec![
            sysctl("net.ipv4.tcp_rmem", "4096 131072 33554432"),
            sysctl("net.ipv4.tcp_sack", "1"),
            sysctl("net.ipv4.tcp_wmem", "4096 16384 33554432"),
        ]);
        let e = apply(&p, &mut h, &snap).unwrap_err();
        assert!(matches!(e, ApplyError::Midway { restored: 2, .. }), "{e}");
        assert!(e.to_string().contains("net.ipv4.tcp_wmem"));
        assert_eq!(h.sysctls, before);
        assert!(!snap.exists());
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A host whose first sysctl read waits until the test lets it go, so a second apply can
    /// be started while the first is between its checks and its snapshot.
    struct GatedHost {
        inner: FakeHost,
        reached: std::sync::mpsc::Sender<()>,
        go: std::sync::mpsc::Receiver<()>,
    }

    impl HostIo for GatedHost {
        fn netns(&self) -> Option<&str> {
            None
        }
        fn netns_inode(&mut self) -> io::Result<u64> {
            Ok(0)
        }
        fn read_sysctl(&mut self, key: &str) -> io::Result<String> {
            let _ = self.reached.send(());
            let _ = self.go.recv();
            self.inner.read_sysctl(key)
        }
        fn write_sysctl(&mut self, key: &str, value: &str) -> io::Result<()> {
            self.inner.write_sysctl(key, value)
        }
        fn read_txqueuelen(&mut self, dev: &str) -> io::Result<u32> {
            self.inner.read_txqueuelen(dev)
        }
        fn write_txqueuelen(&mut self, dev: &str, value: u32) -> io::Result<()> {
            self.inner.write_txqueuelen(dev, value)
        }
    }

    #[test]
    fn a_second_apply_while_one_runs_is_refused_and_rollback_restores() {
        let dir = std::env::temp_dir().join(format!("tcptune-tune-{}-c", std::process::id()));
        let snap = dir.join("snap.json");
        let p = plan_of(vec![sysctl("net.ipv4.tcp_sack", "1")]);
        let (reached_tx, reached) = std::sync::mpsc::channel();
        let (go, go_rx) = std::sync::mpsc::channel();
        let mut first = GatedHost {
            inner: fake(),
            reached: reached_tx,
            go: go_rx,
        };
        std::thread::scope(|s| {
            let (p, snap) = (&p, &snap);
            let t = s.spawn(move || apply(p, &mut first, snap).map(|_| first.inner));
            // The first apply has passed its checks and is reading the values to save.
            reached.recv().unwrap();
            let mut second = fake();
            second
                .sysctls
                .insert("net.ipv4.tcp_sack".into(), "1\n".into());
            let e = apply(p, &mut second, snap).unwrap_err();
            assert!(matches!(e, ApplyError::Busy(_)), "{e}");
            assert!(e.to_string().contains("another `tcptune tune"), "{e}");
            go.send(()).unwrap();
            let mut host = t.join().unwrap().unwrap();
            assert_eq!(host.sysctls["net.ipv4.tcp_sack"], "1");
            // Now the snapshot exists: a later apply refuses rather than overwrite it.
            assert!(matches!(
                apply(p, &mut fake(), snap),
                Err(ApplyError::SnapshotExists(_))
            ));
            rollback(&mut host, snap).unwrap();
            assert_eq!(host.sysctls["net.ipv4.tcp_sack"], "0\n");
        });
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_snapshot_restores_only_in_the_namespace_it_was_taken_in() {
        let dir = std::env::temp_dir().join(format!("tcptune-tune-{}-d", std::process::id()));
        let snap = dir.join("snap.json");
        let p = plan_of(vec![sysctl("net.ipv4.tcp_sack", "1")]);
        let mut a = fake();
        a.netns = Some("nsa".into());
        a.inode = 11;
        apply(&p, &mut a, &snap).unwrap();
        let mut b = fake();
        b.netns = Some("nsb".into());
        b.inode = 12;
        let before_b = b.sysctls.clone();
        let e = rollback(&mut b, &snap).unwrap_err();
        assert!(matches!(e, ApplyError::WrongNetns { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("taken in namespace nsa, not in namespace nsb")
                && e.to_string().contains("--netns nsa"),
            "{e}"
        );
        assert_eq!(b.sysctls, before_b, "the other namespace is untouched");
        assert!(snap.exists(), "the snapshot is kept");
        // The host's own namespace is another namespace too.
        let e = rollback(&mut fake(), &snap).unwrap_err();
        assert!(matches!(e, ApplyError::WrongNetns { .. }), "{e}");
        // Same name, different namespace (deleted and made again): refused.
        let mut again = fake();
        again.netns = Some("nsa".into());
        again.inode = 99;
        let e = rollback(&mut again, &snap).unwrap_err();
        assert!(matches!(e, ApplyError::NetnsRecreated { .. }), "{e}");
        rollback(&mut a, &snap).unwrap();
        assert_eq!(a.sysctls["net.ipv4.tcp_sack"], "0\n");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_snapshot_that_is_a_device_a_fifo_or_damaged_is_refused_without_writing() {
        let dir = std::env::temp_dir().join(format!("tcptune-tune-{}-e", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut h = fake();
        let before = h.sysctls.clone();
        let e = rollback(&mut h, Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("is a character device"), "{e}");
        let fifo = dir.join("fifo");
        tcptune_os::fs::mkfifo(&fifo, 0o600).unwrap();
        let e = rollback(&mut h, &fifo).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        let bad = dir.join("bad.json");
        std::fs::write(
            &bad,
            r#"{"netns":null,"taken_unix_s":0,"sysctls":[["../../etc/passwd","x"]],"txqueuelen":[]}"#,
        )
        .unwrap();
        let e = rollback(&mut h, &bad).unwrap_err();
        assert!(e.to_string().contains("not a tcptune snapshot"), "{e}");
        assert_eq!(h.sysctls, before);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn insane_values_are_refused() {
        let s = |k: &str, v: &str| {
            validate(&Action::Sysctl {
                key: k.into(),
                value: v.into(),
                global: false,
            })
        };
        assert!(s("net.ipv4.tcp_rmem", "4096 131072 33554432").is_ok());
        assert!(s("net.ipv4.tcp_rmem", "4096 131072 1024").is_err());
        assert!(s("net.ipv4.tcp_rmem", "4096 131072 4294967296").is_err());
        assert!(s("net.ipv4.tcp_rmem", "big").is_err());
        assert!(s("net.core.rmem_max", "100").is_err());
        assert!(s("net.ipv4.tcp_sack", "7").is_err());
        assert!(s("net.ipv4.tcp_congestion_control", "bbr; rm").is_err());
        assert!(validate(&Action::Txqueuelen {
            dev: "x".into(),
            value: 0
        })
        .is_err());
    }
}
