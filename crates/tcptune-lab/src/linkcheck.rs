//! Checks an emulated link against an ideal one, from captures taken at both of its ends: the
//! delay error of every packet is the time it reached the receiving host minus the time an
//! ideal link with the same settings would have delivered it, given the same arrivals.
//!
//! The ideal link is a FIFO that serialises each packet at the configured rate (counting the
//! per-packet overhead) and adds the configured one-way delay. That is what the emulator's
//! pipeline computes too, written again here on purpose, in a dozen lines: an oracle must not
//! share the code it checks. Measuring against it, rather than against the configured delay
//! alone, separates the emulator's own error (reading late, waking late, writing late) from the
//! queueing a real link of that rate would also impose on a bursty load.
//!
//! Packets are matched across the two captures by flow and position in the flow: for TCP the
//! end of the segment's sequence range (so a super-packet the emulator coalesced with its
//! neighbour still matches, at the time the bytes arrived), for UDP iperf3's datagram counter.

use std::collections::HashMap;

use tcptune_wire::header::{udp_ports, Ipv4, Tcp, IPPROTO_TCP, IPPROTO_UDP};

/// Bytes charged per wire packet besides the IP packet (the link's default overhead).
pub const OVERHEAD_BYTES: u64 = 14;

/// One packet seen at one end of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Capture time, ns.
    pub ts_ns: i64,
    /// Bytes the ideal link serialises: every wire packet an offloaded super-packet stands
    /// for, with its headers and the per-packet overhead.
    pub wire_bytes: u64,
    /// Where the packet sits in its flow; None for packets that carry no payload to match.
    pub key: Option<Key>,
}

/// A flow (protocol and ports) and the end of the packet's range in it: TCP sequence number
/// after the last payload byte, or iperf3's UDP datagram counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    /// IP protocol number (TCP or UDP).
    pub proto: u8,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The range's end: TCP sequence number after the payload, or the UDP datagram counter.
    pub end: u32,
    /// Payload units the packet covers before `end` (bytes for TCP, 1 for UDP).
    pub len: u32,
}

/// Decodes a raw IPv4 packet (a TUN capture: no link header) as the link sees it. `mtu` sizes
/// the wire packets a TCP super-packet stands for. None for anything but IPv4 TCP/UDP.
pub fn decode(ts_ns: i64, ip: &[u8], mtu: u32) -> Option<Seen> {
    let h = Ipv4::new(ip).filter(|h| h.version() == 4)?;
    let ihl = h.header_len();
    let total = u64::from(h.total_len());
    let proto = h.protocol();
    let l4 = h.payload()?;
    match proto {
        IPPROTO_TCP => {
            let tcp = Tcp::new(l4)?;
            let hdr = (ihl + tcp.header_len()) as u64;
            let payload = total.saturating_sub(hdr);
            let mss = u64::from(mtu).saturating_sub(hdr).max(1);
            let segs = payload.div_ceil(mss).max(1);
            Some(Seen {
                ts_ns,
                wire_bytes: total + (segs - 1) * hdr + segs * OVERHEAD_BYTES,
                key: (payload > 0).then(|| Key {
                    proto,
                    sport: tcp.src_port(),
                    dport: tcp.dst_port(),
                    end: tcp.seq().wrapping_add(payload as u32),
                    len: payload as u32,
                }),
            })
        }
        IPPROTO_UDP => {
            let (sport, dport) = udp_ports(l4)?;
            // iperf3's datagram: seconds, microseconds, then a 32-bit counter.
            let counter = l4
                .get(16..20)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
            Some(Seen {
                ts_ns,
                wire_bytes: total + OVERHEAD_BYTES,
                key: counter.map(|end| Key {
                    proto,
                    sport,
                    dport,
                    end,
                    len: 1,
                }),
            })
        }
        _ => None,
    }
}

/// The ideal link's delivery time (ns) of each packet entering it at `sent` (in order).
pub fn ideal_deliveries(sent: &[Seen], rate_bps: f64, delay_ns: f64) -> Vec<f64> {
    let mut free = f64::MIN;
    sent.iter()
        .map(|p| {
            let tx = p.wire_bytes as f64 * 8e9 / rate_bps;
            free = free.max(p.ts_ns as f64) + tx;
            free + delay_ns
        })
        .collect()
}

/// The delay errors of one direction.
#[derive(Debug, Clone, Default)]
pub struct Errors {
    /// Measured minus ideal delivery, ns, one per matched packet, sorted.
    pub ns: Vec<i64>,
    /// Measured minus (sent + the configured delay) alone, sorted: what a probe without the
    /// model would report, queueing and serialisation included.
    pub raw_ns: Vec<i64>,
    /// Packets with a key at the sending end.
    pub keyed: usize,
    /// Bytes that entered the link, and over what time (the offered load).
    pub bytes: u64,
    /// Nanoseconds from the first to the last packet that entered.
    pub span_ns: i64,
}

