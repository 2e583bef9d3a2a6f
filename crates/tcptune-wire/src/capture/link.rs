//! Link-layer header types: the LINKTYPE_* number of a capture or interface, with the names
//! the pcap registry gives them.

/// A link-layer header type (LINKTYPE_* numbers from the pcap registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkType(pub u32);

impl LinkType {
    /// BSD loopback: a 4-byte address family in the capturing host's byte order, then the packet.
    pub const NULL: LinkType = LinkType(0);
    /// Ethernet II (VLAN tags are read through).
    pub const ETHERNET: LinkType = LinkType(1);
    /// DLT_RAW as numbered on most systems.
    pub const RAW_12: LinkType = LinkType(12);
    /// DLT_RAW as numbered on OpenBSD.
    pub const RAW_14: LinkType = LinkType(14);
    /// Raw IP: the frame starts with the IPv4 or IPv6 header.
    pub const RAW: LinkType = LinkType(101);
    /// OpenBSD loopback: a 4-byte address family in network byte order, then the packet.
    pub const LOOP: LinkType = LinkType(108);
    /// Linux cooked capture v1 (`tcpdump -i any`): a 16-byte pseudo-header.
    pub const LINUX_SLL: LinkType = LinkType(113);
    /// Raw IPv4 only.
    pub const IPV4: LinkType = LinkType(228);
    /// Raw IPv6 only.
    pub const IPV6: LinkType = LinkType(229);
    /// Linux cooked capture v2: a 20-byte pseudo-header with the interface index.
    pub const LINUX_SLL2: LinkType = LinkType(276);
    /// PPP with its 2-byte protocol field.
    pub const PPP: LinkType = LinkType(9);
    /// FDDI with an 802.2 LLC/SNAP header.
    pub const FDDI: LinkType = LinkType(10);
    /// PPP in HDLC-like framing (also Cisco HDLC's number on some systems: 50).
    pub const PPP_HDLC: LinkType = LinkType(50);
    /// PPPoE session payload (PPP) without its Ethernet header.
    pub const PPP_ETHER: LinkType = LinkType(51);
    /// Cisco HDLC: address, control and a 2-byte EtherType.
    pub const C_HDLC: LinkType = LinkType(104);
    /// Juniper's Ethernet capture: a Juniper pseudo-header before the Ethernet frame.
    pub const JUNIPER_ETHER: LinkType = LinkType(178);
    /// PPP with a leading direction byte.
    pub const PPP_WITH_DIR: LinkType = LinkType(204);
    /// IP over InfiniBand as Linux captures it: a 20-byte address, then a 4-byte header.
    pub const IPOIB: LinkType = LinkType(242);

    /// The registry's name for the common link types (for messages), else None.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "BSD loopback",
            1 => "Ethernet",
            6 => "Token Ring",
            7 => "ARCNET",
            8 => "SLIP",
            9 => "PPP",
            10 => "FDDI",
            12 | 14 | 101 => "raw IP",
            50 => "PPP in HDLC framing",
            51 => "PPPoE",
            104 => "Cisco HDLC",
            105 => "IEEE 802.11",
            107 => "Frame Relay",
            108 => "OpenBSD loopback",
            113 => "Linux cooked (SLL)",
            119 => "Prism 802.11",
            127 => "802.11 radiotap",
            138 => "Apple IP over IEEE 1394",
            139 => "SS7 MTP2",
            140 => "SS7 MTP2",
            143 => "DOCSIS",
            147..=162 => "user-defined (DLT_USER)",
            163 => "802.11 AVS",
            165 => "BACnet MS/TP",
            166 => "PPP PPPD",
            167 => "Juniper PPPoE",
            178 => "Juniper Ethernet",
            187 => "Bluetooth HCI H4",
            189 => "USB Linux",
            192 => "PPI",
            195 => "IEEE 802.15.4",
            201 => "Bluetooth HCI H4 with pseudo-header",
            204 => "PPP with direction",
            215 => "IEEE 802.15.4 non-ASK PHY",
            220 => "USB Linux mmapped",
            227 => "SocketCAN",
            228 => "raw IPv4",
            229 => "raw IPv6",
            239 => "NFLOG",
            242 => "IP over InfiniBand",
            249 => "USBPcap",
            253 => "Netlink",
            276 => "Linux cooked v2 (SLL2)",
            _ => return None,
        })
    }
}

impl std::fmt::Display for LinkType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} (link type {})", self.0),
            None => write!(f, "link type {}", self.0),
        }
    }
}
