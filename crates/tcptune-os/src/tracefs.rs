//! tracefs: the kernel's tracing file system, reached without disturbing anyone else using it.
//!
//! [`Tracefs::open`] uses a mounted tracefs (any mount point in /proc/self/mounts) or, when
//! none is mounted, mounts one on a private temporary directory and
//! unmounts it on drop, so the host's mount table ends as it began. [`Instance`] is a trace
//! instance of our own (`instances/tcptune-<pid>-<n>`): its own ring buffers, clock, enabled
//! events and filters, removed on drop. The top-level instance is never written to. What is
//! written (clock, events, filters) is decided by the caller; this layer only does the I/O.

use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::check;

/// Distinguishes instances and mount points made by one process.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// Prefix of the temporary mount points made here (then `<pid>-<n>`).
const MOUNT_PREFIX: &str = "tcptune-tracefs-";
/// Prefix of the instances made here (then `<pid>-<n>`).
const INSTANCE_PREFIX: &str = "tcptune-";

/// A tracefs mount: found, or mounted by us (then unmounted and its directory removed on drop).
#[derive(Debug)]
pub struct Tracefs {
    root: PathBuf,
    mounted_by_us: bool,
}

impl Tracefs {
    /// A mounted tracefs, or one mounted now on a private directory under the temporary
    /// directory. Errors are mount(2)'s: `PermissionDenied` without CAP_SYS_ADMIN,
    /// `ENODEV` (raw OS error) when the kernel has no tracefs.
    pub fn open() -> io::Result<Tracefs> {
        sweep_dead_mounts();
        let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        // Only what is mounted: looking into /sys/kernel/debug/tracing would make the kernel
        // automount tracefs there, changing the host's mount table for good.
        for root in tracefs_mount_points(&mounts) {
            if root.join("instances").is_dir() && root.join("events").is_dir() {
                return Ok(Tracefs {
                    root,
                    mounted_by_us: false,
                });
            }
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{MOUNT_PREFIX}{}-{n}", std::process::id()));
        fs::DirBuilder::new().mode(0o700).create(&dir)?;
        if let Err(e) = mount_tracefs(&dir) {
            let _ = fs::remove_dir(&dir);
            return Err(e);
        }
        Ok(Tracefs {
            root: dir,
            mounted_by_us: true,
        })
    }

    /// The mount point.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether this process mounted it (and will unmount it).
    pub fn mounted_by_us(&self) -> bool {
        self.mounted_by_us
    }

    /// A file under the mount point as text (an event's `format`, `events/header_page`).
    pub fn read(&self, rel: &str) -> io::Result<String> {
        read_text(&self.root.join(rel))
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_by_us {
            unmount(&self.root);
            let _ = fs::remove_dir(&self.root);
        }
    }
}

/// A tracefs file's text. Read with a large buffer: some of these files (`header_page`) end
/// after the first read(2) whatever its size, so the small first read `read_to_string` makes
/// for a file of size 0 would cut them short.
fn read_text(path: &Path) -> io::Result<String> {
    let f = fs::File::open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match crate::fs::read(f.as_fd(), &mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(out).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Mount points of type tracefs in a /proc/self/mounts text (octal escapes undone).
pub fn tracefs_mount_points(mounts: &str) -> Vec<PathBuf> {
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let (_dev, at, kind) = (f.next()?, f.next()?, f.next()?);
            (kind == "tracefs").then(|| PathBuf::from(unescape_mount_path(at)))
        })
        .collect()
}

/// /proc/mounts writes space, tab, newline and backslash in a path as `\ooo` octal.
fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], oct) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |a, c| a.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn mount_tracefs(dir: &Path) -> io::Result<()> {
    let target = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mount point has a NUL"))?;
    // SAFETY: all strings are NUL-terminated and alive across the call; tracefs takes no
    // data (null); flags 0 is a plain new mount.
    check(unsafe {
        libc::mount(
            c"tracefs".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    })
}

/// Unmounts `dir`; lazily (MNT_DETACH) when something still holds it, so a drop never fails.
fn unmount(dir: &Path) {
    let Ok(target) = CString::new(dir.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: a NUL-terminated path alive across the calls; plain flags.
    if unsafe { libc::umount2(target.as_ptr(), 0) } != 0 {
        // SAFETY: as above.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// The pid in a name `<prefix><pid>-<n>` made by this module.
fn owner_pid(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Whether process `pid` is alive (its /proc entry: unlike kill(2) with signal 0, this does
/// not mistake another user's process for a dead one).
fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Mount points left by a process of ours that died before unmounting (kill -9).
fn sweep_dead_mounts() {
    let Ok(mounts) = fs::read_to_string("/proc/self/mounts") else {
        return;
    };
    let tmp = std::env::temp_dir();
    for at in tracefs_mount_points(&mounts) {
        let name = at.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if at.parent() == Some(tmp.as_path()) {
            if let Some(pid) = owner_pid(name, MOUNT_PREFIX) {
                if !alive(pid) {
                    unmount(&at);
                    let _ = fs::remove_dir(&at);
                }
            }
        }
    }
}

/// A trace instance of our own under a tracefs; removed (after its pipes close) on drop.
#[derive(Debug)]
pub struct Instance {
    dir: PathBuf,
    name: String,
    pipes: Vec<OwnedFd>,
    /// Dropped after the instance is removed (fields drop after `Drop::drop`).
    fs: Tracefs,
}

impl Instance {
    /// Creates `instances/tcptune-<pid>-<n>` (removing first any left by dead processes).
    pub fn create(fs: Tracefs) -> io::Result<Instance> {
        let instances = fs.root.join("instances");
        if let Ok(rd) = fs::read_dir(&instances) {
            for e in rd.flatten() {
                let name = e.file_name();
                let name = name.to_str().unwrap_or("");
                if owner_pid(name, INSTANCE_PREFIX).is_some_and(|p| !alive(p)) {
                    let _ = fs::remove_dir(e.path());
                }
            }
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("{INSTANCE_PREFIX}{}-{n}", std::process::id());
        let dir = instances.join(&name);
        fs::create_dir(&dir)?;
        Ok(Instance {
            dir,
            name,
            pipes: Vec::new(),
            fs,
        })
    }

    /// The instance's name (under `instances/`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The tracefs it lives in.
    pub fn tracefs(&self) -> &Tracefs {
        &self.fs
    }

    /// Whether the instance has this file (e.g. `events/tcp/tcp_rcvbuf_grow/enable`).
    pub fn has(&self, rel: &str) -> bool {
        self.dir.join(rel).exists()
    }

    /// Writes `value` to one of the instance's control files in a single write(2), as tracefs
    /// wants (a filter's syntax error comes back as `InvalidInput`).
    pub fn write(&self, rel: &str, value: &str) -> io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.dir.join(rel))?;
        f.write_all(value.as_bytes())
    }

    /// A control file of the instance as text.
    pub fn read(&self, rel: &str) -> io::Result<String> {
        read_text(&self.dir.join(rel))
    }

    /// Opens every CPU's `per_cpu/cpuN/trace_pipe_raw`, non-blocking; the instance keeps them
    /// (closed before it is removed). Returns how many.
    pub fn open_pipes(&mut self) -> io::Result<usize> {
        let mut cpus: Vec<u32> = fs::read_dir(self.dir.join("per_cpu"))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
            .collect();
        cpus.sort_unstable();
        self.pipes.clear();
        for cpu in cpus {
            let f = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(self.dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw")))?;
            self.pipes.push(f.into());
        }
        Ok(self.pipes.len())
    }

    /// The open per-CPU pipes.
    pub fn pipes(&self) -> &[OwnedFd] {
        &self.pipes
    }

    /// One read(2) of pipe `i` into `buf` (a whole ring-buffer page fits); 0 or
    /// `WouldBlock` when nothing is ready.
    pub fn read_pipe(&self, i: usize, buf: &mut [u8]) -> io::Result<usize> {
        let fd = self
            .pipes
            .get(i)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no such CPU pipe"))?;
        crate::fs::read(fd.as_fd(), buf)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // An instance with open files is busy (EBUSY): close ours first. Disabling tracing
        // first stops the events feeding a buffer about to go.
        let _ = self.write("tracing_on", "0");
        self.pipes.clear();
        let _ = fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tracefs_mount_points_with_escapes() {
        let mounts = "sysfs /sys sysfs rw 0 0\n\
                      tracefs /sys/kernel/tracing tracefs rw,nosuid 0 0\n\
                      nodev /tmp/with\\040space tracefs rw 0 0\n\
                      debugfs /sys/kernel/debug debugfs rw 0 0\n";
        assert_eq!(
            tracefs_mount_points(mounts),
            vec![
                PathBuf::from("/sys/kernel/tracing"),
                PathBuf::from("/tmp/with space")
            ]
        );
    }

    #[test]
    fn owner_pid_reads_only_our_names() {
        assert_eq!(owner_pid("tcptune-123-4", INSTANCE_PREFIX), Some(123));
        assert_eq!(owner_pid("tcptune-tracefs-77-0", MOUNT_PREFIX), Some(77));
        assert_eq!(owner_pid("tcptune-x-4", INSTANCE_PREFIX), None);
        assert_eq!(owner_pid("foo-1-2", INSTANCE_PREFIX), None);
        assert_eq!(owner_pid("tcptune-1", INSTANCE_PREFIX), None);
    }
}
