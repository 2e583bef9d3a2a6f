//! Terminals: the window's width (TIOCGWINSZ) and key-at-a-time input (termios without
//! ICANON and ECHO), restored when the guard drops. `watch` uses them to fit its frames to the
//! screen and to quit on `q`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The terminal's width in columns, `None` when `fd` is not a terminal or reports 0 (a
/// pseudo-terminal nobody sized).
pub fn columns(fd: BorrowedFd<'_>) -> Option<u16> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `struct winsize` through the pointer, which points to `ws`,
    // alive and writable across the call; `fd` is borrowed, so it is open.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0).then_some(ws.ws_col)
}

/// A terminal switched to key-at-a-time input without echo (signals still work: Ctrl-C is
/// still SIGINT); the settings it found are put back on drop.
pub struct KeyInput {
    fd: libc::c_int,
    saved: libc::termios,
}

/// Switches the terminal on `fd` to key-at-a-time input. The caller keeps `fd` open while the
/// guard lives (stdin, in practice).
pub fn key_input(fd: BorrowedFd<'_>) -> io::Result<KeyInput> {
    // SAFETY: an all-zero termios is a valid value of this plain C struct; tcgetattr fills it.
    let mut saved: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `saved` is a valid, writable termios for the call; `fd` is borrowed, so open.
    crate::check(unsafe { libc::tcgetattr(fd.as_raw_fd(), &mut saved) })?;
    let mut raw = saved;
    raw.c_lflag &= !(libc::ICANON | libc::ECHO);
    raw.c_cc[libc::VMIN] = 0;
    raw.c_cc[libc::VTIME] = 0;
    // SAFETY: `raw` is a valid termios read above and changed in plain fields; `fd` is open.
    crate::check(unsafe { libc::tcsetattr(fd.as_raw_fd(), libc::TCSANOW, &raw) })?;
    Ok(KeyInput {
        fd: fd.as_raw_fd(),
        saved,
    })
}

impl Drop for KeyInput {
    fn drop(&mut self) {
        // SAFETY: `saved` is the termios tcgetattr returned for this descriptor, which the
        // caller keeps open while the guard lives (see `key_input`). A failure leaves the
        // terminal as it is; there is nothing better to do while dropping.
        unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved) };
    }
}
