//! Entering a network namespace: setns(2) on a helper thread (it changes the calling thread
//! only, and sockets and devices created there stay in the namespace), or in a child between
//! fork and exec.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// Which step of entering a namespace failed.
#[derive(Debug)]
pub enum EnterError {
    /// Opening the namespace file (`/run/netns/NAME`).
    Open(io::Error),
    /// setns(2) on it.
    Setns(io::Error),
}

/// Opens a network namespace file (e.g. `/run/netns/NAME`) for [`setns`].
pub fn open(path: &Path) -> io::Result<OwnedFd> {
    Ok(std::fs::File::open(path)?.into())
}

/// setns(2) of the calling thread into the network namespace `ns`.
pub fn setns(ns: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns takes a descriptor (borrowed, so open) and a namespace type; it changes
    // only the calling thread's namespace and touches no memory of ours.
    crate::check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) })
}

/// Runs `f` on a helper thread that has entered the network namespace at `path`; the caller's
/// thread stays where it is. A panic in `f` is resumed here.
pub fn in_netns<T: Send>(path: &Path, f: impl FnOnce() -> T + Send) -> Result<T, EnterError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let fd = open(path).map_err(EnterError::Open)?;
                setns(fd.as_fd()).map_err(EnterError::Setns)?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// Makes the child `cmd` starts enter the network namespace `ns` before it execs. The
/// descriptor is kept open by the command until it is dropped.
pub fn enter_in_child(cmd: &mut Command, ns: OwnedFd) {
    // SAFETY: the closure runs between fork and exec, where a multithreaded parent allows only
    // async-signal-safe calls: it reads the descriptor number (opened before the fork, moved
    // into the closure so it stays open) and calls setns(2), a plain syscall;
    // `last_os_error` builds its error from errno without allocating.
    unsafe {
        cmd.pre_exec(move || setns(ns.as_fd()));
    }
}
