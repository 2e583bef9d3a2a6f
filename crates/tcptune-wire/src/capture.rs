//! A streaming reader for pcap and pcapng files from any `Read` (a file, standard input).
//!
//! Formats: classic pcap in both byte orders with microsecond or nanosecond timestamps (files
//! before version 2.3 store captured and original length the other way round; they are swapped
//! back as libpcap and Wireshark do), and pcapng with any number of sections (each with its own
//! byte order) and interfaces (each with its own link type, timestamp resolution and offset).
//! Enhanced, simple and obsolete packet blocks are read; other blocks are skipped, but the ones
//! Wireshark shows as records (custom, systemd journal and sysdig event blocks) take a frame
//! number as they do there. Either format may be gzip-compressed (as Wireshark reads it).
//!
//! The reader keeps one growable buffer and hands out frames that borrow it, so reading costs
//! no allocation per packet. Damage is reported, never panicked on: a file that ends in the
//! middle of a record yields [`CaptureError::Truncated`] after every complete frame before it,
//! and a record that claims an impossible length yields [`CaptureError::Corrupt`], so a caller
//! can keep what it analysed and say what was skipped.

use std::io::{self, Read};

use flate2::read::MultiGzDecoder;

/// The largest packet we accept, as Wireshark does (`WTAP_MAX_PACKET_SIZE_STANDARD`). A record
/// claiming more means the file is corrupt (or we lost sync), not that the packet is large.
pub const MAX_PACKET: u32 = 262_144;
/// The largest pcapng block we accept: a packet plus generous room for options and comments.
const MAX_BLOCK: u32 = 16 * 1024 * 1024;
const INITIAL_BUF: usize = 1 << 20;

/// A link-layer header type (LINKTYPE_* numbers from the pcap registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkType(pub u32);

impl LinkType {
    pub const NULL: LinkType = LinkType(0);
    pub const ETHERNET: LinkType = LinkType(1);
    /// DLT_RAW as numbered on most systems.
    pub const RAW_12: LinkType = LinkType(12);
    /// DLT_RAW as numbered on OpenBSD.
    pub const RAW_14: LinkType = LinkType(14);
    pub const RAW: LinkType = LinkType(101);
    pub const LOOP: LinkType = LinkType(108);
    pub const LINUX_SLL: LinkType = LinkType(113);
    pub const IPV4: LinkType = LinkType(228);
    pub const IPV6: LinkType = LinkType(229);
    pub const LINUX_SLL2: LinkType = LinkType(276);
    pub const PPP: LinkType = LinkType(9);
    pub const FDDI: LinkType = LinkType(10);
    /// PPP in HDLC-like framing (also Cisco HDLC's number on some systems: 50).
    pub const PPP_HDLC: LinkType = LinkType(50);
    /// PPPoE session payload (PPP) without its Ethernet header.
    pub const PPP_ETHER: LinkType = LinkType(51);
    pub const C_HDLC: LinkType = LinkType(104);
    pub const JUNIPER_ETHER: LinkType = LinkType(178);
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

/// One captured frame, borrowed from the reader until its next call.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// 1-based position in the file as Wireshark numbers frames: packet records and, in pcapng,
    /// the other blocks it shows as records (custom, systemd journal, sysdig events).
    pub number: u64,
    /// Capture time in nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    pub link: LinkType,
    /// Length of the packet on the wire; `data` may be shorter (snaplen).
    pub orig_len: u32,
    pub data: &'a [u8],
}

/// Why reading stopped before the end of the data (or could not start).
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    // The cause is in the message, so it is not chained as a source too (`{:#}` would print
    // it twice); analyses print this error with `{}`.
    #[error("cannot read: {0}")]
    Io(io::Error),
    #[error("empty input: no capture file header")]
    Empty,
    #[error("not a pcap or pcapng file (first bytes {0:02x?})")]
    NotACapture([u8; 4]),
    /// Compressed with something other than gzip (which is read directly).
    #[error("the input is {0}-compressed: decompress it first ({1})")]
    Compressed(&'static str, &'static str),
    /// The file header is there but unusable (cut short, an unknown byte-order magic or
    /// version): nothing in the file can be read.
    #[error("unusable capture file header: {0}")]
    BadHeader(String),
    #[error("the capture ends in the middle of {what} at byte {offset}; {frames} complete frames were read before it")]
    Truncated {
        what: &'static str,
        offset: u64,
        frames: u64,
    },
    #[error(
        "corrupt capture at byte {offset}: {why}; {frames} complete frames were read before it"
    )]
    Corrupt {
        offset: u64,
        why: String,
        frames: u64,
    },
}

impl From<io::Error> for CaptureError {
    fn from(e: io::Error) -> CaptureError {
        CaptureError::Io(e)
    }
}

