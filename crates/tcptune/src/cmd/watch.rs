//! `tcptune watch`: sample connections repeatedly and show them live — a table sorted by
//! throughput, or one connection in detail with its history (polled by exact 4-tuple query,
//! down to 1 ms), or the final statistics of each connection as it closes (destroy events).
//! `--record FILE` appends every sample as a JSON line; `--json` prints those lines instead.

use std::collections::{HashSet, VecDeque};
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use tcptune_diagnose::conn::{Conn, ConnTable, History, RecordLine};
use tcptune_diagnose::{interval, size, snapshot, verdict, Interval, Sample};
use tcptune_kernel::diag::ext;
use tcptune_kernel::filter::state;
use tcptune_kernel::tcp_info::state_name;
use tcptune_kernel::DiagSocket;
use tcptune_model::Dur;

use super::conns::{
    add_processes, context, host_cpu, parse_filter, sample_all, since, sort_by_rate, targets,
    Target,
};
use crate::cli::WatchArgs;
use crate::outcome::Outcome;

/// Where samples go besides the screen.
struct Sink {
    record: Option<BufWriter<File>>,
    json: bool,
}

impl Sink {
    fn write(&mut self, line: &RecordLine) -> anyhow::Result<()> {
        if let Some(w) = &mut self.record {
            serde_json::to_writer(&mut *w, line)?;
            w.write_all(b"\n")?;
        }
        if self.json {
            let mut out = std::io::stdout().lock();
            serde_json::to_writer(&mut out, line)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }
    fn flush(&mut self) -> anyhow::Result<()> {
        if let Some(w) = &mut self.record {
            w.flush()?;
        }
        if self.json {
            std::io::stdout().flush()?;
        }
        Ok(())
    }
}

fn record_line(t: Dur, netns: Option<&str>, s: &DiagSocket, closed: bool) -> Option<RecordLine> {
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

/// When to stop: after `count` rounds or `duration`, whichever comes first.
struct Stop {
    count: Option<u64>,
    until: Option<Instant>,
    done: u64,
}

impl Stop {
    fn new(args: &WatchArgs, start: Instant) -> Stop {
        Stop {
            count: args.count,
            until: args.duration.map(|d| start + d.std()),
            done: 0,
        }
    }
    fn tick(&mut self) -> bool {
        self.done += 1;
        self.count.is_some_and(|c| self.done >= c)
            || self.until.is_some_and(|u| Instant::now() >= u)
    }
}

/// Sleeps until the next sample is due (the sampling clock, not a synchronisation).
fn wait_until(next: &mut Instant, interval: Duration) {
    *next += interval;
    let now = Instant::now();
    if *next > now {
        std::thread::sleep(*next - now);
    } else {
        *next = now; // fell behind: do not try to catch up with a burst
    }
}

pub fn run(args: WatchArgs, json: bool) -> anyhow::Result<Outcome> {
    let filter = parse_filter(&args.sock.filter)?;
    let detail = args.detail || args.cookie.is_some();
    if args.sock.processes && (detail || args.closed || json) {
        bail!(
            "-p adds owners to the live table; --detail, --closed and --json do not show them, so leave out -p"
        );
    }
    if args.interval < Dur::from_millis(1) {
        bail!(
            "--interval {} is too short; the shortest is 1ms",
            args.interval
        );
    }
    if !detail && !args.closed && args.interval < Dur::from_millis(10) {
        bail!(
            "--interval {} is for one connection; add --detail (with a filter matching one connection) or use 10ms or more",
            args.interval
        );
    }
    let targets = targets(&args.sock)?;
    let record = match &args.record {
        Some(p) => Some(BufWriter::new(File::create(p).with_context(|| {
            format!("cannot create the record file {}", p.display())
        })?)),
        None => None,
    };
    let mut sink = Sink { record, json };
    if args.closed {
        closed(&args, targets, &filter, &mut sink)
    } else if detail {
        one(&args, targets, &filter, &mut sink)
    } else {
        table(&args, targets, &filter, &mut sink)
    }
}

fn clear_screen(tty: bool) -> &'static str {
    if tty {
        "\x1b[H\x1b[2J"
    } else {
        "\n"
    }
}

fn table(
    args: &WatchArgs,
    mut targets: Vec<Target>,
    filter: &tcptune_kernel::Filter,
    sink: &mut Sink,
) -> anyhow::Result<Outcome> {
    let ctx = context(&args.sock);
    let start = Instant::now();
    let mut stop = Stop::new(args, start);
    let mut history = History::default();
    let tty = std::io::stdout().is_terminal();
    let mut next = Instant::now();
    let mut cpu_before = tcptune_kernel::cpustat::CpuTicks::now();
    loop {
        let cpu_now = tcptune_kernel::cpustat::CpuTicks::now();
        history.host_cpu = host_cpu(cpu_before);
        cpu_before = cpu_now;
        let mut rows = sample_all(&mut targets, filter, &mut history, start, &ctx, false)?;
        let t = since(start);
        // Records need the raw sample; rebuild them from the history rows' tcp_info.
        if sink.record.is_some() || sink.json {
            for c in &rows {
                if let Some(s) = history_sample(&history, c) {
                    sink.write(&RecordLine {
                        t_s: t,
                        netns: c.netns.clone(),
                        cookie: c.cookie,
                        local: c.local,
                        remote: c.remote,
                        state: c.state.to_string(),
                        closed: false,
                        sample: s,
                        congestion: c.congestion,
                    })?;
                }
            }
            sink.flush()?;
        }
        let seen: HashSet<_> = rows.iter().map(|c| (c.netns.clone(), c.cookie)).collect();
        history.retain(&seen);
        if !sink.json {
            if args.sock.processes {
                add_processes(&mut rows);
            }
            sort_by_rate(&mut rows);
            let total = rows.len();
            rows.truncate(args.top);
            // One write per frame, so the terminal never shows a half-drawn table.
            let frame = format!(
                "{}tcptune watch  t={:.1}s  {} connections (top {} by rate, every {})\n{}",
                clear_screen(tty),
                t.secs(),
                total,
                rows.len(),
                args.interval,
                ConnTable {
                    connections: rows,
                    all: false,
                }
            );
            let mut out = std::io::stdout().lock();
            out.write_all(frame.as_bytes()).ok();
            out.flush().ok();
        }
        if stop.tick() {
            return Ok(Outcome::Ok);
        }
        wait_until(&mut next, args.interval.std());
    }
}

fn history_sample(h: &History, c: &Conn) -> Option<Sample> {
    h.get(c.netns.as_deref(), c.cookie).cloned()
}

/// One row of the detail view's history.
struct Row {
    t: Dur,
    iv: Interval,
    cwnd: Option<u64>,
    snd_wnd: Option<u32>,
    rtt: Option<Dur>,
}

fn one(
    args: &WatchArgs,
    mut targets: Vec<Target>,
    filter: &tcptune_kernel::Filter,
    sink: &mut Sink,
) -> anyhow::Result<Outcome> {
    if targets.len() != 1 {
        bail!("--detail watches one connection; give --netns NAME instead of --all-netns");
    }
    let Target { netns, mut diag } = targets.remove(0);
    let socks = diag.dump(filter, ext::TCPTUNE)?;
    let chosen: Vec<&DiagSocket> = socks
        .iter()
        .filter(|s| args.cookie.is_none_or(|c| s.cookie == c))
        .collect();
    let first = match chosen.as_slice() {
        [one] => (*one).clone(),
        [] => bail!("no connection matches the filter{}; `tcptune conns --all` lists them with their cookies", args.cookie.map(|c| format!(" and cookie {c}")).unwrap_or_default()),
        many => bail!("the filter matches {} connections; narrow it (e.g. dport/sport) or pick one with --cookie", many.len()),
    };
    let ctx = context(&args.sock);
    let start = Instant::now();
    let mut stop = Stop::new(args, start);
    let tty = std::io::stdout().is_terminal();
    // History rows cover at least 100 ms each (the kernel's chrono counters tick in jiffies,
    // so 1 ms rows would say nothing); the verdict covers the last HISTORY_FOR_VERDICT rows.
    let row_period = args.interval.max(Dur::from_millis(100));
    const HISTORY_ROWS: usize = 20;
    const HISTORY_FOR_VERDICT: usize = 10;
    // Samples at row boundaries, oldest first.
    let mut marks: VecDeque<Sample> = VecDeque::new();
    let mut rows: VecDeque<Row> = VecDeque::new();
    let mut last_draw: Option<Instant> = None;
    let mut next = Instant::now();
    let mut current = first;
    loop {
        let t = since(start);
        if let Some(line) = record_line(t, netns.as_deref(), &current, false) {
            sink.write(&line)?;
            let b = line.sample;
            let due = marks
                .back()
                .is_none_or(|m| b.at_s.nanos() - m.at_s.nanos() >= row_period.nanos());
            if due {
                if let Some(a) = marks.back() {
                    let snap = snapshot(&b.info);
                    rows.push_back(Row {
                        t,
                        iv: interval(a, &b),
                        cwnd: snap.cwnd_bytes,
                        snd_wnd: snap.snd_wnd_bytes,
                        rtt: snap.rtt_s,
                    });
                    if rows.len() > HISTORY_ROWS {
                        rows.pop_front();
                    }
                }
                marks.push_back(b.clone());
                if marks.len() > HISTORY_FOR_VERDICT + 1 {
                    marks.pop_front();
                }
            }
            // Redraw at most 20 times a second however fast we sample.
            let redraw = last_draw.is_none_or(|d| d.elapsed() >= Duration::from_millis(50));
            if redraw && !sink.json {
                let base = marks.front().filter(|m| m.at_s < b.at_s);
                let v = verdict(base, &b, &ctx);
                draw_detail(
                    tty,
                    &current,
                    netns.as_deref(),
                    &b,
                    &v.text,
                    &rows,
                    args.interval,
                );
                last_draw = Some(Instant::now());
            }
        }
        sink.flush()?;
        if stop.tick() {
            return Ok(Outcome::Ok);
        }
        wait_until(&mut next, args.interval.std());
        match diag.query(current.src, current.dst, ext::TCPTUNE)? {
            Some(s) if s.cookie == current.cookie => current = s,
            _ => {
                if !sink.json {
                    println!("connection {} → {} closed", current.src, current.dst);
                }
                return Ok(Outcome::Ok);
            }
        }
    }
}

fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{:.0}", v * 100.0))
        .unwrap_or_else(|| "-".into())
}

