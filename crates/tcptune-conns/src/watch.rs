//! What `tcptune watch` decides between samples, without I/O or a clock: when to stop, which
//! samples become rows of one connection's history and which one its verdict starts from,
//! which destroy events are closed connections worth a line, the record line of each sample,
//! and the text of the detail view and of a closed connection. The binary samples the kernel,
//! keeps the time (passed in here as `Dur` since the watch started) and prints.

use std::collections::VecDeque;
use std::fmt;

use tcptune_kernel::filter::state;
use tcptune_kernel::tcp_info::state_name;
use tcptune_kernel::{DiagSocket, Filter};
use tcptune_model::Dur;

use crate::conn::{Conn, RecordLine};
use tcptune_diagnose::{interval, size, snapshot, verdict, Context, Interval, Sample};

/// When a watch stops: after `count` rounds or once `duration` has passed, whichever comes
/// first (neither: never).
#[derive(Debug, Clone)]
pub struct Stop {
    count: Option<u64>,
    duration: Option<Dur>,
    done: u64,
}

impl Stop {
    /// Stops after `count` rounds or `duration`, whichever comes first.
    pub fn new(count: Option<u64>, duration: Option<Dur>) -> Stop {
        Stop {
            count,
            duration,
            done: 0,
        }
    }

    /// One round is done at `elapsed` since the start: whether to stop now.
    pub fn tick(&mut self, elapsed: Dur) -> bool {
        self.done += 1;
        self.count.is_some_and(|c| self.done >= c) || self.expired(elapsed)
    }

    /// Whether the duration has passed at `elapsed`, whatever the rounds.
    pub fn expired(&self, elapsed: Dur) -> bool {
        self.duration.is_some_and(|d| elapsed >= d)
    }
}

/// The record line of a socket's sample taken at `t`; none without `tcp_info`.
pub fn record_line(
    t: Dur,
    netns: Option<&str>,
    s: &DiagSocket,
    closed: bool,
) -> Option<RecordLine> {
    Some(RecordLine {
        t_s: t,
        netns: netns.map(str::to_string),
        cookie: s.cookie,
        local: s.src,
        remote: s.dst,
        state: state_name(s.state).into(),
        closed,
        sample: Sample {
            at_s: t,
            info: s.info.clone()?,
            skmem: s.skmem,
        },
        congestion: s.congestion,
    })
}

/// The record line of a table row at `t`, from the raw sample the history kept for it.
pub fn row_record(t: Dur, c: &Conn, sample: Sample) -> RecordLine {
    RecordLine {
        t_s: t,
        netns: c.netns.clone(),
        cookie: c.cookie,
        local: c.local,
        remote: c.remote,
        state: c.state.to_string(),
        closed: false,
        sample,
        congestion: c.congestion,
    }
}

/// The filter destroy events are matched with: they arrive in state CLOSE, so the filter's
/// states do not apply to them.
pub fn closed_filter(filter: &Filter) -> Filter {
    let mut f = filter.clone();
    f.states = state::ALL;
    f
}

/// Whether a destroy event is a closed connection the filter wants (a listener, whose remote
/// end is unspecified, is not a connection).
pub fn closed_wanted(filter: &Filter, s: &DiagSocket) -> bool {
    let unconnected = s.dst.port() == 0 && s.dst.ip().is_unspecified();
    !unconnected && filter.matches(s)
}

/// Rows of the detail view's history kept at most.
pub const HISTORY_ROWS: usize = 20;
/// Rows the detail view's verdict covers.
pub const HISTORY_FOR_VERDICT: usize = 10;
/// The shortest time a history row covers: the kernel's chrono counters tick in jiffies, so
/// rows of 1 ms would say nothing.
pub const MIN_ROW_PERIOD: Dur = Dur::from_millis(100);

/// One row of the detail view's history: the interval that ended at `t`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// When the interval ended, since the watch started.
    pub t: Dur,
    /// Figures over the interval.
    pub iv: Interval,
    /// The congestion window at its end, in bytes.
    pub cwnd: Option<u64>,
    /// The peer's advertised window at its end, in bytes.
    pub snd_wnd: Option<u32>,
    /// The smoothed RTT at its end.
    pub rtt: Option<Dur>,
}

/// One connection's history as the detail view shows it: samples at row boundaries (at least
/// a row period apart, oldest first) and the rows between them.
#[derive(Debug, Clone)]
pub struct Detail {
    row_period: Dur,
    marks: VecDeque<Sample>,
    rows: VecDeque<Row>,
}

impl Detail {
    /// A history for samples taken every `interval` (rows cover at least [`MIN_ROW_PERIOD`]).
    pub fn new(interval: Dur) -> Detail {
        Detail {
            row_period: interval.max(MIN_ROW_PERIOD),
            marks: VecDeque::new(),
            rows: VecDeque::new(),
        }
    }

