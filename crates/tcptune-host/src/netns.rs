//! Running a piece of code inside a named network namespace (`ip netns` names, files under
//! `/run/netns`). setns(CLONE_NEWNET) changes only the calling thread, so the code runs on a
//! short-lived thread and the rest of the process stays in its own namespace.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("network namespace name '{0}' is not valid; give a name as `ip netns list` shows it")]
    BadName(String),
    #[error("network namespace '{0}' does not exist; `ip netns list` shows the ones that do")]
    NotFound(String),
    #[error("entering network namespace '{0}' needs root (CAP_SYS_ADMIN); run with sudo")]
    Permission(String),
    #[error("cannot enter network namespace '{name}': {source}")]
    Other {
        name: String,
        source: std::io::Error,
    },
}

/// The file that names a namespace, after checking the name cannot escape /run/netns.
pub fn path(name: &str) -> Result<PathBuf, NetnsError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(NetnsError::BadName(name.into()));
    }
    Ok(PathBuf::from("/run/netns").join(name))
}

/// Runs `f` on a thread inside namespace `name` and returns its result.
pub fn in_netns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> Result<T, NetnsError> {
    let p = path(name)?;
    let file = File::open(&p).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => NetnsError::NotFound(name.into()),
        std::io::ErrorKind::PermissionDenied => NetnsError::Permission(name.into()),
        _ => NetnsError::Other {
            name: name.into(),
            source: e,
        },
    })?;
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: the fd is valid for the life of `file`; setns affects only this thread.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                let e = std::io::Error::last_os_error();
                return Err(match e.raw_os_error() {
                    Some(libc::EPERM) => NetnsError::Permission(name.into()),
                    _ => NetnsError::Other {
                        name: name.into(),
                        source: e,
                    },
                });
            }
            Ok(f())
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape_run_netns() {
        assert!(matches!(path("../etc"), Err(NetnsError::BadName(_))));
        assert!(matches!(path(""), Err(NetnsError::BadName(_))));
        assert!(matches!(
            in_netns("tt-does-not-exist-xyz", || ()),
            Err(NetnsError::NotFound(_))
        ));
    }

    #[test]
    fn code_runs_inside_the_namespace_and_the_caller_stays_outside() {
        if !tcptune_testkit::privileged("code_runs_inside_the_namespace") {
            return;
        }
        let ns = tcptune_testkit::Netns::new("hostns");
        let inode = |p: &str| {
            std::fs::metadata(p)
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .unwrap()
        };
        let outside = inode("/proc/thread-self/ns/net");
        let inside = in_netns(ns.name(), || inode("/proc/thread-self/ns/net")).unwrap();
        assert_ne!(inside, outside);
        assert_eq!(inside, inode(&format!("/run/netns/{}", ns.name())));
        assert_eq!(inode("/proc/thread-self/ns/net"), outside);
    }
}
