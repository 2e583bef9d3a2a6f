//! The ring buffer's page format, as `per_cpu/cpuN/trace_pipe_raw` returns it: a page header
//! (time stamp, commit word) then compressed event headers (Linux's
//! kernel/trace/ring_buffer.c, described by `events/header_event`): a 32-bit word of
//! `type_len` (5 bits) and `time_delta` (27 bits), then for data events the record (its length
//! in the type, or in the next word when type 0), or padding (29), a time extend (30, the
//! delta's upper bits in the next word) or an absolute time stamp (31). Little-endian hosts
//! only (the trace module refuses others).

use super::format::{Field, PageHeader};

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// The commit word's flags: events were lost before this page; their count is stored after
/// the data.
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
/// The bytes written, under the flags.
const COMMIT_SIZE: u64 = (1 << 30) - 1;
/// An absolute time stamp holds 59 bits; the upper ones come from the time before it.
const TS_MSB: u64 = 0xf8 << 56;

/// One event record of a page with its time (trace clock, ns for `mono`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEvent<'a> {
    /// Time stamp, trace clock nanoseconds (`mono`: CLOCK_MONOTONIC).
    pub ts: u64,
    /// The record: `common_type` and the event's fields, at the offsets of its format.
    pub data: &'a [u8],
}

/// What a page says besides its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageInfo {
    /// Events the kernel overwrote or dropped before this page: `Some(n)` when it stored the
    /// count, `Some(0)` never; `None` when none were lost.
    pub missed: Option<u64>,
    /// Whether events were lost but their count is unknown.
    pub missed_unknown: bool,
    /// Data events on the page.
    pub events: usize,
}

/// A page that cannot be walked (cut short, or a length pointing past its end).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a trace page is malformed at byte {at}: {what}")]
pub struct PageError {
    /// Byte offset in the page.
    pub at: usize,
    /// What was wrong there.
    pub what: &'static str,
}

