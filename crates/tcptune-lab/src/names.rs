//! Names: everything a lab makes is named after it (namespaces, devices, state directory,
//! addresses), so any process can find it again after a `kill -9`. Pure functions, no I/O.

use std::path::{Path, PathBuf};

use crate::LabError;

/// The hosts of a lab.
pub const HOSTS: [&str; 2] = ["client", "server"];

/// Where lab state lives (tmpfs: gone after a reboot, like the namespaces).
pub const RUN_DIR: &str = "/run/tcptune";
/// Prefix of every namespace the lab makes.
pub const NS_PREFIX: &str = "tcptune-";
/// The host's interface (a TUN device the emulator holds).
pub const DEV: &str = "eth0";

/// Host addresses: the benchmarking ranges (RFC 2544, RFC 5180); namespaces isolate labs, so
/// every lab uses the same ones.
pub fn addresses(host: &str) -> (&'static str, &'static str) {
    if host == "client" {
        ("198.18.0.1", "2001:2::1")
    } else {
        ("198.18.0.2", "2001:2::2")
    }
}

/// The other host of a lab: `client` ↔ `server`.
pub fn peer(host: &str) -> &'static str {
    if host == "client" {
        "server"
    } else {
        "client"
    }
}

/// The namespace of `host` in lab `lab`: `tcptune-LAB-HOST`.
pub fn netns_name(lab: &str, host: &str) -> String {
    format!("{NS_PREFIX}{lab}-{host}")
}

/// The lab's state directory under [`RUN_DIR`].
pub fn lab_dir(lab: &str) -> PathBuf {
    Path::new(RUN_DIR).join(lab)
}

/// Lab names: short, lower-case, safe in namespace, file and interface names.
pub fn check_name(name: &str) -> Result<(), LabError> {
    let ok = !name.is_empty()
        && name.len() <= 24
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(LabError::Input(format!(
            "lab name '{name}' must be 1 to 24 lower-case letters, digits or '-', starting with \
             a letter or digit"
        )))
    }
}

/// `/etc/netns/<namespace>/hosts` of every host: the lab's names resolve inside it.
pub fn hosts_file() -> String {
    let mut s = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost\n");
    for h in HOSTS {
        let (v4, v6) = addresses(h);
        s.push_str(&format!("{v4}\t{h}\n{v6}\t{h}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_lab() {
        assert_eq!(netns_name("demo", "client"), "tcptune-demo-client");
        assert_eq!(lab_dir("demo"), Path::new("/run/tcptune/demo"));
        assert_eq!(peer("client"), "server");
        assert_eq!(addresses(peer("client")).0, "198.18.0.2");
        check_name("a-1").unwrap();
        for bad in ["", "A", "-a", "a_b", "abcdefghijklmnopqrstuvwxy"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(hosts_file().contains("198.18.0.1\tclient\n"));
    }
}
