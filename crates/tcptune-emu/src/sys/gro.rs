//! Software segmentation and receive-side coalescing, so per-packet decisions cost little.
//!
//! [`segment`] splits a TSO super-packet read from the sender's TUN into the wire segments the
//! NIC would have sent (headers fixed up, checksum left partial), so loss, duplication,
//! corruption and reordering act per wire packet while the sender's stack still hands over
//! 64 KB at a time.
//!
//! [`coalesce`] is receive-side coalescing (what the kernel's GRO does for a NIC): consecutive TCP segments
//! of one flow that leave the link together are written to the receiving TUN as one
//! offloaded super-packet, so the receiving stack (which runs inside our write(2)) handles one
//! skb instead of dozens. This is what makes per-packet impairment affordable at Gbit/s.
//!
//! Only segments GRO itself would merge are merged: same addresses, ports, IP header fields,
//! ACK number, window and TCP options; contiguous sequence numbers; ACK (and a final PSH)
//! flags only; equal payload sizes except a shorter last one. Every segment's checksum is
//! verified first, so a corrupted packet is never hidden inside a super-packet whose checksum
//! the kernel would recompute: it is written on its own and rejected by the receiver.

use tcptune_wire::header::{Ip, Ipv4, Ipv6, Tcp, IPPROTO_TCP};

use super::tun::VNET_HDR_LEN;

const NEEDS_CSUM: u8 = 1;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
/// Largest IP packet (IPv4 total length is 16 bits).
const MAX_IP: usize = 65_535;

/// What coalescing needs to know about one segment.
struct Seg {
    v6: bool,
    ip_len: usize,
    tcp_len: usize,
    seq: u32,
    flags: u8,
    payload: usize,
}

