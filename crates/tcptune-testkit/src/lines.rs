//! Waiting for a child process to say something: its output lines arrive on a channel fed by
//! a reader thread, so a test waits for "listening" with a deadline instead of sleeping.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The lines `out` yields, as they come. The channel closes when `out` ends.
pub fn line_channel(out: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Why [`wait_for_line`] gave up, with the lines seen until then.
#[derive(Debug)]
pub enum NoLine {
    /// The output ended (the process exited or closed it).
    Ended(Vec<String>),
    /// The deadline passed.
    Timeout(Vec<String>),
}

/// Waits up to `within` for a line for which `wanted` is true; returns every line seen, that
/// one last.
pub fn wait_for_line(
    rx: &Receiver<String>,
    within: Duration,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<String>, NoLine> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => {
                let done = wanted(&l);
                seen.push(l);
                if done {
                    return Ok(seen);
                }
            }
            Err(RecvTimeoutError::Disconnected) => return Err(NoLine::Ended(seen)),
            Err(RecvTimeoutError::Timeout) => return Err(NoLine::Timeout(seen)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_line_or_says_the_output_ended() {
        let rx = line_channel(&b"starting\nlistening on 5201\nmore\n"[..]);
        let seen =
            wait_for_line(&rx, Duration::from_secs(5), |l| l.starts_with("listening")).unwrap();
        assert_eq!(seen, ["starting", "listening on 5201"]);
        match wait_for_line(&rx, Duration::from_secs(5), |l| l == "never") {
            Err(NoLine::Ended(rest)) => assert_eq!(rest, ["more"]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_silent_process_times_out() {
        let (_tx, rx) = mpsc::channel::<String>();
        let r = wait_for_line(&rx, Duration::from_millis(20), |_| true);
        assert!(matches!(r, Err(NoLine::Timeout(v)) if v.is_empty()));
    }
}
