//! Zero-copy decoding of one frame down to its TCP header: link layer (Ethernet with VLAN tags,
//! raw IP, Linux cooked SLL/SLL2, BSD null/loopback), IPv4/IPv6 (extension headers skipped),
//! and the TCP header with its options.
//!
//! The TCP segment length is computed the way Wireshark does: from the IP header's length
//! bounded by the frame's *original* length, minus the TCP header length, so a capture cut by
//! a snaplen still gives the true length. Fragments, non-IP and non-TCP frames are reported as
//! a [`SkipReason`] rather than an error: a capture is expected to contain them.

use crate::capture::{Frame, LinkType};
use crate::header::{Ipv4, Ipv6, Tcp};

/// An IP address as 16 bytes (IPv4 in the first four, the rest zero) plus its family, so a
/// flow key is one fixed-size value.
#[derive(Debug, Clone, Copy)]
pub struct Addr {
    /// True for IPv6; an IPv4 address uses the first 4 bytes and zeros after.
    pub v6: bool,
    /// The address in network order, IPv4 in `bytes[..4]`.
    pub bytes: [u8; 16],
}

// Compared as one 128-bit number rather than byte by byte: flow lookups compare addresses for
// every packet (a fifth of the analysis's time went to the byte-wise comparisons). The order
// is the derived one: family, then the bytes lexicographically.
impl Addr {
    fn word(&self) -> u128 {
        u128::from_be_bytes(self.bytes)
    }
}

impl PartialEq for Addr {
    fn eq(&self, o: &Addr) -> bool {
        self.v6 == o.v6 && self.word() == o.word()
    }
}

impl Eq for Addr {}

impl PartialOrd for Addr {
    fn partial_cmp(&self, o: &Addr) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Addr {
    fn cmp(&self, o: &Addr) -> std::cmp::Ordering {
        (self.v6, self.word()).cmp(&(o.v6, o.word()))
    }
}

impl std::hash::Hash for Addr {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u8(u8::from(self.v6));
        h.write_u128(self.word());
    }
}

impl Addr {
    /// An IPv4 address from its four bytes in network order.
    pub fn v4(b: [u8; 4]) -> Addr {
        let mut bytes = [0u8; 16];
        bytes[..4].copy_from_slice(&b);
        Addr { v6: false, bytes }
    }
    /// The standard-library address, for printing and matching.
    pub fn ip(&self) -> std::net::IpAddr {
        if self.v6 {
            std::net::IpAddr::from(self.bytes)
        } else {
            std::net::IpAddr::from([self.bytes[0], self.bytes[1], self.bytes[2], self.bytes[3]])
        }
    }
}

impl std::fmt::Display for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.ip())
    }
}

/// TCP flag bits as in the header's 16-bit flags field (low 12 bits).
pub mod flags {
    /// No more data from the sender.
    pub const FIN: u16 = 0x001;
    /// Synchronise sequence numbers (handshake).
    pub const SYN: u16 = 0x002;
    /// Reset the connection.
    pub const RST: u16 = 0x004;
    /// Push: deliver to the application now.
    pub const PSH: u16 = 0x008;
    /// The acknowledgment field is valid.
    pub const ACK: u16 = 0x010;
    /// The urgent pointer is valid.
    pub const URG: u16 = 0x020;
    /// ECN echo: the receiver saw congestion marks (RFC 3168).
    pub const ECE: u16 = 0x040;
    /// Congestion window reduced: the sender answered an ECE.
    pub const CWR: u16 = 0x080;
}

/// The TCP options tcptune looks at. SACK blocks beyond four are ignored (none fit anyway).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// Maximum segment size in bytes (SYN only).
    pub mss: Option<u16>,
    /// Window scale shift as sent (may exceed 14; the receiver clamps).
    pub wscale: Option<u8>,
    /// SACK-permitted was offered (SYN only).
    pub sack_permitted: bool,
    /// (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
    /// SACK blocks as (left edge, right edge) sequence numbers; the first `sack_count` are valid.
    pub sack: [(u32, u32); 4],
    /// How many of `sack` are valid (0 to 4).
    pub sack_count: u8,
    /// An option's length was impossible or ran past the header (parsing stopped there).
    pub malformed: bool,
}

impl TcpOptions {
    /// The valid SACK blocks, (left edge, right edge exclusive).
    pub fn sack_blocks(&self) -> &[(u32, u32)] {
        &self.sack[..self.sack_count as usize]
    }
}

