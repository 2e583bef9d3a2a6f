//! Files: reads and writes on a borrowed descriptor, pipes, FIFOs, an exclusive rename, file
//! locks, memory files and `sendfile`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::{check, len, owned};

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path {} contains a NUL byte", p.display()),
        )
    })
}

/// read(2) into `buf`; the bytes read.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for buf.len() bytes of writes; `fd` is open (borrowed).
    len(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })
}

/// read(2) into `buf`'s whole capacity, replacing its contents, without zeroing first.
pub fn read_to_capacity(fd: BorrowedFd<'_>, buf: &mut Vec<u8>) -> io::Result<usize> {
    buf.clear();
    // SAFETY: read(2) writes at most capacity bytes into the vector's allocation, which is
    // valid for that many bytes of writes.
    let n = len(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.capacity()) })?;
    // SAFETY: the first n bytes were initialised by read(2), and n <= capacity.
    unsafe { buf.set_len(n) };
    Ok(n)
}

/// write(2) of `buf`; the bytes written.
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for buf.len() bytes of reads; `fd` is open (borrowed).
    len(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) })
}

/// pipe2(2) with close-on-exec: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((owned(fds[0])?, owned(fds[1])?))
}

/// mkfifo(3) at `path` with `mode`.
pub fn mkfifo(path: &Path, mode: u32) -> io::Result<()> {
    let c = c_path(path)?;
    // SAFETY: `c` is a NUL-terminated path alive across the call.
    check(unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) })
}

/// renameat2(2) with RENAME_NOREPLACE: renames `from` to `to`, failing with EEXIST (never
/// replacing) when `to` exists.
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let (from, to) = (c_path(from)?, c_path(to)?);
    // SAFETY: two NUL-terminated paths alive across the call, relative to the working
    // directory (AT_FDCWD).
    check(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    })
}

/// flock(2) LOCK_EX | LOCK_NB: an exclusive lock held until the descriptor closes;
/// `ErrorKind::WouldBlock` when another holds it.
pub fn lock_exclusive_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: flock takes a descriptor (borrowed, so open) and flags.
    check(unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) })
}

/// memfd_create(2) with close-on-exec: an anonymous memory file.
pub fn memfd(name: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and alive across the call.
    owned(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) })
}

/// sendfile(2) of `count` bytes from the start of file `from` to socket `to`; the bytes sent.
pub fn sendfile_from_start(
    to: BorrowedFd<'_>,
    from: BorrowedFd<'_>,
    count: usize,
) -> io::Result<usize> {
    let mut off: libc::off_t = 0;
    // SAFETY: both descriptors are open (borrowed); `off` is a valid in/out offset, so the
    // file's own offset is neither read nor moved.
    len(unsafe { libc::sendfile(to.as_raw_fd(), from.as_raw_fd(), &mut off, count) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_rename_never_replaces_and_a_fifo_is_a_fifo() {
        use std::os::unix::fs::FileTypeExt;
        let dir = std::env::temp_dir().join(format!("tcptune-os-fs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        let e = rename_noreplace(&a, &b).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
        std::fs::remove_file(&b).unwrap();
        rename_noreplace(&a, &b).unwrap();
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "a");
        let f = dir.join("fifo");
        mkfifo(&f, 0o600).unwrap();
        assert!(std::fs::metadata(&f).unwrap().file_type().is_fifo());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_pipe_carries_bytes_and_reads_fill_to_capacity() {
        let (r, w) = pipe().unwrap();
        assert_eq!(write(w.as_fd(), b"hello").unwrap(), 5);
        let mut buf = Vec::with_capacity(16);
        assert_eq!(read_to_capacity(r.as_fd(), &mut buf).unwrap(), 5);
        assert_eq!(buf, b"hello");
    }
}