fn sum16(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Ones-complement sum of the TCP pseudo-header for a segment of `tcp_total` bytes.
fn pseudo_sum(ip: &[u8], v6: bool, tcp_total: usize) -> u64 {
    let addrs = if v6 { &ip[8..40] } else { &ip[12..20] };
    sum16(addrs, 6 + tcp_total as u64)
}

/// Parses a single (not offloaded) TCP segment whose checksum is valid, or partial (as
/// [`segment`] and the kernel leave it; a corrupted frame has lost that flag).
fn parse(frame: &[u8]) -> Option<Seg> {
    if frame.len() <= VNET_HDR_LEN || frame[1] != 0 {
        return None;
    }
    let partial = frame[0] & NEEDS_CSUM != 0;
    let ip = &frame[VNET_HDR_LEN..];
    let (v6, ip_len, total) = match Ip::new(ip)? {
        Ip::V4(h) => {
            // Protocol TCP, not a fragment (only DF may be set).
            if h.protocol() != IPPROTO_TCP || h.is_fragment() || h.header_len() < 20 {
                return None;
            }
            (false, h.header_len(), usize::from(h.total_len()))
        }
        Ip::V6(h) => {
            // No extension headers: next header TCP.
            if h.next_header() != IPPROTO_TCP {
                return None;
            }
            (true, 40, 40 + usize::from(h.payload_len()))
        }
    };
    if total != ip.len() || ip.len() < ip_len + 20 {
        return None;
    }
    let tcp = &ip[ip_len..];
    let th = Tcp::new(tcp)?;
    let tcp_len = th.header_len();
    if tcp_len < 20 || tcp.len() < tcp_len {
        return None;
    }
    if partial {
        let start = usize::from(u16::from_le_bytes([frame[6], frame[7]]));
        let off = usize::from(u16::from_le_bytes([frame[8], frame[9]]));
        if start != ip_len || off != 16 {
            return None;
        }
    } else if fold(sum16(tcp, pseudo_sum(ip, v6, tcp.len()))) != 0xffff {
        return None; // corrupted (or odd): never merge it
    }
    Some(Seg {
        v6,
        ip_len,
        tcp_len,
        seq: th.seq(),
        flags: th.flags(),
        payload: tcp.len() - tcp_len,
    })
}

/// True when `b` may follow `a` (the last segment of a group whose first is `first`).
fn mergeable(first: &[u8], f: &Seg, a: &Seg, b_frame: &[u8], b: &Seg, size: usize) -> bool {
    if b.v6 != f.v6 || b.ip_len != f.ip_len || b.tcp_len != f.tcp_len {
        return false;
    }
    if a.flags != 0x10 || !(b.flags == 0x10 || b.flags == 0x18) || b.payload == 0 {
        return false;
    }
    if b.payload > f.payload || a.payload != f.payload {
        return false;
    }
    if a.seq.wrapping_add(a.payload as u32) != b.seq {
        return false;
    }
    if size + b.payload > MAX_IP - f.ip_len - f.tcp_len {
        return false;
    }
    let (x, y) = (&first[VNET_HDR_LEN..], &b_frame[VNET_HDR_LEN..]);
    let same_ip = if f.v6 {
        x[0..4] == y[0..4] && x[7] == y[7] && x[8..40] == y[8..40]
    } else {
        x[1] == y[1] && x[6] == y[6] && x[8] == y[8] && x[12..20] == y[12..20]
    };
    let (tx, ty) = (&x[f.ip_len..], &y[f.ip_len..]);
    // Ports, ACK number, window, and all options must match (GRO's rule).
    same_ip
        && tx[0..4] == ty[0..4]
        && tx[8..12] == ty[8..12]
        && tx[14..16] == ty[14..16]
        && tx[20..f.tcp_len] == ty[20..f.tcp_len]
}

/// Builds one offloaded frame from `frames` (all mergeable, at least two).
fn build(frames: &[&[u8]], segs: &[Seg]) -> Vec<u8> {
    let f = &segs[0];
    let hdr = f.ip_len + f.tcp_len;
    let payload: usize = segs.iter().map(|s| s.payload).sum();
    let mut out = Vec::with_capacity(VNET_HDR_LEN + hdr + payload);
    out.extend_from_slice(&[0u8; VNET_HDR_LEN]);
    out.extend_from_slice(&frames[0][VNET_HDR_LEN..VNET_HDR_LEN + hdr]);
    for (fr, s) in frames.iter().zip(segs) {
        let start = VNET_HDR_LEN + s.ip_len + s.tcp_len;
        out.extend_from_slice(&fr[start..]);
    }
    let ip_total = hdr + payload;
    let tcp_total = f.tcp_len + payload;
    {
        let ip = &mut out[VNET_HDR_LEN..];
        if f.v6 {
            ip[4..6].copy_from_slice(&(tcp_total as u16).to_be_bytes());
        } else {
            ip[2..4].copy_from_slice(&(ip_total as u16).to_be_bytes());
            ip[10..12].copy_from_slice(&[0, 0]);
            let c = !fold(sum16(&ip[..f.ip_len], 0));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        let psh = segs.iter().any(|s| s.flags & 0x08 != 0);
        let ps = fold(pseudo_sum(ip, f.v6, tcp_total));
        let tcp = &mut ip[f.ip_len..];
        if psh {
            tcp[13] |= 0x08;
        }
        // CHECKSUM_PARTIAL: the field holds the pseudo-header sum; the kernel adds the rest.
        tcp[16..18].copy_from_slice(&ps.to_be_bytes());
    }
    out[0] = NEEDS_CSUM;
    out[1] = if f.v6 { GSO_TCPV6 } else { GSO_TCPV4 };
    out[2..4].copy_from_slice(&(hdr as u16).to_le_bytes());
    out[4..6].copy_from_slice(&(f.payload as u16).to_le_bytes());
    out[6..8].copy_from_slice(&(f.ip_len as u16).to_le_bytes());
    out[8..10].copy_from_slice(&16u16.to_le_bytes());
    out
}

/// Splits an offloaded TCP super-packet into wire segments of `gso_size` payload bytes, each
/// a single frame with a partial checksum; None when `frame` is not one (pass it whole).
pub fn segment(frame: &[u8]) -> Option<Vec<Vec<u8>>> {
    if frame.len() <= VNET_HDR_LEN || frame[0] & NEEDS_CSUM == 0 {
        return None;
    }
    let v6 = match frame[1] & 0x7f {
        GSO_TCPV4 => false,
        GSO_TCPV6 => true,
        _ => return None,
    };
    let mss = usize::from(u16::from_le_bytes([frame[4], frame[5]]));
    let ip = &frame[VNET_HDR_LEN..];
    // The IP version is the offload's (the virtio header's GSO type), as the kernel set it.
    let ip_len = if v6 {
        if Ipv6::new(ip)?.next_header() != IPPROTO_TCP {
            return None;
        }
        40
    } else {
        let h = Ipv4::new(ip)?;
        if h.protocol() != IPPROTO_TCP {
            return None;
        }
        h.header_len()
    };
    let tcp_len = Tcp::new(ip.get(ip_len..)?)?.header_len();
    let hdr = ip_len + tcp_len;
    if mss == 0 || ip.len() <= hdr || tcp_len < 20 {
        return None;
    }
    let payload = &ip[hdr..];
    let n = payload.len().div_ceil(mss);
    let seq0 = u32::from_be_bytes([
        ip[ip_len + 4],
        ip[ip_len + 5],
        ip[ip_len + 6],
        ip[ip_len + 7],
    ]);
    let id0 = u16::from_be_bytes([ip[4], ip[5]]);
    let mut out = Vec::with_capacity(n);
    for (i, chunk) in payload.chunks(mss).enumerate() {
        let mut f = Vec::with_capacity(VNET_HDR_LEN + hdr + chunk.len());
        f.extend_from_slice(&[NEEDS_CSUM, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&(ip_len as u16).to_le_bytes());
        f.extend_from_slice(&16u16.to_le_bytes());
        f.extend_from_slice(&ip[..hdr]);
        f.extend_from_slice(chunk);
        let tcp_total = tcp_len + chunk.len();
        let p = &mut f[VNET_HDR_LEN..];
        if v6 {
            p[4..6].copy_from_slice(&(tcp_total as u16).to_be_bytes());
        } else {
            p[2..4].copy_from_slice(&((hdr + chunk.len()) as u16).to_be_bytes());
            p[4..6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            p[10..12].copy_from_slice(&[0, 0]);
            let c = !fold(sum16(&p[..ip_len], 0));
            p[10..12].copy_from_slice(&c.to_be_bytes());
        }
        let ps = fold(pseudo_sum(p, v6, tcp_total));
        let t = &mut p[ip_len..];
        let seq = seq0.wrapping_add((i * mss) as u32);
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        if i + 1 < n {
            t[13] &= !0x09; // FIN and PSH only on the last segment
        }
        if i > 0 {
            t[13] &= !0x80; // CWR only on the first
        }
        t[16..18].copy_from_slice(&ps.to_be_bytes());
        out.push(f);
    }
    Some(out)
}

/// Calls `write` once per output frame: runs of mergeable segments as one offloaded frame,
/// everything else unchanged, in the original order.
pub fn coalesce(frames: &[Vec<u8>], mut write: impl FnMut(&[u8])) {
    let mut i = 0;
    while i < frames.len() {
        let Some(first) = parse(&frames[i]) else {
            write(&frames[i]);
            i += 1;
            continue;
        };
        let mut segs = vec![first];
        let mut size = segs[0].payload;
        let mut j = i + 1;
        while j < frames.len() {
            let Some(s) = parse(&frames[j]) else { break };
            let last = &segs[segs.len() - 1];
            if !mergeable(&frames[i], &segs[0], last, &frames[j], &s, size) {
                break;
            }
            size += s.payload;
            let short = s.payload < segs[0].payload || s.flags & 0x08 != 0;
            segs.push(s);
            j += 1;
            if short {
                break; // a shorter or PSH segment ends a GRO run
            }
        }
        if segs.len() == 1 {
            write(&frames[i]);
        } else {
            let refs: Vec<&[u8]> = frames[i..j].iter().map(Vec::as_slice).collect();
            write(&build(&refs, &segs));
        }
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 TCP segment with timestamps and a valid checksum, in a plain virtio frame.
    fn seg(seq: u32, payload: &[u8], flags: u8) -> Vec<u8> {
        let mut ip = vec![0u8; 20 + 32];
        ip[0] = 0x45;
        let total = (52 + payload.len()) as u16;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
        ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
        let c = !fold(sum16(&ip[..20], 0));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let t = &mut ip[20..];
        t[0..2].copy_from_slice(&5201u16.to_be_bytes());
        t[2..4].copy_from_slice(&40000u16.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[8..12].copy_from_slice(&77u32.to_be_bytes());
        t[12] = 8 << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&500u16.to_be_bytes());
        t[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7]);
        ip.extend_from_slice(payload);
        let ps = pseudo_sum(&ip, false, 32 + payload.len());
        let c = !fold(sum16(&ip[20..], ps));
        ip[20 + 16..20 + 18].copy_from_slice(&c.to_be_bytes());
        let mut f = vec![0u8; VNET_HDR_LEN];
        f.extend_from_slice(&ip);
        f
    }

    fn run(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        coalesce(frames, |f| out.push(f.to_vec()));
        out
    }

    #[test]
    fn contiguous_segments_become_one_offloaded_frame_with_a_valid_partial_checksum() {
        let p = [7u8; 100];
        let frames = vec![
            seg(1000, &p, 0x10),
            seg(1100, &p, 0x10),
            seg(1200, &p[..40], 0x18),
        ];
        let out = run(&frames);
        assert_eq!(out.len(), 1);
        let f = &out[0];
        assert_eq!((f[0], f[1]), (NEEDS_CSUM, GSO_TCPV4));
        assert_eq!(u16::from_le_bytes([f[4], f[5]]), 100); // gso_size
        assert_eq!(u16::from_le_bytes([f[2], f[3]]), 52); // hdr_len
        let ip = &f[VNET_HDR_LEN..];
        assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), ip.len());
        assert_eq!(ip.len(), 52 + 240);
        assert_eq!(fold(sum16(&ip[..20], 0)), 0xffff, "IPv4 header checksum");
        assert_eq!(ip[20 + 13], 0x18, "PSH carried over");
        // Completing the partial checksum gives a valid segment.
        let mut full = ip.to_vec();
        full[36..38].copy_from_slice(&[0, 0]);
        let c = !fold(sum16(
            &full[20..],
            pseudo_sum(&full, false, full.len() - 20),
        ));
        full[36..38].copy_from_slice(&c.to_be_bytes());
        assert_eq!(
            fold(sum16(
                &full[20..],
                pseudo_sum(&full, false, full.len() - 20)
            )),
            0xffff
        );
        assert_eq!(
            u16::from_be_bytes([ip[36], ip[37]]),
            fold(pseudo_sum(ip, false, ip.len() - 20))
        );
    }

    #[test]
    fn segmenting_a_super_packet_and_coalescing_it_again_round_trips() {
        let p: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
        let merged = run(&[
            seg(1000, &p[..100], 0x10),
            seg(1100, &p[100..200], 0x10),
            seg(1200, &p[200..], 0x18),
        ]);
        let segs = segment(&merged[0]).unwrap();
        assert_eq!(segs.len(), 3);
        for (i, s) in segs.iter().enumerate() {
            let ip = &s[VNET_HDR_LEN..];
            assert_eq!(fold(sum16(&ip[..20], 0)), 0xffff);
            let seq = u32::from_be_bytes([ip[24], ip[25], ip[26], ip[27]]);
            assert_eq!(seq, 1000 + 100 * i as u32);
            assert_eq!(ip[33], if i == 2 { 0x18 } else { 0x10 });
            assert_eq!(&ip[52..], &p[100 * i..(100 * i + 100).min(250)]);
        }
        let again = run(&segs);
        assert_eq!(again, merged);
        // A corrupted segment (flag cleared, checksum partial so invalid) is never merged.
        let mut segs = segs;
        segs[1][0] = 0;
        let out = run(&segs);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn gaps_corruption_and_other_flags_break_runs() {
        let p = [7u8; 100];
        let mut bad = seg(1200, &p, 0x10);
        let n = bad.len();
        bad[n - 1] ^= 4; // a flipped payload bit: checksum fails
        let frames = vec![
            seg(1000, &p, 0x10),
            seg(1100, &p, 0x10),
            bad,
            seg(1300, &p, 0x10),
            seg(1500, &p, 0x10), // gap
            seg(1600, &p, 0x11), // FIN
        ];
        let out = run(&frames);
        assert_eq!(out.len(), 5);
        assert_eq!(out[0][1], GSO_TCPV4);
        assert_eq!(
            out[1], frames[2],
            "the corrupted segment passes alone, unchanged"
        );
        assert_eq!(&out[2..], &frames[3..]);
    }
}