/// The decoded TCP segment of a frame.
#[derive(Debug, Clone, Copy)]
pub struct TcpSegment {
    /// Source address.
    pub src: Addr,
    /// Destination address.
    pub dst: Addr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number (absolute, as on the wire).
    pub seq: u32,
    /// Acknowledgment number (absolute; meaningful with [`flags::ACK`]).
    pub ack: u32,
    /// Flag bits, [`flags`]`::*`.
    pub flags: u16,
    /// The raw 16-bit window field (unscaled).
    pub window: u16,
    /// TCP header length in bytes (data offset × 4).
    pub hlen: u16,
    /// Payload length from the IP header (Wireshark's `tcp.len`); `None` when the IP-reported
    /// length is shorter than the TCP header (Wireshark's "short segment", not analysed).
    pub seglen: Option<u32>,
    /// The options tcptune reads (MSS, window scale, SACK, timestamps).
    pub options: TcpOptions,
    /// IPv4 identification (0 for IPv6), for spotting duplicated captures.
    pub ip_id: u16,
}

impl TcpSegment {
    /// Whether flag bit `f` ([`flags`]`::*`) is set.
    pub fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }
    /// A header length below 20 bytes: Wireshark creates the conversation but does not
    /// analyse the segment.
    pub fn bogus_header(&self) -> bool {
        self.hlen < 20
    }
}

/// Why a frame carries no TCP segment tcptune can analyse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Not IP, or IP carrying something other than TCP.
    NotTcp,
    /// An IP fragment (not reassembled).
    Fragment,
    /// A link type tcptune does not decode.
    UnsupportedLink(u32),
    /// Headers cut short by the snaplen or malformed (bad version, lengths).
    Malformed(&'static str),
}

/// The result of decoding one frame.
pub type Parsed = Result<TcpSegment, SkipReason>;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
/// "Look at the IP version nibble" (raw IP links, MPLS payloads).
const GUESS_IP: u16 = 0;
/// Tunnels inside tunnels are followed this deep at most (a bound for hostile input).
const MAX_DEPTH: u8 = 8;

/// Decodes a frame down to its TCP segment. Tunnels are followed to the innermost TCP, as
/// Wireshark's TCP analysis sees it: PPP (also in HDLC framing, with direction, over
/// Ethernet as PPPoE and inside L2TP), Cisco HDLC, MPLS, IP-in-IP (v4/v6 either way), GRE,
/// VXLAN, Geneve, IP over InfiniBand, Juniper's Ethernet encapsulation, FDDI and 802.2
/// LLC/SNAP. The flow is the innermost IP's.
pub fn parse_frame(frame: &Frame<'_>) -> Parsed {
    let d = frame.data;
    let orig = frame.orig_len as usize;
    // (offset of the network header, its ethertype or GUESS_IP)
    let (off, etype) = match frame.link {
        LinkType::ETHERNET => return ethernet(d, orig, 0),
        LinkType::RAW | LinkType::RAW_12 | LinkType::RAW_14 | LinkType::IPV4 | LinkType::IPV6 => {
            (0, GUESS_IP)
        }
        LinkType::LINUX_SLL => {
            if d.len() < 16 {
                return Err(SkipReason::Malformed("Linux cooked header cut short"));
            }
            (16, be16(d, 14))
        }
        LinkType::LINUX_SLL2 => {
            if d.len() < 20 {
                return Err(SkipReason::Malformed("Linux cooked v2 header cut short"));
            }
            (20, be16(d, 0))
        }
        LinkType::NULL | LinkType::LOOP => {
            if d.len() < 4 {
                return Err(SkipReason::Malformed("loopback header cut short"));
            }
            // The family is in the capturing host's byte order for NULL, network order for
            // LOOP; small values tell which.
            let le = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
            let fam = if le <= 0xffff {
                le
            } else {
                d[3] as u32 | (d[2] as u32) << 8
            };
            match fam {
                2 => (4, ETH_IPV4),
                10 | 24 | 28 | 30 => (4, ETH_IPV6),
                _ => return Err(SkipReason::NotTcp),
            }
        }
        LinkType::PPP => return ppp(d, orig, 0),
        LinkType::PPP_HDLC => {
            // Wireshark reads Cisco HDLC framing on this link type too (address 0x0f/0x8f).
            if matches!(d.first(), Some(0x0f | 0x8f)) {
                return chdlc(d, orig, 0);
            }
            return ppp(d, orig, 0);
        }
        LinkType::C_HDLC => return chdlc(d, orig, 0),
        LinkType::PPP_ETHER => return pppoe(d, orig, 0),
        LinkType::PPP_WITH_DIR => return ppp(d.get(1..).unwrap_or(&[]), orig.saturating_sub(1), 0),
        LinkType::IPOIB => {
            // A 40-byte global route header, then the type and two reserved bytes.
            if d.len() < 44 {
                return Err(SkipReason::Malformed("IP over InfiniBand header cut short"));
            }
            (44, be16(d, 40))
        }
        LinkType::JUNIPER_ETHER => return juniper_ether(d, orig),
        LinkType::FDDI => {
            // Frame control and two addresses, then 802.2 LLC.
            if d.len() < 13 {
                return Err(SkipReason::Malformed("FDDI header cut short"));
            }
            return llc(&d[13..], orig.saturating_sub(13), 0);
        }
        LinkType(other) => return Err(SkipReason::UnsupportedLink(other)),
    };
    if off > d.len() {
        return Err(SkipReason::Malformed("link header cut short"));
    }
    network(&d[off..], orig.saturating_sub(off), etype, 0)
}

