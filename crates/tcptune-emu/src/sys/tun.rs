//! TUN devices with virtio-net headers, opened inside a named network namespace, and the
//! frames read from and written to them.
//!
//! Every read and write starts with a 10-byte `virtio_net_hdr` (`IFF_VNET_HDR`). With
//! offloads on (`TUNSETOFFLOAD` CSUM|TSO4|TSO6) the kernel hands us TCP super-packets of up to
//! 64 KB with a partial checksum, which we write to the far device unchanged (the receiving
//! stack treats them as GRO'd packets). With offloads off the kernel segments and checksums
//! in software before the packet reaches us, so every frame is one wire packet: the exact mode.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use tcptune_os::tun::{
    TunError, IFF_NO_PI, IFF_TUN, IFF_VNET_HDR, TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6,
};
use tcptune_wire::header::{Ip, Tcp, IPPROTO_TCP};

use crate::pipeline::{corrupt_ip, Packet};
use crate::rng::Rng;

/// Size of `struct virtio_net_hdr` (the TUN default without mergeable buffers).
pub const VNET_HDR_LEN: usize = 10;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;

/// Largest frame a TUN read returns with TSO: 64 KB packet plus the header.
pub const MAX_FRAME: usize = 65_536 + VNET_HDR_LEN;

/// An open TUN device; the device disappears when this closes (it is not persistent), which is
/// why a killed emulator leaves no devices behind.
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

/// `e` with what was being done in front of it.
fn context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl Tun {
    /// Creates TUN device `name` in the calling thread's network namespace.
    pub fn create(name: &str) -> io::Result<Tun> {
        let fd = tcptune_os::tun::create(name, IFF_TUN | IFF_NO_PI | IFF_VNET_HDR).map_err(
            |e| match e {
                TunError::BadName => io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("interface name '{name}' must have 1 to 15 characters"),
                ),
                TunError::Open(e) => context(e, "opening /dev/net/tun"),
                TunError::Create(e) => context(e, &format!("creating TUN device {name}")),
            },
        )?;
        let tun = Tun {
            fd,
            name: name.to_string(),
        };
        tun.set_offloads(false)?;
        Ok(tun)
    }

    /// Creates the device inside the network namespace bound at `netns` (e.g.
    /// `/run/netns/NAME`): a short-lived thread enters the namespace, since setns(2) changes
    /// only the calling thread, and the fd keeps working from any namespace afterwards.
    pub fn create_in(netns: &Path, name: &str) -> io::Result<Tun> {
        use tcptune_os::netns::EnterError;
        tcptune_os::netns::in_netns(netns, || Tun::create(name))
            .map_err(|e| match e {
                EnterError::Open(e) => context(e, &format!("opening {}", netns.display())),
                EnterError::Setns(e) => context(e, &format!("entering {}", netns.display())),
            })
            .and_then(|r| r)
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device's descriptor, to wait on.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Offloads on: the kernel may hand us TSO super-packets with partial checksums. Off: one
    /// checksummed wire packet per frame.
    pub fn set_offloads(&self, on: bool) -> io::Result<()> {
        let flags = if on {
            TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6
        } else {
            0
        };
        tcptune_os::tun::set_offload(self.fd.as_fd(), flags)
            .map_err(|e| context(e, &format!("setting offloads on {}", self.name)))
    }

    /// Reads one frame into `buf`; `Ok(None)` when nothing is waiting.
    pub fn read_frame(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match tcptune_os::fs::read(self.fd.as_fd(), buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            },
        }
    }

    /// Reads one frame into `buf` (replacing its contents, up to its capacity) without
    /// zeroing or copying; `Ok(false)` when nothing is waiting.
    pub fn read_into(&self, buf: &mut Vec<u8>) -> io::Result<bool> {
        match tcptune_os::fs::read_to_capacity(self.fd.as_fd(), buf) {
            Ok(_) => Ok(true),
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(false),
                _ => Err(e),
            },
        }
    }

    /// Writes one frame (virtio header + IP packet).
    pub fn write_frame(&self, frame: &[u8]) -> io::Result<()> {
        tcptune_os::fs::write(self.fd.as_fd(), frame).map(|_| ())
    }
}

