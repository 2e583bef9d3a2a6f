//! Netlink sockets: open, bind for multicast, send to the kernel.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// A raw netlink socket of `protocol` (e.g. `NETLINK_SOCK_DIAG`), close-on-exec.
pub fn socket(protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket takes plain integers and returns a new descriptor or -1.
    crate::owned(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            protocol,
        )
    })
}

fn kernel_address() -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain integers; all-zero with the family set means port id 0 (the
    // kernel as a destination; "choose one for me" when binding) and no groups.
    let mut a: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    a.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    a
}

/// Binds `fd` with a port id chosen by the kernel (multicast is delivered to bound sockets
/// only).
pub fn bind_any(fd: BorrowedFd<'_>) -> io::Result<()> {
    let local = kernel_address();
    // SAFETY: `local` is a valid sockaddr_nl of the size passed, alive across the call.
    crate::check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&local as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    })
}

/// Sends one datagram to the kernel (port id 0).
pub fn send_to_kernel(fd: BorrowedFd<'_>, msg: &[u8]) -> io::Result<usize> {
    let to = kernel_address();
    // SAFETY: `msg` is valid for msg.len() bytes of reads; `to` is a valid sockaddr_nl of the
    // size passed; both outlive the call.
    crate::len(unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&to as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    })
}