/// An Ethernet frame (with any VLAN tags, or 802.3 with LLC/SNAP) at `d`.
#[inline]
fn ethernet(d: &[u8], reported: usize, depth: u8) -> Parsed {
    if d.len() < 14 {
        return Err(SkipReason::Malformed("Ethernet header cut short"));
    }
    let mut off = 12;
    let mut et = be16(d, off);
    // 802.1Q, 802.1ad and the old QinQ type: each tag is 4 bytes.
    while matches!(et, 0x8100 | 0x88a8 | 0x9100) {
        off += 4;
        if d.len() < off + 2 {
            return Err(SkipReason::Malformed("VLAN tag cut short"));
        }
        et = be16(d, off);
    }
    off += 2;
    if et <= 1500 {
        // 802.3: a length, then 802.2 LLC.
        return llc(&d[off..], reported.saturating_sub(off), depth);
    }
    network(&d[off..], reported.saturating_sub(off), et, depth)
}

/// 802.2 LLC: only SNAP (AA AA 03, an OUI, then an ethertype) can carry IP.
fn llc(d: &[u8], reported: usize, depth: u8) -> Parsed {
    if d.len() < 8 {
        return Err(SkipReason::Malformed("LLC/SNAP header cut short"));
    }
    if d[..3] != [0xaa, 0xaa, 0x03] {
        return Err(SkipReason::NotTcp);
    }
    network(&d[8..], reported.saturating_sub(8), be16(d, 6), depth)
}

/// PPP: optional address and control bytes (FF 03), then a one- or two-byte protocol.
fn ppp(d: &[u8], reported: usize, depth: u8) -> Parsed {
    let mut off = if d.starts_with(&[0xff, 0x03]) { 2 } else { 0 };
    let Some(&first) = d.get(off) else {
        return Err(SkipReason::Malformed("PPP header cut short"));
    };
    // A compressed (one-byte) protocol field is odd; a full one starts with an even byte.
    let proto = if first & 1 == 1 {
        off += 1;
        u16::from(first)
    } else {
        if d.len() < off + 2 {
            return Err(SkipReason::Malformed("PPP header cut short"));
        }
        off += 2;
        be16(d, off - 2)
    };
    let et = match proto {
        0x21 => ETH_IPV4,
        0x57 => ETH_IPV6,
        0x281 => 0x8847,
        _ => return Err(SkipReason::NotTcp),
    };
    network(&d[off..], reported.saturating_sub(off), et, depth)
}

/// Cisco HDLC: address, control, then an ethertype.
fn chdlc(d: &[u8], reported: usize, depth: u8) -> Parsed {
    if d.len() < 4 {
        return Err(SkipReason::Malformed("Cisco HDLC header cut short"));
    }
    network(&d[4..], reported.saturating_sub(4), be16(d, 2), depth)
}

/// A PPPoE session header (version/type, code, session, length), then PPP.
fn pppoe(d: &[u8], reported: usize, depth: u8) -> Parsed {
    if d.len() < 6 {
        return Err(SkipReason::Malformed("PPPoE header cut short"));
    }
    let len = usize::from(be16(d, 4));
    ppp(&d[6..], reported.saturating_sub(6).min(len), depth)
}

