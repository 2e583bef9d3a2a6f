//! What every data-phase thread shares, sending or receiving: the test clock's reading, the
//! mark each stream notes its byte count at, and how often a blocked call looks for a stop.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tcptune_model::Dur;

/// How often blocking socket calls return to check for a stop request.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// Time since `clock`, the test's origin.
pub(crate) fn now(clock: Instant) -> Dur {
    Dur::from_nanos(clock.elapsed().as_nanos().min(u64::MAX as u128) as u64)
}

/// A socket call that returned without data for a reason that is no failure (a timeout, a
/// full buffer, a signal).
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// A stream thread's view of the mark: notes its byte count once the clock passes it.
pub(crate) struct Marker {
    pub(crate) clock: Instant,
    pub(crate) mark: Arc<AtomicU64>,
    pub(crate) at_mark: Arc<AtomicU64>,
}

impl Marker {
    pub(crate) fn check(&self, bytes: u64) {
        let mark = self.mark.load(Ordering::Relaxed);
        if mark != u64::MAX
            && self.at_mark.load(Ordering::Relaxed) == u64::MAX
            && now(self.clock).nanos() >= mark
        {
            self.at_mark.store(bytes, Ordering::Relaxed);
        }
    }
}
