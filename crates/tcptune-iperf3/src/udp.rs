//! iperf3's UDP data streams without I/O: the "connect" datagram exchange, the header of every
//! datagram (seconds and microseconds of sending, then the packet count: 32 bits, or 64 with
//! `--udp-counters-64bit`, all big-endian), and the receiver's accounting as iperf3's
//! `iperf_udp_recv` does it: loss from gaps in the count (a late packet takes one back and
//! counts as out of order) and the interarrival jitter of RFC 1889 (sections 6.3.1 and A.8).

/// What a client sends on a new UDP stream, as iperf3 writes it: a native-endian `int`
/// (little-endian hosts: the text "6789"; iperf3 before 3.13 sent 123456789). Any 4 bytes are
/// accepted from a client.
pub const CONNECT_MSG: u32 = 0x3637_3839;

/// What the server answers: iperf3's legacy value, which every iperf3 client accepts (3.13
/// and later also accept 0x39383736).
pub const CONNECT_REPLY: u32 = 987_654_321;

/// Bytes a datagram must have to carry the header.
pub fn header_len(wide: bool) -> usize {
    if wide {
        16
    } else {
        12
    }
}

/// Writes the header into the start of `buf` (at least [`header_len`] bytes).
pub fn encode_header(buf: &mut [u8], sec: u32, usec: u32, pcount: u64, wide: bool) {
    buf[..4].copy_from_slice(&sec.to_be_bytes());
    buf[4..8].copy_from_slice(&usec.to_be_bytes());
    if wide {
        buf[8..16].copy_from_slice(&pcount.to_be_bytes());
    } else {
        // 32-bit counters wrap as iperf3's do.
        buf[8..12].copy_from_slice(&(pcount as u32).to_be_bytes());
    }
}

/// Reads a header: (sending time in seconds, packet count); `None` if the datagram is short.
pub fn decode_header(buf: &[u8], wide: bool) -> Option<(f64, u64)> {
    if buf.len() < header_len(wide) {
        return None;
    }
    let word = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
    let sent = word(0) as f64 + word(4) as f64 / 1e6;
    let pcount = if wide {
        u64::from_be_bytes(buf[8..16].try_into().ok()?)
    } else {
        word(8) as u64
    };
    Some((sent, pcount))
}

/// A receiving stream's accounting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UdpReceiver {
    /// Bytes of every datagram received.
    pub bytes: u64,
    /// The highest packet count seen (iperf3's `packet_count`, reported as `packets`).
    pub packet_count: u64,
    /// Lost datagrams (iperf3's `cnt_error`, reported as `errors`).
    pub cnt_error: u64,
    /// Datagrams that arrived with a lower sequence number than one already seen.
    pub outoforder: u64,
    /// Smoothed interarrival jitter, seconds.
    pub jitter: f64,
    prev_transit: Option<f64>,
}

impl UdpReceiver {
    /// Totals from elsewhere (a peer's results, an interval's differences).
    pub fn totals(bytes: u64, packet_count: u64, cnt_error: u64, jitter: f64) -> UdpReceiver {
        UdpReceiver {
            bytes,
            packet_count,
            cnt_error,
            jitter,
            ..UdpReceiver::default()
        }
    }

    /// Accounts one datagram of `len` bytes that arrived at `arrival` (seconds, the same clock
    /// as the sender's header up to a constant offset).
    pub fn on_datagram(&mut self, dgram: &[u8], arrival: f64, wide: bool) {
        self.bytes += dgram.len() as u64;
        let Some((sent, pcount)) = decode_header(dgram, wide) else {
            return;
        };
        if pcount > self.packet_count {
            // A gap: the datagrams in it are lost until they turn up.
            self.cnt_error += pcount - 1 - self.packet_count;
            self.packet_count = pcount;
        } else {
            // A late (or repeated) datagram: counted out of order, and no longer lost.
            self.outoforder += 1;
            self.cnt_error = self.cnt_error.saturating_sub(1);
        }
        let transit = arrival - sent;
        let prev = self.prev_transit.replace(transit).unwrap_or(transit);
        let d = (transit - prev).abs();
        self.jitter += (d - self.jitter) / 16.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_in_both_widths() {
        let mut b = [0u8; 32];
        encode_header(&mut b, 1_700_000_000, 250_000, 7, false);
        assert_eq!(&b[8..12], &[0, 0, 0, 7]);
        assert_eq!(decode_header(&b, false), Some((1_700_000_000.25, 7)));
        encode_header(&mut b, 1, 0, (1 << 40) + 3, true);
        assert_eq!(decode_header(&b, true), Some((1.0, (1 << 40) + 3)));
        assert_eq!(decode_header(&b[..11], false), None);
        assert_eq!(decode_header(&b[..15], true), None);
        // iperf3's bytes for "6789" on a little-endian host.
        assert_eq!(CONNECT_MSG.to_le_bytes(), *b"9876");
    }

    fn dgram(sent: f64, pcount: u64) -> Vec<u8> {
        let mut b = vec![0u8; 100];
        encode_header(
            &mut b,
            sent.trunc() as u32,
            (sent.fract() * 1e6).round() as u32,
            pcount,
            false,
        );
        b
    }

    #[test]
    fn loss_and_reordering_as_iperf3_counts_them() {
        let mut r = UdpReceiver::default();
        for (k, p) in [1u64, 2, 5, 3, 6].into_iter().enumerate() {
            r.on_datagram(&dgram(k as f64 * 0.01, p), k as f64 * 0.01 + 0.005, false);
        }
        // 3 and 4 went missing at 5; 3 turned up late.
        assert_eq!(
            (r.packet_count, r.cnt_error, r.outoforder, r.bytes),
            (6, 1, 1, 500)
        );
        // A constant transit time: no jitter.
        assert!(r.jitter.abs() < 1e-9, "{}", r.jitter);
    }

    #[test]
    fn jitter_follows_rfc_1889() {
        // Transit alternates between 10 and 12 ms: each difference is 2 ms, and J moves 1/16
        // of the way from its value to it each time: J_n = 2 ms × (1 − (15/16)^(n−1)).
        let mut r = UdpReceiver::default();
        let n = 50;
        for k in 0..n {
            let sent = k as f64 * 0.1;
            let transit = if k % 2 == 0 { 0.010 } else { 0.012 };
            r.on_datagram(&dgram(sent, k + 1), sent + transit, false);
        }
        let want = 0.002 * (1.0 - (15.0f64 / 16.0).powi(n as i32 - 1));
        assert!((r.jitter - want).abs() < 1e-6, "{} vs {want}", r.jitter);
    }
}
