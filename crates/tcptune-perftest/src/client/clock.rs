//! The test's schedule, sans-IO: when an interval ends, when `-O`'s omitted seconds end, when
//! the time is up, and what each boundary means for the reports. The driver feeds it the
//! boundaries it has passed (seconds from the data phase's start) and does what it answers;
//! the same schedule runs TCP and UDP tests.
//!
//! With `-O`, the first seconds are reported as omitted, then counting starts again from zero
//! (iperf3 resets its streams' start times and byte counts when omitting ends): interval
//! times are seconds from the count's origin, 0 or the omit's end.

/// What a boundary asks of the driver, in order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Report the interval from `start` to `end` (seconds from the count's origin), from the
    /// counters at the last report to those now; `omitted` while `-O` lasts.
    Report {
        /// Where the interval starts, seconds.
        start: f64,
        /// Where it ends, seconds.
        end: f64,
        /// Whether it falls in `-O`'s seconds.
        omitted: bool,
    },
    /// `-O`'s seconds are over: counting starts again from the counters now.
    OmitEnd,
    /// The test's time is up.
    Done,
}

/// The schedule of one test.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Interval reports every this many seconds; none = no interval reports.
    period: Option<f64>,
    /// `-O`, seconds.
    omit: f64,
    omitting: bool,
    /// Where the current count started: 0, or the end of the omitted seconds.
    origin: f64,
    /// The next interval's end, from `origin`.
    next_tick: Option<f64>,
    /// The last report's end, from `origin`.
    prev_at: f64,
    /// When the time is up (`-t`, after `-O`); none for a byte count or no end.
    end_at: Option<f64>,
    /// `-t 0` without a byte count: no end; the test runs until interrupted, as iperf3's.
    forever: bool,
}

impl Schedule {
    /// The schedule of a test reporting every `period` seconds, omitting `omit_s` seconds and
    /// lasting `time_s` seconds after them, or until its bytes are moved (`byte_limited`).
    pub fn new(period: Option<f64>, omit_s: u32, time_s: u32, byte_limited: bool) -> Schedule {
        let omit = omit_s as f64;
        let forever = !byte_limited && time_s == 0;
        Schedule {
            period,
            omit,
            omitting: omit_s > 0,
            origin: 0.0,
            next_tick: period,
            prev_at: 0.0,
            end_at: (!byte_limited && !forever).then_some(omit + time_s as f64),
            forever,
        }
    }

    /// The next boundary, seconds from the data phase's start: an interval's end, the omit's
    /// end or the test's end, whichever comes first. A transport notes its counters there.
    pub fn next_boundary(&self) -> Option<f64> {
        [
            self.omitting.then_some(self.omit),
            self.next_tick.map(|t| self.origin + t),
            self.end_at,
        ]
        .into_iter()
        .flatten()
        .reduce(f64::min)
    }

    /// The boundary `b` has passed, and the counters read stand for time `t` (the boundary
    /// itself where the transport noted them there, else the moment they were read).
    pub fn at_boundary(&mut self, b: f64, t: f64) -> Vec<Step> {
        let mut out = Vec::new();
        let at_tick = self
            .next_tick
            .is_some_and(|x| (self.origin + x - b).abs() < 1e-9);
        if self.omitting && b >= self.omit {
            // What moved since the last report is still omitted.
            self.report_rest(t, true, &mut out);
            self.omitting = false;
            self.origin = self.omit;
            self.prev_at = 0.0;
            self.next_tick = self.period;
            out.push(Step::OmitEnd);
        } else if at_tick {
            out.push(self.report(t, self.omitting));
            self.next_tick = self.next_tick.zip(self.period).map(|(t, i)| t + i);
        }
        if self.end_at.is_some_and(|e| b >= e) {
            // A last, partial interval (the time is not a multiple of -i).
            self.report_rest(t, false, &mut out);
            out.push(Step::Done);
        }
        out
    }

    fn report(&mut self, t: f64, omitted: bool) -> Step {
        let start = self.prev_at;
        self.prev_at = t - self.origin;
        Step::Report {
            start,
            end: self.prev_at,
            omitted,
        }
    }

    /// Reports what is left since the last report, if anything (a millisecond or more).
    fn report_rest(&mut self, t: f64, omitted: bool, out: &mut Vec<Step>) {
        if self.period.is_some() && t - self.origin - self.prev_at > 1e-3 {
            out.push(self.report(t, omitted));
        }
    }

    /// True while the test ends when its bytes are moved (a byte or block count, after any
    /// omitted seconds).
    pub fn awaits_bytes(&self) -> bool {
        self.end_at.is_none() && !self.omitting && !self.forever
    }

    /// The bytes were all moved at `now`: the last interval, from the last report's end.
    pub fn last_interval(&mut self, now: f64) -> (f64, f64) {
        let span = (self.prev_at, now - self.origin);
        self.prev_at = span.1;
        span
    }

    /// Whether the last interval `span` is reported: never without interval reports, and
    /// iperf3 drops one shorter than a tenth of the period that moved nothing (`moved_any`).
    pub fn keeps_last(&self, span: (f64, f64), moved_any: bool) -> bool {
        let short = self.period.is_some_and(|i| span.1 - span.0 < 0.1 * i);
        self.period.is_some() && (moved_any || !short)
    }