    /// Takes the sample `b` taken at `t`: when a row period has passed since the last mark it
    /// becomes a mark, and the interval since that mark a row.
    pub fn push(&mut self, t: Dur, b: &Sample) {
        let due = self
            .marks
            .back()
            .is_none_or(|m| b.at_s.nanos() - m.at_s.nanos() >= self.row_period.nanos());
        if !due {
            return;
        }
        if let Some(a) = self.marks.back() {
            let snap = snapshot(&b.info);
            self.rows.push_back(Row {
                t,
                iv: interval(a, b),
                cwnd: snap.cwnd_bytes,
                snd_wnd: snap.snd_wnd_bytes,
                rtt: snap.rtt_s,
            });
            if self.rows.len() > HISTORY_ROWS {
                self.rows.pop_front();
            }
        }
        self.marks.push_back(b.clone());
        if self.marks.len() > HISTORY_FOR_VERDICT + 1 {
            self.marks.pop_front();
        }
    }

    /// The sample the verdict of `b` starts from: the oldest mark before it.
    pub fn verdict_base(&self, b: &Sample) -> Option<&Sample> {
        self.marks.front().filter(|m| m.at_s < b.at_s)
    }

    /// The history's rows, oldest first.
    pub fn rows(&self) -> &VecDeque<Row> {
        &self.rows
    }
}

/// The detail view of one connection: its socket, newest sample, verdict and history.
pub struct DetailView<'a> {
    /// The socket as the newest dump or query saw it.
    pub socket: &'a DiagSocket,
    /// The named network namespace (`None`: ours).
    pub netns: Option<&'a str>,
    /// The newest sample.
    pub sample: &'a Sample,
    /// The verdict's text over the history (see [`Detail::verdict_base`]).
    pub verdict: &'a str,
    /// The rows shown under the figures.
    pub history: &'a Detail,
    /// The sampling interval, shown in the header.
    pub every: Dur,
}

fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{:.0}", v * 100.0))
        .unwrap_or_else(|| "-".into())
}

fn opt(v: Option<String>) -> String {
    v.unwrap_or_else(|| "-".into())
}

impl fmt::Display for DetailView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.socket;
        let b = self.sample;
        let i = &b.info;
        let snap = snapshot(i);
        writeln!(
            f,
            "{} → {}  {}  {}{}  every {}",
            s.src,
            s.dst,
            state_name(s.state),
            s.congestion.map(|c| c.to_string()).unwrap_or_default(),
            self.netns
                .map(|n| format!("  netns {n}"))
                .unwrap_or_default(),
            self.every
        )?;
        writeln!(f, "verdict  {}", self.verdict)?;
        writeln!(
            f,
            "now      rtt {} (min {})  cwnd {}  peer wnd {}  our wnd {}  unacked {}  notsent {}",
            opt(snap.rtt_s.map(|d| d.to_string())),
            opt(snap.min_rtt_s.map(|d| d.to_string())),
            opt(snap.cwnd_bytes.map(size)),
            opt(snap.snd_wnd_bytes.map(|w| size(w as u64))),
            opt(snap.rcv_wnd_bytes.map(|w| size(w as u64))),
            opt(i.unacked.map(|u| u.to_string())),
            opt(i.notsent_bytes.map(|n| size(n as u64))),
        )?;
        writeln!(
            f,
            "total    sent {}  acked {}  received {}  retrans {}  delivery {}",
            opt(i.bytes_sent.map(size)),
            opt(i.bytes_acked.map(size)),
            opt(i.bytes_received.map(size)),
            opt(i.total_retrans.map(|r| r.to_string())),
            opt(snap.delivery_rate_bps.map(|r| r.to_string())),
        )?;
        if let Some(m) = b.skmem {
            writeln!(
                f,
                "memory   sndbuf {} queued {}  rcvbuf {} unread {}  drops {}",
                size(m.sndbuf as u64),
                size(m.wmem_queued as u64),
                size(m.rcvbuf as u64),
                size(m.rmem_alloc as u64),
                m.drops.unwrap_or(0)
            )?;
        }
        writeln!(
            f,
            "\n{:>9} {:>13} {:>9} {:>9} {:>9} {:>5} {:>6} {:>5} {:>5}",
            "t", "goodput", "cwnd", "peer wnd", "rtt", "rwnd%", "sndbuf%", "net%", "app%"
        )?;
        for r in self.history.rows() {
            let sh = r.iv.shares;
            writeln!(
                f,
                "{:>9.3} {:>13} {:>9} {:>9} {:>9} {:>5} {:>6} {:>5} {:>5}",
                r.t.secs(),
                opt(r.iv.goodput_bps.map(|g| g.to_string())),
                opt(r.cwnd.map(size)),
                opt(r.snd_wnd.map(|w| size(w as u64))),
                opt(r.rtt.map(|d| d.to_string())),
                pct(sh.map(|s| s.rwnd)),
                pct(sh.map(|s| s.sndbuf)),
                pct(sh.map(|s| s.network)),
                pct(sh.and_then(|s| s.application)),
            )?;
        }
        Ok(())
    }
}

