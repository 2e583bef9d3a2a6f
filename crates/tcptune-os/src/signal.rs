//! Signals received: the one handler (it sets a flag the program polls) and a signalfd for
//! loops that wait on descriptors.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::process::Signal;

static CAUGHT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    CAUGHT.store(true, Ordering::SeqCst);
}

/// From now on each of `signals` only sets a flag that [`caught`] (and the returned flag)
/// reports, so the program can end what it is doing cleanly instead of dying half-done.
/// Interrupted system calls restart (glibc's `signal` installs BSD semantics).
pub fn catch(signals: &[Signal]) -> &'static AtomicBool {
    for s in signals {
        // SAFETY: the handler is async-signal-safe (one atomic store, no allocation, no lock)
        // and has the `extern "C" fn(c_int)` signature signal(2) expects; SIGKILL and SIGSTOP,
        // which cannot be caught, only make signal() fail, which changes nothing.
        unsafe {
            libc::signal(
                s.raw(),
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
    &CAUGHT
}

/// Whether a signal passed to [`catch`] has arrived.
pub fn caught() -> bool {
    CAUGHT.load(Ordering::SeqCst)
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (call before starting other threads so
/// they inherit the mask) and returns a non-blocking signalfd that becomes readable when one
/// arrives.
pub fn stop_signalfd() -> io::Result<OwnedFd> {
    // SAFETY: sigset_t is plain data and all-zero is a valid value; sigemptyset/sigaddset
    // initialise and fill this local set with valid signal numbers.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    };
    // SAFETY: `set` is an initialised sigset_t; the old mask is not asked for (null).
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: -1 asks for a new descriptor; `set` is valid for the call.
    crate::owned(unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) })
}
