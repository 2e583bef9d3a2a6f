//! TUN devices: open `/dev/net/tun` and create a device with TUNSETIFF, set its offloads.
//! Frames are then read and written with [`crate::fs::read`] and [`crate::fs::write`].

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// A layer-3 device: reads and writes are IP packets (no Ethernet header).
pub const IFF_TUN: i16 = 0x0001;
/// No 4-byte packet-information prefix before each packet.
pub const IFF_NO_PI: i16 = 0x1000;
/// Each packet is preceded by a 10-byte `virtio_net_hdr` (offloads, checksum hints).
pub const IFF_VNET_HDR: i16 = 0x4000;
/// Offload: the kernel may hand packets with a partial checksum for us to complete.
pub const TUN_F_CSUM: u32 = 0x01;
/// Offload: the kernel may hand IPv4 TCP segments larger than the MTU (TSO), to be split.
pub const TUN_F_TSO4: u32 = 0x02;
/// Offload: the kernel may hand IPv6 TCP segments larger than the MTU (TSO), to be split.
pub const TUN_F_TSO6: u32 = 0x04;

/// `struct ifreq` as TUNSETIFF reads it: the name, the flags, padding to 40 bytes.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Why a TUN device could not be made.
#[derive(Debug)]
pub enum TunError {
    /// The name is empty, longer than 15 bytes or holds a NUL.
    BadName,
    /// Opening `/dev/net/tun`.
    Open(io::Error),
    /// TUNSETIFF (creating the device).
    Create(io::Error),
}

/// Creates TUN device `name` with `flags` (`IFF_TUN | …`) in the calling thread's network
/// namespace; non-blocking and close-on-exec. The device lives as long as the descriptor.
pub fn create(name: &str, flags: i16) -> Result<OwnedFd, TunError> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(TunError::BadName);
    }
    // SAFETY: open(2) of a constant NUL-terminated path; returns a new descriptor or -1.
    let fd = crate::owned(unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    })
    .map_err(TunError::Open)?;
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags,
        _pad: [0; 22],
    };
    // The name is shorter than IFNAMSIZ (checked above), so it stays NUL-terminated.
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads and writes a struct ifreq, which IfReq lays out (40 bytes),
    // alive and exclusively borrowed across the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req as *mut IfReq) };
    if rc < 0 {
        return Err(TunError::Create(io::Error::last_os_error()));
    }
    Ok(fd)
}

/// TUNSETOFFLOAD: which offloads (`TUN_F_*`) the kernel may hand us.
pub fn set_offload(fd: BorrowedFd<'_>, flags: u32) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes the flags by value; no memory is passed.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, flags as libc::c_ulong) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
