//! poll(2), the one wrapper: descriptors borrowed for the call, a timeout with nanosecond
//! precision (ppoll) or none.

use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// One descriptor to wait on for input, borrowed for as long as the `PollFd` lives.
#[repr(transparent)]
pub struct PollFd<'fd> {
    raw: libc::pollfd,
    _fd: PhantomData<BorrowedFd<'fd>>,
}

impl<'fd> PollFd<'fd> {
    /// Waits for `fd` to become readable (POLLIN; hang-up and errors also wake it).
    pub fn readable(fd: BorrowedFd<'fd>) -> PollFd<'fd> {
        PollFd {
            raw: libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            _fd: PhantomData,
        }
    }

    /// Waits for `fd` to take more output (POLLOUT; hang-up and errors also wake it).
    pub fn writable(fd: BorrowedFd<'fd>) -> PollFd<'fd> {
        PollFd {
            raw: libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            },
            _fd: PhantomData,
        }
    }

    /// Whether the last [`poll`] reported anything for this descriptor.
    pub fn ready(&self) -> bool {
        self.raw.revents != 0
    }
}

/// Waits until one of `fds` is ready or `timeout` passes (None: no limit). Returns how many
/// are ready (0 on timeout). A signal ends the wait with `ErrorKind::Interrupted`.
pub fn poll(fds: &mut [PollFd<'_>], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
    // SAFETY: PollFd is repr(transparent) over libc::pollfd, so `fds` is a valid array of
    // fds.len() pollfds the kernel may write revents into; each fd is borrowed for the call
    // (PhantomData<BorrowedFd>), so it stays open. `tsp` is null or points to `ts`, alive
    // across the call; a null sigmask keeps the thread's mask, as poll(2) does.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr().cast::<libc::pollfd>(),
            fds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

/// Waits until `fd` is readable or `timeout` passes; true if readable. A signal ends the wait
/// early with false.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    match poll(&mut [PollFd::readable(fd)], Some(timeout)) {
        Ok(n) => Ok(n > 0),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}

/// An epoll set that is readable when any descriptor added to it is readable: many
/// descriptors waited on through one.
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// An empty set (close-on-exec).
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes flags and returns a new descriptor or -1.
        let fd = crate::owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll { fd })
    }

    fn ctl(&self, op: libc::c_int, fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd.as_raw_fd() as u64,
        };
        // SAFETY: our epoll descriptor, a borrowed (so open) descriptor and a valid event,
        // alive across the call.
        crate::check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd.as_raw_fd(), &mut ev) })
    }

    /// Adds `fd` (waited on for input). The set holds the open file, not the borrow: the
    /// kernel drops it from the set when its last descriptor closes.
    pub fn add(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd)
    }

    /// Removes `fd`.
    pub fn remove(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd)
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_pipe_is_readable_once_written() {
        let (r, w) = crate::fs::pipe().unwrap();
        let mut w = std::fs::File::from(w);
        assert!(!wait_readable(r.as_fd(), Duration::from_millis(1)).unwrap());
        w.write_all(b"x").unwrap();
        let mut fds = [PollFd::readable(r.as_fd())];
        assert_eq!(poll(&mut fds, None).unwrap(), 1);
        assert!(fds[0].ready());
        let set = Epoll::new().unwrap();
        let (r2, w2) = crate::fs::pipe().unwrap();
        set.add(r2.as_fd()).unwrap();
        assert!(!wait_readable(set.as_fd(), Duration::ZERO).unwrap());
        crate::fs::write(w2.as_fd(), b"y").unwrap();
        assert!(wait_readable(set.as_fd(), Duration::ZERO).unwrap());
        set.remove(r2.as_fd()).unwrap();
        assert!(!wait_readable(set.as_fd(), Duration::ZERO).unwrap());
    }
}
