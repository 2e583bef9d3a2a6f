//! `tcptune watch`: sample connections repeatedly and show them live — a table sorted by
//! throughput, or one connection in detail with its history (polled by exact 4-tuple query,
//! down to 1 ms), or the final statistics of each connection as it closes (destroy events).
//! `--record FILE` appends every sample as a JSON line; `--json` prints those lines instead.
//! The decisions between samples (history rows, the verdict's base, which destroy events are
//! closed connections, when to stop) and the detail view's text are `tcptune_conns::watch`, its
//! dumps `tcptune_conns::dump`; this module keeps the clock and the screen, and prints.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use tcptune_conns::conn::{Conn, ConnTable, History, RecordLine};
use tcptune_conns::dump::{
    add_processes, host_cpu, parse_filter, sample_all, since, sort_by_rate, targets, Target,
};
use tcptune_conns::watch::{
    closed_filter, closed_line, closed_wanted, fit, quits, record_line, row_record, Detail,
    DetailView, Stop, DETAIL_INDENT, TABLE_INDENT,
};
use tcptune_diagnose::{verdict, Context, Sample};
use tcptune_kernel::diag::ext;
use tcptune_kernel::DiagSocket;
use tcptune_model::Dur;
use tcptune_os::process::Signal;

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

/// The terminal a live view draws on: whether stdout is one, its width, and key-at-a-time
/// input from stdin while the view runs (so `q` quits; the terminal's settings come back when
/// this drops, and on Ctrl-C, which ends the loop rather than the process).
struct Screen {
    tty: bool,
    keys: Option<tcptune_os::tty::KeyInput>,
}

impl Screen {
    fn open() -> Screen {
        let tty = std::io::stdout().is_terminal();
        let stdin = std::io::stdin();
        // Keys only when both ends are the terminal: `watch < file` or a pipe reads nothing.
        let keys = (tty && stdin.is_terminal())
            .then(|| tcptune_os::tty::key_input(stdin.as_fd()).ok())
            .flatten();
        if keys.is_some() {
            tcptune_os::signal::catch(&[Signal::Int, Signal::Term]);
        }
        Screen { tty, keys }
    }

    /// Writes one frame (cleared screen first on a terminal), fitted to the terminal's width
    /// so no line wraps inside a word; one write, so the terminal never shows half a frame.
    fn draw(&self, text: &str, indent: usize) {
        let out = std::io::stdout();
        let text = match tcptune_os::tty::columns(out.as_fd()).filter(|_| self.tty) {
            Some(w) => fit(text, w as usize, indent),
            None => text.to_string(),
        };
        let frame = format!("{}{text}", clear_screen(self.tty));
        let mut out = out.lock();
        out.write_all(frame.as_bytes()).ok();
        out.flush().ok();
    }

    /// Waits until the next sample is due (the sampling clock, not a synchronisation), or
    /// until `q` or a stop signal asks to quit: true then.
    fn wait(&mut self, next: &mut Instant, interval: Duration) -> bool {
        *next += interval;
        let now = Instant::now();
        if *next <= now {
            *next = now; // fell behind: do not try to catch up with a burst
            return self.quit_asked();
        }
        if self.keys.is_none() {
            std::thread::sleep(*next - now);
            return false;
        }
        loop {
            let now = Instant::now();
            if *next <= now {
                return false;
            }
            let stdin = std::io::stdin();
            let ready =
                tcptune_os::poll::wait_readable(stdin.as_fd(), *next - now).unwrap_or(false);
            if (ready && self.quit_asked()) || tcptune_os::signal::caught() {
                return true;
            }
        }
    }

    /// Whether keys typed since the last look ask to quit (or a stop signal came).
    fn quit_asked(&mut self) -> bool {
        if self.keys.is_none() {
            return false;
        }
        let mut buf = [0u8; 64];
        // VMIN = 0: a read returns what was typed, or nothing, without blocking.
        let n = std::io::stdin().lock().read(&mut buf).unwrap_or(0);
        quits(&buf[..n]) || tcptune_os::signal::caught()
    }
}