fn draw_detail(
    tty: bool,
    s: &DiagSocket,
    netns: Option<&str>,
    b: &Sample,
    verdict: &str,
    rows: &VecDeque<Row>,
    every: Dur,
) {
    let i = &b.info;
    let snap = snapshot(i);
    let mut o = String::new();
    o += clear_screen(tty);
    o += &format!(
        "{} → {}  {}  {}{}  every {}\n",
        s.src,
        s.dst,
        state_name(s.state),
        s.congestion.map(|c| c.to_string()).unwrap_or_default(),
        netns.map(|n| format!("  netns {n}")).unwrap_or_default(),
        every
    );
    o += &format!("verdict  {verdict}\n");
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    o += &format!(
        "now      rtt {} (min {})  cwnd {}  peer wnd {}  our wnd {}  unacked {}  notsent {}\n",
        opt(snap.rtt_s.map(|d| d.to_string())),
        opt(snap.min_rtt_s.map(|d| d.to_string())),
        opt(snap.cwnd_bytes.map(size)),
        opt(snap.snd_wnd_bytes.map(|w| size(w as u64))),
        opt(snap.rcv_wnd_bytes.map(|w| size(w as u64))),
        opt(i.unacked.map(|u| u.to_string())),
        opt(i.notsent_bytes.map(|n| size(n as u64))),
    );
    o += &format!(
        "total    sent {}  acked {}  received {}  retrans {}  delivery {}\n",
        opt(i.bytes_sent.map(size)),
        opt(i.bytes_acked.map(size)),
        opt(i.bytes_received.map(size)),
        opt(i.total_retrans.map(|r| r.to_string())),
        opt(snap.delivery_rate_bps.map(|r| r.to_string())),
    );
    if let Some(m) = b.skmem {
        o += &format!(
            "memory   sndbuf {} queued {}  rcvbuf {} unread {}  drops {}\n",
            size(m.sndbuf as u64),
            size(m.wmem_queued as u64),
            size(m.rcvbuf as u64),
            size(m.rmem_alloc as u64),
            m.drops.unwrap_or(0)
        );
    }
    o += &format!(
        "\n{:>9} {:>13} {:>9} {:>9} {:>9} {:>5} {:>6} {:>5} {:>5}\n",
        "t", "goodput", "cwnd", "peer wnd", "rtt", "rwnd%", "sndbuf%", "net%", "app%"
    );
    for r in rows {
        let sh = r.iv.shares;
        o += &format!(
            "{:>9.3} {:>13} {:>9} {:>9} {:>9} {:>5} {:>6} {:>5} {:>5}\n",
            r.t.secs(),
            opt(r.iv.goodput_bps.map(|g| g.to_string())),
            opt(r.cwnd.map(size)),
            opt(r.snd_wnd.map(|w| size(w as u64))),
            opt(r.rtt.map(|d| d.to_string())),
            pct(sh.map(|s| s.rwnd)),
            pct(sh.map(|s| s.sndbuf)),
            pct(sh.map(|s| s.network)),
            pct(sh.and_then(|s| s.application)),
        );
    }
    let mut out = std::io::stdout().lock();
    out.write_all(o.as_bytes()).ok();
    out.flush().ok();
}