fn read_uint(b: &[u8], f: &Field) -> Option<u64> {
    let s = b.get(f.offset..f.offset + f.size)?;
    let mut w = [0u8; 8];
    w.get_mut(..s.len())?.copy_from_slice(s);
    Some(u64::from_le_bytes(w))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// An absolute stamp's missing upper bits, taken from the time before it (the kernel's
/// `rb_fix_abs_ts`).
fn fix_abs_ts(abs: u64, before: u64) -> u64 {
    if before & TS_MSB == 0 {
        return abs;
    }
    let mut t = abs | (before & TS_MSB);
    if t < before {
        t = t.wrapping_add(1 << 59);
    }
    t
}

/// Walks one page, handing each data event to `each` in order.
pub fn parse_page<'a>(
    page: &'a [u8],
    h: &PageHeader,
    mut each: impl FnMut(RawEvent<'a>),
) -> Result<PageInfo, PageError> {
    let bad = |at, what| PageError { at, what };
    let mut ts = read_uint(page, &h.timestamp).ok_or(bad(0, "no page header"))?;
    let commit = read_uint(page, &h.commit).ok_or(bad(h.commit.offset, "no commit word"))?;
    let size = (commit & COMMIT_SIZE) as usize;
    let start = h.data.offset;
    let data = page
        .get(start..start + size)
        .filter(|_| size <= h.data.size)
        .ok_or(bad(h.commit.offset, "commit size past the page"))?;
    let mut info = PageInfo::default();
    if commit & MISSED_EVENTS != 0 {
        let stored = (commit & MISSED_STORED != 0)
            .then(|| page.get(start + size..start + size + 8))
            .flatten()
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
        info.missed = stored;
        info.missed_unknown = stored.is_none();
    }
    let mut off = 0;
    while off + 4 <= data.len() {
        let word = u32_at(data, off).ok_or(bad(start + off, "cut header"))?;
        let (type_len, delta) = (word & 0x1f, u64::from(word >> 5));
        let array0 = u32_at(data, off + 4).ok_or(bad(start + off, "cut length word"));
        match type_len {
            TYPE_PADDING => {
                if delta == 0 {
                    break; // the rest of the page is empty
                }
                // A discarded event: its length in the next word, its delta kept.
                ts = ts.wrapping_add(delta);
                off += 4 + array0? as usize;
            }
            TYPE_TIME_EXTEND => {
                ts = ts.wrapping_add((u64::from(array0?) << 27) + delta);
                off += 8;
            }
            TYPE_TIME_STAMP => {
                ts = fix_abs_ts((u64::from(array0?) << 27) | delta, ts);
                off += 8;
            }
            0 => {
                // The length word counts itself; the record follows it.
                let len = array0? as usize;
                let rec = data
                    .get(off + 8..off + 4 + len)
                    .ok_or(bad(start + off, "record past the page"))?;
                ts = ts.wrapping_add(delta);
                each(RawEvent { ts, data: rec });
                info.events += 1;
                off += 4 + len.max(4).next_multiple_of(4);
            }
            n => {
                let len = n as usize * 4;
                let rec = data
                    .get(off + 4..off + 4 + len)
                    .ok_or(bad(start + off, "record past the page"))?;
                ts = ts.wrapping_add(delta);
                each(RawEvent { ts, data: rec });
                info.events += 1;
                off += 4 + len;
            }
        }
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> PageHeader {
        PageHeader::parse(include_str!(
            "../../../../fixtures/kernel/6.18/trace/header_page"
        ))
        .unwrap()
    }

    /// Builds a page: `body` is the data area's bytes; `flags` or'ed into the commit word.
    fn page(ts: u64, body: &[u8], flags: u64, missed: Option<u64>) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&ts.to_le_bytes());
        p[8..16].copy_from_slice(&(body.len() as u64 | flags).to_le_bytes());
        p[16..16 + body.len()].copy_from_slice(body);
        if let Some(m) = missed {
            p[16 + body.len()..24 + body.len()].copy_from_slice(&m.to_le_bytes());
        }
        p
    }

    fn word(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | (delta << 5)).to_le_bytes()
    }

    fn walk(p: &[u8]) -> (Vec<(u64, Vec<u8>)>, PageInfo) {
        let mut got = Vec::new();
        let info = parse_page(p, &header(), |e| got.push((e.ts, e.data.to_vec()))).unwrap();
        (got, info)
    }

    #[test]
    fn small_and_long_records_with_deltas() {
        let mut b = Vec::new();
        b.extend(word(2, 10)); // 8-byte record, +10 ns
        b.extend([1, 2, 3, 4, 5, 6, 7, 8]);
        b.extend(word(0, 5)); // long form: length word counts itself (4 + 12)
        b.extend(16u32.to_le_bytes());
        b.extend([9u8; 12]);
        let (got, info) = walk(&page(1_000, &b, 0, None));
        assert_eq!(
            got,
            vec![(1_010, vec![1, 2, 3, 4, 5, 6, 7, 8]), (1_015, vec![9; 12])]
        );
        assert_eq!(
            info,
            PageInfo {
                events: 2,
                ..Default::default()
            }
        );
    }

    #[test]
    fn time_extend_stamp_and_padding() {
        let mut b = Vec::new();
        b.extend(word(TYPE_TIME_EXTEND, 3)); // + (2 << 27) + 3
        b.extend(2u32.to_le_bytes());
        b.extend(word(1, 0));
        b.extend([0xaa; 4]);
        b.extend(word(TYPE_PADDING, 7)); // a discarded 8-byte event, its delta kept
        b.extend(8u32.to_le_bytes());
        b.extend([0; 4]);
        b.extend(word(TYPE_TIME_STAMP, 0x55)); // absolute: (1 << 27) | 0x55
        b.extend(1u32.to_le_bytes());
        b.extend(word(1, 1));
        b.extend([0xbb; 4]);
        b.extend(word(TYPE_PADDING, 0)); // the end: nothing after counts
        b.extend([0xff; 12]);
        let (got, _) = walk(&page(100, &b, 0, None));
        assert_eq!(
            got,
            vec![
                (100 + (2 << 27) + 3, vec![0xaa; 4]),
                ((1 << 27) + 0x55 + 1, vec![0xbb; 4])
            ]
        );
    }

    #[test]
    fn missed_events_stored_and_unknown() {
        let mut b = Vec::new();
        b.extend(word(1, 1));
        b.extend([1; 4]);
        let (_, info) = walk(&page(0, &b, MISSED_EVENTS | MISSED_STORED, Some(42)));
        assert_eq!((info.missed, info.missed_unknown), (Some(42), false));
        let (_, info) = walk(&page(0, &b, MISSED_EVENTS, None));
        assert_eq!((info.missed, info.missed_unknown), (None, true));
    }

    #[test]
    fn absolute_stamp_keeps_the_upper_bits() {
        let before = (0x10u64 << 59) | 500;
        assert_eq!(fix_abs_ts(600, before), (0x10 << 59) | 600);
        assert_eq!(fix_abs_ts(400, before), (0x11 << 59) | 400);
        assert_eq!(fix_abs_ts(400, 500), 400);
    }

    #[test]
    fn malformed_pages_are_errors_not_panics() {
        let h = header();
        assert!(parse_page(&[0u8; 10], &h, |_| {}).is_err());
        let mut b = Vec::new();
        b.extend(word(0, 1));
        b.extend(4000u32.to_le_bytes());
        assert!(parse_page(&page(0, &b, 0, None), &h, |_| {}).is_err());
        let mut p = page(0, &[], 0, None);
        p[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(parse_page(&p, &h, |_| {}).is_err());
        // Every prefix and every byte flipped: no panic.
        let mut b = Vec::new();
        b.extend(word(2, 10));
        b.extend([1; 8]);
        b.extend(word(TYPE_TIME_EXTEND, 1));
        b.extend(1u32.to_le_bytes());
        let full = page(7, &b, 0, None);
        for cut in 0..64 {
            let _ = parse_page(&full[..cut], &h, |_| {});
        }
        for i in 0..40 {
            let mut p = full.clone();
            p[i] ^= 0xff;
            let _ = parse_page(&p, &h, |_| {});
        }
    }
}