impl Errors {
    /// The `q` quantile of the errors in µs.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        quantile_us(&self.ns, q)
    }
    /// The `q` quantile of the raw excess over the configured delay in µs.
    pub fn raw_quantile_us(&self, q: f64) -> Option<f64> {
        quantile_us(&self.raw_ns, q)
    }
    /// Pools another run's packets with these.
    pub fn merge(&mut self, other: Errors) {
        self.ns.extend(other.ns);
        self.ns.sort_unstable();
        self.raw_ns.extend(other.raw_ns);
        self.raw_ns.sort_unstable();
        self.keyed += other.keyed;
        self.bytes += other.bytes;
        self.span_ns += other.span_ns;
    }

    /// The load offered to the link, bits/s.
    pub fn offered_bps(&self) -> f64 {
        if self.span_ns <= 0 {
            return 0.0;
        }
        self.bytes as f64 * 8e9 / self.span_ns as f64
    }
}

fn quantile_us(sorted: &[i64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    Some(sorted[i] as f64 / 1e3)
}

/// Per flow, the received packets' ranges sorted by their (unwrapped) end.
struct Received {
    /// (first unit, end, ts) with positions relative to the flow's first end seen.
    ranges: Vec<(i64, i64, i64)>,
    base: u32,
}

fn unwrap(base: u32, v: u32) -> i64 {
    i64::from(v.wrapping_sub(base) as i32)
}

/// Matches what was sent with what was received and returns each packet's error against the
/// ideal link. The first copy of a range counts on both sides (a retransmission is a new
/// packet at the sender but its bytes are matched to their first arrival).
pub fn delay_errors(sent: &[Seen], received: &[Seen], rate_bps: f64, delay_ns: f64) -> Errors {
    let ideal = ideal_deliveries(sent, rate_bps, delay_ns);
    let mut flows: HashMap<(u8, u16, u16), Received> = HashMap::new();
    for r in received {
        let Some(k) = r.key else { continue };
        let f = flows
            .entry((k.proto, k.sport, k.dport))
            .or_insert_with(|| Received {
                ranges: Vec::new(),
                base: k.end.wrapping_sub(k.len),
            });
        let end = unwrap(f.base, k.end);
        f.ranges.push((end - i64::from(k.len), end, r.ts_ns));
    }
    for f in flows.values_mut() {
        // By end, earliest arrival first for equal ends.
        f.ranges.sort_unstable_by_key(|&(_, end, ts)| (end, ts));
    }
    let mut out = Errors {
        bytes: sent.iter().map(|p| p.wire_bytes).sum(),
        span_ns: match (sent.first(), sent.last()) {
            (Some(a), Some(b)) => b.ts_ns - a.ts_ns,
            _ => 0,
        },
        ..Errors::default()
    };
    let mut matched = std::collections::HashSet::new();
    for (p, want) in sent.iter().zip(&ideal) {
        let Some(k) = p.key else { continue };
        out.keyed += 1;
        if !matched.insert(k) {
            continue;
        }
        let Some(f) = flows.get(&(k.proto, k.sport, k.dport)) else {
            continue;
        };
        let end = unwrap(f.base, k.end);
        // The received packet holding this packet's last unit: the first range ending at or
        // after it that starts before it.
        let i = f.ranges.partition_point(|&(_, e, _)| e < end);
        if let Some(&(start, _, ts)) = f.ranges.get(i) {
            if start < end {
                out.ns.push(ts - want.round() as i64);
                out.raw_ns.push(ts - p.ts_ns - delay_ns.round() as i64);
            }
        }
    }
    out.ns.sort_unstable();
    out.raw_ns.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(seq: u32, payload: u16) -> Vec<u8> {
        let total = 20 + 32 + payload;
        let mut p = vec![0u8; usize::from(total).min(52)];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[9] = 6;
        p[20..22].copy_from_slice(&5001u16.to_be_bytes());
        p[22..24].copy_from_slice(&80u16.to_be_bytes());
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[32] = 8 << 4;
        p
    }

    #[test]
    fn a_super_packet_is_charged_as_its_wire_packets() {
        // 64 KiB of payload with 52-byte headers at MTU 1500: 46 segments of ≤ 1448 bytes.
        let s = decode(0, &tcp(1000, 65_160), 1500).unwrap();
        let segs = 65_160u64.div_ceil(1448);
        assert_eq!(segs, 45);
        assert_eq!(s.wire_bytes, 65_160 + 45 * 52 + 45 * OVERHEAD_BYTES);
        let k = s.key.unwrap();
        assert_eq!((k.end, k.len, k.sport, k.dport), (66_160, 65_160, 5001, 80));
        // A pure ACK has nothing to match.
        assert_eq!(decode(0, &tcp(1, 0), 1500).unwrap().key, None);
        // Not IPv4 TCP/UDP.
        assert_eq!(decode(0, &[0x60; 40], 1500), None);
        assert_eq!(decode(0, &[0x45; 10], 1500), None);
    }

    #[test]
    fn the_ideal_link_queues_a_burst_and_adds_the_delay() {
        // Three 1250-byte (wire) packets at once on 1 Gbit/s: 10 µs each, then 1 ms.
        let p = |ts| Seen {
            ts_ns: ts,
            wire_bytes: 1250,
            key: None,
        };
        let d = ideal_deliveries(&[p(0), p(0), p(0), p(100_000)], 1e9, 1e6);
        assert_eq!(d, vec![1_010_000.0, 1_020_000.0, 1_030_000.0, 1_110_000.0]);
    }

    #[test]
    fn errors_match_by_flow_position_even_across_coalescing() {
        let mtu = 1500;
        let sent: Vec<Seen> = [(0, 0u32), (0, 1448), (50_000, 2896)]
            .iter()
            .map(|&(ts, seq)| decode(ts, &tcp(7 + seq, 1448), mtu).unwrap())
            .collect();
        let ideal = ideal_deliveries(&sent, 1e9, 1e6);
        // The first two arrive coalesced (one packet of 2896 bytes) 5 µs after the second's
        // ideal time; the third 2 µs late.
        let mut both = decode(0, &tcp(7, 2896), mtu).unwrap();
        both.ts_ns = ideal[1] as i64 + 5_000;
        let mut third = decode(0, &tcp(7 + 2896, 1448), mtu).unwrap();
        third.ts_ns = ideal[2] as i64 + 2_000;
        let e = delay_errors(&sent, &[both, third], 1e9, 1e6);
        assert_eq!(e.keyed, 3);
        let first_err = (ideal[1] - ideal[0]) as i64 + 5_000;
        assert_eq!(e.ns, {
            let mut v = vec![first_err, 5_000, 2_000];
            v.sort_unstable();
            v
        });
        assert_eq!(e.quantile_us(0.0), Some(2.0));
        let mut pooled = e.clone();
        pooled.merge(e.clone());
        assert_eq!(pooled.ns.len(), 6);
        assert_eq!(pooled.keyed, 6);
        assert!(pooled.ns.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(pooled.offered_bps(), e.offered_bps());
        // Nothing received: nothing matched, the load still counted.
        let none = delay_errors(&sent, &[], 1e9, 1e6);
        assert!(none.ns.is_empty() && none.quantile_us(0.5).is_none());
        assert_eq!(none.bytes, sent.iter().map(|s| s.wire_bytes).sum::<u64>());
    }

    #[test]
    fn udp_datagrams_match_by_iperf3_counter() {
        let udp = |counter: u32| {
            let mut p = vec![0u8; 20 + 8 + 16];
            p[0] = 0x45;
            p[2..4].copy_from_slice(&1500u16.to_be_bytes());
            p[9] = 17;
            p[20..22].copy_from_slice(&40000u16.to_be_bytes());
            p[22..24].copy_from_slice(&5201u16.to_be_bytes());
            p[36..40].copy_from_slice(&counter.to_be_bytes());
            p
        };
        let sent: Vec<Seen> = (1..=3)
            .map(|c| decode(i64::from(c) * 20_000, &udp(c), 1500).unwrap())
            .collect();
        assert_eq!(sent[0].wire_bytes, 1514);
        let ideal = ideal_deliveries(&sent, 1e9, 1e6);
        // Datagram 2 is lost; 3 arrives 1 µs late, 1 on time.
        let mut r1 = decode(0, &udp(1), 1500).unwrap();
        r1.ts_ns = ideal[0] as i64;
        let mut r3 = decode(0, &udp(3), 1500).unwrap();
        r3.ts_ns = ideal[2] as i64 + 1_000;
        let e = delay_errors(&sent, &[r3, r1], 1e9, 1e6);
        assert_eq!((e.keyed, e.ns.clone()), (3, vec![0, 1_000]));
        // Against the configured delay alone: each datagram's 12.1 µs of serialisation too.
        assert_eq!(e.raw_ns, vec![12_112, 13_112]);
    }
}
