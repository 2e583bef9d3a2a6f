//! The reader's tests: pcap in both byte orders and precisions, pcapng sections and
//! interfaces, gzip, damaged and hostile inputs, and reads through a tiny pipe.

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

fn ng_section(be: bool, ifaces: &[(u16, Option<u8>)], pkts: &[(u32, u64, &[u8], u32)]) -> Vec<u8> {
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
