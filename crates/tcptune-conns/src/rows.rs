//! A table rendered row by row as its sockets are decoded and written sorted at the end: the
//! store behind `conns`'s text table ([`TextRows`](crate::conn::TextRows)) and its `--json`
//! document ([`JsonRows`](crate::json::JsonRows)).
//!
//! Rows are rendered where they are made (`conns` does it on the thread that decodes while the
//! kernel fills the next datagram), so only their bytes and sort keys are kept. The bytes go
//! into large blocks rather than an allocation per row: on that thread each small allocation
//! that outgrew its heap cost an mprotect call and a page fault (800 of them for 20,000 rows).
//! The sorted rows go to the kernel in place (writev), never copied into one document.

use std::cmp::Reverse;
use std::io;

/// A block holds this much (rows are 0.1–1 KB; allocations this large are mapped directly).
pub(crate) const BLOCK: usize = 1 << 20;

#[derive(Debug, Default)]
pub(crate) struct Rendered {
    /// Rendered rows; a block is not reallocated once it is left for the next.
    blocks: Vec<Vec<u8>>,
    /// Per row: its sort key, its block, and where it lies in that block.
    rows: Vec<(Reverse<u64>, u32, u32, u32)>,
}

impl Rendered {
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Adds a row sorted by `key`, whose bytes `render` appends to the buffer it is given.
    pub(crate) fn push(&mut self, key: Reverse<u64>, render: impl FnOnce(&mut Vec<u8>)) {
        // A new block when the current one may not hold another row (one that does not fit
        // only grows its block, whose rows' offsets stay valid).
        if self
            .blocks
            .last()
            .is_none_or(|b| b.len() + BLOCK / 16 > b.capacity())
        {
            self.blocks.push(Vec::with_capacity(BLOCK));
        }
        let block = self.blocks.len() - 1;
        let buf = &mut self.blocks[block];
        let start = buf.len();
        render(buf);
        // Blocks stay far below 4 GiB, and there are fewer than 2^32 of them.
        self.rows
            .push((key, block as u32, start as u32, buf.len() as u32));
    }

    /// Writes `head`, the rows sorted by key (stable: rows with equal keys in the order they
    /// came), the first one without its first `skip_first` bytes, and `tail`.
    pub(crate) fn write(
        mut self,
        head: &[u8],
        skip_first: usize,
        tail: &[u8],
        w: &mut impl io::Write,
    ) -> io::Result<()> {
        self.rows.sort_by_key(|r| r.0);
        // writev takes at most 1024 pieces at once (IOV_MAX).
        const BATCH: usize = 1024;
        let mut pieces: Vec<io::IoSlice> = Vec::with_capacity(BATCH);
        pieces.push(io::IoSlice::new(head));
        for (i, &(_, block, start, end)) in self.rows.iter().enumerate() {
            let row = &self.blocks[block as usize][start as usize..end as usize];
            pieces.push(io::IoSlice::new(if i == 0 {
                &row[skip_first..]
            } else {
                row
            }));
            if pieces.len() == BATCH {
                write_all_vectored(w, &mut pieces)?;
                pieces.clear();
            }
        }
        pieces.push(io::IoSlice::new(tail));
        write_all_vectored(w, &mut pieces)
    }
}

/// `Write::write_all_vectored` (not stable yet): every piece, however the writes split them.
fn write_all_vectored(w: &mut impl io::Write, mut pieces: &mut [io::IoSlice]) -> io::Result<()> {
    io::IoSlice::advance_slices(&mut pieces, 0);
    while !pieces.is_empty() {
        match w.write_vectored(pieces) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut pieces, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A writer that takes a few hundred bytes at a time, as a pipe may.
    pub(crate) struct Trickle(pub Vec<u8>);
    impl io::Write for Trickle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let n = b.len().min(777);
            self.0.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn rows_come_out_sorted_stable_and_whole() {
        // Rows of every size up to larger than a block's slack, more than one writev takes,
        // over several blocks, with keys that tie.
        let mut rows = Rendered::default();
        let mut expected: Vec<(Reverse<u64>, usize, Vec<u8>)> = Vec::new();
        for i in 0..3000usize {
            let key = Reverse((i * 7919 % 100) as u64);
            let len = if i == 1500 { BLOCK / 8 } else { i % 1000 };
            let bytes: Vec<u8> = (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect();
            rows.push(key, |buf| buf.extend_from_slice(&bytes));
            expected.push((key, i, bytes));
        }
        assert!(rows.blocks.len() > 1);
        expected.sort_by_key(|e| (e.0, e.1));
        let mut w = Trickle(Vec::new());
        rows.write(b"<", 1, b">", &mut w).unwrap();
        let mut want = b"<".to_vec();
        for (i, (_, _, bytes)) in expected.iter().enumerate() {
            want.extend_from_slice(if i == 0 { &bytes[1..] } else { bytes });
        }
        want.push(b'>');
        assert_eq!(w.0, want);
        let mut w = Trickle(Vec::new());
        Rendered::default().write(b"<", 1, b">", &mut w).unwrap();
        assert_eq!(w.0, b"<>");
    }
}
