//! The lab's OS edge: running `ip`, sysctls inside a namespace (through
//! `tcptune_kernel::sys::NetnsSysctls`, the one namespace-aware wrapper), finding and stopping
//! the lab's processes, and noticing SIGINT/SIGTERM during setup.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tcptune_kernel::sys::NetnsSysctls;
use tcptune_os::process::{self as sys_process, Signal};
use tcptune_os::sysctl::{self, Access};

use crate::LabError;

/// Runs a command; on failure the error names the command and quotes its stderr.
pub fn run(cmd: &mut Command) -> Result<String, LabError> {
    let out = cmd
        .output()
        .map_err(|e| LabError::Environment(format!("cannot run {cmd:?}: {e}")))?;
    if !out.status.success() {
        let args: Vec<String> = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return Err(LabError::Environment(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip ARGS…`.
pub fn ip(args: &[&str]) -> Result<String, LabError> {
    run(Command::new("ip").args(args))
}

/// Runs `f` on a helper thread inside the named network namespace (setns(2) changes only the
/// calling thread, so the caller stays where it is).
pub fn in_netns<T: Send>(
    ns: &str,
    f: impl FnOnce() -> std::io::Result<T> + Send,
) -> std::io::Result<T> {
    // The one setns-on-a-helper-thread implementation lives in the kernel crate.
    tcptune_kernel::sys::in_netns(ns, f).map_err(std::io::Error::other)?
}

/// Reads a sysctl in `ns` (None: the namespace this process is in), trimmed.
pub fn read_sysctl(ns: Option<&str>, key: &str) -> std::io::Result<String> {
    NetnsSysctls(ns).read(key).map(|v| v.trim().to_string())
}

/// Where a sysctl lives, as seen from inside `ns`: writable there (the namespace's own), or
/// read-only (a global such as net.core.rmem_max), or missing.
pub fn sysctl_scope(ns: &str, key: &str) -> std::io::Result<sysctl::Scope> {
    NetnsSysctls(Some(ns)).scope(key)
}

/// Writes a sysctl in `ns` (None: this process's namespace).
pub fn write_sysctl(ns: Option<&str>, key: &str, value: &str) -> Result<(), LabError> {
    NetnsSysctls(ns).write(key, value).map_err(|e| {
        LabError::Input(format!(
            "the kernel refused {key}={value} ({e}); check the value's format with `sysctl {key}`"
        ))
    })
}

/// Whether process `pid` exists.
pub fn alive(pid: u32) -> bool {
    sys_process::exists(pid)
}

/// When process `pid` started (field 22 of `/proc/PID/stat`, clock ticks since boot); with
/// the PID it names one process for good, since a PID can be reused after the process exits.
pub fn start_time(pid: u32) -> Option<u64> {
    stat_field(pid, 22)?.parse().ok()
}

/// The state of process `pid` (field 3 of `/proc/PID/stat`: R, S, D, T (stopped), Z
/// (exited, not yet reaped)…), None when there is no such process.
pub fn process_state(pid: u32) -> Option<char> {
    stat_field(pid, 3)?.chars().next()
}

/// Field `n` (1-based, as in proc(5)) of `/proc/PID/stat`, from field 3 on.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace()
        .nth(n.checked_sub(3)?)
        .map(str::to_string)
}

/// A pidfd of `pid` (readable once it has exited); None if there is no such process.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    sys_process::pidfd_open(pid).ok()
}

/// A process named for good: its PID and its start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessRef {
    /// The process id.
    pub pid: u32,
    /// Its start time, clock ticks since boot ([`start_time`]).
    pub start: u64,
}

impl ProcessRef {
    /// This process.
    pub fn me() -> ProcessRef {
        let pid = std::process::id();
        ProcessRef {
            pid,
            start: start_time(pid).unwrap_or(0),
        }
    }

    /// Still running (and not a later process that got the same PID).
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start)
    }
}

/// A pidfd of `p` (readable once it has exited), or, when `p` is already gone and its PID
/// free or reused, a descriptor that is readable at once. None if neither can be made.
pub fn pidfd(p: ProcessRef) -> Option<OwnedFd> {
    if let Some(fd) = pidfd_open(p.pid) {
        // Checked after opening: the pidfd now pins this PID, so if the start time matches,
        // it is the process we mean.
        if p.alive() {
            return Some(fd);
        }
    }
    // Gone: an eventfd with a count is always readable.
    sys_process::eventfd(1).ok()
}

/// Whether `fd` is readable now.
pub fn readable(fd: BorrowedFd<'_>) -> bool {
    tcptune_os::poll::wait_readable(fd, Duration::ZERO).unwrap_or(false)
}

/// Whether this process may build labs: namespaces need CAP_SYS_ADMIN and links
/// CAP_NET_ADMIN (root has both).
pub fn can_admin_network() -> bool {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    eff & (1 << CAP_NET_ADMIN) != 0 && eff & (1 << CAP_SYS_ADMIN) != 0
}

/// A process of some lab, recognised by its command line.
#[derive(Debug, Clone)]
pub struct LabProcess {
    /// The process id.
    pub pid: u32,
    /// `_emulator` or `_hog`.
    pub role: String,
    /// The lab it belongs to.
    pub lab: String,
}

/// Every process whose command line is `… lab _emulator|_hog --name LAB …`.
pub fn lab_processes() -> Vec<LabProcess> {
    let mut v = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return v;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = raw
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if let Some((role, lab)) = lab_role(&args) {
            v.push(LabProcess { pid, role, lab });
        }
    }
    v
}

/// The role and lab of a process started as `<…tcptune…> lab _emulator|_hog --name LAB`. Its
/// argv[0] is the binary's path as `current_exe` named it (the process itself executes
/// `/proc/self/exe`), which may be an installed or renamed binary, so its file name only has to
/// contain "tcptune".
fn lab_role(args: &[String]) -> Option<(String, String)> {
    let is_ours = Path::new(args.first()?)
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("tcptune"));
    (args.len() >= 5
        && is_ours
        && args[1] == "lab"
        && (args[2] == "_emulator" || args[2] == "_hog")
        && args[3] == "--name")
        .then(|| (args[2].clone(), args[4].clone()))
}

/// Sends SIGTERM, waits (on a pidfd, up to `grace`) for the process to exit, then SIGKILLs.
/// Works for processes that are not our children.
pub fn stop_process(pid: u32, grace: Duration) {
    let Some(fd) = pidfd_open(pid) else {
        return; // already gone
    };
    let wait = |d: Duration| {
        let deadline = Instant::now() + d;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tcptune_os::poll::poll(
                &mut [tcptune_os::poll::PollFd::readable(fd.as_fd())],
                Some(left),
            ) {
                Ok(n) if n > 0 => return true,
                Ok(_) => return false,
                Err(_) if left.is_zero() => return false,
                Err(_) => {}
            }
        }
    };
    // On the pidfd: no PID-reuse race.
    let send = |sig| sys_process::pidfd_send_signal(fd.as_fd(), sig);
    let _ = send(Signal::Term);
    if !wait(grace) {
        let _ = send(Signal::Kill);
        wait(Duration::from_secs(5));
    }
}

/// From now on SIGINT, SIGTERM and SIGHUP only set a flag that [`interrupted`] reports, so a
/// setup in progress can undo itself instead of dying half-done.
pub fn catch_stop_signals() {
    tcptune_os::signal::catch(&[Signal::Int, Signal::Term, Signal::Hup]);
}

/// Whether a stop signal arrived since [`catch_stop_signals`].
pub fn interrupted() -> bool {
    tcptune_os::signal::caught()
}

/// Pins the calling process to one CPU.
pub fn pin_to_cpu(cpu: u32) -> std::io::Result<()> {
    sys_process::pin_to_cpu(cpu)
}

/// Number of CPUs this process may run on.
pub fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

#[cfg(test)]
mod process_tests {
    use super::*;

    #[test]
    fn a_process_is_named_by_pid_and_start_time() {
        let me = ProcessRef::me();
        assert!(me.start > 0 && me.alive());
        // The same PID with another start time is another (earlier or later) process.
        assert!(!ProcessRef {
            pid: me.pid,
            start: me.start + 1
        }
        .alive());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let r = ProcessRef {
            pid,
            start: start_time(pid).unwrap_or(0),
        };
        child.wait().unwrap();
        assert!(!r.alive(), "a reaped child is gone");
        assert_eq!(process_state(pid), None);
        // A stopped process shows T.
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id();
        sys_process::kill(pid, Signal::Stop).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while process_state(pid) != Some('T') {
            assert!(Instant::now() < deadline, "{:?}", process_state(pid));
            std::thread::yield_now();
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

#[cfg(test)]
mod lab_role_tests {
    use super::lab_role;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lab_processes_are_recognised_under_a_renamed_binary() {
        let want = Some(("_emulator".to_string(), "ev1".to_string()));
        assert_eq!(
            lab_role(&v(&[
                "/usr/bin/tcptune",
                "lab",
                "_emulator",
                "--name",
                "ev1"
            ])),
            want
        );
        // A run that copied its binary (the tuning evaluation did) must still find them.
        assert_eq!(
            lab_role(&v(&[
                "/tmp/eval-tcptune",
                "lab",
                "_emulator",
                "--name",
                "ev1"
            ])),
            want
        );
        assert_eq!(
            lab_role(&v(&[
                "/usr/bin/python3",
                "lab",
                "_emulator",
                "--name",
                "ev1"
            ])),
            None
        );
        assert_eq!(
            lab_role(&v(&["/usr/bin/tcptune", "lab", "up", "--name", "ev1"])),
            None
        );
        assert_eq!(lab_role(&v(&["tcptune"])), None);
    }
}
