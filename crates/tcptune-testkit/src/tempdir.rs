//! A test's scratch directory: created empty under the system's temporary directory with a
//! name unique to the test process and tag, and removed when the guard drops (also when the
//! test panics), so tests leave nothing behind.

use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A directory removed when dropped; derefs to its path.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new empty directory `tt-TAG-PID` (one left by an earlier process of that id goes).
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("tt-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", d.display()));
        TempDir(d)
    }

    /// The directory; it exists until the guard drops.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
