//! Zero-copy views of raw IPv4, IPv6 and TCP headers: the one place that knows where each field
//! sits (RFC 791, RFC 8200, RFC 9293). The capture decoder ([`crate::packet`]), the link
//! emulator (its corruption, GRO and segmentation, its TUN frames) and the lab's link check all
//! read packets through these.
//!
//! A view is made only over a slice that holds the fixed part of its header (20, 40 and 20
//! bytes), so every accessor of that part reads in bounds; what lies past it (IPv4 options,
//! TCP options, the payload) is reached through `get`, never by indexing. A view checks
//! nothing else: the caller decides what a bad version or length means (a capture reports it,
//! the emulator passes the packet on untouched).

/// IP protocol numbers the readers tell apart.
pub const IPPROTO_TCP: u8 = 6;
/// UDP's IP protocol number.
pub const IPPROTO_UDP: u8 = 17;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The IP version nibble of a packet's first byte; None for an empty packet.
#[inline]
pub fn ip_version(packet: &[u8]) -> Option<u8> {
    packet.first().map(|b| b >> 4)
}

/// An IPv4 header (its fixed 20 bytes at least).
#[derive(Debug, Clone, Copy)]
pub struct Ipv4<'a>(&'a [u8]);

impl<'a> Ipv4<'a> {
    /// A view of `packet`, when it holds the 20-byte fixed header (the version is not checked).
    #[inline]
    pub fn new(packet: &'a [u8]) -> Option<Self> {
        (packet.len() >= 20).then_some(Ipv4(packet))
    }
    /// The version nibble: 4.
    #[inline]
    pub fn version(self) -> u8 {
        self.0[0] >> 4
    }
    /// The header's length in bytes (IHL × 4), options included.
    #[inline]
    pub fn header_len(self) -> usize {
        usize::from(self.0[0] & 0x0f) * 4
    }
    /// The total length field: header and payload, bytes (0 in TSO/GSO captures).
    #[inline]
    pub fn total_len(self) -> u16 {
        be16(self.0, 2)
    }
    /// The identification field: per-sender counter, for matching duplicates and fragments.
    #[inline]
    pub fn id(self) -> u16 {
        be16(self.0, 4)
    }
    /// True for a fragment: more fragments follow, or the offset is not zero.
    #[inline]
    pub fn is_fragment(self) -> bool {
        be16(self.0, 6) & 0x3fff != 0
    }
    /// The protocol of the payload ([`IPPROTO_TCP`], [`IPPROTO_UDP`], …).
    #[inline]
    pub fn protocol(self) -> u8 {
        self.0[9]
    }
    /// Source address, network order.
    #[inline]
    pub fn src(self) -> [u8; 4] {
        [self.0[12], self.0[13], self.0[14], self.0[15]]
    }
    /// Destination address, network order.
    #[inline]
    pub fn dst(self) -> [u8; 4] {
        [self.0[16], self.0[17], self.0[18], self.0[19]]
    }
    /// What follows the header (options skipped); None when the header claims more bytes than
    /// the slice holds.
    #[inline]
    pub fn payload(self) -> Option<&'a [u8]> {
        self.0.get(self.header_len()..)
    }
}

/// An IPv6 header (its fixed 40 bytes at least).
#[derive(Debug, Clone, Copy)]
pub struct Ipv6<'a>(&'a [u8]);

impl<'a> Ipv6<'a> {
    /// A view of `packet`, when it holds the 40-byte fixed header (the version is not checked).
    #[inline]
    pub fn new(packet: &'a [u8]) -> Option<Self> {
        (packet.len() >= 40).then_some(Ipv6(packet))
    }
    /// The version nibble: 6.
    #[inline]
    pub fn version(self) -> u8 {
        self.0[0] >> 4
    }
    /// The payload length field: extension headers and payload, bytes.
    #[inline]
    pub fn payload_len(self) -> u16 {
        be16(self.0, 4)
    }
    /// The next header field (the first extension header or the transport protocol).
    #[inline]
    pub fn next_header(self) -> u8 {
        self.0[6]
    }
    /// Source address, network order.
    #[inline]
    pub fn src(self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.0[8..24]);
        a
    }
    /// Destination address, network order.
    #[inline]
    pub fn dst(self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.0[24..40]);
        a
    }
}

/// An IP packet of either version, chosen by its version nibble.
#[derive(Debug, Clone, Copy)]
pub enum Ip<'a> {
    /// An IPv4 packet.
    V4(Ipv4<'a>),
    /// An IPv6 packet.
    V6(Ipv6<'a>),
}

impl<'a> Ip<'a> {
    /// A view of `packet` by its version nibble; None for another version or a packet shorter
    /// than that version's fixed header.
    #[inline]
    pub fn new(packet: &'a [u8]) -> Option<Self> {
        match ip_version(packet)? {
            4 => Ipv4::new(packet).map(Ip::V4),
            6 => Ipv6::new(packet).map(Ip::V6),
            _ => None,
        }
    }
    /// The IP header's length: IHL × 4 for IPv4, the fixed 40 bytes for IPv6 (extension
    /// headers are the payload's).
    #[inline]
    pub fn header_len(self) -> usize {
        match self {
            Ip::V4(h) => h.header_len(),
            Ip::V6(_) => 40,
        }
    }
    /// The protocol after the IP header: IPv4's protocol, IPv6's next header.
    #[inline]
    pub fn protocol(self) -> u8 {
        match self {
            Ip::V4(h) => h.protocol(),
            Ip::V6(h) => h.next_header(),
        }
    }
}

/// A TCP header (its fixed 20 bytes at least).
#[derive(Debug, Clone, Copy)]
pub struct Tcp<'a>(&'a [u8]);