/// A frame as read from a TUN device: virtio header followed by the IP packet.
#[derive(Clone, Debug)]
pub struct Frame {
    /// The bytes as read: the 10-byte virtio header, then the IP packet.
    pub buf: Vec<u8>,
}

impl Frame {
    fn ip(&self) -> &[u8] {
        self.buf.get(VNET_HDR_LEN..).unwrap_or(&[])
    }
    fn gso_size(&self) -> u16 {
        if self.buf.len() < VNET_HDR_LEN || self.buf[1] == VIRTIO_NET_HDR_GSO_NONE {
            return 0;
        }
        u16::from_le_bytes([self.buf[4], self.buf[5]])
    }
    /// Length of IP + TCP headers, if the packet is TCP.
    fn l3l4_header_len(&self) -> Option<usize> {
        let ip = self.ip();
        let h = Ip::new(ip)?;
        if h.protocol() != IPPROTO_TCP {
            return None;
        }
        let l3 = h.header_len();
        Some(l3 + Tcp::new(ip.get(l3..)?)?.header_len())
    }
}

impl Packet for Frame {
    fn wire_bytes(&self) -> u64 {
        let ip_len = self.ip().len() as u64;
        match (self.gso_size(), self.l3l4_header_len()) {
            (0, _) | (_, None) => ip_len,
            (mss, Some(hdr)) => {
                let hdr = hdr as u64;
                let payload = ip_len.saturating_sub(hdr);
                let segs = payload.div_ceil(u64::from(mss)).max(1);
                ip_len + (segs - 1) * hdr
            }
        }
    }
    fn wire_packets(&self) -> u32 {
        match (self.gso_size(), self.l3l4_header_len()) {
            (0, _) | (_, None) => 1,
            (mss, Some(hdr)) => {
                let payload = self.ip().len().saturating_sub(hdr);
                payload.div_ceil(usize::from(mss)).max(1) as u32
            }
        }
    }
    fn corrupt(&mut self, rng: &mut Rng) {
        if self.buf.len() <= VNET_HDR_LEN {
            return;
        }
        // A partial checksum would be completed by the receiver over the flipped bit; without
        // the flag the (partial) checksum field is wrong, so the packet is rejected either way.
        self.buf[0] &= !VIRTIO_NET_HDR_F_NEEDS_CSUM;
        corrupt_ip(&mut self.buf[VNET_HDR_LEN..], rng);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_frame(payload: usize, gso: u16) -> Frame {
        let mut buf = vec![0u8; VNET_HDR_LEN + 20 + 32 + payload];
        if gso > 0 {
            buf[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
            buf[1] = 1; // TCPV4
            buf[4..6].copy_from_slice(&gso.to_le_bytes());
        }
        let ip = &mut buf[VNET_HDR_LEN..];
        ip[0] = 0x45;
        ip[9] = 6;
        ip[20 + 12] = 8 << 4; // 32-byte TCP header (timestamps)
        Frame { buf }
    }

    #[test]
    fn super_packet_counts_its_wire_packets_and_their_headers() {
        let f = tcp_frame(1448 * 10 + 100, 1448);
        assert_eq!(f.wire_packets(), 11);
        assert_eq!(f.wire_bytes(), (1448 * 10 + 100) + 11 * 52);
        let single = tcp_frame(1448, 0);
        assert_eq!((single.wire_packets(), single.wire_bytes()), (1, 1500));
    }

    #[test]
    fn corrupting_clears_the_partial_checksum_flag() {
        let mut f = tcp_frame(1000, 1448);
        let before = f.buf.clone();
        f.corrupt(&mut Rng::new(1));
        assert_eq!(f.buf[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM, 0);
        let flipped = (VNET_HDR_LEN + 20..f.buf.len())
            .filter(|&i| f.buf[i] != before[i])
            .count();
        assert_eq!(flipped, 1);
    }
}
