//! `--web-config FILE` re-read when it changes, as exporter-toolkit re-reads its file for every
//! request (and its certificates for every handshake): a changed password or a renewed
//! certificate takes effect without a restart. Each request costs a `stat` of the file and of
//! the files it names (certificate, key, client CA), not a parse: only a change (modification
//! or change time, size, or a new inode, as when a file is replaced by a rename) reads them
//! again. A new file that is refused (its line and why) leaves the previous configuration in
//! force, and is reported once; so is one that would turn TLS on or off, which the listener
//! decided at start.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::webconfig::{WebConfig, WebConfigError};

/// What tells a file's new version from the one read: (device, inode, size, modification and
/// change time in ns); `None` for a file that cannot be read.
type FileStamp = Option<(u64, u64, u64, i128, i128)>;

fn stamp_of(path: &Path) -> FileStamp {
    let m = std::fs::metadata(path).ok()?;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some((
        m.dev(),
        m.ino(),
        m.len(),
        ns(m.mtime(), m.mtime_nsec()),
        ns(m.ctime(), m.ctime_nsec()),
    ))
}

/// Where changes are reported (the command prints them on stderr).
pub type Report = Box<dyn Fn(&str) + Send + Sync>;

/// A web configuration file, re-read when it or a file it names changes.
pub struct WebConfigFile {
    path: PathBuf,
    report: Report,
    state: Mutex<Loaded>,
}

struct Loaded {
    /// The stamps of the file and the files it named when last looked at (read or refused).
    stamps: Vec<FileStamp>,
    /// The files the configuration in force named.
    files: Vec<PathBuf>,
    cfg: Arc<WebConfig>,
}

impl WebConfigFile {
    /// Reads the file at `path`; a bad one is refused here as at start.
    pub fn load(path: &Path, report: Report) -> Result<WebConfigFile, WebConfigError> {
        let before = stamp_of(path);
        let cfg = WebConfig::load(path)?;
        let files = cfg.files().to_vec();
        let stamps = std::iter::once(before)
            .chain(files.iter().map(|f| stamp_of(f)))
            .collect();
        Ok(WebConfigFile {
            path: path.to_path_buf(),
            report,
            state: Mutex::new(Loaded {
                stamps,
                files,
                cfg: Arc::new(cfg),
            }),
        })
    }

    /// The configuration in force: the file's new version when it changed and is good.
    pub fn current(&self) -> Arc<WebConfig> {
        // Every assignment below is of a whole value, so a holder that panicked left nothing
        // half-written.
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now: Vec<FileStamp> = std::iter::once(stamp_of(&self.path))
            .chain(st.files.iter().map(|f| stamp_of(f)))
            .collect();
        if now == st.stamps {
            return st.cfg.clone();
        }
        // Looked at once per change, whatever the outcome, so a refusal is reported once.
        st.stamps = now;
        let path = self.path.display();
        match WebConfig::load(&self.path) {
            Ok(new) if new.serves_tls() != st.cfg.serves_tls() => (self.report)(&format!(
                "the web config {path} changed but was refused: turning TLS {} needs a restart; the previous configuration stays in force",
                if new.serves_tls() { "on" } else { "off" }
            )),
            Ok(new) => {
                // Stamps of the files the new one names, as they were just read.
                st.files = new.files().to_vec();
                st.stamps.truncate(1);
                let named: Vec<FileStamp> = st.files.iter().map(|f| stamp_of(f)).collect();
                st.stamps.extend(named);
                st.cfg = Arc::new(new);
                (self.report)(&format!("the web config {path} changed: reloaded"));
            }
            Err(e) => (self.report)(&format!(
                "the web config {path} changed but was refused ({e}); the previous configuration stays in force"
            )),
        }
        st.cfg.clone()
    }
}

/// The access rules a server follows: fixed at start, or a file re-read when it changes.
pub enum Access {
    /// Rules given once (no file, or a page that does not reload).
    Fixed(Arc<WebConfig>),
    /// A `--web-config` file, re-read when it or a file it names changes.
    File(WebConfigFile),
}

impl Access {
    /// The configuration in force now.
    pub fn current(&self) -> Arc<WebConfig> {
        match self {
            Access::Fixed(c) => c.clone(),
            Access::File(f) => f.current(),
        }
    }
}

impl From<WebConfig> for Access {
    fn from(c: WebConfig) -> Access {
        Access::Fixed(Arc::new(c))
    }
}

impl From<WebConfigFile> for Access {
    fn from(f: WebConfigFile) -> Access {
        Access::File(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replaces `path`'s content the way configuration tools do: a new file renamed over it.
    fn replace(path: &Path, text: &str) {
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    #[test]
    fn a_changed_file_is_reloaded_and_a_broken_one_refused_with_its_line() {
        let dir = tcptune_testkit::TempDir::new("tt-h6-reload");
        let path = dir.path().join("web.yml");
        let (alice, bob) = (
            bcrypt::hash("s3cret", 4).unwrap(),
            bcrypt::hash("hunter2", 4).unwrap(),
        );
        replace(&path, &format!("basic_auth_users:\n  alice: '{alice}'\n"));
        let said = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = said.clone();
        let f = WebConfigFile::load(
            &path,
            Box::new(move |m| log.lock().unwrap().push(m.to_string())),
        )
        .unwrap();
        // "alice:s3cret", "bob:hunter2"
        let (a, b) = (
            Some("Basic YWxpY2U6czNjcmV0"),
            Some("Basic Ym9iOmh1bnRlcjI="),
        );
        let first = f.current();
        assert!(first.allows(a) && !first.allows(b));
        assert!(
            Arc::ptr_eq(&first, &f.current()),
            "unchanged: not read again"
        );
        assert!(said.lock().unwrap().is_empty());

        replace(&path, &format!("basic_auth_users:\n  bob: '{bob}'\n"));
        let second = f.current();
        assert!(!second.allows(a) && second.allows(b));
        assert_eq!(
            said.lock().unwrap().last().unwrap(),
            &format!("the web config {} changed: reloaded", path.display())
        );

        replace(
            &path,
            &format!("basic_auth_users:\n  bob: '{bob}'\n  eve: plain\n"),
        );
        let kept = f.current();
        assert!(Arc::ptr_eq(&kept, &second), "the previous one stays");
        let refusal = said.lock().unwrap().last().unwrap().clone();
        assert!(
            refusal.contains("(web config line 3: the password of 'eve' is not a bcrypt hash"),
            "{refusal}"
        );
        assert!(refusal.ends_with("the previous configuration stays in force"));
        f.current();
        assert_eq!(said.lock().unwrap().len(), 2, "a refusal is reported once");

        // A file gone is a change too, refused the same way.
        std::fs::remove_file(&path).unwrap();
        assert!(f.current().allows(b));
        assert!(said.lock().unwrap()[2].contains("refused"), "{:?}", said);
    }
}