/// Juniper's Ethernet link: "MGC", flags, an optional extension, then an Ethernet frame.
fn juniper_ether(d: &[u8], reported: usize) -> Parsed {
    if d.len() < 4 || &d[..3] != b"MGC" {
        return Err(SkipReason::Malformed("Juniper header without its magic"));
    }
    let flags = d[3];
    let mut off = 4;
    if flags & 0x80 != 0 {
        // Extension TLVs, preceded by their total length.
        if d.len() < 6 {
            return Err(SkipReason::Malformed("Juniper extension cut short"));
        }
        off = 6 + usize::from(be16(d, 4));
    }
    if flags & 0x02 != 0 {
        // "No layer 2": not an Ethernet frame; not decoded.
        return Err(SkipReason::NotTcp);
    }
    match d.get(off..) {
        Some(rest) => ethernet(rest, reported.saturating_sub(off), 0),
        None => Err(SkipReason::Malformed("Juniper extension cut short")),
    }
}

/// MPLS: labels up to the bottom of the stack, then IP by its version nibble.
fn mpls(d: &[u8], reported: usize, depth: u8) -> Parsed {
    let mut off = 0;
    loop {
        if d.len() < off + 4 {
            return Err(SkipReason::Malformed("MPLS label stack cut short"));
        }
        let bottom = d[off + 2] & 1 == 1;
        off += 4;
        if bottom {
            break;
        }
    }
    network(&d[off..], reported.saturating_sub(off), GUESS_IP, depth)
}

/// GRE (RFC 2784/2890): flags say which optional words follow, then the payload's ethertype.
fn gre(d: &[u8], reported: usize, depth: u8) -> Parsed {
    if d.len() < 4 {
        return Err(SkipReason::Malformed("GRE header cut short"));
    }
    let flags = be16(d, 0);
    if flags & 0x0007 != 0 {
        // Version 1 is PPTP's enhanced GRE (PPP inside); only version 0 carries IP directly.
        if flags & 0x0007 == 1 && d.len() >= 8 {
            let off =
                8 + 4 * usize::from(flags & 0x1000 != 0) + 4 * usize::from(flags & 0x0080 != 0);
            return match d.get(off..) {
                Some(rest) => ppp(rest, reported.saturating_sub(off), depth),
                None => Err(SkipReason::Malformed("GRE header cut short")),
            };
        }
        return Err(SkipReason::NotTcp);
    }
    let words = [0x8000u16, 0x2000, 0x1000]
        .iter()
        .filter(|&&bit| flags & bit != 0)
        .count();
    let off = 4 + 4 * words;
    if d.len() < off {
        return Err(SkipReason::Malformed("GRE header cut short"));
    }
    network(&d[off..], reported.saturating_sub(off), be16(d, 2), depth)
}

/// A UDP datagram: the tunnels Wireshark decodes by port (L2TP 1701, VXLAN 4789, Geneve
/// 6081); anything else is not TCP.
fn udp(d: &[u8], reported: usize, depth: u8) -> Parsed {
    if d.len() < 8 {
        return Err(SkipReason::NotTcp);
    }
    let (sport, dport) = (be16(d, 0), be16(d, 2));
    let len = usize::from(be16(d, 4));
    let reported = if len >= 8 {
        reported.min(len)
    } else {
        reported
    };
    let rest = &d[8..];
    let left = reported.saturating_sub(8);
    let is = |p: u16| sport == p || dport == p;
    if is(1701) {
        l2tp(rest, left, depth)
    } else if is(4789) {
        if rest.len() < 8 {
            return Err(SkipReason::Malformed("VXLAN header cut short"));
        }
        ethernet(&rest[8..], left.saturating_sub(8), depth)
    } else if is(6081) {
        geneve(rest, left, depth)
    } else {
        Err(SkipReason::NotTcp)
    }
}

/// L2TPv2 data messages carry PPP; control messages and L2TPv3 do not carry TCP we decode.
fn l2tp(d: &[u8], reported: usize, depth: u8) -> Parsed {
    if d.len() < 2 {
        return Err(SkipReason::Malformed("L2TP header cut short"));
    }
    let flags = be16(d, 0);
    if flags & 0x8000 != 0 || flags & 0x000f != 2 {
        return Err(SkipReason::NotTcp);
    }
    // Flags and version, optional length, tunnel and session, optional Ns/Nr, optional
    // offset size and its padding.
    let mut off = 2 + 2 * usize::from(flags & 0x4000 != 0) + 4;
    if flags & 0x0800 != 0 {
        off += 4;
    }
    if flags & 0x0200 != 0 {
        if d.len() < off + 2 {
            return Err(SkipReason::Malformed("L2TP header cut short"));
        }
        off += 2 + usize::from(be16(d, off));
    }
    match d.get(off..) {
        Some(rest) => ppp(rest, reported.saturating_sub(off), depth),
        None => Err(SkipReason::Malformed("L2TP header cut short")),
    }
}