/// Where a table row continues when [`fit`] breaks it: under the LOCAL column, so the
/// continued cells stay aligned with the header's continued names.
pub const TABLE_INDENT: usize = 11;
/// Where a detail view's line continues: under the values after the row names (`now      `).
pub const DETAIL_INDENT: usize = 9;

/// Fits a frame to a terminal `width` columns wide, so the terminal never wraps a line inside
/// a word: a longer line is broken at its last space that fits (a single space is dropped
/// there, so cells that follow keep their padding and stay aligned with the header broken at
/// the same column) and continues on lines indented by `indent`. Only a word longer than a
/// whole line is cut. Widths count characters (`µ` and `→` are one column).
pub fn fit(frame: &str, width: usize, indent: usize) -> String {
    let width = width.max(1);
    // A terminal too narrow for the indent and some words gets no indent.
    let indent = if width > indent + 8 { indent } else { 0 };
    let mut out = String::with_capacity(frame.len() + frame.len() / 8);
    for line in frame.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let mut rest = body;
        let mut prefix = 0;
        loop {
            let room = width - prefix;
            out.extend(std::iter::repeat_n(' ', prefix));
            let Some((cut, _)) = rest.char_indices().nth(room) else {
                out.push_str(rest);
                break;
            };
            // The last space among the first room + 1 characters, if something is before it.
            let head = &rest[..cut + 1];
            let brk = head.rfind(' ').filter(|&i| !rest[..i].trim().is_empty());
            let (shown, next) = match brk {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => rest.split_at(cut),
            };
            out.push_str(shown.trim_end());
            if next.trim().is_empty() {
                break;
            }
            out.push('\n');
            rest = next;
            prefix = indent;
        }
        out.push_str(nl);
    }
    out
}

/// Whether keys typed at a watch ask it to stop (`q` or `Q`, as in `top`).
pub fn quits(keys: &[u8]) -> bool {
    keys.iter().any(|&k| k == b'q' || k == b'Q')
}