    /// The test's time after the omitted seconds at `now`.
    pub fn counted(&self, now: f64) -> f64 {
        now - self.origin
    }

    /// How long the driver may wait before `now` passes the next boundary (at most 0.1 s, so
    /// it checks for an interruption and the bytes' end that often).
    pub fn wait(&self, now: f64) -> f64 {
        self.next_boundary()
            .map(|b| b - now)
            .unwrap_or(0.1)
            .clamp(0.0, 0.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a schedule to its end as the driver does, with every boundary passed on time.
    fn run(mut s: Schedule) -> Vec<Step> {
        let mut out = Vec::new();
        while let Some(b) = s.next_boundary() {
            let steps = s.at_boundary(b, b);
            let done = steps.contains(&Step::Done);
            out.extend(steps);
            if done {
                break;
            }
        }
        out
    }

    fn report(start: f64, end: f64, omitted: bool) -> Step {
        Step::Report {
            start,
            end,
            omitted,
        }
    }

    #[test]
    fn a_timed_test_reports_every_period_and_a_last_partial_interval() {
        let s = Schedule::new(Some(1.0), 0, 3, false);
        assert_eq!(
            run(s),
            [
                report(0.0, 1.0, false),
                report(1.0, 2.0, false),
                report(2.0, 3.0, false),
                Step::Done
            ]
        );
        // -i 0.7 -t 2: 0.7, 1.4, then the 0.6 s left.
        let steps = run(Schedule::new(Some(0.7), 0, 2, false));
        let ends: Vec<f64> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Report { end, .. } => Some(*end),
                _ => None,
            })
            .collect();
        assert_eq!(ends.len(), 3);
        assert!(
            (ends[1] - 1.4).abs() < 1e-9 && (ends[2] - 2.0).abs() < 1e-9,
            "{ends:?}"
        );
    }

    #[test]
    fn omitted_seconds_are_reported_as_such_and_the_count_starts_again() {
        let s = Schedule::new(Some(1.0), 2, 2, false);
        assert_eq!(
            run(s),
            [
                report(0.0, 1.0, true),
                report(1.0, 2.0, true),
                Step::OmitEnd,
                report(0.0, 1.0, false),
                report(1.0, 2.0, false),
                Step::Done
            ]
        );
        // Without interval reports the omit still ends, and the test after it.
        let mut s = Schedule::new(None, 1, 2, false);
        assert_eq!(s.next_boundary(), Some(1.0));
        assert_eq!(s.at_boundary(1.0, 1.0), [Step::OmitEnd]);
        assert_eq!(s.next_boundary(), Some(3.0));
        assert_eq!(s.at_boundary(3.0, 3.0), [Step::Done]);
        assert_eq!(s.counted(3.2), 3.2 - 1.0);
    }

    #[test]
    fn counters_read_late_stand_for_their_own_time() {
        // A transport that cannot note its counters at the boundary reads them at 1.004 s.
        let mut s = Schedule::new(Some(1.0), 0, 2, false);
        assert_eq!(s.at_boundary(1.0, 1.004), [report(0.0, 1.004, false)]);
        assert_eq!(s.next_boundary(), Some(2.0));
        assert_eq!(
            s.at_boundary(2.0, 2.002),
            [report(1.004, 2.002, false), Step::Done]
        );
    }

    #[test]
    fn a_byte_count_ends_when_the_bytes_are_moved_and_a_last_empty_sliver_is_dropped() {
        let mut s = Schedule::new(Some(1.0), 0, 0, true);
        assert!(s.awaits_bytes());
        assert_eq!(s.next_boundary(), Some(1.0));
        assert_eq!(s.at_boundary(1.0, 1.0), [report(0.0, 1.0, false)]);
        // Done 0.05 s after the last report, having moved nothing since: no last interval.
        let last = s.clone().last_interval(1.05);
        assert!((last.0 - 1.0).abs() < 1e-12 && (last.1 - 1.05).abs() < 1e-12);
        assert!(!s.keeps_last(last, false));
        // Something moved: reported, however short.
        assert!(s.keeps_last(last, true));
        // Long enough: reported either way.
        assert_eq!(s.last_interval(1.5), (1.0, 1.5));
        assert!(s.keeps_last((1.0, 1.5), false));
        // No interval reports: nothing to report.
        let quiet = Schedule::new(None, 0, 0, true);
        assert!(!quiet.keeps_last((0.0, 2.0), true));
        assert_eq!(quiet.next_boundary(), None);
        assert!((quiet.wait(2.0) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn a_test_without_an_end_never_awaits_bytes_nor_ends() {
        let mut s = Schedule::new(Some(1.0), 0, 0, false);
        assert!(!s.awaits_bytes());
        for k in 1..=5 {
            let b = s.next_boundary().unwrap();
            assert_eq!(b, k as f64);
            assert!(!s.at_boundary(b, b).contains(&Step::Done));
        }
        assert!((s.wait(5.95) - 0.05).abs() < 1e-9);
        assert_eq!(s.wait(7.0), 0.0);
    }
}
