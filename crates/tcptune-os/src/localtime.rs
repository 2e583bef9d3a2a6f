//! Local time as text: localtime_r(3) and strftime(3), for output that prints the time the way
//! the C tools do (`iperf3 --timestamps`, whose default format is `%c `).

use std::ffi::CString;
use std::io;

/// `unix_secs` in this host's time zone, formatted by strftime(3) with `format`. A format with
/// a NUL byte, or one whose text exceeds 1 KiB, is an `InvalidInput` error.
pub fn strftime(format: &str, unix_secs: i64) -> io::Result<String> {
    let fmt = CString::new(format)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the format"))?;
    let t: libc::time_t = unix_secs as libc::time_t;
    // SAFETY: an all-zero tm is a valid value of this plain C struct; localtime_r fills it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers point to live locals of the right types for the call.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return Err(io::Error::last_os_error());
    }
    if format.is_empty() {
        return Ok(String::new());
    }
    let mut buf = vec![0u8; 1024];
    // SAFETY: `buf` has buf.len() writable bytes, `fmt` is NUL-terminated and `tm` was filled
    // by localtime_r; strftime writes at most buf.len() bytes including the NUL.
    let n = unsafe {
        libc::strftime(
            buf.as_mut_ptr().cast::<libc::c_char>(),
            buf.len(),
            fmt.as_ptr(),
            &tm,
        )
    };
    if n == 0 {
        // 0 is also the length of a format that produces nothing (e.g. "%p" in some locales).
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the formatted time is empty or longer than 1 KiB",
        ));
    }
    buf.truncate(n);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_strftime() {
        // 2001-09-09 01:46:40 UTC; the year does not depend on the time zone at this instant
        // (±14 h around it is still 2001).
        assert_eq!(strftime("%Y", 1_000_000_000).unwrap(), "2001");
        assert_eq!(strftime("x%%y", 0).unwrap(), "x%y");
        assert!(strftime("a\0b", 0).is_err());
        assert_eq!(strftime("", 0).unwrap(), "");
    }
}
