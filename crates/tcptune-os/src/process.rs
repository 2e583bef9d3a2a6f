//! Processes: signals to a PID or a pidfd, existence, CPU affinity and priority, what a child
//! does between fork and exec, the open-file limit, CPU time and clocks.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use crate::{check, owned};

/// The signals tcptune sends or catches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT: Ctrl-C, asks a run to stop and report.
    Int,
    /// SIGTERM: asks a background process (the emulator) to exit cleanly.
    Term,
    /// SIGHUP: the controlling terminal went away.
    Hup,
    /// SIGKILL: ends a process that did not stop when asked.
    Kill,
    /// SIGSTOP: suspends a process until SIGCONT or SIGKILL (fault injection in the lab tests).
    Stop,
}

impl Signal {
    pub(crate) fn raw(self) -> libc::c_int {
        match self {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
            Signal::Hup => libc::SIGHUP,
            Signal::Kill => libc::SIGKILL,
            Signal::Stop => libc::SIGSTOP,
        }
    }
}

/// A PID as the kernel takes it; 0 and values beyond `pid_t` would name a process group or
/// wrap to one, so they are refused.
fn pid_t(pid: u32) -> io::Result<libc::pid_t> {
    match libc::pid_t::try_from(pid) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(io::Error::from_raw_os_error(libc::ESRCH)),
    }
}

/// kill(2): sends `sig` to process `pid`.
pub fn kill(pid: u32, sig: Signal) -> io::Result<()> {
    let pid = pid_t(pid)?;
    // SAFETY: kill takes plain integers; `pid` is positive, so it names one process.
    check(unsafe { libc::kill(pid, sig.raw()) })
}

/// Whether process `pid` exists and we may signal it (kill with signal 0, which only checks).
pub fn exists(pid: u32) -> bool {
    let Ok(pid) = pid_t(pid) else { return false };
    // SAFETY: kill with signal 0 sends nothing; plain integers.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// raise(3): sends `sig` to the calling thread (SIGSTOP stops the whole process until
/// SIGCONT).
pub fn raise(sig: Signal) {
    // SAFETY: raise takes a plain integer and has no preconditions.
    unsafe { libc::raise(sig.raw()) };
}

/// pidfd_open(2): a descriptor naming process `pid` for good (readable once it has exited);
/// ESRCH when there is no such process.
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = pid_t(pid)?;
    // SAFETY: the raw syscall takes a pid and flags (0) and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    owned(fd as libc::c_int)
}

/// pidfd_send_signal(2): sends `sig` to the process `pidfd` names (no PID-reuse race).
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: Signal) -> io::Result<()> {
    // SAFETY: a pidfd we borrow, a signal number, a null siginfo (the kernel fills it as
    // kill(2) would) and flags 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig.raw(),
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    check(rc as libc::c_int)
}

/// An eventfd whose counter starts at `initial` (readable at once when it is not 0).
pub fn eventfd(initial: u32) -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes two integers and returns a new descriptor or -1.
    owned(unsafe { libc::eventfd(initial, libc::EFD_CLOEXEC) })
}

/// The effective user id.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The size of a memory page in bytes (4096 when sysconf cannot tell).
pub fn page_size() -> u64 {
    // SAFETY: sysconf takes a plain integer and has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// A set of one CPU, checked and built before it is used, so applying it (also in a child
/// between fork and exec) is one syscall.
#[derive(Clone, Copy)]
pub struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The set of CPU `cpu`; an error when `cpu` is beyond what a `cpu_set_t` holds.
    pub fn one(cpu: u32) -> io::Result<CpuSet> {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::other(format!(
                "cpu number {cpu} too large (at most {})",
                libc::CPU_SETSIZE - 1
            )));
        }
        // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: CPU_SET sets bit `cpu` of the set: `cpu` < CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
        Ok(CpuSet(set))
    }

    /// sched_setaffinity(2) of the calling thread (of the process, before it starts threads).
    /// Allocation-free, so it may run between fork and exec.
    pub fn apply(&self) -> io::Result<()> {
        // SAFETY: a valid cpu_set_t of the size passed, read by the kernel only.
        check(unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0)
        })
    }
}

/// Pins the calling process (thread) to one CPU.
pub fn pin_to_cpu(cpu: u32) -> io::Result<()> {
    CpuSet::one(cpu)?.apply()
}

/// Makes the child `cmd` starts pinned to `cpu`. The set is checked and built here; the child
/// only makes the syscall.
pub fn pin_child_to_cpu(cmd: &mut Command, cpu: u32) -> io::Result<()> {
    let set = CpuSet::one(cpu)?;
    // SAFETY: the closure runs in the child between fork and exec, where a multithreaded
    // parent allows only async-signal-safe calls: it copies a prepared `CpuSet` and calls
    // sched_setaffinity(2), a plain syscall; on failure `last_os_error` builds an error from
    // errno without allocating. Nothing in it allocates, locks or touches shared state.
    unsafe {
        cmd.pre_exec(move || set.apply());
    }
    Ok(())
}