/// The line of a connection that closed: its final counters and the verdict they give alone.
pub fn closed_line(l: &RecordLine, ctx: &Context) -> String {
    let i = &l.sample.info;
    let snap = snapshot(i);
    let v = verdict(None, &l.sample, ctx);
    format!(
        "{:>8.3}s closed {} → {}{}  sent {} acked {} received {} retrans {}  rtt {} (min {})  {}",
        l.t_s.secs(),
        l.local,
        l.remote,
        l.netns
            .as_ref()
            .map(|n| format!(" [{n}]"))
            .unwrap_or_default(),
        opt(i.bytes_sent.map(size)),
        opt(i.bytes_acked.map(size)),
        opt(i.bytes_received.map(size)),
        opt(i.total_retrans.map(|r| r.to_string())),
        opt(snap.rtt_s.map(|d| d.to_string())),
        opt(snap.min_rtt_s.map(|d| d.to_string())),
        v.text
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::recorded_sockets as recorded;

    fn sample_at(ms: u64) -> Sample {
        let s = recorded().into_iter().find(|s| s.info.is_some()).unwrap();
        record_line(Dur::from_millis(ms), None, &s, false)
            .unwrap()
            .sample
    }

    /// The words of a text, in order: what fitting must keep.
    fn words(s: &str) -> Vec<&str> {
        s.split_whitespace().collect()
    }

    #[test]
    fn frames_fit_80_columns_without_breaking_words() {
        let rows: Vec<Conn> = recorded()
            .into_iter()
            .map(|s| Conn::new(s, Dur::ZERO, None, &Context::default(), false).0)
            .collect();
        let table = crate::conn::ConnTable {
            connections: rows,
            all: false,
        }
        .to_string();
        assert!(table.lines().any(|l| l.chars().count() > 80));
        let fitted = fit(&table, 80, TABLE_INDENT);
        assert!(fitted.lines().all(|l| l.chars().count() <= 80), "{fitted}");
        assert_eq!(words(&fitted), words(&table));
        // The header and each row break at the same column, so continued cells line up:
        // the continued header starts with the PEER WND column, right-aligned like its cells.
        let header = fitted.lines().nth(1).unwrap();
        assert!(header.starts_with("            PEER WND"), "{header}");
        // A line that fits is unchanged, and a narrow terminal still keeps words whole.
        assert_eq!(fit("a b\nc\n", 80, 4), "a b\nc\n");
        let v = "receiver window: the peer advertises 64 KiB, below the path's BDP";
        let narrow = fit(v, 20, 4);
        assert!(narrow.lines().all(|l| l.chars().count() <= 20), "{narrow}");
        assert!(narrow.lines().skip(1).all(|l| l.starts_with("    ")));
        assert_eq!(words(&narrow), words(v));
        // Only a word longer than a line is cut.
        assert_eq!(fit("abcdefghij", 4, 0), "abcd\nefgh\nij");
    }

    #[test]
    fn q_quits() {
        assert!(quits(b"q"));
        assert!(quits(b"xxQ"));
        assert!(!quits(b""));
        assert!(!quits(b"\x1b[A"));
    }

    #[test]
    fn stop_after_the_count_or_the_duration() {
        let mut by_count = Stop::new(Some(2), None);
        assert!(!by_count.tick(Dur::from_millis(100_000)));
        assert!(by_count.tick(Dur::from_millis(100_000)));
        let mut by_time = Stop::new(None, Some(Dur::from_millis(1000)));
        assert!(!by_time.tick(Dur::from_millis(999)));
        assert!(by_time.tick(Dur::from_millis(1000)));
        let mut never = Stop::new(None, None);
        assert!((0..1000).all(|i| !never.tick(Dur::from_millis(i * 1000))));
        assert!(!never.expired(Dur::from_millis(1 << 30)));
    }

    #[test]
    fn history_rows_are_a_row_period_apart_and_bounded() {
        // Sampled every 10 ms: rows cover 100 ms, so one sample in ten makes a row.
        let mut d = Detail::new(Dur::from_millis(10));
        for k in 0..=50 {
            d.push(Dur::from_millis(k * 10), &sample_at(k * 10));
        }
        let ts: Vec<u64> = d.rows().iter().map(|r| r.t.nanos() / 1_000_000).collect();
        assert_eq!(ts, [100, 200, 300, 400, 500]);
        // Long runs keep the newest HISTORY_ROWS rows, and the verdict starts
        // HISTORY_FOR_VERDICT rows back.
        let mut d = Detail::new(Dur::from_millis(250));
        for k in 0..100 {
            d.push(Dur::from_millis(k * 250), &sample_at(k * 250));
        }
        assert_eq!(d.rows().len(), HISTORY_ROWS);
        assert_eq!(d.rows().back().unwrap().t, Dur::from_millis(99 * 250));
        let newest = sample_at(99 * 250);
        let base = d.verdict_base(&newest).unwrap();
        assert_eq!(
            base.at_s,
            Dur::from_millis((99 - HISTORY_FOR_VERDICT as u64) * 250)
        );
        // A verdict never starts from the sample it judges.
        let mut first = Detail::new(Dur::from_millis(250));
        first.push(Dur::ZERO, &sample_at(0));
        assert!(first.verdict_base(&sample_at(0)).is_none());
    }

    #[test]
    fn listeners_and_unwanted_states_are_not_closed_connections() {
        let socks = recorded();
        let all = closed_filter(&Filter::default());
        assert_eq!(all.states, state::ALL);
        let (listeners, conns): (Vec<_>, Vec<_>) = socks
            .iter()
            .partition(|s| s.dst.port() == 0 && s.dst.ip().is_unspecified());
        assert!(!conns.is_empty());
        assert!(conns.iter().all(|s| closed_wanted(&all, s)));
        assert!(listeners.iter().all(|s| !closed_wanted(&all, s)));
        let mut listener = conns[0].clone();
        listener.dst = "0.0.0.0:0".parse().unwrap();
        assert!(!closed_wanted(&all, &listener));
        let mut none = Filter::default();
        none.states = 0;
        assert!(conns.iter().all(|s| !closed_wanted(&none, s)));
    }

    #[test]
    fn record_lines_carry_the_socket_and_its_sample() {
        let s = recorded().into_iter().find(|s| s.info.is_some()).unwrap();
        let l = record_line(Dur::from_millis(1500), Some("ns1"), &s, true).unwrap();
        assert_eq!((l.local, l.remote, l.cookie), (s.src, s.dst, s.cookie));
        assert_eq!(l.sample.at_s, Dur::from_millis(1500));
        assert!(l.closed);
        assert_eq!(l.netns.as_deref(), Some("ns1"));
        let text = closed_line(&l, &Context::default());
        assert!(text.starts_with("   1.500s closed "), "{text}");
        assert!(text.contains(" [ns1]"), "{text}");
        let bare = DiagSocket { info: None, ..s };
        assert!(record_line(Dur::ZERO, None, &bare, false).is_none());
    }
}