pub fn run(args: WatchArgs, json: bool) -> anyhow::Result<Outcome> {
    if let Some(addr) = super::web::address(args.web.web, &args.web.access)? {
        return super::web::watch(&args, addr, json);
    }
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
    let targets = targets(args.sock.netns.as_deref(), args.sock.all_netns)?;
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
    let ctx = Context::with_path_rate(args.sock.rate);
    let start = Instant::now();
    let mut stop = Stop::new(args.count, args.duration);
    let mut history = History::default();
    let mut screen = Screen::open();
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
                    sink.write(&row_record(t, c, s))?;
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
            let frame = format!(
                "tcptune watch  t={:.1}s  {} connections (top {} by rate, every {})\n{}",
                t.secs(),
                total,
                rows.len(),
                args.interval,
                ConnTable {
                    connections: rows,
                    all: false,
                }
            );
            screen.draw(&frame, TABLE_INDENT);
        }
        if stop.tick(since(start)) || screen.wait(&mut next, args.interval.std()) {
            return Ok(Outcome::Ok);
        }
    }
}

fn history_sample(h: &History, c: &Conn) -> Option<Sample> {
    h.get(c.netns.as_deref(), c.cookie).cloned()
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
    let ctx = Context::with_path_rate(args.sock.rate);
    let start = Instant::now();
    let mut stop = Stop::new(args.count, args.duration);
    let mut screen = Screen::open();
    let mut history = Detail::new(args.interval);
    let mut last_draw: Option<Instant> = None;
    let mut next = Instant::now();
    let mut current = first;
    loop {
        let t = since(start);
        if let Some(line) = record_line(t, netns.as_deref(), &current, false) {
            sink.write(&line)?;
            let b = line.sample;
            history.push(t, &b);
            // Redraw at most 20 times a second however fast we sample.
            let redraw = last_draw.is_none_or(|d| d.elapsed() >= Duration::from_millis(50));
            if redraw && !sink.json {
                let v = verdict(history.verdict_base(&b), &b, &ctx);
                let view = DetailView {
                    socket: &current,
                    netns: netns.as_deref(),
                    sample: &b,
                    verdict: &v.text,
                    history: &history,
                    every: args.interval,
                };
                screen.draw(&view.to_string(), DETAIL_INDENT);
                last_draw = Some(Instant::now());
            }
        }
        sink.flush()?;
        if stop.tick(since(start)) || screen.wait(&mut next, args.interval.std()) {
            return Ok(Outcome::Ok);
        }
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

fn closed(
    args: &WatchArgs,
    targets: Vec<Target>,
    filter: &tcptune_kernel::Filter,
    sink: &mut Sink,
) -> anyhow::Result<Outcome> {
    let filter = closed_filter(filter);
    let mut subs = Vec::new();
    for t in &targets {
        // A replayed sock_diag recording stands in for the kernel here too.
        subs.push((t.netns.clone(), t.diag.destroy_events(t.netns.as_deref())?));
    }
    drop(targets);
    eprintln!("watching for closing connections (Ctrl-C to stop)");
    let ctx = Context::with_path_rate(args.sock.rate);
    let start = Instant::now();
    let mut stop = Stop::new(args.count, args.duration);
    let slice = Duration::from_millis(100) / subs.len().max(1) as u32;
    loop {
        for (netns, sub) in subs.iter_mut() {
            for s in sub.next(slice)? {
                if !closed_wanted(&filter, &s) {
                    continue;
                }
                let t = since(start);
                if let Some(line) = record_line(t, netns.as_deref(), &s, true) {
                    sink.write(&line)?;
                    if !sink.json {
                        println!("{}", closed_line(&line, &ctx));
                    }
                }
                sink.flush()?;
                if stop.tick(since(start)) {
                    return Ok(Outcome::Ok);
                }
            }
        }
        if stop.expired(since(start)) || subs.iter().all(|(_, s)| s.finished()) {
            return Ok(Outcome::Ok);
        }
    }
}
