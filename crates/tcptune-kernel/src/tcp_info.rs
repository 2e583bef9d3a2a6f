//! Our own decoder of the kernel's `struct tcp_info` (include/uapi/linux/tcp.h), as delivered by
//! `INET_DIAG_INFO` and by `getsockopt(TCP_INFO)`.
//!
//! The struct has grown with kernel releases (104 bytes in 2.6, 232 in 5.4, 240 in 6.2, 248 in
//! 6.7, 280 in 6.18), and the kernel copies only as many bytes as it has. So the decoder is
//! length-aware: a field the running kernel did not send is `None`, never a misleading zero
//! (the classic failure of decoders with a fixed size). Every field up to 6.18 is decoded, with
//! the two bitfield bytes split correctly (byte 6: `snd_wscale` in the low nibble, `rcv_wscale`
//! in the high nibble on little-endian hosts; byte 7: bit 0 `delivery_rate_app_limited`, bits 1–2
//! `fastopen_client_fail`), and the last four bytes read as either the 6.18 layout (two u16) or
//! the 7.0 layout (one u32 of bitfields), chosen by the kernel version.
//!
//! JSON field names are the kernel's (without `tcpi_`) plus a unit suffix where the kernel's unit
//! is a time or a rate (`rtt_us`, `last_data_recv_ms`, `pacing_rate_bytes_per_s`); windows and
//! counters of bytes end in `bytes` or say so in the kernel's name, and `snd_cwnd`,
//! `snd_ssthresh`, `unacked` … are segments, as in the kernel.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The largest `struct tcp_info` this decoder knows (kernel 6.18 and 7.0).
pub const TCP_INFO_MAX_LEN: usize = 280;

/// How the last four bytes (276..280) of a 280-byte `tcp_info` are laid out. The kernel changed
/// them between 6.18 (`u16 accecn_fail_mode; u16 accecn_opt_seen`) and 7.0 (`u32 ecn_mode:2,
/// accecn_opt_seen:2, accecn_fail_mode:4, options2:24`) without changing the length, so only
/// the kernel version can tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TailLayout {
    /// Kernels 6.18 and 6.19: two u16.
    Linux6_18,
    /// Kernel 7.0 and later: one u32 of bitfields.
    Linux7_0,
}

impl TailLayout {
    /// The layout used by a kernel `major.minor`.
    pub fn for_kernel(version: KernelVersion) -> TailLayout {
        if (version.major, version.minor) >= (7, 0) {
            TailLayout::Linux7_0
        } else {
            TailLayout::Linux6_18
        }
    }
}

/// The kernel version type shared by every crate (parses `uname -r` forms).
pub use tcptune_model::kernel::KernelVersion;

/// Reads a native-endian integer of type `$t` at `$off` if the payload reaches that far.
macro_rules! field {
    ($p:expr, $off:expr, u8) => {
        $p.get($off).copied()
    };
    ($p:expr, $off:expr, $t:ty) => {
        match $p.get($off..$off + std::mem::size_of::<$t>()) {
            // The slice has exactly size_of::<$t>() bytes, so the conversion cannot fail.
            Some(b) => Some(<$t>::from_ne_bytes(b.try_into().unwrap_or_default())),
            None => None,
        }
    };
}

/// Writes a rate of `u64::MAX` (the kernel's "unlimited") as JSON null: a script would read the
/// number as 18 exabytes a second. Read back, null is `None`, which the accessors (and
/// [`TcpInfo::pacing_rate`]) treat as unlimited too.
fn unlimited_as_null<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(r) if *r != u64::MAX => s.serialize_some(r),
        _ => s.serialize_none(),
    }
}

