//! Reading a file the user named, safely: only a regular file (a FIFO, a device such as
//! `/dev/zero` or a directory is refused before anything is read, and opening never blocks),
//! and at most a stated number of bytes, so a wrong path costs one sentence, not memory or a
//! hang. Every command that reads a user's file goes through [`read_regular_limited`].

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file could not be read. Each message names what the file was for, its path and the fix.
/// The I/O cause is part of the message, not chained as a `source` too (`{:#}` would print it
/// twice).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Opening or reading failed.
    #[error("cannot read the {what} {path}: {cause}")]
    Io {
        /// What the file was for, e.g. "capture" or "experiment spec".
        what: String,
        /// The path as the user gave it.
        path: String,
        /// The error from the OS.
        cause: io::Error,
    },
    /// A FIFO, device, directory or socket: refused before reading.
    #[error("the {what} {path} is {kind}, not a regular file; give the path of a file")]
    NotRegular {
        /// What the file was for.
        what: String,
        /// The path as the user gave it.
        path: String,
        /// What it is instead ("a directory", "a FIFO", …).
        kind: &'static str,
    },
    /// Longer than the caller's limit.
    #[error("the {what} {path} is larger than {limit} bytes, the most tcptune reads; give the right file")]
    TooLarge {
        /// What the file was for.
        what: String,
        /// The path as the user gave it.
        path: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// Asked for as text, but not UTF-8.
    #[error("the {what} {path} is not UTF-8 text")]
    NotText {
        /// What the file was for.
        what: String,
        /// The path as the user gave it.
        path: String,
    },
}

impl FileError {
    /// The file does not exist (callers that treat absence as a state of their own).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { cause, .. } if cause.kind() == io::ErrorKind::NotFound)
    }
}

fn kind_of(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// Reads the regular file at `path`, refusing anything else and anything over `max_bytes`.
/// `what` names the file's role in messages ("snapshot", "experiment spec").
pub fn read_regular_limited(path: &Path, max_bytes: u64, what: &str) -> Result<Vec<u8>, FileError> {
    let io_err = |cause| FileError::Io {
        what: what.into(),
        path: path.display().to_string(),
        cause,
    };
    // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting; it has
    // no effect on reading a regular file. The type is checked on the open descriptor, so the
    // path cannot change between check and read.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io_err)?;
    let ft = f.metadata().map_err(io_err)?.file_type();
    if !ft.is_file() {
        return Err(FileError::NotRegular {
            what: what.into(),
            path: path.display().to_string(),
            kind: kind_of(&ft),
        });
    }
    let mut buf = Vec::new();
    // One byte beyond the limit tells "exactly at the limit" from "over it" (the size from
    // fstat may be stale for a growing file, so the read itself is bounded).
    Read::take(&f as &File, max_bytes.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(io_err)?;
    if buf.len() as u64 > max_bytes {
        return Err(FileError::TooLarge {
            what: what.into(),
            path: path.display().to_string(),
            limit: max_bytes,
        });
    }
    Ok(buf)
}

/// [`read_regular_limited`] for text files.
pub fn read_text_limited(path: &Path, max_bytes: u64, what: &str) -> Result<String, FileError> {
    String::from_utf8(read_regular_limited(path, max_bytes, what)?).map_err(|_| {
        FileError::NotText {
            what: what.into(),
            path: path.display().to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of this test's files, removed when dropped (also on panic).
    struct TmpDir(std::path::PathBuf);

    impl TmpDir {
        fn new(tag: &str) -> TmpDir {
            let d = std::env::temp_dir().join(format!("tcptune-file-{}-{tag}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap();
            TmpDir(d)
        }
        fn file(&self, name: &str) -> std::path::PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for TmpDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_regular_file_within_the_limit_is_read_whole() {
        let dir = TmpDir::new("ok");
        let p = dir.file("ok");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_regular_limited(&p, 10, "test").unwrap(), b"0123456789");
        assert_eq!(read_text_limited(&p, 100, "test").unwrap(), "0123456789");
        let e = read_regular_limited(&p, 9, "test file").unwrap_err();
        assert!(matches!(e, FileError::TooLarge { limit: 9, .. }), "{e}");
        assert!(e.to_string().contains("larger than 9 bytes"), "{e}");
        std::fs::write(&p, [0xffu8, 0xfe]).unwrap();
        assert!(matches!(
            read_text_limited(&p, 100, "test"),
            Err(FileError::NotText { .. })
        ));
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_without_reading_or_waiting() {
        let e = read_regular_limited(Path::new("/dev/zero"), 1 << 20, "snapshot").unwrap_err();
        assert!(
            e.to_string()
                .contains("snapshot /dev/zero is a character device, not a regular file"),
            "{e}"
        );
        let e = read_regular_limited(Path::new("/"), 1 << 20, "spec").unwrap_err();
        assert!(
            matches!(
                e,
                FileError::NotRegular {
                    kind: "a directory",
                    ..
                }
            ),
            "{e}"
        );
        // A FIFO with no writer: an ordinary open would block here forever.
        let dir = TmpDir::new("fifo");
        let p = dir.file("fifo");
        let _ = std::fs::remove_file(&p);
        tcptune_os::fs::mkfifo(&p, 0o600).unwrap();
        let e = read_regular_limited(&p, 1 << 20, "snapshot").unwrap_err();
        assert!(
            matches!(e, FileError::NotRegular { kind: "a FIFO", .. }),
            "{e}"
        );
        let _ = std::fs::remove_file(&p);
        let e = read_regular_limited(&dir.file("absent"), 10, "snapshot").unwrap_err();
        assert!(e.is_not_found(), "{e}");
    }
}