/// Geneve: 8 bytes, its options, then the protocol it names (Ethernet or IP).
fn geneve(d: &[u8], reported: usize, depth: u8) -> Parsed {
    if d.len() < 8 {
        return Err(SkipReason::Malformed("Geneve header cut short"));
    }
    if d[0] >> 6 != 0 {
        return Err(SkipReason::NotTcp);
    }
    let off = 8 + usize::from(d[0] & 0x3f) * 4;
    let Some(rest) = d.get(off..) else {
        return Err(SkipReason::Malformed("Geneve options cut short"));
    };
    network(rest, reported.saturating_sub(off), be16(d, 2), depth)
}

/// The network layer at `d` with `reported` bytes on the wire, by ethertype.
#[inline]
fn network(d: &[u8], reported: usize, etype: u16, depth: u8) -> Parsed {
    if depth > MAX_DEPTH {
        return Err(SkipReason::Malformed("tunnels nested too deep"));
    }
    let depth = depth + 1;
    let version = match etype {
        ETH_IPV4 => 4,
        ETH_IPV6 => 6,
        GUESS_IP => match d.first() {
            Some(b) => b >> 4,
            None => return Err(SkipReason::Malformed("empty IP packet")),
        },
        _ => return encapsulated(d, reported, etype, depth),
    };
    match version {
        4 => parse_ipv4(d, reported, depth),
        6 => parse_ipv6(d, reported, depth),
        _ if etype == GUESS_IP => Err(SkipReason::Malformed("IP version is neither 4 nor 6")),
        _ => Err(SkipReason::Malformed(
            "IP version does not match the link's type",
        )),
    }
}

/// What a non-IP ethertype carries, when it is a tunnel or link we follow. Out of line: the
/// common case (IP straight on the link) must not pay for the rare ones.
#[cold]
#[inline(never)]
fn encapsulated(d: &[u8], reported: usize, etype: u16, depth: u8) -> Parsed {
    match etype {
        0x8847 | 0x8848 => mpls(d, reported, depth),
        0x8864 => pppoe(d, reported, depth),
        0x6558 => ethernet(d, reported, depth),
        _ => Err(SkipReason::NotTcp),
    }
}

/// What an IP packet carries, given its protocol number: TCP, or a tunnel to follow.
#[inline]
fn transport(
    proto: u8,
    (src, dst, ip_id): (Addr, Addr, u16),
    payload: &[u8],
    reported: usize,
    depth: u8,
) -> Parsed {
    match proto {
        6 => parse_tcp(src, dst, payload, reported, ip_id),
        _ => tunnel(proto, payload, reported, depth),
    }
}

/// An IP payload that is a tunnel (IP-in-IP, GRE, UDP tunnels, MPLS-in-IP), out of line.
#[cold]
#[inline(never)]
fn tunnel(proto: u8, payload: &[u8], reported: usize, depth: u8) -> Parsed {
    match proto {
        4 => network(payload, reported, ETH_IPV4, depth),
        41 => network(payload, reported, ETH_IPV6, depth),
        47 => gre(payload, reported, depth),
        17 => udp(payload, reported, depth),
        137 => mpls(payload, reported, depth),
        _ => Err(SkipReason::NotTcp),
    }
}

#[inline]
fn parse_ipv4(ip: &[u8], reported: usize, depth: u8) -> Parsed {
    let Some(h) = Ipv4::new(ip) else {
        return Err(SkipReason::Malformed("IPv4 header cut short"));
    };
    if h.version() != 4 {
        return Err(SkipReason::Malformed("IPv4 version field is not 4"));
    }
    let ihl = h.header_len();
    if ihl < 20 {
        return Err(SkipReason::Malformed("IPv4 header length below 20"));
    }
    let total = usize::from(h.total_len());
    if h.is_fragment() {
        return Err(SkipReason::Fragment);
    }
    let proto = h.protocol();
    if !matches!(proto, 6 | 4 | 41 | 47 | 17 | 137) {
        return Err(SkipReason::NotTcp);
    }
    // Total length 0 is what TSO/GSO captures show: use what the frame says.
    let ip_len = if total == 0 {
        reported
    } else {
        total.min(reported)
    };
    if ip_len < ihl || ip.len() < ihl {
        return Err(SkipReason::Malformed("IPv4 length shorter than its header"));
    }
    let src = Addr::v4(h.src());
    let dst = Addr::v4(h.dst());
    transport(proto, (src, dst, h.id()), &ip[ihl..], ip_len - ihl, depth)
}

