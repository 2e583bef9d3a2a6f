//! The most TCP payload a link can carry: its line rate times the payload's share of each
//! packet on the wire. Full-sized segments carry an MSS of payload inside IP and TCP headers
//! (40 bytes for IPv4, 60 for IPv6, plus 12 for the timestamp option) and the link adds its
//! own framing (Ethernet on a real wire: 14 header + 4 FCS + 8 preamble + 12 inter-frame gap =
//! 38 bytes; netem and the lab's emulator charge 14 by default). A flow at this rate is at the
//! path's capacity, not short of it: comparing goodput with the raw line rate would call a
//! full 50 Mbit/s link (~47 Mbit/s of payload) a problem.

use crate::units::Rate;

/// Framing a real Ethernet wire adds to each IP packet: header, FCS, preamble, gap.
pub const ETHERNET_WIRE_FRAMING: u32 = 38;
/// Framing netem (and the lab's emulator, by default) charges per packet: the Ethernet header.
pub const NETEM_FRAMING: u32 = 14;

/// The IP + TCP header bytes of a data segment.
pub fn tcp_ip_header_bytes(ipv6: bool, timestamps: bool) -> u32 {
    (if ipv6 { 60 } else { 40 }) + if timestamps { 12 } else { 0 }
}

/// The payload rate of a link of `line_rate` carrying full segments of `mss` payload bytes
/// with `header` bytes of IP/TCP header and `framing` bytes of link framing per packet.
pub fn goodput_ceiling(line_rate: Rate, mss: u32, header: u32, framing: u32) -> Rate {
    let wire = mss as f64 + header as f64 + framing as f64;
    if wire <= 0.0 {
        return Rate::from_bps(0.0);
    }
    Rate::from_bps(line_rate.bps() * mss as f64 / wire)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifty_megabit_ethernet_carries_about_47_megabit_of_payload() {
        // MSS 1448 with timestamps: 1448 / (1448 + 52 + 38) = 0.9415.
        let g = goodput_ceiling(
            Rate::from_bps(50e6),
            1448,
            tcp_ip_header_bytes(false, true),
            ETHERNET_WIRE_FRAMING,
        );
        assert!((g.bps() - 50e6 * 1448.0 / 1538.0).abs() < 1.0, "{g}");
        assert!(g.bps() > 47.0e6 && g.bps() < 47.1e6);
        // IPv6 without timestamps, netem framing.
        let g = goodput_ceiling(
            Rate::from_bps(1e9),
            1440,
            tcp_ip_header_bytes(true, false),
            14,
        );
        assert!((g.bps() - 1e9 * 1440.0 / 1514.0).abs() < 1.0);
    }
}
