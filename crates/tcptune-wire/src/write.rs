//! Writing classic pcap files of synthetic Ethernet/IPv4/TCP frames: for tests that need
//! captures with exact properties and for the benchmark's multi-million-packet capture.
//! Payload bytes are not stored beyond the snap length (they are zeros anyway); the record's
//! original length and the IP total length carry the true size, as in a snaplen-cut capture.

use std::io::{self, Write};

use crate::capture::LinkType;

/// One synthetic TCP segment to write.
#[derive(Debug, Clone, Copy, Default)]
pub struct SegSpec<'a> {
    /// Capture time in nanoseconds since the Unix epoch (negative is written as 0).
    pub ts_ns: i64,
    /// IPv4 source address.
    pub src: [u8; 4],
    /// IPv4 destination address.
    pub dst: [u8; 4],
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// TCP flag bits (see `packet::flags`).
    pub flags: u16,
    /// The raw (unscaled) window field.
    pub window: u16,
    /// Raw option bytes (padded to 4 here).
    pub options: &'a [u8],
    /// Payload bytes, counted in the lengths but not stored past the snap length (zeros).
    pub payload_len: u32,
    /// IPv4 identification (as a sender's per-packet counter would set it).
    pub ip_id: u16,
}

/// A pcap writer (little-endian, nanosecond timestamps, Ethernet).
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
    buf: Vec<u8>,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header; frames are cut at `snaplen` bytes.
    pub fn new(mut out: W, snaplen: u32) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend(0xa1b2_3c4du32.to_le_bytes());
        h.extend(2u16.to_le_bytes());
        h.extend(4u16.to_le_bytes());
        h.extend(0u32.to_le_bytes());
        h.extend(0u32.to_le_bytes());
        h.extend(snaplen.to_le_bytes());
        h.extend(LinkType::ETHERNET.0.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            snaplen,
            buf: Vec::with_capacity(256),
        })
    }

    /// Appends one Ethernet/IPv4/TCP frame.
    pub fn segment(&mut self, s: &SegSpec<'_>) -> io::Result<()> {
        let b = &mut self.buf;
        b.clear();
        b.extend([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00]);
        let opt_len = s.options.len().div_ceil(4) * 4;
        let tcp_hlen = 20 + opt_len;
        let total = 20 + tcp_hlen + s.payload_len as usize;
        let ip_total = u16::try_from(total).unwrap_or(0); // 0 = "TSO", as real captures show
        b.extend([0x45, 0]);
        b.extend(ip_total.to_be_bytes());
        b.extend(s.ip_id.to_be_bytes());
        b.extend([0x40, 0, 64, 6, 0, 0]);
        b.extend(s.src);
        b.extend(s.dst);
        b.extend(s.sport.to_be_bytes());
        b.extend(s.dport.to_be_bytes());
        b.extend(s.seq.to_be_bytes());
        b.extend(s.ack.to_be_bytes());
        b.extend(((((tcp_hlen / 4) as u16) << 12) | (s.flags & 0x0fff)).to_be_bytes());
        b.extend(s.window.to_be_bytes());
        b.extend([0, 0, 0, 0]);
        b.extend_from_slice(s.options);
        b.resize(14 + 20 + tcp_hlen, 0);
        let orig = 14 + total;
        let cap = orig.min(self.snaplen as usize);
        b.resize(cap, 0);
        let ts = s.ts_ns.max(0) as u64;
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&(cap as u32).to_le_bytes());
        rec[12..16].copy_from_slice(&(orig as u32).to_le_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(b)
    }

    /// The underlying writer, once the last segment is written (flush it to finish the file).
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_frame, CaptureReader};

    #[test]
    fn written_segments_read_back_with_their_true_lengths() {
        let mut w = PcapWriter::new(Vec::new(), 80).unwrap();
        let opts = [2, 4, 5, 0xb4, 1, 3, 3, 7];
        w.segment(&SegSpec {
            ts_ns: 1_500_000_001,
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            sport: 1,
            dport: 2,
            seq: 100,
            ack: 200,
            flags: 0x10,
            window: 300,
            options: &opts,
            payload_len: 1448,
            ip_id: 77,
        })
        .unwrap();
        let bytes = w.into_inner();
        let mut r = CaptureReader::new(&bytes[..]).unwrap();
        let f = r.next().unwrap().unwrap();
        assert_eq!(f.ts_ns, 1_500_000_001);
        assert_eq!(f.data.len(), 80);
        let s = parse_frame(&f).unwrap();
        assert_eq!(
            (s.seq, s.ack, s.window, s.seglen),
            (100, 200, 300, Some(1448))
        );
        assert_eq!(s.options.mss, Some(1460));
        assert_eq!(s.options.wscale, Some(7));
        assert_eq!(s.ip_id, 77);
    }
}