impl<'a> Tcp<'a> {
    /// A view of `segment`, when it holds the 20-byte fixed header.
    #[inline]
    pub fn new(segment: &'a [u8]) -> Option<Self> {
        (segment.len() >= 20).then_some(Tcp(segment))
    }
    /// Source port.
    #[inline]
    pub fn src_port(self) -> u16 {
        be16(self.0, 0)
    }
    /// Destination port.
    #[inline]
    pub fn dst_port(self) -> u16 {
        be16(self.0, 2)
    }
    /// Sequence number of the first payload byte (of the SYN for a SYN).
    #[inline]
    pub fn seq(self) -> u32 {
        be32(self.0, 4)
    }
    /// Acknowledgment number: the next byte expected (meaningful with ACK set).
    #[inline]
    pub fn ack(self) -> u32 {
        be32(self.0, 8)
    }
    /// The header's length in bytes (data offset × 4), options included.
    #[inline]
    pub fn header_len(self) -> usize {
        usize::from(self.0[12] >> 4) * 4
    }
    /// The flags byte: CWR ECE URG ACK PSH RST SYN FIN.
    #[inline]
    pub fn flags(self) -> u8 {
        self.0[13]
    }
    /// The 12 bits after the data offset: the flags with the reserved bits and AE (the old NS).
    #[inline]
    pub fn flags12(self) -> u16 {
        be16(self.0, 12) & 0x0fff
    }
    /// The raw 16-bit receive window field, before window scaling.
    #[inline]
    pub fn window(self) -> u16 {
        be16(self.0, 14)
    }
}

/// The ports of a UDP header (8 bytes at least); None for a shorter slice.
#[inline]
pub fn udp_ports(datagram: &[u8]) -> Option<(u16, u16)> {
    (datagram.len() >= 8).then(|| (be16(datagram, 0), be16(datagram, 2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_where_the_rfcs_put_them() {
        let mut p = vec![0u8; 20 + 24];
        p[0] = 0x46; // IPv4, IHL 6: 4 bytes of options
        p[2..4].copy_from_slice(&44u16.to_be_bytes());
        p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        p[9] = IPPROTO_TCP;
        p[12..16].copy_from_slice(&[198, 18, 0, 1]);
        p[16..20].copy_from_slice(&[198, 18, 0, 2]);
        let t = &mut p[24..];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&5201u16.to_be_bytes());
        t[4..8].copy_from_slice(&7u32.to_be_bytes());
        t[8..12].copy_from_slice(&9u32.to_be_bytes());
        t[12] = 0x51; // 20 bytes, AE set
        t[13] = 0x18; // ACK PSH
        t[14..16].copy_from_slice(&512u16.to_be_bytes());
        let ip = Ipv4::new(&p).unwrap();
        assert_eq!((ip.version(), ip.header_len(), ip.total_len()), (4, 24, 44));
        assert_eq!(
            (ip.id(), ip.protocol(), ip.is_fragment()),
            (0x1234, 6, false)
        );
        assert_eq!((ip.src(), ip.dst()), ([198, 18, 0, 1], [198, 18, 0, 2]));
        let tcp = Tcp::new(ip.payload().unwrap()).unwrap();
        assert_eq!((tcp.src_port(), tcp.dst_port()), (40000, 5201));
        assert_eq!((tcp.seq(), tcp.ack(), tcp.header_len()), (7, 9, 20));
        assert_eq!(
            (tcp.flags(), tcp.flags12(), tcp.window()),
            (0x18, 0x118, 512)
        );
        assert!(matches!(Ip::new(&p), Some(Ip::V4(_))));
        assert_eq!(
            Ip::new(&p).map(|i| (i.header_len(), i.protocol())),
            Some((24, 6))
        );
        // A fragment: MF set, or an offset.
        p[6] = 0x20;
        assert!(Ipv4::new(&p).unwrap().is_fragment());
        p[6] = 0x40; // DF only
        assert!(!Ipv4::new(&p).unwrap().is_fragment());
    }

    #[test]
    fn short_slices_and_other_versions_give_no_view() {
        assert!(Ipv4::new(&[0x45; 19]).is_none());
        assert!(Ipv6::new(&[0x60; 39]).is_none());
        assert!(Tcp::new(&[0; 19]).is_none());
        assert!(Ip::new(&[]).is_none());
        assert!(Ip::new(&[0x45; 10]).is_none());
        assert!(Ip::new(&[0x50; 60]).is_none());
        // A header longer than the slice has no payload rather than a panic.
        let mut p = [0u8; 20];
        p[0] = 0x4f;
        assert_eq!(Ipv4::new(&p).unwrap().payload(), None);
        assert_eq!(udp_ports(&[0, 53, 0, 54, 0, 8, 0, 0]), Some((53, 54)));
        assert_eq!(udp_ports(&[0; 7]), None);
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[4..6].copy_from_slice(&20u16.to_be_bytes());
        v6[6] = IPPROTO_TCP;
        v6[8] = 0x20;
        v6[39] = 2;
        let h = Ipv6::new(&v6).unwrap();
        assert_eq!((h.version(), h.payload_len(), h.next_header()), (6, 20, 6));
        assert_eq!((h.src()[0], h.dst()[15]), (0x20, 2));
        assert_eq!(
            Ip::new(&v6).map(|i| (i.header_len(), i.protocol())),
            Some((40, 6))
        );
    }
}