impl CaptureError {
    /// True when frames were (possibly) read before the error, so a partial result is useful.
    pub fn is_partial(&self) -> bool {
        matches!(
            self,
            CaptureError::Truncated { .. } | CaptureError::Corrupt { .. }
        )
    }
}

#[derive(Debug, Clone, Copy)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u16(self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        }
    }
    fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }
    fn u64(self, b: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        match self {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        }
    }
}

/// How raw timestamp units convert to nanoseconds.
#[derive(Debug, Clone, Copy)]
enum TsRes {
    /// 10^-n seconds per unit.
    Decimal(u8),
    /// 2^-n seconds per unit.
    Binary(u8),
}

impl TsRes {
    fn to_ns(self, units: u64) -> i64 {
        let ns: u128 = match self {
            TsRes::Decimal(n) if n <= 9 => u128::from(units) * 10u128.pow(u32::from(9 - n)),
            TsRes::Decimal(n) => u128::from(units) / 10u128.pow(u32::from(n.min(38) - 9)),
            TsRes::Binary(n) => (u128::from(units) * 1_000_000_000) >> n.min(127),
        };
        i64::try_from(ns).unwrap_or(i64::MAX)
    }
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    link: LinkType,
    res: TsRes,
    offset_s: i64,
}

/// Whether a pcap file's records have captured and original length the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Swapped {
    No,
    /// Versions before 2.3 (and DG/UX's 543.0).
    Yes,
    /// Version 2.3: some writers swapped, some did not; a record whose captured length
    /// exceeds its original length was swapped (libpcap's and Wireshark's rule).
    Maybe,
}

#[derive(Debug)]
enum Format {
    Pcap {
        endian: Endian,
        nanos: bool,
        link: LinkType,
        swapped: Swapped,
    },
    PcapNg {
        endian: Endian,
        interfaces: Vec<Interface>,
    },
}

/// Facts about the file the reader learned while reading, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureInfo {
    /// "pcap" or "pcapng".
    pub format: &'static str,
    /// Snap length from the pcap header or the first pcapng interface (0 = not given).
    pub snaplen: u32,
    /// pcapng sections seen.
    pub sections: u32,
    /// pcapng interfaces seen (all sections).
    pub interfaces: u32,
    /// Records that are not packets (statistics, name resolution, custom blocks) skipped.
    pub skipped_blocks: u64,
    /// Packet records whose captured length exceeded their original length (fixed up).
    pub caplen_over_orig: u64,
    /// The file was gzip-compressed (decompressed while reading).
    pub gzip: bool,
    /// pcap file version (major, minor); for pcapng, the first section header's.
    pub version: (u16, u16),
    /// Records read with captured and original length swapped back (pcap before 2.3).
    pub swapped_lengths: u64,
    /// pcapng records that take a frame number but carry no packet (custom, systemd journal,
    /// sysdig event blocks), as Wireshark numbers them.
    pub non_packet_records: u64,
}

/// The byte source: the input as given, or its gzip decompression.
enum Src<R> {
    Plain(R),
    Gzip(Box<MultiGzDecoder<io::Chain<io::Cursor<Vec<u8>>, R>>>),
}

impl<R: Read> Read for Src<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Src::Plain(r) => r.read(buf),
            Src::Gzip(g) => g.read(buf),
        }
    }
}

/// Reads frames one at a time from `R`; see the module documentation.
pub struct CaptureReader<R> {
    src: Src<R>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// File offset of `buf[start]`.
    offset: u64,
    format: Format,
    /// Packets returned.
    frames: u64,
    /// Records numbered (packets and the blocks Wireshark numbers too).
    numbered: u64,
    info: CaptureInfo,
}