fn closed(
    args: &WatchArgs,
    targets: Vec<Target>,
    filter: &tcptune_kernel::Filter,
    sink: &mut Sink,
) -> anyhow::Result<Outcome> {
    // Destroy events arrive in state CLOSE: the filter's states do not apply to them.
    let mut filter = filter.clone();
    filter.states = state::ALL;
    let mut subs = Vec::new();
    for t in &targets {
        // A replayed sock_diag recording stands in for the kernel here too.
        subs.push((t.netns.clone(), t.diag.destroy_events(t.netns.as_deref())?));
    }
    drop(targets);
    eprintln!("watching for closing connections (Ctrl-C to stop)");
    let ctx = context(&args.sock);
    let start = Instant::now();
    let mut stop = Stop::new(args, start);
    let slice = Duration::from_millis(100) / subs.len().max(1) as u32;
    loop {
        for (netns, sub) in subs.iter_mut() {
            for s in sub.next(slice)? {
                let unconnected = s.dst.port() == 0 && s.dst.ip().is_unspecified();
                if unconnected || !filter.matches(&s) {
                    continue; // a listener, or not wanted
                }
                let t = since(start);
                if let Some(line) = record_line(t, netns.as_deref(), &s, true) {
                    sink.write(&line)?;
                    if !sink.json {
                        println!("{}", closed_line(&line, &ctx));
                    }
                }
                sink.flush()?;
                if stop.tick() {
                    return Ok(Outcome::Ok);
                }
            }
        }
        if stop.until.is_some_and(|u| Instant::now() >= u) || subs.iter().all(|(_, s)| s.finished())
        {
            return Ok(Outcome::Ok);
        }
    }
}

fn closed_line(l: &RecordLine, ctx: &tcptune_diagnose::Context) -> String {
    let i = &l.sample.info;
    let snap = snapshot(i);
    let v = verdict(None, &l.sample, ctx);
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
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
