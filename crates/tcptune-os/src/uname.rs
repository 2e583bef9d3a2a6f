//! uname(2): the running kernel's names. The one place the kernel's release is read; the
//! `KernelVersion` of it is built by `tcptune_kernel::sys::kernel_version`.

use std::io;

/// The fields of `struct utsname` tcptune reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uname {
    /// `uname -s`, normally `Linux`.
    pub sysname: String,
    /// `uname -n`: the host name (in the calling thread's UTS namespace).
    pub nodename: String,
    /// `uname -r`, e.g. `6.18.0-1-amd64`.
    pub release: String,
    /// `uname -v`: the build string (number, date, preempt model).
    pub version: String,
    /// `uname -m`, e.g. `x86_64`.
    pub machine: String,
}

/// uname(2).
pub fn uname() -> io::Result<Uname> {
    // SAFETY: utsname is plain bytes (arrays of c_char), for which all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname; uname fills it and NUL-terminates each field.
    crate::check(unsafe { libc::uname(&mut u) })?;
    let field = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    Ok(Uname {
        sysname: field(&u.sysname),
        nodename: field(&u.nodename),
        release: field(&u.release),
        version: field(&u.version),
        machine: field(&u.machine),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_release_is_the_one_proc_shows() {
        let u = super::uname().unwrap();
        assert_eq!(u.sysname, "Linux");
        let proc = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(u.release, proc.trim());
    }
}
