//! The one OS layer. Every `unsafe` block of the workspace lives here, behind safe functions
//! whose contracts are checked at this boundary; every other crate is `#![forbid(unsafe_code)]`.
//! What is here is thin: a syscall, its argument checks and its error, nothing that decides.
//!
//! Descriptors are taken as [`BorrowedFd`](std::os::fd::BorrowedFd) and returned as
//! [`OwnedFd`], so no wrapper can touch a descriptor its caller does not
//! hold. Errors are `std::io::Error` straight from `errno`; callers add what they were doing.

#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod fs;
pub mod localtime;
pub mod netlink;
pub mod netns;
pub mod poll;
pub mod process;
pub mod signal;
pub mod socket;
pub mod sysctl;
pub mod tracefs;
pub mod tty;
pub mod tun;
pub mod uname;

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// `Ok(())` when a call that returns 0 on success did, else the error in `errno`.
fn check(rc: libc::c_int) -> io::Result<()> {
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Takes ownership of a descriptor a syscall has just returned (or its error when it is -1).
fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by a syscall that creates a descriptor (socket, open,
    // eventfd, …) and has not been handed to anything else, so we are its only owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A length result of read/recv/write/sendfile (`-1` means `errno`).
fn len(n: libc::ssize_t) -> io::Result<usize> {
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