/// Reads up to `buf.len()` bytes, fewer only at the end of the input.
fn read_up_to<R: Read>(src: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file header (for pcapng, the first section header) and prepares to read
    /// frames. A gzip-compressed input is decompressed transparently.
    pub fn new(mut src: R) -> Result<Self, CaptureError> {
        let mut head = [0u8; 2];
        let n = read_up_to(&mut src, &mut head)?;
        let gzip = n == 2 && head == [0x1f, 0x8b];
        let mut buf = vec![0; INITIAL_BUF];
        let (src, end) = if gzip {
            let whole = io::Cursor::new(head.to_vec()).chain(src);
            (Src::Gzip(Box::new(MultiGzDecoder::new(whole))), 0)
        } else {
            buf[..n].copy_from_slice(&head[..n]);
            (Src::Plain(src), n)
        };
        let mut r = CaptureReader {
            src,
            buf,
            start: 0,
            end,
            eof: false,
            offset: 0,
            format: Format::Pcap {
                endian: Endian::Little,
                nanos: false,
                link: LinkType::ETHERNET,
                swapped: Swapped::No,
            },
            frames: 0,
            numbered: 0,
            info: CaptureInfo {
                gzip,
                ..CaptureInfo::default()
            },
        };
        if !r.fill(4)? {
            if r.end == r.start {
                return Err(CaptureError::Empty);
            }
            return Err(r.truncated("the file header"));
        }
        let m = [r.buf[0], r.buf[1], r.buf[2], r.buf[3]];
        let pcap = match m {
            [0xd4, 0xc3, 0xb2, 0xa1] => Some((Endian::Little, false)),
            [0xa1, 0xb2, 0xc3, 0xd4] => Some((Endian::Big, false)),
            [0x4d, 0x3c, 0xb2, 0xa1] => Some((Endian::Little, true)),
            [0xa1, 0xb2, 0x3c, 0x4d] => Some((Endian::Big, true)),
            _ => None,
        };
        if let Some((endian, nanos)) = pcap {
            if !r.fill(24)? {
                return Err(CaptureError::BadHeader(format!(
                    "the pcap file header is cut short ({} of its 24 bytes)",
                    r.end - r.start
                )));
            }
            let h = &r.buf[r.start..r.start + 24];
            let version = (endian.u16(&h[4..6]), endian.u16(&h[6..8]));
            let snaplen = endian.u32(&h[16..20]);
            // The upper bits of the link-type field carry FCS information in some writers.
            let link = LinkType(endian.u32(&h[20..24]) & 0x0fff_ffff);
            // libpcap's sf-pcap.c: the lengths were interchanged at version 2.3.
            let swapped = match version {
                (2, minor) if minor < 3 => Swapped::Yes,
                (2, 3) => Swapped::Maybe,
                (543, _) => Swapped::Yes,
                _ => Swapped::No,
            };
            r.format = Format::Pcap {
                endian,
                nanos,
                link,
                swapped,
            };
            r.info.format = "pcap";
            r.info.version = version;
            r.info.snaplen = snaplen;
            r.consume(24);
            return Ok(r);
        }
        if m == [0x0a, 0x0d, 0x0d, 0x0a] {
            r.info.format = "pcapng";
            r.format = Format::PcapNg {
                endian: Endian::Little,
                interfaces: Vec::new(),
            };
            // The first section header is the file header: if it is unusable, nothing is.
            return match r.section_header() {
                Ok(()) => Ok(r),
                Err(CaptureError::Truncated { .. }) => Err(CaptureError::BadHeader(format!(
                    "the pcapng section header is cut short (the file has {} bytes)",
                    r.end - r.start
                ))),
                Err(CaptureError::Corrupt { why, .. }) => Err(CaptureError::BadHeader(why)),
                Err(e) => Err(e),
            };
        }
        Err(match m {
            [0xfd, b'7', b'z', b'X'] => CaptureError::Compressed("xz", "unxz FILE"),
            [0x28, 0xb5, 0x2f, 0xfd] => CaptureError::Compressed("zstd", "unzstd FILE"),
            [b'B', b'Z', b'h', _] => CaptureError::Compressed("bzip2", "bunzip2 FILE"),
            [0x04, 0x22, 0x4d, 0x18] => CaptureError::Compressed("lz4", "unlz4 FILE"),
            _ => CaptureError::NotACapture(m),
        })
    }

    /// What the reader learned about the file so far.
    pub fn info(&self) -> &CaptureInfo {
        &self.info
    }

    /// Frames returned so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The next frame, `Ok(None)` at a clean end of the data.
    #[allow(clippy::should_implement_trait)] // lending: the frame borrows the reader
    pub fn next(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        match self.format {
            Format::Pcap { .. } => self.next_pcap(),
            Format::PcapNg { .. } => self.next_pcapng(),
        }
    }

    fn next_pcap(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        let Format::Pcap {
            endian,
            nanos,
            link,
            swapped,
        } = self.format
        else {
            unreachable!("next_pcap is only called for pcap files")
        };
        if !self.fill(16)? {
            if self.start == self.end {
                return Ok(None);
            }
            return Err(self.truncated("a packet record header"));
        }
        let h = &self.buf[self.start..self.start + 16];
        let secs = endian.u32(&h[0..4]);
        let frac = endian.u32(&h[4..8]);
        let mut caplen = endian.u32(&h[8..12]);
        let mut orig = endian.u32(&h[12..16]);
        if swapped == Swapped::Yes || (swapped == Swapped::Maybe && caplen > orig) {
            std::mem::swap(&mut caplen, &mut orig);
            self.info.swapped_lengths += 1;
        }
        if caplen > MAX_PACKET {
            return Err(self.corrupt(format!(
                "packet record {} claims {caplen} captured bytes, more than the {MAX_PACKET} \
                 a packet can have",
                self.frames + 1
            )));
        }
        if !self.fill(16 + caplen as usize)? {
            return Err(self.truncated("a packet"));
        }
        let frac_ns = if nanos {
            i64::from(frac)
        } else {
            i64::from(frac) * 1000
        };
        let ts_ns = i64::from(secs) * 1_000_000_000 + frac_ns;
        if caplen > orig {
            self.info.caplen_over_orig += 1;
        }
        let data_start = self.start + 16;
        self.consume(16 + caplen as usize);
        self.frames += 1;
        self.numbered += 1;
        Ok(Some(Frame {
            number: self.numbered,
            ts_ns,
            link,
            orig_len: orig.max(caplen),
            data: &self.buf[data_start..data_start + caplen as usize],
        }))
    }

    fn next_pcapng(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        loop {
            if !self.fill(12)? {
                if self.start == self.end {
                    return Ok(None);
                }
                return Err(self.truncated("a pcapng block header"));
            }
            let h = &self.buf[self.start..self.start + 12];
            if [h[0], h[1], h[2], h[3]] == [0x0a, 0x0d, 0x0d, 0x0a] {
                self.section_header()?;
                continue;
            }
            let Format::PcapNg { endian, .. } = self.format else {
                unreachable!("next_pcapng is only called for pcapng files")
            };
            let btype = endian.u32(&h[0..4]);
            let len = endian.u32(&h[4..8]);
            self.check_block_len(len, 12)?;
            if !self.fill(len as usize)? {
                return Err(self.truncated("a pcapng block"));
            }
            self.check_trailing_len(endian, len)?;
            let body_start = self.start + 8;
            let body_end = self.start + len as usize - 4;
            match btype {
                1 => {
                    let iface = parse_idb(endian, &self.buf[body_start..body_end]);
                    match iface {
                        Some((iface, snaplen)) => {
                            if self.info.interfaces == 0 {
                                self.info.snaplen = snaplen;
                            }
                            self.info.interfaces += 1;
                            if let Format::PcapNg { interfaces, .. } = &mut self.format {
                                interfaces.push(iface);
                            }
                        }
                        None => {
                            return Err(self
                                .corrupt("pcapng interface description block is too short".into()))
                        }
                    }
                    self.consume(len as usize);
                }
                2 | 3 | 6 => {
                    let body = &self.buf[body_start..body_end];
                    let (iface_id, ts_units, caplen, orig, data_off) = match btype {
                        6 if body.len() >= 20 => (
                            endian.u32(&body[0..4]),
                            Some(
                                (u64::from(endian.u32(&body[4..8])) << 32)
                                    | u64::from(endian.u32(&body[8..12])),
                            ),
                            endian.u32(&body[12..16]),
                            endian.u32(&body[16..20]),
                            20usize,
                        ),
                        2 if body.len() >= 20 => (
                            u32::from(endian.u16(&body[0..2])),
                            Some(
                                (u64::from(endian.u32(&body[4..8])) << 32)
                                    | u64::from(endian.u32(&body[8..12])),
                            ),
                            endian.u32(&body[12..16]),
                            endian.u32(&body[16..20]),
                            20usize,
                        ),
                        3 if body.len() >= 4 => {
                            // A simple packet block has no captured length: it is the block
                            // body, bounded by the original length.
                            let orig = endian.u32(&body[0..4]);
                            let room = (body.len() - 4) as u32;
                            (0, None, orig.min(room), orig, 4usize)
                        }
                        _ => {
                            return Err(self.corrupt(format!(
                                "pcapng packet block of type {btype} is too short ({len} bytes)"
                            )))
                        }
                    };
                    if caplen > MAX_PACKET || data_off + caplen as usize > body.len() {
                        return Err(self.corrupt(format!(
                            "pcapng packet block claims {caplen} captured bytes in a block of \
                             {len} bytes"
                        )));
                    }
                    let Format::PcapNg { interfaces, .. } = &self.format else {
                        unreachable!("format checked above")
                    };
                    let Some(iface) = interfaces.get(iface_id as usize).copied() else {
                        return Err(self.corrupt(format!(
                            "pcapng packet block refers to interface {iface_id}, but the \
                             section has {} interfaces",
                            interfaces.len()
                        )));
                    };
                    let ts_ns = ts_units
                        .map(|u| {
                            iface
                                .res
                                .to_ns(u)
                                .saturating_add(iface.offset_s.saturating_mul(1_000_000_000))
                        })
                        .unwrap_or(0);
                    if caplen > orig {
                        self.info.caplen_over_orig += 1;
                    }
                    let data_start = body_start + data_off;
                    self.consume(len as usize);
                    self.frames += 1;
                    self.numbered += 1;
                    return Ok(Some(Frame {
                        number: self.numbered,
                        ts_ns,
                        link: iface.link,
                        orig_len: orig.max(caplen),
                        data: &self.buf[data_start..data_start + caplen as usize],
                    }));
                }
                // Custom blocks (copyable or not), systemd journal entries and sysdig events:
                // Wireshark 4.0 shows each as a frame, so they take a number.
                0xBAD | 0x4000_0BAD | 9 | 0x204 | 0x216 | 0x221 => {
                    self.numbered += 1;
                    self.info.non_packet_records += 1;
                    self.info.skipped_blocks += 1;
                    self.consume(len as usize);
                }
                _ => {
                    self.info.skipped_blocks += 1;
                    self.consume(len as usize);
                }
            }
        }
    }

    /// Reads a section header block at the current position: its byte-order magic decides
    /// how to read everything in the section, including its own length.
    fn section_header(&mut self) -> Result<(), CaptureError> {
        if !self.fill(12)? {
            return Err(self.truncated("a pcapng section header"));
        }
        let h = &self.buf[self.start..self.start + 12];
        let endian = match [h[8], h[9], h[10], h[11]] {
            [0x4d, 0x3c, 0x2b, 0x1a] => Endian::Little,
            [0x1a, 0x2b, 0x3c, 0x4d] => Endian::Big,
            other => {
                return Err(self.corrupt(format!(
                    "pcapng section header has an unknown byte-order magic {other:02x?}"
                )))
            }
        };
        let len = endian.u32(&h[4..8]);
        self.check_block_len(len, 28)?;
        if !self.fill(len as usize)? {
            return Err(self.truncated("a pcapng section header"));
        }
        self.check_trailing_len(endian, len)?;
        let at = self.start + 12;
        let version = (
            endian.u16(&self.buf[at..at + 2]),
            endian.u16(&self.buf[at + 2..at + 4]),
        );
        // Major version 1 is the only one defined; a reader cannot know what another means
        // (Wireshark refuses it too). Minor versions are compatible by the format's rules.
        if version.0 != 1 {
            return Err(self.corrupt(format!(
                "pcapng section header of version {}.{}, but only version 1 is defined",
                version.0, version.1
            )));
        }
        if self.info.sections == 0 {
            self.info.version = version;
        }
        self.format = Format::PcapNg {
            endian,
            interfaces: Vec::new(),
        };
        self.info.sections += 1;
        self.consume(len as usize);
        Ok(())
    }

    /// A block ends with a second copy of its length; a different one means the reader lost
    /// its place (or the file is damaged), so what follows cannot be trusted. Wireshark stops
    /// there too.
    fn check_trailing_len(&self, endian: Endian, len: u32) -> Result<(), CaptureError> {
        let at = self.start + len as usize - 4;
        let trailing = endian.u32(&self.buf[at..at + 4]);
        if trailing != len {
            return Err(self.corrupt(format!(
                "pcapng block length {len} is not repeated at the block's end (found {trailing})"
            )));
        }
        Ok(())
    }

    fn check_block_len(&self, len: u32, min: u32) -> Result<(), CaptureError> {
        if len < min || len % 4 != 0 || len > MAX_BLOCK {
            return Err(self.corrupt(format!(
                "pcapng block length {len} is impossible (must be a multiple of 4 between \
                 {min} and {MAX_BLOCK})"
            )));
        }
        Ok(())
    }

    fn truncated(&self, what: &'static str) -> CaptureError {
        CaptureError::Truncated {
            what,
            offset: self.offset,
            frames: self.frames,
        }
    }

    fn corrupt(&self, why: String) -> CaptureError {
        CaptureError::Corrupt {
            offset: self.offset,
            why,
            frames: self.frames,
        }
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.offset += n as u64;
    }

    /// Makes at least `n` bytes available at `buf[start..]`; false if the input ends first.
    fn fill(&mut self, n: usize) -> Result<bool, CaptureError> {
        if self.end - self.start >= n {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        if self.start + n > self.buf.len() {
            // Move the unread tail to the front; grow only if one record is bigger than the
            // buffer (bounded by MAX_BLOCK, checked by the callers).
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if n > self.buf.len() {
                self.buf.resize(n.next_power_of_two(), 0);
            }
        }
        while self.end - self.start < n {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if self.info.gzip
                        && matches!(
                            e.kind(),
                            io::ErrorKind::InvalidData
                                | io::ErrorKind::InvalidInput
                                | io::ErrorKind::UnexpectedEof
                        ) =>
                {
                    // Damage inside the compressed stream: keep what came before it.
                    return Err(self.corrupt(format!(
                        "the gzip-compressed data is damaged or cut short ({e})"
                    )));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }
}

/// Parses an interface description block body: link type, snaplen, and the timestamp options.
fn parse_idb(endian: Endian, body: &[u8]) -> Option<(Interface, u32)> {
    if body.len() < 8 {
        return None;
    }
    let link = LinkType(u32::from(endian.u16(&body[0..2])));
    let snaplen = endian.u32(&body[4..8]);
    let mut iface = Interface {
        link,
        res: TsRes::Decimal(6),
        offset_s: 0,
    };
    let mut opts = &body[8..];
    while opts.len() >= 4 {
        let code = endian.u16(&opts[0..2]);
        let olen = endian.u16(&opts[2..4]) as usize;
        let padded = (olen + 3) & !3;
        if code == 0 || 4 + padded > opts.len() {
            break;
        }
        let val = &opts[4..4 + olen];
        match (code, olen) {
            (9, 1) => {
                let v = val[0];
                iface.res = if v & 0x80 != 0 {
                    TsRes::Binary(v & 0x7f)
                } else {
                    TsRes::Decimal(v)
                };
            }
            (14, 8) => iface.offset_s = endian.u64(val) as i64,
            _ => {}
        }
        opts = &opts[4 + padded..];
    }
    Some((iface, snaplen))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn pcap_file(
        be: bool,
        nanos: bool,
        link: u32,
        recs: &[(u32, u32, &[u8], u32)],
    ) -> Vec<u8> {
        let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let w16 = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut f = Vec::new();
        f.extend(w32(if nanos { 0xa1b23c4d } else { 0xa1b2c3d4 }));
        f.extend(w16(2));
        f.extend(w16(4));
        f.extend(w32(0));
        f.extend(w32(0));
        f.extend(w32(65535));
        f.extend(w32(link));
        for (s, frac, data, orig) in recs {
            f.extend(w32(*s));
            f.extend(w32(*frac));
            f.extend(w32(data.len() as u32));
            f.extend(w32(*orig));
            f.extend_from_slice(data);
        }
        f
    }

    /// (frame number, timestamp ns, original length, data) of each frame read.
    type Frames = Vec<(u64, i64, u32, Vec<u8>)>;

    fn read_all(bytes: &[u8]) -> (Frames, Option<CaptureError>) {
        let mut out = Vec::new();
        let mut r = match CaptureReader::new(bytes) {
            Ok(r) => r,
            Err(e) => return (out, Some(e)),
        };
        loop {
            match r.next() {
                Ok(Some(f)) => out.push((f.number, f.ts_ns, f.orig_len, f.data.to_vec())),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[test]
    fn reads_pcap_in_both_byte_orders_and_precisions() {
        for be in [false, true] {
            for nanos in [false, true] {
                let f = pcap_file(be, nanos, 1, &[(10, 5, b"abc", 60), (11, 7, b"de", 2)]);
                let (frames, err) = read_all(&f);
                assert!(err.is_none(), "{err:?}");
                let scale = if nanos { 1 } else { 1000 };
                assert_eq!(frames.len(), 2);
                assert_eq!(
                    frames[0],
                    (1, 10_000_000_000 + 5 * scale, 60, b"abc".to_vec())
                );
                assert_eq!(
                    frames[1],
                    (2, 11_000_000_000 + 7 * scale, 2, b"de".to_vec())
                );
            }
        }
    }

    #[test]
    fn truncated_record_keeps_the_frames_before_it() {
        let f = pcap_file(false, false, 1, &[(1, 0, b"abcd", 4), (2, 0, b"efgh", 4)]);
        let (frames, err) = read_all(&f[..f.len() - 2]);
        assert_eq!(frames.len(), 1);
        match err {
            Some(CaptureError::Truncated { frames: 1, .. }) => {}
            other => panic!("expected truncation after one frame, got {other:?}"),
        }
    }

    #[test]
    fn huge_length_is_corrupt_not_an_allocation() {
        let mut f = pcap_file(false, false, 1, &[(1, 0, b"abcd", 4)]);
        f[24 + 8..24 + 12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        let (frames, err) = read_all(&f);
        assert!(frames.is_empty());
        assert!(matches!(err, Some(CaptureError::Corrupt { .. })), "{err:?}");
    }

    #[test]
    fn garbage_and_empty_inputs_are_refused() {
        assert!(matches!(read_all(b"").1, Some(CaptureError::Empty)));
        assert!(matches!(
            read_all(b"hello world, not a capture").1,
            Some(CaptureError::NotACapture(_))
        ));
        let xz = read_all(b"\xfd7zXZ\0\0\x04").1.unwrap().to_string();
        assert!(xz.contains("xz-compressed: decompress it"), "{xz}");
        assert!(matches!(
            read_all(&[0xd4, 0xc3, 0xb2, 0xa1, 0, 0]).1,
            Some(CaptureError::BadHeader(_))
        ));
    }

    fn ng_block(be: bool, btype: u32, body: &[u8]) -> Vec<u8> {
        let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let pad = (4 - body.len() % 4) % 4;
        let len = 12 + body.len() + pad;
        let mut b = Vec::new();
        b.extend(w32(btype));
        b.extend(w32(len as u32));
        b.extend_from_slice(body);
        b.extend(std::iter::repeat_n(0, pad));
        b.extend(w32(len as u32));
        b
    }

    fn ng_section(
        be: bool,
        ifaces: &[(u16, Option<u8>)],
        pkts: &[(u32, u64, &[u8], u32)],
    ) -> Vec<u8> {
        let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let w16 = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut shb = Vec::new();
        shb.extend(w32(0x1a2b3c4d));
        shb.extend(w16(1));
        shb.extend(w16(0));
        shb.extend([0xff; 8]);
        let mut f = ng_block(be, 0x0a0d0d0a, &shb);
        for (link, res) in ifaces {
            let mut idb = Vec::new();
            idb.extend(w16(*link));
            idb.extend(w16(0));
            idb.extend(w32(0));
            if let Some(r) = res {
                idb.extend(w16(9));
                idb.extend(w16(1));
                idb.extend([*r, 0, 0, 0]);
                idb.extend(w16(0));
                idb.extend(w16(0));
            }
            f.extend(ng_block(be, 1, &idb));
        }
        for (iface, ts, data, orig) in pkts {
            let mut epb = Vec::new();
            epb.extend(w32(*iface));
            epb.extend(w32((ts >> 32) as u32));
            epb.extend(w32(*ts as u32));
            epb.extend(w32(data.len() as u32));
            epb.extend(w32(*orig));
            epb.extend_from_slice(data);
            f.extend(ng_block(be, 6, &epb));
        }
        f
    }

    #[test]
    fn reads_pcapng_sections_interfaces_and_resolutions() {
        let mut f = ng_section(
            false,
            &[(1, None), (101, Some(9))],
            &[(0, 1_500_000, b"x", 1), (1, 2_000_000_123, b"yz", 9)],
        );
        f.extend(ng_block(false, 5, &[0u8; 8])); // an interface statistics block: skipped
        f.extend(ng_section(
            true,
            &[(113, Some(0x80 | 10))],
            &[(0, 3 * 1024, b"w", 1)],
        ));
        let mut r = CaptureReader::new(&f[..]).unwrap();
        let mut got = Vec::new();
        while let Some(fr) = r.next().unwrap() {
            got.push((fr.number, fr.ts_ns, fr.link, fr.orig_len, fr.data.to_vec()));
        }
        assert_eq!(
            got,
            vec![
                (1, 1_500_000_000, LinkType(1), 1, b"x".to_vec()),
                (2, 2_000_000_123, LinkType(101), 9, b"yz".to_vec()),
                (3, 3_000_000_000, LinkType(113), 1, b"w".to_vec()),
            ]
        );
        assert_eq!(r.info().sections, 2);
        assert_eq!(r.info().interfaces, 3);
        assert_eq!(r.info().skipped_blocks, 1);
    }

    #[test]
    fn pcapng_packet_on_an_unknown_interface_is_corrupt() {
        let f = ng_section(false, &[], &[(0, 1, b"x", 1)]);
        assert!(matches!(read_all(&f).1, Some(CaptureError::Corrupt { .. })));
    }

    #[test]
    fn pcap_before_2_3_has_its_lengths_swapped_back() {
        let f = pcap_file(false, false, 1, &[(1, 0, b"abcd", 60), (2, 0, b"ef", 70)]);
        // Version 2.2 with each record's captured and original length exchanged.
        let mut old = f.clone();
        old[6..8].copy_from_slice(&2u16.to_le_bytes());
        let mut at = 24;
        while at < old.len() {
            let caplen = u32::from_le_bytes(old[at + 8..at + 12].try_into().unwrap());
            let (a, b) = (at + 8, at + 12);
            let (x, y) = (old[a..a + 4].to_vec(), old[b..b + 4].to_vec());
            old[a..a + 4].copy_from_slice(&y);
            old[b..b + 4].copy_from_slice(&x);
            at += 16 + caplen as usize;
        }
        let (frames, err) = read_all(&old);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(frames, read_all(&f).0);
        // Version 2.3: swapped only where the captured length exceeds the original.
        let mut maybe = old.clone();
        maybe[6..8].copy_from_slice(&3u16.to_le_bytes());
        let mut r = CaptureReader::new(&maybe[..]).unwrap();
        while r.next().unwrap().is_some() {}
        assert_eq!((r.frames(), r.info().swapped_lengths), (2, 2));
        let mut r = CaptureReader::new(&f[..]).unwrap();
        assert_eq!(r.info().version, (2, 4));
        while r.next().unwrap().is_some() {}
        assert_eq!(r.info().swapped_lengths, 0);
    }

    #[test]
    fn gzip_input_is_read_as_the_capture_inside() {
        use flate2::{write::GzEncoder, Compression};
        use std::io::Write;
        let f = pcap_file(false, true, 1, &[(1, 2, b"abc", 3), (3, 4, b"q", 1)]);
        let mut z = GzEncoder::new(Vec::new(), Compression::default());
        z.write_all(&f).unwrap();
        let gz = z.finish().unwrap();
        let (frames, err) = read_all(&gz);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(frames, read_all(&f).0);
        assert!(CaptureReader::new(&gz[..]).unwrap().info().gzip);
        // Damaged compressed data: what came before is kept, the rest is reported.
        let (_, err) = read_all(&gz[..gz.len() - 12]);
        assert!(
            matches!(&err, Some(CaptureError::Corrupt { why, .. }) if why.contains("gzip")),
            "{err:?}"
        );
    }

    #[test]
    fn unusable_file_headers_are_refused_before_any_frame() {
        let f = pcap_file(false, false, 1, &[(1, 0, b"abcd", 4)]);
        assert!(matches!(
            read_all(&f[..20]).1,
            Some(CaptureError::BadHeader(_))
        ));
        let ng = ng_section(false, &[(1, None)], &[(0, 1, b"x", 1)]);
        assert!(matches!(
            read_all(&ng[..20]).1,
            Some(CaptureError::BadHeader(_))
        ));
        let mut bom = ng.clone();
        bom[8..12].copy_from_slice(b"junk");
        assert!(matches!(read_all(&bom).1, Some(CaptureError::BadHeader(_))));
        let mut v2 = ng.clone();
        v2[12..14].copy_from_slice(&2u16.to_le_bytes());
        let err = read_all(&v2).1;
        assert!(
            matches!(&err, Some(CaptureError::BadHeader(w)) if w.contains("version 2.0")),
            "{err:?}"
        );
    }

    #[test]
    fn pcapng_trailing_length_and_later_section_versions_are_checked() {
        let one = ng_section(false, &[(1, None)], &[(0, 1, b"x", 1), (0, 2, b"y", 1)]);
        // The second packet block's trailing length is wrong: stop after the first frame.
        let mut bad = one.clone();
        let n = bad.len();
        bad[n - 4..].copy_from_slice(&99u32.to_le_bytes());
        let (frames, err) = read_all(&bad);
        assert_eq!(frames.len(), 1);
        assert!(
            matches!(&err, Some(CaptureError::Corrupt { why, .. }) if why.contains("not repeated")),
            "{err:?}"
        );
        // A second section of an unknown major version: the first section's frames stay.
        let mut two = one.clone();
        let mut second = ng_section(false, &[(1, None)], &[(0, 3, b"z", 1)]);
        second[12..14].copy_from_slice(&3u16.to_le_bytes());
        two.extend(second);
        let (frames, err) = read_all(&two);
        assert_eq!(frames.len(), 2);
        assert!(
            matches!(&err, Some(CaptureError::Corrupt { why, .. }) if why.contains("version 3.0")),
            "{err:?}"
        );
    }

    #[test]
    fn blocks_wireshark_shows_as_frames_take_a_frame_number() {
        let mut f = ng_section(false, &[(1, None)], &[(0, 1, b"x", 1)]);
        f.extend(ng_block(false, 0xBAD, &[0, 0, 0x7e, 0xd9, b'h', b'i']));
        f.extend(ng_block(false, 5, &[0u8; 12])); // statistics: no number
        f.extend(ng_block(false, 9, b"MESSAGE=x\n"));
        let tail = ng_section(false, &[(1, None)], &[(0, 2, b"y", 1)]);
        // The tail's packet block, without its section header and interface.
        let epb_at = tail.len() - (12 + 20 + 4);
        f.extend(&tail[epb_at..]);
        let mut r = CaptureReader::new(&f[..]).unwrap();
        let mut numbers = Vec::new();
        while let Some(fr) = r.next().unwrap() {
            numbers.push(fr.number);
        }
        assert_eq!(numbers, vec![1, 4]);
        assert_eq!(r.frames(), 2);
        assert_eq!(r.info().non_packet_records, 2);
    }

    #[test]
    fn reading_through_a_tiny_pipe_gives_the_same_frames() {
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = buf.len().min(3).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let big = vec![7u8; 70_000];
        let f = pcap_file(false, true, 1, &[(1, 2, &big, 70_000), (3, 4, b"q", 1)]);
        let mut r = CaptureReader::new(Trickle(&f)).unwrap();
        assert_eq!(r.next().unwrap().unwrap().data.len(), 70_000);
        assert_eq!(r.next().unwrap().unwrap().data, b"q");
        assert!(r.next().unwrap().is_none());
    }
}
