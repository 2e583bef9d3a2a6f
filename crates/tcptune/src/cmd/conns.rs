//! `tcptune conns`: one dump (or two, `--over`) of the TCP sockets that pass the filter, with
//! figures and a verdict for each. Also the shared plumbing of `watch`: parsing the filter and
//! opening a sock_diag socket per network namespace.

use std::collections::HashSet;
use std::time::Instant;

use anyhow::Context as _;
use tcptune_diagnose::conn::{Conn, ConnTable, History, TextRows};
use tcptune_diagnose::json::{JsonRows, Layout};
use tcptune_diagnose::Context;
use tcptune_kernel::diag::ext;
use tcptune_kernel::tcp_info::{KernelVersion, TailLayout};
use tcptune_kernel::{procs, sys, Diag, Filter, KernelError};
use tcptune_model::Dur;

use crate::cli::{ConnsArgs, SockArgs};
use crate::outcome::Outcome;
use crate::output;

/// A sock_diag socket and the namespace it looks into (`None`: ours).
pub(super) struct Target {
    pub netns: Option<String>,
    pub diag: Diag,
}

pub(super) fn parse_filter(words: &[String]) -> anyhow::Result<Filter> {
    let text = words.join(" ");
    text.parse::<Filter>()
        .with_context(|| format!("bad filter '{text}'"))
}

/// Recorded kernel answers to use instead of the kernel (CLI tests without root): a file of
/// netlink messages as under fixtures/kernel/, and the kernel version it came from.
const REPLAY_ENV: &str = "TCPTUNE_REPLAY_SOCK_DIAG";
const REPLAY_KERNEL_ENV: &str = "TCPTUNE_REPLAY_KERNEL";
/// The largest recording replayed (fixtures are kilobytes; a dump of 100,000 sockets ~60 MB).
const REPLAY_LIMIT: u64 = 64 << 20;