fn parse_ipv6(ip: &[u8], reported: usize, depth: u8) -> Parsed {
    let Some(h) = Ipv6::new(ip) else {
        return Err(SkipReason::Malformed("IPv6 header cut short"));
    };
    if h.version() != 6 {
        return Err(SkipReason::Malformed("IPv6 version field is not 6"));
    }
    let payload = usize::from(h.payload_len());
    let (src, dst) = (h.src(), h.dst());
    let avail = reported.saturating_sub(40);
    let mut left = if payload == 0 {
        avail
    } else {
        payload.min(avail)
    };
    let mut next = h.next_header();
    let mut off = 40;
    loop {
        match next {
            6 | 4 | 41 | 47 | 17 | 137 => break,
            0 | 43 | 60 | 44 | 51 => {
                if ip.len() < off + 8 {
                    return Err(SkipReason::Malformed("IPv6 extension header cut short"));
                }
                let len = match next {
                    44 => {
                        if be16(ip, off + 2) & 0xfff9 != 0 {
                            return Err(SkipReason::Fragment);
                        }
                        8
                    }
                    51 => (usize::from(ip[off + 1]) + 2) * 4,
                    _ => (usize::from(ip[off + 1]) + 1) * 8,
                };
                if left < len {
                    return Err(SkipReason::Malformed(
                        "IPv6 extension header longer than the packet",
                    ));
                }
                next = ip[off];
                off += len;
                left -= len;
            }
            _ => return Err(SkipReason::NotTcp),
        }
    }
    if ip.len() < off {
        return Err(SkipReason::Malformed("IPv6 extension header cut short"));
    }
    let src = Addr {
        v6: true,
        bytes: src,
    };
    let dst = Addr {
        v6: true,
        bytes: dst,
    };
    transport(next, (src, dst, 0), &ip[off..], left, depth)
}

fn parse_tcp(src: Addr, dst: Addr, t: &[u8], reported: usize, ip_id: u16) -> Parsed {
    let Some(h) = Tcp::new(t) else {
        return Err(SkipReason::Malformed("TCP header cut short"));
    };
    let hlen = h.header_len() as u16;
    let seglen = (reported >= usize::from(hlen)).then(|| (reported - usize::from(hlen)) as u32);
    let opt_end = usize::from(hlen).min(t.len());
    let options = if opt_end > 20 {
        parse_options(&t[20..opt_end])
    } else {
        TcpOptions::default()
    };
    Ok(TcpSegment {
        src,
        dst,
        sport: h.src_port(),
        dport: h.dst_port(),
        seq: h.seq(),
        ack: h.ack(),
        flags: h.flags12(),
        window: h.window(),
        hlen,
        seglen,
        options,
        ip_id,
    })
}

