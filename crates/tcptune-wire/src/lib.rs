//! Reading packet captures: a streaming pcap/pcapng reader ([`capture`]) and zero-copy views of
//! the link, IP and TCP headers of each frame ([`packet`]), over the raw IP and TCP header
//! views ([`header`]) the emulator and the lab read packets with too.
//!
//! Nothing here allocates per packet: a frame borrows the reader's buffer until the next call,
//! and the header view borrows the frame. Lengths come from the IP header and the frame's
//! original length (not the captured length), so captures cut by a snaplen still give true TCP
//! segment lengths, as Wireshark computes them.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod capture;
pub mod header;
pub mod packet;
pub mod write;

pub use capture::{CaptureError, CaptureInfo, CaptureReader, Frame, LinkType};
pub use packet::{parse_frame, Addr, Parsed, SkipReason, TcpOptions, TcpSegment};