/// Declares the plain fields once: the struct, and the decoder that fills it from offsets.
macro_rules! tcp_info_struct {
    ($( $(#[doc = $doc:literal])* $name:ident : $t:tt @ $off:literal $(=> $ser:literal)? ,)*) => {
        /// One decoded `struct tcp_info`. `None` means the kernel did not send the field (its
        /// struct is shorter); see the module documentation for units.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
        pub struct TcpInfo {
            /// How many bytes the kernel sent (104 … 280); tells which kernel fields exist.
            pub len: u16,
            $( $(#[doc = $doc])* #[serde(default, skip_serializing_if = "Option::is_none")]
               $( #[serde(serialize_with = $ser)] )?
               pub $name: Option<$t>, )*
            /// Peer's window scale (byte 6, low nibble on little-endian hosts).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub snd_wscale: Option<u8>,
            /// Our window scale (byte 6, high nibble on little-endian hosts).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub rcv_wscale: Option<u8>,
            /// The last delivery-rate sample was taken while the application sent too little
            /// to fill the network (4.9; byte 7 bit 0).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub delivery_rate_app_limited: Option<bool>,
            /// Why TCP Fast Open failed on the client: 0 unspecified, 1 cookie unavailable,
            /// 2 data not acked, 3 SYN retransmitted (5.5; byte 7 bits 1–2).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub fastopen_client_fail: Option<u8>,
            /// Accurate ECN failure bits (6.18).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub accecn_fail_mode: Option<u16>,
            /// Accurate ECN option seen: 0 not seen, 1 empty, 2 counter, 3 fail (6.18).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub accecn_opt_seen: Option<u16>,
            /// ECN mode: 0 disabled, 1 RFC 3168, 2 AccECN, 3 pending (7.0 only).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub ecn_mode: Option<u8>,
            /// More option bits (7.0 only, 24 bits).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub options2: Option<u32>,
        }

        impl TcpInfo {
            fn decode_plain(p: &[u8]) -> TcpInfo {
                TcpInfo {
                    len: p.len().min(u16::MAX as usize) as u16,
                    $( $name: field!(p, $off, $t), )*
                    ..TcpInfo::default()
                }
            }
        }
    };
}

tcp_info_struct! {
    /// TCP state: 1 ESTABLISHED, 2 SYN_SENT, … 10 LISTEN, 12 NEW_SYN_RECV.
    state: u8 @ 0,
    /// Congestion-avoidance state: 0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss.
    ca_state: u8 @ 1,
    /// Consecutive RTO timeouts of the current head segment.
    retransmits: u8 @ 2,
    /// Zero-window or keepalive probes outstanding.
    probes: u8 @ 3,
    /// RTO exponential backoff count.
    backoff: u8 @ 4,
    /// Negotiated options bitmask: 1 timestamps, 2 SACK, 4 window scaling, 8 ECN, 16 ECN seen,
    /// 32 SYN data, 64 µs timestamps, 128 TFO child.
    options: u8 @ 5,
    /// Retransmission timeout, µs.
    rto_us: u32 @ 8,
    /// Delayed-ACK timeout, µs.
    ato_us: u32 @ 12,
    /// Sender MSS, bytes.
    snd_mss: u32 @ 16,
    /// Estimated receiver MSS, bytes.
    rcv_mss: u32 @ 20,
    /// Segments in flight (packets_out); on a listener, the accept backlog.
    unacked: u32 @ 24,
    /// SACKed segments; on a listener, the maximum backlog.
    sacked: u32 @ 28,
    /// Segments marked lost.
    lost: u32 @ 32,
    /// Retransmitted segments in flight.
    retrans: u32 @ 36,
    /// Always 0 since FACK was removed.
    fackets: u32 @ 40,
    /// Time since data was last sent, ms.
    last_data_sent_ms: u32 @ 44,
    /// Not remembered by the kernel (always 0).
    last_ack_sent_ms: u32 @ 48,
    /// Time since data was last received, ms.
    last_data_recv_ms: u32 @ 52,
    /// Time since an ACK was last received, ms.
    last_ack_recv_ms: u32 @ 56,
    /// Path MTU, bytes.
    pmtu: u32 @ 60,
    /// Receive-side slow-start threshold (window clamp while growing), bytes.
    rcv_ssthresh: u32 @ 64,
    /// Smoothed RTT, µs (0: no sample yet).
    rtt_us: u32 @ 68,
    /// RTT variation, µs.
    rttvar_us: u32 @ 72,
    /// Slow-start threshold, segments (0x7fffffff: not yet set).
    snd_ssthresh: u32 @ 76,
    /// Congestion window, segments.
    snd_cwnd: u32 @ 80,
    /// Advertised MSS, bytes.
    advmss: u32 @ 84,
    /// Reordering degree, segments.
    reordering: u32 @ 88,
    /// Receiver-side RTT estimate, µs.
    rcv_rtt_us: u32 @ 92,
    /// Receive-buffer autotuning estimate, bytes.
    rcv_space: u32 @ 96,
    /// Retransmitted segments over the connection's life (including loss probes).
    total_retrans: u32 @ 100,
    /// Pacing rate, bytes/s (null: unlimited, the kernel's ~0) (3.15).
    pacing_rate_bytes_per_s: u64 @ 104 => "unlimited_as_null",
    /// Maximum pacing rate (SO_MAX_PACING_RATE), bytes/s (null: unlimited, the kernel's ~0)
    /// (3.15).
    max_pacing_rate_bytes_per_s: u64 @ 112 => "unlimited_as_null",
    /// Bytes acknowledged by the peer (RFC 4898 HCThruOctetsAcked) (4.2).
    bytes_acked: u64 @ 120,
    /// Bytes received in order (RFC 4898 HCThruOctetsReceived) (4.2).
    bytes_received: u64 @ 128,
    /// Segments sent, including pure ACKs (4.2).
    segs_out: u32 @ 136,
    /// Segments received, including pure ACKs (4.2).
    segs_in: u32 @ 140,
    /// Bytes written by the application but not yet sent (4.6).
    notsent_bytes: u32 @ 144,
    /// Windowed minimum RTT, µs (u32::MAX: none) (4.6).
    min_rtt_us: u32 @ 148,
    /// Data segments received (4.6).
    data_segs_in: u32 @ 152,
    /// Data segments sent, including retransmissions (4.6).
    data_segs_out: u32 @ 156,
    /// Most recent delivery-rate sample, bytes/s (4.9).
    delivery_rate_bytes_per_s: u64 @ 160,
    /// Time with unsent or unacknowledged data, µs at jiffy resolution (4.10).
    busy_time_us: u64 @ 168,
    /// Part of the busy time limited by the receiver's window, µs (4.10).
    rwnd_limited_us: u64 @ 176,
    /// Part of the busy time limited by the send buffer, µs (4.10).
    sndbuf_limited_us: u64 @ 184,
    /// Segments delivered, including out of order (4.18).
    delivered: u32 @ 192,
    /// Delivered segments that were CE-marked (4.18).
    delivered_ce: u32 @ 196,
    /// Bytes sent, including retransmissions (4.19).
    bytes_sent: u64 @ 200,
    /// Bytes retransmitted (4.19).
    bytes_retrans: u64 @ 208,
    /// DSACK blocks received (4.19).
    dsack_dups: u32 @ 216,
    /// Reordering events seen (4.19).
    reord_seen: u32 @ 220,
    /// Out-of-order packets received (5.4).
    rcv_ooopack: u32 @ 224,
    /// The peer's advertised receive window after scaling, bytes (5.4).
    snd_wnd: u32 @ 228,
    /// Our advertised receive window, bytes (6.2).
    rcv_wnd: u32 @ 232,
    /// Path rehashes (PLB, timeouts) (6.2).
    rehash: u32 @ 236,
    /// RTO timeouts, including SYN (6.7).
    total_rto: u16 @ 240,
    /// RTO recoveries (6.7).
    total_rto_recoveries: u16 @ 242,
    /// Time spent in RTO recovery, ms (6.7).
    total_rto_time_ms: u32 @ 244,
    /// CE-marked segments received (6.18).
    received_ce: u32 @ 248,
    /// Accurate ECN: bytes delivered with ECT(1) (6.18).
    delivered_e1_bytes: u32 @ 252,
    /// Accurate ECN: bytes delivered with ECT(0) (6.18).
    delivered_e0_bytes: u32 @ 256,
    /// Accurate ECN: bytes delivered with CE (6.18).
    delivered_ce_bytes: u32 @ 260,
    /// Accurate ECN: bytes received with ECT(1) (6.18).
    received_e1_bytes: u32 @ 264,
    /// Accurate ECN: bytes received with ECT(0) (6.18).
    received_e0_bytes: u32 @ 268,
    /// Accurate ECN: bytes received with CE (6.18).
    received_ce_bytes: u32 @ 272,
}

/// `tcpi_options` bits (include/uapi/linux/tcp.h `TCPI_OPT_*`).
pub mod opt {
    /// Timestamps (RFC 7323) were negotiated.
    pub const TIMESTAMPS: u8 = 1;
    /// SACK was negotiated.
    pub const SACK: u8 = 2;
    /// Window scaling was negotiated (`snd_wscale`/`rcv_wscale` are meaningful).
    pub const WSCALE: u8 = 4;
    /// ECN was negotiated.
    pub const ECN: u8 = 8;
    /// An ECN CE mark was received.
    pub const ECN_SEEN: u8 = 16;
    /// The SYN carried data (TCP Fast Open) that was acknowledged.
    pub const SYN_DATA: u8 = 32;
    /// Timestamps are in microseconds, not milliseconds (6.7).
    pub const USEC_TS: u8 = 64;
    /// A passive Fast Open socket (the server side).
    pub const TFO_CHILD: u8 = 128;
}

impl TcpInfo {
    /// Decodes a `tcp_info` payload of any length (shorter ones from older kernels leave the
    /// newer fields `None`; bytes beyond 280 from future kernels are ignored).
    pub fn decode(payload: &[u8], tail: TailLayout) -> TcpInfo {
        let p = &payload[..payload.len().min(TCP_INFO_MAX_LEN)];
        let mut info = TcpInfo::decode_plain(p);
        info.len = payload.len().min(u16::MAX as usize) as u16;
        if let Some(&b) = p.get(6) {
            // GCC allocates bitfields from the least significant bit on little-endian targets
            // and from the most significant on big-endian ones.
            let (snd, rcv) = if cfg!(target_endian = "little") {
                (b & 0x0f, b >> 4)
            } else {
                (b >> 4, b & 0x0f)
            };
            info.snd_wscale = Some(snd);
            info.rcv_wscale = Some(rcv);
        }
        if let Some(&b) = p.get(7) {
            let (app, tfo) = if cfg!(target_endian = "little") {
                (b & 1 != 0, (b >> 1) & 3)
            } else {
                (b & 0x80 != 0, (b >> 5) & 3)
            };
            info.delivery_rate_app_limited = Some(app);
            info.fastopen_client_fail = Some(tfo);
        }
        match tail {
            TailLayout::Linux6_18 => {
                info.accecn_fail_mode = field!(p, 276, u16);
                info.accecn_opt_seen = field!(p, 278, u16);
            }
            TailLayout::Linux7_0 => {
                if let Some(w) = field!(p, 276, u32) {
                    // ecn_mode:2, accecn_opt_seen:2, accecn_fail_mode:4, options2:24, allocated
                    // from the low bits on little-endian targets, from the high bits otherwise.
                    let (mode, seen, fail, rest) = if cfg!(target_endian = "little") {
                        (w & 3, (w >> 2) & 3, (w >> 4) & 0xf, w >> 8)
                    } else {
                        (w >> 30, (w >> 28) & 3, (w >> 24) & 0xf, w & 0x00ff_ffff)
                    };
                    info.ecn_mode = Some(mode as u8);
                    info.accecn_opt_seen = Some(seen as u16);
                    info.accecn_fail_mode = Some(fail as u16);
                    info.options2 = Some(rest);
                }
            }
        }
        info
    }

    fn has_opt(&self, bit: u8) -> Option<bool> {
        self.options.map(|o| o & bit != 0)
    }
    /// Timestamps (RFC 7323) negotiated.
    pub fn timestamps(&self) -> Option<bool> {
        self.has_opt(opt::TIMESTAMPS)
    }
    /// SACK (RFC 2018) negotiated.
    pub fn sack(&self) -> Option<bool> {
        self.has_opt(opt::SACK)
    }
    /// Window scaling (RFC 7323) negotiated.
    pub fn wscale(&self) -> Option<bool> {
        self.has_opt(opt::WSCALE)
    }
    /// ECN (RFC 3168) negotiated.
    pub fn ecn(&self) -> Option<bool> {
        self.has_opt(opt::ECN)
    }

    /// Smoothed RTT in µs, `None` also when the kernel has no sample yet (0).
    pub fn srtt_us(&self) -> Option<u32> {
        self.rtt_us.filter(|&r| r > 0)
    }
    /// Minimum RTT in µs, `None` when the kernel has none (`~0`).
    pub fn min_rtt(&self) -> Option<u32> {
        self.min_rtt_us.filter(|&r| r != u32::MAX && r > 0)
    }
    /// Congestion window in bytes (`snd_cwnd × snd_mss`).
    pub fn cwnd_bytes(&self) -> Option<u64> {
        Some(self.snd_cwnd? as u64 * self.snd_mss? as u64)
    }
    /// Slow-start threshold in segments, `None` while it is "infinite" (not yet set).
    pub fn ssthresh(&self) -> Option<u32> {
        self.snd_ssthresh.filter(|&s| s < 0x7fff_ffff)
    }
    /// Pacing rate in bytes/s, `None` when unlimited.
    pub fn pacing_rate(&self) -> Option<u64> {
        self.pacing_rate_bytes_per_s.filter(|&r| r != u64::MAX)
    }
}

/// The name of a TCP state (`tcp_states.h`), as `ss` prints it.
pub fn state_name(state: u8) -> &'static str {
    match state {
        1 => "ESTAB",
        2 => "SYN-SENT",
        3 => "SYN-RECV",
        4 => "FIN-WAIT-1",
        5 => "FIN-WAIT-2",
        6 => "TIME-WAIT",
        7 => "CLOSE",
        8 => "CLOSE-WAIT",
        9 => "LAST-ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW-SYN-RECV",
        _ => "UNKNOWN",
    }
}

/// The name of a congestion-avoidance state (`tcpi_ca_state`).
pub fn ca_state_name(state: u8) -> &'static str {
    match state {
        0 => "open",
        1 => "disorder",
        2 => "cwr",
        3 => "recovery",
        4 => "loss",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_u32(b: &mut [u8], off: usize, v: u32) {
        b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }

    #[test]
    fn kernel_version_parses_release_strings() {
        let v = "6.18.44-fc-v769".parse::<KernelVersion>().unwrap();
        assert_eq!((v.major, v.minor), (6, 18));
        assert_eq!(
            TailLayout::for_kernel("7.0.0-rc1".parse::<KernelVersion>().unwrap()),
            TailLayout::Linux7_0
        );
        assert_eq!(TailLayout::for_kernel(v), TailLayout::Linux6_18);
        assert!("garbage".parse::<KernelVersion>().is_err());
    }

    #[test]
    fn wscale_nibbles_and_bitfield_byte() {
        let mut b = [0u8; 104];
        b[6] = 0x7a; // snd (peer's) 10, rcv (ours) 7
        b[7] = 0b101; // app-limited, TFO failure 2
        let i = TcpInfo::decode(&b, TailLayout::Linux6_18);
        assert_eq!(i.snd_wscale, Some(10));
        assert_eq!(i.rcv_wscale, Some(7));
        assert_eq!(i.delivery_rate_app_limited, Some(true));
        assert_eq!(i.fastopen_client_fail, Some(2));
    }

    #[test]
    fn tail_layout_6_18_vs_7_0() {
        let mut b = [0u8; 280];
        // 7.0: ecn_mode 2 (AccECN), opt_seen 3, fail_mode 0b1010, options2 0x1234.
        let w: u32 = 2 | (3 << 2) | (0b1010 << 4) | (0x1234 << 8);
        put_u32(&mut b, 276, w);
        let new = TcpInfo::decode(&b, TailLayout::Linux7_0);
        assert_eq!(new.ecn_mode, Some(2));
        assert_eq!(new.accecn_opt_seen, Some(3));
        assert_eq!(new.accecn_fail_mode, Some(0b1010));
        assert_eq!(new.options2, Some(0x1234));
        // The same bytes read as 6.18: two native-endian u16.
        let old = TcpInfo::decode(&b, TailLayout::Linux6_18);
        assert_eq!(old.accecn_fail_mode, Some((w & 0xffff) as u16));
        assert_eq!(old.accecn_opt_seen, Some((w >> 16) as u16));
        assert_eq!(old.ecn_mode, None);
    }

    #[test]
    fn absent_fields_are_none_not_zero() {
        let mut b = [0u8; 232];
        put_u32(&mut b, 228, 65535); // snd_wnd, the last 5.4 field
        let i = TcpInfo::decode(&b, TailLayout::Linux6_18);
        assert_eq!(i.len, 232);
        assert_eq!(i.snd_wnd, Some(65535));
        assert_eq!(i.rcv_wnd, None);
        assert_eq!(i.total_rto, None);
        assert_eq!(i.received_ce_bytes, None);
        assert_eq!(i.accecn_fail_mode, None);
        // A field cut in half is absent too.
        let i = TcpInfo::decode(&b[..230], TailLayout::Linux6_18);
        assert_eq!(i.snd_wnd, None);
        assert_eq!(i.rcv_ooopack, Some(0));
        // Nothing at all: every field absent, no panic.
        let i = TcpInfo::decode(&[], TailLayout::Linux7_0);
        assert_eq!(i, TcpInfo::default());
    }

    #[test]
    fn sentinels() {
        let mut b = [0u8; 160];
        put_u32(&mut b, 148, u32::MAX);
        put_u32(&mut b, 76, 0x7fff_ffff);
        b[104..112].copy_from_slice(&u64::MAX.to_ne_bytes());
        let i = TcpInfo::decode(&b, TailLayout::Linux6_18);
        assert_eq!(i.min_rtt(), None);
        assert_eq!(i.ssthresh(), None);
        assert_eq!(i.pacing_rate(), None);
        assert_eq!(i.srtt_us(), None);
        // Unlimited is null in JSON, not 18446744073709551615; a real rate stays a number.
        let j = serde_json::to_value(&i).unwrap();
        assert!(j["pacing_rate_bytes_per_s"].is_null(), "{j}");
        assert_eq!(j["max_pacing_rate_bytes_per_s"], 0);
        b[104..112].copy_from_slice(&1_250_000u64.to_ne_bytes());
        b[112..120].copy_from_slice(&u64::MAX.to_ne_bytes());
        let j = serde_json::to_value(TcpInfo::decode(&b, TailLayout::Linux6_18)).unwrap();
        assert_eq!(j["pacing_rate_bytes_per_s"], 1_250_000);
        assert!(j["max_pacing_rate_bytes_per_s"].is_null(), "{j}");
        assert!(!j.to_string().contains(&u64::MAX.to_string()), "{j}");
    }

    proptest::proptest! {
        #[test]
        fn any_payload_decodes_and_round_trips_through_json(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..320)
        ) {
            let i = TcpInfo::decode(&bytes, TailLayout::Linux7_0);
            let json = serde_json::to_string(&i).unwrap();
            let back: TcpInfo = serde_json::from_str(&json).unwrap();
            proptest::prop_assert_eq!(back, i);
        }
    }
}
