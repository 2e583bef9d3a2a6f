//! `tcptune conns`: one dump (or two, `--over`) of the TCP sockets that pass the filter, with
//! figures and a verdict for each (the dumps, rows and their rendering are `tcptune_conns`).

use std::time::Instant;

use tcptune_conns::conn::{Conn, ConnTable, History, TextRows};
use tcptune_conns::dump::{
    add_processes, host_cpu, once, parse_filter, sample_all, sort_by_rate, targets,
};
use tcptune_conns::json::{JsonRows, Layout};
use tcptune_diagnose::Context;

use crate::cli::ConnsArgs;
use crate::outcome::Outcome;
use crate::output;

pub fn run(args: ConnsArgs, json: bool) -> anyhow::Result<Outcome> {
    let filter = parse_filter(&args.sock.filter)?;
    let mut targets = targets(args.sock.netns.as_deref(), args.sock.all_netns)?;
    let ctx = Context::with_path_rate(args.sock.rate);
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
    tcptune_conns::json::write_table(rows, layout, out)?;
    out.write_all(after.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcptune_kernel::tcp_info::TailLayout;
    use tcptune_kernel::DiagSocket;
    use tcptune_model::Dur;

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
