//! Which process owns a socket: scans `/proc/*/fd` for `socket:[INODE]` links. This reads every
//! process's descriptor table, so it runs only when asked (`--processes`), and only finds
//! processes we may inspect (all of them as root).

use std::collections::{HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A process holding a socket open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Owner {
    /// The process id (in the PID namespace of `/proc`).
    pub pid: u32,
    /// The process name (`/proc/PID/comm`).
    pub comm: String,
}

/// Finds the owners of the given socket inodes (the first process found for each).
pub fn owners(inodes: &HashSet<u32>) -> HashMap<u32, Owner> {
    let mut found = HashMap::new();
    if inodes.is_empty() {
        return found;
    }
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue; // gone, or not ours to read
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some(inode) = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u32>().ok())
            else {
                continue;
            };
            if inodes.contains(&inode) && !found.contains_key(&inode) {
                let comm = std::fs::read_to_string(p.path().join("comm"))
                    .map(|c| c.trim_end().to_string())
                    .unwrap_or_default();
                found.insert(inode, Owner { pid, comm });
            }
        }
        if found.len() == inodes.len() {
            break;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn finds_the_owner_of_our_own_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // The inode of a socket fd is what /proc/self/fd/N links to.
        let inode = std::fs::metadata(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&l)
        ))
        .unwrap()
        .ino() as u32;
        let got = owners(&HashSet::from([inode]));
        assert_eq!(got[&inode].pid, std::process::id());
    }
}