/// Makes the child `cmd` starts the leader of a new session (setsid), detached from our
/// terminal and process group.
pub fn new_session_for_child(cmd: &mut Command) {
    // SAFETY: the closure runs between fork and exec, where only async-signal-safe calls are
    // allowed: setsid(2) is one, and the closure allocates nothing. Its failure (already a
    // group leader, impossible in a fresh child) is ignored, as before.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// Asks for real-time scheduling (SCHED_FIFO at `priority`, not inherited by children);
/// when refused, a nice value of -10. Failure of both only costs timing accuracy.
pub fn prefer_realtime(priority: i32) {
    let fifo = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler on this process (0) with a valid sched_param alive across the
    // call; setpriority takes plain integers.
    unsafe {
        if libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &fifo) != 0 {
            libc::setpriority(libc::PRIO_PROCESS, 0, -10);
        }
    }
}

/// Timer slack of the calling thread: how late the kernel may wake it to merge wake-ups.
pub fn set_timer_slack(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument; failure only costs precision.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong) };
}

/// dup2(2) of `fd` onto standard output (descriptor 1).
pub fn redirect_stdout(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: `fd` is open (borrowed); descriptor 1 is replaced atomically. Rust's stdout
    // keeps using descriptor 1, which now refers to the new file.
    let rc = unsafe { libc::dup2(fd.as_raw_fd(), 1) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// daemon(3) with nochdir = 0 and noclose = 0: forks, the parent exits, the child continues in
/// a new session with `/` as its directory and standard streams on /dev/null.
///
/// Only the calling thread survives the fork, so a process with other threads is refused
/// (one of them could hold a lock, the allocator's, that would stay locked in the child).
pub fn daemonize() -> io::Result<()> {
    if threads() != Some(1) {
        return Err(io::Error::other(
            "cannot detach a process that runs more than one thread",
        ));
    }
    // SAFETY: the process has one thread (checked above, and only this thread could start
    // another), so the child the fork makes is a full copy with no lock held by a thread that
    // did not survive; it continues as an ordinary process.
    check(unsafe { libc::daemon(0, 0) })
}

/// The number of threads of this process (`Threads:` of /proc/self/status).
fn threads() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))?
        .trim()
        .parse()
        .ok()
}

/// Raises the soft limit of open files towards `want` (never above the hard limit); returns
/// the soft limit in force afterwards.
pub fn raise_open_file_limit(want: u64) -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    if lim.rlim_cur < want {
        lim.rlim_cur = want.min(lim.rlim_max);
        // SAFETY: `lim` is a valid rlimit, read only.
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    }
    Ok(lim.rlim_cur)
}

/// Sets the soft limit of open files to `n` (never above the hard limit); returns the limit in
/// force afterwards. What a test of running out of descriptors needs.
pub fn set_open_file_limit(n: u64) -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    lim.rlim_cur = n.min(lim.rlim_max);
    // SAFETY: `lim` is a valid rlimit, read only.
    check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    Ok(lim.rlim_cur)
}

/// User and system CPU time of this process.
pub fn cpu_times() -> (Duration, Duration) {
    // SAFETY: rusage is plain integers; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer; RUSAGE_SELF cannot fail.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000);
    (t(ru.ru_utime), t(ru.ru_stime))
}

/// CLOCK_MONOTONIC in nanoseconds (the clock `Instant` reads, as a number).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in nanoseconds since the epoch (the clock of SO_TIMESTAMPNS stamps).
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_exists_and_pid_zero_is_refused() {
        assert!(exists(std::process::id()));
        assert!(!exists(0));
        assert!(kill(0, Signal::Term).is_err());
        assert!(kill(u32::MAX, Signal::Term).is_err());
    }

    #[test]
    fn a_process_with_threads_is_not_daemonized() {
        // A second thread alive across the call, so this never forks.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        assert!(threads().is_some_and(|n| n > 1));
        assert!(daemonize().is_err());
        drop(tx);
        let _ = other.join();
    }

    #[test]
    fn a_cpu_beyond_the_set_is_refused_before_any_syscall() {
        assert!(CpuSet::one(libc::CPU_SETSIZE as u32).is_err());
        let mut c = Command::new("true");
        assert!(pin_child_to_cpu(&mut c, 1 << 20).is_err());
    }

    #[test]
    fn a_child_pinned_to_cpu_0_runs_there() {
        let mut c = Command::new("grep");
        c.args(["Cpus_allowed_list", "/proc/self/status"]);
        pin_child_to_cpu(&mut c, 0).unwrap();
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.split_whitespace().nth(1), Some("0"), "{text}");
    }

    #[test]
    fn a_pidfd_of_an_exited_child_is_readable() {
        let mut child = Command::new("true").spawn().unwrap();
        let fd = pidfd_open(child.id()).unwrap();
        child.wait().unwrap();
        use std::os::fd::AsFd;
        assert!(crate::poll::wait_readable(fd.as_fd(), Duration::from_secs(5)).unwrap());
    }
}
