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

mod link;
mod pcapng;

pub use link::LinkType;

/// The largest packet we accept, as Wireshark does (`WTAP_MAX_PACKET_SIZE_STANDARD`). A record
/// claiming more means the file is corrupt (or we lost sync), not that the packet is large.
pub const MAX_PACKET: u32 = 262_144;
/// The largest pcapng block we accept: a packet plus generous room for options and comments.
const MAX_BLOCK: u32 = 16 * 1024 * 1024;
const INITIAL_BUF: usize = 1 << 20;

/// One captured frame, borrowed from the reader until its next call.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// 1-based position in the file as Wireshark numbers frames: packet records and, in pcapng,
    /// the other blocks it shows as records (custom, systemd journal, sysdig events).
    pub number: u64,
    /// Capture time in nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    /// The link-layer type `data` starts with (per interface in pcapng).
    pub link: LinkType,
    /// Length of the packet on the wire; `data` may be shorter (snaplen).
    pub orig_len: u32,
    /// The captured bytes from the link-layer header on, at most the snap length.
    pub data: &'a [u8],
}

/// Why reading stopped before the end of the data (or could not start).
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    // The cause is in the message, so it is not chained as a source too (`{:#}` would print
    // it twice); analyses print this error with `{}`.
    /// Reading the input failed.
    #[error("cannot read: {0}")]
    Io(io::Error),
    /// The input had no bytes at all.
    #[error("empty input: no capture file header")]
    Empty,
    /// The first four bytes are no pcap or pcapng magic number.
    #[error("not a pcap or pcapng file (first bytes {0:02x?})")]
    NotACapture([u8; 4]),
    /// Compressed with something other than gzip (which is read directly).
    #[error("the input is {0}-compressed: decompress it first ({1})")]
    Compressed(&'static str, &'static str),
    /// The file header is there but unusable (cut short, an unknown byte-order magic or
    /// version): nothing in the file can be read.
    #[error("unusable capture file header: {0}")]
    BadHeader(String),
    /// The data ended inside a header or record; what was read before it is still good.
    #[error("the capture ends in the middle of {what} at byte {offset}; {frames} complete frames were read before it")]
    Truncated {
        /// What was being read: a record header, a block, a packet.
        what: &'static str,
        /// Byte offset in the file where it started.
        offset: u64,
        /// Complete frames read before it.
        frames: u64,
    },
    /// A length or field no valid capture has, where reading cannot resynchronise.
    #[error(
        "corrupt capture at byte {offset}: {why}; {frames} complete frames were read before it"
    )]
    Corrupt {
        /// Byte offset in the file of the bad header.
        offset: u64,
        /// What is wrong with it, in words.
        why: String,
        /// Complete frames read before it.
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

#[cfg(test)]
mod tests;
