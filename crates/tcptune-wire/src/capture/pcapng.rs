//! pcapng blocks: section headers (each with its byte order and version), interface
//! descriptions (link type, snaplen, timestamp resolution and offset), enhanced, simple and
//! obsolete packet blocks, and the records Wireshark numbers as frames; other blocks skipped.

use super::*;

impl<R: Read> CaptureReader<R> {
    pub(super) fn next_pcapng(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
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
    pub(super) fn section_header(&mut self) -> Result<(), CaptureError> {
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