pub(super) fn targets(sock: &SockArgs) -> anyhow::Result<Vec<Target>> {
    if let Some(path) = std::env::var_os(REPLAY_ENV) {
        let rec = tcptune_kernel::file::read_regular_limited(
            std::path::Path::new(&path),
            REPLAY_LIMIT,
            &format!("{REPLAY_ENV} recording"),
        )?;
        let release = std::env::var(REPLAY_KERNEL_ENV).unwrap_or_else(|_| "6.18".into());
        let version = release.parse::<KernelVersion>().ok().with_context(|| {
            format!("{REPLAY_KERNEL_ENV}={release} is not a kernel version such as 6.18")
        })?;
        return Ok(vec![Target {
            netns: sock.netns.clone(),
            diag: Diag::replay(rec, TailLayout::for_kernel(version)),
        }]);
    }
    let mut names: Vec<Option<String>> = Vec::new();
    if sock.all_netns {
        names.push(None);
        names.extend(sys::named_netns().into_iter().map(Some));
    } else {
        names.push(sock.netns.clone());
    }
    let mut out = Vec::new();
    for netns in names {
        match Diag::open_maybe_in(netns.as_deref()) {
            Ok(diag) => out.push(Target { netns, diag }),
            // Listed a moment ago and deleted since: nothing to look at there.
            Err(KernelError::NoSuchNetns(_)) if sock.all_netns => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// This host's CPU use since `before`, for the verdicts of loopback connections (both of whose
/// ends run here).
pub(super) fn host_cpu(
    before: Option<tcptune_kernel::cpustat::CpuTicks>,
) -> Option<tcptune_diagnose::engine::CpuUse> {
    use tcptune_diagnose::engine::{CpuScope, CpuUse, End};
    let (busy, softirq, _) = before?.shares_until(&tcptune_kernel::cpustat::CpuTicks::now()?)?;
    Some(CpuUse {
        end: End::BothEnds,
        scope: CpuScope::Host,
        percent: busy * 100.0,
        cores: 1.0,
        softirq_percent: Some(softirq * 100.0),
        wait_percent: None,
    })
}

pub(super) fn context(sock: &SockArgs) -> Context {
    Context::with_path_rate(sock.rate)
}

/// Highest rate first. The key is computed once per row, and rows move about once (they are
/// large; bench/conns sorts 20,000).
pub(super) fn sort_by_rate(rows: &mut [Conn]) {
    rows.sort_by_cached_key(Conn::sort_key);
}

pub(super) fn since(start: Instant) -> Dur {
    Dur::from(start.elapsed())
}

/// Fills in owning processes (one /proc scan for all rows).
pub(super) fn add_processes(rows: &mut [Conn]) {
    let inodes: HashSet<u32> = rows.iter().map(|c| c.inode).filter(|&i| i != 0).collect();
    let owners = procs::owners(&inodes);
    for c in rows {
        c.process = owners.get(&c.inode).cloned().map(Box::new);
    }
}

/// What to ask the kernel for: every row's evidence, and with `--all` the congestion
/// control's own info too.
fn row_ext(all: bool) -> u8 {
    if all {
        ext::TCPTUNE
    } else {
        ext::ROWS
    }
}

/// One dump of every target, turned into rows with the help of `history`.
pub(super) fn sample_all(
    targets: &mut [Target],
    filter: &Filter,
    history: &mut History,
    start: Instant,
    ctx: &Context,
    all: bool,
) -> anyhow::Result<Vec<Conn>> {
    let mut rows = Vec::new();
    for t in targets.iter_mut() {
        let socks = t
            .diag
            .dump(filter, row_ext(all))
            .with_context(|| match &t.netns {
                Some(n) => format!("dumping sockets in network namespace '{n}'"),
                None => "dumping sockets".to_string(),
            })?;
        let at = since(start);
        rows.extend(history.rows(t.netns.as_deref(), &socks, at, ctx, all));
    }
    Ok(rows)
}

/// One dump of every target, each socket's row handed to `each` as it is decoded (on the
/// decoding thread).
fn once(
    targets: &mut [Target],
    filter: &Filter,
    start: Instant,
    ctx: &Context,
    all: bool,
    mut each: impl FnMut(Conn) + Send,
) -> anyhow::Result<()> {
    for t in targets.iter_mut() {
        let at = since(start);
        let netns = t.netns.clone();
        let each = &mut each;
        t.diag
            .dump_each_parallel(filter, row_ext(all), |s| {
                let (mut c, _) = Conn::new(s, at, None, ctx, all);
                c.netns.clone_from(&netns);
                each(c);
            })
            .with_context(|| dump_context(&t.netns))?;
    }
    Ok(())
}

fn dump_context(netns: &Option<String>) -> String {
    match netns {
        Some(n) => format!("dumping sockets in network namespace '{n}'"),
        None => "dumping sockets".to_string(),
    }
}

pub fn run(args: ConnsArgs, json: bool) -> anyhow::Result<Outcome> {
    let filter = parse_filter(&args.sock.filter)?;
    let mut targets = targets(&args.sock)?;
    let ctx = context(&args.sock);
    let start = Instant::now();
    let mut history = History::default();
    if args.over.is_none() && json && !args.sock.processes {
        // A one-shot JSON table: as the text below, rows are rendered as they are decoded,
        // and only their bytes are kept.
        let mut table = JsonRows::new(json_layout());
        once(&mut targets, &filter, start, &ctx, args.all, |c| {
            table.push(&c)
        })?;
        let (before, after) = output::envelope_around("conns", output::pretty())?;
        output::with_stdout(|out| table.write(before.as_bytes(), after.as_bytes(), out))?;
        return Ok(Outcome::Ok);
    }
    if args.over.is_none() && !json && !args.sock.processes {
        // The common case, a one-shot text table: rows are rendered as they are decoded and
        // only their lines are kept.
        let mut table = TextRows::new(args.all);
        once(&mut targets, &filter, start, &ctx, args.all, |c| {
            table.push(&c)
        })?;
        output::with_stdout(|out| table.write(out))?;
        return Ok(Outcome::Ok);
    }
    let mut rows = match args.over {
        // One sample: no history to keep.
        None => {
            let mut rows = Vec::new();
            once(&mut targets, &filter, start, &ctx, args.all, |c| {
                rows.push(c)
            })?;
            rows
        }
        Some(_) => sample_all(&mut targets, &filter, &mut history, start, &ctx, args.all)?,
    };
    if let Some(over) = args.over {
        let cpu_before = tcptune_kernel::cpustat::CpuTicks::now();
        std::thread::sleep(over.std());
        history.host_cpu = host_cpu(cpu_before);
        rows = sample_all(&mut targets, &filter, &mut history, start, &ctx, args.all)?;
    }
    if args.sock.processes {
        add_processes(&mut rows);
    }
    sort_by_rate(&mut rows);
    if json {
        output::with_stdout(|out| write_json(&rows, json_layout(), out))?;
        // As below: the process ends next.
        std::mem::forget(rows);
        return Ok(Outcome::Ok);
    }
    let table = ConnTable {
        connections: rows,
        all: args.all,
    };
    output::emit("conns", &table, json)?;
    // The process ends next: freeing tens of thousands of rows one by one would only delay
    // the exit (the kernel reclaims the memory wholesale).
    std::mem::forget(table);
    Ok(Outcome::Ok)
}

/// The table's layout inside the `--json` envelope (as its `result`, members two deep).
fn json_layout() -> Layout {
    Layout {
        level: 2,
        pretty: output::pretty(),
    }
}

/// `conns --json`: the envelope around the rows rendered by hand, the same document
/// `output::emit` would print for a `ConnTable` of them (the test below compares the bytes).
fn write_json<'a>(
    rows: impl IntoIterator<Item = &'a Conn>,
    layout: Layout,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let (before, after) =
        output::envelope_around("conns", layout.pretty).map_err(std::io::Error::other)?;
    out.write_all(before.as_bytes())?;
    tcptune_diagnose::json::write_table(rows, layout, out)?;
    out.write_all(after.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcptune_kernel::DiagSocket;

    #[test]
    fn json_by_hand_is_what_emit_prints() {
        let rec = include_bytes!("../../../../fixtures/kernel/6.18/dump-loopback.nl");
        let rows: Vec<Conn> = tcptune_kernel::diag::messages(rec)
            .filter_map(|m| m.ok())
            .filter(|m| m.kind == tcptune_kernel::diag::SOCK_DIAG_BY_FAMILY)
            .map(|m| DiagSocket::decode(m.payload, TailLayout::Linux6_18).unwrap())
            .enumerate()
            .map(|(i, s)| Conn::new(s, Dur::ZERO, None, &Context::default(), i % 2 == 0).0)
            .collect();
        assert!(rows.len() >= 2);
        for rows in [rows.clone(), Vec::new()] {
            let mut sorted = rows.clone();
            sort_by_rate(&mut sorted);
            let table = ConnTable {
                connections: sorted,
                all: false,
            };
            for pretty in [true, false] {
                let layout = Layout { level: 2, pretty };
                let mut by_hand = Vec::new();
                write_json(&table.connections, layout, &mut by_hand).unwrap();
                // Rendered as decoded (unsorted) and written sorted.
                let mut pushed = JsonRows::new(layout);
                for c in &rows {
                    pushed.push(c);
                }
                let (before, after) = output::envelope_around("conns", pretty).unwrap();
                let mut by_rows = Vec::new();
                pushed
                    .write(before.as_bytes(), after.as_bytes(), &mut by_rows)
                    .unwrap();
                // What output::emit writes: the envelope and a newline.
                let envelope = output::Envelope::new("conns", &table);
                let serde = if pretty {
                    serde_json::to_string_pretty(&envelope)
                } else {
                    serde_json::to_string(&envelope)
                }
                .unwrap()
                    + "\n";
                assert_eq!(String::from_utf8(by_hand).unwrap(), serde);
                assert_eq!(String::from_utf8(by_rows).unwrap(), serde);
            }
        }
    }
}