/// Parses TCP options; stops (marking `malformed`) at an impossible length.
pub fn parse_options(mut o: &[u8]) -> TcpOptions {
    let mut r = TcpOptions::default();
    while let Some(&kind) = o.first() {
        match kind {
            0 => break,
            1 => {
                o = &o[1..];
                continue;
            }
            _ => {}
        }
        let Some(&len) = o.get(1) else {
            r.malformed = true;
            break;
        };
        let len = usize::from(len);
        if len < 2 || len > o.len() {
            r.malformed = true;
            break;
        }
        let v = &o[2..len];
        match (kind, len) {
            (2, 4) => r.mss = Some(be16(v, 0)),
            (3, 3) => r.wscale = Some(v[0]),
            (4, 2) => r.sack_permitted = true,
            (8, 10) => r.timestamps = Some((be32(v, 0), be32(v, 4))),
            (5, _) if (len - 2) % 8 == 0 => {
                for b in v.chunks_exact(8) {
                    if (r.sack_count as usize) < r.sack.len() {
                        r.sack[r.sack_count as usize] = (be32(b, 0), be32(b, 4));
                        r.sack_count += 1;
                    }
                }
            }
            (2 | 3 | 4 | 8 | 5, _) => r.malformed = true,
            _ => {}
        }
        o = &o[len..];
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a TCP header with the given options (padded to 4 bytes).
    pub fn tcp(
        sport: u16,
        dport: u16,
        seq: u32,
        ack: u32,
        fl: u16,
        win: u16,
        opts: &[u8],
    ) -> Vec<u8> {
        let mut o = opts.to_vec();
        while o.len() % 4 != 0 {
            o.push(0);
        }
        let hlen = 20 + o.len();
        let mut t = Vec::new();
        t.extend(sport.to_be_bytes());
        t.extend(dport.to_be_bytes());
        t.extend(seq.to_be_bytes());
        t.extend(ack.to_be_bytes());
        t.extend((((hlen as u16 / 4) << 12) | fl).to_be_bytes());
        t.extend(win.to_be_bytes());
        t.extend([0, 0, 0, 0]);
        t.extend(o);
        t
    }

    fn ipv4(payload: &[u8], total_extra: usize) -> Vec<u8> {
        let total = 20 + payload.len() + total_extra;
        let mut ip = vec![
            0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip.extend_from_slice(payload);
        ip
    }

    fn frame(link: u32, data: &[u8], orig: u32) -> Frame<'_> {
        Frame {
            number: 1,
            ts_ns: 0,
            link: LinkType(link),
            orig_len: orig,
            data,
        }
    }

    #[test]
    fn snaplen_cut_segment_keeps_its_true_length() {
        let t = tcp(1000, 80, 7, 9, flags::ACK, 512, &[]);
        // IP says 1000 bytes of payload follow; only the headers were captured.
        let ip = ipv4(&t, 1000);
        let mut eth = vec![0u8; 12];
        eth.extend([0x81, 0x00, 0, 5, 0x08, 0x00]); // one VLAN tag
        eth.extend(&ip);
        let s = parse_frame(&frame(1, &eth, (eth.len() + 1000) as u32)).unwrap();
        assert_eq!(
            (s.sport, s.dport, s.seq, s.ack, s.window),
            (1000, 80, 7, 9, 512)
        );
        assert_eq!(s.seglen, Some(1000));
        assert_eq!(s.ip_id, 0x1234);
        assert_eq!(s.src.to_string(), "10.0.0.1");
    }

    #[test]
    fn ethernet_padding_is_not_payload() {
        let t = tcp(1, 2, 0, 0, flags::ACK, 1, &[]);
        let mut ip = ipv4(&t, 0);
        ip.extend([0u8; 6]); // padding to the 60-byte minimum frame
        let s = parse_frame(&frame(LinkType::RAW.0, &ip, ip.len() as u32)).unwrap();
        assert_eq!(s.seglen, Some(0));
    }

    #[test]
    fn options_are_decoded_and_bad_lengths_flagged() {
        let o = [
            2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 3, 3, 7,
        ];
        let p = parse_options(&o);
        assert_eq!(p.mss, Some(1460));
        assert!(p.sack_permitted);
        assert_eq!(p.timestamps, Some((1, 2)));
        assert_eq!(p.wscale, Some(7));
        assert!(!p.malformed);
        let s = parse_options(&[5, 18, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4]);
        assert_eq!(s.sack_blocks(), &[(1, 2), (3, 4)]);
        assert!(parse_options(&[2, 40, 1]).malformed);
        assert!(parse_options(&[3, 0]).malformed);
        assert!(parse_options(&[2]).malformed);
    }

    #[test]
    fn cooked_null_and_ipv6_links_decode() {
        let t = tcp(5, 6, 1, 2, flags::SYN, 100, &[]);
        let ip = ipv4(&t, 0);
        let mut sll = vec![0u8; 14];
        sll.extend([0x08, 0x00]);
        sll.extend(&ip);
        assert_eq!(
            parse_frame(&frame(113, &sll, sll.len() as u32))
                .unwrap()
                .sport,
            5
        );
        let mut sll2 = vec![0x08, 0x00];
        sll2.extend([0u8; 18]);
        sll2.extend(&ip);
        assert_eq!(
            parse_frame(&frame(276, &sll2, sll2.len() as u32))
                .unwrap()
                .dport,
            6
        );
        let mut null = 2u32.to_le_bytes().to_vec();
        null.extend(&ip);
        assert_eq!(
            parse_frame(&frame(0, &null, null.len() as u32))
                .unwrap()
                .seq,
            1
        );
        let mut v6 = vec![0x60, 0, 0, 0];
        v6.extend(((t.len() + 8) as u16).to_be_bytes());
        v6.extend([60, 64]); // destination options first
        v6.extend([0u8; 32]);
        v6.extend([6, 0, 0, 0, 0, 0, 0, 0]);
        v6.extend(&t);
        let s = parse_frame(&frame(229, &v6, v6.len() as u32)).unwrap();
        assert!(s.src.v6);
        assert_eq!(s.seglen, Some(0));
    }

    #[test]
    fn fragments_and_other_protocols_are_skipped() {
        let t = tcp(1, 2, 0, 0, 0, 0, &[]);
        let mut ip = ipv4(&t, 0);
        ip[6] = 0x20; // more fragments
        assert_eq!(
            parse_frame(&frame(101, &ip, ip.len() as u32)).unwrap_err(),
            SkipReason::Fragment
        );
        let mut ip = ipv4(&t, 0);
        ip[9] = 17;
        assert_eq!(
            parse_frame(&frame(101, &ip, ip.len() as u32)).unwrap_err(),
            SkipReason::NotTcp
        );
        assert!(matches!(
            parse_frame(&frame(147, &ip, 40)),
            Err(SkipReason::UnsupportedLink(147))
        ));
    }

    /// An IPv6 packet around `payload` (next header `next`).
    fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
        let mut v6 = vec![0x60, 0, 0, 0];
        v6.extend((payload.len() as u16).to_be_bytes());
        v6.extend([next, 64]);
        v6.extend([0x20, 1, 0, 2]);
        v6.extend([0u8; 12]);
        v6.extend([0x20, 1, 0, 2]);
        v6.extend([0u8; 11]);
        v6.push(9);
        v6.extend_from_slice(payload);
        v6
    }

    /// An IPv4 packet with protocol `proto` around `payload`.
    fn ipv4_proto(proto: u8, payload: &[u8]) -> Vec<u8> {
        let mut ip = ipv4(payload, 0);
        ip[9] = proto;
        ip
    }

    #[test]
    fn tunnels_without_a_fixture_decode_to_the_inner_tcp() {
        let t = tcp(7, 8, 11, 12, flags::ACK, 100, &[]);
        let inner4 = ipv4(&t, 0);
        let raw = |d: &[u8]| parse_frame(&frame(101, d, d.len() as u32));
        // IPv6 in IPv4 and IPv4 in IPv6: the flow is the inner one.
        let s = raw(&ipv4_proto(41, &ipv6(6, &t))).unwrap();
        assert!(s.src.v6 && s.dport == 8);
        let s = raw(&ipv6(4, &inner4)).unwrap();
        assert_eq!((s.src.v6, s.src.to_string()), (false, "10.0.0.1".into()));
        // PPTP's enhanced GRE (version 1, with sequence and ACK numbers) carrying PPP with a
        // compressed protocol field.
        let mut gre = vec![0x30, 0x81, 0x88, 0x0b, 0, 40, 0, 1, 0, 0, 0, 5, 0, 0, 0, 4];
        gre.push(0x21);
        gre.extend(&inner4);
        assert_eq!(raw(&ipv4_proto(47, &gre)).unwrap().seq, 11);
        // L2TPv2 with length, sequence numbers and an offset (2 bytes of padding).
        let mut l2tp = vec![0x4a, 0x02, 0, 0, 0, 9, 0, 3, 0, 1, 0, 2, 0, 2, 0xee, 0xee];
        l2tp.extend([0xff, 0x03, 0x00, 0x21]);
        l2tp.extend(&inner4);
        let len = l2tp.len() as u16;
        l2tp[2..4].copy_from_slice(&len.to_be_bytes());
        let mut udp = vec![0x06, 0xa5, 0x06, 0xa5];
        udp.extend((8 + len).to_be_bytes());
        udp.extend([0, 0]);
        udp.extend(&l2tp);
        assert_eq!(raw(&ipv4_proto(17, &udp)).unwrap().ack, 12);
        // An L2TP control message, and UDP to another port: not TCP.
        let mut ctl = udp.clone();
        ctl[8] = 0xc8;
        assert_eq!(raw(&ipv4_proto(17, &ctl)).unwrap_err(), SkipReason::NotTcp);
        let mut other = udp.clone();
        other[0..4].copy_from_slice(&[0, 53, 0, 53]);
        assert_eq!(
            raw(&ipv4_proto(17, &other)).unwrap_err(),
            SkipReason::NotTcp
        );
        // 802.3 with LLC/SNAP on Ethernet.
        let mut eth = vec![0u8; 12];
        eth.extend(((8 + inner4.len()) as u16).to_be_bytes());
        eth.extend([0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
        eth.extend(&inner4);
        assert_eq!(
            parse_frame(&frame(1, &eth, eth.len() as u32))
                .unwrap()
                .sport,
            7
        );
        // Tunnels nested past the bound are refused, not followed.
        let mut deep = inner4.clone();
        for _ in 0..12 {
            deep = ipv4_proto(4, &deep);
        }
        assert!(matches!(raw(&deep), Err(SkipReason::Malformed(_))));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_on_any_link_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..120),
                                             link in proptest::sample::select(vec![0u32, 1, 9, 10, 12, 50, 51, 101, 104, 108, 113, 178, 204, 228, 229, 242, 276]),
                                             extra in 0u32..2000) {
            let f = frame(link, &data, data.len() as u32 + extra);
            let _ = parse_frame(&f);
        }
    }
}
